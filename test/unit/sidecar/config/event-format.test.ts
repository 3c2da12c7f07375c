/** --event-format / DYN_EVENT_FORMAT: json by default, dynamo on request, anything else refused by name with exit 2. */
import { describe, expect, it } from 'vitest';
import { parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { problems } from '../../../support/config-problems.js';
import { runMain } from '../../../support/run-main.js';

describe('--event-format', () => {
  it('defaults to json', () => {
    expect(parseSidecarConfig({}, {}).load.eventFormat).toBe('json');
  });

  it('reads the env twin and lets the flag win', () => {
    expect(parseSidecarConfig({}, { DYN_EVENT_FORMAT: 'dynamo' }).load.eventFormat).toBe('dynamo');
    expect(parseSidecarConfig({ eventFormat: 'json' }, { DYN_EVENT_FORMAT: 'dynamo' }).load.eventFormat).toBe('json');
  });

  it.each(['msgpack', 'JSON', 'Dynamo'])('refuses %j, naming the flag or the variable', (value) => {
    expect(problems({ eventFormat: value })).toEqual([`--event-format must be one of json, dynamo, got "${value}"`]);
    expect(problems({}, { DYN_EVENT_FORMAT: value })).toEqual([`DYN_EVENT_FORMAT must be one of json, dynamo, got "${value}"`]);
  });

  it('stops the sidecar command with exit 2 and one line naming the flag', async () => {
    const result = await runMain(['--event-format', 'msgpack']);
    expect(result.exits).toEqual([2]);
    expect(result.err).toBe('dynamo-sidecar: --event-format must be one of json, dynamo, got "msgpack"\n');
    expect(result.out).not.toContain('listening on');
  });

  it('is documented in --help with both formats, its env twin and default', async () => {
    const help = (await runMain(['--help'])).out.replace(/\s+/g, ' ');
    expect(help).toContain('--event-format <format>');
    expect(help).toMatch(/json \(our event with every field.*\| dynamo \(NVIDIA Dynamo's event plane/);
    expect(help).toContain('dynamo carries only ActiveLoad');
    expect(help).toContain('env DYN_EVENT_FORMAT; default json');
  });
});
