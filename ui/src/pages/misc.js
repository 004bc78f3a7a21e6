// Events (the activity feed, live) and Nodes.
import { useEffect, useState } from 'preact/hooks';
import { EVENT_TYPES } from 'spiderd:events';
import { api, bytes, Err, html, Link, Loading, setQuery, StateBadge, Time, useApi, useEvents, useLive, useRoute } from '../lib.js';

// Every event type (the daemon's list, src/core/event.h), each family's
// prefix first: "job." shows every job event.
const TYPES = EVENT_TYPES.flatMap((t, i) => {
  const fam = t.name.slice(0, t.name.indexOf('.') + 1);
  const first = i === 0 || !EVENT_TYPES[i - 1].name.startsWith(fam);
  return first ? [{ name: fam, meaning: `every ${fam.slice(0, -1)} event` }, t] : [t];
});

// Newest first, a page at a time (order=desc, then before= the page's oldest).
const PAGE = 200;

function describe(e) {
  const d = e.data || {};
  const bits = [];
  if (d.project) bits.push(`${d.project}/${d.spider || ''}`);
  if (d.name) bits.push(d.name);
  if (d.exit_code != null) bits.push(`exit ${d.exit_code}`);
  if (d.signal) bits.push(`signal ${d.signal}`);
  if (d.node) bits.push(`on ${d.node}`);
  if (d.reason) bits.push(d.reason);
  return bits.join(' · ');
}

export function Events() {
  const { query } = useRoute();
  const type = query.type || '';
  const [st, set] = useState({ loading: true, events: [], before: null });
  const live = useLive();
  const load = async (before) => {
    set((s) => ({ ...s, loading: true, error: null }));
    try {
      const r = await api('/events', { query: { order: 'desc', before, type: type || null, limit: PAGE } });
      set((s) => ({ loading: false, events: before != null ? [...s.events, ...r.events] : r.events, before: r.next_before }));
    } catch (error) {
      set((s) => ({ ...s, loading: false, error }));
    }
  };
  useEffect(() => { load(null); }, [type]);
  useEvents(type || '', (e) => set((s) => (s.events.some((x) => x.id === e.id) ? s : { ...s, events: [e, ...s.events].slice(0, 5000) })), [type]);
  return html`
    <h1>Events <span class=${'live is-' + live}>${live === 'live' ? '● live' : '○ ' + live}</span></h1>
    <form class="filters" onSubmit=${(e) => e.preventDefault()}>
      <label>Type <select id="event-type" value=${type} onChange=${(e) => setQuery({ type: e.target.value })}>
        <option value="">all</option>${TYPES.map((t) => html`<option value=${t.name} title=${t.meaning}>${t.name.endsWith('.') ? t.name + '*' : t.name}</option>`)}</select></label>
    </form>
    <${Err} error=${st.error} />
    ${st.loading && !st.events.length ? html`<p class="loading">Loading…</p>` : !st.events.length ? html`<p class="empty">No events${type ? ` of type ${type}` : ''}.</p>` : html`
      <div class="table-wrap"><table id="events-table">
        <thead><tr><th>time</th><th>type</th><th>job</th><th>schedule</th><th>details</th></tr></thead>
        <tbody>${st.events.map((e) => html`<tr data-event=${e.id}>
          <td><${Time} v=${e.ts_ms} /></td><td><code>${e.type}</code></td>
          <td>${e.job_id ? html`<${Link} to=${`/jobs/${e.job_id}`}>#${e.job_id}</${Link}>` : ''}</td>
          <td>${e.schedule_id ? html`<${Link} to=${`/schedules/${e.schedule_id}`}>#${e.schedule_id}</${Link}>` : ''}</td>
          <td>${describe(e)}</td></tr>`)}</tbody>
      </table></div>
      ${st.before != null && html`<nav class="pager"><button type="button" disabled=${st.loading} onClick=${() => load(st.before)}>Older »</button></nav>`}`}`;
}

export function Nodes() {
  const nodes = useApi('/nodes', null, { poll: 5000 });
  const running = useApi('/jobs', { state: 'running', limit: 1000 }, { poll: 5000 });
  const status = useApi('/status', null, { poll: 5000 });
  const byNode = {};
  for (const j of (running.data && running.data.jobs) || []) (byNode[j.node] = byNode[j.node] || []).push(j);
  const ns = (nodes.data && nodes.data.nodes) || [];
  return html`
    <h1>Nodes</h1>
    ${nodes.data && html`<p class="muted">${nodes.data.shared ? 'Nodes share one store.' : 'A single node on a private store.'}</p>`}
    <${Loading} state=${nodes} empty=${nodes.data && !ns.length && 'No nodes.'}>
      <div class="node-grid">${ns.map((n) => {
        const jobs = byNode[n.name] || [];
        const load = n.slots ? n.running / n.slots : 0;
        return html`<section class="box node" data-node=${n.name}>
          <h2>${n.name} <span class=${'badge ' + (n.state === 'alive' ? 'st-running' : 'st-failed')}>${n.state === 'alive' ? 'up' : n.state}</span></h2>
          <p>heartbeat <strong>${n.heartbeat_age_ms != null ? `${(n.heartbeat_age_ms / 1000).toFixed(1)} s` : '—'}</strong> ago · started <${Time} v=${n.started_at} /></p>
          <p><meter min="0" max=${n.slots || 1} value=${n.running} aria-label="slots used"></meter> ${n.running} of ${n.slots} slots (${Math.round(load * 100)} %)</p>
          ${n.memory_free != null && (n.memory_free || n.memory_reserved) ? html`<p class="node-memory">memory: <strong>${bytes(n.memory_reserved)}</strong> reserved by its crawls, <strong>${bytes(n.memory_free)}</strong> free for more</p>` : ''}
          ${n.self && status.data && status.data.memory && !(n.memory_free || n.memory_reserved) ? html`<p class="node-memory">memory: <strong>${bytes(status.data.memory.reserved)}</strong> reserved by its crawls, <strong>${bytes(status.data.memory.free)}</strong> free for more</p>` : ''}
          ${n.url && html`<p class="muted small">${n.url}</p>`}
          ${jobs.length ? html`<ul class="plain">${jobs.map((j) => html`<li><${Link} to=${`/jobs/${j.id}`}>#${j.id}</${Link}> ${j.project}/${j.spider} <${StateBadge} state=${j.state} /> <${Time} v=${j.started_ms} rel /></li>`)}</ul>` : html`<p class="empty">No running jobs.</p>`}
        </section>`;
      })}</div>
    </${Loading}>`;
}
