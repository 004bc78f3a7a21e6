// The console's plumbing: the REST client, the live event stream, routing,
// data hooks and small shared components.
import { h } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';

export const html = htm.bind(h);
// Where the console is: its index.html's <base href>, "/ui/" as built and
// "<prefix>/ui/" behind a reverse proxy that sends its prefix (the daemon
// writes it in). Every URL here is built from it, so none leaves the prefix.
const BASE_PATH = new URL(document.baseURI).pathname.replace(/\/+$/, ''); // "/prefix/ui"
export const BASE = BASE_PATH;
// The daemon's root: "" or "/prefix"; the API, the docs and Scrapyd's pages are under it.
export const ROOT = BASE_PATH.replace(/\/ui$/, '');

// ---- REST -----------------------------------------------------------------

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }
}

export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {}))
    if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  const s = u.toString();
  return s ? `?${s}` : '';
}

// Absolute URLs from the origin: a page opened as http://user:pass@host/ui/
// would make a relative URL carry the credentials, which fetch refuses.
const ORIGIN = location.origin;

// Every call is same-origin: the browser sends its basic-auth credentials.
export async function api(path, { method = 'GET', query, body } = {}) {
  const opts = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body instanceof FormData) opts.body = body;
  else if (body !== undefined) {
    opts.body = JSON.stringify(body);
    opts.headers['Content-Type'] = 'application/json';
  }
  let r;
  try {
    r = await fetch(`${ORIGIN}${ROOT}/api/v1${path}${qs(query)}`, opts);
  } catch (e) {
    throw new ApiError(0, 'NETWORK', `cannot reach spiderd: ${e.message}`);
  }
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: a proxy's or the HTTP server's page */ }
  if (!r.ok) {
    const e = data && data.error;
    if (e) throw new ApiError(r.status, e.code, e.message, e.details);
    throw new ApiError(r.status, `HTTP ${r.status}`, (text || r.statusText).trim().slice(0, 300));
  }
  return data;
}

// What this daemon's API offers, from its index (GET /api/v1/): newer routes
// and filters are used only where they exist, so an older spiderd gets a
// console that degrades instead of failing requests.
let capsP = null;
export function caps() {
  if (!capsP) {
    capsP = api('/').then((idx) => {
      const routes = new Map();
      for (const r of idx.routes || []) routes.set(`${r.method} ${r.path.replace(/^\/api\/v1/, '')}`, new Set((r.params || []).map((p) => p.name)));
      return {
        has: (method, path) => routes.has(`${method} ${path}`),
        param: (method, path, name) => !!(routes.get(`${method} ${path}`) || new Set()).has(name),
      };
    }, () => ({ has: () => false, param: () => false }));
  }
  return capsP;
}

export function useCaps() {
  const [c, set] = useState(null);
  useEffect(() => { caps().then(set); }, []);
  return c;
}

// A route the daemon does not have (an older spiderd): degrade, don't fail.
export const missingRoute = (e) => e instanceof ApiError && (e.code === 'SPD_ENOROUTE' || (e.status === 404 && !e.code.startsWith('SPD_')) || e.status === 405);

// ---- live events (Server-Sent Events over fetch) ---------------------------
// One connection for the whole console; subscribers filter by type prefix.
// After a drop it reconnects with ?after=<last id seen>, so nothing is lost.

const subs = new Set();
const statusSubs = new Set();
let lastId = null, started = false, liveState = 'connecting';

function setLive(s) {
  liveState = s;
  statusSubs.forEach((f) => f(s));
}

let ctl = null, hidden = false, running = false;

async function streamLoop() {
  if (running) return;
  running = true;
  let delay = 1000;
  while (!hidden) {
    try {
      ctl = new AbortController();
      const r = await fetch(`${ORIGIN}${ROOT}/api/v1/events/stream${qs({ after: lastId })}`, {
        credentials: 'same-origin', headers: { Accept: 'text/event-stream' }, signal: ctl.signal,
      });
      if (!r.ok || !r.body) throw new Error(`HTTP ${r.status}`);
      setLive('live');
      delay = 1000;
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let id = null, data = null;
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) id = line.slice(4);
            else if (line.startsWith('data: ')) data = line.slice(6);
          }
          if (id !== null) lastId = Number(id);
          if (data) {
            let ev;
            try { ev = JSON.parse(data); } catch { continue; }
            subs.forEach((s) => { if (!s.prefix || ev.type.startsWith(s.prefix)) s.fn(ev); });
          }
        }
      }
    } catch { /* dropped or aborted: reconnect below */ }
    if (hidden) break;
    setLive('reconnecting');
    await new Promise((res) => setTimeout(res, delay));
    delay = Math.min(delay * 2, 15000);
  }
  running = false;
}

// A page kept in the back/forward cache would hold its stream's connection
// (and the browser allows six per host): close it on the way out, and open
// it again, from the last event seen, if the page comes back.
addEventListener('pagehide', () => { hidden = true; if (ctl) ctl.abort(); });
addEventListener('pageshow', (e) => { if (e.persisted && started) { hidden = false; setLive('connecting'); streamLoop(); } });

export function startEvents() {
  if (!started) { started = true; streamLoop(); }
}

export function useEvents(prefix, fn, deps = []) {
  const ref = useRef(fn);
  ref.current = fn;
  useEffect(() => {
    startEvents();
    const s = { prefix, fn: (e) => ref.current(e) };
    subs.add(s);
    return () => subs.delete(s);
  }, [prefix, ...deps]);
}

export function useLive() {
  const [s, set] = useState(liveState);
  useEffect(() => { statusSubs.add(set); return () => statusSubs.delete(set); }, []);
  return s;
}

// ---- routing (History API) -------------------------------------------------

const routeSubs = new Set();
export function navigate(to, replace = false) {
  if (to === location.pathname + location.search) return;
  history[replace ? 'replaceState' : 'pushState'](null, '', to);
  routeSubs.forEach((f) => f());
  if (!replace) window.scrollTo(0, 0);
}
addEventListener('popstate', () => routeSubs.forEach((f) => f()));
document.addEventListener('click', (e) => {
  const a = e.target.closest && e.target.closest('a[href]');
  if (!a || e.defaultPrevented || e.button || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith(BASE + '/')) return;
  e.preventDefault();
  navigate(url.pathname + url.search + url.hash);
});

export function useRoute() {
  const [, tick] = useState(0);
  useEffect(() => {
    const f = () => tick((n) => n + 1);
    routeSubs.add(f);
    return () => routeSubs.delete(f);
  }, []);
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) || '/' : '/';
  return { path, query: Object.fromEntries(new URLSearchParams(location.search)) };
}

// Filters live in the query string: bookmarkable and shareable.
export function setQuery(changes, replace = false) {
  const u = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined || v === null || v === '') u.delete(k);
    else u.set(k, v);
  }
  const s = u.toString();
  navigate(location.pathname + (s ? `?${s}` : ''), replace);
}

// ---- data hooks -------------------------------------------------------------

// { data, error, loading, reload } of an API GET, refetched when key changes.
export function useApi(path, query, { poll = 0, enabled = true } = {}) {
  const key = path + qs(query);
  const [st, set] = useState({ data: null, error: null, loading: true, key: null });
  const seq = useRef(0);
  const load = useCallback(async (quiet) => {
    if (!enabled || !path) return;
    const n = ++seq.current;
    if (!quiet) set((s) => ({ ...s, loading: true, error: null }));
    try {
      const data = await api(path, { query });
      if (n === seq.current) set({ data, error: null, loading: false, key });
    } catch (error) {
      if (n === seq.current) set((s) => ({ data: quiet ? s.data : null, error, loading: false, key }));
    }
  }, [key, enabled]);
  useEffect(() => { load(false); }, [load]);
  useEffect(() => {
    if (!poll) return;
    const t = setInterval(() => document.visibilityState === 'visible' && load(true), poll);
    return () => clearInterval(t);
  }, [load, poll]);
  return { ...st, reload: () => load(true) };
}

export function useDebounced(value, ms) {
  const [v, set] = useState(value);
  useEffect(() => { const t = setTimeout(() => set(value), ms); return () => clearTimeout(t); }, [value, ms]);
  return v;
}

// ---- formatting --------------------------------------------------------------

const pad = (n, w = 2) => String(n).padStart(w, '0');
export function toDate(v) {
  if (v === null || v === undefined || v === '') return null;
  const d = typeof v === 'number' ? new Date(v) : new Date(v);
  return isNaN(d) ? null : d;
}
export function fmtLocal(d, secs = true) {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}${secs ? ':' + pad(d.getSeconds()) : ''}`;
}
// A time in the viewer's zone, its UTC value in the title.
export function Time({ v, rel }) {
  const d = toDate(v);
  if (!d) return html`<span class="muted">—</span>`;
  return html`<time datetime=${d.toISOString()} title=${d.toISOString().replace('.000Z', 'Z') + ' UTC'}>${rel ? ago(d) : fmtLocal(d)}</time>`;
}
export function ago(d) {
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  const a = Math.abs(s);
  const t = a < 60 ? `${a}s` : a < 3600 ? `${Math.floor(a / 60)}m` : a < 86400 ? `${Math.floor(a / 3600)}h` : `${Math.floor(a / 86400)}d`;
  return s >= 0 ? `${t} ago` : `in ${t}`;
}
export function duration(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}
export const num = (n) => (n === null || n === undefined ? '—' : Number(n).toLocaleString());

// "k=v" lines <-> {k: v}
export function parsePairs(text) {
  const out = {};
  for (const line of (text || '').split('\n')) {
    const t = line.trim();
    if (!t) continue;
    const i = t.indexOf('=');
    if (i <= 0) throw new Error(`"${t}" is not key=value`);
    out[t.slice(0, i).trim()] = t.slice(i + 1);
  }
  return out;
}
export const pairsText = (o) => Object.entries(o || {}).map(([k, v]) => `${k}=${v}`).join('\n');

// ---- shared components --------------------------------------------------------

export function Err({ error, what }) {
  if (!error) return null;
  return html`<div class="error" role="alert"><strong>${what ? `${what}: ` : ''}${error.code && error.code !== 'NETWORK' ? error.code : 'Error'}</strong> ${error.message}</div>`;
}

export function Loading({ state, empty, children }) {
  if (state.error) return html`<${Err} error=${state.error} />`;
  if (state.loading && !state.data) return html`<p class="loading" aria-busy="true">Loading…</p>`;
  if (empty) return html`<p class="empty">${empty}</p>`;
  return children;
}

export function StateBadge({ state }) {
  return html`<span class=${'badge st-' + state}>${state}</span>`;
}

// A run's health beside the runs like it; nothing while it is not rated.
export function HealthBadge({ job }) {
  if (!job || !job.health) return null;
  const why = (job.health_reasons || []).join('; ');
  return html`<span class=${'badge hl-' + job.health} title=${why || 'as usual'} data-health=${job.health}>${job.health}</span>`;
}

// Bytes as MB or GB, for people.
export function bytes(n) {
  if (n == null) return '—';
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GB`;
  return `${Math.round(n / (1 << 20))} MB`;
}

export function Link({ to, children, ...rest }) {
  return html`<a href=${BASE + to} ...${rest}>${children}</a>`;
}

// A button that runs an async action, shows it busy, and its error in place.
export function Action({ run, children, confirm: ask, kind, disabled, onDone, title }) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState(null);
  const click = async () => {
    if (ask && !window.confirm(ask)) return;
    setBusy(true);
    setErr(null);
    try {
      const r = await run();
      onDone && onDone(r);
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<span class="action"><button type="button" class=${kind || ''} onClick=${click} disabled=${busy || disabled} title=${title}>${busy ? '…' : children}</button>${err && html`<${Err} error=${err} />`}</span>`;
}
