// Every source module has unit tests of its own, at the mirrored path: src/a/b.ts is tested by
// test/unit/a/b.test.ts, test/unit/a/b.<aspect>.test.ts or the files in test/unit/a/b/. The
// modules below are the exceptions, each with its reason; the list only shrinks: a module on it
// that gains a test fails this test until it is taken off.
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const WITHOUT_UNIT_TEST: Readonly<Record<string, string>> = {
  'sidecar/sidecar.ts': 'the composition root: every part it wires is unit-tested; the whole is tested by test/integration/sidecar',
  'sidecar/proxy/call-context.ts': 'types only',
  'sidecar/proxy/local-service.ts': 'types only',
  'frontend/text/tokenizer-thread.ts': "a worker thread's entry point, run on import: tokenizer-pool.test.ts runs it in real threads",
};

function sourceModules(dir = join(ROOT, 'src')): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceModules(path);
    return entry.name.endsWith('.ts') ? [relative(join(ROOT, 'src'), path)] : [];
  });
}

function hasUnitTest(module: string): boolean {
  const base = module.replace(/\.ts$/, '');
  const folder = join(ROOT, 'test/unit', dirname(module));
  const name = base.slice(base.lastIndexOf('/') + 1);
  if (existsSync(join(ROOT, 'test/unit', base)) && readdirSync(join(ROOT, 'test/unit', base)).some((f) => f.endsWith('.test.ts'))) return true;
  return existsSync(folder) && readdirSync(folder).some((f) => f === `${name}.test.ts` || (f.startsWith(`${name}.`) && f.endsWith('.test.ts')));
}

describe('unit test layout', () => {
  const modules = sourceModules();

  it('finds the source tree', () => {
    expect(modules.length).toBeGreaterThan(100);
    expect(modules).toContain('sidecar/admission/gate.ts');
  });

  it('gives every source module a unit test of its own, at the mirrored path', () => {
    const missing = modules.filter((m) => !(m in WITHOUT_UNIT_TEST) && !hasUnitTest(m));
    expect(missing).toEqual([]);
  });

  it('lists as exceptions only modules that exist and still have no unit test', () => {
    const stale = Object.keys(WITHOUT_UNIT_TEST).filter((m) => !modules.includes(m) || hasUnitTest(m));
    expect(stale).toEqual([]);
  });
});
