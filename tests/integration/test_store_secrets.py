"""The store's password kept out of its URL (store_password_file,
SPIDERD_STORE_PASSWORD), never printed, never inherited by crawls; libpq's
TLS parameters passed through; Redis AUTH and ACL users.

Each module part starts its own throwaway server: PostgreSQL through
tests/pgserver.sh (then made to ask for passwords and to offer TLS), Redis
as a plain redis-server with requirepass and an ACL user.
"""

import os
import shutil
import socket
import subprocess
import time
import uuid

import pytest

from conftest import free_port, need, timeout, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
PGSERVER = os.path.join(HERE, "..", "pgserver.sh")
PASSWORD = "s3cr3t-" + uuid.uuid4().hex[:8] + "/+@x"  # characters a URL must escape
REDIS_USER_PW = "acl-" + uuid.uuid4().hex[:8]


def _pg_bin():
    import glob
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    return found[-1] if found else None


def _as_pg(cmd):
    if os.getuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    """(port, ca.pem) of a PostgreSQL whose role 'spd' needs PASSWORD on TCP
    and which offers TLS with a certificate for 127.0.0.1 from ca.pem."""
    need(_pg_bin() and shutil.which("openssl"), "PostgreSQL server binaries or openssl not installed")
    import tempfile
    top = tempfile.mkdtemp(prefix="spiderd-pg-")  # pytest's tmp is root-only: postgres
    os.chmod(top, 0o755)                          # must reach its data directory
    d = top + "/srv"
    url = subprocess.run([PGSERVER, "start", d], check=True, capture_output=True,
                         text=True).stdout.strip()
    port = int(open(os.path.join(d, "port")).read())
    try:
        psql = [os.path.join(_pg_bin(), "psql"), "-h", "127.0.0.1", "-p", str(port),
                "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-qc"]
        _as_pg(psql + [f"CREATE ROLE spd LOGIN PASSWORD '{PASSWORD}'", "spiderd"])
        _as_pg(psql + ["GRANT ALL ON DATABASE spiderd TO spd", "spiderd"])
        _as_pg(psql + ["ALTER DATABASE spiderd OWNER TO spd", "spiderd"])
        tls = os.path.join(d, "tls")
        os.makedirs(tls)
        ossl = lambda *a: subprocess.run(["openssl", *a], cwd=tls, check=True,
                                         capture_output=True)
        ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-days", "2", "-subj", "/CN=pg test CA")
        ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
             "-out", "server.csr", "-subj", "/CN=127.0.0.1")
        with open(os.path.join(tls, "ext.cnf"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
        os.chmod(os.path.join(tls, "server.key"), 0o600)
        if os.getuid() == 0:
            shutil.chown(os.path.join(tls, "server.key"), "postgres")
            shutil.chown(os.path.join(tls, "server.pem"), "postgres")
        hba = os.path.join(d, "data", "pg_hba.conf")
        with open(hba) as f:
            rest = f.read()
        with open(hba, "w") as f:
            f.write("host all spd 127.0.0.1/32 scram-sha-256\n" + rest)
        conf = os.path.join(d, "data", "postgresql.auto.conf")
        with open(conf, "a") as f:
            f.write(f"ssl = on\nssl_cert_file = '{tls}/server.pem'\n"
                    f"ssl_key_file = '{tls}/server.key'\n")
        _as_pg([os.path.join(_pg_bin(), "pg_ctl"), "-D", os.path.join(d, "data"), "reload"])
        time.sleep(0.5)
        yield port, os.path.join(tls, "ca.pem")
    finally:
        subprocess.run([PGSERVER, "stop", d], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def pg_url(port, user="spd", schema=None, extra=""):
    schema = schema or "s" + uuid.uuid4().hex[:10]
    return f"postgresql://{user}@127.0.0.1:{port}/spiderd?schema={schema}{extra}"


def refused(d):
    d.spawn()
    rc = d.proc.wait(timeout(60))
    d.proc = None
    assert rc != 0
    return d.stderr_text()


def no_secret_anywhere(d, secret):
    assert secret not in d.stderr_text()
    for path in ("/api/v1/status", "/daemonstatus.json", "/api/v1/events", "/api/v1/nodes"):
        r = d.get(path)
        assert secret not in r.text, path
    with open(f"/proc/{d.proc.pid}/environ", "rb") as f:
        assert secret.encode() not in f.read()


def crawl_env(d, egg):
    """The environment of a crawl of d (started, read, cancelled)."""
    d.upload("testproj", "1", egg("testproj"))
    job = d.schedule("testproj", "hang")
    entry = d.wait_running(job, seconds=60)
    with open(f"/proc/{entry['pid']}/environ", "rb") as f:
        env = f.read()
    d.cancel("testproj", job)
    return env


def test_pg_password_from_file(spiderd, pg, tmp_path, egg):
    port, _ = pg
    pw = tmp_path / "pgpass"
    pw.write_text(PASSWORD + "\n")
    d = spiderd(spiderd={"store": pg_url(port), "store_password_file": pw})
    assert d.api("daemonstatus.json")["status"] == "ok"
    no_secret_anywhere(d, PASSWORD)
    env = crawl_env(d, egg)
    assert PASSWORD.encode() not in env


def test_pg_password_from_env(spiderd, pg, egg):
    port, _ = pg
    d = spiderd(spiderd={"store": pg_url(port)}, env={"SPIDERD_STORE_PASSWORD": PASSWORD})
    assert d.api("daemonstatus.json")["status"] == "ok"
    no_secret_anywhere(d, PASSWORD)
    env = crawl_env(d, egg)
    assert b"SPIDERD_STORE_PASSWORD" not in env and PASSWORD.encode() not in env


def test_pg_wrong_password_is_a_clear_start_error(spiderd, pg):
    port, _ = pg
    d = spiderd(start=False, spiderd={"store": pg_url(port)},
                env={"SPIDERD_STORE_PASSWORD": "not-" + PASSWORD})
    out = refused(d)
    assert "password authentication failed" in out
    assert PASSWORD not in out


def test_pg_password_in_url_is_redacted(spiderd, pg):
    port, _ = pg
    import urllib.parse
    url = pg_url(port).replace("spd@", f"spd:{urllib.parse.quote(PASSWORD, safe='')}@")
    bad = spiderd(start=False, spiderd={"store": url})  # '%' unescaped for the INI file
    out = refused(bad)
    assert "spd:***@" in out and urllib.parse.quote(PASSWORD, safe="") not in out
    d = spiderd(spiderd={"store": url.replace("%", "%%")})
    assert d.api("daemonstatus.json")["status"] == "ok"
    assert "spd:***@127.0.0.1" in d.stderr_text()
    no_secret_anywhere(d, urllib.parse.quote(PASSWORD, safe=""))


def test_pg_tls_verify_full(spiderd, pg, tmp_path):
    port, ca = pg
    pw = tmp_path / "pgpass"
    pw.write_text(PASSWORD)
    d = spiderd(spiderd={"store": pg_url(port, extra=f"&sslmode=verify-full&sslrootcert={ca}"),
                         "store_password_file": pw})
    assert d.api("daemonstatus.json")["status"] == "ok"
    # the connection is TLS: the server says so for the daemon's sessions
    psql = [os.path.join(_pg_bin(), "psql"), "-h", "127.0.0.1", "-p", str(port), "-U",
            "postgres", "-Atc",
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
            "WHERE a.usename = 'spd' AND s.ssl", "spiderd"]
    assert int(_as_pg(psql).stdout.strip()) >= 1
    d.stop()
    # a CA that did not sign the server's certificate: refused
    other = tmp_path / "other-ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(tmp_path / "o.key"), "-out", str(other), "-days", "1", "-subj", "/CN=o"],
                   check=True, capture_output=True)
    d.spiderd["store"] = pg_url(port, extra=f"&sslmode=verify-full&sslrootcert={other}")
    d.write_conf()
    out = refused(d)
    assert "certificate verify failed" in out or "certificate" in out


def test_password_file_problems(spiderd, tmp_path):
    d = spiderd(start=False, spiderd={"store_password_file": tmp_path / "nope"})
    out = refused(d)
    assert "store_password_file" in out and "No such file" in out


# ---- Redis ----

@pytest.fixture(scope="module")
def redis_port(tmp_path_factory):
    need(shutil.which("redis-server"), "redis-server not installed")
    port = free_port()
    d = str(tmp_path_factory.mktemp("redis"))
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--dir", d,
                          "--requirepass", PASSWORD,
                          "--user", "spd", "on", f">{REDIS_USER_PW}", "~*", "&*", "+@all"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    try:
        wait_for(up, 10, "redis-server")
        yield port
    finally:
        p.terminate()
        p.wait(10)


def redis_url(port, auth=""):
    return f"redis://{auth}127.0.0.1:{port}/0?prefix=p{uuid.uuid4().hex[:10]}"


def test_redis_password_from_file_and_env(spiderd, redis_port, tmp_path):
    pw = tmp_path / "rpass"
    pw.write_text(PASSWORD + "\n")
    d = spiderd(spiderd={"store": redis_url(redis_port), "store_password_file": pw})
    assert d.api("daemonstatus.json")["status"] == "ok"
    no_secret_anywhere(d, PASSWORD)
    d.stop()
    d.spiderd["store_password_file"] = None
    d.write_conf()
    d.env_extra["SPIDERD_STORE_PASSWORD"] = PASSWORD
    d.start()
    assert d.api("daemonstatus.json")["status"] == "ok"
    no_secret_anywhere(d, PASSWORD)


def test_redis_password_and_acl_user_in_url(spiderd, redis_port):
    import urllib.parse
    q = urllib.parse.quote(PASSWORD, safe="")
    d = spiderd(spiderd={"store": redis_url(redis_port, f":{q}@").replace("%", "%%")})
    assert d.api("daemonstatus.json")["status"] == "ok"
    assert ":***@127.0.0.1" in d.stderr_text()
    no_secret_anywhere(d, q)
    d2 = spiderd(spiderd={"store": redis_url(redis_port, f"spd:{REDIS_USER_PW}@")})
    assert d2.api("daemonstatus.json")["status"] == "ok"
    assert "spd:***@127.0.0.1" in d2.stderr_text()
    no_secret_anywhere(d2, REDIS_USER_PW)


def test_redis_wrong_password_and_rediss(spiderd, redis_port):
    d = spiderd(start=False, spiderd={"store": redis_url(redis_port)},
                env={"SPIDERD_STORE_PASSWORD": "wrong-" + PASSWORD})
    out = refused(d)
    assert "AUTH" in out and PASSWORD not in out
    d2 = spiderd(start=False, spiderd={"store": f"rediss://127.0.0.1:{redis_port}/0"})
    out = refused(d2)
    assert "rediss://" in out and "TLS" in out
