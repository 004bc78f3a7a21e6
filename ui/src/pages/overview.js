// Overview: nodes, job counts of the last 24 h, throughput, next runs, recent failures.
import uPlot from 'uplot';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, caps, Err, html, Link, Loading, num, StateBadge, Time, useApi, useEvents } from '../lib.js';

const DAY = 86400000;

// Per-state counts since a time: /jobs/counts when the daemon has it, else
// counted from the job list (capped at 1000 per state).
async function counts(sinceIso) {
  if ((await caps()).has('GET', '/jobs/counts')) {
    const r = await api('/jobs/counts', { query: { since: sinceIso } });
    return { counts: r.counts || r, exact: true };
  }
  const out = {};
  let capped = false;
  await Promise.all(['pending', 'running', 'failed', 'finished'].map(async (st) => {
    const q = { state: st, limit: 1000 };
    if (st === 'failed' || st === 'finished') q.from = sinceIso;
    const r = await api('/jobs', { query: q });
    out[st] = r.jobs.length;
    if (r.next_cursor) capped = true;
  }));
  return { counts: out, exact: !capped };
}

// Finished jobs and items per minute over the last 24 h: /stats/throughput
// when the daemon has it, else bucketed here from up to 5,000 ended jobs.
async function throughput() {
  const to = Date.now(), from = to - DAY;
  if ((await caps()).has('GET', '/stats/throughput')) {
    const r = await api('/stats/throughput', { query: { from: new Date(from).toISOString(), to: new Date(to).toISOString(), step: 60 } });
    const b = r.buckets || [];
    return {
      exact: true,
      x: b.map((x) => (typeof x.t === 'number' ? x.t : Date.parse(x.t)) / (x.t > 1e11 || typeof x.t === 'string' ? 1000 : 1)),
      finished: b.map((x) => x.finished), failed: b.map((x) => x.failed || 0), items: b.map((x) => x.items || 0),
    };
  }
  const n = 1440, step = 60000;
  const start = Math.floor(from / step) * step;
  const x = [], finished = new Array(n).fill(0), failed = new Array(n).fill(0), items = new Array(n).fill(0);
  for (let i = 0; i < n; i++) x.push((start + i * step) / 1000);
  let cursor = null, pages = 0;
  do {
    const r = await api('/jobs', { query: { state: 'finished,failed', from: new Date(from).toISOString(), limit: 1000, cursor } });
    for (const j of r.jobs) {
      const t = j.ended_ms || j.created_ms;
      const i = Math.floor((t - start) / step);
      if (i < 0 || i >= n) continue;
      if (j.state === 'failed') failed[i]++;
      else finished[i]++;
      items[i] += (j.stats && j.stats.items) || 0;
    }
    cursor = r.next_cursor;
  } while (cursor && ++pages < 5);
  return { exact: !cursor, x, finished, failed, items };
}

function css(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

function Chart({ data }) {
  const el = useRef(null);
  useEffect(() => {
    if (!el.current || !data) return;
    // the node itself: the ref is null once the page is left, and a resize
    // may still be reported then
    const node = el.current;
    const width = () => Math.max(280, node.clientWidth);
    const axis = { stroke: css('--muted'), grid: { stroke: css('--line'), width: 1 }, ticks: { stroke: css('--line') } };
    const plot = new uPlot({
      width: width(), height: 220,
      series: [
        {},
        { label: 'finished/min', stroke: css('--ok'), width: 1.5, fill: css('--ok-fill') },
        { label: 'failed/min', stroke: css('--bad'), width: 1.5 },
        { label: 'items/min', stroke: css('--accent'), width: 1.5, scale: 'items' },
      ],
      axes: [axis, { ...axis, label: 'jobs' }, { ...axis, side: 1, scale: 'items', label: 'items', grid: { show: false } }],
      scales: { x: { time: true } },
      legend: { live: true },
    }, [data.x, data.finished, data.failed, data.items], node);
    const ro = new ResizeObserver(() => plot.setSize({ width: width(), height: 220 }));
    ro.observe(node);
    return () => { ro.disconnect(); plot.destroy(); };
  }, [data]);
  return html`<div class="chart" ref=${el} role="img" aria-label="Jobs finished and items scraped per minute, last 24 hours"></div>`;
}

function useAsync(fn, deps) {
  const [st, set] = useState({ loading: true, data: null, error: null });
  const reload = () => fn().then((data) => set({ loading: false, data, error: null }), (error) => set((s) => ({ loading: false, data: s.data, error })));
  useEffect(() => { reload(); }, deps);
  return { ...st, reload };
}

export function Overview() {
  const since = new Date(Date.now() - DAY).toISOString();
  const nodes = useApi('/nodes', null, { poll: 10000 });
  const status = useApi('/status');
  const cnt = useAsync(() => counts(since), []);
  const tp = useAsync(throughput, []);
  useEffect(() => {
    const t = setInterval(() => document.visibilityState === 'visible' && tp.reload(), 60000);
    return () => clearInterval(t);
  }, []);
  const scheds = useApi('/schedules', { limit: 1000 });
  const fails = useApi('/jobs', { state: 'failed,lost', limit: 10 });
  // job events move the counts and the failures list: at most a reload a second
  const t = useRef(null);
  useEvents('job.', () => {
    if (t.current) return;
    t.current = setTimeout(() => { t.current = null; cnt.reload(); fails.reload(); nodes.reload(); }, 1000);
  });

  const next = [];
  for (const s of (scheds.data && scheds.data.schedules) || [])
    if (!s.paused && s.next_runs && s.next_runs.length) next.push({ s, at: s.next_runs[0] });
  next.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  const c = cnt.data && cnt.data.counts;
  const plus = cnt.data && !cnt.data.exact ? '+' : '';

  return html`
    <h1>Overview</h1>
    <section class="cards" aria-label="Jobs">
      <div class="card"><div class="big" id="count-running">${c ? num(c.running) : '…'}</div><div>running</div></div>
      <div class="card"><div class="big" id="count-pending">${c ? num(c.pending) : '…'}</div><div>queued</div></div>
      <div class="card"><div class="big" id="count-finished">${c ? num(c.finished) + plus : '…'}</div><div>finished, 24 h</div></div>
      <div class="card bad"><div class="big" id="count-failed">${c ? num(c.failed) + plus : '…'}</div><div>failed, 24 h</div></div>
    </section>
    <${Err} error=${cnt.error} what="counts" />

    <section>
      <h2>Nodes</h2>
      <${Loading} state=${nodes} empty=${nodes.data && !nodes.data.nodes.length && 'No nodes have registered.'}>
        <div class="table-wrap"><table>
          <thead><tr><th>node</th><th>state</th><th>slots used / free</th><th>heartbeat</th><th>version</th><th>started</th></tr></thead>
          <tbody>${nodes.data && nodes.data.nodes.map((n) => html`<tr>
            <td>${n.name}${n.self ? html` <span class="muted">(this)</span>` : ''}</td>
            <td><span class=${'badge ' + (n.state === 'alive' ? 'st-running' : 'st-failed')}>${n.state === 'alive' ? 'up' : 'down'}</span></td>
            <td>${n.running} / ${Math.max(0, n.slots - n.running)}</td>
            <td>${n.heartbeat_age_ms != null ? `${(n.heartbeat_age_ms / 1000).toFixed(1)} s ago` : '—'}</td>
            <td>${n.version || (n.self && status.data ? status.data.version : '—')}</td>
            <td><${Time} v=${n.started_at} /></td></tr>`)}</tbody>
        </table></div>
      </${Loading}>
    </section>

    <section>
      <h2>Throughput, last 24 h</h2>
      ${tp.error ? html`<${Err} error=${tp.error} />` : tp.loading ? html`<p class="loading">Loading…</p>` : html`
        <${Chart} data=${tp.data} />
        ${!tp.data.exact && html`<p class="muted small">Counted from the newest 5,000 ended jobs.</p>`}`}
    </section>

    <div class="two">
      <section>
        <h2>Next scheduled runs</h2>
        <${Loading} state=${scheds} empty=${scheds.data && !next.length && 'No active schedule has an upcoming run.'}>
          <ul class="plain">${next.slice(0, 10).map(({ s, at }) => html`<li><${Time} v=${at} /> · <${Link} to=${`/schedules/${s.id}`}>${s.name}</${Link}> <span class="muted">${s.project}/${s.spider}</span></li>`)}</ul>
        </${Loading}>
      </section>
      <section>
        <h2>Recent failures</h2>
        <${Loading} state=${fails} empty=${fails.data && !fails.data.jobs.length && 'No failed or lost jobs.'}>
          <ul class="plain" id="recent-failures">${fails.data && fails.data.jobs.map((j) => html`<li>
            <${Link} to=${`/jobs/${j.id}`}>#${j.id}</${Link}> ${j.project}/${j.spider} <${StateBadge} state=${j.state} />
            ${j.signal ? html` signal <code>${j.signal}</code>` : j.exit_code != null ? html` exit <code>${j.exit_code}</code>` : ''}
            · <${Time} v=${j.ended_at || j.created_at} /></li>`)}</ul>
        </${Loading}>
      </section>
    </div>`;
}
