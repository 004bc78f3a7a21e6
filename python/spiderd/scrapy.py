"""A Scrapy scheduler and duplicate filter backed by spiderd queues, so that
several crawl processes, on one node or many, share one crawl frontier and
fetch no request twice.

    # settings.py (or a spider's custom_settings)
    SCHEDULER = "spiderd.scrapy.Scheduler"
    DUPEFILTER_CLASS = "spiderd.scrapy.DupeFilter"
    SPIDERD_QUEUE = "myproject-frontier"    # default "<BOT_NAME>-<spider.name>"

Two queues per crawl:

- the frontier (SPIDERD_QUEUE) holds the requests to fetch. An element is
  "<fingerprint> <request as JSON>" (Request.to_dict(spider=...), bytes kept
  exactly); a dont_filter request gets "<fingerprint>~<nonce>" so that it is
  never merged with another. Request.priority is the element's priority;
  meta "spiderd_delay" (seconds) makes it due later and meta "spiderd_key"
  sets its politeness key. Within one priority, requests come out oldest
  first (breadth first), where Scrapy's own scheduler is LIFO.
- the seen set (SPIDERD_DUPEFILTER_QUEUE, default "<frontier>.seen"), a
  paused queue with keep_done whose elements are request fingerprints. A
  put with policy keep-existing answers added=1 to exactly one of any number
  of processes putting the same fingerprint, whichever comes first: that one
  schedules the request, the others drop it as a duplicate.

A frontier element that is a bare http(s) URL (a multi-process run's
seeds, and URLs added to it: docs/queues.md) is a seed: the process that
takes it schedules the spider's request for it -- Request(url), or what the
spider's spiderd_request(url) returns -- through the seen set like any
request it yields, then acks the URL.

Delivery is at least once: next_request() takes requests under a lease
(SPIDERD_QUEUE_VISIBILITY seconds, renewed while the request is in this
process), and the lease is acked only when Scrapy is done with the request:
downloaded, its callback run and the requests it yielded scheduled (or it
failed, or a middleware dropped it). A process that dies (kill -9, a lost
node) leaves its requests in flight until their leases run out; then another
process takes them. A process that stops cleanly gives back the requests it
took but did not start.

A crawl ends when its process is idle and the frontier has held nothing
waiting or in flight for SPIDERD_QUEUE_IDLE_GRACE seconds: each process keeps
polling while others still work (they may yield more requests), and all end
together when the frontier stays empty. The grace covers the moment between
another process's two calls for one request (seen set, then frontier): a
crawl that finds its start request already seen, with the frontier still
empty, would otherwise end before the other one's put lands.

Settings (the queue's own settings, e.g. max_deliveries, are set through
SPIDERD_QUEUE_SETTINGS or the API):

  SPIDERD_URL, SPIDERD_TOKEN   the daemon (default: the job's environment)
  SPIDERD_QUEUE                the frontier queue's name
  SPIDERD_DUPEFILTER_QUEUE     the seen set's name
  SPIDERD_QUEUE_PREFETCH       requests taken per call (default 8)
  SPIDERD_QUEUE_VISIBILITY     lease length, seconds (default 60)
  SPIDERD_QUEUE_KEY_MODE       "host": politeness keys are the request's host
                               (then key_inflight / key_rate apply per host)
  SPIDERD_QUEUE_SETTINGS       a dict of queue settings applied at open
                               (PUT /api/v1/queues/{name}), e.g.
                               {"key_inflight": 2, "key_rate": 1}
  SPIDERD_QUEUE_POLL           seconds between polls of the shared queue while
                               this process is idle (default 1)
  SPIDERD_QUEUE_IDLE_GRACE     seconds the frontier must stay empty before an
                               idle process ends (default 2 polls)

Trade-offs, on purpose:

- The seen set is written before the frontier: a process killed between the
  two calls loses that one request (seen, never queued). The other order
  would fetch a request twice when two processes race.
- The seen set is persistent: a second crawl on the same queue names fetches
  nothing already seen. Purge the seen queue (or name new queues, e.g.
  -s SPIDERD_QUEUE=...) to crawl again.
- Scrapy's default start_requests() makes dont_filter requests: every process
  then fetches the start URLs once. Yield start requests without dont_filter
  to have them fetched once in all.
- A request that cannot be stored (a callback that is not a spider method,
  meta that JSON cannot carry, over 64 KiB) or that the daemon refuses stays
  in this process's memory, as Scrapy's own scheduler does with a JOBDIR.
- HTTP calls are made from the reactor thread (a few ms on a local daemon),
  like other shared schedulers; a daemon that does not answer is retried a few
  times, then the scheduler logs and carries on.
"""

import collections
import json
import logging
import time
import urllib.parse
import uuid

from scrapy import Request, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.misc import create_instance, load_object
from scrapy.utils.request import request_from_dict

from spiderd.queue import Client, Queue, QueueError

logger = logging.getLogger(__name__)

ELEMENT_MAX = 65536
NAME_MAX = 200
SEEN_SUFFIX = ".seen"


# ---- names and encoding ---------------------------------------------------

def sanitize_queue_name(name, room=len(SEEN_SUFFIX)):
    """A queue name from anything: characters other than ASCII letters,
    digits, '_', '-', '.' become '_'; short enough to take the seen set's
    suffix."""
    out = "".join(c if (c.isascii() and c.isalnum()) or c in "_-." else "_" for c in str(name))
    out = out[:NAME_MAX - room]
    if out in ("", ".", ".."):
        out = "scrapy" if not out else out.replace(".", "_")
    return out


def default_queue_name(settings, spider):
    name = settings.get("SPIDERD_QUEUE")
    if name:
        return name
    bot = settings.get("BOT_NAME") or "scrapybot"
    return sanitize_queue_name(f"{bot}-{getattr(spider, 'name', None) or 'spider'}")


def _jsonable(x):
    """JSON for Request.to_dict(): bytes and non-string dict keys (headers)
    are tagged so that decoding gives back exactly the same values."""
    if x is None or isinstance(x, (str, bool, int, float)):
        return x
    if isinstance(x, bytes):
        return {"$b": x.decode("latin-1")}
    if isinstance(x, dict):
        if all(isinstance(k, str) for k in x) and "$b" not in x and "$d" not in x:
            return {k: _jsonable(v) for k, v in x.items()}
        return {"$d": [[_jsonable(k), _jsonable(v)] for k, v in x.items()]}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    raise TypeError(f"a {type(x).__name__} cannot be stored in a queue element")


def _hashable(x):
    return tuple(_hashable(v) for v in x) if isinstance(x, list) else x


def _unjson(x):
    if isinstance(x, dict):
        if len(x) == 1 and "$b" in x:
            return x["$b"].encode("latin-1")
        if len(x) == 1 and "$d" in x:
            return {_hashable(_unjson(k)): _unjson(v) for k, v in x["$d"]}
        return {k: _unjson(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_unjson(v) for v in x]
    return x


def encode_request(request, spider, fingerprint, unique=False):
    """The frontier element of a request. Raises TypeError/ValueError when the
    request cannot be stored."""
    head = fingerprint
    if unique:
        head += "~" + uuid.uuid4().hex[:16]
    d = request.to_dict(spider=spider)
    text = json.dumps(_jsonable(d), separators=(",", ":"), sort_keys=True, ensure_ascii=True)
    element = f"{head} {text}"
    if len(element) > ELEMENT_MAX:
        raise ValueError(f"the request takes {len(element)} bytes, over the {ELEMENT_MAX} of an element")
    return element


def is_seed(element):
    """Is a frontier element a bare URL rather than an encoded request?
    A multi-process run seeds its frontier with such URLs."""
    return " " not in element and element[:8].lower().startswith(("http://", "https://"))


def decode_request(element, spider):
    """The Request of a frontier element. Raises ValueError."""
    head, sep, text = element.partition(" ")
    if not sep:
        raise ValueError("not a request element (no JSON after the fingerprint)")
    d = _unjson(json.loads(text))
    if not isinstance(d, dict) or "url" not in d:
        raise ValueError("not a request element (no url)")
    return request_from_dict(d, spider=spider)


def request_key(request, mode):
    key = request.meta.get("spiderd_key")
    if key is not None:
        return str(key)
    if mode == "host":
        try:
            return (urllib.parse.urlsplit(request.url).hostname or "").lower()
        except ValueError:
            return ""
    return None


def _fingerprinter(crawler):
    fp = getattr(crawler, "request_fingerprinter", None) if crawler is not None else None
    if fp is not None:
        return lambda request: fp.fingerprint(request).hex()
    from scrapy.utils.request import request_fingerprint  # Scrapy < 2.7
    return request_fingerprint


def _client(settings):
    return Client(url=settings.get("SPIDERD_URL") or None,
                  token=settings.get("SPIDERD_TOKEN") or None,
                  timeout=settings.getfloat("SPIDERD_TIMEOUT", 30.0))


# ---- the duplicate filter -------------------------------------------------

class DupeFilter(BaseDupeFilter):
    """Request fingerprints in a spiderd queue shared by every process of a
    crawl: request_seen() is one put with policy keep-existing, and the put's
    `added` says whether this call was the first to see the fingerprint."""

    def __init__(self, queue=None, fingerprinter=None, debug=False, stats=None,
                 client=None, settings=None):
        self.queue_name = queue
        self.client = client
        self.settings = settings
        self.queue = None
        self.fingerprint = fingerprinter or _fingerprinter(None)
        self.debug = debug
        self.stats = stats
        self.logdupes = True
        self.local = set()      # used only while the daemon cannot be reached

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        name = s.get("SPIDERD_DUPEFILTER_QUEUE")
        if not name and getattr(crawler, "spider", None) is not None:
            name = default_queue_name(s, crawler.spider) + SEEN_SUFFIX
        return cls(queue=name, fingerprinter=_fingerprinter(crawler),
                   debug=s.getbool("DUPEFILTER_DEBUG"), stats=crawler.stats, settings=s)

    @classmethod
    def from_settings(cls, settings):
        return cls(queue=settings.get("SPIDERD_DUPEFILTER_QUEUE"), settings=settings,
                   debug=settings.getbool("DUPEFILTER_DEBUG"))

    def open(self):
        if not self.queue_name:
            raise ValueError("spiderd.scrapy.DupeFilter needs SPIDERD_DUPEFILTER_QUEUE "
                             "(or SPIDERD_QUEUE, or spiderd.scrapy.Scheduler)")
        if self.client is None:
            self.client = _client(self.settings) if self.settings is not None else Client()
        self.queue = Queue(self.queue_name, client=self.client)
        # A set, not a work queue: nobody takes from it.
        self.queue.configure(paused=True, keep_done=True)
        logger.info("Duplicate filter: spiderd queue %s at %s", self.queue_name, self.client.url)

    def close(self, reason):
        if self.client is not None:
            self.client.close()

    def request_seen(self, request):
        fp = self.fingerprint(request)
        if fp in self.local:
            return True
        try:
            r = self.queue.put(fp, policy="keep-existing")
        except QueueError as e:
            logger.error("Duplicate filter: cannot reach the seen set %s (%s); "
                         "deduplicating in this process only", self.queue_name, e)
            self.local.add(fp)
            return False
        return not r.added

    def forget(self, request):
        """Removes a request's fingerprint from the seen set (best effort)."""
        try:
            self.queue.purge(prefix=self.fingerprint(request))
        except QueueError:
            pass

    def log(self, request, spider):
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request},
                         extra={"spider": spider})
        elif self.logdupes:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be "
                         "shown (see DUPEFILTER_DEBUG to show all duplicates)",
                         {"request": request}, extra={"spider": spider})
            self.logdupes = False
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered", spider=spider)


# ---- the scheduler ----------------------------------------------------------

class Scheduler(BaseScheduler):
    """Scrapy's scheduler interface over a spiderd queue (see the module's
    documentation)."""

    def __init__(self, crawler, dupefilter, client=None):
        s = crawler.settings
        self.crawler = crawler
        self.settings = s
        self.stats = crawler.stats
        self.df = dupefilter
        self.client = client or _client(s)
        self.prefetch = max(1, s.getint("SPIDERD_QUEUE_PREFETCH", 8))
        vis = s.get("SPIDERD_QUEUE_VISIBILITY")
        self.visibility = float(vis) if vis not in (None, "") else 60.0
        self.key_mode = (s.get("SPIDERD_QUEUE_KEY_MODE") or "none").lower()
        if self.key_mode not in ("none", "host"):
            raise ValueError(f"SPIDERD_QUEUE_KEY_MODE must be none or host, not {self.key_mode!r}")
        self.queue_settings = s.getdict("SPIDERD_QUEUE_SETTINGS")
        self.poll = max(0.05, s.getfloat("SPIDERD_QUEUE_POLL", 1.0))
        grace = s.get("SPIDERD_QUEUE_IDLE_GRACE")
        self.idle_grace = max(0.0, float(grace)) if grace not in (None, "") else 2 * self.poll
        self._empty_since = None             # when the frontier was first seen empty
        self.fingerprint = _fingerprinter(crawler)
        self.spider = None
        self.queue = None
        self.queue_name = None
        self._buffer = collections.deque()   # (item, request) taken, not yet handed out
        self._local = collections.deque()    # requests that could not go to the queue
        self._dispatched = {}                # request -> item: handed to the engine
        self._acks = []                      # items Scrapy is done with
        self._last_ack = 0.0
        self._empty_until = 0.0              # no take before this (the last came back empty)
        self._last_extend = 0.0
        self._last_error = 0.0
        self._remote_waiting = 0
        self._track_signals = False
        self._loop = None

    @classmethod
    def from_crawler(cls, crawler):
        df_cls = load_object(crawler.settings["DUPEFILTER_CLASS"])
        df = create_instance(df_cls, crawler.settings, crawler)
        return cls(crawler, df)

    # -- engine internals (Scrapy 2.x) --

    def _engine_slot(self):
        engine = getattr(self.crawler, "engine", None)
        return getattr(engine, "slot", None) or getattr(engine, "_slot", None)

    def _inprogress(self):
        return getattr(self._engine_slot(), "inprogress", None)

    def _wake_engine(self):
        nextcall = getattr(self._engine_slot(), "nextcall", None)
        if nextcall is not None:
            nextcall.schedule()

    # -- open / close --

    def open(self, spider):
        self.spider = spider
        self.queue_name = default_queue_name(self.settings, spider)
        self.queue = Queue(self.queue_name, client=self.client)
        conf = dict(self.queue_settings)
        if self.key_mode == "host":
            conf.setdefault("key_mode", "host")
        info = self.queue.configure(**conf)
        if self.settings.get("SPIDERD_QUEUE_VISIBILITY") in (None, "") and "visibility" in conf:
            self.visibility = float(conf["visibility"])
        if isinstance(self.df, DupeFilter):
            if not self.settings.get("SPIDERD_DUPEFILTER_QUEUE"):
                self.df.queue_name = self.queue_name + SEEN_SUFFIX
            if self.df.client is None:
                self.df.client = self.client
        logger.info("Scheduler: spiderd queue %s at %s (prefetch %d, visibility %gs; %s)",
                    self.queue_name, self.client.url, self.prefetch, self.visibility,
                    _stats_text(info.get("stats")), extra={"spider": spider})
        if self._inprogress() is None:
            # No view of the engine's requests: ack when a response or a
            # failure comes back from the downloader instead.
            self._track_signals = True
            self.crawler.signals.connect(self._request_done, signal=signals.response_received)
            self.crawler.signals.connect(self._request_done, signal=signals.request_left_downloader)
            self.crawler.signals.connect(self._request_done, signal=signals.request_dropped)
        from twisted.internet import task
        self._last_extend = time.monotonic()
        self._loop = task.LoopingCall(self._tick)
        self._loop.start(self.poll, now=False)
        return self.df.open()

    def close(self, reason):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._reconcile()
        # What the engine still holds after it closed (it waits for its
        # requests first, so normally nothing) and what was taken but never
        # started goes back to the queue for others, due now.
        back = list(self._dispatched.values()) + [item for item, _ in self._buffer]
        self._dispatched.clear()
        self._buffer.clear()
        try:
            self._flush_acks()
            if back:
                self.queue.nack(back, release=True,
                                error=f"released by a crawl that closed ({reason})")
                self._inc("spiderd_queue/released", len(back))
        except QueueError as e:
            logger.error("Scheduler: could not settle %d lease(s) at close: %s",
                         len(self._acks) + len(back), e, extra={"spider": self.spider})
        if self._local:
            logger.warning("Scheduler: %d request(s) kept in memory are lost at close",
                           len(self._local), extra={"spider": self.spider})
        self.client.close()
        return self.df.close(reason)

    # -- the interface --

    def __len__(self):
        return len(self._buffer) + len(self._local) + self._remote_waiting

    def enqueue_request(self, request):
        # Encoded before the seen set is asked: between its answer and the
        # put into the frontier, a process that dies loses the request.
        try:
            element = encode_request(request, self.spider, self.fingerprint(request),
                                     unique=request.dont_filter)
            unstorable = None
        except (TypeError, ValueError) as e:
            element, unstorable = None, e
        if not request.dont_filter and self.df.request_seen(request):
            self.df.log(request, self.spider)
            return False
        if element is None:
            return self._keep_local(request, f"cannot be stored ({unstorable})", "scheduler/unserializable")
        entry = {"element": element}
        if request.priority:
            entry["priority"] = request.priority
        key = request_key(request, self.key_mode)
        if key is not None:
            entry["key"] = key
        delay = request.meta.get("spiderd_delay")
        if delay:
            entry["delay"] = float(delay)
        try:
            self.queue.put([entry], policy="keep-earliest")
        except QueueError as e:
            return self._keep_local(request, f"was refused by the queue ({e})", "spiderd_queue/put_failed")
        self._empty_until = 0.0  # there is something to take now
        self._inc("scheduler/enqueued/spiderd")
        self._inc("scheduler/enqueued")
        return True

    def next_request(self):
        self._reconcile()
        if self._local:
            request = self._local.popleft()
            self._inc("scheduler/dequeued/memory")
            self._inc("scheduler/dequeued")
            return request
        if not self._buffer:
            self._fill()
        if not self._buffer:
            return None
        item, request = self._buffer.popleft()
        self._dispatched[request] = item
        self._inc("scheduler/dequeued/spiderd")
        self._inc("scheduler/dequeued")
        return request

    def has_pending_requests(self):
        if self._buffer or self._local:
            self._empty_since = None
            return True
        self._reconcile()
        try:
            self._flush_acks()
        except QueueError as e:
            return self._unsure(e)
        if self._fill():
            self._empty_since = None
            return True
        try:
            st = self.queue.stats()
        except QueueError as e:
            return self._unsure(e)
        self._remote_waiting = int(st.get("waiting") or 0)
        # Another process's requests in flight may still yield new ones.
        if self._remote_waiting + int(st.get("inflight") or 0) > 0:
            self._empty_since = None
            return True
        # Empty: say so only once it has stayed empty for the grace, so
        # that a put another process is about to make is not missed.
        now = time.monotonic()
        if self._empty_since is None:
            self._empty_since = now
        return now - self._empty_since < self.idle_grace

    # -- internals --

    def _inc(self, key, n=1):
        if self.stats is not None:
            self.stats.inc_value(key, n, spider=self.spider)

    def _keep_local(self, request, why, stat):
        logger.warning("Scheduler: %s %s; it stays in this process", request, why,
                       extra={"spider": self.spider})
        self._local.append(request)
        self._inc(stat)
        self._inc("scheduler/enqueued/memory")
        self._inc("scheduler/enqueued")
        return True

    def _unsure(self, error):
        # The queue cannot be asked: do not end the crawl for that.
        now = time.monotonic()
        if now - self._last_error > 10:
            logger.error("Scheduler: cannot reach spiderd queue %s: %s", self.queue_name, error,
                         extra={"spider": self.spider})
            self._last_error = now
        return True

    def _fill(self):
        """Takes up to `prefetch` requests into the buffer; True if it got any."""
        now = time.monotonic()
        if now < self._empty_until:
            return False
        try:
            self._flush_acks()
            items = self.queue.take(self.prefetch, visibility=self.visibility)
        except QueueError as e:
            self._unsure(e)
            self._empty_until = now + self.poll
            return False
        if not items:
            self._empty_until = now + self.poll / 2
            return False
        bad = []
        for item in items:
            if is_seed(item.element):
                self._seed(item, bad)
                continue
            try:
                request = decode_request(item.element, self.spider)
            except Exception as e:  # a corrupt element, a callback this spider lacks
                logger.error("Scheduler: cannot make a request of element %s: %s",
                             item.element[:200], e, extra={"spider": self.spider})
                bad.append((item, e))
                continue
            self._buffer.append((item, request))
        for item, e in bad:
            try:
                self.queue.nack(item, error=f"not a request for {self.spider.name}: {e}")
            except QueueError:
                pass
            self._inc("spiderd_queue/undecodable")
        return bool(self._buffer)

    def _seed(self, item, bad):
        """A bare URL (a multi-process run's seed, or one added to its
        frontier): scheduled as the spider's request for it, through the
        seen set like any other, then acked; the request itself is a
        frontier element of its own from then on."""
        try:
            make = getattr(self.spider, "spiderd_request", None)
            request = make(item.element) if make else Request(item.element)
        except Exception as e:
            logger.error("Scheduler: cannot make a request of URL %s: %s", item.element[:200], e,
                         extra={"spider": self.spider})
            bad.append((item, e))
            return
        self.enqueue_request(request)
        self._acks.append(item)
        self._inc("spiderd_queue/seeds")

    def _reconcile(self):
        """Moves the requests the engine is done with to the acks."""
        if not self._dispatched or self._track_signals:
            return
        inprogress = self._inprogress()
        if inprogress is None:
            return
        done = [r for r in self._dispatched if r not in inprogress]
        for r in done:
            self._acks.append(self._dispatched.pop(r))
        if done:
            # Acking frees in-flight slots (key_inflight, max_inflight): a
            # take may get something now even if the last one did not.
            self._empty_until = 0.0

    def _request_done(self, request, **kw):
        item = self._dispatched.pop(request, None)
        if item is not None:
            self._acks.append(item)
            self._empty_until = 0.0

    def _flush_acks(self):
        if not self._acks:
            return
        acks, self._acks = self._acks, []
        try:
            r = self.queue.ack(acks)
        except QueueError:
            self._acks = acks + self._acks
            raise
        self._last_ack = time.monotonic()
        self._inc("spiderd_queue/acked", r.acked)
        if r.stale:
            # The lease ran out and another process took the request too.
            self._inc("spiderd_queue/stale_acks", len(r.stale))
            logger.warning("Scheduler: %d ack(s) came too late (the leases had run out)",
                           len(r.stale), extra={"spider": self.spider})

    def _extend(self):
        held = list(self._dispatched.values()) + [item for item, _ in self._buffer]
        if not held:
            return
        r = self.queue.extend(held, visibility=self.visibility)
        if r.stale:
            stale = set(r.stale)
            # Taken but not started, and someone else holds it now: drop it.
            self._buffer = collections.deque((i, q) for i, q in self._buffer if i.lease not in stale)
            self._inc("spiderd_queue/leases_lost", len(stale))
            logger.warning("Scheduler: %d lease(s) had run out before they were renewed",
                           len(stale), extra={"spider": self.spider})

    def _tick(self):
        try:
            self._reconcile()
            self._flush_acks()
            now = time.monotonic()
            if now - self._last_extend >= self.visibility / 3:
                self._last_extend = now
                self._extend()
        except QueueError as e:
            self._unsure(e)
        except Exception:
            logger.exception("Scheduler: housekeeping failed", extra={"spider": self.spider})
        if not self._buffer and not self._local:
            # Idle here: look at the shared queue again (others may have put).
            self._wake_engine()


def _stats_text(st):
    if not st:
        return "new queue"
    return ", ".join(f"{k} {st.get(k)}" for k in ("waiting", "inflight", "dead", "done") if k in st)
