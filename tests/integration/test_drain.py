"""Health and drain: SIGTERM drains before it stops (the node claims nothing,
its crawls end within drain_grace, pending jobs stay queued, exit 0), a grace
that runs out stops the crawls the old way, a second signal stops at once,
and `spiderd drain` / `--cancel` drain a live daemon without stopping it; in a
cluster the jobs queued while one node drains run on another."""

import os
import signal
import subprocess
import time

import pytest

from conftest import BIN, SHARED_STORE, SLOW, pid_alive, store_url, timeout, unique, wait_for

API = "/api/v1"
HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fakecrawl.py")
PENDING, RUNNING, FINISHED, CANCELLED = 0, 1, 2, 4


def ids():
    """Job ids of their own per test: a PostgreSQL store's schema is named
    after the daemon's directory, so a rerun with the same --basetemp finds
    the jobs of the last run there."""
    tag = unique("")
    return {n: n + tag for n in ("run1", "p1", "p2", "p3", "long", "waits", "runs", "q1", "q2")}


def jobs_by_id(d):
    """{jobid: row} of the store's jobs, read directly (the daemon may be down)."""
    return {r["jobid"]: r for r in d.sql("SELECT jobid, state, node, start_ms, end_ms FROM jobs")}


def readyz(d):
    r = d.get("/readyz")
    return r.status_code, r.text


def node_row(d, name=None):
    r = d.request("GET", API + "/nodes")
    assert r.status_code == 200, r.text
    return {n["name"]: n for n in r.json()["nodes"]}.get(name or d.node)


def cli(d, *args):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SCRAPYD_", "SPIDERD_", "SCRAPY_"))}
    p = subprocess.run([BIN, *args, "--url", d.url], env=env, capture_output=True, text=True,
                       timeout=timeout(30))
    assert p.returncode == 0, f"spiderd {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def sigterm_and_wait(d, seconds):
    """SIGTERM; returns (exit status, seconds it took)."""
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    rc = d.proc.wait(timeout(seconds))
    took = time.monotonic() - t0
    d.proc = None
    d.check_sanitizer()
    return rc, took


def test_sigterm_lets_the_crawl_finish_starts_nothing_and_keeps_pending_jobs(spiderd, egg):
    J = ids()
    d = spiderd(scrapyd={"max_proc": 1}, spiderd={"drain_grace": 40, "shutdown_grace": 2})
    d.upload("p", "1.0", egg("testproj"))
    d.schedule("p", "slow", settings=["LOG_LEVEL=DEBUG"], seconds=6 * SLOW, jobid=J["run1"])
    pid = d.wait_running(J["run1"])["pid"]
    d.wait_crawling("p", "slow", J["run1"])
    d.schedule("p", "quick", count=1, jobid=J["p1"])
    d.schedule("p", "quick", count=1, jobid=J["p2"])
    assert readyz(d)[0] == 200

    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    # Draining: alive, answering, not ready; jobs may still be queued.
    status, text = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(readyz(d)), 5,
                            "/readyz to say 503")
    assert "draining" in text, text
    assert d.get("/healthz").status_code == 200
    assert d.request("GET", API + "/status").json()["draining"] is True
    wait_for(lambda: node_row(d)["draining"], 5, "the node's row to say draining")
    d.schedule("p", "quick", count=1, jobid=J["p3"])  # a write is still served
    assert d.find(J["run1"])[0] == "running"
    rc = d.proc.wait(timeout(40))
    took = time.monotonic() - t0
    d.proc = None
    d.check_sanitizer()
    assert rc == 0, d.stderr_tail()
    assert took < timeout(30), f"the drain took {took:.1f}s"
    assert not pid_alive(pid)

    # The crawl ended on its own; nothing started after the signal.
    rows = jobs_by_id(d)
    assert rows[J["run1"]]["state"] == FINISHED, rows[J["run1"]]
    for job in (J["p1"], J["p2"], J["p3"]):
        assert rows[job]["state"] == PENDING and not rows[job]["start_ms"], rows[job]
    log = d.stderr_text().split("received SIGTERM", 1)[1]
    assert "Process started" not in log, log
    assert "drained: no crawl runs" in log
    assert "Received SIGTERM" not in d.read_log("p", "slow", J["run1"])

    # The next start runs them.
    d.start()
    for job in (J["p1"], J["p2"], J["p3"]):
        assert d.wait_finished(job)["state"] == "finished"
    assert d.find(J["run1"])[1]["state"] == "finished"


def test_a_grace_that_runs_out_stops_the_crawls_the_old_way(spiderd, egg):
    J = ids()
    d = spiderd(scrapyd={"max_proc": 1}, spiderd={"drain_grace": 2, "shutdown_grace": 2})
    d.upload("p", "1.0", egg("testproj"))
    d.schedule("p", "slow", settings=["LOG_LEVEL=DEBUG"], seconds=120, jobid=J["long"])
    pid = d.wait_running(J["long"])["pid"]
    d.wait_crawling("p", "slow", J["long"])
    d.schedule("p", "quick", count=1, jobid=J["waits"])
    rc, took = sigterm_and_wait(d, 40)
    assert rc == 0, d.stderr_tail()
    assert 2 <= took < (2 + 2 + 8) * SLOW, f"stopping took {took:.1f}s"
    assert not pid_alive(pid)
    assert "drain_grace (2 s) is over with 1 crawl(s) still running" in d.stderr_text()
    assert "Received SIGTERM" in d.read_log("p", "slow", J["long"])
    rows = jobs_by_id(d)
    assert rows[J["long"]]["state"] == CANCELLED
    assert rows[J["waits"]]["state"] == PENDING


def test_a_second_signal_stops_at_once(spiderd, egg):
    J = ids()
    d = spiderd(scrapyd={"max_proc": 1}, spiderd={"drain_grace": 120, "shutdown_grace": 2})
    d.upload("p", "1.0", egg("testproj"))
    d.schedule("p", "slow", settings=["LOG_LEVEL=DEBUG"], seconds=120, jobid=J["long"])
    pid = d.wait_running(J["long"])["pid"]
    d.wait_crawling("p", "slow", J["long"])
    d.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: readyz(d)[0] == 503, 5, "the drain")
    time.sleep(0.5)
    assert d.running()
    rc, took = sigterm_and_wait(d, 30)
    assert rc == 0, d.stderr_tail()
    assert took < (2 + 8) * SLOW, f"the second signal took {took:.1f}s"
    assert not pid_alive(pid)
    assert "second signal: stopping now" in d.stderr_text()
    assert jobs_by_id(d)[J["long"]]["state"] == CANCELLED


def test_drain_grace_0_stops_at_once(spiderd, egg):
    J = ids()
    d = spiderd(scrapyd={"max_proc": 1}, spiderd={"drain_grace": 0, "shutdown_grace": 2})
    d.upload("p", "1.0", egg("testproj"))
    d.schedule("p", "slow", settings=["LOG_LEVEL=DEBUG"], seconds=120, jobid=J["long"])
    d.wait_crawling("p", "slow", J["long"])
    rc, took = sigterm_and_wait(d, 30)
    assert rc == 0 and took < (2 + 8) * SLOW
    assert "draining" not in d.stderr_text()
    assert jobs_by_id(d)[J["long"]]["state"] == CANCELLED


def test_spiderd_drain_on_a_live_daemon_and_its_cancel(spiderd, egg):
    J = ids()
    d = spiderd(scrapyd={"max_proc": 2}, spiderd={"drain_grace": 30, "node_heartbeat": 0.3})
    d.upload("p", "1.0", egg("testproj"))
    # (A row a last run on this PostgreSQL schema left says draining.)
    wait_for(lambda: (node_row(d) or {}).get("draining") is False, 5,
             "the node's first heartbeat")
    d.schedule("p", "slow", seconds=4 * SLOW, jobid=J["runs"])
    d.wait_running(J["runs"])

    out = cli(d, "drain")
    assert "is draining" in out, out
    status, text = readyz(d)
    assert status == 503 and "draining" in text, (status, text)
    assert d.get("/healthz").status_code == 200
    wait_for(lambda: node_row(d)["draining"], 5, "GET /nodes to show the drain")
    assert "draining" in cli(d, "status")
    # Jobs queued now (Scrapyd's API and the native one) wait; the crawl
    # that ran goes on to its end; a second drain changes nothing.
    d.schedule("p", "quick", count=1, jobid=J["q1"])
    r = d.request("POST", API + "/jobs",
                  json={"project": "p", "spider": "quick", "jobid": J["q2"]})
    assert r.status_code == 201, r.text
    r = d.request("POST", API + "/nodes/self/drain")
    assert r.status_code == 200 and r.json()["draining"] is True, r.text
    assert d.wait_finished(J["runs"])["state"] == "finished"
    time.sleep(1.5)
    for job in (J["q1"], J["q2"]):
        assert d.find(job)[0] == "pending", d.listjobs()

    out = cli(d, "drain", "--cancel")
    assert "claims jobs again" in out, out
    for job in (J["q1"], J["q2"]):
        assert d.wait_finished(job)["state"] == "finished"
    assert readyz(d)[0] == 200
    wait_for(lambda: not node_row(d)["draining"], 5, "GET /nodes to show the end of the drain")
    r = d.request("POST", API + "/nodes/self/undrain")
    assert r.status_code == 200 and r.json()["draining"] is False, r.text
    r = d.request("POST", API + "/jsonrpc",
                  json={"jsonrpc": "2.0", "id": 1, "method": "nodes.drain"})
    assert r.json()["result"]["draining"] is True
    # Drained by hand, then SIGTERM: nothing runs, so it stops at once.
    rc, took = sigterm_and_wait(d, 30)
    assert rc == 0 and took < timeout(10), (rc, took)


def test_a_draining_leader_gives_the_scheduler_lease_up_at_once(spiderd, egg, tmp_path):
    """Two nodes on one SQLite file (as test_schedules.py's lease test): the
    lease holder gets SIGTERM while a crawl keeps it draining; the other
    node fires the schedules within its next tick, not after the lease
    expired."""
    shared = tmp_path / "shared"
    shared.mkdir()
    lease = 15  # a standby node tries every lease / 3 = 5 s
    common = {"scrapyd": {"eggs_dir": str(shared / "eggs"), "max_proc": 1},
              "spiderd": {"store": f"sqlite:{shared}/spiderd.db", "scheduler_lease": lease,
                          "drain_grace": 60, "shutdown_grace": 2}}
    nodes = []
    for name in ("a", "b"):
        d = spiderd(name=name, start=False, **{k: dict(v) for k, v in common.items()})
        d.scrapyd["node_name"] = "node-" + name
        d.write_conf()
        d.start()
        nodes.append(d)
    a, b = nodes
    a.upload("testproj", "1", egg("testproj"))
    wait_for(lambda: "fires schedules now" in a.stderr_text() + b.stderr_text(), 10,
             "a lease holder")
    leader = a if "fires schedules now" in a.stderr_text() else b
    other = b if leader is a else a
    leader.schedule("testproj", "slow", settings=["LOG_LEVEL=DEBUG"], seconds=120, jobid="long")
    leader.wait_crawling("testproj", "slow", "long")
    assert leader.find("long")[1]["pid"]
    r = other.request("POST", API + "/schedules", json={
        "name": "every2s", "project": "testproj", "spider": "quick", "interval": 2,
        "args": {"count": "1"}, "overlap": "allow"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]

    leader.proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    wait_for(lambda: "fires schedules now" in other.stderr_text(), lease / 3 + 3,
             "the other node to take the lease over")
    took = time.monotonic() - t0
    assert took < lease, f"the lease passed after {took:.1f}s: it expired, it was not given up"
    assert leader.running(), "the leader should still be draining"

    def run_by_other():
        r = other.request("GET", API + "/jobs", params={"schedule": sid})
        js = [j for j in r.json()["jobs"] if j["state"] == "finished" and j["node"] == other.node]
        return js or None
    wait_for(run_by_other, 30, "a scheduled job run by the new lease holder", interval=0.2)
    assert other.request("POST", f"{API}/schedules/{sid}/pause").status_code == 200
    rc, _ = sigterm_and_wait(leader, 30)  # the second signal: the crawl is stopped now
    assert rc == 0, leader.stderr_tail()
    assert "Process started" not in leader.stderr_text().split("received SIGTERM", 1)[1]


@pytest.mark.skipif(not SHARED_STORE, reason="needs a shared store (make test-pg)")
def test_jobs_queued_while_a_node_drains_run_on_another(spiderd, tmp_path, egg):
    key = unique("drain")
    markers = tmp_path / "markers"
    markers.mkdir()
    fast = {"node_heartbeat": 0.3, "node_timeout": 3 * SLOW, "scheduler_lease": 2 * SLOW,
            "store": store_url(key), "python": FAKE, "drain_grace": 30}
    # b's crawls take 3 s: long enough to be running when it gets SIGTERM.
    a = spiderd(name="a", scrapyd={"node_name": "na", "max_proc": 2}, spiderd=fast,
                env={"MARKER_DIR": str(markers), "NODE_TAG": "na", "FAKE_SECONDS": "0.3"})
    b = spiderd(name="b", scrapyd={"node_name": "nb", "max_proc": 2}, spiderd=fast,
                env={"MARKER_DIR": str(markers), "NODE_TAG": "nb", "FAKE_SECONDS": "3"})
    a.upload("testproj", "1", egg("testproj"))
    wait_for(lambda: "testproj" in b.api("listprojects.json")["projects"], 10,
             "the egg on the other node")
    wait_for(lambda: node_row(a, "nb") and node_row(b, "na"), 10, "both nodes' beats")

    def queue(d, jobid):
        r = d.request("POST", API + "/jobs", json={"project": "testproj", "spider": "quick",
                                                   "jobid": jobid})
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def job(d, ident):
        return d.request("GET", f"{API}/jobs/{ident}").json()

    # a drains: b sees it, and every job queued through a runs on b.
    r = a.request("POST", API + "/nodes/self/drain")
    assert r.status_code == 200, r.text
    wait_for(lambda: node_row(b, "na")["draining"], 5, "b to see a draining")
    assert node_row(b, "nb")["draining"] is False
    ids = [queue(a, f"d{i}") for i in range(4)]

    def ended():
        js = [job(a, i) for i in ids]
        return js if all(j["state"] == "finished" for j in js) else None
    js = wait_for(ended, 60, "the jobs queued on the draining node to finish", interval=0.2)
    assert {j["node"] for j in js} == {"nb"}, js

    # b runs a job and gets SIGTERM: it lets the job finish, and a
    # (undrained) runs what is queued meanwhile, even through b.
    late = queue(b, "late")
    # Its crawl started on b (a claim is "running" a moment before its
    # process exists, and a stopping node gives back what it has not started).
    wait_for(lambda: any(p.name.startswith("late.nb.") for p in markers.iterdir()), 20,
             "the late job's crawl to start on b")
    assert job(b, late)["state"] == "running"
    assert job(b, late)["node"] == "nb"
    assert a.request("POST", API + "/nodes/self/undrain").status_code == 200
    b.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: node_row(a, "nb")["draining"], 5, "a to see b draining")
    after = queue(b, "after")
    j = wait_for(lambda: (lambda j: j if j["state"] == "finished" else None)(job(a, after)), 30,
                 "the job queued on b to run on a", interval=0.2)
    assert j["node"] == "na", j
    assert b.proc.wait(timeout(40)) == 0, b.stderr_tail()
    b.proc = None
    assert job(a, late)["state"] == "finished"
