"""GET /metrics (Prometheus text format), /healthz and /readyz against a real
daemon: every documented family with its type, counters that move with real
jobs and requests, the store's gauges against the REST API's own counts,
well-formed histograms, probes and basic auth."""

import os
import signal
import subprocess
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import SLOW, STORE_TMPL, wait_for

API = "/api/v1"

# name -> type, as docs/operations.md lists them (histograms and counters by
# the family name the parser gives: without _total).
FAMILIES = {
    "spiderd_up": "gauge",
    "spiderd_build_info": "gauge",
    "spiderd_node_info": "gauge",
    "spiderd_store_up": "gauge",
    "spiderd_store_jobs": "gauge",
    "spiderd_jobs": "counter",  # spiderd_jobs_total
    "spiderd_jobs_running_here": "gauge",
    "spiderd_queue_elements": "gauge",
    "spiderd_jobs_started": "counter",
    "spiderd_jobs_started_warm": "counter",
    "spiderd_warm_templates": "gauge",
    "spiderd_jobs_queued": "counter",
    "spiderd_schedule_lag_seconds": "histogram",
    "spiderd_claim_duration_seconds": "histogram",
    "spiderd_store_op_duration_seconds": "histogram",
    "spiderd_http_requests": "counter",
    "spiderd_http_request_duration_seconds": "histogram",
    "process_resident_memory_bytes": "gauge",
    "process_open_fds": "gauge",
    "process_cpu_seconds": "counter",
    "process_start_time_seconds": "gauge",
}


def scrape(d, **kw):
    r = d.get("/metrics", **kw)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def value(fams, family, sample=None, **labels):
    """The value of the sample (default: the family's name) with exactly these
    labels among its own; 0 when absent."""
    for s in fams[family].samples:
        if s.name == (sample or family) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return 0


def jobs_total(fams, state):
    return value(fams, "spiderd_jobs", "spiderd_jobs_total", state=state)


@pytest.fixture(scope="module")
def d(module_spiderd, egg):
    d = module_spiderd(name="metrics", scrapyd={"max_proc": 2})
    d.upload("mp", "1.0", egg("testproj"))
    return d


def test_every_family_with_its_type(d):
    fams = scrape(d)
    for name, typ in FAMILIES.items():
        assert name in fams, f"{name} missing"
        assert fams[name].type == typ, (name, fams[name].type)
    assert value(fams, "spiderd_up") == 1
    assert value(fams, "spiderd_node_info", node=d.node) == 1
    assert [s.labels for s in fams["spiderd_build_info"].samples][0]["version"]
    assert value(fams, "spiderd_store_up") == 1
    assert value(fams, "process_resident_memory_bytes") > 1 << 20
    assert value(fams, "process_open_fds") > 3
    assert abs(value(fams, "process_start_time_seconds") - time.time()) < 3600
    states = {s.labels["state"] for s in fams["spiderd_jobs"].samples
              if s.name == "spiderd_jobs_total"}
    assert states == {"finished", "failed", "cancelled", "lost"}
    assert {s.labels["state"] for s in fams["spiderd_store_jobs"].samples} == {"pending", "running", "paused"}
    kinds = {s.labels["kind"] for s in fams["spiderd_store_op_duration_seconds"].samples}
    assert kinds == {"read", "write"}


def test_job_counters_move_with_real_jobs(d):
    before = scrape(d)
    ok = d.schedule("mp", "quick", count=2)
    bad = d.schedule("mp", "crash")  # "fail" only raises in a callback: finished
    d.wait_finished(ok)
    d.wait_finished(bad)
    assert d.find(ok)[1]["state"] == "finished"
    assert d.find(bad)[1]["state"] == "failed"
    after = scrape(d)
    assert jobs_total(after, "finished") - jobs_total(before, "finished") == 1
    assert jobs_total(after, "failed") - jobs_total(before, "failed") == 1
    for st in ("cancelled", "lost"):
        assert jobs_total(after, st) == jobs_total(before, st)
    for fam in ("spiderd_jobs_started", "spiderd_jobs_queued"):
        assert value(after, fam, fam + "_total") - value(before, fam, fam + "_total") == 2, fam
    claims = "spiderd_claim_duration_seconds"
    assert value(after, claims, claims + "_count") > value(before, claims, claims + "_count")
    assert value(after, "spiderd_store_jobs", state="running") == 0
    assert value(after, "spiderd_jobs_running_here") == 0



def _start_kind(d, jobid):
    """"warm" or "cold", as the job's job.started event says."""
    row = d.get(f"{API}/jobs/{jobid}").json()["id"]
    r = d.request("GET", f"{API}/events", params={"job": row, "type": "job.started"})
    assert r.status_code == 200, r.text
    starts = [e["data"].get("start") for e in r.json()["events"]]
    assert len(starts) == 1, starts
    return starts[0]


def _templates(d):
    """The daemon's live children that are warm start templates."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if int(rest[1]) == d.proc.pid and rest[0] != "Z" and b"spiderd_runner.template" in cmd:
            out.append(int(p))
    return out


def _run_until_warm(d, **args):
    """Quick crawls one after another until one starts warm."""
    deadline = time.monotonic() + 60 * SLOW
    while True:
        job = d.schedule("mp", "quick", count=1, **args)
        assert d.wait_finished(job)["state"] == "finished"
        if _start_kind(d, job) == "warm":
            return
        assert time.monotonic() < deadline, "no warm start within 60 s"
        time.sleep(0.2)


def test_warm_counters_follow_warm_starts_and_templates(d):
    """spiderd_jobs_started_warm_total grows by one per crawl forked from a
    template and not for a cold one; spiderd_warm_templates reads how many
    templates live (one per version in use)."""
    warm, started = "spiderd_jobs_started_warm", "spiderd_jobs_started"
    _run_until_warm(d)
    wait_for(lambda: value(scrape(d), "spiderd_warm_templates") == len(_templates(d)) == 1,
             15 * SLOW, "one template, and the gauge saying so")
    for _ in range(3):
        before = scrape(d)
        job = d.schedule("mp", "quick", count=1)
        assert d.wait_finished(job)["state"] == "finished"
        kind = _start_kind(d, job)
        after = scrape(d)
        assert value(after, warm, warm + "_total") - value(before, warm, warm + "_total") == \
            (1 if kind == "warm" else 0), kind
        assert value(after, started, started + "_total") - \
            value(before, started, started + "_total") == 1
    before = scrape(d)
    job = d.schedule("mp", "quick", settings=["SPIDERD_WARM_START=0"], count=1)
    assert d.wait_finished(job)["state"] == "finished"
    assert _start_kind(d, job) == "cold"
    after = scrape(d)
    assert value(after, warm, warm + "_total") == value(before, warm, warm + "_total")
    assert value(after, started, started + "_total") - value(before, started, started + "_total") == 1
    # A job naming its version has a template of its own: two now.
    _run_until_warm(d, _version="1.0")
    wait_for(lambda: value(scrape(d), "spiderd_warm_templates") == len(_templates(d)) == 2,
             15 * SLOW, "two templates, and the gauge saying so")

def test_a_cancelled_running_job_counts_once(d):
    before = scrape(d)
    job = d.schedule("mp", "slow", seconds=120)
    d.wait_running(job)
    assert value(scrape(d), "spiderd_jobs_running_here") == 1
    d.cancel("mp", job)
    assert d.wait_finished(job)["state"] == "cancelled"
    after = scrape(d)
    assert jobs_total(after, "cancelled") - jobs_total(before, "cancelled") == 1
    assert jobs_total(after, "finished") == jobs_total(before, "finished")


def test_a_fired_schedule_observes_its_lag(d):
    lag = "spiderd_schedule_lag_seconds"
    before = scrape(d)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
    r = d.request("POST", API + "/schedules",
                  json={"name": "mlag", "project": "mp", "spider": "quick", "at": at})
    assert r.status_code == 201, r.text
    wait_for(lambda: value(scrape(d), lag, lag + "_count") > value(before, lag, lag + "_count"),
             15 * SLOW, "a schedule lag observation")
    after = scrape(d)
    assert value(after, lag, lag + "_count") - value(before, lag, lag + "_count") == 1
    assert 0 <= value(after, lag, lag + "_sum") - value(before, lag, lag + "_sum") < 10 * SLOW
    queued = "spiderd_jobs_queued"
    assert value(after, queued, queued + "_total") - value(before, queued, queued + "_total") == 1


def test_http_requests_by_route_pattern(d):
    fams = scrape(d)
    key = dict(route="/api/v1/jobs/{id}", method="GET", status="404")
    base = value(fams, "spiderd_http_requests", "spiderd_http_requests_total", **key)
    for n in (987654, 987655, 987656):
        assert d.get(f"{API}/jobs/{n}").status_code == 404
    d.get("/no/such/path/at/all")
    d.get("/schedule.json")
    fams = scrape(d)
    assert value(fams, "spiderd_http_requests", "spiderd_http_requests_total", **key) == base + 3
    routes = {s.labels["route"] for s in fams["spiderd_http_requests"].samples}
    assert "other" in routes and "/schedule.json" in routes and "/metrics" in routes
    assert not any("987654" in r or "no/such" in r for r in routes), routes
    methods = {s.labels["method"] for s in fams["spiderd_http_requests"].samples}
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
    dur = "spiderd_http_request_duration_seconds"
    assert value(fams, dur, dur + "_count", route="/api/v1/jobs/{id}") >= 3


def test_queue_gauges_match_the_rest_stats(d):
    q = "mq-gauges"
    r = d.request("POST", f"{API}/queues/{q}/put",
                  json={"elements": ["a", "b", "c", "d"]})
    assert r.status_code == 200, r.text
    r = d.request("POST", f"{API}/queues/{q}/put", json={"element": "later", "delay": 600})
    assert r.status_code == 200, r.text
    r = d.request("POST", f"{API}/queues/{q}/take", json={"max": 1})
    assert r.status_code == 200 and len(r.json()["items"]) == 1, r.text
    st = d.get(f"{API}/queues/{q}").json()["stats"]
    fams = scrape(d)

    def g(state):
        return value(fams, "spiderd_queue_elements", queue=q, state=state)
    assert g("ready") == st["past_due"] == 3
    assert g("delayed") == st["waiting"] - st["past_due"] == 1
    assert g("leased") == st["inflight"] == 1
    assert g("dead") == st["dead"]
    assert g("done") == st["done"]


def test_histograms_are_well_formed(d):
    d.get("/healthz")
    fams = scrape(d)
    seen = 0
    for f in fams.values():
        if f.type != "histogram":
            continue
        series = {}
        for s in f.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            series.setdefault(key, {"b": [], "count": None, "sum": None})
            if s.name.endswith("_bucket"):
                series[key]["b"].append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                series[key]["count"] = s.value
            elif s.name.endswith("_sum"):
                series[key]["sum"] = s.value
        for key, h in series.items():
            les = [le for le, _ in h["b"]]
            assert les == sorted(les) and les[-1] == float("inf"), (f.name, key)
            counts = [c for _, c in h["b"]]
            assert counts == sorted(counts), (f.name, key, counts)
            assert counts[-1] == h["count"], (f.name, key)
            assert h["sum"] is not None and h["sum"] >= 0
            seen += 1
    assert seen >= 5


def test_healthz_and_readyz(d):
    r = d.get("/healthz")
    assert (r.status_code, r.text) == (200, "ok\n")
    wait_for(lambda: d.get("/readyz").status_code == 200, 15 * SLOW, "readyz 200")
    assert d.request("POST", "/healthz").status_code == 405


def test_probes_public_with_basic_auth(spiderd):
    auth = {"username": "u", "password": "p"}
    a = spiderd(name="pub", scrapyd=dict(auth))
    for path in ("/metrics", "/healthz", "/readyz"):
        r = a.session.get(a.url + path)
        assert r.status_code in (200, 503), (path, r.status_code)
    assert a.session.get(a.url + API + "/jobs").status_code == 401
    b = spiderd(name="closed", scrapyd=dict(auth), spiderd={"probes_public": "false"})
    for path in ("/metrics", "/healthz", "/readyz"):
        assert b.session.get(b.url + path).status_code == 401, path
    assert b.session.get(b.url + "/healthz", auth=("u", "p")).status_code == 200


def _pg_processes(pg_dir):
    with open(os.path.join(pg_dir, "data", "postmaster.pid")) as f:
        master = int(f.readline())
    pids = [master]
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == master:
                        pids.append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    return pids


@pytest.mark.skipif(not STORE_TMPL.startswith("postgres"), reason="PostgreSQL stopped by the test (make test-pg)")
def test_readyz_503_while_the_store_stalls(spiderd, own_pg):
    url, pgdir = own_pg  # stopped below: not the server other modules share
    d = spiderd(name="stall", spiderd={"store": url})
    wait_for(lambda: d.get("/readyz").status_code == 200, 15 * SLOW, "readyz 200")
    pids = _pg_processes(pgdir)
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    try:
        t = time.monotonic()
        r = d.get("/readyz", timeout=30)
        assert r.status_code == 503, r.text
        assert "store" in r.text
        assert time.monotonic() - t < 10 * SLOW
        assert d.get("/healthz").status_code == 200
    finally:
        for p in pids:
            os.kill(p, signal.SIGCONT)
    wait_for(lambda: d.get("/readyz").status_code == 200, 30 * SLOW, "readyz 200 again")
