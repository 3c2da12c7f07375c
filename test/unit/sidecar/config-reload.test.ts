/** SIGHUP's re-read of --config-file, with the file in memory: live settings applied, others logged, a bad file changes nothing. */
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../src/platform/prng.js';
import { AdmissionControl, gateLimits } from '../../../src/sidecar/admission/admission-control.js';
import { AdmissionGate } from '../../../src/sidecar/admission/gate.js';
import { reloadConfigFile } from '../../../src/sidecar/config-reload.js';
import type { RawFlags } from '../../../src/sidecar/config/options.js';
import { admissionSettingsOf, parseSidecarConfig } from '../../../src/sidecar/config/sidecar-config.js';
import { recordingLogger } from '../../support/recording-logger.js';
import { RetryPushback } from '../../../src/sidecar/admission/retry-pushback.js';

const PATH = '/etc/dynamo/sidecar.env';

function setup(startText: string, flags: RawFlags = {}, env: Record<string, string> = {}) {
  const disk = { text: startText };
  const readFile = (path: string): string => {
    if (path !== PATH) throw new Error(`ENOENT: ${path}`);
    return disk.text;
  };
  const allFlags = { configFile: PATH, ...flags };
  const startup = parseSidecarConfig(allFlags, env, readFile);
  const settings = admissionSettingsOf(startup);
  const { limit, queueLimit } = gateLimits(settings);
  const gate = new AdmissionGate(limit, queueLimit);
  const logger = recordingLogger();
  const counted: string[] = [];
  const control = new AdmissionControl({
    gate,
    settings,
    metrics: { admissionChanged: (source) => counted.push(source) },
    onChange: () => {},
    logger,
    pushback: new RetryPushback(settings, gate, () => 0, mulberry32(1)),
    limitFromEngine: startup.engineRequestLimitAuto,
  });
  const reload = (text: string) => {
    disk.text = text;
    return reloadConfigFile({ flags: allFlags, env, startup, control, logger, readFile });
  };
  return { gate, control, logger, counted, reload };
}

describe('reloadConfigFile (SIGHUP)', () => {
  it('applies the live settings the file names, as one change from sighup', () => {
    const { gate, control, logger, counted, reload } = setup('DYN_ENGINE_REQUEST_LIMIT=4\n');
    expect(gate.limit).toBe(4);
    const outcome = reload('DYN_ENGINE_REQUEST_LIMIT=12\nDYN_DYNAMO_REQUEST_QUEUE_LIMIT=6\nDYN_DYNAMO_REQUEST_QUEUE_TIMEOUT_MS=2500\n');
    expect(outcome).toEqual({ kind: 'applied', changed: ['engineRequestLimit', 'requestQueueLimit', 'queueTimeoutMs'], needsRestart: [] });
    expect([gate.limit, gate.queueLimit, control.queueTimeoutMs]).toEqual([12, 6, 2500]);
    expect(counted).toEqual(['sighup']);
    expect(logger.find('admission changed')[0]!.fields).toMatchObject({ source: 'sighup', engine_request_limit: '4 -> 12' });
    expect(logger.find('SIGHUP: config file re-read')[0]!.fields['changed']).toEqual([
      'engine_request_limit',
      'request_queue_limit',
      'request_queue_timeout_ms',
    ]);
  });

  it("keeps the engine's limit when the file still says auto, and a number in the file then replaces auto for good", () => {
    const { gate, control, counted, reload } = setup('DYN_ENGINE_REQUEST_LIMIT=auto\n');
    expect(gate.limit).toBe(10_000);
    expect(control.engineReported(6)).toBe(true);
    expect(reload('DYN_ENGINE_REQUEST_LIMIT=auto\nDYN_DYNAMO_REQUEST_QUEUE_LIMIT=4\n')).toMatchObject({ kind: 'applied', changed: ['requestQueueLimit'] });
    expect([gate.limit, gate.queueLimit]).toEqual([6, 4]);
    reload('DYN_ENGINE_REQUEST_LIMIT=12\n');
    expect(gate.limit).toBe(12);
    expect(control.engineReported(6), 'the operator set N since').toBe(false);
    expect(gate.limit).toBe(12);
    expect(counted).toEqual(['engine', 'sighup', 'sighup']);
  });

  it('the last change wins: a SIGHUP re-applies the file over an earlier PUT, and a PUT after it wins again', () => {
    const { gate, control, reload } = setup('DYN_ENGINE_REQUEST_LIMIT=8\n');
    control.change({ engineRequestLimit: 2 }, 'api');
    reload('DYN_ENGINE_REQUEST_LIMIT=8\n');
    expect(gate.limit).toBe(8);
    control.change({ engineRequestLimit: 3 }, 'api');
    expect(gate.limit).toBe(3);
  });

  it('treats an empty value as unset, as for a variable: the setting keeps its value, and the log says so', () => {
    const { gate, logger, reload } = setup('DYN_ENGINE_REQUEST_LIMIT=8\n');
    expect(reload('DYN_ENGINE_REQUEST_LIMIT=\n')).toMatchObject({ kind: 'applied', changed: [] });
    expect(gate.limit).toBe(8);
    expect(logger.find('SIGHUP: settings no longer in the config file keep their current value until a restart')[0]!.fields['settings']).toEqual([
      'DYN_ENGINE_REQUEST_LIMIT',
    ]);
  });

  it('logs a changed setting that is not live as needing a restart, by name only, and ignores it', () => {
    const { gate, logger, reload } = setup('DYN_ENGINE_REQUEST_LIMIT=4\nNATS_SERVER=nats://user:s3cret@10.0.0.1:4222\n');
    const outcome = reload(
      'DYN_ENGINE_REQUEST_LIMIT=5\nNATS_SERVER=nats://user:n3w-s3cret@10.0.0.2:4222\nDYN_SIDECAR_MAX_CONCURRENT_STREAMS=10\nDYN_SIDECAR_ADMIN_TOKEN=0123456789abcdef0123\n',
    );
    expect(outcome).toMatchObject({ kind: 'applied', changed: ['engineRequestLimit'] });
    expect(gate.limit).toBe(5);
    const warning = logger.find('SIGHUP: config file changes settings that need a restart; ignored', 'warn');
    expect(warning[0]!.fields['settings']).toEqual(['DYN_SIDECAR_ADMIN_TOKEN', 'DYN_SIDECAR_MAX_CONCURRENT_STREAMS', 'NATS_SERVER']);
    expect(JSON.stringify(logger.lines)).not.toMatch(/s3cret|0123456789abcdef0123/);
  });

  it('keeps the settings in force and logs every problem when the file is bad', () => {
    const { gate, logger, counted, reload } = setup('DYN_ENGINE_REQUEST_LIMIT=4\n');
    const outcome = reload('DYN_ENGINE_REQUEST_LIMIT=0\nDYN_DYNAMO_REQUEST_QUEUE_LIMIT=8\nDYN_BOGUS=1\n');
    expect(outcome).toEqual({
      kind: 'refused',
      problems: [
        `${PATH} line 3: DYN_BOGUS is not a setting of the sidecar`,
        `DYN_ENGINE_REQUEST_LIMIT (${PATH} line 1) must be a positive integer or auto, got "0"`,
      ],
    });
    expect([gate.limit, gate.queueLimit]).toEqual([4, 16]);
    expect(counted).toEqual([]);
    expect(logger.find('SIGHUP: config file not applied, settings unchanged', 'error')).toHaveLength(1);
    // Unreadable, and a pushback minimum above the maximum: refused the same way.
    expect(reload('DYN_SIDECAR_RETRY_PUSHBACK_MIN_MS=20000\n')).toMatchObject({ kind: 'refused' });
    expect(gate.limit).toBe(4);
  });

  it('leaves a setting a flag or variable gives to it: the same precedence as at start-up', () => {
    const { gate, logger, reload } = setup('DYN_ENGINE_REQUEST_LIMIT=4\n', { engineRequestLimit: '6' }, { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '3' });
    expect([gate.limit, gate.queueLimit]).toEqual([6, 3]);
    expect(reload('DYN_ENGINE_REQUEST_LIMIT=9\nDYN_DYNAMO_REQUEST_QUEUE_LIMIT=9\n')).toMatchObject({ changed: [] });
    expect([gate.limit, gate.queueLimit]).toEqual([6, 3]);
    expect(logger.find('SIGHUP: config file settings given by a flag or variable too; the flag or variable wins')[0]!.fields['settings']).toEqual([
      'DYN_ENGINE_REQUEST_LIMIT',
      'DYN_DYNAMO_REQUEST_QUEUE_LIMIT',
    ]);
  });

  it('without --config-file: logs that there is nothing to re-read', () => {
    const startup = parseSidecarConfig({ engineRequestLimit: '2' }, {});
    const logger = recordingLogger();
    const control = { change: () => ({ changed: [] }) };
    expect(reloadConfigFile({ flags: {}, env: {}, startup, control, logger })).toEqual({ kind: 'no_file' });
    expect(logger.find('SIGHUP: nothing to re-read (no --config-file); settings unchanged', 'info')).toHaveLength(1);
  });
});
