"""Multi-process runs (docs/queues.md, "Multi-process runs"): one call starts
three processes of a real Scrapy spider as children of one parent job, over
one frontier queue seeded with URLs of a local site; each page is fetched
once across the children, URLs added mid-run are crawled too, the parent
ends after its last child, and cancelling the parent stops them all. Through
the native API and Grepsr's names (MultiProcessRun, AddToTaskQueue)."""

import collections
import http.server
import os
import re
import subprocess
import threading

import pytest

from conftest import BIN, SANITIZER_MARKERS, get_job, timeout, wait_for

API = "/api/v1"
PROJECT = "queueproj"   # testproj plus the frontier spider (projects/queueproj)
ENDED = ("finished", "failed", "cancelled", "lost")


class Site:
    """Pages /a/0../a/19 (each linking to three others: all reachable from
    /a/0) and /b/0../b/4 (linked among themselves, never from /a). Every
    page waits for `gate`, so a run holds work until the test opens it."""

    def __init__(self):
        self.hits = collections.Counter()
        self.lock = threading.Lock()
        self.gate = threading.Event()
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                m = re.fullmatch(r"/([ab])/(\d+)", self.path)
                size = {"a": 20, "b": 5}
                if not m or int(m.group(2)) >= size[m.group(1)]:
                    self.send_error(404)
                    return
                with site.lock:
                    site.hits[self.path] += 1
                site.gate.wait(timeout(60))
                sec, i = m.group(1), int(m.group(2))
                n = size[sec]
                links = [f"/{sec}/{(i * 3 + k) % n}" for k in (1, 2, 3)]
                body = "".join(f'<a href="{h}">{h}</a>\n' for h in links)
                body = f"<html><body><h1>{self.path}</h1>\n{body}</body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def d(module_spiderd, egg):
    d = module_spiderd(scrapyd={"max_proc": 6})
    d.upload(PROJECT, "1.0", egg("queueproj"))
    return d


@pytest.fixture
def site():
    s = Site()
    yield s
    s.close()


def rpc(d, method, **params):
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    r = d.request("POST", API + "/jsonrpc", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def children(d, parent):
    return d.request("GET", API + "/jobs", params={"parent": parent}).json()["jobs"]


def wait_crawling(d, kids):
    """Every child runs and its scheduler has opened the frontier."""
    for k in kids:
        wait_for(lambda k=k: get_job(d, k["id"])["state"] == "running", timeout(60),
                 f"child {k['id']} running")
        d.wait_log(PROJECT, "frontier", k["jobid"], "Scheduler: spiderd queue", timeout(60))


def wait_ended(d, ident, seconds=120):
    return wait_for(lambda: (lambda j: j if j["state"] in ENDED else None)(get_job(d, ident)),
                    timeout(seconds), f"job {ident} ended")


def test_three_processes_crawl_each_url_once_and_the_parent_ends_last(d, site):
    site.gate.clear()
    r = d.request("POST", API + "/jobs/multiprocess", json={
        "project": PROJECT, "spider": "frontier", "processes": 3,
        "urls": [site.url("/a/0"), site.url("/a/7"), site.url("/a/0")],
        "settings": {"LOG_LEVEL": "INFO", "SPIDERD_QUEUE_PREFETCH": "1"},
        "meta": {"batch": "m1"}})
    assert r.status_code == 201, r.text
    run = r.json()
    assert run["state"] == "running" and run["node"] is None and run["pid"] is None
    assert run["seeded"] == 2  # a URL given twice is one element
    assert run["queue"] == "multiprocess-" + run["job"]
    assert run["meta"] == {"batch": "m1"}
    kids = run["processes"]
    assert len(kids) == 3
    listed = children(d, run["id"])
    assert sorted(k["id"] for k in listed) == sorted(k["id"] for k in kids)
    assert all(k["settings"]["SPIDERD_QUEUE"] == run["queue"] for k in listed)
    wait_crawling(d, kids)
    # Scrapyd's listing shows the parent running beside its children.
    running = {j["id"] for j in d.listjobs(PROJECT)["running"]}
    assert {run["job"]} | {k["jobid"] for k in kids} <= running
    assert get_job(d, run["id"])["children"]["running"] == 3

    # Mid-run (the gate holds the seeds' pages): URLs of a part of the site
    # no page links to.
    added = d.request("POST", f"{API}/jobs/{run['id']}/urls", json={"urls": [site.url("/b/0")]})
    assert added.status_code == 200, added.text
    assert added.json() == {"id": run["id"], "urls": 1, "added": 1, "queue": run["queue"]}
    # The same through Grepsr's name, by Scrapyd job id.
    res = rpc(d, "AddToTaskQueue", id=run["job"], urls=[site.url("/b/1"), site.url("/b/0")])
    assert res["result"]["urls"] == 2, res
    # Not a run: a child; no such job.
    r = d.request("POST", f"{API}/jobs/{kids[0]['id']}/urls", json={"urls": [site.url("/b/2")]})
    assert r.status_code == 400 and "not a multi-process run" in r.json()["error"]["message"]
    r = d.request("POST", f"{API}/jobs/987654/urls", json={"urls": [site.url("/b/2")]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "SPD_ENOJOB"
    assert get_job(d, run["id"])["state"] == "running"

    site.gate.set()
    parent = wait_ended(d, run["id"])
    ends = [get_job(d, k["id"]) for k in kids]
    assert [k["state"] for k in ends] == ["finished"] * 3, ends
    assert parent["state"] == "finished", parent
    assert parent["ended_ms"] >= max(k["ended_ms"] for k in ends)

    # Every page, seeded, found or added, fetched exactly once in all.
    pages = {f"/a/{i}" for i in range(20)} | {f"/b/{i}" for i in range(5)}
    assert set(site.hits) == pages, sorted(site.hits)
    twice = {p: n for p, n in site.hits.items() if n != 1}
    assert not twice, f"pages fetched more than once: {twice}"
    for k in kids:
        log = d.read_log(PROJECT, "frontier", k["jobid"])
        assert "Spider closed (finished)" in log, log[-3000:]
        assert "Traceback" not in log, log[-3000:]
    assert parent["stats"]["children"]["finished"] == 3
    assert parent["stats"]["children"]["items"] == len(pages)
    assert sum(get_job(d, k["id"])["stats"]["items"] for k in kids) == len(pages)

    # The run's queues went with it; it takes no more URLs.
    assert d.request("GET", f"{API}/queues/{run['queue']}").status_code == 404
    assert d.request("GET", f"{API}/queues/{run['queue']}.seen").status_code == 404
    r = d.request("POST", f"{API}/jobs/{run['id']}/urls", json={"urls": [site.url("/b/3")]})
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "SPD_ECONFLICT"
    assert "has ended (finished)" in r.json()["error"]["message"]
    events = d.request("GET", API + "/events", params={"job": run["id"]}).json()["events"]
    assert [e["type"] for e in events][-1] == "job.finished", events


def test_cancelling_the_parent_stops_every_child(d, site):
    site.gate.clear()
    res = rpc(d, "MultiProcessRun", project=PROJECT, spider="frontier", processes=3,
              urls=[site.url(f"/a/{i}") for i in range(6)])
    run = res["result"]
    kids = run["processes"]
    wait_crawling(d, kids)
    r = d.request("POST", f"{API}/jobs/{run['id']}/cancel", json={"signal": "KILL"})
    assert r.status_code == 200, r.text
    assert r.json()["prevstate"] == "running", r.text
    parent = wait_ended(d, run["id"], 60)
    ends = [get_job(d, k["id"]) for k in kids]
    assert [k["state"] for k in ends] == ["cancelled"] * 3, ends
    assert parent["state"] == "cancelled"
    assert parent["ended_ms"] >= max(k["ended_ms"] for k in ends)
    assert d.request("GET", f"{API}/queues/{run['queue']}").status_code == 404
    res = rpc(d, "AddToTaskQueue", id=run["id"], urls=[site.url("/b/0")])
    assert res["error"]["data"]["code"] == "SPD_ECONFLICT", res


def test_cancel_json_stops_a_parent_that_was_running(d, site):
    """A Scrapyd client sees the parent in listjobs.json as running, and
    cancel.json answers as for any running job."""
    site.gate.clear()
    run = rpc(d, "MultiProcessRun", project=PROJECT, spider="frontier", processes=2,
              urls=[site.url(f"/c/{i}") for i in range(4)])["result"]
    wait_crawling(d, run["processes"])
    jobid = get_job(d, run["id"])["job"]
    running = {e["id"] for e in d.listjobs(project=PROJECT)["running"]}
    assert jobid in running, running
    obj = d.api("cancel.json", project=PROJECT, job=jobid, signal="KILL")
    assert obj["prevstate"] == "running", obj
    assert wait_ended(d, run["id"], 60)["state"] == "cancelled"


def test_bad_runs_are_refused(d, site):
    def refused(body, status, code="SPD_EBADPARAM"):
        r = d.request("POST", API + "/jobs/multiprocess", json=body)
        assert r.status_code == status, r.text
        assert r.json()["error"]["code"] == code, r.text
        return r.json()["error"]["message"]

    good = {"project": PROJECT, "spider": "frontier", "processes": 2, "urls": [site.url("/a/0")]}
    refused({**good, "processes": 0}, 400)
    refused({**good, "processes": 65}, 400)
    assert "1 to 10000 URLs" in refused({**good, "urls": []}, 400)
    assert "http:// or https://" in refused({**good, "urls": ["ftp://x/y"]}, 400)
    assert "spaces" in refused({**good, "urls": ["http://x/a b"]}, 400)
    assert "SPIDERD_QUEUE" in refused({**good, "settings": {"SPIDERD_QUEUE": "mine"}}, 400)
    refused({**good, "spider": "nosuch"}, 404, "SPD_ENOSPIDER")
    refused({**good, "project": "nosuch"}, 404, "SPD_ENOPROJECT")
    r = d.request("POST", f"{API}/jobs/1/urls", json={"urls": "not a url"})
    assert r.status_code == 400, r.text
    assert d.request("GET", API + "/jobs", params={"state": "pending"}).json()["jobs"] == []


def test_the_command_line_starts_and_feeds_a_run(d, site):
    def cli(*args):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SCRAPYD_", "SPIDERD_", "SCRAPY_"))}
        env["SPIDERD_CONFIG_FILES"] = ""
        p = subprocess.run([BIN, *args, "--url", d.url], env=env, capture_output=True, text=True,
                           timeout=timeout(30))
        assert not any(m in p.stderr for m in SANITIZER_MARKERS), p.stderr
        return p

    site.gate.clear()
    p = cli("multiprocess", PROJECT, "frontier", site.url("/b/0"), "-n", "2",
            "--set", "LOG_LEVEL=INFO")
    assert p.returncode == 0, p.stderr
    parent = int(p.stdout.strip())
    kids = [{"id": k["id"], "jobid": k["job"]} for k in children(d, parent)]
    assert len(kids) == 2
    wait_crawling(d, kids)
    p = cli("add-urls", str(parent), site.url("/a/0"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"run {parent}: 1 URL(s) given, 1 new to its frontier"
    site.gate.set()
    assert wait_ended(d, parent)["state"] == "finished"
    assert set(site.hits) == {f"/a/{i}" for i in range(20)} | {f"/b/{i}" for i in range(5)}
    p = cli("add-urls", str(parent), site.url("/a/1"))
    assert p.returncode == 1 and "has ended (finished)" in p.stderr, p.stderr
    p = cli("multiprocess", PROJECT, "frontier", site.url("/b/0"))
    assert p.returncode == 2 and "--processes" in p.stderr, p.stderr
