// Berth dashboard: live updates without reloading. The server renders every page; this script only
// swaps in re-rendered regions sent over Server-Sent Events, appends log lines, keeps "2m ago" times
// current, and draws the charts with uPlot. No framework, no build step.
'use strict';

(function () {
  const body = document.body;

  // --- relative times -------------------------------------------------------------------------
  function ago(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + 's ago';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm' + (s % 60 ? (s % 60) + 's' : '') + ' ago';
    const h = Math.floor(m / 60);
    if (h < 48) return h + 'h' + (m % 60 ? (m % 60) + 'm' : '') + ' ago';
    return Math.floor(h / 24) + 'd ago';
  }
  function refreshTimes(root) {
    for (const t of root.querySelectorAll('time[datetime]'))
      t.textContent = ago(Date.now() - Date.parse(t.dateTime));
  }
  setInterval(() => refreshTimes(document), 5000);

  // --- live region ---------------------------------------------------------------------------
  // Elements marked data-keep (the log, the charts) survive an update: the new markup's placeholder
  // with the same id is replaced by the element already on the page.
  function swap(html) {
    const live = document.getElementById('live');
    const next = document.createElement('template');
    next.innerHTML = html;
    // Moving an element resets its scroll position: remember it, and put it back.
    const kept = [];
    for (const keep of live.querySelectorAll('[data-keep][id]')) {
      const placeholder = next.content.getElementById(keep.id);
      if (!placeholder) continue;
      kept.push([keep, keep.scrollTop]);
      placeholder.replaceWith(keep);
    }
    live.replaceChildren(next.content);
    for (const [el, top] of kept) el.scrollTop = top;
    refreshTimes(live);
  }

  if (body.dataset.live) {
    const es = new EventSource(body.dataset.live);
    es.addEventListener('open', () => {
      body.classList.add('live-on');
      body.classList.remove('live-off');
    });
    es.addEventListener('error', () => {
      body.classList.remove('live-on');
      body.classList.add('live-off');
    });
    // The server sends the region only when it differs from what this page was rendered with.
    es.addEventListener('html', (e) => swap(JSON.parse(e.data)));
    es.addEventListener('signout', () => location.assign('/dashboard/signin'));
    es.addEventListener('gone', () => es.close());
  }

  // --- log tail ------------------------------------------------------------------------------
  const MAX_LOG_CHARS = 400000;
  if (body.dataset.log) {
    const pre = document.getElementById('log');
    const es = new EventSource(body.dataset.log);
    let started = false;
    const append = (text, cls) => {
      if (!started) {
        pre.textContent = '';
        started = true;
      }
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      const span = document.createElement('span');
      if (cls) span.className = cls;
      span.textContent = text;
      pre.appendChild(span);
      while (pre.textContent.length > MAX_LOG_CHARS && pre.firstChild) pre.firstChild.remove();
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    };
    es.addEventListener('log', (e) => {
      const ch = JSON.parse(e.data);
      append(ch.data, ch.stream === 'stderr' ? 'err' : ch.stream === 'system' ? 'sys' : '');
    });
    es.addEventListener('end', (e) => {
      const end = JSON.parse(e.data);
      if (!started) append('(no output)\n', 'end');
      append(
        '\n— ' + end.state + (end.exit_code === null ? '' : ', exit code ' + end.exit_code) + ' —\n',
        'end',
      );
      es.close();
    });
    es.addEventListener('error', () => {
      if (!started) pre.textContent = 'waiting for the log…';
    });
  }

  // --- confirmations -------------------------------------------------------------------------
  document.addEventListener('submit', (e) => {
    const button = e.submitter || e.target.querySelector('button');
    if (button && button.dataset.confirm && !confirm(button.dataset.confirm)) e.preventDefault();
  });

  // --- charts --------------------------------------------------------------------------------
  // Whole steps for counts (no "1.5 instances"), and times as a clock shows them.
  const COUNT_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
  const pad = (n) => String(n).padStart(2, '0');
  const clock = (t, seconds) => {
    const d = new Date(t * 1000);
    return pad(d.getHours()) + ':' + pad(d.getMinutes()) + (seconds ? ':' + pad(d.getSeconds()) : '');
  };
  const COLORS = ['#2454d6', '#1d8348', '#b7791f', '#7b4fc9', '#c0392b', '#178a9c', '#8a6d3b', '#5a6478'];
  const charts = document.getElementById('charts');
  if (charts && window.uPlot) {
    let hours = 6;
    let plots = [];
    const size = (el) => ({ width: Math.max(280, el.clientWidth), height: 200 });
    const series = (label, i, extra) =>
      Object.assign(
        { label, stroke: COLORS[i % COLORS.length], width: 2, points: { show: false } },
        extra || {},
      );
    function draw(data) {
      for (const p of plots) p.destroy();
      plots = [];
      const t = data.samples.map((s) => Date.parse(s.at) / 1000);
      const types = [...new Set(data.samples.flatMap((s) => Object.keys(s.instances)))].sort();
      const defs = {
        queue: {
          counts: true,
          series: [series('waiting', 2), series('running', 1)],
          data: [data.samples.map((s) => s.queued), data.samples.map((s) => s.running)],
        },
        instances: {
          counts: true,
          series: types.map((name, i) =>
            series(name, i, { paths: window.uPlot.paths.stepped({ align: 1 }) }),
          ),
          data: types.map((name) => data.samples.map((s) => s.instances[name] || 0)),
        },
        spend: {
          series: [
            series('per hour', 0, {
              fill: 'rgba(36,84,214,0.08)',
              value: (u, v) => (v == null ? '–' : v.toFixed(4)),
            }),
          ],
          data: [data.samples.map((s) => s.spend_per_hour)],
        },
      };
      for (const el of charts.querySelectorAll('[data-chart]')) {
        el.querySelectorAll('.uplot, .empty').forEach((n) => n.remove());
        const def = defs[el.dataset.chart];
        if (t.length < 2 || def.series.length === 0) {
          const p = document.createElement('p');
          p.className = 'empty';
          p.textContent =
            t.length < 2 ? 'Collecting samples (one every 15 s)…' : 'No instances in this period.';
          el.appendChild(p);
          continue;
        }
        const span = t[t.length - 1] - t[0];
        const opts = Object.assign(size(el), {
          series: [{}].concat(def.series),
          axes: [
            { space: 70, values: (u, ticks) => ticks.map((x) => clock(x, span < 900)) },
            Object.assign({ size: 50 }, def.counts ? { incrs: COUNT_STEPS } : {}),
          ],
          scales: {
            x: { time: true },
            y: { range: (u, min, max) => [0, Math.max(def.counts ? 1 : 1e-9, max * 1.1)] },
          },
          legend: { live: false },
          cursor: { drag: { x: false, y: false } },
        });
        plots.push(new window.uPlot(opts, [t].concat(def.data), el));
      }
    }
    function load() {
      fetch(charts.dataset.src + '?hours=' + hours, { credentials: 'same-origin' })
        .then((r) => (r.ok ? r.json().then(draw) : null))
        .catch((err) => console.error('charts:', err));
    }
    for (const b of document.querySelectorAll('[data-range] button')) {
      b.addEventListener('click', () => {
        hours = Number(b.dataset.hours);
        for (const o of document.querySelectorAll('[data-range] button'))
          o.setAttribute('aria-pressed', String(o === b));
        load();
      });
    }
    load();
    setInterval(load, 30000);
    window.addEventListener('resize', () => {
      for (const p of plots) p.setSize(size(p.root.parentElement));
    });
  }
})();
