"""Load: a thousand keep-alive clients and a thousand event-stream subscribers
on one daemon with bounded memory, and idle or slow (slowloris) clients cut
off at http_timeout while a normal client is still served.

The clients are non-blocking sockets driven by one selector in the test's
own thread, not a thread each."""

import json
import os
import resource
import selectors
import socket
import time

from conftest import NODE, SANITIZED, timeout, unique, wait_for

API = "/api/v1"
CLIENTS = 1000
SUBSCRIBERS = 1000
MB = 1 << 20


def _raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    assert soft >= need, f"the open files limit ({soft}) is below the {need} this test needs"


def rss(d):
    """The daemon's resident set size in bytes, from /proc/PID/status."""
    with open(f"/proc/{d.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def open_fds(d):
    return len(os.listdir(f"/proc/{d.proc.pid}/fd"))


def memory_env():
    # ASan keeps freed memory in a 256 MB quarantine before reusing it, which
    # would read as growth; a small one lets RSS show what the daemon holds.
    if SANITIZED:
        opts = os.environ.get("ASAN_OPTIONS", "")
        return {"ASAN_OPTIONS": (opts + ":" if opts else "") + "quarantine_size_mb=4"}
    return {}


class Conn:
    """One client connection: bytes to send, bytes received."""

    def __init__(self, sel, port, request=b""):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.sock.connect_ex(("127.0.0.1", port))
        self.out = request
        self.buf = b""
        self.closed = False
        self.closed_at = None
        self.sel = sel
        sel.register(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, self)

    def send(self, data):
        self.out += data
        self.sel.modify(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, self)

    def on_event(self, mask):
        if mask & selectors.EVENT_WRITE and self.out:
            try:
                n = self.sock.send(self.out)
                self.out = self.out[n:]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.close()
                return
        if not self.out and not self.closed:
            self.sel.modify(self.sock, selectors.EVENT_READ, self)
        if mask & selectors.EVENT_READ:
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if data:
                self.buf += data
            else:
                self.close()

    def close(self):
        if not self.closed:
            self.closed = True
            self.closed_at = time.monotonic()
            self.sel.unregister(self.sock)
            self.sock.close()


def pump(sel, done, seconds, what):
    deadline = time.monotonic() + seconds
    while not done():
        left = deadline - time.monotonic()
        assert left > 0, f"timed out after {seconds:.0f}s: {what}"
        for key, mask in sel.select(min(left, 0.2)):
            key.data.on_event(mask)


def take_response(c):
    """Pops one complete HTTP/1.1 response (Content-Length framed) off c.buf:
    (status, headers, body), or None while it is incomplete."""
    end = c.buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = c.buf[:end].decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
    n = int(headers["content-length"])
    if len(c.buf) < end + 4 + n:
        return None
    body = c.buf[end + 4:end + 4 + n]
    c.buf = c.buf[end + 4 + n:]
    return int(head[0].split()[1]), headers, body


def dechunk(raw):
    """The payload of a chunked body received so far (complete chunks)."""
    out, i = b"", 0
    while True:
        j = raw.find(b"\r\n", i)
        if j < 0:
            return out
        size = int(raw[i:j].split(b";")[0], 16)
        if size == 0 or len(raw) < j + 2 + size + 2:
            return out
        out += raw[j + 2:j + 2 + size]
        i = j + 2 + size + 2


def request(path):
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def create_schedule(d, name):
    r = d.request("POST", API + "/schedules", json={
        "name": name, "project": "testproj", "spider": "quick", "cron": "0 0 1 1 *"})
    assert r.status_code == 201, r.text


def load_round(d, sel):
    """CLIENTS keep-alive connections, each answering two requests in turn,
    and SUBSCRIBERS event streams that all get an event created after they
    subscribed; all open together. Returns the daemon's RSS with them open."""
    clients = [Conn(sel, d.port, request("/daemonstatus.json")) for _ in range(CLIENTS)]
    answered = {c: 0 for c in clients}

    def check_clients():
        for c in clients:
            got = take_response(c) if not c.closed or c.buf else None
            if got is None:
                continue
            status, headers, body = got
            assert status == 200, (status, body)
            assert headers.get("connection", "").lower() != "close", headers
            doc = json.loads(body)
            assert doc["status"] == "ok" and doc["node_name"] == NODE, doc
            answered[c] += 1
            if answered[c] == 1:
                c.send(request("/listprojects.json"))  # the same connection, again
        assert not any(c.closed for c in clients), "the daemon closed a keep-alive connection"
        return all(n == 2 for n in answered.values())

    pump(sel, check_clients, timeout(30), "keep-alive clients' answers")

    subs = [Conn(sel, d.port, request(API + "/events/stream?type=schedule.created"))
            for _ in range(SUBSCRIBERS)]

    def subscribed():
        assert not any(s.closed for s in subs), "the daemon closed an event stream"
        return all(b"\r\n\r\n" in s.buf for s in subs)

    pump(sel, subscribed, timeout(30), "event streams' headers")
    for s in subs:
        head, _, s.buf = s.buf.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b"text/event-stream" in head, head

    name = unique("load")
    create_schedule(d, name)

    def delivered():
        assert not any(s.closed for s in subs), "the daemon closed an event stream"
        return all(name.encode() in dechunk(s.buf) for s in subs)

    pump(sel, delivered, timeout(30), "the event on every stream")
    for s in subs:
        text = dechunk(s.buf).decode()
        assert "event: schedule.created\n" in text, text
        data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        assert json.loads(data[-1])["data"]["name"] == name, text

    # Still keep-alive after all that: one more request on every connection.
    for c in clients:
        c.send(request("/daemonstatus.json"))

    def third():
        assert not any(c.closed for c in clients), "the daemon closed a keep-alive connection"
        for c in clients:
            if answered[c] == 2 and (got := take_response(c)) is not None:
                assert got[0] == 200 and json.loads(got[2])["status"] == "ok", got
                answered[c] = 3
        return all(n == 3 for n in answered.values())

    pump(sel, third, timeout(30), "the third answers")
    during = rss(d)
    for c in clients + subs:
        c.close()
    return during


def test_thousand_clients_and_subscribers_bounded_memory(spiderd, egg):
    _raise_nofile(CLIENTS + SUBSCRIBERS + 200)
    d = spiderd(env=memory_env())
    d.upload("testproj", "1", egg("testproj"))
    sel = selectors.DefaultSelector()
    # A small warm-up so that the baseline includes what any first request
    # allocates once (the store's statements, the request pool's first objects).
    for _ in range(3):
        assert d.get("/daemonstatus.json").status_code == 200
    baseline, fds = rss(d), open_fds(d)

    afters, durings = [], []
    for _ in range(2):
        durings.append(load_round(d, sel))
        # The daemon sees every client leave, the event streams' too (they
        # wait suspended, which MHD itself does not poll), and closes their
        # sockets.
        wait_for(lambda: open_fds(d) <= fds, timeout(10),
                 "the daemon's descriptors back to their number before the clients")
        assert d.get("/daemonstatus.json").json()["status"] == "ok"
        afters.append(rss(d))
    sel.close()

    report = (f"RSS baseline {baseline / MB:.1f} MB, during {[round(x / MB, 1) for x in durings]}"
              f" MB, after {[round(x / MB, 1) for x in afters]} MB")
    # 2,000 connections at once: MHD's 16 KiB pool each, a request object,
    # an event stream's buffer. 40 KiB each (80 KiB under ASan) is generous.
    per_conn = (80 if SANITIZED else 40) * 1024
    limit = (CLIENTS + SUBSCRIBERS) * per_conn
    for x in durings:
        assert x - baseline < limit, report
    # What the clients took is given back, or at least reused: a second round
    # does not grow the daemon.
    assert afters[1] - afters[0] < 16 * MB, report
    assert durings[1] - durings[0] < 16 * MB, report
    print(report)


def test_idle_and_slow_clients_time_out_while_others_are_served(spiderd, egg):
    """http_timeout = 2: connections that send nothing, and connections that
    send a request's headers a byte every 0.5 s (so never idle for 2 s), are
    closed by the daemon after about 2 s, while a client making requests
    throughout gets every answer promptly, and an event stream silent for
    longer than the timeout stays open."""
    http_timeout = 2
    _raise_nofile(500)
    d = spiderd(spiderd={"http_timeout": http_timeout})
    d.upload("testproj", "1", egg("testproj"))
    sel = selectors.DefaultSelector()

    sub = Conn(sel, d.port, request(API + "/events/stream?type=schedule.created"))
    pump(sel, lambda: b"\r\n\r\n" in sub.buf, timeout(10), "the event stream's headers")
    assert sub.buf.startswith(b"HTTP/1.1 200"), sub.buf

    # A keep-alive client that made one request and then says nothing more.
    kept = Conn(sel, d.port, request("/daemonstatus.json"))
    pump(sel, lambda: take_response(kept) is not None, timeout(10), "the first answer")

    start = time.monotonic()
    idle = [Conn(sel, d.port) for _ in range(100)]
    slow = [Conn(sel, d.port, b"G") for _ in range(100)]
    partial = b"GET /daemonstatus.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    sent = {c: 1 for c in slow}
    drip_at = start

    normal = d.new_session()
    worst = 0.0
    answers = 0
    attackers = idle + slow
    while not all(c.closed for c in attackers + [kept]):
        now = time.monotonic()
        assert now - start < http_timeout + 8, \
            f"{sum(not c.closed for c in attackers)} slow or idle connections still open " \
            f"after {now - start:.1f}s"
        if now >= drip_at:  # one more byte of the headers, well within the idle timeout
            for c in slow:
                if not c.closed:
                    c.send(partial[sent[c]:sent[c] + 1] or b"a")
                    sent[c] += 1
            drip_at = now + 0.5
        t0 = time.monotonic()
        r = normal.get(d.url + "/daemonstatus.json", timeout=timeout(5))
        worst = max(worst, time.monotonic() - t0)
        assert r.status_code == 200 and r.json()["status"] == "ok"
        answers += 1
        for key, mask in sel.select(0.05):
            key.data.on_event(mask)
    normal.close()

    # Dropped at the timeout, not before it (an idle one is dropped by the
    # idle timeout and the header deadline alike; a slow one only by the
    # deadline, since it is never idle for 2 s).
    for c in idle + slow:
        assert c.closed_at - start >= http_timeout - 0.3, c.closed_at - start
        assert c.buf == b"", c.buf  # closed, not answered
    assert max(sent.values()) >= 4  # the slow clients kept sending
    assert kept.closed_at - start >= http_timeout - 0.3
    # Liveness, not speed: the normal client was answered throughout.
    assert answers >= 10
    assert worst < 2.0, f"a normal request took {worst:.2f}s during the attack"

    # The event stream, silent for longer than the timeout, is still open and
    # still delivers.
    assert not sub.closed
    name = unique("slow")
    create_schedule(d, name)
    pump(sel, lambda: name.encode() in dechunk(sub.buf[sub.buf.find(b"\r\n\r\n") + 4:]),
         timeout(10), "the event after the attack")
    assert not sub.closed
    sub.close()
    sel.close()


def test_open_files_limit_raised_and_connections_bounded(spiderd):
    """Started with a soft open-files limit of 1024 (the usual default) the
    daemon raises it to the hard limit; http_connections bounds the open
    connections: one more waits (or is turned away) until one closes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(1024, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        d = spiderd(spiderd={"http_connections": 5})
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    with open(f"/proc/{d.proc.pid}/limits") as f:
        line = next(x for x in f if x.startswith("Max open files"))
    assert line.split()[3:5] == [str(hard), str(hard)], line
    if low < hard:
        assert f"open files limit raised from {low} to {hard}" in d.stderr_text()

    d.session.close()  # its keep-alive connection would count
    held = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(5)]
    for s in held:
        s.sendall(request("/daemonstatus.json"))
        s.settimeout(timeout(5))
        assert s.recv(65536).startswith(b"HTTP/1.1 200"), "a connection within the limit"
    extra = socket.create_connection(("127.0.0.1", d.port))
    extra.sendall(request("/daemonstatus.json"))
    extra.settimeout(1.0)
    try:
        got = extra.recv(65536)
    except socket.timeout:
        got = None  # waiting in the listen backlog
    assert not got, f"a sixth connection was served over http_connections = 5: {got!r}"
    held.pop().close()
    if got is None:  # it waited: now it is served
        extra.settimeout(timeout(5))
        assert extra.recv(65536).startswith(b"HTTP/1.1 200")
    extra.close()
    again = socket.create_connection(("127.0.0.1", d.port))
    again.settimeout(timeout(5))
    again.sendall(request("/daemonstatus.json"))
    if not again.recv(65536).startswith(b"HTTP/1.1 200"):
        raise AssertionError("no connection served after one of the five closed")
    again.close()
    for s in held:
        s.close()
