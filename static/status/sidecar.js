// The sidecar's status page: renders each snapshot of /status/events. Settings are changed
// through the admin API (PUT /admission) with the token typed into the page: it is kept in the
// input only, sent as a Bearer header, and never written to storage or to the URL.
'use strict';

(function () {
  const { el, fmt, age, bar, tile, follow, request } = window.StatusKit;
  const settingRows = new Map();
  let settingsKey;

  function row(name, ...cells) {
    return el('tr', {}, el('th', {}, name), ...cells.map((c) => el('td', {}, c)));
  }

  function renderAdmission(s) {
    const a = s.admission;
    const limit = a.engine_request_limit;
    document
      .getElementById('admission')
      .replaceChildren(
        row('in the engine / N', bar(a.engine_request, limit ?? 0, `${a.engine_request} / ${limit === null ? '∞ (admission off)' : limit}`)),
        row('queued / Q', bar(a.request_queue, a.request_queue_limit, `${a.request_queue} / ${a.request_queue_limit}`)),
        row(
          'awaiting first token / F',
          bar(a.first_token_pending, a.first_token_limit ?? 0, `${a.first_token_pending} / ${a.first_token_limit === null ? '∞' : a.first_token_limit}`),
        ),
        ...s.ranks.map((r) =>
          row(
            `dp rank ${r.dp_rank}: KV blocks`,
            bar(r.kv_used_blocks, r.kv_total_blocks ?? 0, `${fmt(r.kv_used_blocks)} / ${fmt(r.kv_total_blocks)}`),
            `prefill ${fmt(r.active_prefill_tokens)} tokens, predicted TTFT ${r.predicted_ttft_ms === null ? '–' : `${r.predicted_ttft_ms} ms`}${r.overloaded ? ', overloaded' : ''}`,
          ),
        ),
      );
  }

  function renderRates(s) {
    const h = s.history.series;
    const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
    const reasons = Object.entries(s.rates.rejections)
      .filter(([, v]) => v > 0)
      .map(([k, v]) => `${k}: ${fmt(v)}`)
      .join('  ');
    const codes = Object.entries(s.rates.requests)
      .filter(([, v]) => v > 0)
      .map(([k, v]) => `${k}: ${fmt(v)}`)
      .join('  ');
    const rejected = sum(s.rates.rejections);
    document
      .getElementById('rates')
      .replaceChildren(
        tile('requests', `calls/s ${codes ? `(${codes})` : ''}`, sum(s.rates.requests), '', h.requests),
        tile('rejections', `rejections/s ${reasons ? `(${reasons})` : ''}`, rejected, '', h.rejections, rejected > 0),
        tile('in_engine', 'in the engine', s.admission.engine_request, '', h.in_engine),
        tile('queued', 'queued', s.admission.request_queue, '', h.queued),
      );
  }

  function renderEngine(s) {
    const e = s.engine;
    document
      .getElementById('engine')
      .replaceChildren(
        row('address', el('span', { class: 'mono' }, e.address)),
        row('reachable', el('span', { class: `state state-${e.reachable ? 'free' : 'unreachable'}` }, e.reachable ? 'yes' : 'no'), e.reason ?? ''),
        row('load source', e.loadSource),
        row('worker', s.draining ? el('span', { class: 'state state-draining' }, 'draining') : 'serving', `model ${s.model ?? '–'}`),
      );
  }

  async function put(field, value) {
    const error = document.getElementById('settings-error');
    const token = document.getElementById('token').value;
    if (!token) return void (error.textContent = 'type the admin token first');
    const res = await request('PUT', '/admission', { [field]: value }, { authorization: `Bearer ${token}` });
    error.textContent = res.ok ? '' : `PUT /admission: ${res.status} ${res.body.error ?? ''}`;
    return res.ok;
  }

  /** A value as typed: a number when it reads as one, null for "null" or empty, else the text (mode names). */
  function parseValue(text) {
    const t = text.trim();
    if (t === '' || t === 'null') return null;
    return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t;
  }

  function renderSettings(s) {
    const body = document.getElementById('settings');
    const fields = Object.keys(s.settings);
    const key = JSON.stringify([s.admin_api, fields]);
    if (key !== settingsKey) {
      settingsKey = key;
      settingRows.clear();
      document.getElementById('token-row').hidden = !s.admin_api;
      document.getElementById('admin-note').textContent = s.admin_api
        ? 'Changes go through PUT /admission with the admin token typed above (kept in this page only, never stored).'
        : 'Read-only: the admin API is off (start the sidecar with --admin-token to change these live).';
      body.replaceChildren(
        ...fields.map((field) => {
          const input = el('input', { 'data-field': field, 'aria-label': field });
          input.readOnly = !s.admin_api;
          input.addEventListener('input', () => (input.dataset.dirty = '1'));
          const cells = [el('th', {}, field), el('td', {}, input)];
          if (s.admin_api) {
            const set = el('button', { type: 'button' }, 'set');
            set.addEventListener('click', async () => {
              if (await put(field, parseValue(input.value))) delete input.dataset.dirty;
            });
            cells.push(el('td', {}, set));
          }
          settingRows.set(field, input);
          return el('tr', {}, ...cells);
        }),
      );
    }
    for (const [field, input] of settingRows) {
      if (document.activeElement === input || input.dataset.dirty) continue;
      const value = s.settings[field];
      input.value = value === null ? 'null' : String(value);
    }
  }

  function render(s) {
    document.getElementById('worker-id').textContent = s.worker_id ?? '–';
    document.getElementById('summary').textContent =
      `model ${s.model ?? '–'}, last change: ${s.last_change.source} ${age(s.time - Date.parse(s.last_change.time))} ago`;
    renderAdmission(s);
    renderRates(s);
    renderEngine(s);
    renderSettings(s);
  }

  follow('/status/events', render);
})();
