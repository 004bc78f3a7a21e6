"""A throwaway nginx (Debian's nginx-light) in front of a daemon, for the
console's tests behind a reverse proxy's path prefix:

    with Nginx(workdir, upstream_port, prefix="/spiderd") as n:
        n.url          # http://127.0.0.1:PORT (the browser opens n.url + "/spiderd/ui/")
        n.requests()   # [(method, path, status)] from its access log so far

Its own directory, port, pid file and temp paths: nothing shared with any
other test or with a system nginx."""

import os
import socket
import subprocess
import time

NGINX = "/usr/sbin/nginx"

CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 512; }}
http {{
    log_format paths '$request_method $request_uri $status';
    access_log {dir}/access.log paths;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location {prefix}/ {{
            proxy_pass http://127.0.0.1:{upstream}/;
            proxy_set_header X-Forwarded-Prefix {prefix};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            # the event stream goes out as it comes
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
    }}
}}
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    def __init__(self, workdir, upstream_port, prefix="/spiderd"):
        self.dir = os.path.abspath(str(workdir))
        os.makedirs(self.dir, exist_ok=True)
        self.port = _free_port()
        self.prefix = prefix
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            # one process (no master): it runs as whoever starts it, and a
            # SIGTERM ends it
            f.write(CONF.format(dir=self.dir, port=self.port, prefix=prefix, upstream=upstream_port))
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        log = open(os.path.join(self.dir, "stderr.log"), "ab")
        self.proc = subprocess.Popen([NGINX, "-p", self.dir, "-c", self.conf,
                                      "-e", os.path.join(self.dir, "error.log")],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"nginx exited with {self.proc.returncode}: {self.error_log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"nginx did not listen: {self.error_log()}")
                time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "error.log"), errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def requests(self):
        """(method, path with query, status) of every request logged so far
        (a request is logged once its answer is done)."""
        out = []
        try:
            with open(os.path.join(self.dir, "access.log")) as f:
                for line in f:
                    method, path, status = line.split()
                    out.append((method, path, int(status)))
        except FileNotFoundError:
            pass
        return out
