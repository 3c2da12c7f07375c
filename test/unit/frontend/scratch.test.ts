import { it } from 'vitest';
import { testApp, hangs } from './fakes.js';

it('probe', async () => {
  const t = testApp({ options: { bodyLimitBytes: 8 * 1024 * 1024 } });
  const cases: [string, string, string][] = [
    ['deep', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":"hi"}],"x":' + '['.repeat(1_000_000) + ']'.repeat(1_000_000) + '}'],
    ['deepobj', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":"hi"}],"x":' + '{"a":'.repeat(500_000) + '1' + '}'.repeat(500_000) + '}'],
    ['proto', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":"hi"}],"__proto__":{"x":1}}'],
    ['null', '/v1/chat/completions', 'null'],
    ['arr', '/v1/chat/completions', '[]'],
    ['num', '/v1/chat/completions', '5'],
    ['textpart-missing', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":[{"type":"text"}]}]}'],
    ['parts-empty', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":[]}]}'],
    ['msg-not-obj', '/v1/chat/completions', '{"model":"m1","messages":["hi"]}'],
    ['maxtok-float', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":"hi"}],"max_tokens":1.5}'],
    ['maxtok-1e30', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":"hi"}],"max_tokens":1e30}'],
    ['maxtok-neg', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}'],
    ['n-0', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":"hi"}],"n":0}'],
    ['stop-5', '/v1/chat/completions', '{"model":"m1","messages":[{"role":"user","content":"hi"}],"stop":["a","b","c","d","e"]}'],
    ['model-num', '/v1/chat/completions', '{"model":5,"messages":[{"role":"user","content":"hi"}]}'],
    ['prompt-ints-neg', '/v1/completions', '{"model":"m1","prompt":[-1]}'],
    ['prompt-mixed', '/v1/completions', '{"model":"m1","prompt":[1,"a"]}'],
    ['prompt-nested', '/v1/completions', '{"model":"m1","prompt":[[1,2]]}'],
    ['prompt-ws', '/v1/completions', '{"model":"m1","prompt":"   "}'],
    ['seed-float', '/v1/completions', '{"model":"m1","prompt":"a","seed":1.5}'],
    ['temp-nan', '/v1/completions', '{"model":"m1","prompt":"a","temperature":1e999}'],
    ['stream-str', '/v1/completions', '{"model":"m1","prompt":"a","stream":"true"}'],
    ['dup-keys', '/v1/completions', '{"model":"m1","prompt":"a","model":"zz"}'],
    ['so-weird', '/v1/completions', '{"model":"m1","prompt":"a","stream":true,"stream_options":{"include_usage":"yes"}}'],
    ['bad-utf8', '/v1/completions', '{"model":"m1","prompt":"\\ud800"}'],
  ];
  for (const [name, url, payload] of cases) {
    const started = performance.now();
    try {
      const r = await t.app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json' } });
      console.log(name, r.statusCode, Math.round(performance.now() - started) + 'ms', r.body.slice(0, 160));
    } catch (e) { console.log(name, 'THREW', (e as Error).message); }
  }
  for (const ct of ['application/json; charset=utf-16', 'application/JSON', 'application/x-www-form-urlencoded', 'application/json-patch+json']) {
    const r = await t.app.inject({ method: 'POST', url: '/v1/completions', payload: '{"model":"m1","prompt":"a"}', headers: { 'content-type': ct } });
    console.log(ct, r.statusCode, r.body.slice(0, 120));
  }
  const r = await t.app.inject({ method: 'POST', url: '/v1/completions', payload: '{"model":"m1","prompt":"a"}' , headers: {'content-type': 'application/json', 'content-encoding': 'gzip'}});
  console.log('gzip', r.statusCode, r.body.slice(0, 120));
  t.workers.defaultScript = hangs;
  await t.app.close();
}, 120_000);
