"""spiderd.queue (python/spiderd/queue.py) against a real daemon, and
spiderd.scrapy's scheduler and dupefilter in real crawls: several jobs of one
spider, run by the daemon, share one frontier over a local site.
"""

import collections
import html
import http.server
import os
import random
import re
import signal
import sys
import threading
import time

import pytest

from conftest import free_port, timeout, unique, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "python")))

from spiderd import queue as sq  # noqa: E402
from spiderd.queue import (Client, Item, Queue, QueueConnectionError,  # noqa: E402
                           QueueError, QueueNotFound)

PROJECT = "queueproj"   # testproj plus the frontier spider (projects/queueproj)


@pytest.fixture(scope="module")
def d(module_spiderd, egg):
    d = module_spiderd(scrapyd={"max_proc": 6})
    d.upload(PROJECT, "1.0", egg("queueproj"))
    return d


@pytest.fixture
def client(d):
    c = Client(d.url)
    yield c
    c.close()


@pytest.fixture
def q(client):
    return Queue(unique("q"), client=client)


# ---- the client ---------------------------------------------------------------

def test_schedule_take_ack(client, q):
    r = q.schedule("https://example.com/a")
    assert (r.added, r.kept, r.moved) == (1, 0, 0) and len(r.ids) == 1
    # The module-level spelling of the issue, by queue name.
    assert sq.schedule(q.name, "https://example.com/b", seconds=0, client=client).added == 1
    # Unique: a second put of the same element adds nothing.
    assert q.schedule("https://example.com/a").added == 0

    items = q.take(10, visibility=30)
    assert sorted(i.element for i in items) == ["https://example.com/a", "https://example.com/b"]
    for i in items:
        assert isinstance(i, Item) and i.lease and i.deliveries == 1 and i.priority == 0
        assert i.lease_expires is not None and i.state == "inflight"
        assert i.queue is q
    st = q.stats()
    assert (st["waiting"], st["inflight"]) == (0, 2), st
    assert q.take(5) == []  # nothing more is due

    r = q.ack(items)
    assert r.acked == 2 and r.stale == []
    st = q.stats()
    assert (st["size"], st["waiting"], st["inflight"]) == (0, 0, 0), st


def test_priority_delay_and_key(q):
    q.put(["low1", "low2"])
    q.put("high", priority=5)
    q.schedule("later", seconds=60, priority=9)
    [first] = q.take(1)
    assert first.element == "high" and first.priority == 5
    rest = q.take(10)
    assert sorted(i.element for i in rest) == ["low1", "low2"]
    st = q.stats()
    assert st["waiting"] == 1 and st["past_due"] == 0, st
    # A put of the delayed element with keep-earliest makes it due now.
    r = q.put("later", policy="keep-earliest")
    assert r.added == 0
    [later] = q.take(1)
    assert later.element == "later"
    # An explicit key is kept with the element.
    q.put("keyed", key="example.com")
    [keyed] = q.take(1)
    assert keyed.key == "example.com"
    q.ack(rest + [first, later, keyed])


def test_items_ack_and_nack_themselves_and_module_ack(q):
    q.put(["x", "y", "z"])
    x, y, z = sorted(q.take(3), key=lambda i: i.element)
    assert x.ack().acked == 1
    r = y.nack(delay=0, error="boom")
    assert (r.nacked, r.dead) == (1, 0)
    [again] = q.take(1)
    assert again.element == "y" and again.deliveries == 2
    assert sq.ack([again, z]).acked == 2       # the items know their queue
    assert q.stats()["size"] == 0


def test_nack_to_dead_letters_and_requeue(q):
    q.configure(max_deliveries=1)
    q.put("poison")
    [item] = q.take(1)
    r = q.nack(item, error="cannot parse")
    assert r.dead == 1, r
    dead = q.dead()
    assert [i.element for i in dead] == ["poison"]
    assert dead[0].state == "dead" and dead[0].error == "cannot parse"
    assert q.stats()["dead"] == 1
    assert q.requeue() == 1
    [back] = q.take(1)
    assert back.element == "poison"
    q.ack(back)


def test_take_acks_the_last_item_in_the_same_request(q):
    q.put(["a", "b"])
    [a] = q.take(1)
    [b] = q.take(1, ack=a)
    assert (a.element, b.element) == ("a", "b")
    assert q.take(1, ack=[b]) == []
    st = q.stats()
    assert st["size"] == 0 and st["acked"] == 2


def test_release_gives_a_delivery_back_uncounted(q):
    q.configure(max_deliveries=1)
    q.put("x")
    for _ in range(3):
        [item] = q.take(1)
        assert item.deliveries == 1
        r = item.nack(release=True)
        assert r.nacked == 1 and r.dead == 0, r
    [item] = q.take(1)
    assert q.nack(item).dead == 1


def test_extend_keeps_a_lease_and_a_late_ack_is_stale(q):
    q.put(["kept", "lost"])
    items = {i.element: i for i in q.take(2, visibility=1)}
    assert q.extend(items["kept"], visibility=30).extended == 1
    time.sleep(1.5)
    # "lost" ran out and is taken again; "kept" is still ours.
    [again] = q.take(5, visibility=30)
    assert again.element == "lost" and again.deliveries == 2
    r = q.ack([items["kept"], items["lost"]])
    assert r.acked == 1 and r.stale == [items["lost"].lease], r
    assert q.ack(again).acked == 1


def test_pause_resume_purge(q):
    q.put(["p1", "p2", "other"])
    q.pause()
    assert q.take(5) == []
    assert q.info()["paused"] is True
    q.resume()
    assert q.purge(prefix="p") == 2
    [left] = q.take(5)
    assert left.element == "other"
    q.ack(left)
    q.put(["a", "b"])
    assert q.purge() == 2
    assert q.stats()["size"] == 0


def test_batches_are_split_at_1000(q):
    elements = [f"e{i:05d}" for i in range(2500)]
    r = q.put(elements)
    assert r.added == 2500 and len(r.ids) == 2500
    items = q.take(1500, visibility=60)
    assert len(items) == 1500 and len({i.element for i in items}) == 1500
    assert q.extend(items).extended == 1500
    assert q.ack(items).acked == 1500
    assert q.stats()["waiting"] == 1000


def test_take_waits_for_a_put(client, q):
    q.configure()
    got = []
    t = threading.Thread(target=lambda: got.extend(Queue(q.name, Client(client.url)).take(1, wait=10)))
    start = time.monotonic()
    t.start()
    time.sleep(0.3)
    q.put("wake")
    t.join(timeout(15))
    assert [i.element for i in got] == ["wake"]
    assert time.monotonic() - start < timeout(5)


def test_errors_carry_the_servers_message(client, q):
    with pytest.raises(QueueError) as e:
        Queue("n" * 201, client=client).put("x")   # names are at most 200 bytes
    assert e.value.status == 400 and "queue name" in e.value.message and "400" in str(e.value)
    assert e.value.code

    with pytest.raises(QueueNotFound) as e:
        Queue(unique("missing"), client=client).stats()
    assert e.value.status == 404 and e.value.message

    with pytest.raises(QueueError) as e:
        q.configure(key_mode="sideways")
    assert e.value.status == 400 and "key_mode" in e.value.message

    with pytest.raises(QueueError) as e:
        q.put("x" * 70000)
    assert e.value.status in (400, 413) and e.value.message

    with pytest.raises(ValueError):
        q.put("x", policy="sometimes")


def test_unreachable_daemon_raises_after_retries():
    c = Client(f"http://127.0.0.1:{free_port()}", retries=2, backoff=0.01)
    start = time.monotonic()
    with pytest.raises(QueueConnectionError) as e:
        Queue("x", client=c).stats()
    assert e.value.status is None and "cannot reach spiderd" in str(e.value)
    assert isinstance(e.value, QueueError)
    assert time.monotonic() - start < 5


def test_keep_alive_and_reconnect_after_a_daemon_restart(spiderd):
    d2 = spiderd()
    c = Client(d2.url)
    q = Queue("restart", client=c)
    q.put("a")
    sock = c._local.conn.sock
    q.put("b")
    assert c._local.conn.sock is sock  # one connection for both calls
    d2.restart()
    # The old connection is dead: the client reconnects on its own.
    assert q.stats()["waiting"] == 2


def test_basic_auth_and_environment(spiderd, monkeypatch):
    d2 = spiderd(scrapyd={"username": "alice", "password": "s3cret"})
    with pytest.raises(QueueError) as e:
        Queue("a", client=Client(d2.url)).put("x")
    assert e.value.status == 401
    assert Queue("a", client=Client(d2.url, user="alice", password="s3cret")).put("x").added == 1
    monkeypatch.setenv("SPIDERD_URL", d2.url)
    monkeypatch.setenv("SPIDERD_USER", "alice:s3cret")
    monkeypatch.delenv("SPIDERD_TOKEN", raising=False)
    assert Queue("a", client=Client()).stats()["waiting"] == 1


# ---- request elements ------------------------------------------------------

def test_request_elements_round_trip_and_dont_filter_is_unique():
    import scrapy
    from spiderd.scrapy import decode_request, encode_request, sanitize_queue_name

    class S(scrapy.Spider):
        name = "s"

        def parse(self, response):
            pass

    s = S()
    r = scrapy.Request("http://example.com/a?x=1", callback=s.parse, method="POST",
                       body=b"\x00\xff", headers={"X-A": "\xe9"}, priority=-3,
                       meta={"depth": 2, "pair": (1, 2)}, cb_kwargs={"k": "v"})
    fp = "ab" * 20
    e = encode_request(r, s, fp)
    assert e.startswith(fp + " ") and e == encode_request(r, s, fp)
    back = decode_request(e, s)
    assert (back.url, back.method, back.body, back.priority) == (r.url, "POST", b"\x00\xff", -3)
    assert back.headers == r.headers and back.callback == s.parse and back.cb_kwargs == {"k": "v"}
    assert back.meta == {"depth": 2, "pair": [1, 2]}
    # dont_filter requests never merge into one element.
    assert encode_request(r, s, fp, unique=True) != encode_request(r, s, fp, unique=True)
    with pytest.raises(TypeError):
        encode_request(r.replace(meta={"s": {1, 2}}), s, fp)
    assert sanitize_queue_name("bot/spider name") == "bot_spider_name"
    assert len(sanitize_queue_name("x" * 500) + ".seen") == 200


def test_an_idle_scheduler_waits_out_its_grace_before_it_has_nothing_pending(d):
    # Another crawl of the frontier adds a request to the seen set first and
    # puts it into the frontier a moment later. A crawl that looks in between
    # must not end: an empty frontier counts only once it has stayed empty
    # for SPIDERD_QUEUE_IDLE_GRACE.
    import scrapy
    from scrapy.utils.test import get_crawler
    from spiderd.scrapy import DupeFilter, Scheduler, encode_request

    class S(scrapy.Spider):
        name = "grace"

        def parse(self, response):
            pass

    frontier = unique("grace")
    crawler = get_crawler(S, {"SPIDERD_URL": d.url, "SPIDERD_QUEUE": frontier,
                              "SPIDERD_QUEUE_POLL": 0.1, "SPIDERD_QUEUE_IDLE_GRACE": 1.5})
    spider = S()
    sched = Scheduler(crawler, DupeFilter(client=Client(d.url)), client=Client(d.url))
    sched.open(spider)
    try:
        t0 = time.monotonic()
        assert sched.has_pending_requests(), "an empty frontier ended the crawl at once"
        r = scrapy.Request("http://example.com/late", callback=spider.parse)
        Queue(frontier, client=sched.client).put(
            [encode_request(r, spider, sched.fingerprint(r))], policy="keep-earliest")
        assert time.monotonic() - t0 < 1.5
        taken = []
        wait_for(lambda: sched.has_pending_requests() and taken.append(sched.next_request())
                 or any(taken), 5, "the late put taken")
        got = next(t for t in taken if t is not None)
        assert got.url == r.url
        sched._request_done(got)   # what the engine's signal does once it is fetched
        # Now nothing more comes: pending for the grace, then not.
        assert sched.has_pending_requests()
        t1 = time.monotonic()
        wait_for(lambda: not sched.has_pending_requests(), 10, "the crawl to end")
        assert time.monotonic() - t1 >= 1.4
    finally:
        sched.close("finished")


# ---- crawls ---------------------------------------------------------------------

class Site:
    """A local site of n pages, /p/0 ... /p/<n-1>, each linking to a few
    others (with duplicate links, relative and absolute); every page is
    reachable from /p/0. Counts hits per path and per User-Agent."""

    def __init__(self, n=60, delay=0.15, seed=4):
        rng = random.Random(seed)
        self.gate = threading.Event()   # pages are served once it is set
        self.gate.set()
        self.n = n
        self.delay = delay
        self.links = {}
        for i in range(n):
            out = [c for c in (2 * i + 1, 2 * i + 2) if c < n] + rng.sample(range(n), 3) + [0, i]
            self.links[i] = out
        self.lock = threading.Lock()
        self.hits = collections.Counter()
        self.by_agent = collections.defaultdict(collections.Counter)
        self.active = collections.defaultdict(set)   # agent -> paths being served
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = 65536  # headers and body in one write

            def log_message(self, *args):
                pass

            def do_GET(self):
                m = re.fullmatch(r"/p/(\d+)", self.path)
                if not m or int(m.group(1)) >= site.n:
                    self.send_error(404)
                    return
                agent = self.headers.get("User-Agent", "")
                with site.lock:
                    site.hits[self.path] += 1
                    site.by_agent[agent][self.path] += 1
                    site.active[agent].add(self.path)
                try:
                    site.gate.wait(timeout(60))
                    time.sleep(site.delay)
                    body = site.page(int(m.group(1)), self.headers.get("Host"))
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                finally:
                    with site.lock:
                        site.active[agent].discard(self.path)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def page(self, i, host):
        hrefs = []
        for j, c in enumerate(self.links[i]):
            hrefs.append(f"/p/{c}" if j % 2 else f"http://{host}/p/{c}")
            hrefs.append(f"../p/{c}")                       # the same page again
        body = "".join(f'<a href="{html.escape(h)}">{h}</a>\n' for h in hrefs)
        return f"<html><body><h1>page {i}</h1>\n{body}</body></html>".encode()

    def paths(self):
        return {f"/p/{i}" for i in range(self.n)}

    def agent_hits(self, agent):
        with self.lock:
            return sum(self.by_agent[agent].values())

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site():
    s = Site()
    yield s
    s.close()


def crawl(d, site, frontier, agent, *settings):
    return d.schedule(PROJECT, "frontier", settings=[
        f"SPIDERD_QUEUE={frontier}", f"USER_AGENT={agent}", "LOG_LEVEL=INFO", *settings],
        start=site.url("/p/0"))


def scrapy_stat(log, name):
    m = re.search(rf"'{re.escape(name)}': (\d+)", log)
    return int(m.group(1)) if m else 0


def test_crawls_share_one_frontier_and_fetch_each_page_once(d, site, client):
    frontier = unique("frontier")
    agents = [f"crawler-{k}" for k in range(3)]
    site.gate.clear()
    jobs = [crawl(d, site, frontier, a, "SPIDERD_QUEUE_PREFETCH=2") for a in agents]
    # All three crawls run before the first page is served, so each gets work
    # however slowly the processes start.
    for job in jobs:
        d.wait_log(PROJECT, "frontier", job, "Scheduler: spiderd queue", 60)
    site.gate.set()
    for job in jobs:
        d.wait_finished(job, 120)

    assert set(site.hits) == site.paths()
    twice = {p: n for p, n in site.hits.items() if n != 1}
    assert not twice, f"pages fetched more than once: {twice}"
    worked = {a: site.agent_hits(a) for a in agents}
    assert all(n > 0 for n in worked.values()), f"a crawl did no work: {worked}"

    acked = 0
    for job in jobs:
        log = d.read_log(PROJECT, "frontier", job)
        assert "Spider closed (finished)" in log, log[-3000:]
        assert " ERROR: " not in log and "Traceback" not in log, log[-3000:]
        acked += scrapy_stat(log, "spiderd_queue/acked")
    assert acked == site.n

    st = Queue(frontier, client=client).stats()
    assert (st["waiting"], st["inflight"], st["dead"]) == (0, 0, 0), st
    # The seen set holds one fingerprint per page.
    assert Queue(frontier + ".seen", client=client).stats()["size"] == site.n


def test_a_killed_crawls_requests_come_back_to_the_others(d, site, client):
    site.delay = 0.3
    frontier = unique("frontier")
    site.gate.clear()
    victim = crawl(d, site, frontier, "victim", "SPIDERD_QUEUE_VISIBILITY=3",
                   "SPIDERD_QUEUE_PREFETCH=3")
    survivor = crawl(d, site, frontier, "survivor", "SPIDERD_QUEUE_VISIBILITY=3")
    entry = d.wait_running(victim)
    for job in (victim, survivor):
        d.wait_log(PROJECT, "frontier", job, "Scheduler: spiderd queue", 60)
    site.gate.set()
    wait_for(lambda: site.agent_hits("victim") >= 3 and site.agent_hits("survivor") >= 1,
             60, "both crawls to fetch pages")

    with site.lock:
        downloading = set(site.active["victim"])
    os.kill(entry["pid"], signal.SIGKILL)
    killed_at = time.monotonic()
    d.wait_finished(victim, 30)
    d.wait_finished(survivor, 120)

    assert set(site.hits) == site.paths(), sorted(site.paths() - set(site.hits))
    # What the victim was downloading when it died was fetched again.
    missed = [p for p in downloading if site.by_agent["survivor"][p] == 0]
    assert not missed, f"in flight in the killed crawl, never fetched again: {missed}"
    log = d.read_log(PROJECT, "frontier", survivor)
    assert "Spider closed (finished)" in log, log[-3000:]
    # The survivor waited for the dead crawl's leases rather than ending early.
    assert time.monotonic() - killed_at >= 2.5
    st = Queue(frontier, client=client).stats()
    assert (st["waiting"], st["inflight"], st["dead"]) == (0, 0, 0), st


def test_key_mode_and_queue_settings_apply_at_open(d, client):
    """Settings a job gives (-s) reach the queue at open; with one request in
    flight per host the crawl still completes."""
    site = Site(n=20, delay=0.05)
    try:
        frontier = unique("frontier")
        job = crawl(d, site, frontier, "keyed", "SPIDERD_QUEUE_KEY_MODE=host",
                    'SPIDERD_QUEUE_SETTINGS={"key_inflight": 1, "max_deliveries": 3}')
        d.wait_finished(job, 120)
        info = Queue(frontier, client=client).info()
        assert (info["key_mode"], info["key_inflight"], info["max_deliveries"]) == ("host", 1, 3)
        assert set(site.hits) == site.paths()
        assert all(n == 1 for n in site.hits.values())
    finally:
        site.close()


def test_crawls_reach_a_daemon_with_basic_auth_by_their_token(spiderd, egg):
    d2 = spiderd(scrapyd={"username": "alice", "password": "s3cret"})
    d2.upload(PROJECT, "1.0", egg("queueproj"))
    site = Site(n=20, delay=0.05)
    try:
        frontier = unique("frontier")
        jobs = [crawl(d2, site, frontier, f"auth-{k}") for k in range(2)]
        for job in jobs:
            d2.wait_finished(job, 120)
            log = d2.read_log(PROJECT, "frontier", job)
            assert "Spider closed (finished)" in log and " ERROR: " not in log, log[-3000:]
        assert set(site.hits) == site.paths() and all(n == 1 for n in site.hits.values())
        c = Client(d2.url, user="alice", password="s3cret")
        assert Queue(frontier + ".seen", client=c).stats()["size"] == site.n
    finally:
        site.close()


def test_a_cancelled_crawl_finishes_its_requests_and_gives_back_the_rest(d, site, client):
    site.delay = 0.3
    frontier = unique("frontier")
    site.gate.clear()
    leaving = crawl(d, site, frontier, "leaving", "SPIDERD_QUEUE_PREFETCH=4")
    staying = crawl(d, site, frontier, "staying")
    for job in (leaving, staying):
        d.wait_log(PROJECT, "frontier", job, "Scheduler: spiderd queue", 60)
    site.gate.set()
    wait_for(lambda: site.agent_hits("leaving") >= 3 and site.agent_hits("staying") >= 1,
             60, "both crawls to fetch pages")
    d.cancel(PROJECT, leaving)
    d.wait_finished(leaving, 30)
    d.wait_finished(staying, 120)

    log = d.read_log(PROJECT, "frontier", leaving)
    assert "Spider closed (shutdown)" in log, log[-3000:]
    assert " ERROR: " not in log, log[-3000:]
    # A clean stop acks what it fetched and gives the rest back at once: every
    # page exactly once, and nothing waited for a lease to run out.
    assert set(site.hits) == site.paths(), sorted(site.paths() - set(site.hits))
    twice = {p: n for p, n in site.hits.items() if n != 1}
    assert not twice, f"pages fetched more than once: {twice}"
    assert "Spider closed (finished)" in d.read_log(PROJECT, "frontier", staying)
    st = Queue(frontier, client=client).stats()
    assert (st["waiting"], st["inflight"], st["dead"]) == (0, 0, 0), st
