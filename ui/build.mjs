// Builds ui/dist/ from ui/src/, the repository's docs/*.md and swagger-ui-dist:
//
//   console/index.html, console/assets/app-<hash>.{js,css} (+ .gz)   the console (/ui/)
//   docs/index.html, docs/<name>.html (+ .gz)                         the docs (/docs/)
//   api/index.html, api/init.js, api/swagger-ui*.{js,css} (+ .gz)     Swagger UI (/api/)
//
// Nothing is fetched at run time: every script, style and font is in dist/.
// Run with `node ui/build.mjs` (make ui); prints each console asset's gzip size.
import { build } from 'esbuild';
import { Marked } from 'marked';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

const UI = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.dirname(UI);
const DIST = path.join(UI, 'dist');
const SRC = path.join(UI, 'src');
const LIMIT = 300 * 1024; // the console's first load, compressed

const gzip = (buf) => zlib.gzipSync(buf, { level: 9 });

function write(file, data, { gz = true } = {}) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, data);
  if (gz) fs.writeFileSync(file + '.gz', gzip(Buffer.from(data)));
}

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

// ---- the console ----------------------------------------------------------

// The event types, from the daemon's one list (EVENT_TYPES in
// src/core/event.h, one `X(ID, "type", "meaning")` a line): the console
// imports them as `spiderd:events` instead of keeping a copy.
function eventTypes() {
  const h = fs.readFileSync(path.join(ROOT, 'src', 'core', 'event.h'), 'utf8');
  const types = [...h.matchAll(/^\s*X\([A-Z_]+, "([a-z]+\.[a-z_]+)", "([^"]*)"\)/gm)]
    .map(([, name, meaning]) => ({ name, meaning }));
  if (!types.length) throw new Error('src/core/event.h: no EVENT_TYPES entries');
  // A line this pattern cannot read (a '"' in a meaning) would drop its type.
  const lines = [...h.matchAll(/^\s*X\([A-Z_]+,/gm)].length;
  if (lines !== types.length)
    throw new Error(`src/core/event.h: ${lines - types.length} EVENT_TYPES line(s) not of the form X(ID, "type", "meaning") (no '"' in a meaning)`);
  return types;
}

const eventsModule = {
  name: 'spiderd-events',
  setup(b) {
    b.onResolve({ filter: /^spiderd:events$/ }, () => ({ path: 'events', namespace: 'spiderd' }));
    b.onLoad({ filter: /.*/, namespace: 'spiderd' }, () => ({
      contents: `export const EVENT_TYPES = ${JSON.stringify(eventTypes())};`,
      loader: 'js',
      watchFiles: [path.join(ROOT, 'src', 'core', 'event.h')],
    }));
  },
};

async function buildConsole() {
  const out = path.join(DIST, 'console');
  const res = await build({
    entryPoints: [path.join(SRC, 'app.js')],
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['es2020'],
    outdir: path.join(out, 'assets'),
    entryNames: 'app-[hash]',
    assetNames: '[name]-[hash]',
    legalComments: 'none',
    write: false,
    logLevel: 'warning',
    plugins: [eventsModule],
  });
  const assets = [];
  for (const f of res.outputFiles) {
    // esbuild's hash covers the inputs; the name's hash is the content's, so
    // a changed asset always gets a new name (its cache entry is immutable).
    const ext = path.extname(f.path);
    const hash = createHash('sha256').update(f.contents).digest('hex').slice(0, 12);
    const name = `app-${hash}${ext}`;
    write(path.join(out, 'assets', name), f.contents);
    assets.push(name);
  }
  const js = assets.find((n) => n.endsWith('.js'));
  const css = assets.find((n) => n.endsWith('.css'));
  const html = fs.readFileSync(path.join(SRC, 'index.html'), 'utf8')
    .replace('%CSS%', `assets/${css}`)
    .replace('%JS%', `assets/${js}`);
  write(path.join(out, 'index.html'), html);
  return ['index.html', ...assets.map((a) => `assets/${a}`)].map((rel) => {
    const raw = fs.statSync(path.join(out, rel)).size;
    const gz = fs.statSync(path.join(out, rel + '.gz')).size;
    return { rel, raw, gz };
  });
}

// ---- the docs -------------------------------------------------------------

function slug(text) {
  return text.toLowerCase().replace(/<[^>]+>/g, '').replace(/&[a-z#0-9]+;/g, '')
    .replace(/[^\w\s-]/g, '').trim().replace(/\s+/g, '-');
}

// Links between docs: `queues.md#x` -> `queues#x`; the repository's other
// files (README.md, src/...) have no page and stay as written. Every URL of
// the docs is relative (every page is at /docs/NAME), so that they hold
// behind a reverse proxy's path prefix.
function docHref(href, names) {
  const m = /^(?:\.\/|\.\.\/docs\/)?([\w.-]+)\.md(#.*)?$/.exec(href || '');
  if (m && names.has(m[1])) return `${m[1]}${m[2] || ''}`;
  return href;
}

function buildDocs() {
  const dir = path.join(ROOT, 'docs');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.md')).sort();
  const names = new Set(files.map((f) => f.slice(0, -3)));
  const template = fs.readFileSync(path.join(SRC, 'docs.html'), 'utf8');
  const style = fs.readFileSync(path.join(SRC, 'docs.css'), 'utf8');
  const page = (title, body, current) => template
    .replace('%TITLE%', esc(title))
    .replace('%STYLE%', style)
    .replace('%NAV%', [...names].map((n) =>
      `<a href="${n}"${n === current ? ' aria-current="page"' : ''}>${esc(n)}</a>`).join('\n'))
    .replace('%BODY%', body);
  const list = [];
  for (const f of files) {
    const name = f.slice(0, -3);
    const md = fs.readFileSync(path.join(dir, f), 'utf8');
    const seen = new Map();
    const renderer = {
      heading({ tokens, depth }) {
        const text = this.parser.parseInline(tokens);
        let id = slug(text);
        const n = seen.get(id) || 0;
        seen.set(id, n + 1);
        if (n) id += `-${n}`;
        return `<h${depth} id="${id}"><a class="anchor" href="#${id}" aria-hidden="true">#</a>${text}</h${depth}>\n`;
      },
      link({ href, title, tokens }) {
        const text = this.parser.parseInline(tokens);
        const t = title ? ` title="${esc(title)}"` : '';
        return `<a href="${esc(docHref(href, names))}"${t}>${text}</a>`;
      },
    };
    const m = new Marked();
    m.use({ renderer, gfm: true });
    const body = m.parse(md);
    const title = (/^#\s+(.+)$/m.exec(md) || [, name])[1].replace(/`/g, '');
    const summary = md.split('\n').slice(1).find((l) => l.trim() && !l.startsWith('#')) || '';
    list.push({ name, title, summary });
    write(path.join(DIST, 'docs', `${name}.html`), page(title, body, name));
  }
  const index = `<h1>spiderd documentation</h1>\n<ul class="doclist">\n${list.map((d) =>
    `<li><a href="${d.name}">${esc(d.title)}</a><br><span>${esc(d.summary.replace(/[`*]/g, ''))}</span></li>`).join('\n')}\n</ul>\n` +
    '<p>Also: <a href="../ui/">the console</a> and <a href="../api/">the API reference</a>.</p>';
  write(path.join(DIST, 'docs', 'index.html'), page('spiderd documentation', index, ''));
  return files.length;
}

// ---- Swagger UI -----------------------------------------------------------

function buildApi() {
  const from = path.join(UI, 'node_modules', 'swagger-ui-dist');
  const out = path.join(DIST, 'api');
  for (const f of ['swagger-ui-bundle.js', 'swagger-ui.css', 'favicon-32x32.png', 'favicon-16x16.png'])
    write(path.join(out, f), fs.readFileSync(path.join(from, f)), { gz: !f.endsWith('.png') });
  write(path.join(out, 'index.html'), fs.readFileSync(path.join(SRC, 'api.html')));
  write(path.join(out, 'init.js'), fs.readFileSync(path.join(SRC, 'api-init.js')));
}

// ---- main -----------------------------------------------------------------

fs.rmSync(DIST, { recursive: true, force: true });
const sizes = await buildConsole();
const ndocs = buildDocs();
buildApi();

console.log(`ui/dist: console, ${ndocs} docs, Swagger UI`);
let total = 0;
for (const { rel, raw, gz } of sizes) {
  total += gz;
  console.log(`  console/${rel.padEnd(34)} ${String(raw).padStart(8)} B  gzip ${String(gz).padStart(7)} B`);
}
console.log(`  console first load (gzip)${' '.repeat(21)}${String(total).padStart(7)} B of ${LIMIT} B allowed`);
if (total > LIMIT) {
  console.error('the console\'s first load is over its budget');
  process.exit(1);
}
