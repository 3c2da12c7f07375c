/**
 * Catches mistyped settings: an environment variable that starts with `DYN_`, is not a known
 * setting, and is within a small edit distance of one that is, e.g. `DYN_ENGINE_REQUEST_LIMT`
 * (which would otherwise start the sidecar silently with admission off).
 *
 *   for (const t of findEnvTypos(process.env, knownNames)) warn(describeEnvTypo(t));
 *
 * Distance: optimal string alignment (Levenshtein plus adjacent transpositions, each edit 1),
 * at most 2, and less than a third of the length after `DYN_` so short names do not match
 * everything. Also a known name that is the unknown one plus its unit (`DYN_X_TIMEOUT` for
 * `DYN_X_TIMEOUT_MS`): the commonest slip with our `_MS` settings.
 * Unknown `DYN_` names far from every known one are left alone: other Dynamo components share
 * the prefix (e.g. DYN_LOG), and warning about each of them would teach people to ignore warnings.
 */
export const MAX_TYPO_DISTANCE = 2;
const UNIT_SUFFIXES = ['_MS'];

export interface EnvTypo {
  /** The variable as set. */
  readonly name: string;
  /** The known setting it most likely meant. */
  readonly suggestion: string;
  readonly distance: number;
}

/** Unknown `DYN_*` variables close to a known name, sorted by name; empty values count as unset. */
export function findEnvTypos(env: Readonly<Record<string, string | undefined>>, known: Iterable<string>): EnvTypo[] {
  const knownNames = [...new Set(known)];
  const knownSet = new Set(knownNames);
  const typos: EnvTypo[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('DYN_') || knownSet.has(name) || value === undefined || value.trim() === '') continue;
    const withUnit = knownNames.find((k) => UNIT_SUFFIXES.some((unit) => k === name + unit));
    if (withUnit) {
      typos.push({ name, suggestion: withUnit, distance: withUnit.length - name.length });
      continue;
    }
    const best = closest(name, knownNames);
    if (best && best.distance <= MAX_TYPO_DISTANCE && best.distance * 3 < name.length - 'DYN_'.length)
      typos.push({ name, suggestion: best.name, distance: best.distance });
  }
  return typos.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export function describeEnvTypo(typo: EnvTypo): string {
  return `${typo.name} is not a known setting; did you mean ${typo.suggestion}?`;
}

function closest(name: string, known: readonly string[]): { name: string; distance: number } | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    // Names differing in length by more than the bound cannot be within it.
    if (Math.abs(candidate.length - name.length) > MAX_TYPO_DISTANCE) continue;
    const distance = editDistance(name, candidate);
    if (!best || distance < best.distance) best = { name: candidate, distance };
  }
  return best;
}

/** Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}
