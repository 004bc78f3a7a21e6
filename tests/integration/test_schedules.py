"""Schedules on a real daemon: firing on time, pause and resume, overlap
policies, missed runs after downtime, bad input, and the scheduler lease
passing between two nodes on one store.

Seconds-resolution cron expressions (a sixth, leading seconds field) keep
these tests short."""

import os
import time

import pytest

from conftest import rest, timeout, unique, wait_for

API = "/api/v1"


def create(d, **body):
    body.setdefault("name", unique("s"))
    body.setdefault("project", "testproj")
    r = d.request("POST", API + "/schedules", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def runs(d, sid, state=None):
    params = {"limit": 1000}
    if state:
        params["state"] = state
    r = d.request("GET", f"{API}/schedules/{sid}/runs", params=params)
    assert r.status_code == 200, r.text
    return r.json()["runs"]


def sched_jobs(d, sid):
    r = d.request("GET", API + "/jobs", params={"schedule": sid, "limit": 1000})
    assert r.status_code == 200, r.text
    return r.json()["jobs"]


def events(d, **params):
    return rest(d, "GET", "/events", params=params)["events"]


def deployed(factory, egg, **kw):
    d = factory(**kw)
    d.upload("testproj", "1", egg("testproj"))
    return d


def test_fires_on_time_then_pause_and_resume(spiderd, egg):
    d = deployed(spiderd, egg, scrapyd={"max_proc": 1})
    s = create(d, spider="slow", cron="* * * * * *", tz="Europe/Berlin",
               args={"seconds": "30"}, overlap="allow")
    assert s["kind"] == "cron" and s["tz"] == "Europe/Berlin" and not s["paused"]
    assert len(s["next_runs"]) >= 3
    assert s["next_runs"][0].endswith(("+01:00", "+02:00"))

    fired = wait_for(lambda: [r for r in runs(d, s["id"], "fired")][3:] and
                     runs(d, s["id"], "fired"), 10, "four fired runs")
    dues = [r["due_ms"] for r in fired]
    assert len(set(dues)) == len(dues), "a due time fired twice"
    assert all(b - a == 1000 for a, b in zip(dues, dues[1:])), dues
    by_id = {j["id"]: j for j in sched_jobs(d, s["id"])}
    for r in fired:
        job = by_id[r["job_id"]]
        assert job["schedule_id"] == s["id"]
        assert job["args"] == {"seconds": "30"}
        # Queued within 1 s of its time (the bound; typically ~1 ms).
        assert 0 <= job["created_ms"] - r["due_ms"] < 1000, (job, r)
    queued = events(d, schedule=s["id"], type="job.")
    assert {e["job_id"] for e in queued} >= {r["job_id"] for r in fired}

    r = d.request("POST", f"{API}/schedules/{s['id']}/pause")
    assert r.status_code == 200 and r.json()["paused"] is True
    n = len(runs(d, s["id"], "fired"))
    time.sleep(2.5)
    assert len(runs(d, s["id"], "fired")) <= n + 1  # one may have been in flight
    n = len(runs(d, s["id"], "fired"))
    assert runs(d, s["id"], "upcoming") == []
    time.sleep(1.5)
    assert len(runs(d, s["id"], "fired")) == n, "a paused schedule fired"

    r = d.request("POST", f"{API}/schedules/{s['id']}/resume")
    assert r.status_code == 200 and r.json()["paused"] is False
    wait_for(lambda: len(runs(d, s["id"], "fired")) >= n + 2, 6, "firing after resume")
    # The pause is not a downtime: nothing was recorded missed.
    assert runs(d, s["id"], "missed") == []
    types = [e["type"] for e in events(d, schedule=s["id"], type="schedule.")]
    assert types[:3] == ["schedule.created", "schedule.paused", "schedule.resumed"]


def test_overlap_skip(spiderd, egg):
    d = deployed(spiderd, egg)
    s = create(d, spider="slow", cron="* * * * * *", args={"seconds": "30"}, overlap="skip")
    wait_for(lambda: len(runs(d, s["id"], "skipped")) >= 2, 10, "skipped runs")
    assert len(sched_jobs(d, s["id"])) == 1
    skipped = runs(d, s["id"], "skipped")
    assert "still" in skipped[0]["reason"]


def test_overlap_queue(spiderd, egg):
    d = deployed(spiderd, egg)
    s = create(d, spider="slow", cron="* * * * * *", args={"seconds": "2"}, overlap="queue")
    jobs = wait_for(lambda: len(sched_jobs(d, s["id"])) >= 2 and sched_jobs(d, s["id"]),
                    30, "a second job after the first ended")
    first, second = sorted(jobs, key=lambda j: j["id"])[:2]
    assert first["ended_ms"], "the second job was queued before the first ended"
    assert second["created_ms"] >= first["ended_ms"]
    # While the first ran, later runs were skipped rather than piled up.
    assert runs(d, s["id"], "skipped")
    d.request("POST", f"{API}/schedules/{s['id']}/pause")


def test_overlap_replace(spiderd, egg):
    d = deployed(spiderd, egg)
    s = create(d, spider="slow", cron="*/3 * * * * *", args={"seconds": "30"},
               overlap="replace")
    jobs = wait_for(lambda: len(sched_jobs(d, s["id"])) >= 2 and sched_jobs(d, s["id"]),
                    15, "a replacing job")
    first = min(jobs, key=lambda j: j["id"])
    wait_for(lambda: d.request("GET", f"{API}/jobs/{first['id']}").json()["state"] == "cancelled",
             20, "the replaced job cancelled")
    d.request("POST", f"{API}/schedules/{s['id']}/pause")


@pytest.mark.parametrize("policy,fired_after", [("skip", 0), ("once", 1), ("catchup", 2)])
def test_missed_runs_after_downtime(spiderd, egg, policy, fired_after):
    d = deployed(spiderd, egg, scrapyd={"max_proc": 1}, spiderd={"misfire_grace": 1})
    s = create(d, spider="slow", cron="* * * * * *", args={"seconds": "30"},
               overlap="allow", missed=policy, catchup_max=2)
    wait_for(lambda: runs(d, s["id"], "fired"), 5, "a first run")
    d.stop()
    stopped = time.time() * 1000
    time.sleep(4)
    restarted = time.time() * 1000
    d.start()

    def settled():
        missed = runs(d, s["id"], "missed")
        late = [r for r in runs(d, s["id"], "fired")
                if r["reason"] and r["reason"].startswith("missed")]
        return missed if len(missed) + len(late) >= 3 and missed else None
    missed = wait_for(settled, 5, "missed runs recorded")
    assert all(stopped - 1000 < r["due_ms"] < restarted for r in missed)
    assert all(r["reason"] for r in missed)
    late = [r for r in runs(d, s["id"], "fired")
            if r["reason"] and r["reason"].startswith("missed")]
    assert len(late) == fired_after, late
    if late:
        # The ones run are the latest missed.
        assert min(x["due_ms"] for x in late) > max(x["due_ms"] for x in missed)
    assert events(d, schedule=s["id"], type="run.missed")


def test_run_now_update_delete(spiderd, egg):
    d = deployed(spiderd, egg)
    s = create(d, spider="quick", cron="0 0 1 1 *", tz="UTC")
    next_year = time.gmtime().tm_year + 1
    assert s["next_runs"][:2] == [f"{next_year}-01-01T00:00:00+00:00",
                                  f"{next_year + 1}-01-01T00:00:00+00:00"]
    r = d.request("POST", f"{API}/schedules/{s['name']}/run")
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["schedule_id"] == s["id"] and job["spider"] == "quick"
    d.wait_finished(job["job"])

    r = d.request("PATCH", f"{API}/schedules/{s['id']}", json={"cron": "0 12 * * MON-FRI",
                                                               "tz": "America/New_York"})
    assert r.status_code == 200, r.text
    u = r.json()
    assert u["cron"] == "0 12 * * MON-FRI" and u["tz"] == "America/New_York"
    assert u["next_runs"][0][11:19] == "12:00:00"
    assert d.request("GET", f"{API}/schedules/{s['id']}").json()["cron"] == "0 12 * * MON-FRI"

    listed = d.request("GET", API + "/schedules").json()["schedules"]
    assert [x["id"] for x in listed] == [s["id"]]
    assert d.request("DELETE", f"{API}/schedules/{s['id']}").status_code == 204
    r = d.request("GET", f"{API}/schedules/{s['id']}")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "SPD_ENOSCHEDULE"
    # The job it ran stays in the history.
    assert d.request("GET", f"{API}/jobs/{job['id']}").status_code == 200


@pytest.mark.parametrize("body,status,needle", [
    ({"spider": "quick", "cron": "61 * * * *"}, 400, "minute"),
    ({"spider": "quick", "cron": "* * * *"}, 400, "fields"),
    ({"spider": "quick", "cron": "@reboot"}, 400, "reboot"),
    ({"spider": "quick", "cron": "* * * * *", "tz": "Mars/Olympus"}, 400, "Mars/Olympus"),
    ({"spider": "quick", "cron": "* * * * *", "interval": 5}, 400, "one of"),
    ({"spider": "quick"}, 400, "one of"),
    ({"spider": "quick", "interval": 0}, 400, "interval"),
    ({"spider": "quick", "at": "2026-02-30T10:00:00"}, 400, "2026-02-30"),
    ({"spider": "quick", "cron": "* * * * *", "overlap": "sometimes"}, 400, "overlap"),
    ({"spider": "quick", "cron": "* * * * *", "missed": "maybe"}, 400, "missed"),
    ({"spider": "quick", "cron": "* * * * *", "start": "2030-01-01",
      "end": "2029-01-01"}, 400, "start"),
    ({"spider": "nope", "cron": "* * * * *"}, 404, "nope"),
    ({"spider": "quick", "cron": "* * * * *", "project": "nope"}, 404, "nope"),
    ({"spider": "quick", "cron": "* * * * *", "name": "../x"}, 400, "name"),
    ({"spider": "quick", "cron": "* * * * *", "webhooks": ["file:///etc/passwd"]}, 400,
     "webhooks"),
    ({"spider": "quick", "cron": "* * * * *", "args": {"a=b": "1"}}, 400, "args"),
    ({"spider": "quick", "cron": "* * * * *", "args": {"_job": "x"}}, 400, "reserved"),
])
def test_bad_schedules(module_spiderd, egg, body, status, needle):
    if not module_spiderd.daemons:
        module_spiderd().upload("testproj", "1", egg("testproj"))
    d = module_spiderd.daemons[0]
    body = {"name": unique("b"), "project": "testproj", **body}
    r = d.request("POST", API + "/schedules", json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert needle in err["message"], err
    assert d.request("GET", API + "/schedules").json()["schedules"] == []


def test_name_conflict_and_one_off(spiderd, egg):
    d = deployed(spiderd, egg)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
    s = create(d, name="once", spider="quick", at=at)
    assert s["kind"] == "once"
    r = d.request("POST", API + "/schedules", json={"name": "once", "project": "testproj",
                                                    "spider": "quick", "cron": "* * * * *"})
    assert r.status_code == 409
    fired = wait_for(lambda: runs(d, s["id"], "fired"), 6, "the one-off run")
    assert len(fired) == 1
    time.sleep(1.5)
    assert len(runs(d, s["id"])) == 1


def test_lease_passes_to_another_node(spiderd, egg, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    common = {"scrapyd": {"eggs_dir": str(shared / "eggs"), "max_proc": 1},
              "spiderd": {"store": f"sqlite:{shared}/spiderd.db", "scheduler_lease": 2,
                          "misfire_grace": 30}}
    a = spiderd(name="a", **{k: dict(v) for k, v in common.items()})
    a.scrapyd["node_name"] = "node-a"
    a.write_conf()
    a.restart()
    b = spiderd(name="b", **{k: dict(v) for k, v in common.items()})
    b.scrapyd["node_name"] = "node-b"
    b.write_conf()
    b.restart()
    a.upload("testproj", "1", egg("testproj"))
    s = create(a, spider="slow", cron="* * * * * *", args={"seconds": "60"}, overlap="allow")
    wait_for(lambda: len(runs(a, s["id"], "fired")) >= 2, 8, "runs fired")
    leader = a if "fires schedules now" in a.stderr_text() else b
    other = b if leader is a else a
    assert "fires schedules now" not in other.stderr_text()
    leader.kill9()
    killed = time.time() * 1000
    wait_for(lambda: "fires schedules now" in other.stderr_text(), 8, "the other node taking over")
    wait_for(lambda: [r for r in runs(other, s["id"], "fired") if r["due_ms"] > killed + 3000],
             8, "runs fired by the new holder")
    fired = runs(other, s["id"], "fired")
    dues = [r["due_ms"] for r in fired]
    assert len(dues) == len(set(dues)), "a due time fired twice"
    jobs = sched_jobs(other, s["id"])
    assert len(jobs) == len(fired), "a run queued two jobs"
    # Runs due while no node held the lease were late, not lost: within
    # misfire_grace they still fired (once).
    gap = [r for r in runs(other, s["id"]) if killed < r["due_ms"] < killed + 2000]
    assert gap and all(r["state"] == "fired" for r in gap)
    leader.start()  # the fixture stops it cleanly
    other.request("POST", f"{API}/schedules/{s['id']}/pause")
