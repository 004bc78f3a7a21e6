#!/usr/bin/python3
"""The console's first load over a daemon holding 100,000 finished jobs.

    /usr/bin/python3 bench/ui_bench.py build/spiderd [--jobs 100000] [--runs 5]
    make bench-ui

A daemon (the integration suite's Daemon class, with the fake crawl as its
interpreter) gets the test project and three real jobs through the REST API.
No API route records an already-ended job, and running 100,000 crawls would
take an hour on two cores, so the rest are copied from those three in the
store's SQLite file while the daemon is stopped (ids in order, ended over the
last 24 hours, 90 % finished, 8 % failed, 2 % cancelled). The daemon then
serves ui/dist/ (make ui) and headless Chromium loads two pages:

- /ui/jobs until the jobs table has rows,
- /ui/ (the overview) until its counts and throughput chart are drawn,

each cold (browser cache cleared) and warm (cache kept), 5 times; printed are
the medians of the bytes transferred (compressed, headers included; the
page's own files and its API calls apart), of the API calls' JSON as
decoded (what they would weigh uncompressed, bodies only) and of the times: the document's
DOMContentLoaded, the load event, and "ready" (the rows or the chart on
screen, recorded by a MutationObserver installed before the page's scripts).
"""

import argparse
import importlib.util
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IT = os.path.join(ROOT, "tests", "integration")
sys.path.insert(0, IT)


def load_integration():
    spec = importlib.util.spec_from_file_location("spiderd_integration", os.path.join(IT, "conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["spiderd_integration"] = mod
    spec.loader.exec_module(mod)
    return mod


READY = {
    "/ui/jobs": "document.querySelector('table.jobs tbody tr')",
    "/ui/": "document.querySelector('.chart canvas') && document.getElementById('count-failed')"
            " && !/…/.test(document.getElementById('count-failed').textContent)",
}

# Installed before any script of the page: notes when the page is ready.
OBSERVER = """
(() => {
  const checks = %s;
  const check = checks[location.pathname];
  if (!check) return;
  const test = new Function('return !!(' + check + ')');
  const mo = new MutationObserver(() => {
    if (window.__readyAt === undefined && test()) { window.__readyAt = performance.now(); mo.disconnect(); }
  });
  document.addEventListener('DOMContentLoaded', () => mo.observe(document.body, {childList: true, subtree: true, characterData: true}));
})();
""" % json.dumps(READY)


def fill(db_path, n):
    """Copies the ended jobs in the store into n rows ended over the last 24 h."""
    con = sqlite3.connect(db_path)
    cols = [r[1] for r in con.execute("PRAGMA table_info(jobs)") if r[1] != "id"]
    tmpl = con.execute("SELECT id FROM jobs WHERE state >= 2 ORDER BY id").fetchall()
    assert tmpl, "no ended job to copy"
    now = int(time.time() * 1000)
    span = 24 * 3600 * 1000 - 60000
    set_cols = {
        "jobid": "lower(hex(randomblob(16)))",
        "created_ms": f"{now - span} + s.i * {span // n}",
        "start_ms": f"{now - span} + s.i * {span // n} + 200",
        "end_ms": f"{now - span} + s.i * {span // n} + 200 + (s.i % 50) * 100",
        "state": "CASE WHEN s.i % 50 = 7 THEN 4 WHEN s.i % 25 = 3 OR s.i % 25 = 11 THEN 3 ELSE 2 END",
        "exit_code": "CASE WHEN s.i % 50 = 7 THEN -1 WHEN s.i % 25 = 3 OR s.i % 25 = 11 THEN 1 ELSE 0 END",
        "term_signal": "CASE WHEN s.i % 50 = 7 THEN 2 ELSE 0 END",
        "pid": "10000 + s.i % 30000",
        "heartbeat_ms": "0",
        "unique_key": "NULL",
    }
    select = ", ".join(set_cols.get(c, f"t.{c}") for c in cols)
    t0 = time.monotonic()
    con.execute("BEGIN")
    con.execute("CREATE TEMP TABLE tmpl AS SELECT row_number() OVER (ORDER BY id) - 1 AS rn, * "
                "FROM jobs WHERE state >= 2")
    con.execute(f"""
        INSERT INTO jobs ({", ".join(cols)})
        WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?)
        SELECT {select} FROM s JOIN tmpl t ON t.rn = s.i % ?
        ORDER BY s.i""", (n, len(tmpl)))
    con.execute("COMMIT")
    total = con.execute("SELECT count(*) FROM jobs").fetchone()[0]
    con.close()
    return total, time.monotonic() - t0


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,900", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-component-update"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    drv.set_page_load_timeout(60)
    drv.execute_cdp_cmd("Network.enable", {})
    drv.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": OBSERVER})
    return drv


MEASURE = """
const nav = performance.getEntriesByType('navigation')[0];
const res = performance.getEntriesByType('resource');
const own = res.filter((r) => !r.name.includes('/api/v1/'));
const api = res.filter((r) => r.name.includes('/api/v1/') && !r.name.includes('/events/stream'));
const sum = (a) => a.reduce((s, r) => s + (r.transferSize || 0), 0);
return {
  doc: nav.transferSize, own: sum(own), api: sum(api), api_n: api.length,
  api_raw: api.reduce((s, r) => s + (r.decodedBodySize || 0), 0),
  dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, ready: window.__readyAt,
  files: own.map((r) => [r.name.split('/').pop(), r.transferSize, r.encodedBodySize]),
};
"""


def measure(drv, url, path, cold):
    if os.environ.get("UI_BENCH_VERBOSE"):
        print(f"  {path} {'cold' if cold else 'warm'}", file=sys.stderr, flush=True)
    if cold:
        drv.execute_cdp_cmd("Network.clearBrowserCache", {})
    drv.get("about:blank")
    drv.get(url + path)
    deadline = time.monotonic() + 60
    while True:
        m = drv.execute_script(MEASURE)
        if m["ready"] is not None and m["load"]:
            return m
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} was not ready within 60 s: {m}")
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin", nargs="?", default=os.path.join(ROOT, "build", "spiderd"))
    ap.add_argument("--jobs", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="leave the daemon's directory")
    a = ap.parse_args()
    os.environ["SPIDERD_BIN"] = os.path.abspath(a.bin)
    it = load_integration()
    import eggs

    if not os.path.isfile(os.path.join(ROOT, "ui", "dist", "console", "index.html")):
        sys.exit("ui/dist is not built: run `make ui`")
    work = tempfile.mkdtemp(prefix="spiderd-ui-bench-")
    markers = os.path.join(work, "markers")
    os.makedirs(markers)
    d = it.Daemon(os.path.join(work, "d"), scrapyd={"max_proc": 4},
                  spiderd={"python": os.path.join(IT, "fakecrawl.py"), "ui_dir": os.path.join(ROOT, "ui", "dist")},
                  env={"MARKER_DIR": markers, "FAKE_SECONDS": "0"})
    drv = None
    try:
        d.start()
        d.upload("testproj", "1", eggs.build_egg("testproj", work))
        ids = [d.request("POST", "/api/v1/jobs", json={"project": "testproj", "spider": s}).json()["id"]
               for s in ("quick", "slow", "fail")]
        for i in ids:
            it.wait_for(lambda: d.request("GET", f"/api/v1/jobs/{i}").json()["state"] in ("finished", "failed"),
                        60, f"job {i}")
        d.stop()
        total, secs = fill(d.path("dbs", "spiderd.db"), a.jobs)
        print(f"store: {total:,} jobs ({a.jobs:,} copied in {secs:.1f} s)")
        d.start()
        r = d.get("/ui/")
        assert r.status_code == 200 and "spiderd console" in r.text, "the daemon does not serve ui/dist (ui_dir)"
        t0 = time.monotonic()
        page = d.get("/api/v1/jobs?limit=50").json()
        print(f"GET /api/v1/jobs?limit=50: {len(page['jobs'])} jobs in {(time.monotonic() - t0) * 1000:.1f} ms")
        drv = browser()
        measure(drv, d.url, "/ui/jobs", True)  # a first load to warm the daemon's page cache
        results = {}
        for path in ("/ui/jobs", "/ui/"):
            for cold in (True, False):
                runs = [measure(drv, d.url, path, cold) for _ in range(a.runs)]
                results[(path, cold)] = runs
        print()
        print(f"median of {a.runs}; bytes = transferred (compressed, with headers); times in ms from navigation start")
        print(f"{'page':10} {'cache':5} {'document':>9} {'js+css':>8} {'api':>8} {'api calls':>9} "
              f"{'api JSON':>9} {'DOMContentLoaded':>16} {'load':>6} {'ready':>6}")
        med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
        for (path, cold), runs in results.items():
            print(f"{path:10} {'cold' if cold else 'warm':5} {med(runs, 'doc'):>9.0f} {med(runs, 'own'):>8.0f} "
                  f"{med(runs, 'api'):>8.0f} {med(runs, 'api_n'):>9.0f} {med(runs, 'api_raw'):>9.0f} "
                  f"{med(runs, 'dcl'):>16.1f} "
                  f"{med(runs, 'load'):>6.1f} {med(runs, 'ready'):>6.1f}")
        print()
        print("files of a cold load:", json.dumps(results[("/ui/jobs", True)][0]["files"]))
    finally:
        if drv:
            drv.quit()
        d.close()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)


if __name__ == "__main__":
    main()
