/**
 * `npm run bench:overload`: goodput under overload, in one of three scenarios (each in its own
 * module, which reads the rest of the command line):
 *
 *   --scenario sweep    (default) offered load from 0.25x to 8x capacity for the configurations
 *                       unprotected, dynamo and best (bench/overload/sweep.ts)
 *   --scenario classes  a two-class mix, 20% high priority and 80% low, with and without the
 *                       classes honoured (bench/overload/classes.ts)
 *   --scenario tenants  four polite tenants beside one noisy one, with and without the fairness
 *                       features (bench/overload/tenants.ts)
 *
 * `--scenario NAME --help` lists each one's options.
 */
import { parseArgs } from 'node:util';

const SCENARIOS = ['sweep', 'classes', 'tenants'] as const;
const { values } = parseArgs({ options: { scenario: { type: 'string', default: 'sweep' } }, strict: false });
const scenario = String(values.scenario);
if (scenario === 'sweep') await import('./overload/sweep.js');
else if (scenario === 'classes') await import('./overload/classes.js');
else if (scenario === 'tenants') await import('./overload/tenants.js');
else {
  console.error(`--scenario must be one of ${SCENARIOS.join(', ')}, got ${JSON.stringify(scenario)}`);
  process.exitCode = 2;
}
