/**
 * A small `kustomize build` for deploy/kubernetes, so the manifests can be tested on any machine:
 * the kubectl that Debian packages (1.20, kustomize 2.0) refuses today's kustomization files
 * (directories in `resources`, `patches`, `components`). It does what those files use, and
 * refuses anything else, so a new kustomize feature in them fails here until it is added:
 *
 *   - `resources`: YAML files (every document) and directories (built recursively);
 *   - `components`: directories of `kind: Component`, applied in order to what is built so far;
 *   - `patches`: `path:` files holding one strategic-merge patch, applied to the object of the
 *     same kind and name: maps merge, `null` deletes a key, lists of containers, env, volumes,
 *     volume mounts and ports merge by their key (`$patch: delete` removes an element), other
 *     lists are replaced.
 *
 * When a kubectl with kustomize 4 or newer is on the PATH, the tests also compare this with
 * `kubectl kustomize` (kustomizeVersion below).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

export type KubeObject = Record<string, unknown> & { apiVersion: string; kind: string; metadata: { name: string } };

const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  ports: 'containerPort',
};
const KNOWN_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'components', 'patches']);

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonMap = { [key: string]: Json };

const isMap = (value: unknown): value is JsonMap => typeof value === 'object' && value !== null && !Array.isArray(value);

interface Kustomization {
  kind: string;
  resources: string[];
  components: string[];
  patches: { path: string }[];
}

function readKustomization(dir: string): Kustomization {
  const file = join(dir, 'kustomization.yaml');
  const raw: unknown = parse(readFileSync(file, 'utf8'));
  if (!isMap(raw)) throw new Error(`${file}: not a map`);
  for (const key of Object.keys(raw)) if (!KNOWN_FIELDS.has(key)) throw new Error(`${file}: field ${key} is not handled by the test's kustomize`);
  const list = (key: string): Json[] => {
    const value = raw[key] ?? [];
    if (!Array.isArray(value)) throw new Error(`${file}: ${key} is not a list`);
    return value;
  };
  const patches = list('patches').map((p) => {
    if (!isMap(p) || typeof p['path'] !== 'string' || Object.keys(p).length !== 1) throw new Error(`${file}: only { path } patches are handled`);
    return { path: p['path'] };
  });
  const kind = raw['kind'] ?? 'Kustomization';
  if (typeof kind !== 'string') throw new Error(`${file}: kind is not a string`);
  const paths = (key: string): string[] =>
    list(key).map((entry) => {
      if (typeof entry !== 'string') throw new Error(`${file}: ${key} holds a non-path`);
      return entry;
    });
  return { kind, resources: paths('resources'), components: paths('components'), patches };
}

function readObjects(file: string): KubeObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((doc) => doc.toJS() as unknown)
    .filter((value): value is KubeObject => value !== null && value !== undefined)
    .map((value) => {
      if (!isMap(value) || typeof value['kind'] !== 'string' || !isMap(value['metadata'])) throw new Error(`${file}: a document is not a Kubernetes object`);
      return value;
    });
}

/** The objects `kustomize build dir` gives (order aside). */
export function kustomizeBuild(dir: string): KubeObject[] {
  const k = readKustomization(dir);
  if (k.kind !== 'Kustomization') throw new Error(`${dir}: kind ${k.kind}, want Kustomization`);
  return applyLayer(dir, k, []);
}

function applyLayer(dir: string, k: Kustomization, before: KubeObject[]): KubeObject[] {
  let objects = [...before];
  for (const resource of k.resources) {
    const path = join(dir, resource);
    objects.push(...(statSync(path).isDirectory() ? kustomizeBuild(path) : readObjects(path)));
  }
  for (const component of k.components) {
    const path = join(dir, component);
    const ck = readKustomization(path);
    if (ck.kind !== 'Component') throw new Error(`${path}: kind ${ck.kind}, want Component`);
    objects = applyLayer(path, ck, objects);
  }
  for (const { path } of k.patches) {
    const [patch, ...more] = readObjects(join(dir, path));
    if (!patch || more.length > 0) throw new Error(`${join(dir, path)}: want exactly one strategic-merge patch`);
    const targets = objects.filter((o) => o.kind === patch.kind && o.metadata.name === patch.metadata.name);
    if (targets.length !== 1) throw new Error(`${join(dir, path)}: ${targets.length} objects ${patch.kind}/${patch.metadata.name} to patch`);
    objects = objects.map((o) => (o === targets[0] ? (mergePatch(o as JsonMap, patch as JsonMap) as KubeObject) : o));
  }
  return objects;
}

function withoutDirectives(value: Json): Json {
  if (Array.isArray(value)) return value.filter((v) => !(isMap(v) && v['$patch'] !== undefined && Object.keys(v).length === 1)).map(withoutDirectives);
  if (isMap(value)) return Object.fromEntries(Object.entries(value).filter(([k]) => k !== '$patch').map(([k, v]) => [k, withoutDirectives(v)]));
  return value;
}

function mergePatch(base: JsonMap, patch: JsonMap): JsonMap {
  const out: JsonMap = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    if (key === '$patch') throw new Error(`$patch: ${JSON.stringify(value)} on a map is not handled by the test's kustomize`);
    if (value === null) delete out[key];
    else out[key] = mergeValue(key, base[key], value);
  }
  return out;
}

function mergeValue(key: string, base: Json | undefined, patch: Json): Json {
  if (isMap(patch)) return isMap(base) ? mergePatch(base, patch) : withoutDirectives(patch);
  const mergeKey = MERGE_KEYS[key];
  if (!Array.isArray(patch) || !Array.isArray(base) || mergeKey === undefined) return withoutDirectives(patch);
  const out = [...base];
  for (const element of patch) {
    if (!isMap(element) || element[mergeKey] === undefined) throw new Error(`${key}: a patch element without ${mergeKey}`);
    const at = out.findIndex((b) => isMap(b) && b[mergeKey] === element[mergeKey]);
    if (element['$patch'] === 'delete') {
      if (at >= 0) out.splice(at, 1);
    } else if (at >= 0) {
      out[at] = mergePatch(out[at] as JsonMap, element);
    } else {
      out.push(withoutDirectives(element));
    }
  }
  return out;
}

/** Major version of the kustomize inside the kubectl on the PATH, or undefined without one. */
export function kustomizeVersion(): number | undefined {
  const result = spawnSync('kubectl', ['version', '--client', '-o', 'json'], { encoding: 'utf8', timeout: 10_000 });
  if (result.status !== 0) return undefined;
  try {
    const version = (JSON.parse(result.stdout) as { kustomizeVersion?: string }).kustomizeVersion;
    const major = /^v(\d+)/.exec(version ?? '')?.[1];
    return major === undefined ? undefined : Number(major);
  } catch {
    return undefined;
  }
}

/** `kubectl kustomize dir`, parsed. */
export function kubectlKustomize(dir: string): KubeObject[] {
  const result = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 30_000 });
  if (result.status !== 0) throw new Error(`kubectl kustomize ${dir}: ${result.stderr}`);
  return parseAllDocuments(result.stdout).map((doc) => doc.toJS() as KubeObject);
}

/** The same objects in one order, with lists that merge by key sorted by it (kustomize puts merged elements first). */
export function normalized(objects: readonly KubeObject[]): Json[] {
  const sortLists = (value: Json, key?: string): Json => {
    if (Array.isArray(value)) {
      const items = value.map((v) => sortLists(v));
      const mergeKey = key === undefined ? undefined : MERGE_KEYS[key];
      if (mergeKey === undefined) return items;
      const keyOf = (item: Json): string => JSON.stringify(isMap(item) ? (item[mergeKey] ?? null) : null);
      return items.sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
    }
    if (isMap(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, sortLists(v, k)]));
    return value;
  };
  return [...objects]
    .sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`))
    .map((o) => sortLists(o as unknown as Json));
}
