"""The web UI as clients scrape it: the home page, /jobs parsed with
ScrapydWeb's regexes, the /logs/ and /items/ static trees (listings parsed
with ScrapydWeb's regexes, Range, redirects, 404s, traversal)."""

import datetime
import email.utils
import http.client
import os
import re

import pytest

from conftest import timeout, wait_for

# ScrapydWeb 1.6 (views/dashboard/jobs.py): the jobs table scraper.
JOB_PATTERN = re.compile(r"""
    <tr>\s*<td>(?P<Project>.*?)</td>\s*<td>(?P<Spider>.*?)</td>\s*<td>(?P<Job>.*?)</td>\s*
    (?:<td>(?P<PID>.*?)</td>\s*)?(?:<td>(?P<Start>.*?)</td>\s*)?(?:<td>(?P<Runtime>.*?)</td>\s*)?
    (?:<td>(?P<Finish>.*?)</td>\s*)?(?:<td>(?P<Log>.*?)</td>\s*)?(?:<td>(?P<Items>.*?)</td>\s*)?
    [\w\W]*?</tr>""", re.X)
JOB_KEYS = ["project", "spider", "job", "pid", "start", "runtime", "finish", "href_log", "href_items"]
HREF_PATTERN = re.compile(r"""href=['"](.+?)['"]""")

# ScrapydWeb (vars.py): the directory listing scraper, with the optional
# "Last modified" column of Scrapyd 1.5+.
DIRECTORY_PATTERN = re.compile(
    r'<tr class="(?P<odd_even>odd|even)">\n'
    r'\s+<td>(?P<filename>.*?)</td>\n'
    r'\s+<td>(?P<size>.*?)</td>\n'
    r'(?:\s+<td>(?P<last_modified>.*?)</td>\n)?'
    r'\s+<td>(?P<content_type>.*?)</td>\n'
    r'\s+<td>(?P<content_encoding>.*?)</td>\n'
    r'</tr>')
HREF_NAME_PATTERN = re.compile(r'href="(.+?)">(.+?)<')

JOBS_HEADERS = ["Project", "Spider", "Job", "PID", "Start", "Runtime", "Finish", "Log", "Items", "Cancel"]


def scrapydweb_jobs(text):
    assert re.search(r"<h1>Jobs</h1>", text), "ScrapydWeb needs <h1>Jobs</h1>"
    text = re.sub(r"<thead>.*?</thead>", "", text, flags=re.S)
    return [dict(zip(JOB_KEYS, row)) for row in re.findall(JOB_PATTERN, text)]


def scrapydweb_state(row):
    if not row["start"]:
        return "pending"
    return "running" if not row["finish"] else "finished"


def href(cell):
    m = HREF_PATTERN.search(cell)
    return m.group(1) if m else None


def format_size(size):
    """Twisted's static.formatFileSize."""
    if size < 1024:
        return "%iB" % size
    if size < 1024 ** 2:
        return "%iK" % (size / 1024)
    if size < 1024 ** 3:
        return "%iM" % (size / 1024 ** 2)
    return "%iG" % (size / 1024 ** 3)


@pytest.fixture(scope="module")
def wd(module_spiderd, egg):
    """items on, one slot; projects "web" and "abc" (uploaded in that order)."""
    d = module_spiderd(name="web", scrapyd={"items_dir": "items", "max_proc": 1})
    d.upload("web", "1.0", egg("testproj"))
    d.upload("abc", "1.0", egg("testproj"))
    return d


# ---- home page ---------------------------------------------------------

def test_home_page_without_projects_or_items(spiderd):
    d = spiderd()
    r = d.get("/")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.headers["Content-Length"] == str(len(r.content))
    text = r.text
    assert "<h1>Scrapyd</h1>" in text
    assert 'href="/jobs"' in text and 'href="/logs/"' in text
    assert "/items/" not in text
    assert "No Scrapy projects yet." in text and "Scrapy projects:" not in text

    head = d.request("HEAD", "/")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Length"] == str(len(r.content))

    r = d.request("POST", "/")
    assert r.status_code == 405
    assert r.headers.get("Allow") == "HEAD, GET"
    assert b"Method Not Allowed" in r.content


def test_home_page_is_scrapyd_16s_html5_page(wd):
    text = wd.get("/").text
    assert text.startswith("<!DOCTYPE html>\n<html lang=\"en\">"), text[:80]
    assert '<meta charset="utf-8">' in text


def test_home_page_lists_projects_sorted_and_honours_the_prefix_header(wd):
    text = wd.get("/").text
    assert "Scrapy projects:" in text and "No Scrapy projects yet." not in text
    assert re.search(r"<li>abc</li>\s*<li>web</li>", text), text
    assert 'href="/items/"' in text
    text = wd.get("/", headers={"X-Forwarded-Prefix": "/path/to"}).text
    for link in ("/path/to/jobs", "/path/to/logs/", "/path/to/items/"):
        assert f'href="{link}"' in text


def test_unknown_paths_get_twisteds_404_page(wd):
    r = wd.get("/nosuch")
    assert r.status_code == 404
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert b"No Such Resource" in r.content
    assert b"Sorry. No luck finding that resource." in r.content


@pytest.fixture(scope="module")
def listed(wd):
    """A finished `fail` job in project web, plus other files in its log dir
    (made first: the jobs page fixture then holds the only slot)."""
    wd.schedule("web", "fail", jobid="lst1")
    wd.wait_finished("lst1")
    base = os.path.dirname(wd.log_path("web", "fail", "lst1"))
    os.makedirs(os.path.join(base, "zdir"), exist_ok=True)
    with open(os.path.join(base, "a&b.txt"), "w") as f:
        f.write("ampersand\n")
    with open(os.path.join(base, "b.json"), "w") as f:
        f.write('{"pages": 1}\n')
    with open(os.path.join(wd.abs_dir("logs_dir"), "stats.json"), "w") as f:
        f.write('{"status": "ok"}\n')
    return base


# ---- /jobs -------------------------------------------------------------

WEIRD = "x<y>&z"  # a job id that needs HTML escaping


@pytest.fixture(scope="module")
def jobs_page(wd, listed):
    """One finished, one running and two pending jobs (one id needing
    escaping); yields (listjobs entries by id, /jobs text); cleans up."""
    wd.schedule("web", "quick", count=1, jobid="fin1")
    wd.wait_finished("fin1")
    wd.schedule("web", "slow", jobid="run1")
    # Its log exists from its claim; its pid once the process is there (a
    # warm start's fork takes a moment more than a spawn).
    wait_for(lambda: (lambda e: e.get("log_url") and e.get("pid"))(wd.find("run1")[1] or {}), 30,
             "run1's log and pid")
    wd.schedule("web", "quick", jobid="pend1")
    wd.schedule("web", "quick", jobid=WEIRD)
    try:
        lj = wd.listjobs()
        entries = {e["id"]: e for section in ("pending", "running", "finished") for e in lj[section]}
        r = wd.get("/jobs")
        assert r.status_code == 200
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        yield entries, r.text
    finally:
        wd.cancel("web", "pend1")
        wd.cancel("web", WEIRD)
        wd.cancel("web", "run1", "KILL")
        wd.wait_finished("run1", 15)


def test_jobs_page_layout_is_scrapyd_16s(jobs_page):
    _, text = jobs_page
    assert '<table id="jobs">' in text
    thead = re.search(r"<thead>(.*?)</thead>", text, re.S).group(1)
    assert re.findall(r"<th>(\w+)</th>", thead) == JOBS_HEADERS
    assert re.findall(r'<th colspan="10">(\w+)</th>', text) == ["Pending", "Running", "Finished"]
    assert text.count("<tbody>") == 3
    # One cell per line, as ScrapydWeb's issue #249 taught.
    assert re.search(r"<tr>\n\s*<td>web</td>\n\s*<td>quick</td>\n\s*<td>fin1</td>\n", text)


def test_jobs_page_parses_with_scrapydwebs_regexes(wd, jobs_page):
    entries, text = jobs_page
    thead = re.search(r"<thead>(.*?)</thead>", text, re.S).group(1)
    assert re.findall(r"<th>(\w+)</th>", thead) == JOBS_HEADERS
    rows = scrapydweb_jobs(text)
    by_job = {row["job"]: row for row in rows}
    assert {"fin1", "run1", "pend1"} <= set(by_job)

    p = by_job["pend1"]
    assert scrapydweb_state(p) == "pending"
    assert (p["project"], p["spider"], p["pid"], p["start"], p["runtime"], p["finish"]) == \
        ("web", "quick", "", "", "", "")

    run = entries["run1"]
    g = by_job["run1"]
    assert scrapydweb_state(g) == "running"
    assert (g["project"], g["spider"], g["pid"]) == ("web", "slow", str(run["pid"]))
    assert datetime.datetime.strptime(g["start"], "%Y-%m-%d %H:%M:%S")
    assert g["start"] == run["start_time"][:19]
    assert re.fullmatch(r"\d+:\d\d:\d\d", g["runtime"]), g["runtime"]
    assert href(g["href_log"]) == "/logs/web/slow/run1.log"

    fin = entries["fin1"]
    f = by_job["fin1"]
    assert scrapydweb_state(f) == "finished"
    assert (f["project"], f["spider"], f["pid"]) == ("web", "quick", "")
    assert f["start"] == fin["start_time"][:19] and f["finish"] == fin["end_time"][:19]
    assert datetime.datetime.strptime(f["finish"], "%Y-%m-%d %H:%M:%S")
    assert re.fullmatch(r"\d+:\d\d:\d\d", f["runtime"]), f["runtime"]
    assert href(f["href_log"]) == "/logs/web/quick/fin1.log"
    assert href(f["href_items"]) == "/items/web/quick/fin1.jl"

    # Each row sits in its section.
    pos = {m.group(1): m.start() for m in re.finditer(r"<th colspan=\"10\"[^>]*>(\w+)</th>", text)}
    assert sorted(pos, key=pos.get) == ["Pending", "Running", "Finished"]
    assert pos["Pending"] < text.index("<td>pend1</td>") < pos["Running"]
    assert pos["Running"] < text.index("<td>run1</td>") < pos["Finished"]
    assert pos["Finished"] < text.index("<td>fin1</td>")

    # Names are HTML-escaped.
    assert WEIRD not in text
    assert "<td>x&lt;y&gt;&amp;z</td>" in text


def test_jobs_page_cancel_buttons(jobs_page):
    _, text = jobs_page
    forms = re.findall(r"<form.*?</form>", text, re.S)
    cancel_jobs = set()
    for form in forms:
        assert re.search(r'method="post"', form, re.I) and 'action="/cancel.json"' in form
        assert "confirm('Are you sure?')" in form
        assert re.search(r'<input type="hidden" name="project" value="web"\s*/?>', form)
        cancel_jobs.add(re.search(r'<input type="hidden" name="job" value="(.*?)"', form).group(1))
    # For pending and running jobs only.
    assert {"pend1", "run1", "x&lt;y&gt;&amp;z"} <= cancel_jobs
    assert "fin1" not in cancel_jobs


def test_jobs_page_honours_the_prefix_header(wd, jobs_page):
    text = wd.get("/jobs", headers={"X-Forwarded-Prefix": "/pre/fix"}).text
    assert 'href="/pre/fix/logs/web/quick/fin1.log"' in text
    assert 'href="/pre/fix/items/web/quick/fin1.jl"' in text
    assert 'action="/pre/fix/cancel.json"' in text


def test_jobs_page_without_cancel_service(spiderd):
    d = spiderd(services={"cancel.json": ""})
    assert d.request("POST", "/cancel.json", data={"project": "p", "job": "j"}).status_code == 404
    text = d.get("/jobs").text
    thead = re.search(r"<thead>(.*?)</thead>", text, re.S).group(1)
    assert re.findall(r"<th>(\w+)</th>", thead) == JOBS_HEADERS[:8]
    assert re.findall(r'<th colspan="8"[^>]*>(\w+)</th>', text) == ["Pending", "Running", "Finished"]
    assert d.api("daemonstatus.json")["status"] == "ok"


# ---- /logs/ and /items/ ------------------------------------------------

def listing(d, url):
    r = d.get(url)
    assert r.status_code == 200, (url, r.status_code)
    assert r.headers["Content-Type"].startswith("text/html")
    text = r.text
    assert f"Directory listing for {url}" in text
    assert f"<h1>Directory listing for {url}</h1>" in text
    return [m.groupdict() for m in DIRECTORY_PATTERN.finditer(text)]


def test_logs_listing_parses_with_scrapydwebs_regexes(wd, listed):
    rows = listing(wd, "/logs/")
    names = {HREF_NAME_PATTERN.search(r["filename"]).group(2): r for r in rows}
    assert "web/" in names and "stats.json" in names
    assert HREF_NAME_PATTERN.search(names["web/"]["filename"]).group(1) == "web/"
    assert (names["web/"]["size"], names["web/"]["content_type"]) == ("", "[Directory]")

    rows = listing(wd, "/logs/web/fail/")
    parsed = [HREF_NAME_PATTERN.search(r["filename"]).groups() for r in rows]
    # Directories first, then files, each sorted by name; names escaped, hrefs quoted.
    assert parsed == [("zdir/", "zdir/"), ("a%26b.txt", "a&amp;b.txt"),
                      ("b.json", "b.json"), ("lst1.log", "lst1.log")]
    assert [r["odd_even"] for r in rows] == ["odd", "even", "odd", "even"]
    assert [r["content_type"] for r in rows] == ["[Directory]", "[text/plain]", "[application/json]", "[text/plain]"]
    assert [r["content_encoding"] for r in rows] == ["", "", "", ""]
    files = ["zdir", "a&b.txt", "b.json", "lst1.log"]
    sizes = ["" if f == "zdir" else format_size(os.path.getsize(os.path.join(listed, f))) for f in files]
    assert [r["size"] for r in rows] == sizes
    for r, f in zip(rows, files):
        mtime = os.path.getmtime(os.path.join(listed, f))
        assert r["last_modified"] == datetime.datetime.fromtimestamp(mtime).strftime("%Y-%m-%d %H:%M")


def test_items_listing(wd, listed):
    rows = listing(wd, "/items/")
    assert "web/" in [HREF_NAME_PATTERN.search(r["filename"]).group(2) for r in rows]
    rows = listing(wd, "/items/web/fail/")
    assert [HREF_NAME_PATTERN.search(r["filename"]).group(2) for r in rows] == ["lst1.jl"]


def test_directory_without_slash_redirects(wd, listed):
    for path in ("/logs", "/logs/web", "/logs/web/fail", "/items/web"):
        r = wd.get(path)
        assert r.status_code == 302, path
        assert r.headers["Location"].endswith(path + "/"), r.headers["Location"]


def test_log_file_serving_and_ranges(wd, listed):
    path = os.path.join(listed, "lst1.log")
    with open(path, "rb") as f:
        body = f.read()
    size = len(body)
    url = "/logs/web/fail/lst1.log"
    r = wd.get(url)
    assert r.status_code == 200
    assert r.content == body
    assert r.headers["Content-Type"].startswith("text/plain")
    assert r.headers["Content-Length"] == str(size)
    assert r.headers["Accept-Ranges"] == "bytes"
    modified = email.utils.parsedate_to_datetime(r.headers["Last-Modified"])
    assert int(modified.timestamp()) == int(os.path.getmtime(path))

    r = wd.get(url, headers={"Range": "bytes=0-9"})
    assert r.status_code == 206
    assert r.content == body[:10]
    assert r.headers["Content-Range"] == f"bytes 0-9/{size}"
    assert r.headers["Content-Length"] == "10"
    r = wd.get(url, headers={"Range": "bytes=-5"})
    assert r.status_code == 206 and r.content == body[-5:]
    assert r.headers["Content-Range"] == f"bytes {size - 5}-{size - 1}/{size}"
    r = wd.get(url, headers={"Range": "bytes=7-"})
    assert r.status_code == 206 and r.content == body[7:]
    r = wd.get(url, headers={"Range": f"bytes={size + 100}-{size + 200}"})
    assert r.status_code == 416

    head = wd.request("HEAD", url)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Length"] == str(size)


def test_logs_tree_serves_any_file_and_404s(wd, listed):
    r = wd.get("/logs/web/fail/b.json")
    assert r.status_code == 200 and r.content == b'{"pages": 1}\n'
    assert r.headers["Content-Type"].startswith("application/json")
    r = wd.get("/logs/stats.json")
    assert r.status_code == 200 and r.content == b'{"status": "ok"}\n'
    # ScrapydWeb probes the extensions in turn.
    assert wd.get("/logs/web/fail/lst1.log").status_code == 200
    for ext in (".log.gz", ".txt", ""):
        r = wd.get("/logs/web/fail/lst1" + ext)
        assert r.status_code == 404, ext
        assert b"File not found." in r.content
    r = wd.get("/items/web/fail/lst1.jl")
    assert r.status_code == 200
    with open(wd.items_path("web", "fail", "lst1"), "rb") as f:
        assert r.content == f.read()


@pytest.mark.parametrize("path", [
    "/logs/../secret.txt", "/logs/%2e%2e/secret.txt", "/logs/..%2fsecret.txt",
    "/logs/%2e%2e%2fsecret.txt", "/logs/web/../../secret.txt", "/logs/web/%2e%2e/%2e%2e/secret.txt",
    "/items/../secret.txt", "/items/%2e%2e/secret.txt", "/logs/%2fetc%2fpasswd", "/logs//etc/passwd",
])
def test_static_trees_do_not_escape_their_directory(wd, listed, path):
    with open(wd.path("secret.txt"), "w") as f:
        f.write("TOPSECRET\n")
    conn = http.client.HTTPConnection("127.0.0.1", wd.port, timeout=timeout(10))
    try:
        conn.request("GET", path)  # sent as is: no client-side normalisation
        r = conn.getresponse()
        body = r.read()
    finally:
        conn.close()
    assert b"TOPSECRET" not in body and b"root:" not in body
    assert r.status in (301, 302, 400, 403, 404), (path, r.status)
