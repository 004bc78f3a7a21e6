"""Runs that check themselves: at its end a job is compared with the previous
runs like it (the same schedule; with no schedule, the same spider and
arguments) and gets a health, ok / degraded / broken, or none while there is
too little history, with its reasons in words, a job.degraded or job.broken
event, and a health filter on the job listing. A schedule may pause itself
after broken runs in a row, and every pause carries a note.

The crawls are real Scrapy runs of the healthproj egg's `yields` spider,
whose item count, items without a price and logged errors come from a plan
file the test rewrites between runs: the arguments stay the same, so the
runs stay comparable, while one run yields less than the ones before it."""

import json
import os
import re
import time

import pytest

from conftest import err, get_job, ok, req, unique, wait_for

PROJECT = "health"
ENDED = ("finished", "failed", "cancelled", "lost")


@pytest.fixture(scope="module")
def d(module_spiderd, egg_bytes):
    """One daemon, items stored, project "health" = testproj plus yields."""
    daemon = module_spiderd(name="health", scrapyd={"items_dir": "items", "max_proc": 6})
    r = req(daemon, "POST", f"/projects/{PROJECT}/versions", params={"version": "1.0"},
            data=egg_bytes("healthproj"), headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    return daemon


def plan(path, count=20, missing=0, errors=0, fail=False):
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"count": count, "missing": missing, "errors": errors, "fail": fail}, f)


def wait_ended(d, ident, seconds=90):
    def check():
        j = get_job(d, ident)
        return j if j["state"] in ENDED else None
    return wait_for(check, seconds, f"job {ident} to end", interval=0.1)


def run_job(d, args):
    j = ok(req(d, "POST", "/jobs", json={"project": PROJECT, "spider": "yields", "args": args}),
           201)
    return wait_ended(d, j["id"])


def run_schedule(d, sid):
    j = ok(req(d, "POST", f"/schedules/{sid}/run"), 201)
    return wait_ended(d, j["id"])


def baseline(d, start, n=5):
    """n runs started together (start() -> a job's id), all ended; none has
    history enough to be rated."""
    ids = [start() for _ in range(n)]
    jobs = [wait_ended(d, i) for i in ids]
    for j in jobs:
        assert j["state"] == "finished", j
        assert j["stats"]["items"] == 20, j["stats"]
        assert j["health"] is None and j["health_reasons"] == [], j
    return jobs


def events(d, job_id, types):
    """The job's events of these types, once there is one: on a store whose
    writes are not one transaction (Redis) a job may show ended a moment
    before its health's event is written."""
    def check():
        body = ok(req(d, "GET", "/events", params={"limit": 1000, "job": job_id}))
        return [e for e in body["events"] if e["type"] in types] or None
    return wait_for(check, 10, f"events {types} of job {job_id}")


def test_a_schedule_rates_its_runs_and_pauses_itself(d, tmp_path):
    path = str(tmp_path / "plan.json")
    plan(path)
    name = unique("hs")
    # one run, far ahead: every run of the test is one it asks for
    s = ok(req(d, "POST", "/schedules", json={"name": name, "project": PROJECT,
                                              "spider": "yields", "at": "2099-01-01T00:00:00Z",
                                              "args": {"plan": path}}), 201)
    sid = s["id"]
    rules = ok(req(d, "PUT", f"/schedules/{sid}/health", json={"rules": {"pause_after": 2}}))
    assert rules["rules"] == {"pause_after": 2}
    assert rules["effective"]["pause_after"] == 2 and rules["effective"]["history"] == 5

    def start():
        return ok(req(d, "POST", f"/schedules/{sid}/run"), 201)["id"]
    base = baseline(d, start)
    # the share of items carrying each field, from the items file's sample
    assert base[0]["stats"]["item_fields"] == {"name": 1.0, "price": 1.0}

    plan(path, count=20)
    j = run_schedule(d, sid)
    assert (j["health"], j["health_reasons"]) == ("ok", []), j

    plan(path, count=8)
    j = run_schedule(d, sid)
    assert (j["health"], j["health_reasons"]) == ("degraded", ["items 8, usual 20"]), j
    ev = events(d, j["id"], ("job.degraded", "job.broken"))
    assert [e["type"] for e in ev] == ["job.degraded"]
    assert ev[0]["data"]["reasons"] == ["items 8, usual 20"]
    assert ev[0]["schedule_id"] == sid

    plan(path, count=20, missing=15)
    j = run_schedule(d, sid)
    assert j["health"] == "degraded", j
    assert j["health_reasons"] == ["field price in 25% of items, usual 100%"], j

    plan(path, count=20, errors=12)
    j = run_schedule(d, sid)
    assert j["health"] == "degraded", j
    assert j["health_reasons"] == ["errors 12, usual 0"], j

    plan(path, count=0)
    j = run_schedule(d, sid)
    assert j["health"] == "broken", j
    # the usual is what the runs before it yielded: 8 and 20
    assert j["health_reasons"] == ["items 0, usual 8\u201320"], j
    assert [e["type"] for e in events(d, j["id"], ("job.degraded", "job.broken"))] == \
        ["job.broken"]
    time.sleep(0.5)  # whatever follows the end has been written (Redis)
    assert ok(req(d, "GET", f"/schedules/{sid}"))["paused"] is False

    j2 = run_schedule(d, sid)
    # a broken run is no part of what is usual
    assert (j2["health"], j2["health_reasons"]) == ("broken", ["items 0, usual 8\u201320"]), j2
    s = wait_for(lambda: (lambda x: x if x["paused"] else None)(
        ok(req(d, "GET", f"/schedules/{sid}"))), 10, "the schedule to pause itself")
    note = s["pause_note"]
    assert note["by"] == "spiderd" and note["at"], note
    assert note["why"] == (f"2 broken runs in a row (the last, job '{j2['job']}': "
                           "items 0, usual 8\u201320)")
    paused = [e for e in ok(req(d, "GET", "/events", params={"limit": 1000}))["events"]
              if e["type"] == "schedule.paused" and e["schedule_id"] == sid]
    assert len(paused) == 1 and paused[0]["data"]["note"]["why"] == note["why"]

    # the listing's filter
    listed = ok(req(d, "GET", "/jobs", params={"schedule": sid, "health": "broken"}))["jobs"]
    assert [x["id"] for x in listed] == [j2["id"], j["id"]]
    listed = ok(req(d, "GET", "/jobs", params={"schedule": sid, "health": "none"}))["jobs"]
    assert sorted(x["id"] for x in listed) == sorted(x["id"] for x in base)
    assert len(ok(req(d, "GET", "/jobs", params={"schedule": sid, "health": "degraded"}))
               ["jobs"]) == 3

    # a resume drops the note; a pause by hand carries its own
    s = ok(req(d, "POST", f"/schedules/{sid}/resume"))
    assert s["paused"] is False and s["pause_note"] is None
    s = ok(req(d, "POST", f"/schedules/{sid}/pause", json={"note": "the site is down today"}))
    assert s["pause_note"]["why"] == "the site is down today"
    assert s["pause_note"]["by"] == "anonymous", s["pause_note"]
    listed = ok(req(d, "GET", "/schedules"))["schedules"]
    assert [x["pause_note"]["why"] for x in listed if x["id"] == sid] == ["the site is down today"]


def test_runs_without_a_schedule_compare_with_the_same_arguments(d, tmp_path):
    path = str(tmp_path / "plan.json")
    plan(path)
    args = {"plan": path}

    def start():
        return ok(req(d, "POST", "/jobs", json={"project": PROJECT, "spider": "yields",
                                                 "args": args}), 201)["id"]
    baseline(d, start)
    plan(path, count=1)
    j = run_job(d, args)
    assert (j["health"], j["health_reasons"]) == ("broken", ["items 1, usual 20"]), j
    # a run that fails, with history enough, is broken
    plan(path, fail=True)
    j = run_job(d, args)
    assert j["state"] == "failed"
    assert (j["health"], j["health_reasons"]) == ("broken", ["the run failed"]), j
    # other arguments: other runs, none of them ended yet
    j = run_job(d, {"plan": path, "tag": "other"})
    assert j["health"] is None and j["health_reasons"] == [], j
    # the same spider, not rated either: the arguments differ
    j = run_job(d, {"count": "1"})
    assert j["health"] is None, j


def test_a_failed_run_without_history_is_not_rated(d):
    j = ok(req(d, "POST", "/jobs", json={"project": PROJECT, "spider": "crash"}), 201)
    j = wait_ended(d, j["id"])
    assert j["state"] == "failed"
    assert j["health"] is None and j["health_reasons"] == [], j


def test_rules_and_filters_refuse_bad_input(d):
    name = unique("hr")
    s = ok(req(d, "POST", "/schedules", json={"name": name, "project": PROJECT,
                                              "spider": "yields", "interval": 86400}), 201)
    r = req(d, "PUT", f"/schedules/{s['id']}/health", json={"rules": {"items_degraded": 2}})
    assert "items_degraded must be a number from 0 to 1" in err(r, 400, "SPD_EBADPARAM", "rules")
    r = req(d, "PUT", f"/schedules/{s['id']}/health", json={"rules": {"itemz": 1}})
    assert "unknown health rule 'itemz'" in err(r, 400, "SPD_EBADPARAM", "rules")
    r = req(d, "PUT", "/schedules/999999/health", json={"rules": {}})
    err(r, 404, "SPD_ENOSCHEDULE")
    r = req(d, "GET", "/jobs", params={"health": "sick"})
    assert "unknown health 'sick'" in err(r, 400, "SPD_EBADPARAM", "health")
    r = req(d, "POST", f"/schedules/{s['id']}/pause", json={"note": "x" * 1001})
    err(r, 400, "SPD_EBADPARAM", "note")
    # a project's rules, under a schedule's own
    got = ok(req(d, "PUT", f"/projects/{PROJECT}/health",
                 json={"rules": {"history": 3, "items_degraded": 0.8}}))
    assert got["effective"]["history"] == 3
    got = ok(req(d, "PUT", f"/schedules/{s['id']}/health", json={"rules": {"history": 4}}))
    assert got["effective"]["history"] == 4 and got["effective"]["items_degraded"] == 0.8
    ok(req(d, "PUT", f"/projects/{PROJECT}/health", json={"rules": {}}))
    got = ok(req(d, "GET", f"/schedules/{s['id']}/health"))
    assert got["effective"]["items_degraded"] == 0.5 and got["rules"] == {"history": 4}
    # a schedule's rules and pause note go with it
    ok(req(d, "POST", f"/schedules/{s['id']}/pause", json={"note": "gone soon"}))
    assert req(d, "DELETE", f"/schedules/{s['id']}").status_code == 204
    if not os.environ.get("SPIDERD_TEST_STORE_URL"):  # the store's own table, on SQLite
        assert d.sql("SELECT key FROM meta WHERE value != '' AND key IN (?, ?)",
                     f"schedule.{s['id']}.pause", f"health.schedule.{s['id']}") == []


def test_the_command_line_filters_by_health_and_pauses_with_a_note(d):
    import subprocess
    name = unique("hc")
    ok(req(d, "POST", "/schedules", json={"name": name, "project": PROJECT, "spider": "yields",
                                          "interval": 86400}), 201)
    env = dict(os.environ, SPIDERD_CONFIG_FILES=d.conf_path)

    def cli(*args):
        p = subprocess.run([os.environ["SPIDERD_BIN"], *args], capture_output=True, text=True,
                           env=env, cwd=d.workdir, timeout=30)
        assert p.returncode == 0, p.stderr
        return p
    cli("schedule", "pause", name, "--note", "the site moved")
    p = cli("schedule", "show", name)
    assert "the site moved (by " in p.stdout, p.stdout
    assert ok(req(d, "GET", f"/schedules/{name}"))["pause_note"]["why"] == "the site moved"
    p = cli("jobs", "--project", PROJECT, "--health", "broken", "--json")
    # (the module's earlier tests left broken runs; alone, it may list none)
    listed = json.loads(p.stdout)["jobs"]
    assert all(j["health"] == "broken" for j in listed)
    p = subprocess.run([os.environ["SPIDERD_BIN"], "jobs", "--health", "sick"],
                       capture_output=True, text=True, env=env, cwd=d.workdir, timeout=30)
    assert p.returncode != 0 and "unknown health 'sick'" in p.stderr, p.stderr


HOOK = r'''
import json, os, sys
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")
body = sys.stdin.read()
tmp = os.path.join(out, ".%s-%d.tmp" % (sys.argv[1], os.getpid()))
with open(tmp, "w") as f:
    json.dump({"env": os.environ.get("SPIDERD_EVENT"), "body": json.loads(body)}, f)
os.rename(tmp, os.path.join(out, "%s-%d.json" % (sys.argv[1], os.getpid())))
'''


def test_hooks_and_webhooks_get_degraded_and_broken(spiderd, egg_bytes, tmp_path):
    import glob
    import shlex
    import sys
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    (tmp_path / "runs").mkdir()
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    got = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cmd = " ".join(shlex.quote(a) for a in [sys.executable, str(script)])
        d = spiderd(scrapyd={"items_dir": "items", "max_proc": 5},
                    spiderd={"webhooks": f"http://127.0.0.1:{server.server_port}/h",
                             "webhook_events": "job.degraded job.broken",
                             "webhook_allow_private": "127.0.0.1"},
                    extra_conf=f"[hooks]\njob_degraded = {cmd} degraded\n"
                               f"job_broken = {cmd} broken\n")
        r = req(d, "POST", f"/projects/{PROJECT}/versions", params={"version": "1.0"},
                data=egg_bytes("healthproj"),
                headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 201, r.text
        path = str(tmp_path / "plan.json")
        plan(path)
        args = {"plan": path}

        def start():
            return ok(req(d, "POST", "/jobs", json={"project": PROJECT, "spider": "yields",
                                                     "args": args}), 201)["id"]
        baseline(d, start)
        plan(path, count=9)
        degraded = run_job(d, args)
        plan(path, count=0)
        broken = run_job(d, args)
        assert (degraded["health"], broken["health"]) == ("degraded", "broken")

        def runs():
            out = {}
            for p in glob.glob(str(tmp_path / "runs" / "*.json")):
                with open(p) as f:
                    rec = json.load(f)
                out[rec["env"]] = rec["body"]
            return out if len(out) == 2 else None
        hooked = wait_for(runs, 20, "the degraded and broken hooks")
        assert hooked["job.degraded"]["job_id"] == degraded["id"]
        assert hooked["job.degraded"]["data"]["reasons"] == ["items 9, usual 20"]
        assert hooked["job.broken"]["data"]["reasons"] == ["items 0, usual 9\u201320"]
        assert hooked["job.broken"]["job"]["health"] == "broken"
        wait_for(lambda: len(got) >= 2, 20, "two webhook deliveries")
        assert sorted(b["type"] for b in got) == ["job.broken", "job.degraded"]
    finally:
        server.shutdown()
