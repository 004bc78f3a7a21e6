// Queues: counts per queue; a queue's settings, keys and dead letters.
import { useRef, useState } from 'preact/hooks';
import { Action, api, html, Link, Loading, num, Time, useApi, useCaps } from '../lib.js';

// ready: due now; delayed: waiting for a later due time (waiting - past_due).
const COUNTS = [[(s) => s.past_due, 'ready'], [(s) => Math.max(0, s.waiting - s.past_due), 'delayed'],
  [(s) => s.inflight, 'leased'], [(s) => s.dead, 'dead'], [(s) => s.done, 'done'], [(s) => s.size, 'size'], [(s) => s.keys, 'keys']];

// Acks per minute of each queue, from the change of its `acked` counter
// between two polls (null until the second poll).
function useAckRates(qs) {
  const prev = useRef({});
  const rates = useRef({});
  const now = Date.now();
  for (const q of qs) {
    const p = prev.current[q.name];
    if (p && p.at < now - 1000 && p.acked !== q.stats.acked) {
      rates.current[q.name] = Math.max(0, (q.stats.acked - p.acked) * 60000 / (now - p.at));
      prev.current[q.name] = { acked: q.stats.acked, at: now };
    } else if (p && p.at < now - 1000) {
      rates.current[q.name] = 0;
      prev.current[q.name] = { acked: q.stats.acked, at: now };
    } else if (!p) {
      prev.current[q.name] = { acked: q.stats.acked, at: now };
    }
  }
  return rates.current;
}

export function Queues() {
  const list = useApi('/queues', null, { poll: 5000 });
  const qs = (list.data && list.data.queues) || [];
  const rates = useAckRates(qs);
  return html`
    <h1>Queues</h1>
    <${Loading} state=${list} empty=${list.data && !qs.length && 'No task queues. Crawls create them with PUT /api/v1/queues/{name}.'}>
      <div class="table-wrap"><table id="queues-table">
        <thead><tr><th>queue</th>${COUNTS.map(([, l]) => html`<th class="num">${l}</th>`)}<th class="num">put</th><th class="num">acked</th><th class="num">acks/min</th><th>key rate</th><th>state</th></tr></thead>
        <tbody>${qs.map((q) => html`<tr data-queue=${q.name}>
          <td><${Link} to=${`/queues/${encodeURIComponent(q.name)}`}>${q.name}</${Link}></td>
          ${COUNTS.map(([f]) => html`<td class="num">${num(f(q.stats))}</td>`)}
          <td class="num">${num(q.stats.put)}</td><td class="num">${num(q.stats.acked)}</td>
          <td class="num">${rates[q.name] == null ? '—' : num(Math.round(rates[q.name]))}</td>
          <td>${q.key_rate ? `${q.key_rate}/s (burst ${q.key_burst})` : '—'}</td>
          <td>${q.paused ? html`<span class="badge st-cancelled">paused</span>` : html`<span class="badge st-running">open</span>`}</td>
        </tr>`)}</tbody>
      </table></div>
    </${Loading}>`;
}

// Per-key politeness state: /queues/{name}/keys when the daemon has it.
function Keys({ name }) {
  const cp = useCaps();
  const ok = !!cp && cp.has('GET', '/queues/{name}/keys');
  const keys = useApi(ok ? `/queues/${encodeURIComponent(name)}/keys` : '', { limit: 100 }, { enabled: ok });
  if (!cp) return null;
  if (!ok) return html`<p class="muted small">This daemon does not list per-key state.</p>`;
  const ks = (keys.data && keys.data.keys) || [];
  return html`<${Loading} state=${keys} empty=${keys.data && !ks.length && 'No key holds a ready or leased element.'}>
    <div class="table-wrap"><table id="keys-table">
      <thead><tr><th>key</th><th class="num">ready</th><th class="num">leased</th><th class="num">tokens</th><th>state</th><th>blocked until</th><th>wakes</th></tr></thead>
      <tbody>${ks.map((k) => html`<tr>
        <td>${k.key}</td><td class="num">${num(k.ready)}</td><td class="num">${num(k.inflight)}</td>
        <td class="num">${k.tokens == null ? '—' : Number(k.tokens).toFixed(2)}</td>
        <td>${k.open === false ? html`<span class="badge st-cancelled">held</span>` : html`<span class="badge st-running">open</span>`}</td>
        <td><${Time} v=${k.blocked_until_ms} /></td><td><${Time} v=${k.wake_ms} /></td></tr>`)}</tbody>
    </table></div>
    ${keys.data && keys.data.next_cursor && html`<p class="muted small">The first ${ks.length} keys.</p>`}
  </${Loading}>`;
}

function Items({ name, state, onChange }) {
  const [cursor, setCursor] = useState(null);
  const [sel, setSel] = useState(new Set());
  const items = useApi(`/queues/${encodeURIComponent(name)}/items`, { state, limit: 100, cursor });
  const its = (items.data && items.data.items) || [];
  const ids = () => (sel.size ? [...sel] : null);
  const after = () => { setSel(new Set()); items.reload(); onChange(); };
  const toggle = (id) => { const s = new Set(sel); s.has(id) ? s.delete(id) : s.add(id); setSel(s); };
  return html`<div>
    ${state === 'dead' && html`<div class="toolbar">
      <${Action} disabled=${!its.length} run=${() => api(`/queues/${encodeURIComponent(name)}/requeue`, { method: 'POST', body: ids() ? { ids: ids() } : { state: 'dead' } })} onDone=${after}>${sel.size ? `Requeue ${sel.size} selected` : 'Requeue all dead'}</${Action}>
      <${Action} kind="danger" disabled=${!its.length} confirm="Purge these dead letters for good?" run=${() => api(`/queues/${encodeURIComponent(name)}/purge`, { method: 'POST', body: ids() ? { ids: ids() } : { state: 'dead' } })} onDone=${after}>${sel.size ? `Purge ${sel.size} selected` : 'Purge all dead'}</${Action}>
    </div>`}
    <${Loading} state=${items} empty=${items.data && !its.length && (state === 'dead' ? 'No dead letters.' : 'Empty.')}>
      <div class="table-wrap"><table id=${`items-${state || 'all'}`}>
        <thead><tr>${state === 'dead' && html`<th><span class="sr">select</span></th>`}<th>id</th><th>element</th><th>key</th><th>state</th><th class="num">deliveries</th><th>due</th><th>error</th></tr></thead>
        <tbody>${its.map((i) => html`<tr>
          ${state === 'dead' && html`<td><input type="checkbox" aria-label=${`select ${i.id}`} checked=${sel.has(i.id)} onChange=${() => toggle(i.id)} /></td>`}
          <td>${i.id}</td><td class="wrap"><code>${typeof i.element === 'string' ? i.element : JSON.stringify(i.element)}</code></td>
          <td>${i.key || '—'}</td><td>${i.state}</td><td class="num">${i.deliveries}</td><td><${Time} v=${i.due} /></td><td class="wrap">${i.error || ''}</td></tr>`)}</tbody>
      </table></div>
    </${Loading}>
    <nav class="pager">${cursor && html`<button type="button" onClick=${() => setCursor(null)}>« First</button>`}
      ${items.data && items.data.next_cursor && html`<button type="button" onClick=${() => setCursor(items.data.next_cursor)}>More »</button>`}</nav>
  </div>`;
}

export function QueuePage({ name }) {
  const q = useApi(`/queues/${encodeURIComponent(name)}`, null, { poll: 5000 });
  const d = q.data;
  const [tab, setTab] = useState('dead');
  if (!d) return html`<h1>Queue ${name}</h1><${Loading} state=${q} />`;
  const s = d.stats;
  return html`
    <h1>Queue ${d.name} ${d.paused ? html`<span class="badge st-cancelled">paused</span>` : ''}</h1>
    <div class="toolbar">
      <${Action} run=${() => api(`/queues/${encodeURIComponent(name)}/${d.paused ? 'resume' : 'pause'}`, { method: 'POST', body: {} })} onDone=${q.reload}>${d.paused ? 'Resume' : 'Pause'}</${Action}>
    </div>
    <section class="cards">${COUNTS.map(([f, l]) => html`<div class=${'card' + (l === 'dead' && s.dead ? ' bad' : '')}><div class="big" id=${`q-${l}`}>${num(f(s))}</div><div>${l}</div></div>`)}</section>
    <p class="muted small">oldest due <${Time} v=${s.oldest_due} /> · ${num(s.put)} put · ${num(s.acked)} acked</p>
    <details><summary>Settings</summary><dl class="kv">${['visibility', 'max_deliveries', 'backoff', 'backoff_max', 'max_inflight', 'key_mode', 'key_inflight', 'key_rate', 'key_burst', 'keep_done'].map((k) => html`<dt>${k}</dt><dd>${String(d[k])}</dd>`)}</dl></details>
    <section>
      <h2>Keys</h2>
      <${Keys} name=${name} />
    </section>
    <section>
      <div class="tabs" role="tablist">${[['dead', 'Dead letters'], ['waiting', 'Ready'], ['inflight', 'Leased'], ['', 'All']].map(([k, l]) => html`<button type="button" role="tab" aria-selected=${tab === k} class=${tab === k ? 'on' : 'ghost'} onClick=${() => setTab(k)}>${l}</button>`)}</div>
      <${Items} key=${tab} name=${name} state=${tab} onChange=${q.reload} />
    </section>`;
}
