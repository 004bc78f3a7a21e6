#!/usr/bin/python3
"""Real spiderd daemons on one durable PostgreSQL schema: schedule-to-claim
latency across nodes, then failure timing (kill -9).

usage: bench/cluster_bench.py --bin build/spiderd --url 'postgresql://...?schema=NAME'
                              [--jobs 250] [--interval 0.05] [--psql PATH]

1. Node A (max_proc 1) starts, the testproj egg is deployed on it
   (addversion.json), and one long crawl (FAKE_SECONDS=3600 on A) fills its
   only slot. Then node B starts (max_proc 10, FAKE_SECONDS=0: a crawl is a
   Python start-up and an exit). --jobs jobs are scheduled on A
   (schedule.json, one keep-alive connection, one every --interval s so B
   always has a free slot: the figure is dispatch, not queueing), A cannot
   take them, B claims them, woken by LISTEN/NOTIFY. Latency = started_ms
   (B's claim stamp, store start_ms) - created_ms (A's insert stamp), both
   from GET /api/v1/jobs; the two daemons share this machine's clock.
2. kill -9 of A, which runs the long job and, started first, holds the
   scheduler lease: (a) kill -> the lost job's retry started on B
   (started_ms of the job whose retry_of is the lost one; job_retries = 1,
   since with the default 0 a lost job is not run again; retry_backoff at
   its default, 10 s); the reap (the lost attempt's end_ms) is reported
   apart; (b) kill -> the leases table naming B as holder of "scheduler"
   (psql polled every 0.1 s), and B's log line "this node fires schedules
   now".

The daemons run with node_heartbeat, node_timeout and scheduler_lease at
their defaults (3 s, 15 s, 10 s). The crawl interpreter is
tests/integration/fakecrawl.py. Prints `result ...` lines for pg_bench.sh.
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from eggs import build_egg  # noqa: E402

FAKE = os.path.join(ROOT, "tests", "integration", "fakecrawl.py")


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Node:
    def __init__(self, root, name, binary, url, max_proc, fake_seconds, markers):
        self.name = name
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        conf = os.path.join(self.dir, "scrapyd.conf")
        with open(conf, "w") as f:
            f.write(f"""[scrapyd]
bind_address = 127.0.0.1
http_port = {self.port}
node_name = {name}
max_proc = {max_proc}
eggs_dir = eggs
logs_dir = logs
dbs_dir = dbs
finished_to_keep = 0
[spiderd]
store = {url}
python = {FAKE}
job_retries = 1
log_level = info
""")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SCRAPYD_", "SPIDERD_", "SCRAPY_"))}
        env.update(SPIDERD_CONFIG_FILES=conf, MARKER_DIR=markers, NODE_TAG=name,
                   FAKE_SECONDS=str(fake_seconds))
        self.log = os.path.join(self.dir, "daemon.log")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([binary, "serve"], cwd=self.dir, env=env,
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.s = requests.Session()
        self.s.trust_env = False
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.s.get(self.url + "/daemonstatus.json", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"node {name} did not start:\n" + open(self.log).read()[-3000:])
            time.sleep(0.05)

    def schedule(self, spider="quick", **args):
        r = self.s.post(self.url + "/schedule.json",
                        data=dict(project="testproj", spider=spider, **args), timeout=30)
        body = r.json()
        assert body["status"] == "ok", body
        return body["jobid"]

    def jobs(self):
        out, cursor = [], None
        while True:
            p = {"limit": 1000, "project": "testproj"}
            if cursor:
                p["cursor"] = cursor
            body = self.s.get(self.url + "/api/v1/jobs", params=p, timeout=30).json()
            out += body["jobs"]
            cursor = body.get("next_cursor")
            if not cursor:
                return out

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # crawls left by a killed node (fakecrawl dies with its node; in case)
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/cwd").startswith(self.dir):
                        os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass


def wait_for(pred, seconds, what, interval=0.05):
    deadline = time.monotonic() + seconds
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(interval)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--jobs", type=int, default=250)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--psql", default=None)
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    pg_url, _, query = a.url.partition("?")
    schema = dict(kv.split("=", 1) for kv in query.split("&") if kv).get("schema", "public")
    psql = a.psql or sorted(
        d for d in (os.path.join("/usr/lib/postgresql", v, "bin/psql")
                    for v in os.listdir("/usr/lib/postgresql")) if os.path.exists(d))[-1]

    def lease_holder():
        r = subprocess.run([psql, pg_url, "-Atc",
                            f"SELECT holder, token, expires_ms FROM \"{schema}\".leases "
                            "WHERE name = 'scheduler'"], capture_output=True, text=True)
        return r.stdout.strip()

    root = tempfile.mkdtemp(prefix="spiderd-cbench-")
    markers = os.path.join(root, "markers")
    os.makedirs(markers)
    nodes = []
    try:
        egg = build_egg("testproj", root)
        A = Node(root, "A", a.bin, a.url, 1, 3600, markers)
        nodes.append(A)
        with open(egg, "rb") as f:
            r = A.s.post(A.url + "/addversion.json", data={"project": "testproj", "version": "1"},
                         files={"egg": ("testproj.egg", f.read())}, timeout=120)
        assert r.json()["status"] == "ok", r.text
        long_job = A.schedule()
        wait_for(lambda: any(j["job"] == long_job and j["state"] == "running" and j["node"] == "A"
                             for j in A.jobs()), 30, "the long job running on A")
        wait_for(lambda: lease_holder().startswith("A|"), 30, "A holding the scheduler lease")
        B = Node(root, "B", a.bin, a.url, 10, 0, markers)
        nodes.append(B)
        wait_for(lambda: "testproj" in B.s.get(B.url + "/listprojects.json").json()["projects"],
                 30, "the egg on B")
        # a warm-up job through B (its first spawn, its egg copy)
        warm = A.schedule()
        wait_for(lambda: any(j["job"] == warm and j["state"] == "finished" for j in A.jobs()),
                 60, "the warm-up job")

        # 1. schedule on A, claimed by B
        ids = []
        t0 = time.time()
        for _ in range(a.jobs):
            ids.append(A.schedule())
            time.sleep(a.interval)
        want = set(ids)

        def all_started():
            js = [j for j in A.jobs() if j["job"] in want]
            return js if len(js) == len(want) and all(j["started_ms"] for j in js) else None
        js = wait_for(all_started, 120, "every job started", interval=0.5)
        lat = [j["started_ms"] - j["created_ms"] for j in js]
        on = {}
        for j in js:
            on[j["node"]] = on.get(j["node"], 0) + 1
        print(f"result latency jobs={len(lat)} scheduled_in={time.time() - t0:.1f}s "
              f"p50={pct(lat, 50)}ms p90={pct(lat, 90)}ms p99={pct(lat, 99)}ms "
              f"max={max(lat)}ms mean={statistics.mean(lat):.1f}ms nodes={on}", flush=True)
        wait_for(lambda: all(j["state"] == "finished" for j in A.jobs()
                             if j["job"] in want), 120, "every job finished", interval=0.5)

        # 2. kill -9 A: it runs the long job and holds the scheduler lease
        lost_id = next(j["id"] for j in A.jobs() if j["job"] == long_job)
        assert lease_holder().startswith("A|"), lease_holder()
        killed = time.time()
        A.kill9()
        lease_at = None
        retry = None
        deadline = time.monotonic() + 120
        while (lease_at is None or retry is None) and time.monotonic() < deadline:
            if lease_at is None and lease_holder().startswith("B|"):
                lease_at = time.time()
            if retry is None:
                js = B.jobs()
                r = [j for j in js if j.get("retry_of") == lost_id and j["started_ms"]]
                if r:
                    lost = next(j for j in js if j["id"] == lost_id)
                    retry = (r[0], lost)
            time.sleep(0.1)
        if retry:
            rj, lost = retry
            print(f"result failover_jobs kill_to_retry_started={rj['started_ms'] / 1000 - killed:.1f}s "
                  f"kill_to_reaped={lost['ended_ms'] / 1000 - killed:.1f}s "
                  f"retry_created={rj['created_ms'] / 1000 - killed:.1f}s lost_state={lost['state']} retry_node={rj['node']}", flush=True)
        else:
            print("result failover_jobs kill_to_retry_started=none (120 s)", flush=True)
        log_line = None
        for line in open(B.log, errors="replace"):
            if "this node fires schedules now" in line:
                log_line = line.strip()
        if lease_at:
            print(f"result failover_lease kill_to_lease_on_B={lease_at - killed:.1f}s "
                  f"(psql polled every 0.1 s) B log: {log_line}", flush=True)
        else:
            print("result failover_lease kill_to_lease_on_B=none (120 s)", flush=True)
        print(f"kill -9 at {time.strftime('%H:%M:%S', time.localtime(killed))}."
              f"{int(killed * 1000) % 1000:03d}", flush=True)
    finally:
        for n in nodes:
            n.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
