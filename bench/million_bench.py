"""spiderd at one million pending jobs, on its SQLite store.

A fresh daemon in a temporary directory (the test egg
tests/integration/projects/testproj deployed as bench.py does), max_proc = 1
with its one slot held by a crawl that sleeps, so that nothing else starts
while the queue fills:

  1. at 0, 100,000 and 1,000,000 pending jobs: schedule.json on one
     keep-alive connection, one request at a time (rate, p50, p99 of
     --probe requests); listjobs.json (Scrapyd's, which has no paging and
     lists every job); the native paged listing GET /api/v1/jobs
     ?state=pending&limit=100 (first page, and pages followed by cursor);
     the daemon's RSS (VmRSS, VmHWM) and the database's size;
  2. the fill between them: schedule.json over --conns keep-alive
     connections, each a process sending pipelined batches of --batch
     requests (every answer is read and checked);
  3. claims: the daemon is stopped (pending jobs stay queued), restarted with
     max_proc = --claim-slots, and the rate at which it starts jobs is
     measured for --claim-seconds; the crawl is a stand-in that exits at
     once (the daemon's `python` is a shim that runs /usr/bin/python3 for
     everything but a crawl), so the figure is the claim and spawn path.
     The same on a daemon with --small pending jobs, to compare.

The peak memory of each listjobs.json is the daemon's VmHWM after it, its
high-water mark having been reset (/proc/PID/clear_refs) right before it,
next to VmRSS right before it.

usage: bench/million_bench.py --bin build/spiderd [--jobs 1000000]
       [--conns 4] [--batch 64] [--probe 2000] [--claim-slots 16]
       [--claim-seconds 20] [--small 20000] [--keep]
       [--data DIR] [--skip-claims]
About 5 minutes on 2 cores; the temporary directory needs ~1 GB.
--data DIR keeps the million-job daemon's directory in DIR and, when DIR
already holds its jobs, reuses them: no fill, only the probes at the levels
it has reached (the last one always). Any crawl then sleeps (the daemon
restarts with its queue as it was left, and its one slot must be held
again); --skip-claims leaves out both claims phases, which start jobs.
"""
import argparse
import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from eggs import build_egg  # noqa: E402

# A crawl of `slow` sleeps (it holds the only slot while the queue fills);
# any other crawl exits 0 at once; everything else is Python.
SHIM = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "spiderd_runner" ] && [ "$3" = "crawl" ]; then
  [ "$4" = "slow" ] && exec sleep 3600
  exit 0
fi
exec /usr/bin/python3 "$@"
"""

# The same when a filled directory is reused: whichever job the restarted
# daemon claims first holds the slot.
SHIM_HOLD = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "spiderd_runner" ] && [ "$3" = "crawl" ]; then
  exec sleep 3600
fi
exec /usr/bin/python3 "$@"
"""

SCHEDULE_BODY = b"project=testproj&spider=quick"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pids_with_cwd(directory):
    real = os.path.realpath(directory)
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if os.readlink(f"/proc/{entry}/cwd") == real:
                    out.append(int(entry))
            except OSError:
                pass
    return out


class Conn:
    """A raw keep-alive HTTP/1.1 client: requests may be pipelined."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def fill(self, buf, need):
        while len(buf) < need:
            chunk = self.sock.recv(max(1 << 20, need - len(buf)))
            if not chunk:
                raise RuntimeError("the daemon closed the connection")
            buf += chunk

    def response(self):
        """(status, body) of the next response, with a Content-Length or
        chunked; linear in its size (a listjobs.json of a million jobs is
        ~230 MB)."""
        buf = bytearray(self.buf)
        end = buf.find(b"\r\n\r\n")
        while end < 0:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the daemon closed the connection")
            start = max(0, len(buf) - 3)
            buf += chunk
            end = buf.find(b"\r\n\r\n", start)
        head = bytes(buf[:end])
        status = int(head.split(b" ", 2)[1])
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        if m:
            need = end + 4 + int(m.group(1))
            self.fill(buf, need)
            body = bytes(buf[end + 4:need])
            self.buf = bytes(buf[need:])
            return status, body
        if not re.search(rb"(?i)\r\ntransfer-encoding:\s*chunked", head):
            raise RuntimeError(f"no length in {head!r}")
        # Chunked: everything up to the last chunk is read as it comes and
        # parsed once (a JSON listing holds no raw CR LF, so its end is the
        # first "\r\n0\r\n\r\n" that ends what was read), with one copy
        # for the chunks and one for the body.
        raw = [bytes(buf[end + 4:])]
        tail = b"\r\n" + raw[0][-8:]
        while not tail.endswith(b"\r\n0\r\n\r\n"):
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the daemon closed the connection")
            raw.append(chunk)
            tail = (tail + chunk)[-9:]
        data = b"".join(raw)
        mv = memoryview(data)
        parts, pos = [], 0
        while True:
            eol = data.find(b"\r\n", pos)
            size = int(data[pos:eol].split(b";")[0], 16)
            if size == 0:  # no trailers are sent
                pos = eol + 4
                break
            parts.append(mv[eol + 2:eol + 2 + size])
            pos = eol + 2 + size + 2
        self.buf = data[pos:]
        return status, b"".join(parts)


def get_request(path):
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def post_request(path, body):
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


SCHEDULE = post_request("/schedule.json", SCHEDULE_BODY)


def fill_worker(port, count, batch):
    c = Conn(port)
    done = 0
    while done < count:
        k = min(batch, count - done)
        c.send(SCHEDULE * k)
        for _ in range(k):
            status, body = c.response()
            if status != 200 or b'"ok"' not in body:
                raise RuntimeError(f"schedule.json: {status} {body[:200]!r}")
        done += k
    c.close()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class Daemon:
    def __init__(self, binary, directory, max_proc, hold=False):
        self.binary = binary
        self.dir = directory
        self.port = free_port()
        shim = os.path.join(self.dir, "python-shim")
        with open(shim, "w") as f:
            f.write(SHIM_HOLD if hold else SHIM)
        os.chmod(shim, 0o755)
        self.conf = os.path.join(self.dir, "scrapyd.conf")
        self.db_path = os.path.join(self.dir, "dbs", "spiderd.db")
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.write_conf(max_proc)
        self.proc = None

    def write_conf(self, max_proc):
        # finished_to_keep = 0 keeps every ended job (no trimming during the
        # claims); warm_templates = 0: the shim is the whole crawl.
        with open(self.conf, "w") as f:
            f.write(f"[scrapyd]\nbind_address = 127.0.0.1\nhttp_port = {self.port}\n"
                    f"max_proc = {max_proc}\nfinished_to_keep = 0\n"
                    f"[spiderd]\npython = {os.path.join(self.dir, 'python-shim')}\n"
                    f"warm_templates = 0\ndrain_grace = 0\nshutdown_grace = 2\nlog_level = info\n")

    def start(self):
        env = dict(os.environ, SPIDERD_CONFIG_FILES=self.conf)
        t0 = time.monotonic()
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen([self.binary, "serve"], cwd=self.dir, env=env,
                                         stdout=log, stderr=subprocess.STDOUT)
        while True:
            try:
                status, _ = self.get("/daemonstatus.json")
                if status == 200:
                    return time.monotonic() - t0
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("the daemon exited during start-up")
            time.sleep(0.02)

    def get(self, path, timeout=600):
        c = Conn(self.port)
        c.sock.settimeout(timeout)
        try:
            c.send(get_request(path))
            return c.response()
        finally:
            c.close()

    def deploy(self):
        egg = build_egg("testproj", self.dir)
        with open(egg, "rb") as f:
            data = f.read()
        boundary = "----spiderdbench"
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"project\"\r\n\r\n"
                f"testproj\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"version\""
                f"\r\n\r\n1\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"egg\"; "
                f"filename=\"x.egg\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
        body += data + f"\r\n--{boundary}--\r\n".encode()
        req = (f"POST /addversion.json HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        c = Conn(self.port)
        c.send(req)
        status, out = c.response()
        c.close()
        assert status == 200 and b'"ok"' in out, out

    def schedule(self, spider):
        c = Conn(self.port)
        c.send(post_request("/schedule.json", f"project=testproj&spider={spider}".encode()))
        status, body = c.response()
        c.close()
        assert status == 200 and b'"ok"' in body, body

    def reset_peak(self):
        """Resets VmHWM to the current RSS (proc(5), clear_refs 5)."""
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
            f.write("5")

    def cpu_s(self):
        """The daemon's CPU time so far (user + system), in seconds."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def mem_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            s = f.read()
        return tuple(int(re.search(rf"{k}:\s+(\d+)", s).group(1)) / 1024 for k in ("VmRSS", "VmHWM"))

    def db_mb(self):
        return sum(os.path.getsize(self.db_path + ext) for ext in ("", "-wal")
                   if os.path.exists(self.db_path + ext)) / (1 << 20)

    def count(self, sql, *params):
        db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=30)
        try:
            return db.execute(sql, params).fetchone()[0]
        finally:
            db.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in pids_with_cwd(self.dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def fill(d, count, conns, batch):
    t0 = time.monotonic()
    per = [count // conns + (1 if i < count % conns else 0) for i in range(conns)]
    ps = [multiprocessing.Process(target=fill_worker, args=(d.port, n, batch)) for n in per]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError("a fill worker failed")
    dt = time.monotonic() - t0
    return count / dt, dt


def probe(d, pending, args):
    out = {"pending": pending}
    # schedule.json, one request at a time on one keep-alive connection.
    c = Conn(d.port)
    lat = []
    t0 = time.monotonic()
    for _ in range(args.probe):
        t = time.perf_counter()
        c.send(SCHEDULE)
        status, body = c.response()
        lat.append((time.perf_counter() - t) * 1000)
        assert status == 200 and b'"ok"' in body, body
    out["schedule_rate"] = args.probe / (time.monotonic() - t0)
    out["schedule_mean"] = statistics.mean(lat)
    out["schedule_p50"], out["schedule_p99"] = pct(lat, 50), pct(lat, 99)

    # The native paged listing: first page, and pages followed by cursor.
    first, deep = [], []
    for _ in range(20):
        t = time.perf_counter()
        c.send(get_request("/api/v1/jobs?state=pending&limit=100"))
        status, body = c.response()
        first.append((time.perf_counter() - t) * 1000)
        assert status == 200, body[:300]
    cursor = json.loads(body).get("next_cursor")
    for _ in range(20):
        if not cursor:
            break
        t = time.perf_counter()
        c.send(get_request(f"/api/v1/jobs?state=pending&limit=100&cursor={cursor}"))
        status, body = c.response()
        deep.append((time.perf_counter() - t) * 1000)
        assert status == 200, body[:300]
        cursor = json.loads(body).get("next_cursor")
    out["page_p50"], out["page_p99"] = pct(first, 50), pct(first, 99)
    out["cursor_p50"] = pct(deep, 50) if deep else None
    c.close()

    # listjobs.json: every job of the project, in one answer.
    runs = 1 if pending >= 500000 else 3
    lt, before, peak, cpu = [], [], [], []
    for _ in range(runs):
        body = None
        time.sleep(0.5)
        before.append(d.mem_mb()[0])
        d.reset_peak()
        c0 = d.cpu_s()
        t = time.perf_counter()
        status, body = d.get("/listjobs.json?project=testproj")
        lt.append(time.perf_counter() - t)
        cpu.append(d.cpu_s() - c0)
        peak.append(d.mem_mb()[1])
        assert status == 200, body[:300]
    out["listjobs_s"] = statistics.median(lt)
    out["listjobs_cpu"] = statistics.median(cpu)
    out["listjobs_rss0"] = statistics.median(before)
    out["listjobs_peak"] = max(peak)
    out["listjobs_above"] = max(p - b for p, b in zip(peak, before))
    out["listjobs_mb"] = len(body) / (1 << 20)
    # Every pending entry, and only those, has a priority (not parsed: at a
    # million jobs that would take gigabytes here).
    out["listjobs_pending"] = body.count(b'"priority":')
    del body
    out["rss_mb"], out["hwm_mb"] = d.mem_mb()
    out["db_mb"] = d.db_mb()
    return out


def claims(d, slots, seconds):
    """Restarts d with `slots` slots; jobs started per second over `seconds`."""
    d.stop()
    d.write_conf(slots)
    start_s = d.start()
    pending0 = d.count("SELECT count(*) FROM jobs WHERE state = 0")
    t0 = int(time.time() * 1000)
    time.sleep(seconds)
    t1 = int(time.time() * 1000)
    started = d.count("SELECT count(*) FROM jobs WHERE start_ms >= ? AND start_ms < ?", t0, t1)
    rss, _ = d.mem_mb()
    return {"start_s": start_s, "pending": pending0, "claims_per_s": started / ((t1 - t0) / 1000),
            "rss_mb": rss}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--jobs", type=int, default=1000000)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--probe", type=int, default=2000)
    ap.add_argument("--claim-slots", type=int, default=16)
    ap.add_argument("--claim-seconds", type=float, default=20)
    ap.add_argument("--small", type=int, default=20000)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--data", help="the million-job directory: kept, reused when filled")
    ap.add_argument("--skip-claims", action="store_true")
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    print(f"{os.cpu_count()} cores; the bench's own processes run at nice "
          f"{os.nice(0)}", flush=True)

    base = tempfile.mkdtemp(prefix="spiderd-million-")
    small = big = None
    try:
        if not args.skip_claims:
            # The small queue first: claims at --small pending.
            small_dir = os.path.join(base, "small")
            os.makedirs(small_dir)
            s = Daemon(binary, small_dir, 1)
            s.start()
            s.deploy()
            s.schedule("slow")
            fill(s, args.small, args.conns, args.batch)
            small = claims(s, args.claim_slots, args.claim_seconds)
            s.stop()
            print(f"claims at {small['pending']} pending: {small['claims_per_s']:.0f} jobs/s "
                  f"(restart {small['start_s']:.2f} s)", flush=True)

        big_dir = os.path.abspath(args.data) if args.data else os.path.join(base, "big")
        reuse = os.path.exists(os.path.join(big_dir, "dbs", "spiderd.db"))
        os.makedirs(big_dir, exist_ok=True)
        d = Daemon(binary, big_dir, 1, hold=reuse)
        d.start()
        if not reuse:
            d.deploy()
            d.schedule("slow")  # holds the one slot
        time.sleep(0.5)
        have = d.count("SELECT count(*) FROM jobs WHERE state = 0")
        probes, fills = [], []
        if have == 0:
            probes.append(probe(d, 0, args))
            print(probes[-1], flush=True)
        for target in (100000, args.jobs):
            have = d.count("SELECT count(*) FROM jobs WHERE state = 0")
            if have >= target and target != args.jobs:
                continue
            if have < target:
                rate, dt = fill(d, target - have, args.conns, args.batch)
                fills.append((have, target, rate, dt))
                print(f"fill {have} -> {target}: {rate:.0f} jobs/s in {dt:.0f} s", flush=True)
            pending = d.count("SELECT count(*) FROM jobs WHERE state = 0")
            probes.append(probe(d, pending, args))
            print(probes[-1], flush=True)
        if not args.skip_claims:
            big = claims(d, args.claim_slots, args.claim_seconds)
            print(f"claims at {big['pending']} pending: {big['claims_per_s']:.0f} jobs/s "
                  f"(restart {big['start_s']:.2f} s, RSS {big['rss_mb']:.1f} MB)", flush=True)
        d.stop()

        print("\n| pending | schedule.json (1 conn) | p50 / p99 / mean | /api/v1/jobs page | "
              "next pages | listjobs.json (daemon CPU) | its size | RSS before | peak during (above) | "
              "db + WAL |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for p in probes:
            cur = f"{p['cursor_p50']:.2f} ms" if p["cursor_p50"] is not None else "-"
            print(f"| {p['pending']:,} | {p['schedule_rate']:,.0f}/s | {p['schedule_p50']:.2f} / "
                  f"{p['schedule_p99']:.2f} / {p['schedule_mean']:.2f} ms | {p['page_p50']:.2f} / {p['page_p99']:.2f} ms | "
                  f"{cur} | {p['listjobs_s']:.2f} s ({p['listjobs_cpu']:.2f} s) | {p['listjobs_mb']:.1f} MB | "
                  f"{p['listjobs_rss0']:.1f} MB | {p['listjobs_peak']:.1f} (+{p['listjobs_above']:.1f}) MB | "
                  f"{p['db_mb']:.0f} MB |")
        for have, target, rate, dt in fills:
            print(f"fill {have:,} -> {target:,}: {rate:,.0f} jobs/s ({args.conns} connections, "
                  f"batches of {args.batch}), {dt:.0f} s")
        for name, c in (("small", small), ("1M", big)):
            if c:
                print(f"claims ({name}, {c['pending']:,} pending, max_proc={args.claim_slots}): "
                      f"{c['claims_per_s']:,.0f} jobs/s; restart to first answer {c['start_s']:.2f} s; "
                      f"RSS {c['rss_mb']:.1f} MB")
        print(f"load average at end: {os.getloadavg()}")
    finally:
        if args.keep:
            print("kept", base)
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
