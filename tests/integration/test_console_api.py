"""What a web console reads from /api/v1/: job list filters (node, q), the
overview's counts, throughput buckets, cron previews, re-runs. A real daemon
over real HTTP; crawls are a stand-in interpreter (below) so jobs end fast
with the stats and the state a test asks for."""

import datetime
import json
import os
import stat
import urllib.parse

import pytest

from conftest import all_pages, err, get_job, now_ms, ok, req, timeout, unique, wait_for

API = "/api/v1"

# The crawl interpreter: `-a items=N` puts N in item_scraped_count (absent:
# no stats key), `-a outcome=failed` ends it failed (a finish_reason other
# than "finished", exit 1), `-a sleep=S` keeps it running S seconds. The spider
# listing goes to the real interpreter.
FAKE = r'''#!/usr/bin/python3
import json, os, sys, time
args = sys.argv[1:]
if args[:2] == ["-m", "spiderd_runner.template"]:
    sys.exit(0)  # a stand-in has no warm start template: its crawls start cold
if args[:3] != ["-m", "spiderd_runner", "crawl"]:
    os.execv("/usr/bin/python3", ["/usr/bin/python3"] + args)
kv = {}
for i, a in enumerate(args):
    if a == "-a" and i + 1 < len(args) and "=" in args[i + 1]:
        k, v = args[i + 1].split("=", 1)
        kv[k] = v
time.sleep(float(kv.get("sleep", "0")))
stats = {"finish_reason": "finished" if kv.get("outcome", "finished") == "finished" else "shutdown"}
if "items" in kv:
    stats["item_scraped_count"] = int(kv["items"])
with open(os.environ["SPIDERD_STATS_FILE"], "w") as f:
    json.dump(stats, f)
sys.exit(0 if stats["finish_reason"] == "finished" else 1)
'''


def make_fake(tmp_path_factory):
    path = tmp_path_factory.mktemp("fake") / "fakepython"
    path.write_text(FAKE)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


@pytest.fixture(scope="module")
def d(module_spiderd, egg_bytes, tmp_path_factory):
    """One daemon: project "cp" = testproj, crawls by the stand-in."""
    daemon = module_spiderd(name="console",
                            scrapyd={"max_proc": 4, "finished_to_keep": 0},
                            spiderd={"python": make_fake(tmp_path_factory)})
    r = daemon.request("POST", f"{API}/projects/cp/versions", params={"version": "1.0"},
                       data=egg_bytes("testproj"),
                       headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    return daemon


def create(d, spider="quick", project="cp", **fields):
    return ok(req(d, "POST", "/jobs", json={"project": project, "spider": spider, **fields}), 201)


ENDED = ("finished", "failed", "cancelled", "lost")


def wait_ended(d, ident, seconds=30):
    def check():
        j = get_job(d, ident)
        return j if j["state"] in ENDED else None
    return wait_for(check, timeout(seconds), f"job {ident} to end", interval=0.05)


def list_all(d, **params):
    """Every page of /jobs with these filters, as ids (newest first)."""
    return [j["id"] for j in all_pages(d, "/jobs", "jobs", **params)]


# ---- jobs.list: node and q ------------------------------------------------

def test_q_matches_job_id_spider_project_and_arg_values(d):
    tag = unique("t").lower()
    a = create(d, jobid=f"{tag}-Alpha", args={"items": "1"})
    b = create(d, args={"url": f"https://{tag}.example/A_B%20"})
    c = create(d, spider="marker", args={"note": "nothing"})
    e = create(d, args={tag: "the key is not searched"})
    for j in (a, b, c, e):
        wait_ended(d, j["id"])
    # The Scrapyd job id, in any case.
    assert list_all(d, q=f"{tag}-ALPHA") == [a["id"]]
    # An arg's value, not its key; newest first across fields.
    assert list_all(d, q=tag) == [b["id"], a["id"]]
    # % and _ are plain characters.
    assert list_all(d, q=f"{tag}.example/a_b%2") == [b["id"]]
    assert list_all(d, q=f"{tag}_") == []
    # The spider and the project (every job of this module is in cp).
    ids = list_all(d, q="MARKER", project="cp")
    assert c["id"] in ids and a["id"] not in ids
    every = list_all(d, project="cp")
    assert list_all(d, q="cp") == every
    # With a state, and paged one by one with the cursor.
    assert list_all(d, q=tag, state="failed") == []
    assert list_all(d, q=tag, state="finished", limit=1) == [b["id"], a["id"]]
    # An empty q is no filter.
    assert list_all(d, q="", project="cp") == every


def test_q_and_node_are_bound_to_the_cursor_and_bounded(d):
    tag = unique("t")
    for _ in range(3):
        create(d, args={"tag": tag})
    body = ok(req(d, "GET", "/jobs", params={"q": tag, "limit": 1}))
    assert body["next_cursor"]
    msg = err(req(d, "GET", "/jobs", params={"q": tag + "x", "cursor": body["next_cursor"]}),
              400, "SPD_EBADPARAM", "cursor")
    assert "q" in msg
    err(req(d, "GET", "/jobs", params={"node": "other", "cursor": body["next_cursor"]}),
        400, "SPD_EBADPARAM", "cursor")
    msg = err(req(d, "GET", "/jobs", params={"q": "x" * 201}), 400, "SPD_EBADPARAM", "q")
    assert "200" in msg
    assert ok(req(d, "GET", "/jobs", params={"q": "x" * 200}))["jobs"] == []
    err(req(d, "GET", "/jobs", params={"node": ""}), 400, "SPD_EBADPARAM", "node")
    # JSON-RPC takes the same filters.
    r = ok(req(d, "POST", "/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "jobs.list",
                                            "params": {"q": tag, "limit": 10}}))
    assert len(r["result"]["jobs"]) == 3


def test_node_lists_the_jobs_a_node_claimed(d):
    tag = unique("n")
    ran = create(d, args={"tag": tag})
    wait_ended(d, ran["id"])
    # Four slots busy: the next job waits, unclaimed (no node).
    busy = [create(d, args={"sleep": "30", "tag": tag}) for _ in range(4)]
    waiting = create(d, args={"tag": tag})
    wait_for(lambda: all(get_job(d, j["id"])["state"] == "running" for j in busy),
             timeout(20), "four running jobs")
    assert get_job(d, waiting["id"])["state"] == "pending"
    mine = list_all(d, node=d.node, q=tag)
    assert mine == [j["id"] for j in reversed(busy)] + [ran["id"]]
    assert list_all(d, node=d.node, q=tag, state="running") == [j["id"] for j in reversed(busy)]
    assert list_all(d, node="no-such-node", q=tag) == []
    assert list_all(d, q=tag, state="pending") == [waiting["id"]]
    for j in busy + [waiting]:
        req(d, "POST", f"/jobs/{j['id']}/cancel", json={"signal": "KILL"})
    for j in busy + [waiting]:
        assert wait_ended(d, j["id"])["state"] == "cancelled"


# ---- jobs.counts --------------------------------------------------------

def deploy(d, egg_bytes, project):
    r = req(d, "POST", f"/projects/{project}/versions", params={"version": "1.0"},
            data=egg_bytes("testproj"), headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text


def iso(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_counts_now_and_since(d, egg_bytes):
    project = unique("cnt")
    deploy(d, egg_bytes, project)
    t0 = now_ms()
    done = [create(d, project=project, args={"items": "1"}) for _ in range(3)]
    bad = [create(d, project=project, args={"outcome": "failed"}) for _ in range(2)]
    for j in done + bad:
        wait_ended(d, j["id"])
    assert {get_job(d, j["id"])["state"] for j in done} == {"finished"}
    assert {get_job(d, j["id"])["state"] for j in bad} == {"failed"}
    long = create(d, project=project, args={"sleep": "30"})
    wait_for(lambda: get_job(d, long["id"])["state"] == "running", timeout(20), "running")

    body = ok(req(d, "GET", "/jobs/counts", params={"project": project}))
    assert body["project"] == project
    assert body["counts"] == {"pending": 0, "running": 1, "finished": 3, "failed": 2,
                              "cancelled": 0, "lost": 0, "paused": 0}
    assert abs(body["since"] - (now_ms() - 24 * 3600 * 1000)) < 60000
    assert body["since_time"].endswith("Z")
    # The whole daemon counts this project's jobs too.
    every = ok(req(d, "GET", "/jobs/counts"))
    assert every["project"] is None
    assert every["counts"]["finished"] >= 3 and every["counts"]["running"] >= 1

    # A window that starts after they ended: only what is pending or running now.
    later = now_ms() + 1
    for since in (str(later), iso(later)):
        body = ok(req(d, "GET", "/jobs/counts", params={"project": project, "since": since}))
        assert body["since"] == later
        assert body["counts"] == {"pending": 0, "running": 1, "finished": 0, "failed": 0,
                                  "cancelled": 0, "lost": 0, "paused": 0}
    body = ok(req(d, "GET", "/jobs/counts", params={"project": project, "since": iso(t0)}))
    assert body["counts"]["finished"] == 3 and body["counts"]["failed"] == 2

    ok(req(d, "POST", f"/jobs/{long['id']}/cancel", json={"signal": "KILL"}))
    assert wait_ended(d, long["id"])["state"] == "cancelled"
    body = ok(req(d, "GET", "/jobs/counts", params={"project": project}))
    assert body["counts"] == {"pending": 0, "running": 0, "finished": 3, "failed": 2,
                              "cancelled": 1, "lost": 0, "paused": 0}
    # JSON-RPC: the same op.
    r = ok(req(d, "POST", "/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "jobs.counts",
                                            "params": {"project": project}}))
    assert r["result"]["counts"] == body["counts"]
    # Nothing is lost across a restart.
    d.restart()
    assert ok(req(d, "GET", "/jobs/counts", params={"project": project}))["counts"] == body["counts"]


def test_counts_bad_input(d):
    for since in ("yesterday", "2026-13-01", "-5", "1e3"):
        msg = err(req(d, "GET", "/jobs/counts", params={"since": since}), 400, "SPD_EBADPARAM",
                  "since")
        assert "since" in msg
    err(req(d, "GET", "/jobs/counts", params={"project": "../x"}), 400, "SPD_EBADPARAM",
        "project")
    err(req(d, "GET", "/jobs/counts", params={"state": "x"}), 400, "SPD_EBADPARAM", "state")
    err(req(d, "POST", "/jobs/counts"), 405, "SPD_EMETHOD")


def test_literal_routes_beat_captures(d):
    """/jobs/counts is not the job "counts"; OPTIONS lists only its own methods."""
    r = req(d, "OPTIONS", "/jobs/counts")
    assert r.status_code == 204
    assert set(r.headers["Allow"].split(", ")) == {"GET", "HEAD", "OPTIONS"}
    # A job whose Scrapyd id is "counts" is still reached by its integer id.
    j = create(d, jobid="counts")
    assert get_job(d, j["id"])["job"] == "counts"
    assert "counts" in ok(req(d, "GET", "/jobs/counts"))
    r = req(d, "OPTIONS", f"/jobs/{j['id']}")
    assert "GET" in r.headers["Allow"]
    wait_ended(d, j["id"])


# ---- schedules.preview ----------------------------------------------------

def preview(d, **params):
    return ok(req(d, "GET", "/schedules/preview", params=params))


def test_preview_cron_in_its_zone_across_dst(d):
    # Paris moves to summer time on 2027-03-28 at 02:00 (+01:00 -> +02:00).
    body = preview(d, cron="0 9 * * *", tz="Europe/Paris", start="2027-03-26T00:00", count=4)
    assert body["tz"] == "Europe/Paris" and body["kind"] == "cron" and body["more"] is True
    assert [n["time"] for n in body["next"]] == [
        "2027-03-26T09:00:00+01:00", "2027-03-27T09:00:00+01:00",
        "2027-03-28T09:00:00+02:00", "2027-03-29T09:00:00+02:00"]
    assert [n["utc"] for n in body["next"]] == [
        "2027-03-26T08:00:00.000Z", "2027-03-27T08:00:00.000Z",
        "2027-03-28T07:00:00.000Z", "2027-03-29T07:00:00.000Z"]
    for n in body["next"]:
        assert n["ms"] == int(datetime.datetime.fromisoformat(n["time"]).timestamp() * 1000)
    # A wall time inside the gap fires once, at the first instant after it.
    body = preview(d, cron="30 2 * * *", tz="Europe/Paris", start="2027-03-27T00:00", count=3)
    assert [n["time"] for n in body["next"]] == [
        "2027-03-27T02:30:00+01:00", "2027-03-28T03:00:00+02:00", "2027-03-29T02:30:00+02:00"]
    # New York, autumn: the repeated 01:30 fires once, at its first occurrence.
    body = preview(d, cron="30 1 * * *", tz="America/New_York", start="2027-11-06T00:00",
                   count=2)
    assert [n["time"] for n in body["next"]] == [
        "2027-11-06T01:30:00-04:00", "2027-11-07T01:30:00-04:00"]


def test_preview_defaults_interval_at_and_end(d):
    t = now_ms()
    body = preview(d, cron="*/5 * * * *")
    assert body["tz"] == "UTC" and len(body["next"]) == 10
    ms = [n["ms"] for n in body["next"]]
    assert ms[0] > t - 1000 and all(b - a == 300000 for a, b in zip(ms, ms[1:]))
    assert all(m % 300000 == 0 for m in ms)
    assert body["next"][0]["time"].endswith("+00:00")
    # An interval counts from start.
    body = preview(d, interval=3600, start="2030-01-01T00:00:00Z", tz="Asia/Tokyo", count=3)
    assert [n["time"] for n in body["next"]] == [
        "2030-01-01T09:00:00+09:00", "2030-01-01T10:00:00+09:00", "2030-01-01T11:00:00+09:00"]
    # One run; an end bound stops the list.
    body = preview(d, at="2031-05-01T12:00", tz="America/Sao_Paulo")
    assert [n["time"] for n in body["next"]] == ["2031-05-01T12:00:00-03:00"]
    assert body["more"] is False and body["kind"] == "once"
    body = preview(d, cron="0 0 * * *", start="2030-01-01", end="2030-01-03", count=10)
    assert [n["utc"][:10] for n in body["next"]] == ["2030-01-01", "2030-01-02", "2030-01-03"]
    assert body["more"] is False
    # An 'at' in the past: nothing is upcoming.
    assert preview(d, at="2001-01-01T00:00:00Z")["next"] == []
    # JSON-RPC.
    r = ok(req(d, "POST", "/jsonrpc", json={"jsonrpc": "2.0", "id": 1,
                                            "method": "schedules.preview",
                                            "params": {"cron": "0 12 * * MON", "count": 2}}))
    assert len(r["result"]["next"]) == 2


def test_preview_refuses_what_create_refuses(d):
    cases = [
        ({"cron": "0 24 * * *"}, "cron", "hour"),
        ({"cron": "hello"}, "cron", "cron"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "tz", "Mars/Olympus"),
        ({"cron": "0 9 * * *", "interval": 5}, "cron", "exactly one"),
        ({}, "cron", "exactly one"),
        ({"interval": -1}, "interval", "interval"),
        ({"at": "2026-02-30T00:00"}, "at", "2026-02-30"),
        ({"cron": "0 9 * * *", "start": "soon"}, "start", "start"),
        ({"cron": "0 9 * * *", "start": "2030-01-02", "end": "2030-01-01"}, "end", "end"),
        ({"cron": "0 9 * * *", "count": 0}, "count", "count"),
        ({"cron": "0 9 * * *", "count": 101}, "count", "count"),
        ({"cron": "0 9 * * *", "name": "x"}, "name", "unknown field"),
    ]
    for params, field, words in cases:
        msg = err(req(d, "GET", "/schedules/preview", params=params), 400, "SPD_EBADPARAM", field)
        assert words in msg, (params, msg)
        # schedules.create says the same about the same timing.
        if field in ("cron", "tz", "at") and "count" not in params and "name" not in params:
            body = {"name": unique("s"), "project": "cp", "spider": "quick", **params}
            r = req(d, "POST", "/schedules", json=body)
            assert r.status_code == 400 and r.json()["error"]["message"] == msg, (params, r.text)


def test_preview_is_not_a_schedule_named_preview(d):
    name = "preview"
    s = ok(req(d, "POST", "/schedules", json={"name": name, "project": "cp", "spider": "quick",
                                               "cron": "0 0 1 1 *", "paused": True}), 201)
    # The literal route answers, with its own methods only.
    assert "next" in preview(d, cron="0 0 1 1 *")
    r = req(d, "OPTIONS", "/schedules/preview")
    assert set(r.headers["Allow"].split(", ")) == {"GET", "HEAD", "OPTIONS"}
    err(req(d, "DELETE", "/schedules/preview"), 405, "SPD_EMETHOD")
    # The schedule is there, by id, and untouched.
    got = ok(req(d, "GET", f"/schedules/{s['id']}"))
    assert got["name"] == name and got["paused"] is True
    assert ok(req(d, "PATCH", f"/schedules/{s['id']}", json={"paused": False}))["paused"] is False
    assert req(d, "DELETE", f"/schedules/{s['id']}").status_code == 204


# ---- stats.throughput -----------------------------------------------------

def test_throughput_buckets_match_the_jobs_that_ended(d, egg_bytes):
    project = unique("tp")
    deploy(d, egg_bytes, project)
    t0 = now_ms() - 1
    made = [create(d, project=project, args={"items": str(n)}) for n in (3, 5, 7)]
    made += [create(d, project=project, args={"outcome": "failed", "items": "2"}),
             create(d, project=project, args={"outcome": "failed"}),
             create(d, project=project)]  # no item count in its stats
    jobs = [wait_ended(d, j["id"]) for j in made]
    t1 = now_ms() + 1
    step = 2
    body = ok(req(d, "GET", "/stats/throughput",
                  params={"from": str(t0), "to": str(t1), "step": step, "project": project}))
    assert body["from"] == t0 and body["to"] == t1 and body["step"] == step
    assert body["project"] == project
    b = body["buckets"]
    assert len(b) == -(-(t1 - t0) // (step * 1000))
    assert [x["t"] for x in b] == [t0 + i * step * 1000 for i in range(len(b))]
    want = [{"finished": 0, "failed": 0, "items": 0} for _ in b]
    for j in jobs:
        k = (j["ended_ms"] - t0) // (step * 1000)
        want[k]["finished" if j["state"] == "finished" else "failed"] += 1
        want[k]["items"] += (j["stats"] or {}).get("item_scraped_count", 0)
    assert [{k: x[k] for k in ("finished", "failed", "items")} for x in b] == want
    assert sum(x["finished"] for x in b) == 4 and sum(x["failed"] for x in b) == 2
    assert sum(x["items"] for x in b) == 17
    # ISO times; the other projects' jobs count without a project.
    every = ok(req(d, "GET", "/stats/throughput",
                   params={"from": iso(t0), "to": iso(t1 + 999), "step": 3600}))
    assert len(every["buckets"]) == 1 and every["buckets"][0]["finished"] >= 4
    # Nothing is lost across a restart.
    d.restart()
    again = ok(req(d, "GET", "/stats/throughput",
                   params={"from": str(t0), "to": str(t1), "step": step, "project": project}))
    assert again == body


def test_throughput_defaults_and_limits(d):
    t = now_ms()
    body = ok(req(d, "GET", "/stats/throughput"))
    assert body["step"] == 60 and body["from"] % 60000 == 0
    assert abs(body["to"] - t) < 60000 and body["to"] - body["from"] >= 24 * 3600 * 1000
    assert len(body["buckets"]) <= 1500 and body["buckets"][0]["t"] == body["from"]
    assert all(set(x) == {"t", "finished", "failed", "items"} for x in body["buckets"])
    msg = err(req(d, "GET", "/stats/throughput", params={"step": 30}), 400, "SPD_EBADPARAM",
              "step")
    assert "1500" in msg and "step" in msg
    ok(req(d, "GET", "/stats/throughput", params={"from": "0", "to": str(1500 * 60000)}))
    err(req(d, "GET", "/stats/throughput", params={"from": "0", "to": str(1500 * 60000 + 1)}),
        400, "SPD_EBADPARAM", "step")
    err(req(d, "GET", "/stats/throughput", params={"from": "2030-01-01", "to": "2029-01-01"}),
        400, "SPD_EBADPARAM", "from")
    err(req(d, "GET", "/stats/throughput", params={"step": 0}), 400, "SPD_EBADPARAM", "step")
    err(req(d, "GET", "/stats/throughput", params={"step": "1.5"}), 400, "SPD_EBADPARAM", "step")
    err(req(d, "GET", "/stats/throughput", params={"to": "noon"}), 400, "SPD_EBADPARAM", "to")
    err(req(d, "POST", "/stats/throughput"), 405, "SPD_EMETHOD")


# ---- jobs.rerun -----------------------------------------------------------

def test_rerun_queues_a_new_job_from_an_ended_one(d):
    parent = create(d)
    wait_ended(d, parent["id"])
    src = create(d, version="1.0", args={"outcome": "failed", "items": "4", "k": "v"},
                 settings={"DOWNLOAD_DELAY": "0"}, priority=3.5, parent=parent["id"])
    src = wait_ended(d, src["id"])
    assert src["state"] == "failed" and src["parent_id"] == parent["id"]
    # By the Scrapyd job id, with an empty body.
    r = req(d, "POST", f"/jobs/{src['job']}/rerun")
    new = ok(r, 201)
    assert new["rerun_of"] == src["id"] and new["existing"] is False
    assert new["id"] > src["id"] and new["job"] != src["job"]
    for k in ("project", "spider", "version", "args", "settings", "priority"):
        assert new[k] == src[k], k
    assert new["parent_id"] is None and new["schedule_id"] is None
    assert new["retry_of"] is None and new["attempt"] == 1
    assert new["state"] in ("pending", "running")
    assert wait_ended(d, new["id"])["state"] == "failed"
    # The usual events: queued, started, failed, under the new job.
    events = ok(req(d, "GET", "/events", params={"job": new["id"]}))["events"]
    assert [e["type"] for e in events][:1] == ["job.queued"]
    assert "job.failed" in [e["type"] for e in events]
    # The source is untouched.
    assert get_job(d, src["id"]) == src
    # JSON-RPC, by integer id.
    r = ok(req(d, "POST", "/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "jobs.rerun",
                                            "params": {"id": src["id"]}}))
    assert r["result"]["rerun_of"] == src["id"]
    wait_ended(d, r["result"]["id"])


def test_rerun_refuses_live_missing_and_unknown(d, egg_bytes):
    live = create(d, args={"sleep": "30"})
    msg = err(req(d, "POST", f"/jobs/{live['id']}/rerun"), 409, "SPD_ECONFLICT")
    assert "ended" in msg
    ok(req(d, "POST", f"/jobs/{live['id']}/cancel", json={"signal": "KILL"}))
    wait_ended(d, live["id"])
    err(req(d, "POST", "/jobs/99999999/rerun"), 404, "SPD_ENOJOB")
    err(req(d, "POST", f"/jobs/{live['id']}/rerun", json={"priority": 1}), 400,
        "SPD_EBADPARAM", "priority")
    err(req(d, "GET", f"/jobs/{live['id']}/rerun"), 405, "SPD_EMETHOD")
    # Its version gone: a 404 that says so, nothing queued.
    project = unique("rv")
    deploy(d, egg_bytes, project)
    j = wait_ended(d, create(d, project=project, version="1.0")["id"])
    before = list_all(d, project=project)
    assert req(d, "DELETE", f"/projects/{project}").status_code == 204
    err(req(d, "POST", f"/jobs/{j['id']}/rerun"), 404, "SPD_ENOPROJECT")
    assert list_all(d, project=project) == before


# ---- queues.keys ----------------------------------------------------------

def test_queue_keys_show_each_keys_politeness_state(d):
    name = unique("q")
    ok(req(d, "PUT", f"/queues/{name}", json={"key_inflight": 1, "key_rate": 0.5,
                                             "key_burst": 2}))
    assert ok(req(d, "GET", f"/queues/{name}/keys")) == {
        "queue": name, "at": pytest.approx(now_ms(), abs=60000), "keys": [], "next_cursor": None}
    ok(req(d, "POST", f"/queues/{name}/put", json={"elements": [
        {"element": "a1", "key": "a.example"}, {"element": "a2", "key": "a.example"},
        {"element": "b1", "key": "b.example"}, {"element": "c1", "key": "c"}]}))
    took = ok(req(d, "POST", f"/queues/{name}/take", json={"max": 10}))["items"]
    assert sorted(i["key"] for i in took) == ["a.example", "b.example", "c"]
    b = next(i for i in took if i["key"] == "b.example")
    t = now_ms()
    ok(req(d, "POST", f"/queues/{name}/nack", json={"leases": [b["lease"]], "retry_after": 30}))

    body = ok(req(d, "GET", f"/queues/{name}/keys"))
    keys = {k["key"]: k for k in body["keys"]}
    assert [k["key"] for k in body["keys"]] == ["a.example", "b.example", "c"]
    assert body["next_cursor"] is None
    a = keys["a.example"]
    assert (a["ready"], a["inflight"], a["open"], a["wake_at"]) == (1, 1, False, None)
    assert a["blocked_until"] is None and 1.0 <= a["tokens"] <= 2.0
    kb = keys["b.example"]
    assert kb["inflight"] == 0 and kb["open"] is False
    assert abs(kb["blocked_until_ms"] - (t + 30000)) < 5000
    assert kb["blocked_until"].endswith("Z") and kb["wake_ms"] == kb["blocked_until_ms"]
    assert (keys["c"]["ready"], keys["c"]["inflight"]) == (0, 1)
    # The queue's own counts say the same.
    stats = ok(req(d, "GET", f"/queues/{name}"))["stats"]
    assert stats["keys"] == 3 and stats["inflight"] == 2

    # Pages of one, in key order, by cursor.
    seen = [k["key"] for k in all_pages(d, f"/queues/{name}/keys", "keys", limit=1)]
    assert seen == ["a.example", "b.example", "c"]
    # JSON-RPC.
    r = ok(req(d, "POST", "/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "queues.keys",
                                            "params": {"name": name, "limit": 2}}))
    assert [k["key"] for k in r["result"]["keys"]] == ["a.example", "b.example"]
    assert r["result"]["next_cursor"] == "b.example"


def test_queue_keys_bad_input(d):
    err(req(d, "GET", f"/queues/{unique('nq')}/keys"), 404, "SPD_ENOQUEUE")
    name = unique("q")
    ok(req(d, "PUT", f"/queues/{name}", json={}))
    err(req(d, "GET", f"/queues/{name}/keys", params={"limit": 0}), 400, "SPD_EBADPARAM",
        "limit")
    err(req(d, "GET", f"/queues/{name}/keys", params={"cursor": "x" * 256}), 400,
        "SPD_EBADPARAM", "cursor")
    err(req(d, "GET", "/queues/" + "q" * 201 + "/keys"), 400, "SPD_EBADPARAM", "name")
    err(req(d, "POST", f"/queues/{name}/keys"), 405, "SPD_EMETHOD")
