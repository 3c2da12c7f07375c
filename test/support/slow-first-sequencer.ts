/**
 * The order test files start in: the benchmark scenarios first, then the other integration tests,
 * then the unit tests, each group in vitest's own order (failed first, then the longest last time,
 * else the largest file). The two workers then start with the files of 30 to 60 s and end on the
 * many small ones, instead of one worker running a long scenario alone at the end.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const group = (file: TestSpecification): number =>
  file.moduleId.includes('/test/integration/bench/') ? 0 : file.moduleId.includes('/test/integration/') ? 1 : 2;

export default class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    return [...ordered].sort((a, b) => group(a) - group(b)); // stable: vitest's order within a group
  }
}
