// Exclusion calendars: the list (with the schedules that refer to each), a
// form that creates or replaces one, delete. A schedule refers to
// calendars on its form; a run due in one is skipped with its name.
import { useState } from 'preact/hooks';
import { Action, api, Err, html, Link, Loading, useApi } from '../lib.js';

const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const lines = (t) => t.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);

function CalendarForm({ onDone, edit }) {
  const [f, setF] = useState(edit ? {
    name: edit.name, tz: edit.tz, dates: (edit.dates || []).join('\n'), weekdays: edit.weekdays || [],
    hours: (edit.hours || []).join('\n'), note: edit.note || '',
  } : { name: '', tz: 'UTC', dates: '', weekdays: [], hours: '', note: '' });
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const day = (d) => (e) => setF({ ...f, weekdays: e.target.checked ? [...f.weekdays, d] : f.weekdays.filter((x) => x !== d) });
  const submit = async (e) => {
    e.preventDefault();
    setErr(null);
    const body = { name: f.name, tz: f.tz || 'UTC', note: f.note || undefined };
    if (lines(f.dates).length) body.dates = lines(f.dates);
    if (f.weekdays.length) body.weekdays = DAYS.filter((d) => f.weekdays.includes(d));
    if (lines(f.hours).length) body.hours = lines(f.hours);
    setBusy(true);
    try {
      await api(edit ? `/calendars/${encodeURIComponent(edit.name)}` : '/calendars', { method: edit ? 'PUT' : 'POST', body });
      onDone();
      if (!edit) setF({ name: '', tz: f.tz, dates: '', weekdays: [], hours: '', note: '' });
    } catch (x) {
      setErr(x);
    }
    setBusy(false);
  };
  return html`<form class="box form" id=${edit ? 'calendar-edit' : 'calendar-form'} onSubmit=${submit}>
    <div class="row">
      ${!edit && html`<label>Name <input id="c-name" required value=${f.name} onInput=${set('name')} /></label>`}
      <label>Time zone <input id="c-tz" value=${f.tz} onInput=${set('tz')} /></label>
      <label>Note <input id="c-note" value=${f.note} onInput=${set('note')} /></label>
    </div>
    <div class="row">
      <label>Dates <small>(YYYY-MM-DD, one a line)</small><textarea id="c-dates" rows="3" value=${f.dates} onInput=${set('dates')}></textarea></label>
      <label>Hours <small>(HH:MM-HH:MM, one a line)</small><textarea id="c-hours" rows="3" value=${f.hours} onInput=${set('hours')}></textarea></label>
    </div>
    <fieldset class="row"><legend>Weekdays <small>(whole days, or the hours above on those days)</small></legend>
      ${DAYS.map((d) => html`<label class="chip"><input type="checkbox" data-day=${d} checked=${f.weekdays.includes(d)} onChange=${day(d)} /> ${d}</label>`)}
    </fieldset>
    <div id="calendar-error"><${Err} error=${err} /></div>
    <div class="row"><button type="submit" id=${edit ? 'c-save' : 'c-create'} disabled=${busy}>${edit ? 'Save' : 'Create calendar'}</button></div>
  </form>`;
}

export function Calendars() {
  const list = useApi('/calendars');
  const [editing, setEditing] = useState(null);
  const cs = (list.data && list.data.calendars) || [];
  return html`
    <h1>Calendars</h1>
    <p class="muted">A schedule that refers to a calendar skips the runs due in it (holidays, a site's maintenance window); they are left out of its upcoming runs and recorded as skipped with the calendar's name.</p>
    <${Loading} state=${list} empty=${list.data && !cs.length && 'No calendars yet.'}>
      <div class="table-wrap"><table id="calendars-table">
        <thead><tr><th>name</th><th>zone</th><th>dates</th><th>weekdays</th><th>hours</th><th>schedules</th><th></th></tr></thead>
        <tbody>${cs.map((c) => html`<tr data-calendar=${c.name}>
          <td>${c.name}${c.note ? html` <span class="muted small">${c.note}</span>` : ''}</td>
          <td>${c.tz}</td>
          <td>${(c.dates || []).join(', ') || '—'}</td>
          <td>${(c.weekdays || []).join(', ') || '—'}</td>
          <td>${(c.hours || []).join(', ') || '—'}</td>
          <td>${c.schedules.length ? c.schedules.map((id) => html`<${Link} to=${`/schedules/${id}`}>#${id}</${Link}> `) : '—'}</td>
          <td class="actions">
            <button type="button" class="small" onClick=${() => setEditing(editing === c.name ? null : c.name)}>Edit</button>
            <${Action} kind="small danger" confirm=${`Delete calendar ${c.name}?`} run=${() => api(`/calendars/${encodeURIComponent(c.name)}`, { method: 'DELETE' })} onDone=${list.reload}>Delete</${Action}>
          </td>
        </tr>`)}</tbody>
      </table></div>
    </${Loading}>
    ${editing && cs.find((c) => c.name === editing) && html`<h2>Edit ${editing}</h2><${CalendarForm} key=${editing} edit=${cs.find((c) => c.name === editing)} onDone=${() => { setEditing(null); list.reload(); }} />`}
    <h2>New calendar</h2>
    <${CalendarForm} onDone=${list.reload} />`;
}
