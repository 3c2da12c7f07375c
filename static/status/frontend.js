// The frontend's status page: renders each snapshot of /status/events. Thresholds are edited
// through the frontend's own /busy_threshold API (POST to set, DELETE to turn a check off), and
// only when that API is served on this port.
'use strict';

(function () {
  const { el, fmt, age, bar, tile, follow, request } = window.StatusKit;
  const CHECKS = ['active_decode_blocks_threshold', 'active_prefill_tokens_threshold', 'active_prefill_tokens_threshold_frac'];
  const modelRows = new Map();
  let admin = 'off';

  function stateCell(worker) {
    const badge = el('span', { class: `state state-${worker.state}` }, worker.state);
    const why = [];
    if (worker.state === 'busy') {
      for (const f of worker.fired) {
        why.push(
          el(
            'div',
            { class: 'why', 'data-check': f.check },
            `${f.check} (rank ${f.rank}): ${fmt(f.value)} > ${fmt(f.limit)} (${fmt(f.threshold)} of capacity)`,
          ),
        );
      }
    }
    if (worker.state === 'leased') why.push(el('div', { class: 'why' }, `refused (RESOURCE_EXHAUSTED): not routed for ${age(worker.leaseLeftMs)}`));
    if (worker.state === 'unreachable')
      why.push(el('div', { class: 'why' }, worker.leaseLeftMs === null ? 'load stream down' : `UNAVAILABLE: not routed for ${age(worker.leaseLeftMs)}`));
    if (worker.state === 'no_credit') why.push(el('div', { class: 'why' }, 'sent every call its last load event admitted: not routed until its next'));
    if (worker.state === 'stale') why.push(el('div', { class: 'why' }, 'no fresh load: routed as free'));
    return el('td', {}, badge, why);
  }

  function ranksCell(worker) {
    if (worker.ranks.length === 0) return el('td', { class: 'empty' }, 'no load yet');
    return el(
      'td',
      {},
      worker.ranks.map((r) =>
        el(
          'div',
          { class: 'rank' },
          el('span', { class: 'rank-name' }, `r${r.rank}`),
          bar(r.usedBlocks, r.totalBlocks, `${fmt(r.usedBlocks)} / ${fmt(r.totalBlocks)}${r.fresh ? '' : ' (stale)'}`),
        ),
      ),
    );
  }

  function renderWorkers(workers) {
    const body = document.getElementById('workers');
    if (workers.length === 0) return body.replaceChildren(el('tr', {}, el('td', { colspan: 10, class: 'empty' }, 'no worker known yet')));
    body.replaceChildren(
      ...workers.map((w) =>
        el(
          'tr',
          { 'data-worker-id': w.id, 'data-state': w.state },
          el('td', { class: 'mono worker-id' }, w.id),
          el('td', { class: 'mono' }, w.address ?? '–', w.source === 'nats' ? ' (nats)' : ''),
          el('td', { class: 'model' }, w.model ?? '–'),
          stateCell(w),
          ranksCell(w),
          el('td', { class: 'num' }, w.ranks.map((r) => fmt(r.prefillTokens)).join(' / ') || '–'),
          el('td', { class: 'num' }, `${fmt(w.engineRequest)} / ${w.engineRequestLimit === null ? '∞' : fmt(w.engineRequestLimit)}`),
          el('td', { class: 'num' }, fmt(w.requestQueue)),
          el('td', { class: 'num credit' }, w.credit === null ? '–' : fmt(w.credit)),
          el('td', { class: 'num' }, age(w.lastEventAgeMs)),
        ),
      ),
    );
  }

  function renderRates(snapshot) {
    const { rates, history } = snapshot;
    const s = history.series;
    const total = Object.values(rates.byStatus).reduce((a, b) => a + b, 0);
    const statuses = Object.entries(rates.byStatus)
      .filter(([, v]) => v > 0)
      .map(([k, v]) => `${k}: ${fmt(v)}`)
      .join('  ');
    const refusals = Object.entries(rates.refusals)
      .filter(([, v]) => v > 0)
      .map(([k, v]) => `${k}: ${fmt(v)}`)
      .join('  ');
    document.getElementById('rates').replaceChildren(
      tile('requests', `requests/s ${statuses ? `(${statuses})` : ''}`, total, '', s.requests),
      tile('overload', `${snapshot.overload_status}s/s (every worker busy)`, rates.overload, '', s.overload, rates.overload > 0),
      tile(
        'refusals',
        `worker refusals/s ${refusals ? `(${refusals})` : ''}`,
        Object.values(rates.refusals).reduce((a, b) => a + b, 0),
        '',
        s.refusals,
      ),
      tile('retries', 'retries/s', rates.retries, '', s.retries),
      tile('ttft_p50', 'TTFT p50 (10 s)', rates.ttftP50Ms, 'ms', s.ttft_p50_ms),
      tile('ttft_p99', 'TTFT p99 (10 s)', rates.ttftP99Ms, 'ms', s.ttft_p99_ms),
    );
  }

  async function send(method, url, body) {
    const error = document.getElementById('threshold-error');
    error.textContent = '';
    const res = await request(method, url, body);
    if (!res.ok) error.textContent = `${method} /busy_threshold: ${res.status} ${res.body.error ?? ''}`;
    else error.textContent = '';
    return res.ok;
  }

  function thresholdCell(model, check, row) {
    const input = el('input', { type: 'number', step: 'any', min: '0', 'data-check': check, 'aria-label': `${model} ${check}` });
    input.addEventListener('input', () => (input.dataset.dirty = '1'));
    const cell = el('td', {}, input);
    if (admin === 'here') {
      const set = el('button', { type: 'button', 'data-action': 'set' }, 'set');
      set.addEventListener('click', async () => {
        if (input.value === '') return;
        if (await send('POST', '/busy_threshold', { model, [check]: Number(input.value) })) delete input.dataset.dirty;
      });
      const off = el('button', { type: 'button', 'data-action': 'off' }, 'off');
      off.addEventListener('click', async () => {
        if (await send('DELETE', `/busy_threshold?model=${encodeURIComponent(model)}&check=${encodeURIComponent(check)}`)) delete input.dataset.dirty;
      });
      cell.append(' ', set, ' ', off);
    } else input.readOnly = true;
    row.inputs[check] = input;
    return cell;
  }

  function renderModels(snapshot) {
    const body = document.getElementById('models');
    const names = snapshot.models.map((m) => m.model);
    // Rows are rebuilt only when the models or the admin placement change, so an edit in progress survives the ticks.
    const key = JSON.stringify([snapshot.admin, names]);
    if (body.dataset.key !== key) {
      admin = snapshot.admin;
      body.dataset.key = key;
      modelRows.clear();
      body.replaceChildren(
        ...snapshot.models.map((m) => {
          const row = { inputs: {}, busy: el('td', { class: 'num' }) };
          row.scales = el('td', { class: 'scales' });
          const tr = el(
            'tr',
            { 'data-model': m.model },
            el('td', { class: 'model' }, m.model),
            row.busy,
            CHECKS.map((c) => thresholdCell(m.model, c, row)),
            row.scales,
          );
          modelRows.set(m.model, row);
          return tr;
        }),
      );
      if (names.length === 0) body.replaceChildren(el('tr', {}, el('td', { colspan: 6, class: 'empty' }, 'no model served yet')));
      document.getElementById('admin-note').textContent =
        snapshot.admin === 'here'
          ? 'Edits go through this frontend’s /busy_threshold API (POST to set, DELETE to turn a check off), which anyone who can reach this port may call; an empty field means the check is off.'
          : snapshot.admin === 'elsewhere'
            ? 'Read-only here: the admin API is served on its own port (--admin-address); edit the thresholds there.'
            : 'Read-only: the admin API is off (DYN_DISABLE_FRONTEND_ADMIN_API).';
    }
    for (const m of snapshot.models) {
      const row = modelRows.get(m.model);
      if (!row) continue;
      row.busy.textContent = `${m.busy} / ${m.workers}`;
      // Read-only: the states above are at scale 1 (a request without a priority).
      row.scales.textContent = m.priorityScales.length ? m.priorityScales.map((c) => `priority ≥ ${c.priority}: ×${c.scale}`).join(', ') : 'none';
      for (const check of CHECKS) {
        const input = row.inputs[check];
        if (document.activeElement === input || input.dataset.dirty) continue;
        const value = m.thresholds[check];
        input.value = value === null ? '' : String(value);
        input.placeholder = 'off';
      }
    }
  }

  function render(snapshot) {
    const busy = snapshot.workers.filter((w) => w.state === 'busy').length;
    document.getElementById('summary').textContent = `${snapshot.workers.length} workers, ${busy} busy, ${snapshot.models.length} models`;
    renderWorkers(snapshot.workers);
    renderRates(snapshot);
    renderModels(snapshot);
  }

  follow('/status/events', render);
})();
