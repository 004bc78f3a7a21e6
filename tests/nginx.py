"""A real nginx in front of a daemon, for tests of spiderd behind a reverse proxy.

    from nginx import Nginx
    with Nginx(tmp_path / "nginx", upstream_port=d.port) as ngx:
        requests.get(ngx.url + "/daemonstatus.json")
    ngx = Nginx(dir, upstream_port=d.port, prefix="/spiderd").start()  # under /spiderd/
    ngx.requests()   # [(method, path, status)] from its access log so far
    ngx.stop()
    Nginx(dir, upstream="unix:/path/to/spiderd.sock:")  # to a Unix socket
    Nginx(dir, upstream_port=d.port, forwarded_for=False)  # a proxy that does not say

Debian's nginx (nginx-light) runs in the foreground (`daemon off;`) as a child
of the test, with everything it writes (pid, error and access logs, the
*_temp_path folders) inside its own directory, on a free port of 127.0.0.1.
It passes the client's address on as production configs do:
`X-Forwarded-For: $proxy_add_x_forwarded_for` (what the client sent, then the
address nginx saw), and with a prefix, `X-Forwarded-Prefix`.

Importable from tests/integration and tests/ui: both put tests/ on sys.path
(tests/integration/test_proxy.py does it itself).
"""

import os
import socket
import subprocess
import time

NGINX = os.environ.get("SPIDERD_NGINX", "/usr/sbin/nginx")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def available():
    return os.access(NGINX, os.X_OK)


class Nginx:
    def __init__(self, workdir, upstream_port=None, prefix="", upstream_host="127.0.0.1",
                 upstream=None, forwarded_for=True, extra_location=""):
        self.dir = os.path.abspath(str(workdir))
        # upstream: what follows "http://" in proxy_pass, e.g. "unix:/run/spiderd.sock:"
        self.upstream = upstream or f"{upstream_host}:{upstream_port}"
        self.forwarded_for = forwarded_for
        self.prefix = prefix.rstrip("/")
        self.extra_location = extra_location
        self.port = None
        self.proc = None
        self.conf_path = os.path.join(self.dir, "nginx.conf")
        self.error_log = os.path.join(self.dir, "error.log")
        self.access_log = os.path.join(self.dir, "access.log")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def _conf(self):
        d = self.dir
        # as root, nginx's workers would become "nobody", who may not enter a
        # test's temporary directory
        user = "user root;\n" if os.geteuid() == 0 else ""
        # without it nginx passes on whatever X-Forwarded-For the client sent
        xff = ("proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;"
               if self.forwarded_for else "")
        if self.prefix:
            location = f"""
        location {self.prefix}/ {{
            proxy_pass http://{self.upstream}/;
            proxy_set_header X-Forwarded-Prefix {self.prefix};
            {xff}
            proxy_set_header Host $http_host;
            proxy_buffering off;
        }}"""
        else:
            location = f"""
        location / {{
            proxy_pass http://{self.upstream};
            {xff}
            proxy_set_header Host $http_host;
            proxy_buffering off;
        }}"""
        return f"""{user}daemon off;
master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    log_format paths '$request_method $request_uri $status';
    access_log {d}/access.log paths;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    client_max_body_size 0;
    proxy_http_version 1.1;
    proxy_read_timeout 1h;  # event streams
    server {{
        listen 127.0.0.1:{self.port};
        {location}
        {self.extra_location}
    }}
}}
"""

    def start(self, seconds=15):
        os.makedirs(self.dir, exist_ok=True)
        last = ""
        for _ in range(3):  # a free port may be taken between the probe and nginx's bind
            self.port = _free_port()
            with open(self.conf_path, "w", encoding="utf-8") as f:
                f.write(self._conf())
            with open(os.path.join(self.dir, "nginx.stderr"), "ab") as err:
                self.proc = subprocess.Popen(
                    [NGINX, "-p", self.dir + "/", "-c", self.conf_path, "-e", self.error_log],
                    stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT,
                    start_new_session=True)
            if self._wait_listening(seconds):
                return self
            last = self.log_tail()
            self.stop()
        raise AssertionError(f"nginx did not start:\n{last}")

    def _wait_listening(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def log_tail(self, n=4000):
        text = ""
        for name in ("nginx.stderr", "error.log"):
            p = os.path.join(self.dir, name)
            if os.path.exists(p):
                with open(p, encoding="utf-8", errors="replace") as f:
                    text += f"--- {name}\n" + f.read()[-n:]
        return text

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()  # nginx's fast shutdown
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self):
        return self.start() if self.proc is None else self

    def __exit__(self, *exc):
        self.stop()
        return False

    def requests(self):
        """(method, path with query, status) of every request logged so far
        (a request is logged once its answer is done)."""
        out = []
        try:
            with open(self.access_log, encoding="utf-8", errors="replace") as f:
                for line in f:
                    method, path, status = line.split()
                    out.append((method, path, int(status)))
        except FileNotFoundError:
            pass
        return out
