// Schedules: the list, the create/edit form with a live cron preview, a
// schedule's page (actions, upcoming and missed runs, its jobs).
import cronstrue from 'cronstrue';
import { useEffect, useState } from 'preact/hooks';
import { Action, api, caps, BASE, Err, html, Link, Loading, navigate, num, pairsText, parsePairs, StateBadge, Time, useApi, useDebounced } from '../lib.js';
import { JobTable } from './jobs.js';

const MACROS = { '@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *', '@monthly': '0 0 1 * *', '@weekly': '0 0 * * 0', '@daily': '0 0 * * *', '@midnight': '0 0 * * *', '@hourly': '0 * * * *' };

export function cronWords(expr) {
  const e = (expr || '').trim();
  if (!e) return '';
  try {
    return cronstrue.toString(MACROS[e.toLowerCase()] || e, { use24HourTimeFormat: true, throwExceptionOnParseError: true });
  } catch {
    return '';
  }
}

function when(s) {
  if (s.kind === 'cron' || s.cron) return html`<code>${s.cron}</code> <span class="muted">${cronWords(s.cron)}</span>`;
  if (s.interval) return `every ${s.interval} s`;
  if (s.at) return html`once at <${Time} v=${s.at} />`;
  return '—';
}

export function Schedules() {
  const list = useApi('/schedules', { limit: 1000 });
  const ss = (list.data && list.data.schedules) || [];
  return html`
    <h1>Schedules <a class="button" href=${BASE + '/schedules/new'} id="new-schedule">New schedule</a></h1>
    <${Loading} state=${list} empty=${list.data && !ss.length && 'No schedules yet.'}>
      <div class="table-wrap"><table id="schedules-table">
        <thead><tr><th>name</th><th>spider</th><th>when</th><th>zone</th><th>next run</th><th>state</th><th></th></tr></thead>
        <tbody>${ss.map((s) => html`<tr data-schedule=${s.name}>
          <td><${Link} to=${`/schedules/${s.id}`}>${s.name}</${Link}></td>
          <td>${s.project}/${s.spider}</td>
          <td>${when(s)}</td>
          <td>${s.tz}</td>
          <td>${s.next_runs && s.next_runs.length ? html`<${Time} v=${s.next_runs[0]} />` : '—'}</td>
          <td><${PausedBadge} s=${s} /></td>
          <td class="actions">
            <${Action} kind="small" run=${() => pauseOrResume(s)} onDone=${list.reload}>${s.paused ? 'Resume' : 'Pause'}</${Action}>
            <${Action} kind="small" run=${() => api(`/schedules/${s.id}/run`, { method: 'POST', body: {} })} onDone=${(j) => navigate(`${BASE}/jobs/${j.id || (j.job && j.job.id)}`)}>Run now</${Action}>
          </td>
        </tr>`)}</tbody>
      </table></div>
    </${Loading}>`;
}

let zones = null;
function timeZones() {
  if (!zones) { try { zones = Intl.supportedValuesOf('timeZone'); } catch { zones = ['UTC']; } if (!zones.includes('UTC')) zones.unshift('UTC'); }
  return zones;
}

function weekday(ms, tz) {
  try { return new Intl.DateTimeFormat('en', { weekday: 'short', timeZone: tz || 'UTC' }).format(new Date(ms)); } catch { return ''; }
}

// The next runs of a cron in a zone, from the daemon (so they are exactly
// what it will fire); its error in place while the expression is wrong.
function CronPreview({ cron, tz }) {
  const c = useDebounced(cron, 300), z = useDebounced(tz, 300);
  const [st, set] = useState({});
  useEffect(() => {
    if (!c.trim()) return set({});
    let live = true;
    set((s) => ({ ...s, loading: true }));
    caps().then((cp) => {
      if (!cp.has('GET', '/schedules/preview')) return live && set({ unsupported: true });
      return api('/schedules/preview', { query: { cron: c, tz: z || 'UTC', count: 10 } }).then(
        (r) => live && set({ next: r.next || [] }),
        (e) => live && set({ error: e }));
    });
    return () => { live = false; };
  }, [c, z]);
  const words = cronWords(cron);
  return html`<div class="preview" aria-live="polite">
    <p id="cron-words" class=${words ? '' : 'muted'}>${words || (cron.trim() ? 'not a cron expression cronstrue can read' : '')}</p>
    ${st.error && html`<div id="cron-error"><${Err} error=${st.error} /></div>`}
    ${st.unsupported && html`<p class="muted small">This daemon cannot preview runs; they are listed on the schedule's page once saved.</p>`}
    ${st.next && html`<p class="muted small">Next ${st.next.length} runs in ${tz || 'UTC'} (hover for UTC and your time):</p>`}
    ${st.next && html`<ol id="cron-next" class="next-runs" aria-label=${`Next runs in ${tz}`}>${st.next.map((n) => html`<li data-ms=${n.ms}><span title=${`${n.utc} UTC; ${new Date(n.ms).toLocaleString()} your time`}>${weekday(n.ms, tz)} ${n.time.replace('T', ' ').replace(/([+-]\d\d:\d\d|Z)$/, ' $1')}</span></li>`)}</ol>`}
  </div>`;
}

export function ScheduleForm({ id }) {
  const existing = useApi(id ? `/schedules/${encodeURIComponent(id)}` : '', null, { enabled: !!id });
  const projects = useApi('/projects');
  const [f, setF] = useState(null);
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (id && !existing.data) return;
    const s = existing.data || {};
    setF({
      name: s.name || '', project: s.project || '', spider: s.spider || '',
      kind: s.interval ? 'interval' : s.at ? 'at' : 'cron',
      cron: s.cron || '', interval: s.interval || '', at: s.at || '', tz: s.tz || 'UTC',
      overlap: s.overlap || 'allow', missed: s.missed || 'skip', priority: s.priority || '', timeout: s.timeout || '',
      retries: s.retries || '', args: pairsText(s.args), settings: pairsText(s.settings), paused: !!s.paused,
      calendars: s.calendars || [],
    });
  }, [existing.data]);
  const calendars = useApi('/calendars');
  const spiders = useApi(f && f.project ? `/projects/${encodeURIComponent(f.project)}/spiders` : '', null, { enabled: !!(f && f.project) });
  if (id && !existing.data) return html`<h1>Edit schedule</h1><${Loading} state=${existing} />`;
  if (!f) return null;
  const set = (k) => (e) => setF({ ...f, [k]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const submit = async (e) => {
    e.preventDefault();
    setErr(null);
    let body;
    try {
      body = { name: f.name, project: f.project, spider: f.spider, tz: f.tz || 'UTC', overlap: f.overlap, missed: f.missed,
        args: parsePairs(f.args), settings: parsePairs(f.settings), paused: f.paused, calendars: f.calendars };
    } catch (x) {
      return setErr({ message: x.message });
    }
    if (f.kind === 'cron') body.cron = f.cron;
    if (f.kind === 'interval') body.interval = Number(f.interval);
    if (f.kind === 'at') body.at = f.at;
    if (id) for (const k of ['cron', 'interval', 'at']) if (!(k in body)) body[k] = null;
    if (f.priority !== '') body.priority = Number(f.priority);
    if (f.timeout !== '') body.timeout = Number(f.timeout);
    if (f.retries !== '') body.retries = Number(f.retries);
    setBusy(true);
    try {
      const s = await api(id ? `/schedules/${encodeURIComponent(id)}` : '/schedules', { method: id ? 'PATCH' : 'POST', body });
      navigate(`${BASE}/schedules/${s.id}`);
    } catch (x) {
      setErr(x);
      setBusy(false);
    }
  };
  return html`
    <h1>${id ? `Edit schedule ${existing.data.name}` : 'New schedule'}</h1>
    <form class="box form" id="schedule-form" onSubmit=${submit}>
      <div class="row">
        <label>Name <input id="s-name" required value=${f.name} onInput=${set('name')} /></label>
        <label>Project <select id="s-project" required value=${f.project} onChange=${(e) => setF({ ...f, project: e.target.value, spider: '' })}>
          <option value="">—</option>${projects.data && projects.data.projects.map((p) => html`<option>${p.name}</option>`)}</select></label>
        <label>Spider <select id="s-spider" required value=${f.spider} onChange=${set('spider')}>
          <option value="">—</option>${spiders.data && spiders.data.spiders.map((s) => html`<option>${s}</option>`)}</select></label>
      </div>
      <fieldset class="row"><legend>When</legend>
        ${['cron', 'interval', 'at'].map((k) => html`<label class="chip"><input type="radio" name="kind" value=${k} checked=${f.kind === k} onChange=${set('kind')} /> ${k === 'at' ? 'once' : k}</label>`)}
      </fieldset>
      <div class="row">
        ${f.kind === 'cron' && html`<label>Cron <input id="s-cron" class="mono" required value=${f.cron} onInput=${set('cron')} placeholder="30 2 * * *" autocomplete="off" spellcheck="false" /></label>`}
        ${f.kind === 'interval' && html`<label>Every (seconds) <input id="s-interval" type="number" min="1" step="any" required value=${f.interval} onInput=${set('interval')} /></label>`}
        ${f.kind === 'at' && html`<label>At (ISO 8601, in the zone) <input id="s-at" required value=${f.at} onInput=${set('at')} placeholder="2030-01-01T09:00:00" /></label>`}
        <label>Time zone <input id="s-tz" list="tz-list" value=${f.tz} onInput=${set('tz')} /></label>
        <datalist id="tz-list">${timeZones().map((z) => html`<option value=${z} />`)}</datalist>
      </div>
      ${f.kind === 'cron' && html`<${CronPreview} cron=${f.cron} tz=${f.tz} />`}
      <div class="row">
        <label>Overlap <select value=${f.overlap} onChange=${set('overlap')}>${['allow', 'skip', 'queue', 'replace'].map((o) => html`<option>${o}</option>`)}</select></label>
        <label>Missed runs <select value=${f.missed} onChange=${set('missed')}>${['skip', 'once', 'catchup'].map((o) => html`<option>${o}</option>`)}</select></label>
        <label>Priority <input type="number" step="any" size="5" value=${f.priority} onInput=${set('priority')} /></label>
        <label>Timeout (s) <input type="number" min="0" step="any" size="6" value=${f.timeout} onInput=${set('timeout')} /></label>
        <label>Retries <input type="number" min="0" max="100" size="4" value=${f.retries} onInput=${set('retries')} /></label>
      </div>
      <div class="row">
        <label>Arguments <small>(key=value per line)</small><textarea rows="3" value=${f.args} onInput=${set('args')}></textarea></label>
        <label>Settings <small>(key=value per line)</small><textarea rows="3" value=${f.settings} onInput=${set('settings')}></textarea></label>
      </div>
      ${calendars.data && calendars.data.calendars.length > 0 && html`<fieldset class="row" id="s-calendars"><legend>Calendars <small>(runs due in one are skipped)</small></legend>
        ${calendars.data.calendars.map((c) => html`<label class="chip"><input type="checkbox" data-calendar=${c.name} checked=${f.calendars.includes(c.name)}
          onChange=${(e) => setF({ ...f, calendars: e.target.checked ? [...f.calendars, c.name] : f.calendars.filter((x) => x !== c.name) })} /> ${c.name}</label>`)}
      </fieldset>`}
      <label class="chip"><input type="checkbox" checked=${f.paused} onChange=${set('paused')} /> paused</label>
      <div id="schedule-error"><${Err} error=${err} /></div>
      <div class="row"><button type="submit" id="s-save" disabled=${busy}>${id ? 'Save' : 'Create'}</button>
        <a class="button ghost" href=${BASE + (id ? `/schedules/${id}` : '/schedules')}>Cancel</a></div>
    </form>`;
}

function Runs({ id, state, title, empty, tz }) {
  const runs = useApi(`/schedules/${id}/runs`, { state, limit: 20 });
  return html`<section>
    <h2>${title}</h2>
    <${Loading} state=${runs} empty=${runs.data && !runs.data.runs.length && empty}>
      <ul class="plain" id=${`runs-${state}`}>${runs.data && runs.data.runs.map((r) => html`<li><${Time} v=${r.due_ms} /> <span class="muted small">(${(r.due || '').replace('T', ' ').slice(0, 16)} ${tz})</span> ${r.state !== state ? html`<${StateBadge} state=${r.state} />` : ''}
        ${r.job_id ? html` <${Link} to=${`/jobs/${r.job_id}`}>#${r.job_id}</${Link}>` : ''}${r.reason ? html` <span class="muted">${r.reason}</span>` : ''}</li>`)}</ul>
    </${Loading}>
  </section>`;
}

// Paused or active; a pause's note (who, why, when) as the badge's title.
function PausedBadge({ s }) {
  if (!s.paused) return html`<span class="badge st-running">active</span>`;
  const n = s.pause_note;
  const why = n ? [n.why, n.by && `paused by ${n.by}`].filter(Boolean).join(' — ') : '';
  return html`<span class="badge st-cancelled" title=${why}>paused</span>`;
}

// A pause asks why (the note is optional); a resume asks nothing.
function pauseOrResume(s) {
  if (s.paused) return api(`/schedules/${s.id}/resume`, { method: 'POST', body: {} });
  const note = window.prompt(`Pause ${s.name}: why? (optional)`, '');
  if (note === null) return Promise.resolve(null);
  return api(`/schedules/${s.id}/pause`, { method: 'POST', body: note ? { note } : {} });
}

// The schedule's recent runs, oldest first: a bar per run, as tall as its
// items, coloured by its health (grey: not rated), its reasons as its title.
function HealthChart({ jobs }) {
  const runs = jobs.filter((j) => j.ended_ms).slice(0, 40).reverse();
  if (!runs.length) return null;
  const max = Math.max(1, ...runs.map((j) => (j.stats && j.stats.items) || 0));
  const w = 14, h = 60;
  return html`<figure class="health-chart" id="health-chart">
    <svg width=${runs.length * w} height=${h} role="img" aria-label="Items and health of the recent runs">
      ${runs.map((j, i) => {
        const items = (j.stats && j.stats.items) || 0;
        const bh = Math.max(2, Math.round((items / max) * (h - 4)));
        const title = `#${j.id}: ${num(items)} items, ${j.health || 'not rated'}${(j.health_reasons || []).length ? ` (${j.health_reasons.join('; ')})` : ''}`;
        return html`<a href=${`${BASE}/jobs/${j.id}`}><rect class=${'hl-' + (j.health || 'none')} data-health=${j.health || 'none'} x=${i * w + 1} y=${h - bh} width=${w - 3} height=${bh}><title>${title}</title></rect></a>`;
      })}
    </svg>
    <figcaption class="muted small">Items per run, oldest first: green ok, amber degraded, red broken, grey not rated.</figcaption>
  </figure>`;
}

export function SchedulePage({ id }) {
  const s = useApi(`/schedules/${encodeURIComponent(id)}`);
  const jobs = useApi('/jobs', { schedule: s.data && s.data.id, limit: 40 }, { enabled: !!s.data });
  const d = s.data;
  if (!d) return html`<h1>Schedule ${id}</h1><${Loading} state=${s} />`;
  return html`
    <h1>Schedule ${d.name} <${PausedBadge} s=${d} /></h1>
    ${d.paused && d.pause_note && html`<p class="notice" id="pause-note">Paused${d.pause_note.by ? ` by ${d.pause_note.by}` : ''} <${Time} v=${d.pause_note.at} />${d.pause_note.why ? `: ${d.pause_note.why}` : ''}</p>`}
    <div class="toolbar">
      <a class="button" href=${`${BASE}/schedules/${d.id}/edit`}>Edit</a>
      <${Action} run=${() => pauseOrResume(d)} onDone=${s.reload}>${d.paused ? 'Resume' : 'Pause'}</${Action}>
      <${Action} run=${() => api(`/schedules/${d.id}/run`, { method: 'POST', body: {} })} onDone=${() => jobs.reload()}>Run now</${Action}>
      <${Action} kind="danger" confirm=${`Delete schedule ${d.name}?`} run=${() => api(`/schedules/${d.id}`, { method: 'DELETE' })} onDone=${() => navigate(`${BASE}/schedules`)}>Delete</${Action}>
    </div>
    <dl class="kv">
      <dt>spider</dt><dd><${Link} to=${`/projects/${encodeURIComponent(d.project)}`}>${d.project}</${Link}>/${d.spider}${d.version ? ` (version ${d.version})` : ''}</dd>
      <dt>when</dt><dd>${when(d)}</dd><dt>zone</dt><dd>${d.tz}</dd>
      <dt>overlap</dt><dd>${d.overlap}</dd><dt>missed</dt><dd>${d.missed}</dd>
      <dt>arguments</dt><dd><code>${JSON.stringify(d.args)}</code></dd>
      <dt>last due</dt><dd><${Time} v=${d.last_due_at} /></dd>
      <dt>calendars</dt><dd id="s-cals">${d.calendars && d.calendars.length ? d.calendars.map((c) => html`<${Link} to="/calendars">${c}</${Link}> `) : '—'}</dd>
    </dl>
    <div class="two">
      <${Runs} id=${d.id} tz=${d.tz} state="upcoming" title="Upcoming runs" empty="No upcoming runs." />
      <${Runs} id=${d.id} tz=${d.tz} state="missed" title="Missed runs" empty="No missed runs." />
    </div>
    <${Backfill} s=${d} />
    <section>
      <h2>Jobs</h2>
      <${HealthChart} jobs=${(jobs.data && jobs.data.jobs) || []} />
      <${Loading} state=${jobs} empty=${jobs.data && !jobs.data.jobs.length && 'This schedule has not run yet.'}>
        <${JobTable} jobs=${(jobs.data && jobs.data.jobs) || []} />
      </${Loading}>
    </section>`;
}

// A local datetime-local value (YYYY-MM-DDTHH:MM) days before now.
function localInput(daysAgo) {
  const t = new Date(Date.now() - daysAgo * 86400000);
  t.setMinutes(t.getMinutes() - t.getTimezoneOffset());
  return t.toISOString().slice(0, 16);
}

// Re-runs the schedule over a past window: a dry run lists the slots first;
// the schedule's backfills below, each paused, resumed or cancelled whole.
function Backfill({ s }) {
  const [f, setF] = useState({ from: localInput(7), to: localInput(0), max: 1, redo: 'missing', order: 'oldest', arg: '', fmt: 'time' });
  const [plan, setPlan] = useState(null);
  const [err, setErr] = useState(null);
  const list = useApi('/backfills', null, { poll: 5000 });
  const mine = ((list.data && list.data.backfills) || []).filter((b) => b.schedule_id === s.id);
  const set = (k) => (e) => { setPlan(null); setF({ ...f, [k]: e.target.value }); };
  const go = async (dry) => {
    setErr(null);
    const body = { from: new Date(f.from).toISOString(), to: new Date(f.to).toISOString(), max_running: Number(f.max) || 1,
      redo: f.redo, order: f.order, dry_run: dry };
    if (f.arg) { body.slot_arg = f.arg; body.slot_format = f.fmt; }
    try {
      const r = await api(`/schedules/${s.id}/backfill`, { method: 'POST', body });
      setPlan(r);
      if (!dry) list.reload();
    } catch (x) {
      setErr(x);
    }
  };
  return html`<section id="backfill">
    <h2>Backfill</h2>
    <p class="muted small">Runs this schedule again for each due time of a past window, each crawl told its slot's time (<code>SCHEDULED_TIME</code>).</p>
    <form class="box form" id="backfill-form" onSubmit=${(e) => { e.preventDefault(); go(true); }}>
      <div class="row">
        <label>From <input id="b-from" type="datetime-local" required value=${f.from} onInput=${set('from')} /></label>
        <label>To <input id="b-to" type="datetime-local" required value=${f.to} onInput=${set('to')} /></label>
        <label>At once <input id="b-max" type="number" min="1" max="1000" size="4" value=${f.max} onInput=${set('max')} /></label>
        <label>Slots <select id="b-redo" value=${f.redo} onChange=${set('redo')}><option value="missing">that never ran</option><option value="failed">that never ran or failed</option></select></label>
        <label>Order <select id="b-order" value=${f.order} onChange=${set('order')}><option value="oldest">oldest first</option><option value="newest">newest first</option></select></label>
      </div>
      <div class="row">
        <label>Spider argument for the slot <input id="b-arg" value=${f.arg} onInput=${set('arg')} placeholder="(none)" /></label>
        <label>as <select id="b-fmt" value=${f.fmt} onChange=${set('fmt')}><option value="time">its time</option><option value="date">its date</option></select></label>
      </div>
      <div id="backfill-error"><${Err} error=${err} /></div>
      <div class="row"><button type="submit" id="b-preview">Preview</button>
        <button type="button" id="b-start" disabled=${!plan || !plan.dry_run || !plan.count} onClick=${() => go(false)}>Start backfill${plan && plan.dry_run ? ` (${plan.count} runs)` : ''}</button></div>
    </form>
    ${plan && html`<div id="backfill-plan">
      <p>${plan.dry_run ? `${plan.count} slots to run` : `Started backfill #${plan.backfill ? plan.backfill.id : '—'}: ${plan.count} runs`};
        left out: ${plan.left_out.ran} that ran already, ${plan.left_out.calendar} in calendars.</p>
      ${plan.dry_run && html`<ol class="next-runs" id="backfill-slots">${plan.slots.map((x) => html`<li data-ms=${x.due_ms}><${Time} v=${x.due_ms} /> <span class="muted small">${x.due}</span></li>`)}</ol>`}
    </div>`}
    ${mine.length > 0 && html`<div class="table-wrap"><table id="backfills-table">
      <thead><tr><th>backfill</th><th>window</th><th>runs</th><th>state</th><th></th></tr></thead>
      <tbody>${mine.map((b) => html`<tr data-backfill=${b.id}>
        <td><${Link} to=${`/jobs/${b.id}`}>#${b.id}</${Link}></td>
        <td><${Time} v=${b.from} /> – <${Time} v=${b.to} /></td>
        <td>${b.released} / ${b.slots} released, ${b.max_running} at once</td>
        <td><${StateBadge} state=${b.state} />${b.paused ? html` <span class="badge st-cancelled">paused</span>` : ''}</td>
        <td class="actions">${b.state === 'running' && html`
          <${Action} kind="small" run=${() => api(`/backfills/${b.id}/${b.paused ? 'resume' : 'pause'}`, { method: 'POST', body: {} })} onDone=${list.reload}>${b.paused ? 'Resume' : 'Pause'}</${Action}>
          <${Action} kind="small danger" confirm=${`Cancel backfill #${b.id} and its runs?`} run=${() => api(`/backfills/${b.id}/cancel`, { method: 'POST', body: {} })} onDone=${list.reload}>Cancel</${Action}>`}</td>
      </tr>`)}</tbody>
    </table></div>`}
  </section>`;
}
