// Projects: the list, egg upload, versions, spiders and "run now".
import { useState } from 'preact/hooks';
import { Action, api, BASE, Err, html, Link, Loading, navigate, parsePairs, useApi } from '../lib.js';
import { JobTable } from './jobs.js';
import { useProjectAccounts } from './accounts.js';

function Upload({ project, onDone }) {
  const [name, setName] = useState(project || '');
  const [version, setVersion] = useState(() => String(Math.floor(Date.now() / 1000)));
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState(null);
  const [done, setDone] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    const file = e.target.elements.egg.files[0];
    setErr(null);
    setDone(null);
    if (!file) return setErr({ message: 'choose an egg file' });
    const fd = new FormData();
    fd.append('version', version);
    const f = e.target.elements;
    if (f.requirements.value.trim()) fd.append('requirements', f.requirements.value);
    if (f.python.value.trim()) fd.append('python', f.python.value.trim());
    fd.append('egg', file, file.name);
    setBusy(true);
    try {
      const r = await api(`/projects/${encodeURIComponent(name)}/versions`, { method: 'POST', body: fd });
      setDone(r);
      onDone && onDone(r);
    } catch (e2) {
      setErr(e2);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="box" id="upload-form" onSubmit=${submit} aria-label="Upload an egg">
    <h2>Upload an egg</h2>
    <div class="row">
      ${!project && html`<label>Project <input name="project" id="up-project" required pattern="[A-Za-z0-9_.\\-]+" value=${name} onInput=${(e) => setName(e.target.value)} /></label>`}
      <label>Version <input name="version" id="up-version" required value=${version} onInput=${(e) => setVersion(e.target.value)} /></label>
      <label>Egg <input type="file" name="egg" id="up-egg" accept=".egg,application/zip,application/octet-stream" required /></label>
      <button type="submit" disabled=${busy}>${busy ? 'Uploading…' : 'Upload'}</button>
    </div>
    <div class="row">
      <label>Requirements <small>(requirements.txt, optional: builds the version's environment)</small><textarea name="requirements" id="up-requirements" rows="2" placeholder="requests==2.31.0"></textarea></label>
      <label>Python <small>(optional)</small><input name="python" id="up-python" size="6" placeholder="3.11" /></label>
    </div>
    <${Err} error=${err} />
    ${done && html`<p class="ok" role="status" id="upload-result">Stored ${done.project} ${done.version}: ${done.spiders.length} spiders (${done.spiders.join(', ')}).</p>`}
  </form>`;
}

export function Projects() {
  const list = useApi('/projects');
  const ps = (list.data && list.data.projects) || [];
  // the account column only where there are accounts
  const accounts = useProjectAccounts();
  const showAcct = accounts && Object.keys(accounts).length > 0;
  return html`
    <h1>Projects</h1>
    <${Loading} state=${list} empty=${list.data && !ps.length && 'No projects yet: upload an egg below (or deploy with scrapyd-deploy).'}>
      <div class="table-wrap"><table id="projects-table">
        <thead><tr><th>project</th><th>latest version</th><th>versions</th>${showAcct && html`<th>account</th>`}</tr></thead>
        <tbody>${ps.map((p) => html`<tr><td><${Link} to=${`/projects/${encodeURIComponent(p.name)}`}>${p.name}</${Link}></td><td>${p.latest_version}</td><td>${p.versions.length}</td>${showAcct && html`<td>${accounts[p.name] ? html`<${Link} to="/accounts">${accounts[p.name]}</${Link}>` : '—'}</td>`}</tr>`)}</tbody>
      </table></div>
    </${Loading}>
    <${Upload} onDone=${(r) => navigate(`${BASE}/projects/${encodeURIComponent(r.project)}`)} />`;
}

function RunForm({ project, spider, versions, onClose }) {
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    const f = e.target.elements;
    setErr(null);
    let body;
    try {
      body = { project, spider, args: parsePairs(f.args.value), settings: parsePairs(f.settings.value) };
    } catch (x) {
      return setErr({ message: x.message });
    }
    if (f.version.value) body.version = f.version.value;
    if (f.priority.value) body.priority = Number(f.priority.value);
    setBusy(true);
    try {
      const j = await api('/jobs', { method: 'POST', body });
      navigate(`${BASE}/jobs/${j.id}`);
    } catch (x) {
      setErr(x);
      setBusy(false);
    }
  };
  return html`<form class="box run-form" onSubmit=${submit} aria-label=${`Run ${spider}`}>
    <h3>Run ${spider} now</h3>
    <div class="row">
      <label>Version <select name="version"><option value="">latest</option>${versions.map((v) => html`<option>${v}</option>`)}</select></label>
      <label>Priority <input name="priority" type="number" step="any" size="5" /></label>
    </div>
    <div class="row">
      <label>Arguments <small>(key=value per line)</small><textarea name="args" rows="3" placeholder="category=books"></textarea></label>
      <label>Settings <small>(key=value per line)</small><textarea name="settings" rows="3" placeholder="DOWNLOAD_DELAY=1"></textarea></label>
    </div>
    <${Err} error=${err} />
    <div class="row"><button type="submit" disabled=${busy}>Run</button> <button type="button" class="ghost" onClick=${onClose}>Close</button></div>
  </form>`;
}

// A version's Python environment: what it holds, its build log, a rebuild.
function VersionEnv({ project, version }) {
  const path = `/projects/${encodeURIComponent(project)}/versions/${encodeURIComponent(version)}/environment`;
  const env = useApi(path);
  const [log, setLog] = useState(null);
  const e = env.data && env.data.environment;
  if (!e) return null;
  const showLog = async () => setLog((await api(path, { query: { log: 'true' } })).environment.log || '(no log)');
  const pkgs = (e.packages || []).map((p) => `${p.name} ${p.version}`).join(', ');
  return html`<div class="env muted" data-env=${e.key}>
    environment <code>${e.key}</code> · ${e.state} · Python ${e.python_version || e.python}
    ${e.size != null ? ` · ${(e.size / 1048576).toFixed(1)} MiB` : ''}${e.build_ms != null ? ` · built in ${(e.build_ms / 1000).toFixed(1)} s` : ''}
    ${pkgs && html`<br /><small>${pkgs}</small>`}
    <br /><button type="button" class="small ghost" onClick=${showLog}>Build log</button>
    <${Action} kind="small" confirm=${`Build the environment of ${project} ${version} again?`} run=${() => api(`${path}/rebuild`, { method: 'POST' })} onDone=${() => env.reload()}>Rebuild</${Action}>
    ${log != null && html`<pre class="log">${log}</pre>`}
  </div>`;
}

export function ProjectPage({ name }) {
  const p = useApi(`/projects/${encodeURIComponent(name)}`);
  const spiders = useApi(`/projects/${encodeURIComponent(name)}/spiders`);
  const jobs = useApi('/jobs', { project: name, limit: 20 });
  const [run, setRun] = useState(null);
  const reload = () => { p.reload(); spiders.reload(); };
  const versions = (p.data && p.data.versions) || [];
  return html`
    <h1>Project ${name}</h1>
    <${Loading} state=${p}>
      ${p.data && html`<p class="muted">${Object.entries(p.data.jobs || {}).map(([k, v]) => `${v} ${k}`).join(' · ')} · <${Link} to=${`/jobs?project=${encodeURIComponent(name)}`}>all jobs</${Link}></p>`}
    </${Loading}>
    <div class="two">
      <section>
        <h2>Spiders</h2>
        <${Loading} state=${spiders} empty=${spiders.data && !spiders.data.spiders.length && 'This project has no spiders.'}>
          <ul class="plain" id="spider-list">${spiders.data && spiders.data.spiders.map((s) => html`<li data-spider=${s}>
            <strong>${s}</strong> <button type="button" class="small" onClick=${() => setRun(s)} aria-label=${`Run ${s} now`}>Run now…</button>
            ${run === s && html`<${RunForm} project=${name} spider=${s} versions=${versions} onClose=${() => setRun(null)} />`}
          </li>`)}</ul>
        </${Loading}>
      </section>
      <section>
        <h2>Versions</h2>
        <ul class="plain" id="version-list">${[...versions].reverse().map((v) => html`<li>${v}${v === p.data.latest_version ? html` <span class="badge">latest</span>` : ''}
          <${Action} kind="danger small" confirm=${`Delete version ${v} of ${name}?`} run=${() => api(`/projects/${encodeURIComponent(name)}/versions/${encodeURIComponent(v)}`, { method: 'DELETE' })} onDone=${() => (versions.length === 1 ? navigate(`${BASE}/projects`) : reload())}>Delete</${Action}>
          <${VersionEnv} project=${name} version=${v} /></li>`)}</ul>
        <${Upload} project=${name} onDone=${reload} />
      </section>
    </div>
    <section>
      <h2>Recent jobs</h2>
      <${Loading} state=${jobs} empty=${jobs.data && !jobs.data.jobs.length && 'No jobs yet.'}>
        <${JobTable} jobs=${(jobs.data && jobs.data.jobs) || []} showProject=${false} />
      </${Loading}>
    </section>`;
}
