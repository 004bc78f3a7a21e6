"""HTTPS on the TCP listener: https_cert / https_key ([spiderd]).

A private CA and a server certificate for localhost and 127.0.0.1 are made
with the openssl command once per module; each test starts its own daemon.
"""

import os
import socket
import ssl
import subprocess

import pytest
import requests

from conftest import BIN, Daemon, raw_request, timeout, wait_for


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Paths of ca.pem, server.pem, server.key, other.key (a key of no
    certificate here), server-enc.key (server.key under passphrase 'hunter2')."""
    d = str(tmp_path_factory.mktemp("pki"))
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-days", "2", "-subj", "/CN=spiderd test CA", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
             "-out", "server.csr", "-subj", "/CN=localhost", cwd=d)
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
             "-out", "other.key", cwd=d)
    _openssl("pkcs8", "-topk8", "-in", "server.key", "-out", "server-enc.key",
             "-passout", "pass:hunter2", cwd=d)
    return {name: os.path.join(d, name) for name in
            ("ca.pem", "server.pem", "server.key", "other.key", "server-enc.key")}


class TlsDaemon(Daemon):
    ca = None

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def new_session(self):
        s = requests.Session()
        s.trust_env = False
        s.verify = self.ca
        return s


@pytest.fixture
def tls_daemon(tmp_path, pki):
    made = []

    def make(start=True, spiderd=None, **kw):
        conf = {"https_cert": pki["server.pem"], "https_key": pki["server.key"]}
        conf.update(spiderd or {})
        TlsDaemon.ca = pki["ca.pem"]
        d = TlsDaemon(tmp_path / f"d{len(made)}", spiderd=conf, **kw)
        made.append(d)
        if start:
            d.start()
        return d
    yield make
    for d in made:
        d.close()


def failed_start(d):
    """Starts d expecting it to refuse: returns its output."""
    d.spawn()
    rc = d.proc.wait(timeout(30))
    d.proc = None
    assert rc != 0
    return d.stderr_text()


def tls_version(port, **ctx_kw):
    ctx = ssl.create_default_context(cafile=ctx_kw.pop("cafile"))
    for k, v in ctx_kw.items():
        setattr(ctx, k, v)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout(10)) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return s.version()


def test_https_serves_scrapyd_and_rest(tls_daemon, pki, egg):
    d = tls_daemon()
    obj = d.api("daemonstatus.json")
    assert obj["status"] == "ok"
    r = d.get("/api/v1/status")
    assert r.status_code == 200, r.text
    assert r.json()
    assert tls_version(d.port, cafile=pki["ca.pem"]) in ("TLSv1.2", "TLSv1.3")
    # a TLS 1.2 client is served too
    assert tls_version(d.port, cafile=pki["ca.pem"],
                       maximum_version=ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
    d.upload("testproj", "1", egg("testproj"))
    job = d.schedule("testproj", "quick")
    d.wait_finished(job)
    assert "https://127.0.0.1:%d/" % d.port in d.stderr_text()


def test_plain_http_to_tls_port_gets_no_page(tls_daemon):
    d = tls_daemon()
    got = raw_request(d.port, b"GET /daemonstatus.json HTTP/1.1\r\nHost: x\r\n\r\n",
                      read_timeout=5)
    assert not got.startswith(b"HTTP/"), got[:200]
    assert b"node_name" not in got
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{d.port}/daemonstatus.json", timeout=timeout(10))
    # the daemon still serves HTTPS afterwards
    assert d.api("daemonstatus.json")["status"] == "ok"


def test_unknown_ca_fails_handshake(tls_daemon):
    d = tls_daemon()
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(d.url + "/daemonstatus.json", verify=True, timeout=timeout(10))


def test_old_tls_versions_refused(tls_daemon, pki):
    d = tls_daemon()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki["ca.pem"])
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer TLS 1.0/1.1 at all
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    with socket.create_connection(("127.0.0.1", d.port), timeout=timeout(10)) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="localhost"):
                pass
    # the same client allowed TLS 1.2 gets in: the refusal above was the version
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", d.port), timeout=timeout(10)) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.version() == "TLSv1.2"


def test_mismatched_key_refuses_to_start(tls_daemon, pki):
    d = tls_daemon(start=False, spiderd={"https_key": pki["other.key"]})
    out = failed_start(d)
    assert "https_key" in out and pki["other.key"] in out
    assert "do not match" in out


def test_missing_key_file_refuses_to_start(tls_daemon, pki):
    d = tls_daemon(start=False, spiderd={"https_key": pki["server.key"] + ".nope"})
    out = failed_start(d)
    assert pki["server.key"] + ".nope" in out and "No such file" in out


def test_cert_without_key_refuses_to_start(tls_daemon):
    d = tls_daemon(start=False, spiderd={"https_key": None})
    out = failed_start(d)
    assert "https_cert and https_key go together" in out


def test_encrypted_key(tls_daemon, pki, tmp_path):
    pw = tmp_path / "keypass"
    pw.write_text("hunter2\n")
    d = tls_daemon(spiderd={"https_key": pki["server-enc.key"], "https_key_password_file": pw})
    assert d.api("daemonstatus.json")["status"] == "ok"
    d.stop()
    d.spiderd["https_key_password_file"] = None
    d.write_conf()
    d.env_extra["SPIDERD_HTTPS_KEY_PASSWORD"] = "hunter2"
    d.start()
    assert d.api("daemonstatus.json")["status"] == "ok"
    d.stop()
    d.env_extra["SPIDERD_HTTPS_KEY_PASSWORD"] = "wrong"
    out = failed_start(d)
    assert "Decryption has failed" in out and "hunter2" not in out


def test_cli_over_https(tls_daemon, pki):
    d = tls_daemon()
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPIDERD_URL", "CURL_CA_BUNDLE", "SSL_CERT_FILE")}
    base = [BIN, "status", "--json", "--url", d.url]
    p = subprocess.run(base + ["--cacert", pki["ca.pem"]], env=env, capture_output=True,
                       text=True, timeout=timeout(30))
    assert p.returncode == 0, p.stderr
    assert '"node_name"' in p.stdout or "testnode" in p.stdout
    p = subprocess.run(base, env={**env, "CURL_CA_BUNDLE": pki["ca.pem"]},
                       capture_output=True, text=True, timeout=timeout(30))
    assert p.returncode == 0, p.stderr
    # without the CA the daemon is not trusted
    p = subprocess.run(base, env=env, capture_output=True, text=True, timeout=timeout(30))
    assert p.returncode != 0
    assert "certificate" in p.stderr.lower() or "ssl" in p.stderr.lower(), p.stderr
    # from the daemon's own config the client knows to speak HTTPS
    p = subprocess.run([BIN, "status", "--json", "--cacert", pki["ca.pem"]], cwd=d.workdir,
                       env={**env, "SPIDERD_CONFIG_FILES": d.conf_path},
                       capture_output=True, text=True, timeout=timeout(30))
    assert p.returncode == 0, p.stderr


def test_unix_socket_stays_plain(tls_daemon, tmp_path):
    from conftest import UnixHTTPConnection
    sock = str(tmp_path / "s.sock")
    d = tls_daemon(scrapyd={"unix_socket_path": sock})
    c = UnixHTTPConnection(sock)
    c.request("GET", "/daemonstatus.json")
    r = c.getresponse()
    assert r.status == 200 and b'"ok"' in r.read()
    c.close()
    wait_for(lambda: d.api("daemonstatus.json"), 5, "https still served")


def test_https_log_file_and_event_stream(tls_daemon, egg):
    """Replies from a file descriptor and streamed (suspended) replies go
    through TLS as well."""
    import threading
    d = tls_daemon()
    stream = d.session.get(d.url + "/api/v1/events/stream", params={"type": "job."},
                           stream=True, timeout=timeout(30))
    assert stream.status_code == 200
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    lines = []

    def read():
        for line in stream.iter_lines():
            if line.startswith(b"event:"):
                lines.append(line)
                if len(lines) >= 1:
                    return
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    d.upload("testproj", "1", egg("testproj"))
    job = d.schedule("testproj", "quick")
    d.wait_finished(job)
    reader.join(timeout(20))
    stream.close()
    assert lines, "no event came over the HTTPS stream"
    r = d.get(f"/logs/testproj/quick/{job}.log")
    assert r.status_code == 200
    with open(d.log_path("testproj", "quick", job), "rb") as f:
        assert r.content == f.read()
