"""Pausing and resuming a job (docs/jobs.md, "Pause and resume"): a real
Scrapy crawl over a local site of 200 pages, paused half-way, the daemon
restarted, resumed: every page fetched once across both segments, both
segments' items in one items file, the log going on; a resumable command
spider the same way through SPIDERD_STATE_DIR; and the refusals."""

import collections
import http.server
import json
import os
import threading
import time

import pytest

from conftest import SHARED_STORE, free_port, store_url, timeout, unique, wait_for

PAGES = 200


class Site:
    """A local site of PAGES pages that counts every fetch of each."""

    def __init__(self):
        self.hits = collections.Counter()
        self.lock = threading.Lock()
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with site.lock:
                    site.hits[self.path] += 1
                body = f"<html><body>{self.path}</body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def fetched(self):
        with self.lock:
            return sum(self.hits.values())

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site():
    s = Site()
    yield s
    s.close()


def rest(d, method, path, **kw):
    return d.request(method, "/api/v1" + path, **kw)


def job_of(d, job_id):
    r = rest(d, "GET", f"/jobs/{job_id}")
    assert r.status_code == 200, r.text
    return r.json()


def wait_state(d, job_id, state, seconds=60):
    return wait_for(lambda: (lambda j: j if j["state"] == state else None)(job_of(d, job_id)),
                    seconds, f"job {job_id} to be {state}", interval=0.1)


def crawl(d, egg, site, delay="0.03"):
    d.upload("pauseproj", "1", egg("pauseproj"))
    jobid = unique("pause")
    r = rest(d, "POST", "/jobs", json={
        "project": "pauseproj", "spider": "pages", "jobid": jobid,
        "args": {"base": site.url, "n": str(PAGES)},
        "settings": {"DOWNLOAD_DELAY": delay, "CONCURRENT_REQUESTS": "2",
                     "RANDOMIZE_DOWNLOAD_DELAY": "False", "LOG_LEVEL": "DEBUG"}})
    assert r.status_code == 201, r.text
    return r.json()["id"], jobid


def items_of(d, jobid):
    with open(d.items_path("pauseproj", "pages", jobid), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_pause_restart_resume_crawls_every_page_once(spiderd, egg, site):
    d = spiderd(scrapyd={"items_dir": "items"})
    job_id, jobid = crawl(d, egg, site)
    wait_for(lambda: site.fetched() >= 40, timeout(60), "40 pages fetched")
    r = rest(d, "POST", f"/jobs/{job_id}/pause", json={})
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "pausing"
    paused = wait_state(d, job_id, "paused")
    first = site.fetched()
    assert 40 <= first < PAGES, first
    [seg] = paused["segments"]
    assert seg["reason"] == "paused" and seg["node"] == d.node
    assert seg["started"] and seg["ended"]
    # Scrapyd's vocabulary has no paused: such a job waits, as pending does.
    section, entry = d.find(jobid)
    assert section == "pending", (section, entry)
    assert d.api("status.json", job=jobid)["currstate"] == "pending"
    metrics = d.get("/metrics").text
    assert 'spiderd_store_jobs{state="paused"} 1' in metrics
    # A second pause changes nothing; the crawl is gone and stays so.
    r = rest(d, "POST", f"/jobs/{job_id}/pause", json={})
    assert r.status_code == 200 and r.json()["state"] == "paused", r.text
    time.sleep(0.5)
    assert site.fetched() == first
    assert len(items_of(d, jobid)) == first
    log_before = d.read_log("pauseproj", "pages", jobid)

    d.restart()
    assert job_of(d, job_id)["state"] == "paused"
    r = rest(d, "POST", f"/jobs/{job_id}/resume", json={})
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "pending"
    done = wait_state(d, job_id, "finished", seconds=timeout(120))

    # Every page once, across both segments: the second went on from the
    # first's queue and seen set.
    assert len(site.hits) == PAGES
    assert set(site.hits.values()) == {1}, {p: n for p, n in site.hits.items() if n != 1}
    items = items_of(d, jobid)
    assert sorted(i["page"] for i in items) == list(range(PAGES))
    log = d.read_log("pauseproj", "pages", jobid)
    assert log.startswith(log_before) and len(log) > len(log_before)
    assert log.count("Spider opened") == 2
    segs = done["segments"]
    assert [s["reason"] for s in segs] == ["paused", "finished"]
    assert sum(s["items"] for s in segs) == PAGES
    types = [e["type"] for e in rest(d, "GET", "/events", params={"job_id": job_id}).json()
             .get("events", [])]
    if types:
        assert "job.paused" in types and "job.resumed" in types
    # spiderd made the JOBDIR and removes it once the job is over.
    assert not os.path.exists(d.path("dbs", "jobstate", str(job_id)))


def test_pause_refusals_and_cancel_of_a_paused_job(spiderd, egg, site):
    d = spiderd()
    d.upload("pauseproj", "1", egg("pauseproj"))
    # Not running yet (a pending job waits behind max_proc 0? no: an unknown one).
    r = rest(d, "POST", "/jobs/999999/pause", json={})
    assert r.status_code == 404, r.text
    job_id, jobid = crawl(d, egg, site, delay="0.05")
    r = rest(d, "POST", f"/jobs/{job_id}/resume", json={})
    assert r.status_code == 200 and r.json()["state"] in ("pending", "running"), r.text
    wait_for(lambda: site.fetched() >= 5, timeout(60), "5 pages fetched")
    assert rest(d, "POST", f"/jobs/{job_id}/pause", json={}).status_code == 200
    wait_state(d, job_id, "paused")
    # JSON-RPC names the same ops.
    r = d.request("POST", "/api/v1/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "jobs.get",
                                             "params": {"id": job_id}})
    if r.status_code == 200 and "result" in r.json():
        assert r.json()["result"]["state"] == "paused"
    # A cancel ends a paused job for good.
    assert d.cancel("pauseproj", jobid) in ("pending", None)
    ended = wait_state(d, job_id, "cancelled")
    assert [s["reason"] for s in ended["segments"]] == ["paused"]
    r = rest(d, "POST", f"/jobs/{job_id}/resume", json={})
    assert r.status_code == 409, r.text
    r = rest(d, "POST", f"/jobs/{job_id}/pause", json={})
    assert r.status_code == 409, r.text


COUNTER_SH = r"""
dir="$SPIDERD_STATE_DIR"
i=0
[ -f "$dir/n" ] && i=$(cat "$dir/n")
echo "counter starts at $i"
stop=0
trap 'stop=1' TERM
while [ "$i" -lt 60 ] && [ "$stop" = 0 ]; do
  echo "{\"i\": $i}" >> "$SPIDERD_ITEMS_FILE"
  i=$((i+1))
  echo "$i" > "$dir/n.tmp" && mv "$dir/n.tmp" "$dir/n"
  sleep 0.05
done
if [ "$stop" = 1 ]; then echo "counter paused at $i"; exit 0; fi
echo '{"items": 60, "finish_reason": "finished"}' > "$SPIDERD_STATS_FILE"
"""


def command_project(d):
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("spiderd.json", json.dumps({"spiders": {
            "counter": {"command": ["sh", "counter.sh"], "resumable": True},
            "plain": {"command": ["sh", "-c", "while :; do sleep 0.1; done"]}}}))
        z.writestr("counter.sh", COUNTER_SH)
    obj = d.call("addversion.json", data={"project": "cmd", "version": "1"},
                 files={"egg": ("project.zip", buf.getvalue())})
    assert obj["status"] == "ok", obj


def test_resumable_command_spider_goes_on_from_its_state_dir(spiderd):
    d = spiderd(scrapyd={"items_dir": "items"})
    command_project(d)
    jobid = unique("cnt")
    r = rest(d, "POST", "/jobs", json={"project": "cmd", "spider": "counter", "jobid": jobid})
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    path = d.items_path("cmd", "counter", jobid)
    wait_for(lambda: os.path.exists(path) and len(open(path).readlines()) >= 10,
             timeout(30), "10 items")
    # The CLI's face of the same op.
    from test_cli import ok
    assert "pausing" in ok(d, "pause", str(job_id))
    wait_state(d, job_id, "paused")
    first = len(open(path).readlines())
    assert 10 <= first < 60
    assert "pending" in ok(d, "resume", jobid)
    wait_state(d, job_id, "finished")
    with open(path, encoding="utf-8") as f:
        assert [json.loads(line)["i"] for line in f] == list(range(60))
    log = d.read_log("cmd", "counter", jobid)
    assert f"counter paused at {first}" in log and f"counter starts at {first}" in log

    # A command spider that did not declare itself resumable cannot pause.
    r = rest(d, "POST", "/jobs", json={"project": "cmd", "spider": "plain"})
    assert r.status_code == 201, r.text
    plain = r.json()["id"]
    wait_state(d, plain, "running")
    wait_for(lambda: job_of(d, plain)["pid"], timeout(20), "its process")
    r = rest(d, "POST", f"/jobs/{plain}/pause", json={})
    assert r.status_code == 409 and "resumable" in r.text, r.text
    rest(d, "POST", f"/jobs/{plain}/cancel", json={"signal": "KILL"})


@pytest.mark.skipif(not SHARED_STORE, reason="needs a shared store (make test-pg)")
def test_resume_on_another_node_of_a_cluster(spiderd, egg, site, tmp_path):
    """Paused through one node while it runs on the other, resumed on the
    one left: its JOBDIR travels through the shared store. Logs and items
    live on a directory both nodes mount."""
    key = unique("pausecl")
    shared_dirs = {"logs_dir": str(tmp_path / "shared" / "logs"),
                   "items_dir": str(tmp_path / "shared" / "items")}

    def node(name):
        return spiderd(name=name, start=False,
                       scrapyd=dict(shared_dirs, node_name=name, max_proc=2),
                       spiderd={"store": store_url(key), "node_heartbeat": 0.3})

    nodes = {"pa": node("pa").start(), "pb": node("pb").start()}
    job_id, jobid = crawl(nodes["pa"], egg, site)
    wait_for(lambda: site.fetched() >= 40, timeout(60), "40 pages fetched")
    runner = job_of(nodes["pa"], job_id)["node"]
    other = "pb" if runner == "pa" else "pa"
    # Asked of the node that does not run it: the store tells the other.
    r = rest(nodes[other], "POST", f"/jobs/{job_id}/pause", json={})
    assert r.status_code == 200 and r.json()["state"] == "pausing", r.text
    assert wait_state(nodes[other], job_id, "paused")["segments"][0]["node"] == runner
    first = site.fetched()
    nodes[runner].stop()

    r = rest(nodes[other], "POST", f"/jobs/{job_id}/resume", json={})
    assert r.status_code == 200, r.text
    done = wait_state(nodes[other], job_id, "finished", seconds=timeout(120))
    assert [(s["node"], s["reason"]) for s in done["segments"]] == \
        [(runner, "paused"), (other, "finished")]
    assert first < PAGES
    assert len(site.hits) == PAGES and set(site.hits.values()) == {1}
    assert sorted(i["page"] for i in items_of(nodes[other], jobid)) == list(range(PAGES))
    assert "restored its paused state" in nodes[other].stderr_text()
    assert "pause asked on another node" in nodes[runner].stderr_text()


def test_the_state_travels_through_the_object_store(spiderd, egg, site, tmp_path, own_pg):
    """With an object store the paused crawl's state goes to the bucket
    (PREFIX/jobstate/ID.tar.gz), the store keeps an empty row, and the node
    that resumes the job fetches it from there."""
    import shutil
    import s3util
    from conftest import need
    need(os.path.exists(s3util.AWS) and shutil.which("radosgw") is not None,
         "needs radosgw and awscli (make deps)")
    gen = s3util._own_server()
    srv = next(gen)
    try:
        shared_dirs = {"logs_dir": str(tmp_path / "shared" / "logs"),
                       "items_dir": str(tmp_path / "shared" / "items")}

        def node(name):
            return spiderd(name=name, start=False, env={k: v for k, v in srv.items()
                                                        if k.startswith("AWS_")},
                           scrapyd=dict(shared_dirs, node_name=name, max_proc=2),
                           spiderd={"store": own_pg[0], "node_heartbeat": 0.3,
                                    "object_store": f"s3://{srv['S3_BUCKET']}/pre",
                                    "object_store_endpoint": srv["S3_ENDPOINT"]})

        a = node("oa").start()
        job_id, jobid = crawl(a, egg, site)
        wait_for(lambda: site.fetched() >= 40, timeout(60), "40 pages fetched")
        assert rest(a, "POST", f"/jobs/{job_id}/pause", json={}).status_code == 200
        wait_state(a, job_id, "paused")
        key = f"pre/jobstate/{job_id}.tar.gz"
        assert (s3util.get(srv, key) or b"")[:2] == b"\x1f\x8b"  # a gzip'd tar
        assert a.sql("SELECT size FROM job_states WHERE job_id = ?", job_id) == [{"size": 0}]
        a.stop()

        b = node("ob").start()
        assert rest(b, "POST", f"/jobs/{job_id}/resume", json={}).status_code == 200
        wait_state(b, job_id, "finished", seconds=timeout(120))
        assert len(site.hits) == PAGES and set(site.hits.values()) == {1}
        assert "restored its paused state" in b.stderr_text()
        # Its state goes once the job is over.
        assert s3util.get(srv, key) is None
        assert b.sql("SELECT size FROM job_states WHERE job_id = ?", job_id) == []
    finally:
        gen.close()
