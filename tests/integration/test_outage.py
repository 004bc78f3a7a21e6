"""A shared store that goes away, and a node that stops: the cluster under fire.

Every node reaches the store (PostgreSQL or Redis, whichever
SPIDERD_TEST_STORE_URL names; skipped on SQLite) through a TCP proxy run by
the test, which can cut every connection and refuse new ones (reset) or hold
them silent (blackhole), then let traffic through again. The crawls are
fakecrawl.py: each run leaves a marker with its job, node, pid, start and
end, so "nothing ran twice" is checked against what really ran, not only
against what the store says.

- test_store_cut: the store is cut for 30 s while jobs run and a schedule
  fires. The nodes keep answering (what needs the store fails fast with a
  503 and the error shape), run nothing twice, declare nobody dead, and
  catch up once the store is back.
- test_stopped_node_is_fenced: a node that holds the scheduler lease and
  runs crawls is stopped (SIGSTOP) past its lease and node_timeout; the
  other node takes the lease and retries its jobs; once resumed (SIGCONT)
  the stopped node's late writes are kept out.
- test_store_blackhole (SPIDERD_TEST_BLACKHOLE=1, for soak runs): the same
  as the cut, with connections held silent instead of reset.
"""

import os
import select
import signal
import socket
import threading
import time
import urllib.parse

import pytest

from conftest import SHARED_STORE, SLOW, STORE_TMPL, store_url, timeout, unique, wait_for
from test_cluster import FAKE, all_jobs, markers_of, nodes

API = "/api/v1"
pytestmark = pytest.mark.skipif(not SHARED_STORE, reason="needs a shared store (PostgreSQL or Redis)")

# Beats every 0.3 s, dead after 3 s, the scheduler lease 2 s: a 30 s cut is
# ten node_timeouts.
FAST = {"node_heartbeat": 0.3, "node_timeout": 3 * SLOW, "scheduler_lease": 2 * SLOW}
CUT_S = 30
# What the nodes may take to answer anything while the store is away.
ANSWER_BOUND_S = 10


class StoreProxy:
    """A TCP proxy in front of the store. up: bytes flow. reset: every
    connection is closed with RST and new ones are reset at once.
    blackhole: connections (old and new) stay open and nothing flows; up
    again, the held bytes flow on, as after a healed partition."""

    def __init__(self, host, port):
        self.target = (host, port)
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(128)
        self.port = self.lsock.getsockname()[1]
        self.mode = "up"
        self.lock = threading.Lock()
        self.pairs = []  # [client, server]
        self.accepted = 0
        self.stopping = False
        self.wake_r, self.wake_w = os.pipe()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def set(self, mode):
        with self.lock:
            self.mode = mode
            if mode == "reset":
                for pair in self.pairs:
                    for s in pair:
                        self._rst(s)
                self.pairs = []
        os.write(self.wake_w, b"x")

    @staticmethod
    def _rst(s):
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        except OSError:
            pass

    def close(self):
        self.stopping = True
        os.write(self.wake_w, b"x")
        self.thread.join(5)
        self.lsock.close()
        with self.lock:
            for pair in self.pairs:
                for s in pair:
                    s.close()
            self.pairs = []

    def _accept(self):
        try:
            c, _ = self.lsock.accept()
        except OSError:
            return
        self.accepted += 1
        if self.mode == "reset":
            self._rst(c)
            return
        try:
            s = socket.create_connection(self.target, timeout=5)
        except OSError:
            self._rst(c)
            return
        for x in (c, s):
            x.setblocking(False)
            x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pairs.append([c, s])

    def _drop(self, pair):
        for s in pair:
            s.close()
        if pair in self.pairs:
            self.pairs.remove(pair)

    def _run(self):
        while not self.stopping:
            with self.lock:
                flowing = self.mode == "up"
                socks = [self.lsock, self.wake_r]
                if flowing:
                    socks += [s for pair in self.pairs for s in pair]
            try:
                readable, _, _ = select.select(socks, [], [], 0.5)
            except (OSError, ValueError):
                continue  # a socket closed under us (reset): look again
            with self.lock:
                for r in readable:
                    if r is self.wake_r:
                        os.read(self.wake_r, 4096)
                    elif r is self.lsock:
                        self._accept()
                    elif self.mode == "up":
                        pair = next((p for p in self.pairs if r in p), None)
                        if pair is None:
                            continue
                        other = pair[1] if r is pair[0] else pair[0]
                        try:
                            data = r.recv(65536)
                            if not data:
                                self._drop(pair)
                                continue
                            other.setblocking(True)
                            other.sendall(data)
                            other.setblocking(False)
                        except OSError:
                            self._drop(pair)


def proxied_url(proxy, key):
    """The store URL for `key`, through the proxy."""
    u = urllib.parse.urlsplit(store_url(key))
    return urllib.parse.urlunsplit(u._replace(netloc=u.netloc.replace(
        f"{u.hostname}:{u.port}", f"127.0.0.1:{proxy.port}")))


def start_proxy():
    u = urllib.parse.urlsplit(STORE_TMPL.replace("{}", "x"))
    return StoreProxy(u.hostname, u.port)


@pytest.fixture
def proxy():
    p = start_proxy()
    yield p
    p.close()


def two_nodes(spiderd, tmp_path, url, extra=None, env=None):
    markers = tmp_path / "markers"
    markers.mkdir(exist_ok=True)
    out = []
    for i in range(2):
        sd = dict(FAST, store=url, python=FAKE, job_retries=0)
        sd.update(extra or {})
        e = {"MARKER_DIR": str(markers), "NODE_TAG": f"n{i}", "FAKE_SECONDS": "2"}
        e.update(env or {})
        out.append(spiderd(name=f"n{i}", scrapyd={"node_name": f"n{i}", "max_proc": 2,
                                                   "finished_to_keep": 0},
                           spiderd=sd, env=e))
    return out, markers


def probe(d, path, bound=ANSWER_BOUND_S):
    """(status, body, seconds) of a GET that must be answered within bound."""
    t0 = time.monotonic()
    r = d.request("GET", path, timeout=timeout(bound))
    return r.status_code, r, time.monotonic() - t0


def check_answers_without_store(d, bound=ANSWER_BOUND_S, store_reads=True):
    """What a node answers while its store is away: its own status and
    health at once; reads and writes of the store within the bound, each a
    503 in the error shape of its API, or Scrapyd's error (store_reads)."""
    status, r, secs = probe(d, "/daemonstatus.json", 3)
    assert status == 200 and r.json()["status"] == "ok", r.text
    assert secs < timeout(3)
    status, r, _ = probe(d, "/healthz", 3)
    assert status == 200, r.text
    status, r, _ = probe(d, "/readyz", bound)
    assert status == 503 and r.text.startswith("not ready"), r.text
    if not store_reads:
        return
    status, r, _ = probe(d, API + "/jobs", bound)
    assert status == 503, (status, r.text)
    err = r.json()["error"]
    assert err["code"] == "SPD_ESTORE" and err["message"], r.text
    r = d.request("GET", "/listjobs.json", timeout=timeout(bound))
    assert r.status_code in (200, 503), (r.status_code, r.text)
    body = r.json()
    assert body["status"] == "error" and body["message"] and body["node_name"] == d.node, body
    # A write that needs the store is refused, and says so.
    r = d.request("POST", "/schedule.json", data={"project": "testproj", "spider": "quick"},
                  timeout=timeout(bound))
    assert r.status_code in (200, 503), (r.status_code, r.text)
    body = r.json()
    assert body["status"] == "error" and body["message"], body


def timed_store_read(d, out):
    """Starts GET /api/v1/jobs in a thread; out gets (status, seconds)."""
    def run():
        t0 = time.monotonic()
        try:
            status = d.request("GET", API + "/jobs", timeout=timeout(120)).status_code
        except Exception as e:  # noqa: BLE001 (reported, not raised, in a thread)
            status = repr(e)
        out.append((status, time.monotonic() - t0))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def deploy_and_tick(here, there, egg, interval):
    """testproj deployed on `here` (and seen by `there`) and a schedule of
    quick every `interval` seconds; the schedule's id."""
    here.upload("testproj", "1", egg("testproj"))
    wait_for(lambda: "testproj" in there.api("listprojects.json")["projects"], timeout(10),
             "the egg on both nodes")
    r = here.request("POST", API + "/schedules",
                     json={"name": unique("tick"), "project": "testproj", "spider": "quick",
                           "interval": interval, "overlap": "allow", "missed": "skip"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def run_cut(spiderd, egg, tmp_path, proxy, mode, cut_s):
    """Two nodes, jobs and a schedule; the store goes away for cut_s seconds
    (mode "reset" or "blackhole") and comes back. Returns what the checks
    need."""
    (a, b), markers = two_nodes(spiderd, tmp_path, proxied_url(proxy, unique("outage")))
    sid = deploy_and_tick(a, b, egg, interval=2)
    before = [(a if i % 2 else b).schedule("testproj", "quick", jobid=f"b{i}") for i in range(8)]
    # Cut while crawls run on both nodes (four slots, eight 2 s jobs).
    wait_for(lambda: {n for rs in markers_of(markers).values() for n, _, _, end in rs
                      if end is None} == {"n0", "n1"}, timeout(20), "crawls running on both nodes")
    cut_at = time.time()
    proxy.set(mode)
    # While it is away: the nodes answer, within the bound, every few seconds.
    # A blackhole holds a statement in flight until the store is back (no
    # error comes back to end it): its read is timed, not bounded.
    worst = 0.0
    probes = 0
    held = []
    threads = [timed_store_read(d, held) for d in (a, b)] if mode == "blackhole" else []
    while time.time() < cut_at + cut_s - 2:
        for d in (a, b):
            t0 = time.monotonic()
            check_answers_without_store(d, store_reads=mode != "blackhole")
            worst = max(worst, time.monotonic() - t0)
            probes += 1
            assert d.running(), d.stderr_tail()
        time.sleep(1)
    while time.time() < cut_at + cut_s:
        time.sleep(0.1)
    proxy.set("up")
    back_at = time.time()
    for t in threads:
        t.join(timeout(60))
    assert len(held) == len(threads) and all(st == 200 for st, _ in held), held
    # Caught up: new work is taken and runs, everywhere.
    def schedule_after():
        try:
            return a.schedule("testproj", "quick", jobid="after0")
        except AssertionError:
            return None
    first_after = wait_for(schedule_after, timeout(20), "a schedule.json after the store is back",
                           interval=0.2)
    writable_s = time.time() - back_at

    def readable():
        r = a.request("GET", API + "/jobs", params={"limit": 1})
        assert r.status_code in (200, 503), r.text  # 503: not reconnected yet
        return r.status_code == 200
    wait_for(readable, timeout(20), "a read after the store is back", interval=0.2)
    # The ends of the crawls that finished during the cut reach the store.
    ended_during = [job for job, rs in markers_of(markers).items()
                    if job in before and rs[0][3] is not None and cut_at < rs[0][3] < back_at]
    assert ended_during, "no crawl ended during the cut: make them shorter"
    wait_for(lambda: all(j["state"] == "finished" for j in all_jobs(a, project="testproj")
                         if j["job"] in ended_during), timeout(20),
             "the ends of the crawls that ended during the cut", interval=0.2)
    ends_s = time.time() - back_at
    after = [first_after] + [b.schedule("testproj", "quick", jobid=f"after{i}")
                             for i in range(1, 4)]
    jobids = before + after
    wait_for(lambda: all(j["state"] in ("finished", "failed", "lost", "cancelled")
                         for j in all_jobs(a, project="testproj")
                         if j["job"].split(".r")[0] in jobids) and
             {j["job"] for j in all_jobs(a, project="testproj")} >= set(jobids),
             timeout(40), "every job ended", interval=0.3)
    return dict(a=a, b=b, markers=markers, sid=sid, jobids=jobids, before=before, after=after,
                cut_at=cut_at, back_at=back_at, worst=worst, probes=probes, held=held,
                writable_s=writable_s, ends_s=ends_s)


def check_caught_up(x):
    a, b, markers, jobids = x["a"], x["b"], x["markers"], x["jobids"]
    # Nobody was declared dead: each node was cut off, not gone, and so was
    # everyone else.
    ns = nodes(b)
    assert ns["n0"]["state"] == "alive" and ns["n1"]["state"] == "alive", ns
    assert "is dead" not in a.stderr_text() + b.stderr_text()
    assert "declared dead" not in a.stderr_text() + b.stderr_text()
    js = [j for j in all_jobs(a, project="testproj") if not j["schedule_id"]]
    # Every job ran once and is recorded once, finished; none was retried.
    assert sorted(j["job"] for j in js) == sorted(jobids), js
    bad = [j for j in js if j["state"] != "finished"]
    assert not bad, bad
    runs = markers_of(markers)
    for jobid in jobids:
        assert len(runs.get(jobid, [])) == 1, (jobid, runs.get(jobid))
        node, _, _, end = runs[jobid][0]
        assert end is not None, (jobid, runs[jobid])
        rec = next(j for j in js if j["job"] == jobid)
        assert rec["node"] == node, (rec, runs[jobid])
    # The schedule fired at most once per due time, through the cut.
    # (Paused first, and its last jobs ended, so the counts below hold still.)
    r = b.request("POST", f"{API}/schedules/{x['sid']}/pause", json={})
    assert r.status_code == 200, r.text
    wait_for(lambda: all(j["state"] not in ("pending", "running")
                         for j in all_jobs(b, schedule=x["sid"])), timeout(20),
             "the schedule's jobs ended", interval=0.3)
    rs = b.request("GET", f"{API}/schedules/{x['sid']}/runs", params={"limit": 1000}).json()["runs"]
    dues = [run["due_ms"] for run in rs if run["state"] != "upcoming"]
    assert len(dues) == len(set(dues)), rs
    fired = [run for run in rs if run["state"] == "fired"]
    sched_jobs = [j for j in all_jobs(b, schedule=x["sid"])]
    assert len(sched_jobs) == len(fired), (sched_jobs, fired)
    assert len({j["job"] for j in sched_jobs}) == len(sched_jobs)
    runs = markers_of(markers)
    for j in sched_jobs:
        assert j["state"] == "finished" and len(runs.get(j["job"], [])) == 1, (j, runs.get(j["job"]))
    assert any(run["due_ms"] / 1000 > x["back_at"] for run in fired), rs
    # The counts agree: every node's daemonstatus has nothing running or
    # pending, and the two listings agree with the store.
    for d in (a, b):
        st = d.api("daemonstatus.json")
        assert st["running"] == 0 and st["pending"] == 0, st
        lj = d.listjobs("testproj")
        assert not lj["running"] and not lj["pending"]
        done = {e["id"] for e in lj["finished"]}
        assert set(jobids) <= done
    # Events flow again: the jobs queued after the cut have their ends in
    # the feed, on both nodes.
    for d in (a, b):
        r = d.request("GET", API + "/events",
                      params={"limit": 1000, "type": "job.finished", "order": "desc"})
        assert r.status_code == 200, r.text
        ended = {e.get("data", {}).get("jobid") for e in r.json()["events"]}
        assert set(x["after"]) <= ended, (x["after"], ended)


def test_store_cut(spiderd, egg, tmp_path, proxy):
    x = run_cut(spiderd, egg, tmp_path, proxy, "reset", CUT_S)
    print(f"store cut {CUT_S} s: {x['probes']} probes, slowest round {x['worst']:.2f} s; "
          f"writable {x['writable_s']:.1f} s and ends of the cut written "
          f"{x['ends_s']:.1f} s after the store's return")
    check_caught_up(x)


@pytest.mark.skipif(os.environ.get("SPIDERD_TEST_BLACKHOLE") != "1",
                    reason="soak only (SPIDERD_TEST_BLACKHOLE=1)")
def test_store_blackhole(spiderd, egg, tmp_path, proxy):
    x = run_cut(spiderd, egg, tmp_path, proxy, "blackhole", CUT_S)
    print(f"store blackhole {CUT_S} s: {x['probes']} probes, slowest round {x['worst']:.2f} s; "
          f"store reads held {[round(s, 1) for _, s in x['held']]} s")
    check_caught_up(x)


def test_stopped_node_is_fenced(spiderd, egg, tmp_path):
    """n0 holds the scheduler lease and runs crawls; it is stopped (SIGSTOP:
    the daemon, not its crawls, as in a long pause of its process) past its
    lease and node_timeout. n1 takes the lease, declares n0 dead and retries
    its jobs; n0's crawls end meanwhile. Resumed, n0 learns it was declared
    dead and keeps out: the lost jobs stay lost (their late ends are not
    recorded), it does not fire, nor take the lease back, and every job and
    due time is recorded once."""
    (a, b), markers = two_nodes(spiderd, tmp_path, store_url(unique("stall")),
                                env={"FAKE_SECONDS": "3"})
    wait_for(lambda: "this node fires schedules now" in a.stderr_text(), timeout(10),
             "n0 holding the scheduler lease")
    sid = deploy_and_tick(b, a, egg, interval=1)
    jobids = [b.schedule("testproj", "quick", jobid=f"s{i}") for i in range(4)]
    wait_for(lambda: [j for j, rs in markers_of(markers).items() for n, _, _, end in rs
                      if n == "n0" and end is None and j in jobids],
             timeout(20), "a crawl of ours running on n0")
    stopped_at = time.time()
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: nodes(b)["n0"]["state"] == "dead", timeout(15), "n0 declared dead")
        wait_for(lambda: "this node fires schedules now" in b.stderr_text(), timeout(10),
                 "n1 taking the scheduler lease")
        lost = [j for j in all_jobs(b, project="testproj") if j["state"] == "lost"]
        assert lost and all(j["node"] == "n0" for j in lost), lost
        # More work while n0 is away: n1 runs it, two at a time.
        jobids += [b.schedule("testproj", "quick", jobid=f"p{i}") for i in range(4)]
        # n0's crawls end while it is stopped (their exits wait for it).
        wait_for(lambda: all(end is not None for rs in markers_of(markers).values()
                             for n, _, _, end in rs if n == "n0"),
                 timeout(15), "n0's crawls ended")
        # Past the lease and node_timeout, with a margin for the loaded machine.
        while time.time() < stopped_at + 2 * (FAST["node_timeout"] + FAST["scheduler_lease"]):
            time.sleep(0.1)
        logged = len(a.stderr_text())
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    resumed_at = time.time()
    wait_for(lambda: "declared dead by another" in a.stderr_text(), timeout(10),
             "n0 learning it was declared dead")
    wait_for(lambda: nodes(b)["n0"]["state"] == "alive", timeout(10), "n0 alive again")
    wait_for(lambda: all(j["state"] not in ("pending", "running")
                         for j in all_jobs(b, project="testproj")
                         if j["job"].split(".r")[0] in jobids), timeout(40),
             "every job ended", interval=0.3)
    after = a.stderr_text()[logged:]  # what n0 logged once resumed
    # Its late ends were kept out: the lost attempts are still lost, ended
    # when n1 declared them so, and each was retried once.
    for j in lost:
        now = b.request("GET", f"{API}/jobs/{j['id']}").json()
        assert now["state"] == "lost" and now["node"] == "n0", (j, now)
        assert (now["ended_ms"], now["exit_code"], now["stats"]) == \
            (j["ended_ms"], j["exit_code"], j["stats"]), (j, now)
        assert f"#{j['id']} ('{j['job']}') was ended as lost" in a.stderr_text(), j["job"]
    js = [j for j in all_jobs(b, project="testproj") if not j["schedule_id"]]
    by_logical = {}
    for j in js:
        by_logical.setdefault(j["job"].split(".r")[0], []).append(j)
    assert sorted(by_logical) == sorted(jobids)
    for jobid, attempts in by_logical.items():
        states = sorted(j["state"] for j in attempts)
        assert states.count("finished") == 1 and set(states) <= {"finished", "lost"}, attempts
    # It did not fire, nor took the lease back: n1 keeps it.
    assert "another node holds the scheduler lease" in after, after
    assert "this node fires schedules now" not in after, after
    r = b.request("POST", f"{API}/schedules/{sid}/pause", json={})
    assert r.status_code == 200, r.text
    wait_for(lambda: all(j["state"] not in ("pending", "running")
                         for j in all_jobs(b, schedule=sid)), timeout(20),
             "the schedule's jobs ended", interval=0.3)
    rs = b.request("GET", f"{API}/schedules/{sid}/runs", params={"limit": 1000}).json()["runs"]
    dues = [run["due_ms"] for run in rs if run["state"] != "upcoming"]
    assert len(dues) == len(set(dues)), rs
    fired = [run for run in rs if run["state"] == "fired"]
    sched_jobs = [j for j in all_jobs(b, schedule=sid) if j["attempt"] == 1]
    assert len(sched_jobs) == len(fired), (sched_jobs, fired)
    assert any(stopped_at < run["due_ms"] / 1000 < resumed_at for run in fired), rs
    # No crawl of n0's is left running, and no job ran twice on one node.
    runs = markers_of(markers)
    for job, rs_ in runs.items():
        for n, pid, _, end in rs_:
            assert end is not None or not os.path.exists(f"/proc/{pid}"), (job, rs_)
        assert len(rs_) <= len(by_logical.get(job.split(".r")[0], [None]) or [None]) + 1, (job, rs_)
