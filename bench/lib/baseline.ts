/**
 * The A/B reference: another git revision of the sidecar, built on its own. Its src/, proto/,
 * tsconfig.json and package.json (for "type": "module") are exported with `git archive` into a
 * directory in the OS temp dir (outside the checkout, so lint and format never see the copy),
 * node_modules is a symlink to this checkout's (a revision with other dependencies is not what
 * this measures), and tsc builds its dist/. A finished build is kept per commit and checkout, so
 * the next A/B against the same revision starts at once.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.js';

export interface BaselineBuild {
  readonly rev: string;
  readonly commit: string;
  readonly main: string;
}

function git(args: string[]): string {
  return execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

export function buildBaseline(rev: string, log: (m: string) => void): BaselineBuild {
  let commit: string;
  try {
    commit = git(['rev-parse', '--verify', `${rev}^{commit}`]);
  } catch {
    throw new Error(`--baseline ${rev}: not a git revision of this repository`);
  }
  const checkout = createHash('sha256').update(REPO_ROOT).digest('hex').slice(0, 8);
  const dir = join(tmpdir(), `dynamo-sidecar-baseline-${commit.slice(0, 12)}-${checkout}`);
  const main = join(dir, 'dist', 'cli', 'main.js');
  const done = join(dir, '.built');
  if (existsSync(done) && existsSync(main)) {
    log(`bench: baseline ${rev} (${commit.slice(0, 10)}) already built`);
    return { rev, commit, main };
  }
  log(`bench: building baseline ${rev} (${commit.slice(0, 10)}) in ${dir} ...`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // git archive | tar, without a shell: archive to a file, then extract it.
  const tarFile = join(dir, 'src.tar');
  execFileSync('git', ['archive', '--format=tar', '-o', tarFile, commit, 'src', 'proto', 'tsconfig.json', 'package.json'], { cwd: REPO_ROOT, stdio: 'pipe' });
  execFileSync('tar', ['-xf', tarFile, '-C', dir], { stdio: 'pipe' });
  rmSync(tarFile);
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  try {
    execFileSync(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(dir, 'tsconfig.json')], {
      cwd: dir,
      stdio: 'pipe',
      timeout: 300_000,
    });
  } catch (err) {
    const out = (err as { stdout?: Buffer }).stdout?.toString() ?? '';
    throw new Error(`--baseline ${rev}: tsc failed:\n${out.slice(-2000)}`);
  }
  if (!existsSync(main)) throw new Error(`--baseline ${rev}: the build has no dist/cli/main.js`);
  writeFileSync(done, `${commit}\n`);
  return { rev, commit, main };
}
