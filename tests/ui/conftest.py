"""Fixtures for the console's browser tests: a real spiderd (the integration
suite's Daemon, imported from tests/integration), real eggs and crawls, and
headless Chromium driven by Debian's python3-selenium through
/usr/bin/chromedriver.

    console          (module) a started daemon with testproj deployed, and
                     `console.url` where the browser opens the console
    browser          (session) a Chromium WebDriver; `browser_errors(drv)`
                     returns the SEVERE browser-log lines since the last call
    shot(name)       saves a screenshot to build/ui-shots/<name>.png

The console is served by the daemon itself when it serves ui/dist/ (GET /ui/
answers the console's index.html). A daemon built without that gets a small
same-origin front server here: ui/dist/ as the daemon would serve it, every
other path passed through to the daemon (the event stream too), so the pages
still talk to the real API.
"""

import http.client
import http.server
import os
import shutil
import sys
import threading
import time
import urllib.parse

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "tests"))  # tests/nginx.py


def _load_integration():
    # tests/integration/conftest.py under its own name (this file is "conftest" too)
    import importlib.util
    path = os.path.join(ROOT, "tests", "integration", "conftest.py")
    spec = importlib.util.spec_from_file_location("spiderd_integration", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["spiderd_integration"] = mod
    spec.loader.exec_module(mod)
    return mod


_it = _load_integration()  # the integration suite's daemon, eggs and helpers
Daemon, DaemonFactory, unique, wait_for = _it.Daemon, _it.DaemonFactory, _it.unique, _it.wait_for
egg, egg_bytes, spiderd = _it.egg, _it.egg_bytes, _it.spiderd  # its fixtures, shared as they are

DIST = os.environ.get("SPIDERD_UI_DIST", os.path.join(ROOT, "ui", "dist"))
SHOTS = os.path.join(ROOT, "build", "ui-shots")
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"

pytest_runtest_makereport = _it.pytest_runtest_makereport
pytest_sessionfinish = _it.pytest_sessionfinish


# ---- the front server (for a daemon that does not serve ui/dist/) ----------

class _Front(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream = None  # (host, port)

    def log_message(self, *a):
        pass

    def _static(self, path):
        p = urllib.parse.urlsplit(self.path).path
        if p.startswith("/ui/") or p == "/ui":
            rel = p[4:] or "index.html"
            f = os.path.join(DIST, "console", rel)
            if not os.path.isfile(f) and "." not in os.path.basename(rel):
                f = os.path.join(DIST, "console", "index.html")
        elif p.startswith("/docs"):
            name = p[6:] or "index"
            f = os.path.join(DIST, "docs", name if name.endswith(".html") else name + ".html")
        else:  # /api/ (the Swagger UI), never /api/v1
            rel = p[5:] or "index.html"
            f = os.path.join(DIST, "api", rel)
        f = os.path.realpath(f)
        if not f.startswith(os.path.realpath(DIST)) or not os.path.isfile(f):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(f, "rb") as fh:
            data = fh.read()
        types = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css",
                 ".png": "image/png", ".json": "application/json"}
        self.send_response(200)
        self.send_header("Content-Type", types.get(os.path.splitext(f)[1], "application/octet-stream"))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _proxy(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        conn = http.client.HTTPConnection(*self.upstream, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "accept-encoding")}
        conn.request(self.command, self.path, body=body, headers=headers)
        r = conn.getresponse()
        self.send_response(r.status)
        chunked = r.getheader("Content-Length") is None
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", r.getheader("Content-Length"))
        self.end_headers()
        try:
            while True:
                chunk = r.read1(65536) if chunked else r.read(65536)
                if not chunk:
                    break
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:
                    self.wfile.write(chunk)
                self.wfile.flush()
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            conn.close()

    def _route(self):
        p = urllib.parse.urlsplit(self.path).path
        if (p == "/ui" or p.startswith(("/ui/", "/docs")) or (p.startswith("/api/") and not p.startswith("/api/v1"))) \
                and self.command in ("GET", "HEAD"):
            return self._static(p)
        return self._proxy()

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _route


def serves_console(d):
    try:
        r = d.get("/ui/", timeout=5)
        return r.status_code == 200 and "spiderd console" in r.text
    except Exception:
        return False


def console_url(d, servers):
    """Where the browser opens the console for daemon d."""
    if serves_console(d):
        return d.url
    handler = type("Front", (_Front,), {"upstream": ("127.0.0.1", d.port)})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    servers.append(srv)
    return f"http://127.0.0.1:{srv.server_address[1]}"


# ---- fixtures ------------------------------------------------------------

@pytest.fixture(scope="session", autouse=True)
def _dist():
    if not os.path.isfile(os.path.join(DIST, "console", "index.html")):
        pytest.exit(f"{DIST} is not built: run `make ui` first", 2)


@pytest.fixture(scope="module")
def console(tmp_path_factory, egg):
    factory = DaemonFactory(tmp_path_factory.mktemp("ui"))
    servers = []
    d = factory(scrapyd={"max_proc": 4, "items_dir": "items"}, spiderd={"cancel_grace": 5})
    d.upload("testproj", "1", egg("testproj"))
    d.console = console_url(d, servers)
    yield d
    for s in servers:
        s.shutdown()
    factory.close()


@pytest.fixture(scope="session")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,900", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-component-update"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()


def browser_errors(drv):
    """SEVERE entries of the browser's console log since the last call."""
    return [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]


@pytest.fixture(scope="session")
def shot():
    os.makedirs(SHOTS, exist_ok=True)

    def save(drv, name):
        """The whole page, beyond the window's height (Chromium's own capture)."""
        import base64
        path = os.path.join(SHOTS, f"{name}.png")
        w, h = drv.execute_script("return [document.documentElement.clientWidth,"
                                  " Math.min(document.documentElement.scrollHeight, 6000)]")
        png = drv.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}})
        with open(path, "wb") as f:
            f.write(base64.b64decode(png["data"]))
        return path
    return save


def set_theme(drv, theme):
    """The console's theme as its toggle leaves it (localStorage), applied."""
    drv.execute_script(
        "localStorage.setItem('spiderd.theme', arguments[0]);"
        "document.documentElement.setAttribute('data-theme', arguments[0]);", theme)


def wait_text(drv, css, text, seconds=15):
    """Waits until the element matching css contains text; returns the element."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    def check():
        try:
            el = drv.find_element("css selector", css)
            return el if text in el.text else None
        except (NoSuchElementException, StaleElementReferenceException):
            return None
    return wait_for(check, seconds, f"{text!r} in {css}", interval=0.1)


def wait_css(drv, css, seconds=15):
    def check():
        els = drv.find_elements("css selector", css)
        return els[0] if els else None
    return wait_for(check, seconds, f"an element {css}", interval=0.1)
