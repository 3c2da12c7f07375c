/**
 * The soak's reporter (soak-main.ts): one JSON line per test file as it ends, appended to the file
 * named by DYN_SOAK_REPORT, and a last line when the run ends. A run killed half-way (hung, or past
 * --timeout-s) still tells which tests failed before it was.
 */
import { appendFileSync } from 'node:fs';
import { relative } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

export default class SoakReporter implements Reporter {
  private readonly path = process.env.DYN_SOAK_REPORT;

  onTestModuleEnd(module: TestModule): void {
    if (this.path === undefined) return;
    const tests = [...module.children.allTests()];
    const failed = tests.filter((t) => t.result().state === 'failed').map((t) => t.fullName);
    const passed = tests.filter((t) => t.result().state === 'passed').length;
    const error = module.state() === 'failed' && failed.length === 0 ? (module.errors()[0]?.message ?? 'the file failed') : undefined;
    appendFileSync(this.path, `${JSON.stringify({ file: relative(module.project.config.root, module.moduleId), passed, failed, ...(error && { error }) })}\n`);
  }

  onTestRunEnd(): void {
    if (this.path !== undefined) appendFileSync(this.path, `${JSON.stringify({ done: true })}\n`);
  }
}
