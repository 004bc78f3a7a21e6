"""[hooks] on a real daemon with real crawls: the commands a job's queue,
start and end run, what they get on standard input and in their
environment, failures and timeouts (logged, counted in /metrics, never
failing the job), a loop that answers while a hook runs, the concurrency
limit, the stop, and the configuration's refusals.

Every hook is a script this module writes: it records its input and
environment to a file of its own, so a test counts the runs and reads
exactly what each got."""

import glob
import json
import os
import re
import shlex
import sys
import time

import pytest

from conftest import SHARED_STORE, pid_alive, store_url, timeout, unique, wait_for

RECORDER = r'''
import json, os, sys, time
# Records go to "runs" beside this script: short config lines read better,
# so the command names one path, not two.
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")
name = sys.argv[1]
code = int(sys.argv[2]) if len(sys.argv) > 2 else 0
nap = float(sys.argv[3]) if len(sys.argv) > 3 else 0
t0 = time.time()
body = sys.stdin.read()
time.sleep(nap)
rec = {"name": name, "stdin": json.loads(body), "pid": os.getpid(), "t0": t0,
       "t1": time.time(),
       "env": {k: v for k, v in os.environ.items() if k.startswith("SPIDERD_")}}
tmp = os.path.join(out, ".%s-%d.tmp" % (name, os.getpid()))
with open(tmp, "w") as f:
    json.dump(rec, f)
os.rename(tmp, os.path.join(out, "%s-%d.json" % (name, os.getpid())))
print("hook %s says goodbye" % name)
sys.exit(code)
'''


@pytest.fixture
def rec(tmp_path):
    """rec(name, code=0, nap=0) -> a hook command that records its run
    under the name; rec.runs(name) -> the records, oldest first."""
    out = tmp_path / "runs"
    out.mkdir()
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)

    class Rec:
        dir = str(out)

        def __call__(self, name, code=0, nap=0):
            return " ".join(shlex.quote(a) for a in
                            [sys.executable, str(script), name, str(code), str(nap)])

        def runs(self, name):
            got = []
            for p in glob.glob(os.path.join(str(out), f"{name}-*.json")):
                with open(p) as f:
                    got.append(json.load(f))
            return sorted(got, key=lambda r: r["t0"])
    return Rec()


def hooks_conf(**keys):
    return "[hooks]\n" + "\n".join(f"{k} = {v}" for k, v in keys.items())


def hook_metrics(d):
    text = d.get("/metrics").text
    got = {}
    for m in re.finditer(r'^spiderd_hooks_total\{event="(\w+)",result="(\w+)"\} (\S+)$', text,
                         re.M):
        got[(m.group(1), m.group(2))] = float(m.group(3))
    return got


def wait_runs(rec, name, n, seconds=20):
    return wait_for(lambda: len(rec.runs(name)) >= n and rec.runs(name), seconds,
                    f"{n} run(s) of the {name} hook")


def test_queued_started_finished_run_once_with_the_job(spiderd, rec, egg):
    d = spiderd(extra_conf=hooks_conf(job_queued=rec("queued"), job_started=rec("started"),
                                      job_finished=rec("finished"), job_ended=rec("ended")))
    d.upload("testproj", "1", egg("testproj"))
    jobid = d.schedule("testproj", "quick", color="blue")
    d.wait_finished(jobid)
    for name in ("queued", "started", "finished", "ended"):
        wait_runs(rec, name, 1)
    time.sleep(2.5)  # two ticks more: nothing runs twice
    runs = {name: rec.runs(name) for name in ("queued", "started", "finished", "ended")}
    assert {k: len(v) for k, v in runs.items()} == {"queued": 1, "started": 1, "finished": 1,
                                                   "ended": 1}
    want = {"queued": ("job.queued", "job_queued"), "started": ("job.started", "job_started"),
            "finished": ("job.finished", "job_finished"),
            "ended": ("job.finished", "job_ended")}
    for name, (event, hook) in want.items():
        r = runs[name][0]
        body = r["stdin"]
        assert r["env"]["SPIDERD_EVENT"] == event and body["type"] == event
        assert r["env"]["SPIDERD_HOOK"] == hook
        assert r["env"]["SPIDERD_PROJECT"] == "testproj"
        assert r["env"]["SPIDERD_SPIDER"] == "quick"
        assert r["env"]["SPIDERD_JOB"] == jobid
        assert r["env"]["SPIDERD_NODE"] == d.node and body["node"] == d.node
        assert body["data"]["jobid"] == jobid and body["data"]["project"] == "testproj"
        assert body["job"]["jobid"] == jobid and body["job"]["spider"] == "quick"
        assert body["job"]["args"] == {"color": "blue"}
        assert isinstance(body["id"], int) and body["job_id"] == body["job"]["id"]
    # The daemon's own SPIDERD_* variables are not passed on.
    assert "SPIDERD_CONFIG_FILES" not in runs["queued"][0]["env"]
    # In order: queued, started, then the end.
    assert runs["queued"][0]["stdin"]["id"] < runs["started"][0]["stdin"]["id"] \
        < runs["finished"][0]["stdin"]["id"]
    assert runs["finished"][0]["stdin"]["job"]["state"] == "finished"
    assert runs["finished"][0]["stdin"]["data"]["exit_code"] == 0
    m = hook_metrics(d)
    for hook in ("job_queued", "job_started", "job_finished", "job_ended"):
        assert m.get((hook, "ok")) == 1, m
    from prometheus_client.parser import text_string_to_metric_families
    fams = {f.name: f for f in text_string_to_metric_families(d.get("/metrics").text)}
    assert fams["spiderd_hooks"].type == "counter"
    log = d.stderr_text()
    assert "[hooks] running job_queued, job_started, job_finished, job_ended" in log or \
        "running job_queued, job_started, job_finished, job_ended" in log


def test_failed_job_runs_failed_and_ended(spiderd, rec, egg):
    d = spiderd(extra_conf=hooks_conf(job_failed=rec("failed"), job_finished=rec("finished"),
                                      job_ended=rec("ended")))
    d.upload("testproj", "1", egg("testproj"))
    jobid = d.schedule("testproj", "crash")
    d.wait_finished(jobid)
    failed = wait_runs(rec, "failed", 1)
    ended = wait_runs(rec, "ended", 1)
    time.sleep(1.5)
    assert len(rec.runs("failed")) == 1 and len(rec.runs("ended")) == 1
    assert rec.runs("finished") == []
    assert failed[0]["env"]["SPIDERD_EVENT"] == "job.failed"
    assert ended[0]["env"]["SPIDERD_EVENT"] == "job.failed"
    assert failed[0]["stdin"]["job"]["state"] == "failed"


def test_failing_and_slow_hooks_are_logged_counted_and_killed(spiderd, rec, egg, tmp_path):
    pidfile = tmp_path / "sleeper.pid"
    # The shell starts a child and waits: the timeout must kill both (the
    # hook's whole process group), or the child would outlive it.
    slow = f"sleep 60 & echo $! > {shlex.quote(str(pidfile))}; wait"
    d = spiderd(extra_conf=hooks_conf(job_finished=rec("bad", code=3), job_ended=slow,
                                      job_started=rec("started"), timeout=2))
    d.upload("testproj", "1", egg("testproj"))
    jobid = d.schedule("testproj", "quick")
    d.wait_finished(jobid)
    wait_runs(rec, "bad", 1)
    sleeper = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 10,
                           "the slow hook to start"))
    # The loop is not blocked while the slow hook runs.
    t0 = time.monotonic()
    status = d.api("daemonstatus.json")
    assert status["status"] == "ok"
    assert time.monotonic() - t0 < 1.0
    assert pid_alive(sleeper)
    wait_for(lambda: not pid_alive(sleeper), 10, "the slow hook's child to be killed")
    m = wait_for(lambda: (lambda m: m if m.get(("job_ended", "timeout")) else None)(
        hook_metrics(d)), 10, "the timeout counted")
    assert m.get(("job_finished", "failed")) == 1, m
    assert m.get(("job_started", "ok")) == 1, m
    log = d.stderr_text()
    assert re.search(r"job_finished for job '%s' \(event \d+\) failed: exit status 3" % jobid,
                     log), log[-3000:]
    assert "hook bad says goodbye" in log  # its output is logged with the failure
    assert re.search(r"job_ended for job '%s' \(event \d+\) killed after \d+\.\d s "
                     r"\(\[hooks\] timeout\)" % jobid, log), log[-3000:]
    # The job stays what it was, and the daemon goes on.
    section, entry = d.find(jobid)
    assert section == "finished" and entry.get("state", "finished") == "finished", entry
    assert d.api("daemonstatus.json")["status"] == "ok"


def test_concurrency_limit_holds_and_all_run_in_order(spiderd, rec, egg):
    d = spiderd(extra_conf=hooks_conf(job_queued=rec("q", nap=1.0), concurrency=2))
    d.upload("testproj", "1", egg("testproj"))
    jobs = [d.schedule("testproj", "quick") for _ in range(5)]
    runs = wait_runs(rec, "q", 5, seconds=30)
    assert sorted(r["env"]["SPIDERD_JOB"] for r in runs) == sorted(jobs)
    # Never more than two at once, and two did run side by side.
    edges = sorted([(r["t0"], 1) for r in runs] + [(r["t1"], -1) for r in runs])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    assert most == 2, runs
    # The rest waited in event order: a later event's run never started a
    # run (1 s) before an earlier one's (two start together, in any order).
    by_id = sorted(runs, key=lambda r: r["stdin"]["id"])
    for k in range(1, len(by_id)):
        assert by_id[k]["t0"] + 0.5 >= by_id[k - 1]["t0"], by_id
    # Counted when the process is reaped, just after its record is written.
    wait_for(lambda: hook_metrics(d).get(("job_queued", "ok")) == 5, 10, "5 runs counted")


def test_stop_kills_hooks_at_the_shutdown_deadline(spiderd, tmp_path, egg):
    pidfile = tmp_path / "long.pid"
    long = f"sleep 120 & echo $! > {shlex.quote(str(pidfile))}; wait"
    d = spiderd(spiderd={"shutdown_grace": 2},
                extra_conf=hooks_conf(job_started=long, timeout=300))
    d.upload("testproj", "1", egg("testproj"))
    jobid = d.schedule("testproj", "quick")
    d.wait_finished(jobid)
    sleeper = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 10,
                           "the hook to start"))
    t0 = time.monotonic()
    d.stop()
    assert time.monotonic() - t0 < timeout(15)
    wait_for(lambda: not pid_alive(sleeper), 5, "the hook's child to be killed")
    log = d.stderr_text()
    assert "waiting for 1 running and 0 waiting hook(s)" in log
    assert "killed after" in log and "the daemon stops" in log


def test_cancelled_running_and_pending(spiderd, rec, egg):
    d = spiderd(scrapyd={"max_proc": 1},
                extra_conf=hooks_conf(job_cancelled=rec("cancelled"), job_ended=rec("ended")))
    d.upload("testproj", "1", egg("testproj"))
    running = d.schedule("testproj", "slow", seconds="60")
    d.wait_running(running)
    pending = d.schedule("testproj", "quick")
    d.cancel("testproj", pending)
    d.cancel("testproj", running)
    d.wait_finished(running)
    got = wait_runs(rec, "cancelled", 2)
    wait_runs(rec, "ended", 2)
    time.sleep(1.5)
    assert len(rec.runs("cancelled")) == 2 and len(rec.runs("ended")) == 2
    by_job = {r["env"]["SPIDERD_JOB"]: r for r in got}
    assert set(by_job) == {running, pending}
    assert by_job[pending]["stdin"]["data"]["started"] is False
    assert by_job[running]["stdin"]["job"]["state"] == "cancelled"
    assert all(r["env"]["SPIDERD_EVENT"] == "job.cancelled" for r in rec.runs("ended"))


@pytest.mark.skipif(not SHARED_STORE, reason="needs a shared store (make test-pg)")
def test_cluster_runs_each_event_once_on_its_node(spiderd, rec, egg):
    """Two nodes on one store, both with hooks: a job's start and end run
    on the node that ran it, its queue on one node, each exactly once."""
    key = unique("hooks")
    conf = hooks_conf(job_queued=rec("queued"), job_started=rec("started"),
                      job_finished=rec("finished"))
    a, b = (spiderd(name=f"n{i}", scrapyd={"node_name": f"n{i}", "max_proc": 2},
                    spiderd={"store": store_url(key), "node_heartbeat": 0.3},
                    extra_conf=conf) for i in range(2))
    a.upload("testproj", "1", egg("testproj"))
    wait_for(lambda: "testproj" in b.api("listprojects.json")["projects"], 10,
             "the project on the other node")
    jobs = [(a if i % 2 else b).schedule("testproj", "quick") for i in range(6)]
    for j in jobs:
        a.wait_finished(j, seconds=60)
    for name in ("queued", "started", "finished"):
        wait_runs(rec, name, len(jobs), seconds=30)
    time.sleep(2.5)
    ran_on = {}
    for name in ("queued", "started", "finished"):
        runs = rec.runs(name)
        assert sorted(r["env"]["SPIDERD_JOB"] for r in runs) == sorted(jobs), name
        for r in runs:
            assert r["env"]["SPIDERD_NODE"] == r["stdin"]["node"]
            if name != "queued":
                ran_on.setdefault(r["env"]["SPIDERD_JOB"], set()).add(r["env"]["SPIDERD_NODE"])
                assert r["env"]["SPIDERD_NODE"] == r["stdin"]["job"]["node"]
    assert all(len(nodes) == 1 for nodes in ran_on.values()), ran_on
    # job_queued ran on the lease holder: one node for all of them.
    assert len({r["env"]["SPIDERD_NODE"] for r in rec.runs("queued")}) == 1


@pytest.mark.parametrize("key,value,why", [
    ("timeout", "0", "out of range"),
    ("concurrency", "0", "out of range"),
    ("job_teleported", "true", "unknown key"),
])
def test_bad_hooks_config_is_refused(spiderd, key, value, why):
    d = spiderd(start=False, extra_conf=hooks_conf(**{key: value}))
    d.spawn()
    assert d.proc.wait(timeout(10)) == 2
    d.proc = None
    text = d.stderr_text()
    assert f"[hooks] {key}" in text and why in text, text


def test_hooks_from_the_environment(spiderd, rec, egg):
    d = spiderd(env={"SPIDERD_HOOKS_JOB_FINISHED": rec("fromenv")})
    d.upload("testproj", "1", egg("testproj"))
    jobid = d.schedule("testproj", "quick")
    d.wait_finished(jobid)
    r = wait_runs(rec, "fromenv", 1)[0]
    assert r["env"]["SPIDERD_JOB"] == jobid
