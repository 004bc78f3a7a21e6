"""spiderd scheduler benchmark: firing precision at 10,000 active schedules.

The issue asks for "firing precision (p50/p99 of start minus due time) with
10,000 active schedules, and the scheduler's CPU and memory at that size";
the design's target is that a due run is queued within 1 s of its time.

Each load runs against a fresh real daemon (build/spiderd in a temporary
directory, the test egg tests/integration/projects/testproj deployed as
bench.py does):

  1. idle: the daemon's CPU and RSS with the egg deployed and 0 schedules;
  2. create N schedules over /api/v1/schedules on one keep-alive connection
     (timed, as a rate), wait until the scheduler has materialised every one;
  3. a window of --seconds: CPU (utime+stime of the daemon, from
     /proc/PID/stat, per thread too) and memory (VmRSS/VmHWM) of the daemon;
  4. then, from the daemon's SQLite file (read-only URI), every run due in
     the window: queued - due, start - due, fired vs due (against due times
     computed here, independently of the daemon), duplicates, one job per run.

Firing is measured, not crawling: Scrapy costs ~1 CPU-second per crawl, and
10,000 schedules firing every minute are ~167 crawls a second, which no
2-core machine can run. So the daemon's `python` is a shim: it runs
/usr/bin/python3 for everything (deploying, listing spiders) except
`-m spiderd_runner crawl`, which exits 0 at once. Every fired job is then
really claimed and spawned by the daemon's launcher (so "start" is the real
start stamp, taken right before the spawn), but the crawl costs ~1 ms.
A third, shorter pass at the full size (--scheduler-only-seconds) starts
nothing at all (max_proc=1, the one slot held by a real `slow` crawl queued
before the schedules), so its CPU figure is the scheduler's cost alone,
without the launcher spawning ~167 processes a second.

Schedules: 85% `S * * * * *` in UTC (S = i mod 60, so N/60 are due at every
second), 10% the same expression in zones with odd offsets (+5:30, +5:45,
-3:30, +10:30, DST zones), 5% intervals (30, 60, 90, 120 s, anchored at
their creation). Overlap `allow`: every due run queues a job, so every run
exercises the scheduler's full fire path (job insert, run end, event) and
has a queue time; `skip` would turn most runs into a skipped-row write
behind a per-schedule query of active jobs, measuring the policy instead.

usage: bench/sched_bench.py --bin build/spiderd [--schedules 10000]
       [--seconds 180] [--small 100] [--small-seconds 75]
       [--scheduler-only-seconds 60] [--max-proc 200] [--keep]
Defaults take about 7 minutes.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from eggs import build_egg  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
ZONES = ["Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns", "Australia/Adelaide",
         "Europe/Berlin", "America/New_York", "Pacific/Chatham", "America/Los_Angeles"]
INTERVALS = [30, 60, 90, 120]

# The crawl shim (see the module docstring). $3 is the runner's sub-command.
SHIM = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "spiderd_runner" ] && [ "$3" = "crawl" ] && [ "$4" != "slow" ]; then
  exit 0
fi
exec /usr/bin/python3 "$@"
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def now_ms():
    return int(time.time() * 1000)


def pids_with_cwd(directory):
    real = os.path.realpath(directory)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{entry}/cwd") == real:
                pids.append(int(entry))
        except OSError:
            pass
    return pids


class Daemon:
    def __init__(self, binary, max_proc):
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix="spiderd-schedbench-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        shim = os.path.join(self.dir, "python-shim")
        with open(shim, "w") as f:
            f.write(SHIM)
        os.chmod(shim, 0o755)
        conf = os.path.join(self.dir, "scrapyd.conf")
        with open(conf, "w") as f:
            # finished_to_keep = 0: no trimming, so every fired run's job
            # stays in the jobs table for the analysis.
            f.write(f"[scrapyd]\nbind_address = 127.0.0.1\nhttp_port = {self.port}\n"
                    f"max_proc = {max_proc}\nfinished_to_keep = 0\n"
                    f"[spiderd]\npython = {shim}\nlog_level = info\n")
        env = dict(os.environ, SPIDERD_CONFIG_FILES=conf)
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([binary, "serve"], cwd=self.dir, env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.http = requests.Session()  # keep-alive
        for _ in range(200):
            try:
                self.http.get(self.url + "/daemonstatus.json", timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.05)
        else:
            raise RuntimeError("daemon did not start")
        self.db_path = os.path.join(self.dir, "dbs", "spiderd.db")

    def deploy(self):
        egg = build_egg("testproj", self.dir)
        with open(egg, "rb") as f:
            r = self.http.post(self.url + "/addversion.json",
                               data={"project": "testproj", "version": "1"},
                               files={"egg": ("x.egg", f.read())}, timeout=60)
        res = r.json()
        assert res["status"] == "ok", res

    def query(self, *statements):
        """Runs each (sql, params) on a fresh read-only connection and closes
        it: an open reader would hold the daemon's WAL from being reset."""
        db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=10)
        try:
            return [db.execute(sql, params).fetchall() for sql, params in statements]
        finally:
            db.close()

    def cpu_s(self):
        """utime+stime of the whole daemon (all threads), seconds."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / TICK

    def threads_cpu_s(self):
        out = {}
        for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
            try:
                with open(f"/proc/{self.proc.pid}/task/{tid}/stat") as f:
                    s = f.read()
            except OSError:
                continue
            name = s[s.index("(") + 1:s.rindex(")")]
            v = s.rsplit(")", 1)[1].split()
            out[f"{name}/{tid}"] = (int(v[11]) + int(v[12])) / TICK
        return out

    def mem_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            s = f.read()
        return (int(re.search(r"VmRSS:\s+(\d+)", s).group(1)),
                int(re.search(r"VmHWM:\s+(\d+)", s).group(1)))

    def db_bytes(self):
        """(database, WAL) file sizes."""
        return tuple(os.path.getsize(self.db_path + ext) if os.path.exists(self.db_path + ext)
                     else 0 for ext in ("", "-wal"))

    def alive(self):
        return self.proc.poll() is None

    def log_lines(self, pattern):
        with open(self.log_path, errors="replace") as f:
            return [line.rstrip() for line in f if re.search(pattern, line)]

    def stop(self, remove=True):
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # Crawls run in their own process groups, in the daemon's directory.
        for pid in pids_with_cwd(self.dir):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.log.close()
        if remove:
            self.cleanup()

    def cleanup(self, keep=False):
        if keep:
            print(f"  (kept {self.dir})")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def schedule_specs(n, spider="quick"):
    """The mix described in the module docstring, deterministic in n."""
    specs = []
    n_iv = n * 5 // 100
    n_tz = n * 10 // 100
    for i in range(n):
        s = {"name": f"b{i:05d}", "project": "testproj", "spider": spider, "overlap": "allow"}
        if i < n_iv:
            s["interval"] = INTERVALS[i % len(INTERVALS)]
        else:
            s["cron"] = f"{i % 60} * * * * *"
            if i < n_iv + n_tz:
                s["tz"] = ZONES[i % len(ZONES)]
        specs.append(s)
    return specs


def expected_dues(schedules, w0, w1):
    """(schedule_id, due_ms) due in [w0, w1), computed here: `S * * * * *`
    fires at second S of every minute in every zone (all offsets are whole
    minutes); an interval fires at created_ms + k * interval, k >= 1."""
    out = set()
    for sid, expr, interval_ms, created_ms in schedules:
        if interval_ms:
            k = max(1, -(-(w0 - created_ms) // interval_ms))
            t = created_ms + k * interval_ms
            while t < w1:
                out.add((sid, t))
                t += interval_ms
        else:
            sec = int(expr.split()[0])
            t = (w0 // 60000) * 60000 + sec * 1000
            if t < w0:
                t += 60000
            while t < w1:
                out.add((sid, t))
                t += 60000
    return out


def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, max(0, int(round(p / 100 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[i]


def dist(vals):
    v = sorted(vals)
    return {"n": len(v), "p50": pct(v, 50), "p99": pct(v, 99), "max": v[-1] if v else float("nan"),
            "min": v[0] if v else float("nan")}


def fmt_dist(d):
    return (f"p50 {d['p50']:.0f} ms, p99 {d['p99']:.0f} ms, max {d['max']:.0f} ms "
            f"(min {d['min']:.0f}, n={d['n']:,})")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def create_schedules(d, specs):
    t0 = time.time()
    for s in specs:
        r = d.http.post(d.url + "/api/v1/schedules", json=s, timeout=60)
        if r.status_code != 201:
            raise RuntimeError(f"create {s['name']}: {r.status_code} {r.text[:300]}")
    return time.time() - t0


def wait_materialised(d, n, limit=120):
    t0 = time.time()
    while time.time() - t0 < limit:
        (left,), (total,) = (r[0] for r in d.query(
            ("SELECT count(*) FROM schedules WHERE horizon_ms = 0", ()),
            ("SELECT count(*) FROM schedules", ())))
        if total == n and left == 0:
            return time.time() - t0
        time.sleep(0.2)
    raise RuntimeError(f"{left} of {total} schedules still without runs after {limit} s")


def analyse(db_path, w0, w1):
    """Every figure about the runs due in [w0, w1), read from the stopped
    daemon's database (read-only): nothing competes with the daemon, and no
    long read transaction holds its WAL from being checkpointed."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    try:
        q = lambda sql, *p: db.execute(sql, p).fetchall()  # noqa: E731
        schedules = q("SELECT id, expr, interval_ms, created_ms FROM schedules")
        runs = q("SELECT id, schedule_id, due_ms, fire_ms, state, job_id, done_ms "
                 "FROM runs WHERE due_ms >= ? AND due_ms < ?", w0, w1)
        jobs = {row[0]: row[1:] for row in q(
            "SELECT j.id, j.created_ms, j.start_ms, j.schedule_id FROM jobs j "
            "JOIN runs r ON r.job_id = j.id WHERE r.due_ms >= ? AND r.due_ms < ?", w0, w1)}
        queued_ev = dict(q(
            "SELECT job_id, ts_ms FROM events WHERE type = 'job.queued' AND job_id IN "
            "(SELECT job_id FROM runs WHERE due_ms >= ? AND due_ms < ? AND job_id != 0)", w0, w1))
        dup_keys = q("SELECT count(*) FROM (SELECT 1 FROM runs GROUP BY schedule_id, due_ms "
                     "HAVING count(*) > 1)")[0][0]
        # Over the whole run, not only the window: every job a schedule
        # queued must be the job of exactly one fired run.
        run_jobs = [r[0] for r in q("SELECT job_id FROM runs WHERE job_id != 0")]
        sched_jobs = {r[0] for r in q("SELECT id FROM jobs WHERE schedule_id != 0")}
        queued_events = q("SELECT count(*) FROM events WHERE type = 'job.queued' "
                          "AND schedule_id != 0")[0][0]
        job_states = dict(q("SELECT state, count(*) FROM jobs GROUP BY state"))
        ticks = q("SELECT j.created_ms, count(*), max(e.ts_ms) FROM jobs j JOIN events e "
                  "ON e.job_id = j.id AND e.type = 'job.queued' WHERE j.created_ms >= ? "
                  "AND j.created_ms < ? AND j.schedule_id != 0 GROUP BY j.created_ms", w0, w1)
    finally:
        db.close()
    expected = expected_dues(schedules, w0, w1)
    have = {(r[1], r[2]) for r in runs}
    states = {}
    for r in runs:
        states[r[4]] = states.get(r[4], 0) + 1
    fired = [r for r in runs if r[4] == 1]
    queue = [jobs[r[5]][0] - r[2] for r in fired if r[5] in jobs]
    event = [queued_ev[r[5]] - r[2] for r in fired if r[5] in queued_ev]
    start = [jobs[r[5]][1] - r[2] for r in fired if r[5] in jobs and jobs[r[5]][1] > 0]
    return {
        "expected": len(expected), "rows": len(runs), "missing": len(expected - have),
        "unexpected": len(have - expected), "fired": len(fired),
        "upcoming": states.get(0, 0), "missed": states.get(2, 0), "skipped": states.get(3, 0),
        "fired_without_job": sum(1 for r in fired if r[5] not in jobs),
        "dup_keys": dup_keys, "dup_jobs": len(run_jobs) - len(set(run_jobs)),
        "orphans": len(sched_jobs - set(run_jobs)), "sched_jobs": len(sched_jobs),
        "queued_events": queued_events,
        "queue": dist(queue), "event": dist(event), "start": dist(start),
        "over_1s": sum(1 for x in queue if x > 1000), "started": len(start),
        "job_states": job_states,
        "tick_runs": dist([t[1] for t in ticks]),
        "tick_ms": dist([t[2] - t[0] for t in ticks]),
    }


JOB_STATES = ["pending", "running", "finished", "failed", "cancelled", "lost"]


def run_load(binary, n, seconds, no_start, max_proc, label, keep=False, idle_seconds=10):
    mode = ("nothing started: the scheduler alone" if no_start
            else f"every job started (crawl shim, max_proc={max_proc})")
    print(f"## {label}: {n:,} schedules, {seconds} s window, {mode}")
    d = Daemon(binary, max_proc=1 if no_start else max_proc)
    stopped = False
    try:
        d.deploy()
        if no_start:
            # Holds the only slot with a real crawl for longer than the run:
            # nothing else ever starts.
            r = d.http.post(d.url + "/schedule.json", data={
                "project": "testproj", "spider": "slow", "seconds": "3600", "priority": "1000"})
            assert r.json()["status"] == "ok", r.text
        time.sleep(2)
        c0, t0 = d.cpu_s(), time.time()
        time.sleep(idle_seconds)
        idle_cpu = (d.cpu_s() - c0) / (time.time() - t0) * 100
        rss_idle, hwm_idle = d.mem_kb()
        print(f"{label} idle daemon, 0 schedules: CPU {idle_cpu:.2f}% of one core over "
              f"{idle_seconds} s, VmRSS {rss_idle / 1024:.1f} MB, VmHWM {hwm_idle / 1024:.1f} MB "
              f"(load {loadavg()})")

        specs = schedule_specs(n)
        load0 = loadavg()
        elapsed = create_schedules(d, specs)
        print(f"{label} create: {n:,} schedules in {elapsed:.2f} s = {n / elapsed:,.0f}/s "
              f"(POST /api/v1/schedules, one keep-alive connection; load {load0})")
        mat = wait_materialised(d, n)
        nruns = d.query(("SELECT count(*) FROM runs WHERE state = 0", ()))[0][0][0]
        print(f"{label} materialised: all {n:,} schedules {mat:.1f} s after the last create, "
              f"{nruns:,} upcoming runs stored")

        # The window starts on the next whole second after a short settle.
        time.sleep(2)
        w0 = (now_ms() // 1000 + 1) * 1000
        time.sleep(max(0, w0 / 1000 - time.time()))
        c0, th0, t0 = d.cpu_s(), d.threads_cpu_s(), time.time()
        load0 = loadavg()
        time.sleep(seconds)
        c1, th1, t1 = d.cpu_s(), d.threads_cpu_s(), time.time()
        w1 = w0 + int((t1 - t0) * 1000) // 1000 * 1000
        rss, hwm = d.mem_kb()
        load1 = loadavg()
        size = d.db_bytes()
        if not d.alive():
            raise RuntimeError(f"daemon died, rc={d.proc.returncode}; log {d.log_path}")
        # Runs due at the window's end fire within ~1 s; give them (and
        # their starts) a few seconds, then stop the daemon and read.
        time.sleep(5)
        d.stop(remove=False)
        stopped = True
        a = analyse(d.db_path, w0, w1)
        cpu = (c1 - c0) / (t1 - t0) * 100
        threads = sorted(((th1.get(k, 0) - th0.get(k, 0), k) for k in th1), reverse=True)
        # The main thread runs the libuv loop; the others are the store's.
        per_thread = ", ".join(
            f"{'main' if k.split('/')[1] == str(d.proc.pid) else 'other'} "
            f"{v / (t1 - t0) * 100:.1f}%" for v, k in threads if v > 0)

        print(f"{label} runs due in window: {a['expected']:,} computed here, {a['rows']:,} stored; "
              f"fired {a['fired']:,}, still upcoming {a['upcoming']}, missed {a['missed']}, "
              f"skipped {a['skipped']}; computed but not stored {a['missing']}, "
              f"stored but not computed {a['unexpected']}")
        print(f"{label} duplicates: {a['dup_keys']} (schedule, due) pairs stored twice, "
              f"{a['dup_jobs']} jobs shared by two runs, {a['orphans']} of {a['sched_jobs']:,} "
              f"schedule jobs without a run, {a['fired_without_job']} fired runs without a job; "
              f"{a['queued_events']:,} job.queued events")
        print(f"{label} queued - due (job created_ms = the tick's clock): {fmt_dist(a['queue'])}; "
              f"{a['over_1s']} over 1 s")
        print(f"{label} queued - due (job.queued event ts_ms, stamped at its insert): "
              f"{fmt_dist(a['event'])}")
        if no_start:
            print(f"{label} start - due: not measured (nothing is started in this pass)")
        else:
            print(f"{label} start - due (jobs.start_ms, right before the spawn): "
                  f"{fmt_dist(a['start'])}")
        print(f"{label} ticks that fired in the window: {a['tick_runs']['n']:,}, runs per tick "
              f"p50 {a['tick_runs']['p50']:.0f} max {a['tick_runs']['max']:.0f}; tick start -> "
              f"its last job.queued insert p50 {a['tick_ms']['p50']:.0f} ms, "
              f"p99 {a['tick_ms']['p99']:.0f} ms, max {a['tick_ms']['max']:.0f} ms")
        print(f"{label} daemon CPU: {cpu:.1f}% of one core over {t1 - t0:.0f} s (threads: "
              f"{per_thread}); VmRSS {rss / 1024:.1f} MB, VmHWM {hwm / 1024:.1f} MB "
              f"(idle {rss_idle / 1024:.1f} MB); load {load0} -> {load1}")
        states = ", ".join(f"{JOB_STATES[k]} {v:,}" for k, v in sorted(a["job_states"].items()))
        print(f"{label} SQLite at the window's end: {size[0] / 1e6:.1f} MB database + "
              f"{size[1] / 1e6:.1f} MB WAL; jobs after the stop: {states}")
        errs = d.log_lines(r"\b(error|ERROR|warn|WARN)")
        if errs:
            print(f"{label} daemon log: {len(errs)} warning/error lines, first: {errs[0]}")
        return a
    finally:
        if not stopped:
            d.stop(remove=False)
        d.cleanup(keep)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--schedules", type=int, default=10000)
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--small", type=int, default=100, help="baseline size (0 = skip)")
    ap.add_argument("--small-seconds", type=int, default=75)
    ap.add_argument("--scheduler-only-seconds", type=int, default=60,
                    help="window of the pass at full size that starts nothing (0 = skip)")
    ap.add_argument("--max-proc", type=int, default=200,
                    help="launcher slots; enough that a second's burst starts at once")
    ap.add_argument("--keep", action="store_true", help="keep the daemons' directories")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    print(f"# spiderd scheduler benchmark, {os.cpu_count()} cpus, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load {loadavg()}")
    if a.small:
        run_load(binary, a.small, a.small_seconds, False, a.max_proc, f"[{a.small}]",
                 a.keep, 5)
    if a.seconds:
        run_load(binary, a.schedules, a.seconds, False, a.max_proc, f"[{a.schedules}]", a.keep)
    if a.scheduler_only_seconds:
        run_load(binary, a.schedules, a.scheduler_only_seconds, True, a.max_proc,
                 f"[{a.schedules}, scheduler only]", a.keep, 5)


if __name__ == "__main__":
    main()
