"""Webhooks on a real daemon: what a receiver gets (body, headers, a
signature it can verify), retries with backoff, timeouts, order per URL,
redelivery after a restart, event type filtering, several URLs, and a
schedule's own hooks.

Events are rows inserted straight into the daemon's SQLite file: the
modules that emit job events are merged separately, and this way each test
controls exactly what happens. One end-to-end test runs a real crawl."""

import hashlib
import hmac
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import now_ms, timeout, wait_for

SECRET = "s3cret-for-tests"
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
NO_PROXY = {"no_proxy": "*", "NO_PROXY": "*"}
# The receivers listen on loopback, which deliveries may not reach unless
# allowed (test_security.py proves the refusal).
LOCAL = {"webhook_allow_private": "127.0.0.1"}


class Receiver:
    """An HTTP server in a thread that records every POST. Per path it can
    be told to answer 500 to the next N requests, or to hang on them."""

    def __init__(self):
        self.requests = []
        self.fail = {}
        self.hang = {}
        self.lock = threading.Lock()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    rec = {"path": self.path, "headers": dict(self.headers), "body": body,
                           "t": time.monotonic(), "outcome": 200}
                    if receiver.hang.get(self.path, 0) > 0:
                        receiver.hang[self.path] -= 1
                        rec["outcome"] = "hang"
                    elif receiver.fail.get(self.path, 0) > 0:
                        receiver.fail[self.path] -= 1
                        rec["outcome"] = 500
                    receiver.requests.append(rec)
                try:
                    if rec["outcome"] == "hang":
                        receiver.release.wait(60)
                        return
                    self.send_response(rec["outcome"])
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the daemon gave up on us first

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path="/hook"):
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def got(self, path=None, ok_only=False):
        with self.lock:
            return [r for r in self.requests
                    if (path is None or r["path"] == path) and (not ok_only or r["outcome"] == 200)]

    def delivered(self, path=None):
        return [json.loads(r["body"]) for r in self.got(path, ok_only=True)]

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def hooked(spiderd, receiver, urls=None, **kw):
    conf = {"webhooks": urls or receiver.url(), "webhook_secret": SECRET,
            "webhook_backoff": 0.2, "webhook_timeout": 1, **LOCAL}
    conf.update(kw)
    d = spiderd(spiderd=conf, env=NO_PROXY)
    wait_cursor(d)
    return d


# ---- the daemon's store ----

def db(d):
    return d.db()


def meta(d, key):
    con = db(d)
    try:
        row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None
    finally:
        con.close()


def wait_cursor(d):
    """Events inserted before the deliverer stored its first cursor would be
    history (not replayed), so tests wait for it."""
    return int(wait_for(lambda: meta(d, "webhooks.cursor"), 10, "the webhooks cursor"))


def add_event(d, type_, schedule_id=0, job_id=0, data=None):
    con = db(d)
    try:
        with con:
            cur = con.execute(
                "INSERT INTO events (ts_ms, type, schedule_id, job_id, data) VALUES (?, ?, ?, ?, ?)",
                (now_ms(), type_, schedule_id, job_id, json.dumps(data) if data is not None else None))
            return cur.lastrowid
    finally:
        con.close()


def add_job(d, jobid="hookjob1", state=2, exit_code=0, stats=None):
    con = db(d)
    t = now_ms()
    try:
        with con:
            cur = con.execute(
                "INSERT INTO jobs (jobid, project, spider, state, node, created_ms, start_ms, end_ms,"
                " exit_code, stats) VALUES (?, 'proj', 'spi', ?, 'testnode', ?, ?, ?, ?, ?)",
                (jobid, state, t - 3000, t - 2000, t, exit_code,
                 json.dumps(stats) if stats is not None else None))
            return cur.lastrowid
    finally:
        con.close()


def add_schedule(d, name, webhooks):
    con = db(d)
    t = now_ms()
    try:
        with con:
            cur = con.execute(
                "INSERT INTO schedules (name, kind, expr, interval_ms, tz, paused, project, spider,"
                " webhooks, created_ms, updated_ms) VALUES (?, 1, '3600000', 3600000, 'UTC', 1,"
                " 'proj', 'spi', ?, ?, ?)",
                (name, json.dumps(webhooks) if webhooks is not None else None, t, t))
            return cur.lastrowid
    finally:
        con.close()


def verify(headers, body, secret=SECRET, tolerance=300):
    """What a receiver does (docs/operations.md): recompute the HMAC over
    "<timestamp>.<body>", compare in constant time, refuse stale timestamps."""
    ts = headers["X-Spiderd-Timestamp"]
    sig = headers["X-Spiderd-Signature"]
    assert sig.startswith("sha256=")
    want = hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(sig[len("sha256="):], want), "bad signature"
    assert abs(time.time() - int(ts)) < tolerance, "stale timestamp"


def wait_delivered(receiver, n, path=None, seconds=10):
    return wait_for(lambda: len(receiver.delivered(path)) >= n and receiver.delivered(path),
                    seconds, f"{n} deliveries to {path or 'the receiver'}")


# ---- tests ----

def test_body_headers_and_signature(spiderd, receiver):
    d = hooked(spiderd, receiver)
    job = add_job(d, stats={"item_scraped_count": 3})
    eid = add_event(d, "job.finished", job_id=job, data={"exit_code": 0})
    wait_delivered(receiver, 1)
    [req] = receiver.got()
    h, body = req["headers"], req["body"]
    assert h["Content-Type"] == "application/json"
    assert h["User-Agent"].startswith("spiderd/")
    assert h["X-Spiderd-Event"] == "job.finished"
    assert h["X-Spiderd-Delivery"] == f"{eid}-0"
    verify(h, body)
    with pytest.raises(AssertionError):
        verify(h, body + b" ")  # a tampered body fails
    with pytest.raises(AssertionError):
        verify(h, body, secret="wrong")

    ev = json.loads(body)
    assert ev["id"] == eid and ev["type"] == "job.finished"
    assert ISO_MS.match(ev["ts"]), ev["ts"]
    assert abs(ev["ts_ms"] - now_ms()) < 60000
    assert ev["schedule_id"] == 0 and ev["job_id"] == job
    assert ev["data"] == {"exit_code": 0}
    assert ev["node"] == d.node
    j = ev["job"]
    assert (j["id"], j["jobid"], j["project"], j["spider"]) == (job, "hookjob1", "proj", "spi")
    assert j["state"] == "finished" and j["exit_code"] == 0 and j["signal"] is None
    assert j["stats"] == {"item_scraped_count": 3}
    assert ISO_MS.match(j["start_time"]) and ISO_MS.match(j["end_time"])


def test_unknown_types_are_not_delivered(spiderd, receiver):
    d = hooked(spiderd, receiver)
    add_event(d, "job.queued")
    add_event(d, "run.missed", data={"reason": "x"})
    add_event(d, "schedule.created")
    last = add_event(d, "job.failed", data={"exit_code": 1})
    [ev] = wait_delivered(receiver, 1)
    assert ev["id"] == last and ev["type"] == "job.failed"
    assert "job" not in ev  # an event without a job_id has no job part
    time.sleep(1.5)
    assert len(receiver.got()) == 1
    # The cursor moves past the filtered events too.
    wait_for(lambda: int(meta(d, "webhooks.cursor")) >= last, 5, "the cursor past them")


def test_prefix_filter(spiderd, receiver):
    d = hooked(spiderd, receiver, webhook_events="job. run.missed")
    ids = [add_event(d, t) for t in ("job.queued", "schedule.deleted", "run.missed", "job.lost")]
    got = wait_delivered(receiver, 3)
    assert [e["id"] for e in got] == [ids[0], ids[2], ids[3]]


def test_retries_after_500_with_growing_gaps(spiderd, receiver):
    d = hooked(spiderd, receiver)
    receiver.fail["/hook"] = 3
    eid = add_event(d, "job.finished")
    wait_delivered(receiver, 1)
    reqs = receiver.got()
    assert [r["outcome"] for r in reqs] == [500, 500, 500, 200]
    assert {r["headers"]["X-Spiderd-Delivery"] for r in reqs} == {f"{eid}-0"}
    assert [r["headers"]["X-Spiderd-Attempt"] for r in reqs] == ["1", "2", "3", "4"]
    for r in reqs:
        verify(r["headers"], r["body"])  # each attempt is signed afresh
    gaps = [b["t"] - a["t"] for a, b in zip(reqs, reqs[1:])]
    # webhook_backoff 0.2: about 0.2, 0.4, 0.8 s (+ up to 10% jitter).
    assert gaps[0] >= 0.19, gaps
    assert gaps[1] > gaps[0] * 1.4 and gaps[2] > gaps[1] * 1.4, gaps
    assert gaps[2] < 3.0 * timeout(1), gaps


def test_gives_up_after_the_retries(spiderd, receiver):
    d = hooked(spiderd, receiver, webhook_retries=2)
    receiver.fail["/hook"] = 100
    first = add_event(d, "job.finished")
    wait_for(lambda: len(receiver.got()) >= 3, 10, "three attempts")
    time.sleep(1.5)
    assert len(receiver.got()) == 3  # one try and two retries, then given up
    # A later event is delivered, and the cursor passed the given-up one.
    receiver.fail["/hook"] = 0
    second = add_event(d, "job.failed")
    [ev] = wait_delivered(receiver, 1)
    assert ev["id"] == second
    wait_for(lambda: int(meta(d, "webhooks.cursor")) >= second, 5, "the cursor")
    assert "given up after 3 attempts" in d.stderr_text()
    assert first < second


def test_hanging_receiver_times_out_is_retried_and_blocks_no_one(spiderd, receiver):
    d = hooked(spiderd, receiver, urls=f"{receiver.url('/slow')} {receiver.url('/fast')}")
    receiver.hang["/slow"] = 1
    eid = add_event(d, "job.finished")
    [ok] = wait_delivered(receiver, 1, "/slow", seconds=10)
    slow = receiver.got("/slow")
    [fast] = receiver.got("/fast")
    assert fast["t"] - slow[0]["t"] < 0.5  # not held up by /slow's timeout
    assert [r["outcome"] for r in slow] == ["hang", 200]
    assert slow[1]["t"] - slow[0]["t"] >= 1.0  # webhook_timeout, then the backoff
    assert ok["id"] == eid
    assert slow[1]["headers"]["X-Spiderd-Delivery"] == f"{eid}-0"
    assert fast["headers"]["X-Spiderd-Delivery"] == f"{eid}-1"


def test_order_per_url(spiderd, receiver):
    d = hooked(spiderd, receiver)
    receiver.fail["/hook"] = 2
    ids = [add_event(d, "job.finished" if i % 2 else "job.failed", data={"i": i})
           for i in range(20)]
    got = wait_delivered(receiver, 20)
    assert [e["id"] for e in got] == ids
    seen = [json.loads(r["body"])["id"] for r in receiver.got()]
    assert seen == sorted(seen)  # retries of the head hold the ones behind it


def test_two_urls_both_get_it(spiderd, receiver):
    d = hooked(spiderd, receiver, urls=f"{receiver.url('/a')},{receiver.url('/b')}")
    eid = add_event(d, "job.failed")
    [a] = wait_delivered(receiver, 1, "/a")
    [b] = wait_delivered(receiver, 1, "/b")
    assert a == b and a["id"] == eid
    deliveries = sorted(r["headers"]["X-Spiderd-Delivery"] for r in receiver.got())
    assert deliveries == [f"{eid}-0", f"{eid}-1"]


def test_restart_mid_retry_still_delivers(spiderd, receiver):
    d = hooked(spiderd, receiver, webhook_backoff=0.5)
    receiver.fail["/hook"] = 10 ** 6
    before = wait_cursor(d)
    eid = add_event(d, "job.finished")
    wait_for(lambda: len(receiver.got()) >= 2, 10, "two failed attempts")
    d.stop()
    assert int(meta(d, "webhooks.cursor")) < eid  # not past what was not delivered
    assert int(meta(d, "webhooks.cursor")) >= before
    receiver.fail["/hook"] = 0
    d.start()
    [ev] = wait_delivered(receiver, 1)
    assert ev["id"] == eid
    assert receiver.got(ok_only=True)[0]["headers"]["X-Spiderd-Delivery"] == f"{eid}-0"
    wait_for(lambda: int(meta(d, "webhooks.cursor")) >= eid, 5, "the cursor past it")


def test_kill9_mid_delivery_redelivers(spiderd, receiver):
    d = hooked(spiderd, receiver, webhook_timeout=5)
    receiver.hang["/hook"] = 1
    eid = add_event(d, "job.finished")
    wait_for(lambda: receiver.got(), 10, "the first attempt")
    d.kill9()
    d.start()
    [ev] = wait_delivered(receiver, 1)
    assert ev["id"] == eid


def test_first_start_does_not_replay_history(spiderd, receiver):
    d = spiderd(spiderd=LOCAL, env=NO_PROXY)
    old = add_event(d, "job.finished")
    d.stop()
    d.spiderd.update({"webhooks": receiver.url(), "webhook_backoff": 0.2})
    d.write_conf()
    d.start()
    assert wait_cursor(d) >= old
    new = add_event(d, "job.finished")
    [ev] = wait_delivered(receiver, 1)
    assert ev["id"] == new
    assert "X-Spiderd-Signature" not in receiver.got()[0]["headers"]  # no secret, no signature


def test_schedule_hooks_without_daemon_wide_ones(spiderd, receiver):
    d = spiderd(spiderd={"webhook_backoff": 0.2, **LOCAL}, env=NO_PROXY)
    hooked_sid = add_schedule(d, "hooked", [receiver.url("/sched"), "ftp://nope/"])
    quiet_sid = add_schedule(d, "quiet", [])
    time.sleep(timeout(1.5))  # the idle scan has found where the events end
    add_event(d, "job.finished", schedule_id=quiet_sid)
    eid = add_event(d, "job.failed", schedule_id=hooked_sid)
    [ev] = wait_delivered(receiver, 1, "/sched")
    assert ev["id"] == eid and ev["schedule_id"] == hooked_sid
    assert receiver.got()[0]["headers"]["X-Spiderd-Delivery"] == f"{eid}-0"
    assert "X-Spiderd-Signature" not in receiver.got()[0]["headers"]
    # Idle again: the lease is handed back once all is delivered.
    wait_for(lambda: int(meta(d, "webhooks.cursor") or 0) >= eid, 5, "the cursor")
    eid2 = add_event(d, "job.finished", schedule_id=hooked_sid)
    got = wait_delivered(receiver, 2, "/sched")
    assert got[1]["id"] == eid2
    assert len(receiver.got()) == 2


def test_bad_url_is_refused_at_start(spiderd):
    d = spiderd(start=False, spiderd={"webhooks": "ftp://example.com/x"})
    d.spawn()
    assert d.proc.wait(timeout(10)) != 0
    d.proc = None
    assert "is not an http:// or https:// URL" in d.stderr_text()


def test_real_job_finished_is_delivered(spiderd, receiver, egg):
    d = hooked(spiderd, receiver)
    d.upload("testproj", "1", egg("testproj"))
    jobid = d.schedule("testproj", "quick")
    d.wait_finished(jobid)

    def finished_event():
        con = db(d)
        try:
            return con.execute(
                "SELECT e.id FROM events e JOIN jobs j ON j.id = e.job_id"
                " WHERE e.type = 'job.finished' AND j.jobid = ?", (jobid,)).fetchone()
        finally:
            con.close()
    row = wait_for(finished_event, 5, "a job.finished event")
    got = wait_delivered(receiver, 1)
    ev = next(e for e in got if e["id"] == row[0])
    assert ev["job"]["jobid"] == jobid and ev["job"]["state"] == "finished"
    assert ev["job"]["project"] == "testproj" and ev["job"]["spider"] == "quick"
