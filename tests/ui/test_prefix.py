"""The console, the docs and the API reference behind a reverse proxy's path
prefix: a real nginx proxies /spiderd/ to the daemon with X-Forwarded-Prefix,
and headless Chromium uses everything from there. Every request the pages
make stays under /spiderd/ (nginx's access log and the browser's resource
timing both say so), the event stream is live through the proxy, and links
keep the prefix. A prefix that is not a plain path is no prefix."""

import re

import pytest
from selenium.webdriver.common.by import By

from conftest import DaemonFactory, browser_errors, serves_console, wait_css, wait_for, wait_text
from nginx import Nginx

API = "/api/v1"
PREFIX = "/spiderd"


def api(d, method, path, **kw):
    r = d.request(method, API + path, **kw)
    assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}"
    return r.json() if r.content else None


def run_job(d, spider, **args):
    return api(d, "POST", "/jobs", json={"project": "testproj", "spider": spider,
                                          "args": {k: str(v) for k, v in args.items()}})


@pytest.fixture(scope="module")
def proxied(tmp_path_factory, egg):
    factory = DaemonFactory(tmp_path_factory.mktemp("prefix"))
    d = factory(scrapyd={"max_proc": 2, "items_dir": "items"})
    if not serves_console(d):
        factory.close()
        pytest.skip("the daemon does not serve ui/dist (SPIDERD_UI_DIR)")
    d.upload("testproj", "1", egg("testproj"))
    n = Nginx(tmp_path_factory.mktemp("nginx"), upstream_port=d.port, prefix=PREFIX).start()
    d.front = n
    d.base = n.url  # ends with the prefix
    yield d
    n.stop()
    factory.close()


def outside(n, since=0):
    """nginx's logged requests from index since that are not under the prefix."""
    return [r for r in n.requests()[since:] if not r[1].startswith(PREFIX + "/")]


def resources(drv):
    return drv.execute_script(
        "return [location.href].concat(performance.getEntriesByType('resource').map(e => e.name))")


def assert_inside(drv, d, since, what):
    urls = resources(drv)
    bad = [u for u in urls if not u.startswith(d.base + "/")]
    assert not bad, f"{what}: the browser went outside {PREFIX}/: {bad}"
    assert not outside(d.front, since), f"{what}: nginx saw {outside(d.front, since)}"
    failed = [r for r in d.front.requests()[since:] if r[2] >= 400]
    assert not failed, f"{what}: {failed}"
    errs = browser_errors(drv)
    assert not errs, f"{what}: browser errors {errs}"


# ---- the pages as the daemon serves them (no browser) ---------------------

def test_index_html_carries_the_prefix_in_its_base(proxied):
    d = proxied
    for path in ("/ui/", "/ui/jobs/12"):
        r = d.get(path, headers={"X-Forwarded-Prefix": "/spiderd/"})
        assert r.status_code == 200, path
        assert '<base href="/spiderd/ui/">' in r.text, r.text
        assert "x-forwarded-prefix" in r.headers["Vary"].lower()
        assert 'src="assets/app-' in r.text and "/ui/assets" not in r.text
    plain = d.get("/ui/")
    assert '<base href="/ui/">' in plain.text
    # each prefix its own validator; a revalidation answers 304
    pr = d.get("/ui/", headers={"X-Forwarded-Prefix": "/spiderd"})
    other = d.get("/ui/", headers={"X-Forwarded-Prefix": "/other"})
    assert len({plain.headers["ETag"], pr.headers["ETag"], other.headers["ETag"]}) == 3
    again = d.get("/ui/", headers={"X-Forwarded-Prefix": "/spiderd", "If-None-Match": pr.headers["ETag"]})
    assert again.status_code == 304 and again.content == b""
    stale = d.get("/ui/", headers={"X-Forwarded-Prefix": "/spiderd", "If-None-Match": plain.headers["ETag"]})
    assert stale.status_code == 200


@pytest.mark.parametrize("bad", [
    '"><script>alert(1)</script>', "//evil.example", "/a//b", "/a/../b", "/./a", "relative",
    "/a b", "/a<b", "/a'b", "/a&b", "/%zz", "/" + "x" * 300, "/caf\u00e9".encode().decode("latin-1"),
])
def test_a_prefix_that_is_not_a_plain_path_is_no_prefix(proxied, bad):
    d = proxied
    r = d.get("/ui/", headers={"X-Forwarded-Prefix": bad})
    assert r.status_code == 200
    assert '<base href="/ui/">' in r.text
    home = d.get("/", headers={"X-Forwarded-Prefix": bad}).text
    assert 'href="/jobs"' in home and 'href="/ui/"' in home
    assert "evil" not in home and "<script>alert" not in home


def test_the_docs_and_the_api_reference_link_relatively(proxied):
    d = proxied
    for path in ("/docs/", "/docs/operations", "/api/"):
        text = d.get(path).text
        hrefs = re.findall(r'(?:href|src)="([^"]*)"', text)
        assert hrefs, path
        absolute = [h for h in hrefs if h.startswith("/")]
        assert not absolute, f"{path}: {absolute}"


# ---- in the browser, through nginx ------------------------------------------

def test_console_loads_lists_jobs_and_stays_live_under_the_prefix(proxied, browser):
    d, drv = proxied, browser
    done = run_job(d, "quick", count=2)
    wait_for(lambda: api(d, "GET", f"/jobs/{done['id']}")["state"] == "finished", 60, "the job to end")
    browser_errors(drv)
    since = len(d.front.requests())
    drv.get(d.base + "/ui/")
    wait_css(drv, "header.top nav")
    wait_text(drv, ".live", "live")
    # navigation by the console's own links keeps the prefix
    drv.find_element(By.CSS_SELECTOR, "header.top nav a[href$='/jobs']").click()
    wait_text(drv, "table.jobs", f"#{done['id']}")
    assert drv.current_url.startswith(d.base + "/ui/jobs"), drv.current_url
    # a deep link, reloaded: the SPA's index.html and its assets through the prefix
    drv.get(d.base + f"/ui/jobs/{done['id']}")
    wait_text(drv, "main", "quick")
    wait_text(drv, ".live", "live")
    # the event stream through nginx: a job queued now shows up by itself in
    # the live feed
    drv.get(d.base + "/ui/events?type=job.")
    wait_css(drv, "#events-table")
    wait_text(drv, ".live", "live")
    fresh = run_job(d, "quick", count=1)
    row = wait_text(drv, "#events-table tbody tr:first-child", f"#{fresh['id']}", seconds=20)
    assert "job." in row.text
    # and the jobs list, which reloads on a job's events
    drv.get(d.base + "/ui/jobs")
    wait_text(drv, ".live", "live")
    wait_text(drv, "table.jobs", f"#{fresh['id']}")
    third = run_job(d, "quick", count=1)
    wait_text(drv, "table.jobs", f"#{third['id']}", seconds=20)
    hrefs = drv.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.href)")
    local = [h for h in hrefs if h.startswith("http://127.0.0.1")]
    assert local and all(h.startswith(d.base + "/") for h in local), local
    assert_inside(drv, d, since, "the console")
    # the streams of the pages left since (an open one is logged when it ends)
    streams = [r for r in d.front.requests()[since:] if "/api/v1/events/stream" in r[1]]
    assert streams and all(r[1].startswith(PREFIX + "/api/v1/events/stream") and r[2] == 200
                           for r in streams), streams


def test_docs_and_api_reference_under_the_prefix(proxied, browser):
    d, drv = proxied, browser
    browser_errors(drv)
    since = len(d.front.requests())
    drv.get(d.base + "/docs/")
    wait_text(drv, "main", "spiderd documentation")
    drv.find_element(By.CSS_SELECTOR, "main a[href='operations']").click()
    wait_for(lambda: drv.current_url == d.base + "/docs/operations", 10, "the operations page")
    drv.find_element(By.CSS_SELECTOR, "header a[href='../ui/']")
    assert_inside(drv, d, since, "the docs")
    since = len(d.front.requests())
    drv.get(d.base + "/api/")
    path = wait_css(drv, ".opblock-summary-path[data-path='/api/v1/status']", seconds=20)
    path.click()
    wait_css(drv, ".opblock.is-open button.execute").click()
    body = wait_text(drv, ".opblock.is-open .live-responses-table", "node_name")
    assert "testnode" in body.text
    url = drv.find_element(By.CSS_SELECTOR, ".opblock.is-open .request-url").text
    assert url.split()[-1] == d.base + "/api/v1/status", url
    assert_inside(drv, d, since, "the API reference")


def test_scrapyd_pages_keep_the_prefix(proxied, browser):
    d, drv = proxied, browser
    since = len(d.front.requests())
    drv.get(d.base + "/")
    drv.find_element(By.CSS_SELECTOR, "a[href='/spiderd/jobs']").click()
    wait_text(drv, "h1", "Jobs")
    drv.get(d.base + "/")
    drv.find_element(By.CSS_SELECTOR, "a[href='/spiderd/ui/']").click()
    wait_css(drv, "header.top nav")
    # Scrapyd's pages name no icon (they are kept as Scrapyd writes them), so
    # the browser asks the root for one: the only request outside
    left = [r for r in outside(d.front, since) if r[1] != "/favicon.ico"]
    assert not left, left
