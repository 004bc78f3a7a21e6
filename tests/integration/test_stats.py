"""jobs.stats (GET /api/v1/stats): per project, spider or schedule over a
window of end times, every figure checked against what this test computes
from the jobs themselves (GET /api/v1/jobs/{id}). A real daemon, real crawls
of the test project: `quick` yields `count` items and finishes, `crash`
fails in __init__ (exit 1), `slow` is cancelled while it runs."""

import math

import pytest

from conftest import err, get_job, now_ms, ok, req, timeout, unique, wait_for

API = "/api/v1"
ENDED = ("finished", "failed", "cancelled", "lost")


@pytest.fixture(scope="module")
def d(module_spiderd, egg_bytes):
    daemon = module_spiderd(name="stats", scrapyd={"max_proc": 4})
    return daemon


def deploy(d, egg_bytes, project):
    r = d.request("POST", f"{API}/projects/{project}/versions", params={"version": "1.0"},
                  data=egg_bytes("testproj"),
                  headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text


def create(d, project, spider, **args):
    return ok(req(d, "POST", "/jobs", json={"project": project, "spider": spider,
                                           "args": {k: str(v) for k, v in args.items()}}), 201)


def wait_ended(d, ident, seconds=90):
    def check():
        j = get_job(d, ident)
        return j if j["state"] in ENDED else None
    return wait_for(check, timeout(seconds), f"job {ident} to end", interval=0.1)


def rank(values, p):
    """The nearest-rank percentile: the ceil(p/100 * n)-th smallest."""
    v = sorted(values)
    return v[max(math.ceil(p * len(v) / 100), 1) - 1] if v else 0


def expect(jobs):
    """The figures of one group, computed here from the jobs."""
    runs = {s: sum(1 for j in jobs if j["state"] == s) for s in ENDED}
    durs = [j["ended_ms"] - j["started_ms"] for j in jobs]
    items = sum((j["stats"] or {}).get("items", 0) for j in jobs)
    done = [j["ended_ms"] for j in jobs if j["state"] == "finished"]
    return {"runs": runs, "ended": len(jobs),
            "success_rate": runs["finished"] / len(jobs),
            "duration_ms": {"p50": rank(durs, 50), "p95": rank(durs, 95), "max": max(durs)},
            "items": {"total": items, "per_run": items / len(jobs)},
            "last_success": max(done) if done else None}


def check_group(got, want):
    got = dict(got)
    got.pop("last_success_time")
    for k in ("project", "spider", "schedule"):
        got.pop(k, None)
    assert got["success_rate"] == pytest.approx(want.pop("success_rate"))
    assert got.pop("success_rate") is not None
    assert got["items"]["per_run"] == pytest.approx(want["items"]["per_run"])
    assert got == want


@pytest.fixture(scope="module")
def world(d, egg_bytes):
    """Two projects with known jobs, one fired by a schedule."""
    p1, p2 = unique("sa"), unique("sb")
    deploy(d, egg_bytes, p1)
    deploy(d, egg_bytes, p2)
    t0 = now_ms() - 1
    made = [create(d, p1, "quick", count=2), create(d, p1, "quick", count=5),
            create(d, p1, "crash"), create(d, p1, "fail"), create(d, p2, "quick", count=3)]
    slow = create(d, p2, "slow", seconds=60)
    wait_for(lambda: get_job(d, slow["id"])["state"] == "running", timeout(60), "slow to run")
    ok(req(d, "POST", f"/jobs/{slow['id']}/cancel", json={}))
    made.append(slow)
    s = ok(req(d, "POST", "/schedules", json={"name": unique("ss"), "project": p1,
                                             "spider": "quick", "cron": "0 0 1 1 *",
                                             "tz": "UTC", "args": {"count": "4"}}), 201)
    made.append(ok(req(d, "POST", f"/schedules/{s['id']}/run"), 201))
    jobs = [wait_ended(d, j["id"]) for j in made]
    t1 = now_ms() + 1
    return {"p1": p1, "p2": p2, "t0": t0, "t1": t1, "jobs": jobs, "schedule": s["id"]}


def stats(d, w, **params):
    return ok(req(d, "GET", "/stats", params={"from": str(w["t0"]), "to": str(w["t1"]),
                                              **params}))


def test_known_outcomes(world):
    jobs = world["jobs"]
    states = [j["state"] for j in jobs]
    assert states == ["finished", "finished", "failed", "finished", "finished", "cancelled",
                      "finished"], states
    # The item counts the crawls reported: quick's `count`, fail's one.
    got = [(j["stats"] or {}).get("items", 0) for j in jobs]
    assert got[:5] + got[6:] == [2, 5, 0, 1, 3, 4], got


def test_by_project(d, world):
    body = stats(d, world)
    assert body["by"] == "project" and body["from"] == world["t0"] and body["to"] == world["t1"]
    mine = {g["project"]: g for g in body["groups"] if g["project"] in (world["p1"], world["p2"])}
    assert set(mine) == {world["p1"], world["p2"]}
    for p in (world["p1"], world["p2"]):
        check_group(mine[p], expect([j for j in world["jobs"] if j["project"] == p]))
    # One project alone; groups come in key order.
    one = stats(d, world, project=world["p1"])
    assert [g["project"] for g in one["groups"]] == [world["p1"]]
    assert one["project"] == world["p1"] and one["scanned"] == 5
    names = [g["project"] for g in body["groups"]]
    assert names == sorted(names)


def test_by_spider(d, world):
    body = stats(d, world, by="spider", project=world["p1"])
    want = {}
    for j in world["jobs"]:
        if j["project"] == world["p1"]:
            want.setdefault(j["spider"], []).append(j)
    assert [g["spider"] for g in body["groups"]] == sorted(want)
    for g in body["groups"]:
        assert g["project"] == world["p1"]
        check_group(g, expect(want[g["spider"]]))
    quick = stats(d, world, by="spider", spider="quick", project=world["p1"])
    assert [g["spider"] for g in quick["groups"]] == ["quick"]
    assert quick["groups"][0]["items"]["total"] == 2 + 5 + 4


def test_by_schedule(d, world):
    body = stats(d, world, by="schedule")
    mine = [g for g in body["groups"] if g["schedule"] == world["schedule"]]
    assert len(mine) == 1
    fired = [j for j in world["jobs"] if j["schedule_id"] == world["schedule"]]
    assert len(fired) == 1
    check_group(mine[0], expect(fired))
    assert all(g["schedule"] for g in body["groups"])  # unscheduled jobs are left out
    only = stats(d, world, schedule=world["schedule"], project=world["p1"])
    assert len(only["groups"]) == 1 and only["groups"][0]["ended"] == 1


def test_windows(d, world):
    jobs = sorted((j for j in world["jobs"] if j["project"] == world["p1"]),
                  key=lambda j: j["ended_ms"])
    # [from, to) on end time: a window that ends at the third job's end
    # leaves it (and those after) out.
    cut = jobs[2]["ended_ms"]
    body = ok(req(d, "GET", "/stats", params={"from": str(world["t0"]), "to": str(cut),
                                             "project": world["p1"]}))
    before = [j for j in jobs if j["ended_ms"] < cut]
    if before:
        check_group(body["groups"][0], expect(before))
    else:
        assert body["groups"] == []
    after = ok(req(d, "GET", "/stats", params={"from": str(cut), "to": str(world["t1"]),
                                              "project": world["p1"]}))
    check_group(after["groups"][0], expect([j for j in jobs if j["ended_ms"] >= cut]))
    # Nothing before the jobs; the default window (7 days to now) holds them.
    empty = ok(req(d, "GET", "/stats", params={"from": "0", "to": str(world["t0"]),
                                              "project": world["p1"]}))
    assert empty["groups"] == [] and empty["scanned"] == 0
    dflt = ok(req(d, "GET", "/stats", params={"project": world["p1"]}))
    assert dflt["to"] - dflt["from"] == 7 * 86400 * 1000
    assert dflt["groups"][0]["ended"] == 5
    iso = ok(req(d, "GET", "/stats", params={"from": "2020-01-01T00:00:00Z",
                                            "project": world["p1"]}))
    assert iso["from"] == 1577836800000 and iso["groups"][0]["ended"] == 5


def test_bad_params(d):
    err(req(d, "GET", "/stats", params={"by": "customer"}), 400, "SPD_EBADPARAM", "by")
    err(req(d, "GET", "/stats", params={"from": "2030-01-01", "to": "2029-01-01"}), 400,
        "SPD_EBADPARAM", "from")
    err(req(d, "GET", "/stats", params={"to": "noon"}), 400, "SPD_EBADPARAM", "to")
    err(req(d, "GET", "/stats", params={"schedule": "0"}), 400, "SPD_EBADPARAM", "schedule")
    err(req(d, "GET", "/stats", params={"bogus": "1"}), 400, "SPD_EBADPARAM")
    err(req(d, "POST", "/stats"), 405, "SPD_EMETHOD")


def test_jsonrpc(d, world):
    r = d.request("POST", f"{API}/jsonrpc",
                  json={"jsonrpc": "2.0", "id": 1, "method": "jobs.stats",
                        "params": {"from": str(world["t0"]), "to": str(world["t1"]),
                                   "project": world["p2"], "by": "spider"}})
    assert r.status_code == 200, r.text
    body = r.json()["result"]
    assert [g["spider"] for g in body["groups"]] == ["quick", "slow"]
