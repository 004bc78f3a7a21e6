// Jobs: the filtered, cursor-paged list, and a job's page (log, items, family, events).
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { Action, api, ApiError, caps, duration, Err, HealthBadge, html, Link, Loading, navigate, num, setQuery, StateBadge, Time, useApi, useCaps, useDebounced, useEvents, useRoute, BASE } from '../lib.js';

export const STATES = ['pending', 'running', 'finished', 'failed', 'cancelled', 'lost', 'paused'];

// datetime-local (viewer's zone) <-> ISO UTC in the URL
const toIso = (local) => (local ? new Date(local).toISOString() : '');
function toLocalInput(iso) {
  const d = iso ? new Date(iso) : null;
  if (!d || isNaN(d)) return '';
  const off = d.getTimezoneOffset() * 60000;
  return new Date(d.getTime() - off).toISOString().slice(0, 16);
}

export function JobTable({ jobs, showProject = true }) {
  const now = Date.now();
  return html`<div class="table-wrap"><table class="jobs">
    <thead><tr><th>id</th>${showProject && html`<th>project</th>`}<th>spider</th><th>state</th><th>node</th><th>created</th><th>duration</th><th class="num">items</th><th>exit</th></tr></thead>
    <tbody>${jobs.map((j) => html`<tr data-job=${j.id}>
      <td><${Link} to=${`/jobs/${j.id}`}>#${j.id}</${Link}></td>
      ${showProject && html`<td>${j.project}</td>`}
      <td>${j.spider}</td>
      <td><${StateBadge} state=${j.state} /> <${HealthBadge} job=${j} />${j.test && html` <span class="badge test-run" title="A test run: in no statistics and no schedule's history">test</span>`}</td>
      <td>${j.node || html`<span class="muted">—</span>`}</td>
      <td><${Time} v=${j.created_ms} /></td>
      <td>${j.started_ms ? duration((j.ended_ms || now) - j.started_ms) : '—'}</td>
      <td class="num">${j.stats ? num(j.stats.items) : '—'}</td>
      <td>${j.signal ? `sig ${j.signal}` : j.exit_code != null ? j.exit_code : ''}</td>
    </tr>`)}</tbody></table></div>`;
}

// The text filter (`q`) and `node` are newer API filters: an older daemon
// refuses them (400, details.field), and the page filters what it got.
export function Jobs() {
  const { query } = useRoute();
  const [text, setText] = useState(query.q || '');
  const dq = useDebounced(text, 350);
  useEffect(() => { if ((query.q || '') !== dq) setQuery({ q: dq, cursor: '' }, true); }, [dq]);
  const projects = useApi('/projects');
  const spiders = useApi(query.project ? `/projects/${encodeURIComponent(query.project)}/spiders` : '', null, { enabled: !!query.project });
  const nodes = useApi('/nodes');
  const cp = useCaps();
  const unsupported = cp ? { q: !cp.param('GET', '/jobs', 'q'), node: !cp.param('GET', '/jobs', 'node'), health: !cp.param('GET', '/jobs', 'health') } : {};
  const params = {
    project: query.project, spider: query.spider, state: query.state, from: query.from, to: query.to,
    node: unsupported.node ? '' : query.node, q: unsupported.q ? '' : query.q,
    health: unsupported.health ? '' : query.health,
    limit: query.limit || 50, cursor: query.cursor,
  };
  const list = useApi(cp ? '/jobs' : '', params, { enabled: !!cp });
  const t = useRef(null);
  useEvents('job.', () => {
    if (query.cursor || t.current) return; // only the first page moves; at most one reload a second
    t.current = setTimeout(() => { t.current = null; list.reload(); }, 1000);
  }, [query.cursor]);

  let jobs = (list.data && list.data.jobs) || [];
  if (unsupported.node && query.node) jobs = jobs.filter((j) => j.node === query.node);
  if (unsupported.q && query.q) {
    const needle = query.q.toLowerCase();
    jobs = jobs.filter((j) => JSON.stringify([j.id, j.job, j.project, j.spider, j.args, j.node, j.unique_key]).toLowerCase().includes(needle));
  }
  const states = (query.state || '').split(',').filter(Boolean);
  const toggleState = (s) => setQuery({ state: (states.includes(s) ? states.filter((x) => x !== s) : [...states, s]).join(','), cursor: '' });
  const set = (k) => (e) => setQuery({ [k]: e.target.value, cursor: '', ...(k === 'project' ? { spider: '' } : {}) });
  return html`
    <h1>Jobs</h1>
    <form class="filters" onSubmit=${(e) => e.preventDefault()} aria-label="Job filters">
      <label>Search <input type="search" data-search id="job-search" placeholder="id, job id, spider, args… ( / )" value=${text} onInput=${(e) => setText(e.target.value)} /></label>
      <label>Project <select id="f-project" value=${query.project || ''} onChange=${set('project')}>
        <option value="">all</option>
        ${projects.data && projects.data.projects.map((p) => html`<option value=${p.name}>${p.name}</option>`)}
      </select></label>
      <label>Spider ${query.project && spiders.data
        ? html`<select id="f-spider" value=${query.spider || ''} onChange=${set('spider')}><option value="">all</option>${spiders.data.spiders.map((s) => html`<option>${s}</option>`)}</select>`
        : html`<input id="f-spider" value=${query.spider || ''} onChange=${set('spider')} size="10" />`}</label>
      <label>Node <select id="f-node" value=${query.node || ''} onChange=${set('node')}>
        <option value="">all</option>
        ${nodes.data && nodes.data.nodes.map((n) => html`<option>${n.name}</option>`)}
      </select></label>
      ${!unsupported.health && html`<label>Health <select id="f-health" value=${query.health || ''} onChange=${set('health')}>
        <option value="">all</option>
        ${['ok', 'degraded', 'broken', 'none'].map((h) => html`<option value=${h}>${h === 'none' ? 'not rated' : h}</option>`)}
      </select></label>`}
      <label>From <input type="datetime-local" value=${toLocalInput(query.from)} onChange=${(e) => setQuery({ from: toIso(e.target.value), cursor: '' })} /></label>
      <label>To <input type="datetime-local" value=${toLocalInput(query.to)} onChange=${(e) => setQuery({ to: toIso(e.target.value), cursor: '' })} /></label>
      <fieldset class="states"><legend>State</legend>
        ${STATES.map((s) => html`<label class="chip"><input type="checkbox" checked=${states.includes(s)} onChange=${() => toggleState(s)} /> ${s}</label>`)}
      </fieldset>
      ${Object.keys(query).some((k) => k !== 'limit') && html`<a class="button ghost" href=${BASE + '/jobs'}>Clear</a>`}
    </form>
    ${(unsupported.q && query.q) || (unsupported.node && query.node) ? html`<p class="muted small">This daemon does not filter by ${[unsupported.q && 'text', unsupported.node && 'node'].filter(Boolean).join(' or ')}: only this page of results is filtered.</p>` : ''}
    <${Loading} state=${list} empty=${list.data && !jobs.length && (query.cursor ? 'No more jobs.' : 'No jobs match these filters.')}>
      <${JobTable} jobs=${jobs} />
    </${Loading}>
    <nav class="pager" aria-label="Pages">
      ${query.cursor && html`<a class="button" href=${BASE + '/jobs' + location.search.replace(/([?&])cursor=[^&]*&?/, '$1').replace(/[?&]$/, '')}>« Newest</a>`}
      ${list.data && list.data.next_cursor && html`<button type="button" id="older" onClick=${() => setQuery({ cursor: list.data.next_cursor })}>Older »</button>`}
    </nav>`;
}

// ---- a job's page ---------------------------------------------------------

// ANSI SGR colours to classes; everything else of an escape is dropped. Text
// is rendered as text nodes (never as HTML), so a log cannot inject markup.
const ANSI = /\x1b\[([0-9;]*)m|\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07/g;
function ansiSegments(text) {
  const out = [];
  let cls = '', last = 0, m;
  ANSI.lastIndex = 0;
  while ((m = ANSI.exec(text))) {
    if (m.index > last) out.push([cls, text.slice(last, m.index)]);
    last = ANSI.lastIndex;
    if (m[1] !== undefined) {
      for (const c of (m[1] || '0').split(';').map(Number)) {
        if (c === 0) cls = '';
        else if (c === 1) cls += ' a-b';
        else if ((c >= 30 && c <= 37) || (c >= 90 && c <= 97)) cls = cls.replace(/ a-f\d+/g, '') + ` a-f${c}`;
      }
    }
  }
  if (last < text.length) out.push([cls, text.slice(last)]);
  return out;
}

function highlight(text, needle, counter) {
  if (!needle) return text;
  const parts = [];
  const low = text.toLowerCase(), n = needle.toLowerCase();
  let i = 0, j;
  while ((j = low.indexOf(n, i)) >= 0) {
    if (j > i) parts.push(text.slice(i, j));
    parts.push(html`<mark data-hit=${counter.n++}>${text.slice(j, j + n.length)}</mark>`);
    i = j + n.length;
  }
  if (i < text.length) parts.push(text.slice(i));
  return parts;
}

const LOG_KEEP = 2 << 20; // characters kept on screen (the tail)

function LogView({ job }) {
  const [log, setLog] = useState({ text: '', offset: null, next: 0, running: true, error: null, cut: false });
  const [search, setSearch] = useState('');
  const [follow, setFollow] = useState(true);
  const pre = useRef(null);
  const st = useRef({ next: null, busy: false, running: true });
  const pull = async () => {
    if (st.current.busy) return;
    st.current.busy = true;
    try {
      for (let round = 0; round < 20; round++) {
        // start with the last 256 KiB of a long log
        const offset = st.current.next === null ? -262144 : st.current.next;
        const r = await api(`/jobs/${job.id}/log`, { query: { offset, limit: 262144 } });
        const first = st.current.next === null;
        st.current.next = r.next_offset;
        st.current.running = r.running;
        setLog((l) => {
          let text = (first ? '' : l.text) + r.text;
          let cut = l.cut || (first && r.offset > 0);
          if (text.length > LOG_KEEP) { text = text.slice(text.length - LOG_KEEP); cut = true; }
          return { text, next: r.next_offset, size: r.size, running: r.running, error: null, cut };
        });
        if (r.eof || !r.text) break;
      }
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 'SPD_ENOFILE')) setLog((l) => ({ ...l, error: e }));
      else setLog((l) => ({ ...l, running: false, missing: true }));
    } finally {
      st.current.busy = false;
    }
  };
  // a pending job has no log yet: asking would only get a 404
  const started = job.state !== 'pending';
  useEffect(() => {
    if (!started) return;
    pull();
    const t = setInterval(() => { if (st.current.running || job.state === 'running') pull(); }, 1000);
    return () => clearInterval(t);
  }, [job.id, started]);
  useEvents('job.', (e) => { if (e.job_id === job.id && started) pull(); }, [job.id, started]);
  useEffect(() => {
    if (follow && pre.current && !search) pre.current.scrollTop = pre.current.scrollHeight;
  }, [log.text, follow]);
  const counter = { n: 0 };
  const body = useMemo(() => ansiSegments(log.text), [log.text]);
  const rendered = body.map(([cls, t]) => (cls ? html`<span class=${cls}>${highlight(t, search, counter)}</span>` : highlight(t, search, counter)));
  const hits = counter.n;
  const jump = () => {
    const m = pre.current && pre.current.querySelector('mark');
    if (m) m.scrollIntoView({ block: 'center' });
  };
  return html`<section>
    <h2>Log ${log.running && html`<span class="badge st-running">following</span>`}</h2>
    <div class="toolbar">
      <label>Find in log <input type="search" id="log-search" value=${search} onInput=${(e) => setSearch(e.target.value)} onKeyDown=${(e) => e.key === 'Enter' && jump()} /></label>
      ${search && html`<span class="muted" id="log-hits">${hits} match${hits === 1 ? '' : 'es'}</span>`}
      <label class="chip"><input type="checkbox" checked=${follow} onChange=${(e) => setFollow(e.target.checked)} /> follow</label>
      <span class="muted small">${log.size != null ? `${num(log.size)} bytes` : ''}</span>
    </div>
    <${Err} error=${log.error} what="log" />
    ${log.cut && html`<p class="muted small">Showing the end of the log.</p>`}
    ${!started ? html`<p class="empty">The job has not started.</p>` : log.missing ? html`<p class="empty">No log file.</p>` : html`<pre class="log" id="job-log" ref=${pre} tabindex="0" aria-label="Job log">${rendered}</pre>`}
  </section>`;
}

// The items file (JSON lines): the first N as a table, and all of it as JSONL or CSV.
async function allItems(id) {
  let off = 0, text = '';
  for (;;) {
    const r = await api(`/jobs/${id}/items`, { query: { offset: off, limit: 1 << 20 } });
    text += r.text;
    if (r.eof || !r.text) return text;
    off = r.next_offset;
  }
}
function parseLines(text) {
  return text.split('\n').filter((l) => l.trim()).map((l) => { try { return JSON.parse(l); } catch { return { _raw: l }; } });
}
function download(name, data, type) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([data], { type }));
  a.download = name;
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}
function toCsv(items) {
  const cols = [...new Set(items.flatMap((o) => Object.keys(o)))];
  const cell = (v) => {
    const s = v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [cols.map(cell).join(','), ...items.map((o) => cols.map((c) => cell(o[c])).join(','))].join('\r\n') + '\r\n';
}

function ItemsView({ job }) {
  const N = 100;
  const [st, set] = useState({ loading: true });
  // nothing to ask for before the crawl starts, or after one that scraped nothing
  const none = job.state === 'pending' || (job.stats && !job.stats.items && job.state !== 'running');
  useEffect(() => {
    if (none) return;
    api(`/jobs/${job.id}/items`, { query: { offset: 0, limit: 262144 } }).then(
      (r) => set({ items: parseLines(r.text.slice(0, r.eof ? undefined : r.text.lastIndexOf('\n') + 1)).slice(0, N), more: !r.eof, size: r.size }),
      (e) => set({ error: e }));
  }, [job.id, job.state]);
  if (none) return html`<section><h2>Items</h2><p class="empty">No items${job.state === 'pending' ? ' yet' : ''}.</p></section>`;
  if (st.loading) return html`<section><h2>Items</h2><p class="loading">Loading…</p></section>`;
  if (st.error && st.error.code === 'SPD_ENOFILE') return html`<section><h2>Items</h2><p class="empty">No items file (items_dir is not set, or a feed URL).</p></section>`;
  if (st.error) return html`<section><h2>Items</h2><${Err} error=${st.error} /></section>`;
  const cols = [...new Set(st.items.flatMap((o) => Object.keys(o)))].slice(0, 12);
  const fmt = (v) => (v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  return html`<section>
    <h2>Items <span class="muted small">${st.items.length}${st.more ? '+' : ''} shown, ${num(st.size)} bytes</span></h2>
    <div class="toolbar">
      <${Action} run=${async () => download(`${job.job}.jl`, await allItems(job.id), 'application/x-ndjson')}>Download JSONL</${Action}>
      <${Action} run=${async () => download(`${job.job}.csv`, toCsv(parseLines(await allItems(job.id))), 'text/csv')}>Download CSV</${Action}>
    </div>
    ${st.items.length ? html`<div class="table-wrap"><table class="items" id="items-table">
      <thead><tr>${cols.map((c) => html`<th>${c}</th>`)}</tr></thead>
      <tbody>${st.items.map((o) => html`<tr>${cols.map((c) => html`<td>${fmt(o[c])}</td>`)}</tr>`)}</tbody>
    </table></div>` : html`<p class="empty">No items.</p>`}
  </section>`;
}

function KV({ obj }) {
  const e = Object.entries(obj || {});
  if (!e.length) return html`<span class="muted">none</span>`;
  return html`<dl class="kv">${e.map(([k, v]) => html`<dt>${k}</dt><dd><code>${typeof v === 'object' ? JSON.stringify(v) : String(v)}</code></dd>`)}</dl>`;
}

// A job's meta as a key/value table: strings as they are, anything else as
// its JSON (the key is the one a meta.KEY=VALUE filter names).
function MetaTable({ meta }) {
  const e = Object.entries(meta || {});
  if (!e.length) return html`<p class="empty" id="job-meta-empty">No meta.</p>`;
  return html`<div class="table-wrap"><table class="kv-table" id="job-meta">
    <thead><tr><th>key</th><th>value</th></tr></thead>
    <tbody>${e.map(([k, v]) => html`<tr><td><code>${k}</code></td><td>${typeof v === 'string' ? v : html`<code>${JSON.stringify(v)}</code>`}</td></tr>`)}</tbody>
  </table></div>`;
}

// Re-run: the same template again (the daemon's rerun when it has one);
// retry: the same, pinned to the version that ran.
async function rerun(j, pin) {
  if (!pin && (await caps()).has('POST', '/jobs/{id}/rerun')) return api(`/jobs/${j.id}/rerun`, { method: 'POST', body: {} });
  const body = { project: j.project, spider: j.spider, args: j.args, settings: j.settings, priority: j.priority };
  if (pin && j.version) body.version = j.version;
  return api('/jobs', { method: 'POST', body });
}

export function JobPage({ id }) {
  const job = useApi(`/jobs/${encodeURIComponent(id)}`);
  const j = job.data;
  const events = useApi('/events', { job: j && j.id, limit: 200 }, { enabled: !!j });
  const kids = useApi('/jobs', { parent: j && j.id, limit: 100 }, { enabled: !!j });
  useEvents('job.', (e) => { if (j && e.job_id === j.id) { job.reload(); events.reload(); } }, [j && j.id]);
  useEffect(() => {
    if (!j || !['pending', 'running'].includes(j.state)) return;
    const t = setInterval(job.reload, 3000);
    return () => clearInterval(t);
  }, [j && j.state]);
  if (!j) return html`<h1>Job ${id}</h1><${Loading} state=${job} />`;
  const active = j.state === 'pending' || j.state === 'running' || j.state === 'paused';
  const segments = j.segments || [];
  const stats = j.stats || {};
  return html`
    <h1>Job #${j.id} <span class="muted">${j.project}/${j.spider}</span> <${StateBadge} state=${j.state} /> <${HealthBadge} job=${j} />${j.test && html` <span class="badge test-run" id="job-test" title="A test run: in no statistics and no schedule's history">test run</span>`}</h1>
    <${Err} error=${job.error} />
    <div class="toolbar">
      ${active && html`<${Action} kind="danger" run=${() => api(`/jobs/${j.id}/cancel`, { method: 'POST', body: {} })} onDone=${job.reload}>Cancel</${Action}>`}
      ${j.state === 'running' && html`<${Action} run=${() => api(`/jobs/${j.id}/pause`, { method: 'POST', body: {} })} onDone=${job.reload} title="Stop the crawl with its state kept, to resume it later">Pause</${Action}>`}
      ${j.state === 'paused' && html`<${Action} run=${() => api(`/jobs/${j.id}/resume`, { method: 'POST', body: {} })} onDone=${job.reload} title="Queue it again: it goes on from where it stopped">Resume</${Action}>`}
      ${active && j.state === 'running' && html`<${Action} kind="danger" confirm="Kill the crawl's processes at once (SIGKILL)?" run=${() => api(`/jobs/${j.id}/cancel`, { method: 'POST', body: { signal: 'KILL' } })} onDone=${job.reload}>Kill</${Action}>`}
      ${!active && html`<${Action} run=${() => rerun(j, false)} onDone=${(r) => navigate(`${BASE}/jobs/${r.id}`)} title="Run it again (the latest version)">Re-run</${Action}>`}
      ${['failed', 'lost', 'cancelled'].includes(j.state) && html`<${Action} run=${() => rerun(j, true)} onDone=${(r) => navigate(`${BASE}/jobs/${r.id}`)} title="Run the same version again">Retry</${Action}>`}
    </div>
    <div class="two">
      <section>
        <h2>Job</h2>
        <dl class="kv">
          <dt>job id</dt><dd><code>${j.job}</code></dd>
          <dt>version</dt><dd>${j.version || 'latest'}</dd>
          <dt>node</dt><dd>${j.node || '—'}${j.pid ? ` (pid ${j.pid})` : ''}</dd>
          <dt>priority</dt><dd>${j.priority}</dd>
          <dt>created</dt><dd><${Time} v=${j.created_ms} /></dd>
          <dt>started</dt><dd><${Time} v=${j.started_ms} /></dd>
          <dt>ended</dt><dd><${Time} v=${j.ended_ms} /></dd>
          <dt>duration</dt><dd>${j.started_ms ? duration((j.ended_ms || Date.now()) - j.started_ms) : '—'}</dd>
          <dt>exit</dt><dd id="job-exit">${j.signal ? `signal ${j.signal}` : j.exit_code != null ? `code ${j.exit_code}` : '—'}</dd>
          <dt>attempt</dt><dd>${j.attempt} of ${1 + (j.max_retries || 0)}${j.retry_of ? html` (retry of <${Link} to=${`/jobs/${j.retry_of}`}>#${j.retry_of}</${Link}>)` : ''}</dd>
          ${j.schedule_id && html`<dt>schedule</dt><dd><${Link} to=${`/schedules/${j.schedule_id}`}>#${j.schedule_id}</${Link}></dd>`}
          ${j.parent_id && html`<dt>parent</dt><dd><${Link} to=${`/jobs/${j.parent_id}`}>#${j.parent_id}</${Link}></dd>`}
          ${j.after && j.after.length > 0 && html`<dt>after</dt><dd>${j.after.map((id, i) => html`${i ? ', ' : ''}<${Link} to=${`/jobs/${id}`}>#${id}</${Link}>`)}</dd>`}
          ${j.unique_key && html`<dt>unique key</dt><dd><code>${j.unique_key}</code></dd>`}
          ${j.timeout && html`<dt>timeout</dt><dd>${j.timeout} s</dd>`}
          <dt>test run</dt><dd id="job-test-flag">${j.test ? 'yes: in no statistics and no schedule history' : 'no'}</dd>
        </dl>
        <h3>Meta</h3><${MetaTable} meta=${j.meta} />
        <h3>Arguments</h3><${KV} obj=${j.args} />
        <h3>Settings</h3><${KV} obj=${j.settings} />
      </section>
      <section>
        <h2>Stats</h2>
        ${j.stats ? html`<dl class="kv" id="job-stats">
          <dt>items</dt><dd>${num(stats.items)}</dd><dt>requests</dt><dd>${num(stats.requests)}</dd>
          <dt>responses</dt><dd>${num(stats.responses)}</dd><dt>errors</dt><dd>${num(stats.errors)}</dd>
          <dt>finish reason</dt><dd>${stats.finish_reason || '—'}</dd><dt>elapsed</dt><dd>${stats.elapsed != null ? `${stats.elapsed} s` : '—'}</dd>
        </dl>
        ${stats.scrapy && html`<details><summary>All Scrapy stats</summary><${KV} obj=${stats.scrapy} /></details>`}` : html`<p class="empty">No stats yet.</p>`}
        ${j.health && html`<h2>Health</h2><div id="job-health"><p><${HealthBadge} job=${j} /> beside the runs like it${j.schedule_id ? ' (this schedule\'s)' : ' (this spider\'s, with the same arguments)'}</p>
          ${(j.health_reasons || []).length ? html`<ul class="plain">${j.health_reasons.map((r) => html`<li>${r}</li>`)}</ul>` : html`<p class="muted">As usual.</p>`}</div>`}
        ${segments.length > 0 && html`<h2>Segments</h2>
        <table class="segments" id="job-segments"><thead><tr><th>#</th><th>node</th><th>started</th><th>ended</th><th>items</th><th>reason</th></tr></thead>
          <tbody>${segments.map((s, i) => html`<tr><td>${i + 1}</td><td>${s.node || '—'}</td><td>${s.started || '—'}</td><td>${s.ended || '—'}</td><td>${num(s.items)}</td><td>${s.reason}</td></tr>`)}</tbody></table>`}
        <h2>History</h2>
        <${Loading} state=${events} empty=${events.data && !events.data.events.length && 'No events.'}>
          <ol class="timeline" id="job-history">${events.data && events.data.events.map((e) => html`<li><${Time} v=${e.ts_ms} /> <strong>${e.type.replace(/^job\./, '')}</strong>${e.data && e.data.reasons ? ` ${e.data.reasons.join('; ')}` : ''}${e.data && e.data.exit_code != null ? ` exit ${e.data.exit_code}` : ''}${e.data && e.data.signal ? ` signal ${e.data.signal}` : ''}${e.data && e.data.node ? ` on ${e.data.node}` : ''}</li>`)}</ol>
        </${Loading}>
        <h2>Children</h2>
        <${Loading} state=${kids} empty=${kids.data && !kids.data.jobs.length && 'No child jobs.'}>
          <${JobTable} jobs=${(kids.data && kids.data.jobs) || []} />
        </${Loading}>
      </section>
    </div>
    <${LogView} job=${j} />
    <${ItemsView} job=${j} />`;
}
