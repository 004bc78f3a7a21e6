"""Fixtures for the integration suite: a real spiderd, real HTTP, real Scrapy.

`spiderd` (per test) and `module_spiderd` (per module) are factories:

    d = spiderd()                                  # default config, started
    d = spiderd(scrapyd={"max_proc": 1, "items_dir": "items"},
                spiderd={"cancel_grace": 2}, env={...})
    d.restart(); d.kill9(); d.start(); d.stop()

Each daemon runs `$SPIDERD_BIN serve` in a fresh directory holding its
scrapyd.conf, with SPIDERD_CONFIG_FILES pointing at it (so /etc and ~ are not
read) and a free TCP port. Its stdout and stderr go to `spiderd.stderr` in
that directory; the tail is attached to the report of a failing test. At
teardown every daemon is stopped with SIGTERM and must exit 0; its stderr
must hold no sanitizer report; crawl processes left behind (the daemon's
children run in the daemon's directory) are killed by pid.
"""

import ctypes
import datetime
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time
import uuid

import pytest
import requests

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _with_parent(then):
    """A daemon goes with the pytest process that started it (SIGTERM when
    its parent dies): a run stopped by -x or killed leaves no daemon behind
    to load the runs after it. Then `then`, if any."""
    def preexec():
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if then:
            then()
    return preexec


BIN = os.environ.get("SPIDERD_BIN", "/work/main/build/spiderd")
SANITIZED = os.environ.get("SPIDERD_SANITIZED") == "1"
# Everything that waits is scaled by this: an ASan build starts and serves slower.
SLOW = 4.0 if SANITIZED else 1.0
PYTHON = "/usr/bin/python3"
NODE = "testnode"

GET_ENDPOINTS = ["daemonstatus.json", "listprojects.json", "listversions.json",
                 "listspiders.json", "listjobs.json", "status.json"]
POST_ENDPOINTS = ["addversion.json", "schedule.json", "cancel.json",
                  "delversion.json", "delproject.json"]
ENDPOINTS = GET_ENDPOINTS + POST_ENDPOINTS

# The spiders of tests/integration/projects/testproj, as `scrapy list` prints them.
TESTPROJ_SPIDERS = ["crash", "envdump", "fail", "flaky", "hang", "marker", "metaset", "queueput",
                    "quick", "slow"]

# The store every daemon uses unless a test sets its own: a URL template whose
# "{}" becomes a name unique to the daemon's directory (a PostgreSQL schema),
# e.g. postgresql://postgres@127.0.0.1:5432/spiderd?schema=d{} (make test-pg).
# Unset: each daemon's own SQLite file.
STORE_TMPL = os.environ.get("SPIDERD_TEST_STORE_URL", "")
SHARED_STORE = STORE_TMPL.startswith(("postgres", "redis"))


def store_url(key):
    """The shared store's URL for `key` (daemons with one key share a store)."""
    import hashlib
    return STORE_TMPL.replace("{}", "d" + hashlib.sha1(key.encode()).hexdigest()[:16])


class _PgDB:
    """A PostgreSQL store opened like the tests open SQLite: execute() with
    '?' placeholders, rows readable by index and by name, autocommit."""

    def __init__(self, url):
        import urllib.parse

        import psycopg2
        import psycopg2.extras
        u = urllib.parse.urlsplit(url)
        q = urllib.parse.parse_qs(u.query)
        schema = q.pop("schema", [None])[0]
        dsn = urllib.parse.urlunsplit(u._replace(query=urllib.parse.urlencode(q, doseq=True)))
        self.con = psycopg2.connect(dsn, cursor_factory=psycopg2.extras.DictCursor)
        self.con.autocommit = True
        if schema:
            self.con.cursor().execute(f'SET search_path TO "{schema}"')

    class _Cursor:
        def __init__(self, cur, lastrowid):
            self.cur, self.lastrowid = cur, lastrowid

        def fetchone(self):
            return self.cur.fetchone()

        def fetchall(self):
            return self.cur.fetchall()

        def __iter__(self):
            return iter(self.cur.fetchall())

    def execute(self, sql, params=()):
        cur = self.con.cursor()
        sql = sql.replace("?", "%s")
        # SQLite's lastrowid: the new row's id, for tables that have one.
        m = re.match(r"\s*INSERT INTO (jobs|events|schedules|runs)\b", sql, re.I)
        if m and "RETURNING" not in sql.upper():
            cur.execute(sql + " RETURNING id", tuple(params))
            return self._Cursor(cur, cur.fetchone()[0])
        cur.execute(sql, tuple(params))
        return self._Cursor(cur, None)

    def commit(self):
        pass

    def close(self):
        self.con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")

TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{6})?$")

_live = []  # daemons alive in the current test (their stderr goes to failure reports)


def timeout(seconds):
    return seconds * SLOW


def wait_for(predicate, seconds, what, interval=0.05):
    """Polls predicate() until it returns something truthy; returns that."""
    deadline = time.monotonic() + timeout(seconds)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout(seconds):.0f}s waiting for {what}")
        time.sleep(interval)


def snapshot(root):
    """Every path below root, relative to it."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_time(text):
    """A listjobs time: str(datetime) of naive local time."""
    assert TIME_RE.match(text), f"bad time format {text!r}"
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
    return datetime.datetime.strptime(text, fmt)


# ---- exact JSON ----------------------------------------------------------

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\s+|.')


def _tokens(text):
    # Float literals may legitimately differ in spelling (C vs Python repr);
    # everything else (separators, escapes, key order, spacing) must not.
    out = []
    for tok in _TOKEN.findall(text):
        if tok[0] in "-0123456789" and any(c in tok for c in ".eE"):
            out.append("<float>")
        else:
            out.append(tok)
    return out


def assert_python_json(body: bytes):
    """body is exactly what Python's json.dumps (default separators ", " and
    ": ", ASCII with lowercase \\uXXXX escapes) + "\\n" would produce."""
    assert body.endswith(b"\n"), f"JSON body must end with a newline: {body[-40:]!r}"
    text = body.decode("ascii")  # non-ASCII must be escaped
    obj = json.loads(text)
    canonical = json.dumps(obj) + "\n"
    assert _tokens(text) == _tokens(canonical), (
        f"not Python's JSON serialisation:\n got: {text!r}\nwant: {canonical!r}")
    return obj


def ok_body(fields, node=NODE):
    return (json.dumps({**fields, "status": "ok", "node_name": node}) + "\n").encode()


def error_body(message, node=NODE):
    return (json.dumps({"status": "error", "message": message, "node_name": node}) + "\n").encode()


def check_cors(resp, verb):
    h = resp.headers
    assert h.get("Access-Control-Allow-Origin") == "*"
    assert h.get("Access-Control-Allow-Methods") == f"OPTIONS, HEAD, {verb}"
    assert h.get("Access-Control-Allow-Headers") == "X-Requested-With"


def endpoint_verb(endpoint):
    return "GET" if endpoint in GET_ENDPOINTS else "POST"


# ---- HTTP over a Unix socket and raw -------------------------------------

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def raw_request(port, data: bytes, read_timeout=10.0):
    """Sends bytes as they are and returns everything the server sends until
    it closes (or the timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout(read_timeout)) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered (or gave up) before reading everything
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except socket.timeout:
            pass
        except ConnectionResetError:
            pass
    return b"".join(chunks)


# ---- the daemon ----------------------------------------------------------

def _write_conf(path, sections):
    lines = []
    for name, values in sections.items():
        if values is None:
            continue
        lines.append(f"[{name}]")
        for key, value in values.items():
            if value is None:
                continue
            lines.append(f"{key} = {value}".rstrip())
        lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def _pids_with_cwd(directory):
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


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


class Daemon:
    def __init__(self, workdir, scrapyd=None, spiderd=None, services=None,
                 settings=None, env=None, extra_conf=""):
        self.workdir = str(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.conf_path = os.path.join(self.workdir, "scrapyd.conf")
        self.stderr_path = os.path.join(self.workdir, "spiderd.stderr")
        self.port = free_port()
        self.scrapyd = {
            "bind_address": "127.0.0.1",
            "http_port": self.port,
            "node_name": NODE,
            "max_proc": 4,
            "eggs_dir": "eggs",
            "logs_dir": "logs",
            "dbs_dir": "dbs",
        }
        self.scrapyd.update(scrapyd or {})
        self.spiderd = {
            "python": PYTHON,
            "cancel_grace": 10,
            "shutdown_grace": 5,
            # No drain before a stop (test_drain.py sets its own): every
            # other test stops its crawls at once, as before drains existed.
            "drain_grace": 0,
            "max_upload": 1048576,
        }
        self.spiderd.update(spiderd or {})
        if STORE_TMPL and "store" not in self.spiderd:
            self.spiderd["store"] = store_url(self.workdir)
        self.services = services
        self.settings = settings
        self.extra_conf = extra_conf
        self.env_extra = env or {}
        self.proc = None
        self.last = None  # the last API response (for exact-bytes checks)
        self.starts = 0
        self.session = self.new_session()
        self.auth = None
        if self.scrapyd.get("username") and self.scrapyd.get("password"):
            self.auth = (self.scrapyd["username"], self.scrapyd["password"])
        self.write_conf()

    @staticmethod
    def new_session():
        s = requests.Session()
        s.trust_env = False  # no proxies, no ~/.netrc credentials
        # The daemon gzips answers of 1 KiB and more for clients that take
        # it: the suite reads identity bytes unless a test asks for gzip
        # (test_gzip.py), so Content-Length and exact-bytes checks see the
        # body as sent.
        s.headers["Accept-Encoding"] = "identity"
        return s

    # -- configuration and process --

    @property
    def node(self):
        return self.scrapyd.get("node_name") or socket.gethostname()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def write_conf(self):
        _write_conf(self.conf_path, {
            "scrapyd": self.scrapyd, "spiderd": self.spiderd,
            "services": self.services, "settings": self.settings})
        if self.extra_conf:
            with open(self.conf_path, "a", encoding="utf-8") as f:
                f.write("\n" + self.extra_conf + "\n")

    def environ(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SCRAPYD_", "SPIDERD_", "SCRAPY_"))}
        env["SPIDERD_CONFIG_FILES"] = self.conf_path
        env.update(self.env_extra)
        return env

    def spawn(self):
        if not os.path.exists(BIN):
            raise AssertionError(f"spiderd binary {BIN} does not exist (set SPIDERD_BIN)")
        self.starts += 1
        with open(self.stderr_path, "ab") as f:
            f.write(f"==== spiderd start #{self.starts} ====\n".encode())
            self.proc = subprocess.Popen(
                [BIN, "serve"], cwd=self.workdir, env=self.environ(),
                stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_with_parent(self.preexec()))
        if self not in _live:
            _live.append(self)
        return self.proc

    def start(self):
        self.spawn()
        deadline = time.monotonic() + timeout(15)
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise AssertionError(
                    f"spiderd exited with {rc} during start-up:\n{self.stderr_tail()}")
            try:
                r = self.session.get(self.url + "/daemonstatus.json", auth=self.auth, timeout=2)
                if r.status_code in (200, 401):
                    return self
            except requests.ConnectionError:
                pass
            except requests.Timeout:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"spiderd did not answer within {timeout(15)}s:\n{self.stderr_tail()}")
            time.sleep(0.05)

    def preexec(self):
        """What the daemon's process runs between fork and exec (None:
        nothing); a subclass starts it in a cgroup, say."""
        return None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, wait=None, check=True):
        """Signals the daemon and waits for it; returns its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        grace = float(self.spiderd.get("drain_grace") or 0) + \
            float(self.spiderd.get("shutdown_grace") or 10)
        limit = wait if wait is not None else timeout(grace + 20)
        try:
            rc = self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            raise AssertionError(f"spiderd did not exit within {limit}s of signal {sig}:\n{self.stderr_tail()}")
        self.proc = None
        self.session.close()
        self.session = self.new_session()
        self.check_sanitizer()
        if check:
            assert rc == 0, f"spiderd exited with {rc} after signal {sig}:\n{self.stderr_tail()}"
        return rc

    def kill9(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.session.close()
        self.session = self.new_session()

    def restart(self):
        self.stop()
        return self.start()

    def stderr_text(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stderr_tail(self, n=12000):
        return self.stderr_text()[-n:]

    def check_sanitizer(self):
        bad = [line for line in self.stderr_text().splitlines()
               if any(m in line for m in SANITIZER_MARKERS)]
        assert not bad, "sanitizer report in spiderd's stderr:\n" + "\n".join(bad[:20]) + \
            "\n----\n" + self.stderr_tail()

    def kill_strays(self):
        for pid in _pids_with_cwd(self.workdir):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def close(self):
        try:
            if self.running():
                self.stop()
            else:
                self.check_sanitizer()
        finally:
            self.kill_strays()
            self.session.close()
            if self in _live:
                _live.remove(self)

    # -- the store, read directly --

    def db(self):
        """A connection to this daemon's store (SQLite file or PostgreSQL)."""
        store = self.spiderd.get("store") or ""
        if store.startswith("postgres"):
            return _PgDB(store)
        if store.startswith("redis"):
            pytest.skip("reads the store's tables directly: SQLite and PostgreSQL only")
        import sqlite3
        con = sqlite3.connect(self.path("dbs", "spiderd.db"), timeout=30)
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA busy_timeout = 30000")
        return con

    def sql(self, query, *args):
        """Rows of a query on this daemon's store, as dicts."""
        con = self.db()
        try:
            return [dict(r) for r in con.execute(query, args).fetchall()]
        finally:
            con.close()

    # -- paths --

    def path(self, *parts):
        return os.path.join(self.workdir, *parts)

    def abs_dir(self, key):
        value = self.scrapyd.get(key)
        return value if os.path.isabs(value) else os.path.join(self.workdir, value)

    def log_path(self, project, spider, job):
        return os.path.join(self.abs_dir("logs_dir"), project, spider, f"{job}.log")

    def items_path(self, project, spider, job):
        return os.path.join(self.abs_dir("items_dir"), project, spider, f"{job}.jl")

    # -- HTTP --

    def request(self, method, path, **kw):
        kw.setdefault("timeout", timeout(30))
        kw.setdefault("allow_redirects", False)
        if self.auth is not None:
            kw.setdefault("auth", self.auth)
        return self.session.request(method, self.url + path, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def call(self, endpoint, params=None, data=None, files=None, method=None, **kw):
        """Calls an API endpoint and checks the Scrapyd envelope: HTTP 200,
        JSON headers, CORS headers, Content-Length, Python's JSON layout,
        status/node_name last. Returns the parsed object."""
        verb = endpoint_verb(endpoint)
        method = method or verb
        if method == "GET" and data is None and files is None:
            resp = self.request("GET", "/" + endpoint, params=params, **kw)
        else:
            resp = self.request(method, "/" + endpoint, params=params, data=data, files=files, **kw)
        return self.check_api_response(resp, verb)

    def check_api_response(self, resp, verb):
        self.last = resp
        assert resp.status_code == 200, f"HTTP {resp.status_code}: {resp.content[:300]!r}"
        assert resp.headers.get("Content-Type") == "application/json"
        check_cors(resp, verb)
        assert resp.headers.get("Content-Length") == str(len(resp.content))
        obj = assert_python_json(resp.content)
        keys = list(obj)
        if obj.get("status") == "error":
            assert keys == ["status", "message", "node_name"], keys
        else:
            assert obj.get("status") == "ok", obj
            assert keys[-2:] == ["status", "node_name"], keys
        assert obj["node_name"] == self.node
        return obj

    def api(self, endpoint, **params):
        """A call that must succeed; GET endpoints take a query string, POST
        endpoints a url-encoded body. A list value repeats the parameter."""
        if endpoint_verb(endpoint) == "GET":
            obj = self.call(endpoint, params=params)
        else:
            obj = self.call(endpoint, data=_form(params))
        assert obj["status"] == "ok", f"{endpoint} {params}: {obj}"
        return obj

    def api_error(self, endpoint, **params):
        if endpoint_verb(endpoint) == "GET":
            obj = self.call(endpoint, params=params)
        else:
            obj = self.call(endpoint, data=_form(params))
        assert obj["status"] == "error", f"{endpoint} {params} should fail: {obj}"
        return obj["message"]

    # -- Scrapyd operations --

    def upload(self, project, version, egg_file, check=True):
        with open(egg_file, "rb") as f:
            data = f.read()
        obj = self.call("addversion.json", data={"project": project, "version": version},
                        files={"egg": ("project.egg", data)})
        if check:
            assert obj["status"] == "ok", obj
        return obj

    def schedule(self, project, spider, settings=(), **args):
        form = [("project", project), ("spider", spider)]
        form += [("setting", s) for s in settings]
        form += [(k, str(v)) for k, v in args.items()]
        obj = self.call("schedule.json", data=form)
        assert obj["status"] == "ok", f"schedule {spider} {args}: {obj}"
        return obj["jobid"]

    def cancel(self, project, job, sig=None):
        params = {"project": project, "job": job}
        if sig is not None:
            params["signal"] = sig
        return self.api("cancel.json", **params)["prevstate"]

    def listjobs(self, project=None):
        return self.api("listjobs.json", **({"project": project} if project else {}))

    def find(self, job, listing=None):
        """(section, entry) of the job in listjobs, running first, or (None, None)."""
        lj = listing or self.listjobs()
        for section in ("running", "pending", "finished"):
            for entry in lj[section]:
                if entry["id"] == job:
                    return section, entry
        return None, None

    def wait_running(self, job, seconds=20):
        def check():
            section, entry = self.find(job)
            if section == "finished":
                raise AssertionError(f"job {job} finished before it was seen running: {entry}")
            # A claimed job is listed running a moment before its process
            # is recorded (pid null): wait for the process.
            return entry if section == "running" and entry.get("pid") else None
        return wait_for(check, seconds, f"job {job} to run")

    def wait_finished(self, job, seconds=40):
        def check():
            section, entry = self.find(job)
            return entry if section == "finished" else None
        return wait_for(check, seconds, f"job {job} to finish", interval=0.1)

    def wait_log(self, project, spider, job, text, seconds=20):
        path = self.log_path(project, spider, job)

        def check():
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    return text in f.read()
            except OSError:
                return False
        return wait_for(check, seconds, f"{text!r} in {path}", interval=0.1)

    def wait_crawling(self, project, spider, job, seconds=30):
        """Waits until the crawl has downloaded a page; the job must run
        with setting LOG_LEVEL=DEBUG. By then Scrapy's reactor runs and its
        SIGINT/SIGTERM handlers are in place ("Spider opened" comes earlier,
        and a signal then kills the process outright)."""
        return self.wait_log(project, spider, job, "DEBUG: Crawled (200)", seconds)

    def read_log(self, project, spider, job):
        with open(self.log_path(project, spider, job), encoding="utf-8", errors="replace") as f:
            return f.read()


def _form(params):
    form = []
    for k, v in params.items():
        if isinstance(v, (list, tuple)):
            form += [(k, x) for x in v]
        elif v is not None:
            form.append((k, v))
    return form


class DaemonFactory:
    def __init__(self, base):
        self.base = str(base)
        self.daemons = []

    def __call__(self, start=True, name=None, **kw):
        name = name or f"d{len(self.daemons)}"
        d = Daemon(os.path.join(self.base, name), **kw)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def close(self):
        errors = []
        for d in self.daemons:
            try:
                d.close()
            except AssertionError as e:
                errors.append(str(e))
        if errors:
            raise AssertionError("\n\n".join(errors))


@pytest.fixture
def spiderd(tmp_path):
    factory = DaemonFactory(tmp_path)
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def module_spiderd(tmp_path_factory):
    factory = DaemonFactory(tmp_path_factory.mktemp("mod"))
    yield factory
    factory.close()


@pytest.fixture
def own_pg():
    """(url, dir) of a PostgreSQL server of the test's own (tests/pgserver.sh),
    for tests that restart or stop their server: the suite's shared one
    serves other modules at the same time."""
    import tempfile
    top = tempfile.mkdtemp(prefix="spiderd-ownpg-")  # pytest's tmp is root-only:
    os.chmod(top, 0o755)                             # postgres must reach it
    server = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pgserver.sh")
    d = os.path.join(top, "srv")
    url = subprocess.run([server, "start", d], check=True, capture_output=True,
                         text=True).stdout.strip()
    try:
        yield url, d
    finally:
        subprocess.run([server, "stop", d], check=False)
        os.rmdir(top)


@pytest.fixture(scope="session")
def egg(tmp_path_factory):
    """egg(name) -> path of the built egg of tests/integration/projects/<name>."""
    import eggs

    dest = str(tmp_path_factory.mktemp("eggs"))
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = eggs.build_egg(name, dest)
        return cache[name]
    return get


@pytest.fixture(scope="session")
def egg_bytes(egg):
    def get(name):
        with open(egg(name), "rb") as f:
            return f.read()
    return get


def unique(prefix="j"):
    return f"{prefix}{uuid.uuid4().hex[:10]}"


# The modules that take longest, slowest first (measured with --durations
# under ASan). The suite runs its modules in parallel (pytest-xdist,
# --dist loadfile hands out whole modules in collection order), so these
# start first and the run does not end waiting on one of them.
SLOW_MODULES = ["test_warm.py", "test_openapi_walk.py", "test_drain.py", "test_faults.py",
                "test_outage.py", "test_cluster.py", "test_unique_jobs.py", "test_robust.py",
                "test_queue_python.py", "test_schedules.py", "test_objstore.py",
                "test_objstore_eggs.py"]


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        name = os.path.basename(str(item.fspath))
        return SLOW_MODULES.index(name) if name in SLOW_MODULES else len(SLOW_MODULES)
    items.sort(key=rank)  # stable: the order within a module is kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for d in list(_live):
            report.sections.append(
                (f"spiderd stderr ({d.workdir}, last 12 KB)", d.stderr_tail()))


def pytest_sessionfinish(session, exitstatus):
    # Crawls of daemons that a failing test left behind.
    for d in list(_live):
        try:
            if d.proc is not None and d.proc.poll() is None:
                d.proc.kill()
        finally:
            d.kill_strays()



def need(ok, why):
    """Guards a test on what this machine can do (root, a mount, a cgroup, a
    program): without it the test is skipped, except under CI=true, where a
    promise that cannot be tested fails the run instead of passing it."""
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and this machine cannot run the test: {why}", pytrace=False)
    pytest.skip(why)


# ---- the native API, as the test modules call it ----------------------------

API = "/api/v1"


def req(d, method, path, **kw):
    """A request to the native API (path after /api/v1) of daemon d."""
    return d.request(method, API + path, **kw)


def ok(r, status=200):
    """A native API success: the status, the CORS header every reply has,
    JSON (none for 204); returns the body."""
    assert r.status_code == status, f"{r.status_code}: {r.text[:500]}"
    assert r.headers.get("Access-Control-Allow-Origin") == "*"
    if status == 204:
        assert r.content == b""
        return None
    assert r.headers.get("Content-Type") == "application/json"
    return r.json()


def err(r, status, code, field=None):
    """The native API's one error shape, {"error": {code, message, details}},
    with this status and code (and details.field when given); returns the
    message."""
    assert r.status_code == status, f"{r.status_code}: {r.text[:500]}"
    assert r.headers.get("Content-Type") == "application/json"
    assert r.headers.get("Access-Control-Allow-Origin") == "*"
    body = r.json()
    assert list(body) == ["error"], body
    e = body["error"]
    assert list(e) == ["code", "message", "details"], e
    assert e["code"] == code, e
    assert isinstance(e["message"], str) and e["message"]
    assert isinstance(e["details"], dict)
    if field is not None:
        assert e["details"].get("field") == field, e
    return e["message"]


def rest(d, method, path, status=200, **kw):
    """A native API call that must answer status; its JSON body, or None
    when it has none."""
    r = d.request(method, API + path, **kw)
    assert r.status_code == status, f"{r.status_code}: {r.text[:500]}"
    return r.json() if r.content else None


def get_job(d, ident):
    return ok(req(d, "GET", f"/jobs/{ident}"))


def cursor_pages(d, path, **params):
    """Every page of a cursor-paged list (GET path with params, then its
    next_cursor until there is none), as the bodies, in order."""
    cursor = None
    while True:
        p = dict(params)
        if cursor:
            p["cursor"] = cursor
        body = ok(req(d, "GET", path, params=p))
        yield body
        cursor = body["next_cursor"]
        if not cursor:
            return


def all_pages(d, path, key, **params):
    """The elements (body[key]) of every page of a cursor-paged list."""
    return [x for page in cursor_pages(d, path, **params) for x in page[key]]


def bearer(token):
    return {"Authorization": "Bearer " + token}


def make_token(d, role, headers=None, auth=None, **kw):
    """POST /tokens (as the admin, or with headers or auth); the new token."""
    r = d.request("POST", API + "/tokens", json=dict(kw, role=role), headers=headers or {},
                  **({"auth": auth} if auth else {}))
    assert r.status_code == 201, r.text
    return r.json()


def now_ms():
    return int(time.time() * 1000)


def read_json_lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
