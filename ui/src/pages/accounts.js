// Accounts: an admin's page for customers' or teams' shares of the node
// (projects, users, tokens, a cap on running jobs); a member sees its own.
import { useState } from 'preact/hooks';
import { Action, api, Err, html, Link, Loading, Time, useApi } from '../lib.js';

const KINDS = ['project', 'user', 'token'];

function NewAccount({ onDone }) {
  const [err, setErr] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    const f = e.target.elements;
    setErr(null);
    try {
      const body = { name: f.name.value, description: f.description.value };
      if (f.cap.value !== '') body.max_running = Number(f.cap.value);
      await api('/accounts', { method: 'POST', body });
      e.target.reset();
      onDone();
    } catch (e2) {
      setErr(e2);
    }
  };
  return html`<form class="box" id="account-form" onSubmit=${submit} aria-label="New account">
    <h2>New account</h2>
    <div class="row">
      <label>Name <input name="name" id="acct-name" required pattern="[A-Za-z0-9_.@\\-]+" /></label>
      <label>Description <input name="description" id="acct-desc" /></label>
      <label>Max running <input name="cap" id="acct-cap" type="number" min="0" placeholder="no cap" /></label>
      <button type="submit">Create</button>
    </div>
    <${Err} error=${err} />
  </form>`;
}

function Members({ a, onDone }) {
  const [kind, setKind] = useState('project');
  const [value, setValue] = useState('');
  const [err, setErr] = useState(null);
  const move = async (verb, k, v) => {
    setErr(null);
    try {
      await api(`/accounts/${encodeURIComponent(a.name)}/${verb}`, { method: 'POST', body: { [k]: v } });
      setValue('');
      onDone();
    } catch (e) {
      setErr(e);
    }
  };
  const list = (k, items) => items.map((v) => html`<li><code>${v}</code> <button type="button" class="ghost" title=${`take ${k} ${v} out of ${a.name}`} onClick=${() => move('unassign', k, v)}>×</button></li>`);
  return html`
    <div class="row">
      <div><h3>Projects</h3><ul class="plain">${list('project', a.projects)}</ul></div>
      <div><h3>Users</h3><ul class="plain">${list('user', a.users)}</ul></div>
      <div><h3>Tokens</h3><ul class="plain">${list('token', a.tokens)}</ul>
        <p class="muted small">and every token of its users</p></div>
    </div>
    <form class="row" onSubmit=${(e) => { e.preventDefault(); move('assign', kind, value); }} aria-label=${`Add to ${a.name}`}>
      <select value=${kind} onChange=${(e) => setKind(e.target.value)}>${KINDS.map((k) => html`<option value=${k}>${k}</option>`)}</select>
      <input required placeholder=${kind === 'token' ? 'token id' : `${kind} name`} value=${value} onInput=${(e) => setValue(e.target.value)} />
      <button type="submit">Add</button>
    </form>
    <${Err} error=${err} />`;
}

function Upcoming({ name }) {
  const next = useApi(`/accounts/${encodeURIComponent(name)}/upcoming`, { limit: 10 });
  const runs = (next.data && next.data.runs) || [];
  return html`<${Loading} state=${next} empty=${next.data && !runs.length && 'No upcoming runs.'}>
    <ul class="plain">${runs.map((r) => html`<li><${Time} v=${r.due_ms} /> <${Link} to=${`/schedules/${r.schedule_id}`}>${r.schedule}</${Link}></li>`)}</ul>
  </${Loading}>`;
}

function Account({ a, admin, onDone }) {
  const setCap = async () => {
    const v = window.prompt(`At most how many of ${a.name}'s jobs run at once? (0: no cap)`, String(a.max_running));
    if (v === null) return null;
    return api(`/accounts/${encodeURIComponent(a.name)}`, { method: 'PATCH', body: { max_running: Number(v) } });
  };
  return html`<section class="box" data-account=${a.name}>
    <h2>${a.name} ${a.description && html`<span class="muted small">${a.description}</span>`}</h2>
    <p>${a.running} running · ${a.pending} pending · cap <strong>${a.max_running || 'none'}</strong> · created <${Time} v=${a.created_ms} /></p>
    ${admin ? html`<${Members} a=${a} onDone=${onDone} />` : html`<p>projects: ${a.projects.join(', ') || '—'}</p>`}
    <h3>Upcoming runs</h3>
    <${Upcoming} key=${a.projects.join(",")} name=${a.name} />
    ${admin && html`<p>
      <${Action} run=${setCap} onDone=${onDone}>Set cap</${Action}>
      <${Action} kind="danger" confirm=${`Delete account ${a.name}? Its projects stay, of no account.`} run=${() => api(`/accounts/${encodeURIComponent(a.name)}`, { method: 'DELETE' })} onDone=${onDone}>Delete</${Action}>
    </p>`}
  </section>`;
}

export function Accounts() {
  const list = useApi('/accounts', null, { poll: 5000 });
  const me = useApi('/auth/whoami');
  const admin = me.data && me.data.role === 'admin';
  const as = (list.data && list.data.accounts) || [];
  const reload = () => list.reload && list.reload();
  return html`
    <h1>Accounts</h1>
    <p class="muted">An account's users and tokens see and touch only its projects; admins see everything.</p>
    <${Loading} state=${list} empty=${list.data && !as.length && 'No accounts: every user and token sees what its own project limit allows.'}>
      ${as.map((a) => html`<${Account} key=${a.name} a=${a} admin=${admin} onDone=${reload} />`)}
    </${Loading}>
    ${admin && html`<${NewAccount} onDone=${reload} />`}`;
}

// project -> account, for the projects list (null while unknown)
export function useProjectAccounts() {
  const list = useApi('/accounts', null);
  const by = {};
  for (const a of (list.data && list.data.accounts) || []) for (const p of a.projects) by[p] = a.name;
  return list.data ? by : null;
}
