/**
 * The test engine as its own process (`node --import tsx test/support/test-engine-main.ts PORT`),
 * for tests that kill the engine for real. Prints "test-engine listening on PORT".
 * Sending "release\n" on stdin releases every held call (Hold and Early); "stats\n" prints
 * `stats {"active":..,"maxActive":..,"held":..,"early":..}`.
 */
import { startTestEngine } from './test-engine.js';

const engine = await startTestEngine(Number(process.argv[2] ?? 0));
process.stdout.write(`test-engine listening on ${engine.port}\n`);
process.stdin.setEncoding('utf8');
process.stdin.on('data', (text: string) => {
  if (text.includes('stats')) {
    const { active, maxActive, held, early } = engine;
    process.stdout.write(`stats ${JSON.stringify({ active, maxActive, held, early })}\n`);
  }
  if (text.includes('release')) {
    engine.releaseHeld();
    engine.releaseEarly();
  }
});
process.on('SIGTERM', () => void engine.close().then(() => process.exit(0)));
