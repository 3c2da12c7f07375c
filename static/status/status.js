// Shared by both status pages: DOM building (text only: every value from the network goes
// through textContent or an attribute, never through HTML parsing), formatting, sparklines, and
// the event stream with its reconnect banner. Plain browser JS, no build step, no dependencies.
'use strict';

(function () {
  const SVG = 'http://www.w3.org/2000/svg';

  /** An element with attributes, properties (keys starting with '.'), and children (strings become text nodes). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith('.')) node[key.slice(1)] = value;
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(typeof child === 'object' ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function fmt(value, digits) {
    if (value === null || value === undefined || Number.isNaN(value)) return '–';
    if (typeof value !== 'number') return String(value);
    if (digits !== undefined) return value.toFixed(digits);
    // Up to two decimals, trailing zeros dropped (0.3, 38.4, 12); whole numbers from 100 up.
    return String(Math.abs(value) >= 100 ? Math.round(value) : Number(value.toFixed(2)));
  }

  function age(ms) {
    if (ms === null || ms === undefined) return '–';
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
    return `${Math.round(ms / 60000)} min`;
  }

  /** A usage bar: `used` of `total`, labelled; red when full, orange above 80 %. */
  function bar(used, total, label) {
    const fraction = total > 0 && used !== null && used !== undefined ? Math.min(1, used / total) : 0;
    const fill = el('div', { class: 'fill' + (fraction >= 1 ? ' full' : fraction > 0.8 ? ' high' : '') });
    fill.style.width = `${(fraction * 100).toFixed(1)}%`;
    return el('div', { class: 'bar', title: label }, fill, el('div', { class: 'label' }, label));
  }

  /** A sparkline of the points (nulls are gaps) scaled to their own maximum. */
  function sparkline(points, width, height) {
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('width', String(width));
    svg.setAttribute('height', String(height));
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    const values = (points || []).filter((p) => typeof p === 'number');
    const max = Math.max(1e-9, ...values);
    const n = (points || []).length;
    let segment = [];
    const flush = () => {
      if (segment.length > 0) {
        const line = document.createElementNS(SVG, 'polyline');
        line.setAttribute('points', segment.join(' '));
        svg.append(line);
      }
      segment = [];
    };
    (points || []).forEach((p, i) => {
      if (typeof p !== 'number') return flush();
      const x = n > 1 ? (i / (n - 1)) * (width - 2) + 1 : width / 2;
      const y = height - 1 - (p / max) * (height - 3);
      segment.push(`${x.toFixed(1)},${y.toFixed(1)}`);
    });
    flush();
    return svg;
  }

  /** A rate tile: name, current value, and a sparkline of its history. */
  function tile(key, name, value, unit, history, hot) {
    return el(
      'div',
      { class: 'tile' + (hot ? ' hot-tile' : ''), 'data-rate': key },
      el('div', { class: 'name' }, name),
      el('div', { class: 'value' + (hot ? ' hot' : ''), 'data-value': value === null ? '' : value }, fmt(value), unit ? ` ${unit}` : ''),
      sparkline(history, 150, 28),
    );
  }

  /**
   * Follows `url` (one SSE stream): `onSnapshot(data)` per message. The banner (#conn) says
   * whether the stream is live, lost (retrying with backoff) or back, and whether the process
   * behind it restarted (its `started` time changed). Everything stops when the page goes away.
   */
  function follow(url, onSnapshot) {
    const banner = document.getElementById('conn');
    let source;
    let retryTimer;
    let attempts = 0;
    let lost = false;
    let started;
    let lastMessage = 0;
    const setBanner = (state, text) => {
      banner.dataset.state = state;
      banner.textContent = text;
    };
    const connect = () => {
      source = new EventSource(url);
      source.onmessage = (event) => {
        const data = JSON.parse(event.data);
        lastMessage = Date.now();
        if (lost || attempts > 0) {
          const restarted = started !== undefined && data.started !== started;
          setBanner('reconnected', restarted ? 'reconnected: the process restarted' : 'reconnected');
        } else if (banner.dataset.state !== 'reconnected') setBanner('live', 'live');
        lost = false;
        attempts = 0;
        started = data.started;
        onSnapshot(data);
      };
      source.onerror = () => {
        lost = true;
        setBanner('reconnecting', `connection lost: reconnecting${attempts > 0 ? ` (attempt ${attempts + 1})` : ''}`);
        // The browser retries a dropped stream itself, but gives up on an HTTP error (a 503,
        // a proxy's 502): then start over, backing off up to 5 s.
        if (source.readyState === EventSource.CLOSED) {
          source.close();
          attempts++;
          retryTimer = setTimeout(connect, Math.min(5000, 500 * attempts));
        } else attempts = Math.max(attempts, 1);
      };
    };
    setBanner('connecting', 'connecting');
    connect();
    const staleTimer = setInterval(() => {
      if (!lost && lastMessage > 0 && Date.now() - lastMessage > 5000) setBanner('reconnecting', `no update for ${age(Date.now() - lastMessage)}`);
    }, 1000);
    window.addEventListener('pagehide', () => {
      clearTimeout(retryTimer);
      clearInterval(staleTimer);
      source.close();
    });
  }

  /** Sends JSON (or nothing) and resolves with {ok, status, body}; the API's {"error"} is the message shown. */
  async function request(method, url, body, headers) {
    const init = { method, headers: Object.assign({}, headers || {}) };
    if (body !== undefined) {
      init.headers['content-type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    try {
      const res = await fetch(url, init);
      const text = await res.text();
      let parsed;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = { error: text };
      }
      return { ok: res.ok, status: res.status, body: parsed };
    } catch (err) {
      return { ok: false, status: 0, body: { error: `request failed: ${err.message}` } };
    }
  }

  window.StatusKit = { el, fmt, age, bar, sparkline, tile, follow, request };
})();
