/** `promtool check metrics` on a /metrics body: its exit code and output (bounded at 10 s). The set-up installs promtool; a test that needs it fails without it. */
import { spawn } from 'node:child_process';

export function promtoolCheckMetrics(text: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout.on('data', (d) => (output += d));
    proc.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    proc.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`promtool not runnable: ${err.message}`));
    });
    proc.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
    proc.stdin.end(text);
  });
}
