import { describe, expect, it } from 'vitest';
import { parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { problems, problemsOf } from '../../../support/config-problems.js';

describe('parseSidecarConfig', () => {
  it('defaults to admission off, queue 16, ingress 0.0.0.0:50050, system port 9090', () => {
    const config = parseSidecarConfig({}, {});
    expect(config).toMatchObject({
      listen: { host: '0.0.0.0', port: 50050 },
      upstream: undefined,
      systemPort: 9090,
      engineRequestLimit: undefined,
      requestQueueLimit: 16,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reads the env twins and lets a flag win over its env', () => {
    const env = { DYN_ENGINE_REQUEST_LIMIT: '32', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4', DYN_SYSTEM_PORT: '0', DYN_SIDECAR_UPSTREAM: '10.0.0.1:1' };
    expect(parseSidecarConfig({}, env)).toMatchObject({ engineRequestLimit: 32, requestQueueLimit: 4, systemPort: 0, upstream: { host: '10.0.0.1', port: 1 } });
    expect(parseSidecarConfig({ engineRequestLimit: '8', upstream: '[::1]:50051' }, env)).toMatchObject({
      engineRequestLimit: 8,
      upstream: { host: '::1', port: 50051 },
    });
  });

  it('treats an empty environment variable as unset', () => {
    expect(parseSidecarConfig({}, { DYN_ENGINE_REQUEST_LIMIT: '', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: ' ' }).engineRequestLimit).toBeUndefined();
  });

  it.each(['0', '-3', '1.5', 'abc', '1e3', '0x10', 'autox', '9007199254740993'])(
    'refuses engine request limit %j, naming the flag or the variable',
    (value) => {
      expect(problems({ engineRequestLimit: value })).toEqual([`--engine-request-limit must be a positive integer or auto, got "${value}"`]);
      expect(problems({}, { DYN_ENGINE_REQUEST_LIMIT: value })).toEqual([`DYN_ENGINE_REQUEST_LIMIT must be a positive integer or auto, got "${value}"`]);
    },
  );

  it.each(['auto', 'AUTO', ' Auto '])('takes engine request limit %j as auto: the fallback limit until the engine tells its capacity', (value) => {
    expect(parseSidecarConfig({ engineRequestLimit: value }, {})).toMatchObject({ engineRequestLimit: 10_000, engineRequestLimitAuto: true });
    expect(parseSidecarConfig({}, { DYN_ENGINE_REQUEST_LIMIT: value })).toMatchObject({ engineRequestLimit: 10_000, engineRequestLimitAuto: true });
    expect(parseSidecarConfig({ engineRequestLimit: '8' }, { DYN_ENGINE_REQUEST_LIMIT: value })).toMatchObject({
      engineRequestLimit: 8,
      engineRequestLimitAuto: false,
    });
  });

  it.each(['1', '0', 'x', '-2', '2.5'])('refuses queue limit %j, naming the variable', (value) => {
    expect(problems({ engineRequestLimit: '4' }, { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: value })).toEqual([
      `DYN_DYNAMO_REQUEST_QUEUE_LIMIT must be an integer >= 2, got "${value}"`,
    ]);
  });

  it('reports every problem at once', () => {
    expect(problems({ listen: 'nope', upstream: 'host:0', systemPort: '70000', logLevel: 'loud' })).toEqual([
      '--listen: expected HOST:PORT (e.g. 127.0.0.1:50051 or [::1]:50051), got "nope"',
      '--upstream: port must be 1-65535, got 0',
      '--system-port must be an integer in 0..65535, got "70000"',
      '--log-level must be one of debug, info, warn, error, got "loud"',
    ]);
  });
});

describe('parseSidecarConfig: --advertise-address and --served-model-name', () => {
  it('leaves both unset by default (derived at start-up, asked from the engine)', () => {
    const config = parseSidecarConfig({}, {});
    expect(config.advertiseAddress).toBeUndefined();
    expect(config.load.servedModelName).toBeUndefined();
  });

  it('reads the env twins and lets a flag win; port 0 means the port actually bound', () => {
    const env = { DYN_SIDECAR_ADVERTISE_ADDRESS: '10.0.0.5:50050', DYN_SERVED_MODEL_NAME: ' meta-llama/Llama-3.1-8B ' };
    expect(parseSidecarConfig({}, env)).toMatchObject({
      advertiseAddress: { host: '10.0.0.5', port: 50050 },
      load: { servedModelName: 'meta-llama/Llama-3.1-8B' },
    });
    expect(parseSidecarConfig({ advertiseAddress: '[fd00::5]:0', servedModelName: 'qwen' }, env)).toMatchObject({
      advertiseAddress: { host: 'fd00::5', port: 0 },
      load: { servedModelName: 'qwen' },
    });
  });

  it.each(['nope', '10.0.0.5', '10.0.0.5:70000', ':50050'])('refuses advertise address %j, naming the flag or the variable', (value) => {
    const [fromFlag] = problems({ advertiseAddress: value });
    expect(fromFlag).toMatch(/^--advertise-address: /);
    expect(fromFlag).toContain(value === '10.0.0.5:70000' ? 'port must be' : `"${value}"`);
    expect(problems({}, { DYN_SIDECAR_ADVERTISE_ADDRESS: value })[0]).toMatch(/^DYN_SIDECAR_ADVERTISE_ADDRESS: /);
  });

  it.each(['0.0.0.0:50050', '[::]:50050'])('refuses the wildcard %j: frontends cannot dial it', (value) => {
    const host = value.startsWith('[') ? '::' : '0.0.0.0';
    expect(problems({ advertiseAddress: value })).toEqual([`--advertise-address: host must be an address frontends can dial, not the wildcard "${host}"`]);
    expect(problems({}, { DYN_SIDECAR_ADVERTISE_ADDRESS: value })).toEqual([
      `DYN_SIDECAR_ADVERTISE_ADDRESS: host must be an address frontends can dial, not the wildcard "${host}"`,
    ]);
  });

  it('refuses an empty or control-character model name, naming the flag or the variable', () => {
    expect(problems({ servedModelName: '  ' })).toEqual(['--served-model-name must not be empty']);
    expect(problems({}, { DYN_SERVED_MODEL_NAME: 'a\nb' })).toEqual(['DYN_SERVED_MODEL_NAME must not contain control characters, got "a\\nb"']);
  });

  it('reports them with the other problems at once', () => {
    expect(problems({ advertiseAddress: '0.0.0.0:1', servedModelName: '', systemPort: 'x' })).toEqual([
      '--advertise-address: host must be an address frontends can dial, not the wildcard "0.0.0.0"',
      '--system-port must be an integer in 0..65535, got "x"',
      '--served-model-name must not be empty',
    ]);
  });
});

describe('parseSidecarConfig: --generate-wire and --engine-load-source', () => {
  it('defaults to the current vLLM layout and auto, and reads the env twins', () => {
    expect(parseSidecarConfig({}, {}).load).toMatchObject({ generateWire: 'vllm', engineLoadSource: 'auto' });
    expect(parseSidecarConfig({}, { DYN_GENERATE_WIRE: 'sglang', DYN_ENGINE_LOAD_SOURCE: 'getloads' }).load).toMatchObject({
      generateWire: 'sglang',
      engineLoadSource: 'getloads',
    });
    expect(parseSidecarConfig({ generateWire: 'vllm-legacy' }, { DYN_GENERATE_WIRE: 'sglang' }).load.generateWire).toBe('vllm-legacy');
  });

  it('refuses an unknown layout or source, naming the flag or the variable', () => {
    expect(problems({ generateWire: 'vllm2' })).toEqual(['--generate-wire must be one of vllm, vllm-legacy, sglang, vllm-native, sglang-native, got "vllm2"']);
    expect(problems({}, { DYN_ENGINE_LOAD_SOURCE: 'nats' })).toEqual(['DYN_ENGINE_LOAD_SOURCE must be one of scrape, getloads, traffic, auto, got "nats"']);
  });

  it("getloads needs a protocol with a load RPC (vLLM's own has none); the engine's word never overrides a flag", () => {
    expect(problems({ engineLoadSource: 'getloads', generateWire: 'vllm-native' })).toEqual([
      '--engine-load-source: getloads needs a load RPC, and vllm-native (--generate-wire or DYN_GENERATE_WIRE) has none; use scrape or traffic',
    ]);
    expect(problems({ engineLoadSource: 'getloads', generateWire: 'sglang-native' })).toEqual([]);
    expect(parseSidecarConfig({}, {}).load.setByOperator).toEqual({ kvBlockSize: false, dataParallelSize: false });
    expect(parseSidecarConfig({ kvBlockSize: '16' }, { DYN_DATA_PARALLEL_SIZE: '1' }).load.setByOperator).toEqual({
      kvBlockSize: true,
      dataParallelSize: true,
    });
  });

  it('scrape needs a metrics URL (except on the embedded engine), and a metrics URL with a source that does not scrape is refused', () => {
    expect(problems({ engineLoadSource: 'scrape', upstream: '127.0.0.1:8000' })).toEqual([
      "--engine-load-source: scrape needs the engine's metrics URL (--engine-metrics-url or DYN_ENGINE_METRICS_URL)",
    ]);
    expect(problems({ engineLoadSource: 'scrape' })).toEqual([]); // demo mode: the embedded engine's /metrics
    expect(problems({ engineLoadSource: 'scrape', upstream: '127.0.0.1:8000', engineMetricsUrl: 'http://127.0.0.1:8001/metrics' })).toEqual([]);
    expect(problems({ engineLoadSource: 'getloads' }, { DYN_ENGINE_METRICS_URL: 'http://127.0.0.1:8001/metrics' })).toEqual([
      'DYN_ENGINE_METRICS_URL is set but --engine-load-source is "getloads", which does not scrape; remove one',
    ]);
    expect(problems({ engineLoadSource: 'traffic', engineMetricsUrl: 'http://e/metrics' })).toHaveLength(1);
  });
});

describe('parseSidecarConfig: --config-file', () => {
  const files = (texts: Record<string, string>) => (path: string) => {
    const text = texts[path];
    if (text === undefined) throw new Error(`ENOENT: no such file or directory, open '${path}'`);
    return text;
  };

  it('reads settings from the file under their environment names; a variable wins over it, a flag over both', () => {
    const read = files({ '/etc/s.env': 'DYN_ENGINE_REQUEST_LIMIT=8\nDYN_DYNAMO_REQUEST_QUEUE_LIMIT=4\nDYN_SIDECAR_RETRY_PUSHBACK_MS=100\n' });
    const fromFile = parseSidecarConfig({ configFile: '/etc/s.env' }, {}, read);
    expect(fromFile).toMatchObject({ engineRequestLimit: 8, requestQueueLimit: 4, retryPushbackMs: 100 });
    expect(fromFile.configFile).toEqual({
      path: '/etc/s.env',
      values: { DYN_ENGINE_REQUEST_LIMIT: '8', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4', DYN_SIDECAR_RETRY_PUSHBACK_MS: '100' },
      fromFile: ['engineRequestLimit', 'requestQueueLimit', 'retryPushbackMs'],
    });
    const env = { DYN_SIDECAR_CONFIG_FILE: '/etc/s.env', DYN_ENGINE_REQUEST_LIMIT: '16', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '' };
    const withEnv = parseSidecarConfig({ retryPushbackMs: '7' }, env, read);
    expect(withEnv).toMatchObject({ engineRequestLimit: 16, requestQueueLimit: 4, retryPushbackMs: 7 });
    expect(withEnv.configFile?.fromFile).toEqual(['requestQueueLimit']); // an empty variable counts as unset
  });

  it('names the file and line of a bad value, and reports it with every other problem', () => {
    const read = files({ 's.env': '# limits\nDYN_ENGINE_REQUEST_LIMIT=0\n' });
    expect(problemsOf(() => parseSidecarConfig({ configFile: 's.env', systemPort: 'x' }, {}, read))).toEqual([
      '--system-port must be an integer in 0..65535, got "x"',
      'DYN_ENGINE_REQUEST_LIMIT (s.env line 2) must be a positive integer or auto, got "0"',
    ]);
  });

  it('refuses an unreadable file, an unknown name (with a suggestion), the file naming itself, and a malformed line', () => {
    expect(problemsOf(() => parseSidecarConfig({ configFile: '/nope.env' }, {}, files({})))).toEqual([
      `--config-file: cannot read "/nope.env": ENOENT: no such file or directory, open '/nope.env'`,
    ]);
    const read = files({ 'f.env': 'DYN_ENGINE_REQUEST_LIMT=4\nDYN_SIDECAR_CONFIG_FILE=other.env\nHOME=/root\nnot a line\n' });
    expect(problemsOf(() => parseSidecarConfig({}, { DYN_SIDECAR_CONFIG_FILE: 'f.env' }, read))).toEqual([
      'f.env line 4: expected NAME=VALUE (an environment-variable name) or a # comment',
      'f.env line 1: DYN_ENGINE_REQUEST_LIMT is not a setting of the sidecar; did you mean DYN_ENGINE_REQUEST_LIMIT?',
      'f.env line 2: DYN_SIDECAR_CONFIG_FILE cannot be set in the config file itself',
      'f.env line 3: HOME is not a setting of the sidecar',
    ]);
  });
});

describe('parseSidecarConfig: live admission settings, drain delay, admin token', () => {
  it('defaults: fixed pushback 250 ms within 100..10000, no queue timeout, no drain delay, admin API off', () => {
    expect(parseSidecarConfig({}, {})).toMatchObject({
      retryPushbackMode: 'fixed',
      retryPushbackMs: 250,
      retryPushbackMinMs: 100,
      retryPushbackMaxMs: 10_000,
      queueTimeoutMs: 0,
      admissionMode: 'static',
      adaptiveMinLimit: 1,
      firstTokenLimit: undefined,
      maxQueueWaitMs: 0,
      drainDelayMs: 0,
      adminToken: undefined,
      configFile: undefined,
    });
  });

  it('reads the first-token limit and the longest expected queue wait from their flags or variables', () => {
    expect(parseSidecarConfig({ firstTokenLimit: '4', maxQueueWaitMs: '250' }, {})).toMatchObject({ firstTokenLimit: 4, maxQueueWaitMs: 250 });
    expect(parseSidecarConfig({}, { DYN_SIDECAR_FIRST_TOKEN_LIMIT: '2', DYN_SIDECAR_MAX_QUEUE_WAIT_MS: '100' })).toMatchObject({
      firstTokenLimit: 2,
      maxQueueWaitMs: 100,
    });
  });

  it('reads each from its flag or its variable', () => {
    const env = {
      DYN_SIDECAR_RETRY_PUSHBACK_MODE: 'adaptive',
      DYN_SIDECAR_RETRY_PUSHBACK_MIN_MS: '50',
      DYN_SIDECAR_RETRY_PUSHBACK_MAX_MS: '2000',
      DYN_DYNAMO_REQUEST_QUEUE_TIMEOUT_MS: '1500',
      DYN_SIDECAR_DRAIN_DELAY_MS: '5000',
      DYN_SIDECAR_ADMIN_TOKEN: ' 0123456789abcdef ',
    };
    expect(parseSidecarConfig({}, env)).toMatchObject({
      retryPushbackMode: 'adaptive',
      retryPushbackMinMs: 50,
      retryPushbackMaxMs: 2000,
      queueTimeoutMs: 1500,
      drainDelayMs: 5000,
      adminToken: '0123456789abcdef',
    });
    expect(parseSidecarConfig({ queueTimeoutMs: '10', retryPushbackMode: 'fixed' }, env)).toMatchObject({ queueTimeoutMs: 10, retryPushbackMode: 'fixed' });
  });

  it('refuses a pushback minimum above the maximum, naming whichever was set', () => {
    expect(problems({ retryPushbackMaxMs: '50' })).toEqual(['--retry-pushback-max-ms: the retry pushback minimum (100 ms) is above its maximum (50 ms)']);
    expect(problems({ retryPushbackMinMs: '900' }, { DYN_SIDECAR_RETRY_PUSHBACK_MAX_MS: '800' })).toEqual([
      '--retry-pushback-min-ms and DYN_SIDECAR_RETRY_PUSHBACK_MAX_MS: the retry pushback minimum (900 ms) is above its maximum (800 ms)',
    ]);
  });

  it.each([
    [{ retryPushbackMode: 'smart' }, '--retry-pushback-mode must be one of fixed, adaptive, got "smart"'],
    [{ queueTimeoutMs: '-1' }, '--queue-timeout-ms must be an integer in 0..3600000, got "-1"'],
    [{ drainDelayMs: '1.5' }, '--drain-delay-ms must be an integer in 0..3600000, got "1.5"'],
    [{ firstTokenLimit: '0' }, '--first-token-limit must be an integer >= 1, got "0"'],
    [{ admissionMode: 'clever' }, '--admission-mode must be one of static, adaptive, got "clever"'],
    [{ adaptiveMinLimit: '0' }, '--adaptive-min-limit must be an integer >= 1, got "0"'],
    [{ maxQueueWaitMs: 'soon' }, '--max-queue-wait-ms must be an integer in 0..3600000, got "soon"'],
  ])('refuses %j', (flags, message) => {
    expect(problems(flags)).toEqual([message]);
  });

  it('refuses a short admin token or one with spaces, never quoting it', () => {
    const short = problems({}, { DYN_SIDECAR_ADMIN_TOKEN: 'hunter2' });
    expect(short).toEqual(['DYN_SIDECAR_ADMIN_TOKEN must be at least 16 characters, got 7 (the value is not shown); e.g. openssl rand -hex 32']);
    const spaced = problems({ adminToken: 'correct horse battery staple' });
    expect(spaced).toEqual(['--admin-token must be printable ASCII without spaces (the value is not shown)']);
    expect([...short, ...spaced].join(' ')).not.toMatch(/hunter2|horse/);
  });
});
