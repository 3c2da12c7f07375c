// README's engine protocol table, row by row against the code: the wire exists, its accounted
// RPCs and load RPC are the ones the sidecar uses, and "capacity learned" names exactly the
// facts its questions can tell (read from a full answer of each).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { factQuestions, type EngineFacts } from '../../../../src/protocol/engine/engine-facts.js';
import { ENGINE_PATHS, GENERATE_WIRES, type GenerateWire } from '../../../../src/protocol/engine/generate-wire.js';
import { bytes, msg, num, str } from '../../../support/proto-bytes.js';

function readmeRows(): string[][] {
  const section =
    readFileSync(new URL('../../../../README.md', import.meta.url), 'utf8')
      .split('\n## Engines\n')[1]
      ?.split('\n## ')[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| engine protocol'))
    .map((line) =>
      line
        .slice(1, -1)
        .split('|')
        .map((cell) => cell.trim()),
    );
}

/** Every answer a protocol's questions get, with every field set (hand-encoded from the upstream numbers). */
const FULL_ANSWERS: Readonly<Record<string, Buffer>> = {
  GetModelInfo: msg(str(1, '/m'), num(3, 4096), str(6, 'm')),
  GetLoads: msg(num(3, 2), bytes(4, num(11, 8)), bytes(4, [...num(1, 1), ...num(11, 8)])),
  'Control/GetServerInfo': msg(bytes(4, [...num(3, 2), ...num(4, 0)]), num(5, 4096), num(6, 16), num(7, 200), num(8, 8), num(9, 2048)),
  'Control/GetModelInfo': msg(str(1, 'm'), str(2, 'm')),
  GetServerInfo: msg(
    str(
      1,
      JSON.stringify({
        served_model_name: 'm',
        page_size: 16,
        max_total_num_tokens: 1600,
        max_running_requests: 8,
        max_prefill_tokens: 2048,
        dp_size: 2,
        enable_dp_attention: true,
        context_length: 4096,
        incremental_streaming_output: true,
      }),
    ),
  ),
};

const NAMES: Readonly<Record<string, keyof EngineFacts>> = {
  model: 'model',
  'KV blocks': 'kvTotalBlocks',
  'block size': 'kvBlockSize',
  max_num_seqs: 'maxRunningRequests',
  'max batched tokens': 'maxNumBatchedTokens',
  'dp size': 'dataParallelSize',
  'first rank': 'dataParallelStartRank',
  'delta or cumulative output': 'incrementalOutput',
};

/** "model, KV blocks, dp size and first rank" -> the facts' names. */
function documentedFacts(cell: string): string[] {
  return cell
    .split(/, | and /)
    .map((name) => NAMES[name] ?? `unknown "${name}"`)
    .sort();
}

const rpcName = (path: string): string =>
  path
    .split('/')
    .slice(-2)
    .join('/')
    .replace(/^[^/]*\.(\w+\/)/, '$1');

describe("README's engine protocol table", () => {
  const rows = readmeRows();

  it('has one row per --generate-wire', () => {
    expect(rows.map((row) => row[1]).sort()).toEqual(GENERATE_WIRES.map((w) => `\`${w}\``).sort());
  });

  it.each(rows)('%s (%s): RPCs and capacity learned', (_name, wireCell, _follows, accounted, loads, learned) => {
    const wire = wireCell.replace(/`/g, '') as GenerateWire;
    const paths = ENGINE_PATHS[wire];
    expect(accounted).toBe(paths.generate.map((p) => `\`${rpcName(p)}\``).join(', '));
    expect(loads.replace(/ \(JSON\)$/, '')).toBe(paths.loads ? `\`${paths.loads.split('/').pop()}\`` : 'none');
    const facts = factQuestions(wire).reduce<EngineFacts>((all, q) => ({ ...all, ...q.read(FULL_ANSWERS[q.rpc]!) }), {});
    expect(documentedFacts(learned)).toEqual(
      Object.keys(facts)
        .filter((k) => k !== 'maxModelLen')
        .sort(),
    );
  });
});
