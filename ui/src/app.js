// spiderd's console: a single-page app at /ui/ over the REST API (/api/v1/)
// and its live event stream.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { BASE, html, Link, ROOT, startEvents, useApi, useLive, useRoute } from './lib.js';
import { Overview } from './pages/overview.js';
import { JobPage, Jobs } from './pages/jobs.js';
import { ProjectPage, Projects } from './pages/projects.js';
import { ScheduleForm, SchedulePage, Schedules } from './pages/schedules.js';
import { QueuePage, Queues } from './pages/queues.js';
import { Events, Nodes } from './pages/misc.js';
import { Accounts } from './pages/accounts.js';
import { Calendars } from './pages/calendars.js';

const NAV = [
  ['/', 'Overview'], ['/projects', 'Projects'], ['/jobs', 'Jobs'], ['/schedules', 'Schedules'],
  ['/calendars', 'Calendars'], ['/queues', 'Queues'], ['/events', 'Events'], ['/nodes', 'Nodes'],
  ['/accounts', 'Accounts'],
];

function route(path) {
  let m;
  if (path === '/' || path === '') return [Overview, {}];
  if (path === '/projects') return [Projects, {}];
  if ((m = /^\/projects\/([^/]+)$/.exec(path))) return [ProjectPage, { name: decodeURIComponent(m[1]) }];
  if (path === '/jobs') return [Jobs, {}];
  if ((m = /^\/jobs\/([^/]+)$/.exec(path))) return [JobPage, { id: decodeURIComponent(m[1]) }];
  if (path === '/schedules') return [Schedules, {}];
  if (path === '/schedules/new') return [ScheduleForm, {}];
  if ((m = /^\/schedules\/([^/]+)\/edit$/.exec(path))) return [ScheduleForm, { id: decodeURIComponent(m[1]) }];
  if ((m = /^\/schedules\/([^/]+)$/.exec(path))) return [SchedulePage, { id: decodeURIComponent(m[1]) }];
  if (path === '/calendars') return [Calendars, {}];
  if (path === '/queues') return [Queues, {}];
  if ((m = /^\/queues\/([^/]+)$/.exec(path))) return [QueuePage, { name: decodeURIComponent(m[1]) }];
  if (path === '/events') return [Events, {}];
  if (path === '/nodes') return [Nodes, {}];
  if (path === '/accounts') return [Accounts, {}];
  return [NotFound, {}];
}

function NotFound() {
  return html`<h1>Not found</h1><p>No console page here. <${Link} to="/">Overview</${Link}></p>`;
}

// light / dark / the system's, remembered in localStorage
const THEMES = ['system', 'light', 'dark'];
function applyTheme(t) {
  if (t === 'system') document.documentElement.removeAttribute('data-theme');
  else document.documentElement.setAttribute('data-theme', t);
}
let savedTheme = 'system';
try { savedTheme = localStorage.getItem('spiderd.theme') || 'system'; } catch { /* storage off */ }
applyTheme(savedTheme);

function ThemeToggle() {
  const [t, set] = useState(savedTheme);
  const next = THEMES[(THEMES.indexOf(t) + 1) % THEMES.length];
  const click = () => {
    set(next);
    applyTheme(next);
    try { localStorage.setItem('spiderd.theme', next); } catch { /* storage off */ }
  };
  return html`<button type="button" class="ghost" id="theme-toggle" onClick=${click} title=${`theme: ${t} (switch to ${next})`} aria-label=${`Theme: ${t}. Switch to ${next}`}>${t === 'dark' ? '☾' : t === 'light' ? '☀' : '◐'} ${t}</button>`;
}

function LiveDot() {
  const s = useLive();
  useEffect(startEvents, []);
  return html`<span class=${'live is-' + s} title=${`event stream: ${s}`}>${s === 'live' ? '● live' : '○ ' + s}</span>`;
}

function App() {
  const { path } = useRoute();
  const status = useApi('/status', null, { poll: 30000 });
  const [Page, props] = route(path);
  const section = '/' + (path.split('/')[1] || '');
  useEffect(() => {
    const onKey = (e) => {
      if (e.key !== '/' || e.ctrlKey || e.metaKey || e.altKey) return;
      const t = e.target;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
      const box = document.querySelector('[data-search]');
      if (box) { e.preventDefault(); box.focus(); box.select && box.select(); }
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, []);
  useEffect(() => {
    const label = NAV.find(([p]) => p === section);
    document.title = `${label ? label[1] : 'spiderd'} · spiderd console`;
  }, [section]);
  const s = status.data;
  return html`
    <a class="skip" href="#main">Skip to content</a>
    <header class="top">
      <a class="brand" href=${BASE + '/'}>spiderd</a>
      <nav aria-label="Console">
        ${NAV.map(([p, label]) => html`<${Link} to=${p} aria-current=${section === p ? 'page' : undefined}>${label}</${Link}>`)}
      </nav>
      <span class="meta">
        ${s && html`<span title=${`node ${s.node_name}, spiderd ${s.version}`}>${s.node_name} · v${s.version}</span>`}
        <${LiveDot} />
        <a href=${ROOT + '/docs/'}>Docs</a>
        <a href=${ROOT + '/api/'}>API</a>
        <${ThemeToggle} />
      </span>
    </header>
    <main id="main" tabindex="-1"><${Page} key=${path} ...${props} /></main>`;
}

const root = document.getElementById('app');
root.textContent = ''; // the boot message
render(html`<${App} />`, root);
