"""A client for spiderd's task queues (docs/queues.md), standard library only.

    from spiderd.queue import Queue, schedule

    schedule("scrape_link", url, seconds=0)         # due now, priority 0
    q = Queue("scrape_link")
    for item in q.take(10, visibility=60):
        ...                                          # item.element, item.lease
        q.ack(item)                                  # or q.nack(item, error="...")

Inside a job the daemon sets SPIDERD_URL and SPIDERD_TOKEN (sent as
`Authorization: Bearer`); elsewhere `Client(url=..., token=...)`, or
SPIDERD_USER / SPIDERD_PASSWORD for a daemon with basic auth, or nothing for
http://127.0.0.1:6800.

One Client keeps one HTTP/1.1 connection per thread open across calls.
Connection failures (refused, reset, a keep-alive connection the server
closed, a timeout) and 502/503/504 answers are retried a few times with
exponential backoff; everything else raises QueueError at once, with the
server's message, HTTP status and error code. Batches (put, ack, nack,
extend) are split into calls of at most 1,000 elements, the API's limit.

Retries mean a call may reach the server twice: a put or an ack repeated is
harmless (elements are unique; a second ack reports the lease stale), a take
repeated may leave the first take's elements leased to nobody until their
visibility timeout runs out (delivery is at least once anyway).
"""

import base64
import datetime as _dt
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse

__all__ = [
    "BATCH_MAX", "DEFAULT_URL", "Client", "Item", "Queue", "QueueError",
    "QueueConnectionError", "QueueNotFound", "default_client", "schedule",
    "put", "take", "ack", "nack",
]

DEFAULT_URL = "http://127.0.0.1:6800"
BATCH_MAX = 1000        # elements per put/ack/nack/extend/take call (413 above)
TAKE_WAIT_MAX = 30.0    # the server holds a take at most this long
API = "/api/v1/queues"
POLICIES = ("overwrite", "keep-earliest", "keep-existing")
STATES = ("waiting", "inflight", "dead", "done")


# ---- errors ---------------------------------------------------------------

class QueueError(Exception):
    """The server refused a call, or could not be reached.

    message: the server's message (or the connection error's);
    status: the HTTP status (None when no answer came);
    code, details: the server's error code and details, when it gave them."""

    def __init__(self, message, status=None, code=None, details=None, method=None, path=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.details = details
        self.method = method
        self.path = path

    def __str__(self):
        where = f" ({self.method} {self.path})" if self.method else ""
        if self.status is None:
            return f"{self.message}{where}"
        code = f" {self.code}" if self.code else ""
        return f"{self.message} [HTTP {self.status}{code}]{where}"


class QueueNotFound(QueueError):
    """404: no such queue (put and take never raise it: put creates the queue,
    take from an unknown queue returns no items)."""


class QueueConnectionError(QueueError):
    """The daemon could not be reached, after the retries."""


class Obj(dict):
    """A JSON object whose fields read as attributes too (r.added == r["added"])."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


# ---- times ----------------------------------------------------------------

def format_time(value):
    """An instant for the API: an ISO 8601 UTC string. Takes a datetime (a
    naive one is local time, as everywhere in Python), a Unix time in seconds,
    or a string (passed as it is)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        value = _dt.datetime.fromtimestamp(value, _dt.timezone.utc)
    if isinstance(value, _dt.datetime):
        value = value.astimezone(_dt.timezone.utc)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    raise TypeError(f"not a time: {value!r}")


def parse_time(text):
    """An API instant as an aware datetime (UTC); None stays None, and a string
    that does not parse is returned as it is."""
    if not text or not isinstance(text, str):
        return text
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text


# ---- items ----------------------------------------------------------------

class Item:
    """One element as take (or a listing) returns it.

    element (str), lease (str, None unless taken), id, priority, due and
    lease_expires (aware datetimes), deliveries, key, state, error (the last
    nack's), raw (the JSON object). item.ack() / item.nack() / item.extend()
    act on the queue it came from."""

    __slots__ = ("id", "element", "lease", "lease_expires", "priority", "due",
                 "deliveries", "key", "state", "error", "raw", "queue")

    def __init__(self, raw, queue=None):
        self.raw = raw
        self.queue = queue
        self.id = raw.get("id")
        self.element = raw.get("element")
        self.lease = raw.get("lease")
        self.lease_expires = parse_time(raw.get("lease_expires"))
        self.priority = raw.get("priority", 0)
        self.due = parse_time(raw.get("due"))
        self.deliveries = raw.get("deliveries", 0)
        self.key = raw.get("key")
        self.state = raw.get("state")
        self.error = raw.get("error")

    def _queue(self):
        if self.queue is None:
            raise ValueError("this item does not know its queue; use Queue.ack()")
        return self.queue

    def ack(self):
        return self._queue().ack(self)

    def nack(self, delay=None, retry_after=None, error=None, release=False):
        return self._queue().nack(self, delay=delay, retry_after=retry_after, error=error,
                                  release=release)

    def extend(self, visibility=None):
        return self._queue().extend(self, visibility=visibility)

    def __repr__(self):
        element = self.element if len(self.element or "") <= 80 else self.element[:77] + "..."
        return (f"Item(id={self.id!r}, element={element!r}, lease={self.lease!r}, "
                f"priority={self.priority!r}, deliveries={self.deliveries!r}, key={self.key!r})")


def _lease_of(x):
    if isinstance(x, Item):
        if not x.lease:
            raise ValueError(f"{x!r} holds no lease (it was not taken)")
        return x.lease
    if isinstance(x, str):
        return x
    if isinstance(x, dict) and "lease" in x:
        return x["lease"]
    raise TypeError(f"not an item or a lease: {x!r}")


def _as_list(x, one_types):
    if isinstance(x, one_types):
        return [x]
    return list(x)


def _chunks(seq, n=BATCH_MAX):
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


# ---- the client -----------------------------------------------------------

_RETRYABLE_STATUS = (502, 503, 504)
# What a dead or restarting daemon, or a keep-alive connection it closed,
# looks like: OSError covers refused/reset/aborted/broken pipe and timeouts.
_RETRYABLE_EXC = (OSError, http.client.HTTPException)


class _NoDelay:
    # Small request/response exchanges on one connection: without
    # TCP_NODELAY, Nagle's algorithm and delayed ACKs can add 40 ms to a call.
    def connect(self):
        super().connect()
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, AttributeError):
            pass


class _HTTPConnection(_NoDelay, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_NoDelay, http.client.HTTPSConnection):
    pass


class Client:
    """The connection to one daemon.

    url: the daemon's base URL (default $SPIDERD_URL, else
    http://127.0.0.1:6800); a user:password in it is sent as basic auth.
    token: sent as `Authorization: Bearer` (default $SPIDERD_TOKEN); without
    one, user/password (default $SPIDERD_USER, $SPIDERD_PASSWORD; a
    SPIDERD_USER of "name:password" holds both) are sent as basic auth.
    timeout: seconds for one HTTP exchange (a take with wait adds its wait).
    retries, backoff: connection failures and 502/503/504 are tried again up
    to `retries` times, after backoff, 2*backoff, 4*backoff... seconds.

    Thread-safe: each thread gets its own keep-alive connection."""

    def __init__(self, url=None, token=None, timeout=30.0, retries=4, backoff=0.25,
                 user=None, password=None):
        url = url or os.environ.get("SPIDERD_URL") or DEFAULT_URL
        if "://" not in url:
            url = "http://" + url
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {url!r}")
        if not parts.hostname:
            raise ValueError(f"no host in URL {url!r}")
        self.url = url.rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        token = token if token is not None else os.environ.get("SPIDERD_TOKEN")
        self.auth = None
        if token:
            self.auth = f"Bearer {token}"
        else:
            if parts.username is not None:
                user = urllib.parse.unquote(parts.username)
                password = urllib.parse.unquote(parts.password or "")
            if user is None:
                user = os.environ.get("SPIDERD_USER")
                if password is None:
                    password = os.environ.get("SPIDERD_PASSWORD")
                if user and password is None and ":" in user:
                    user, password = user.split(":", 1)
            if user:
                cred = f"{user}:{password or ''}".encode("utf-8")
                self.auth = "Basic " + base64.b64encode(cred).decode("ascii")
        self._local = threading.local()

    def __repr__(self):
        return f"Client({self.url!r})"

    # -- HTTP --

    def _connection(self, timeout):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = _HTTPSConnection if self.scheme == "https" else _HTTPConnection
            conn = cls(self.host, self.port, timeout=timeout)
            self._local.conn = conn
            self._local.used = False
        else:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
        return conn

    def _drop_connection(self):
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def close(self):
        """Closes this thread's connection (the next call opens another)."""
        self._drop_connection()

    def request(self, method, path, body=None, query=None, timeout=None):
        """One API call: path is below the base URL (e.g. /api/v1/queues/x),
        body a JSON-able object. Returns the decoded JSON reply (an Obj), or
        raises QueueError."""
        full = self.prefix + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                full += "?" + urllib.parse.urlencode(q)
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.auth:
            headers["Authorization"] = self.auth
        timeout = self.timeout if timeout is None else timeout

        attempt = 0
        while True:
            conn = self._connection(timeout)
            reused = self._local.used
            try:
                conn.request(method, full, body=data, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
                self._local.used = True
                if resp.will_close:
                    self._drop_connection()
            except _RETRYABLE_EXC as e:
                self._drop_connection()
                # A keep-alive connection the server closed while idle fails
                # on first use: try again at once, without counting it.
                if reused and attempt == 0 and isinstance(
                        e, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)):
                    attempt = -1
                elif attempt >= self.retries:
                    raise QueueConnectionError(
                        f"cannot reach spiderd at {self.url}: {type(e).__name__}: {e}",
                        method=method, path=full) from e
                else:
                    time.sleep(self.backoff * (2 ** attempt))
                attempt += 1
                continue
            if resp.status in _RETRYABLE_STATUS and attempt < self.retries:
                time.sleep(self.backoff * (2 ** attempt))
                attempt += 1
                continue
            return self._decode(resp, payload, method, full)

    @staticmethod
    def _decode(resp, payload, method, path):
        obj = None
        if payload:
            try:
                obj = json.loads(payload.decode("utf-8"), object_hook=Obj)
            except ValueError:
                obj = None
        if 200 <= resp.status < 300:
            if obj is None and payload:
                raise QueueError(f"the reply is not JSON: {payload[:200]!r}", resp.status,
                                 method=method, path=path)
            return obj if obj is not None else Obj()
        message, code, details = None, None, None
        if isinstance(obj, dict):
            err = obj.get("error")
            if isinstance(err, dict):
                message, code, details = err.get("message"), err.get("code"), err.get("details")
            elif isinstance(err, str):
                message = err
            elif obj.get("message"):
                message = obj["message"]
        if not message:
            text = payload.decode("utf-8", "replace").strip()[:300]
            message = text or resp.reason or "error"
        cls = QueueNotFound if resp.status == 404 else QueueError
        raise cls(message, resp.status, code, details, method=method, path=path)

    # -- queues --

    def queue(self, name):
        return Queue(name, client=self)

    def queues(self):
        """Every queue: a list of objects (settings and `stats`)."""
        return self.request("GET", API).get("queues", [])


_default = None
_default_lock = threading.Lock()


def default_client():
    """The module's shared Client, built from the environment on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


# ---- a queue --------------------------------------------------------------

class Queue:
    """A named queue on a daemon. Nothing is sent until a method is called;
    the first put creates the queue (or configure() does, with settings)."""

    def __init__(self, name, client=None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"bad queue name {name!r}")
        self.name = name
        self.client = client or default_client()
        self._path = f"{API}/{urllib.parse.quote(name, safe='')}"

    def __repr__(self):
        return f"Queue({self.name!r}, {self.client.url!r})"

    def _call(self, method, sub="", body=None, query=None, timeout=None):
        return self.client.request(method, self._path + sub, body=body, query=query, timeout=timeout)

    # -- adding --

    def put(self, elements, priority=0, seconds=None, due=None, key=None, policy=None):
        """Adds one element (a str) or many (an iterable of str, or of dicts
        in the API's put form {"element", "priority", "delay"|"due", "key",
        "policy"}). priority/seconds/due/key apply to the plain strings; a
        policy to them all (overwrite, keep-earliest, keep-existing: what a put
        of an element already there does). seconds: due that many seconds
        from now; due: an instant (datetime, Unix time or ISO string).

        Returns {"added","moved","kept","deferred","ids"} summed over the
        batches (also as attributes: r.added)."""
        if seconds is not None and due is not None:
            raise ValueError("give seconds or due, not both")
        if policy is not None and policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        extra = {}
        if priority:
            extra["priority"] = int(priority)
        if seconds:
            extra["delay"] = seconds
        if due is not None:
            extra["due"] = format_time(due)
        if key is not None:
            extra["key"] = key
        entries = []
        for e in _as_list(elements, (str, bytes, dict)):
            if isinstance(e, bytes):
                e = e.decode("utf-8")
            if isinstance(e, str):
                entries.append({"element": e, **extra} if extra else e)
            elif isinstance(e, dict):
                if "element" not in e:
                    raise ValueError(f"a put entry needs an element: {e!r}")
                entry = dict(e)
                if "seconds" in entry:
                    entry["delay"] = entry.pop("seconds")
                if "due" in entry:
                    entry["due"] = format_time(entry["due"])
                entries.append(entry)
            else:
                raise TypeError(f"an element is a str, not {type(e).__name__}: {e!r}")
        total = Obj(added=0, moved=0, kept=0, deferred=0, ids=[])
        for chunk in _chunks(entries):
            body = {"elements": chunk}
            if policy is not None:
                body["policy"] = policy
            r = self._call("POST", "/put", body)
            for k in ("added", "moved", "kept", "deferred"):
                total[k] += r.get(k, 0) or 0
            total["ids"].extend(r.get("ids") or [])
        return total

    def schedule(self, element, seconds=0, priority=0, key=None, policy=None, due=None):
        """Puts one element, due in `seconds` (or at `due`). Returns put()'s
        result: r.added is 1 for an element the queue did not hold."""
        return self.put(element, priority=priority, seconds=seconds or None, due=due,
                        key=key, policy=policy)

    # -- taking --

    def take(self, n=1, visibility=None, wait=0, ack=None):
        """Takes up to n due elements (highest priority first, then earliest
        due) under leases of `visibility` seconds (default: the queue's).
        wait: seconds to wait for an element when none is due (0: answer at
        once). ack: Items or leases of this queue acked first, in the same
        request (a worker's loop: one request per element); leases no longer
        held are passed over, as ack() reports them. Returns a list of Item,
        maybe empty."""
        n = int(n)
        acks = [_lease_of(x) for x in _as_list(ack, (Item, str, dict))] if ack else []
        if len(acks) > BATCH_MAX:
            self.ack(acks[BATCH_MAX:])
            acks = acks[:BATCH_MAX]
        if n < 1:
            if acks:
                self.ack(acks)
            return []
        deadline = time.monotonic() + max(0.0, float(wait or 0))
        items = []
        while True:
            body = {"max": min(n - len(items), BATCH_MAX)}
            if acks:
                body["ack"], acks = acks, []
            if visibility is not None:
                body["visibility"] = visibility
            left = deadline - time.monotonic()
            w = min(left, TAKE_WAIT_MAX) if left > 0 and not items else 0
            if w > 0:
                body["wait"] = w
            r = self._call("POST", "/take", body, timeout=self.client.timeout + w)
            got = [Item(raw, self) for raw in r.get("items") or []]
            items.extend(got)
            if len(items) >= n:
                return items
            if got and len(got) == body["max"]:
                continue  # a full batch: there may be more due
            if items or time.monotonic() >= deadline:
                return items

    # -- settling leases --

    def ack(self, items):
        """Ends deliveries: an Item, a lease string, or an iterable of them.
        Returns {"acked": n, "stale": [lease...]}: a stale lease is one no longer
        held (it ran out and the element was taken again, or was acked)."""
        leases = [_lease_of(x) for x in _as_list(items, (Item, str, dict))]
        total = Obj(acked=0, stale=[])
        for chunk in _chunks(leases):
            r = self._call("POST", "/ack", {"leases": chunk})
            total["acked"] += r.get("acked", 0) or 0
            total["stale"].extend(r.get("stale") or [])
        return total

    def nack(self, items, delay=None, retry_after=None, error=None, release=False):
        """Gives elements back: due again after `delay` seconds (default: the
        queue's exponential backoff), or dead after max_deliveries.
        retry_after: the element's key takes nothing for that long (a 429 or
        Retry-After applies to the whole host). error: kept with the element.
        release=True: the delivery does not count (the worker stops before it
        tried): due at once unless a delay is given, and never dead.
        Returns {"nacked", "dead", "stale"}."""
        leases = [_lease_of(x) for x in _as_list(items, (Item, str, dict))]
        total = Obj(nacked=0, dead=0, stale=[])
        for chunk in _chunks(leases):
            body = {"leases": chunk}
            if delay is not None:
                body["delay"] = delay
            if retry_after is not None:
                body["retry_after"] = retry_after
            if error is not None:
                body["error"] = str(error)
            if release:
                body["release"] = True
            r = self._call("POST", "/nack", body)
            total["nacked"] += r.get("nacked", 0) or 0
            total["dead"] += r.get("dead", 0) or 0
            total["stale"].extend(r.get("stale") or [])
        return total

    def extend(self, items, visibility=None):
        """Renews leases for `visibility` seconds from now (default: the
        queue's). Returns {"extended", "stale"}."""
        leases = [_lease_of(x) for x in _as_list(items, (Item, str, dict))]
        total = Obj(extended=0, stale=[])
        for chunk in _chunks(leases):
            body = {"leases": chunk}
            if visibility is not None:
                body["visibility"] = visibility
            r = self._call("POST", "/extend", body)
            total["extended"] += r.get("extended", 0) or 0
            total["stale"].extend(r.get("stale") or [])
        return total

    # -- the queue --

    def info(self):
        """The queue: its settings and `stats`. QueueNotFound if it does not exist."""
        return self._call("GET")

    def stats(self):
        """{"size","waiting","past_due","inflight","dead","done","oldest_due","keys"}."""
        return self.info().get("stats") or Obj()

    def exists(self):
        try:
            self.info()
        except QueueNotFound:
            return False
        return True

    def configure(self, **settings):
        """Creates the queue if needed and sets any of its settings (paused,
        keep_done, visibility, max_deliveries, backoff, backoff_max,
        max_inflight, key_mode, key_inflight, key_rate, key_burst). Returns
        the queue."""
        return self._call("PUT", body=settings)

    def delete(self):
        return self._call("DELETE")

    def pause(self):
        """Take returns nothing until resume(); puts still land."""
        return self._call("POST", "/pause")

    def resume(self):
        return self._call("POST", "/resume")

    def items(self, state=None, key=None, prefix=None, limit=None, page=500):
        """Iterates over the queue's elements (Item), optionally of a state,
        key or element prefix, at most `limit` of them."""
        cursor = None
        seen = 0
        if isinstance(state, (list, tuple)):
            state = ",".join(state)
        while True:
            want = page if limit is None else min(page, limit - seen)
            if want <= 0:
                return
            r = self._call("GET", "/items", query={
                "state": state, "key": key, "prefix": prefix, "cursor": cursor, "limit": want})
            batch = r.get("items") or []
            for raw in batch:
                yield Item(raw, self)
            seen += len(batch)
            cursor = r.get("next_cursor")
            if not batch or not cursor:
                return

    def dead(self, limit=None):
        """The dead letters: a list of Item (each with its last error)."""
        return list(self.items(state="dead", limit=limit))

    @staticmethod
    def _filter(state, key, prefix, ids):
        body = {}
        if state is not None:
            body["state"] = list(state) if isinstance(state, (list, tuple, set)) else state
        if key is not None:
            body["key"] = key
        if prefix is not None:
            body["prefix"] = prefix
        if ids is not None:
            body["ids"] = [x.id if isinstance(x, Item) else int(x)
                           for x in _as_list(ids, (int, Item))]
        return body

    def requeue(self, state=None, key=None, prefix=None, ids=None, delay=None):
        """Makes elements waiting again (default: the dead ones), due after
        `delay` seconds. Returns how many."""
        body = self._filter(state, key, prefix, ids)
        if delay is not None:
            body["delay"] = delay
        return self._call("POST", "/requeue", body).get("requeued", 0)

    def purge(self, state=None, key=None, prefix=None, ids=None):
        """Deletes elements (with no filter: all of them). Returns how many."""
        return self._call("POST", "/purge", self._filter(state, key, prefix, ids)).get("purged", 0)


# ---- module-level shortcuts ----------------------------------------------

def _queue(queue, client):
    if isinstance(queue, Queue):
        return queue
    return Queue(queue, client=client)


def schedule(queue, element, seconds=0, priority=0, key=None, policy=None, due=None, client=None):
    """schedule("scrape_link", url, seconds=0): puts one element into a queue
    (a name or a Queue), due in `seconds`. Returns put()'s result."""
    return _queue(queue, client).schedule(element, seconds=seconds, priority=priority,
                                          key=key, policy=policy, due=due)


def put(queue, elements, client=None, **kw):
    return _queue(queue, client).put(elements, **kw)


def take(queue, n=1, visibility=None, wait=0, ack=None, client=None):
    return _queue(queue, client).take(n, visibility=visibility, wait=wait, ack=ack)


def _by_queue(items, queue, client):
    if queue is not None:
        return [(_queue(queue, client), _as_list(items, (Item, str, dict)))]
    groups = {}
    for x in _as_list(items, (Item, str, dict)):
        if not isinstance(x, Item) or x.queue is None:
            raise ValueError("a lease without its Item does not name its queue: pass queue=")
        groups.setdefault(id(x.queue), (x.queue, []))[1].append(x)
    return list(groups.values())


def ack(items, queue=None, client=None):
    """Acks Items (each knows its queue) or leases of `queue`."""
    total = Obj(acked=0, stale=[])
    for q, xs in _by_queue(items, queue, client):
        r = q.ack(xs)
        total["acked"] += r.acked
        total["stale"].extend(r.stale)
    return total


def nack(items, queue=None, delay=None, retry_after=None, error=None, release=False,
         client=None):
    total = Obj(nacked=0, dead=0, stale=[])
    for q, xs in _by_queue(items, queue, client):
        r = q.nack(xs, delay=delay, retry_after=retry_after, error=error, release=release)
        total["nacked"] += r.nacked
        total["dead"] += r.dead
        total["stale"].extend(r.stale)
    return total
