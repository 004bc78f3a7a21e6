"""Test runs (POST /api/v1/jobs/test, jobs.test_run, Grepsr's OneTimeTestRun,
`spiderd run --test`) against a real daemon and real crawls: the request's
items, pages and seconds stop a Scrapy crawl through its close-spider
settings and a command spider through its hard timeout; the job is flagged
`test` in listings and filterable on it; it counts in no statistics and in
no schedule's history. And a schedule's meta is copied into the meta of each
job it fires."""

import io
import json
import os
import subprocess
import time
import zipfile

from conftest import BIN, get_job, ok, req, unique, wait_for

ENDED = {"finished", "failed", "cancelled", "lost"}
PROJECT = "trp"


def ended(d, job_id, seconds=90):
    return wait_for(lambda: (lambda j: j if j["state"] in ENDED else None)(get_job(d, job_id)),
                    seconds, f"job {job_id} to end", interval=0.1)


def trial(d, status=201, **body):
    r = req(d, "POST", "/jobs/test", json=body)
    assert r.status_code == status, r.text
    return r.json()


def slow(d, **limits):
    return trial(d, project=PROJECT, spider="slow", args={"seconds": "60"}, **limits)


def ids(d, **params):
    return [j["id"] for j in ok(req(d, "GET", "/jobs", params=dict(params, limit=1000)))["jobs"]]


def deploy(d, egg_bytes, project=PROJECT):
    r = req(d, "POST", f"/projects/{project}/versions", params={"version": "1"},
            data=egg_bytes("testproj"), headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text


def test_item_page_and_time_limits_stop_the_crawl(spiderd, egg_bytes):
    d = spiderd()
    deploy(d, egg_bytes)
    items, pages = slow(d, items=3), slow(d, pages=3)
    started = time.monotonic()
    secs = slow(d, seconds=2)
    assert items["test"] is True and items["state"] == "pending", items
    assert items["settings"]["CLOSESPIDER_ITEMCOUNT"] == "3", items
    assert pages["settings"]["CLOSESPIDER_PAGECOUNT"] == "3", pages
    assert secs["settings"]["CLOSESPIDER_TIMEOUT"] == "2", secs
    # Scrapy closes the crawl itself at 2 s; the hard timeout is a backstop.
    assert secs["timeout"] == 62, secs
    for job, reason in ((items, "closespider_itemcount"), (pages, "closespider_pagecount"),
                        (secs, "closespider_timeout")):
        done = ended(d, job["id"])
        assert done["state"] == "finished", done
        assert done["stats"]["finish_reason"] == reason, done["stats"]
        assert done["test"] is True
    # The slow spider yields an item every 0.5 s for 60 s: the limits cut it.
    assert 3 <= ended(d, items["id"])["stats"]["items"] <= 5
    assert time.monotonic() - started < 45


def test_flag_is_listed_shown_and_filtered(spiderd, egg_bytes):
    d = spiderd()
    deploy(d, egg_bytes)
    t = trial(d, project=PROJECT, spider="quick", args={"count": "2"}, items=1,
                 meta={"why": "check"})
    r = ok(req(d, "POST", "/jobs", json={"project": PROJECT, "spider": "quick",
                                         "args": {"count": "1"}}), 201)
    assert r["test"] is False and t["test"] is True and t["meta"] == {"why": "check"}
    ended(d, t["id"])
    ended(d, r["id"])
    assert get_job(d, t["id"])["test"] is True
    listed = {j["id"]: j["test"] for j in ok(req(d, "GET", "/jobs"))["jobs"]}
    assert listed[t["id"]] is True and listed[r["id"]] is False
    assert ids(d, test="true") == [t["id"]]
    assert ids(d, test="false") == [r["id"]]
    assert ids(d, test="false", project=PROJECT, state="finished") == [r["id"]]
    bad = req(d, "GET", "/jobs", params={"test": "maybe"})
    assert bad.status_code == 400 and "'test' must be true or false" in bad.text, bad.text
    # A cursor is bound to the test filter too.
    for i in range(2):
        ended(d, trial(d, project=PROJECT, spider="quick", args={"count": "1"})["id"])
    page = ok(req(d, "GET", "/jobs", params={"test": "true", "limit": 1}))
    assert page["next_cursor"], page
    other = req(d, "GET", "/jobs", params={"test": "false", "cursor": page["next_cursor"]})
    assert other.status_code == 400, other.text
    # Through JSON-RPC (the op and Grepsr's name) as through REST.
    for method in ("jobs.test_run", "OneTimeTestRun"):
        body = {"jsonrpc": "2.0", "id": 1, "method": method,
                "params": {"project": PROJECT, "spider": "quick", "items": 1}}
        got = ok(req(d, "POST", "/jsonrpc", json=body))["result"]
        assert got["test"] is True and got["settings"]["CLOSESPIDER_ITEMCOUNT"] == "1", got
        ended(d, got["id"])


def test_test_runs_count_in_no_statistics(spiderd, egg_bytes):
    d = spiderd()
    deploy(d, egg_bytes)
    real = ok(req(d, "POST", "/jobs", json={"project": PROJECT, "spider": "quick",
                                            "args": {"count": "2"}}), 201)
    tests = [trial(d, project=PROJECT, spider="quick", args={"count": "2"}, items=1)
             for _ in range(3)]
    for j in [real] + tests:
        assert ended(d, j["id"])["state"] == "finished"
    (g,) = ok(req(d, "GET", "/stats", params={"by": "spider", "project": PROJECT}))["groups"]
    assert g["ended"] == 1 and g["runs"]["finished"] == 1, g
    assert g["items"]["total"] == 2, g
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetStats", "params": {"project": PROJECT}}
    (g,) = ok(req(d, "POST", "/jsonrpc", json=body))["result"]["groups"]
    assert g["ended"] == 1, g


def test_a_schedules_test_run_stays_out_of_its_history(spiderd, egg_bytes):
    d = spiderd()
    deploy(d, egg_bytes)
    name = unique("ts")
    sc = ok(req(d, "POST", "/schedules", json={
        "name": name, "project": PROJECT, "spider": "quick", "interval": 86400,
        "args": {"count": "2"}, "meta": {"team": "data", "n": 1}, "paused": True,
        "overlap": "skip"}), 201)
    assert sc["meta"] == {"team": "data", "n": 1}, sc
    t = trial(d, schedule=name, items=1, meta={"case": "t1"}, args={"extra": "x"})
    assert t["test"] is True and t["schedule_id"] == sc["id"], t
    assert t["spider"] == "quick" and t["args"] == {"count": "2", "extra": "x"}, t
    assert t["meta"] == {"team": "data", "n": 1, "case": "t1"}, t
    ended(d, t["id"])
    # Its schedule's listing, runs, events and figures know nothing of it.
    assert t["id"] not in ids(d, schedule=sc["id"])
    assert ids(d, schedule=sc["id"], test="true") == [t["id"]]
    assert ok(req(d, "GET", f"/schedules/{name}/runs"))["runs"] == []
    events = ok(req(d, "GET", "/events", params={"schedule": sc["id"], "limit": 1000}))["events"]
    assert not [e for e in events if e.get("job_id") == t["id"]], events
    assert ok(req(d, "GET", "/stats", params={"by": "schedule"}))["groups"] == []
    # A real run of the schedule: its meta is the schedule's, and it is the
    # schedule's history.
    real = ok(req(d, "POST", f"/schedules/{name}/run", json={}), 201)
    assert real["meta"] == {"team": "data", "n": 1} and real["test"] is False, real
    ended(d, real["id"])
    assert ids(d, schedule=sc["id"]) == [real["id"]]
    (g,) = ok(req(d, "GET", "/stats", params={"by": "schedule"}))["groups"]
    assert g["schedule"] == sc["id"] and g["ended"] == 1, g
    # A test run under way does not count as the schedule's active job.
    ok(req(d, "POST", f"/schedules/{name}/resume", json={}))
    ok(req(d, "PATCH", f"/schedules/{name}", json={"spider": "slow", "args": {"seconds": "60"},
                                                  "interval": 1}))
    busy = trial(d, schedule=name, seconds=30)
    try:
        fired = wait_for(lambda: [i for i in ids(d, schedule=sc["id"]) if i != real["id"]],
                         30, "the schedule to fire beside its test run")
        runs = ok(req(d, "GET", f"/schedules/{name}/runs"))["runs"]
        assert fired[-1] in [r["job_id"] for r in runs], runs
    finally:
        ok(req(d, "POST", f"/schedules/{name}/pause", json={}))
        for j in ids(d, state="pending,running"):
            req(d, "POST", f"/jobs/{j}/cancel", json={})
    assert busy["id"] not in ids(d, schedule=sc["id"])


def test_schedule_meta_is_copied_into_each_fired_job(spiderd, egg_bytes):
    d = spiderd()
    deploy(d, egg_bytes)
    name = unique("sm")
    sc = ok(req(d, "POST", "/schedules", json={
        "name": name, "project": PROJECT, "spider": "quick", "interval": 1,
        "args": {"count": "1"}, "meta": {"customer": "acme"}}), 201)
    try:
        job_id = wait_for(lambda: ids(d, schedule=sc["id"]), 30, "a fired job")[-1]
    finally:
        ok(req(d, "POST", f"/schedules/{name}/pause", json={}))
    job = ended(d, job_id)
    assert job["meta"] == {"customer": "acme"}, job
    # The job's copy is its own: a patch of it leaves the schedule's.
    ok(req(d, "PATCH", f"/jobs/{job_id}/meta", json={"meta": {"customer": None, "x": "1"}}))
    assert ok(req(d, "GET", f"/schedules/{name}"))["meta"] == {"customer": "acme"}
    up = ok(req(d, "PATCH", f"/schedules/{name}", json={"meta": {"customer": "globex"}}))
    assert up["meta"] == {"customer": "globex"}
    assert ok(req(d, "POST", f"/schedules/{name}/run", json={}), 201)["meta"] == \
        {"customer": "globex"}
    cleared = ok(req(d, "PATCH", f"/schedules/{name}", json={"meta": {}}))
    assert cleared["meta"] == {}
    assert ok(req(d, "POST", f"/schedules/{name}/run", json={}), 201)["meta"] == {}
    for bad in (["a"], "not json", {"big": "x" * 70000}):
        r = req(d, "PATCH", f"/schedules/{name}", json={"meta": bad})
        assert r.status_code == 400 and r.json()["error"]["code"] == "SPD_EBADPARAM", r.text
    for j in ids(d, state="pending,running"):
        req(d, "POST", f"/jobs/{j}/cancel", json={})


SLOW_SH = "trap 'exit 143' TERM\necho started\nwhile :; do sleep 0.1; done\n"


def test_command_spider_stops_at_its_seconds(spiderd):
    d = spiderd()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("spiderd.json", json.dumps({"spiders": {"loop": {"command": ["sh", "loop.sh"]}}}))
        z.writestr("loop.sh", SLOW_SH)
    r = req(d, "POST", "/projects/cmdp/versions", params={"version": "1"}, data=buf.getvalue(),
            headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    started = time.monotonic()
    t = trial(d, project="cmdp", spider="loop", seconds=2, items=5)
    assert t["timeout"] == 2 and t["settings"]["CLOSESPIDER_ITEMCOUNT"] == "5", t
    done = ended(d, t["id"], 60)
    assert done["state"] == "failed" and time.monotonic() - started < 30, done
    events = ok(req(d, "GET", "/events", params={"job": t["id"], "limit": 100}))["events"]
    assert "job.timeout" in [e["type"] for e in events], events


def test_bad_requests_are_refused_clearly(spiderd, egg_bytes):
    d = spiderd()
    deploy(d, egg_bytes)
    cases = [
        ({"project": PROJECT, "spider": "quick", "seconds": 0}, 400, "seconds"),
        ({"project": PROJECT, "spider": "quick", "seconds": 10 ** 9}, 400, "seconds"),
        ({"project": PROJECT, "spider": "quick", "items": 0}, 400, "items"),
        ({"project": PROJECT, "spider": "quick", "pages": "x"}, 400, "pages"),
        ({"project": PROJECT}, 400, "spider"),
        ({"spider": "quick"}, 400, "project"),
        ({"schedule": "x", "project": PROJECT, "spider": "quick"}, 400, "schedule"),
        ({"project": PROJECT, "spider": "quick", "items": 2,
          "settings": {"CLOSESPIDER_ITEMCOUNT": "3"}}, 400, "items"),
        ({"project": PROJECT, "spider": "quick", "unique_key": "k"}, 400, "unique_key"),
        ({"schedule": "no-such-schedule", "items": 1}, 404, None),
        ({"project": "nope", "spider": "quick"}, 404, None),
        ({"project": PROJECT, "spider": "nope"}, 404, None),
    ]
    for body, status, field in cases:
        r = req(d, "POST", "/jobs/test", json=body)
        assert r.status_code == status, (body, r.text)
        err = r.json()["error"]
        assert err["message"], err
        if field:
            assert field in err["message"], (body, err)
    assert ids(d) == []


def test_cli_run_test_with_limits(spiderd, egg_bytes):
    d = spiderd()
    deploy(d, egg_bytes)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCRAPYD_", "SPIDERD_"))}
    env["SPIDERD_CONFIG_FILES"] = d.conf_path

    def cli(*args):
        return subprocess.run([BIN, *args], cwd=d.workdir, env=env, capture_output=True,
                              text=True, timeout=60)

    p = cli("run", PROJECT, "slow", "-a", "seconds=60", "--test", "--max-items", "2",
            "--max-seconds", "30")
    assert p.returncode == 0, p.stderr
    job = get_job(d, int(p.stdout.strip()))
    assert job["test"] is True and job["settings"]["CLOSESPIDER_ITEMCOUNT"] == "2", job
    assert job["settings"]["CLOSESPIDER_TIMEOUT"] == "30", job
    assert ended(d, job["id"])["stats"]["finish_reason"] == "closespider_itemcount"
    p = cli("run", PROJECT, "quick", "--max-items", "2")
    assert p.returncode == 2 and "give --test too" in p.stderr, p.stderr
    p = cli("run", PROJECT, "quick", "--test", "--max-pages", "0")
    assert p.returncode == 2 and "--max-pages" in p.stderr, p.stderr
    p = cli("job", "show", str(job["id"]))
    assert p.returncode == 0, p.stderr
    assert [l.split() for l in p.stdout.splitlines() if l.startswith("test:")] == \
        [["test:", "yes"]], p.stdout


def test_a_test_run_is_not_rated_beside_real_runs(spiderd, egg_bytes):
    # Five real runs make a history; a test run stopped at one item would be
    # "broken" beside them, but a test run stops at its limits by design.
    d = spiderd()
    deploy(d, egg_bytes)
    def real():
        j = ok(req(d, "POST", "/jobs", json={"project": PROJECT, "spider": "quick",
                                             "args": {"count": "4"}}), 201)
        return ended(d, j["id"])
    for _ in range(5):
        assert real()["state"] == "finished"
    t = ended(d, trial(d, project=PROJECT, spider="quick", args={"count": "4"}, items=1)["id"])
    assert t["state"] == "finished" and t["test"] is True, t
    assert t["health"] is None and t["health_reasons"] == [], t
    assert real()["health"] == "ok"
