"""The failed-login throttle and the client's address, on loopback and behind
a real nginx.

A Scrapyd client's own test suite or a monitoring tool on the daemon's machine
checks a few wrong credentials on purpose, then makes real calls: on loopback
(and the Unix socket) nobody is throttled unless auth_throttle_loopback says
so, and wrong credentials still answer 401. Behind a reverse proxy listed in
trusted_proxies, the client's address comes from X-Forwarded-For: the
throttle, the audit trail and the log all see the client, not the proxy; a
client talking to the daemon directly cannot pick its address by sending
the header."""

import base64
import http.client
import os
import re
import subprocess
import sys

import pytest
import requests

from conftest import BIN, UnixHTTPConnection, timeout

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nginx  # noqa: E402  (tests/nginx.py)

API = "/api/v1"
USER, RIGHT, WRONG = "scrapyd", "right-password", "wrong-password"
CLIENT_A, CLIENT_B = "203.0.113.7", "198.51.100.9"


def scrapyd_auth(d, **spiderd):
    # Scrapyd users set basic auth in [scrapyd], as scrapyd.conf documents
    return d(scrapyd={"username": USER, "password": RIGHT, "unix_socket_path": "spiderd.sock"},
             spiderd=dict({"log_level": "debug"}, **spiderd))


def deploy(d, url=None, headers=None):
    """addversion.json as scrapyd-deploy sends it."""
    egg = d._egg
    r = requests.post((url or d.url) + "/addversion.json", auth=(USER, RIGHT), headers=headers,
                      data={"project": "proxied", "version": "1"},
                      files={"egg": ("proxied.egg", egg)}, timeout=timeout(60))
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text


def client_calls(url, auth, headers=None):
    """The calls python-scrapyd-api and scrapyd-client make, in their order:
    (method, path, form) -> response."""
    calls = [
        ("GET", "/daemonstatus.json", None),
        ("GET", "/listprojects.json", None),
        ("GET", "/listversions.json?project=proxied", None),
        ("GET", "/listspiders.json?project=proxied", None),
        ("POST", "/schedule.json", {"project": "proxied", "spider": "quick"}),
        ("GET", "/listjobs.json?project=proxied", None),
    ]
    out = []
    with requests.Session() as s:
        s.trust_env = False
        for method, path, form in calls:
            r = s.request(method, url + path, auth=auth, data=form, headers=headers,
                          timeout=timeout(30))
            out.append((path, r))
    return out


@pytest.fixture
def deployed(spiderd, egg_bytes):
    def make(**spiderd_keys):
        d = scrapyd_auth(spiderd, **spiderd_keys)
        d._egg = egg_bytes("testproj")
        deploy(d)
        return d
    return make


# ---- loopback: a client's deliberate 401 checks, then its real calls -----------------

def test_scrapyd_client_mix_on_loopback_is_never_throttled(deployed):
    d = deployed()
    for _ in range(5):  # 30 wrong logins within the minute
        for path, r in client_calls(d.url, (USER, WRONG)):
            assert r.status_code == 401, (path, r.status_code, r.text[:200])
    for path, r in client_calls(d.url, (USER, RIGHT)):
        assert r.status_code == 200, (path, r.status_code, r.text[:200])
        assert r.json()["status"] == "ok", (path, r.text)
    # more deliberate failures, then real calls again, as a monitoring tool does
    for path, r in client_calls(d.url, (USER, WRONG)):
        assert r.status_code == 401 and r.headers["WWW-Authenticate"].lower().startswith("basic")
    assert all(r.status_code == 200 for _, r in client_calls(d.url, (USER, RIGHT)))
    # the Unix socket too
    sock = d.path("spiderd.sock")
    bad = "Basic " + base64.b64encode(f"{USER}:{WRONG}".encode()).decode()
    good = "Basic " + base64.b64encode(f"{USER}:{RIGHT}".encode()).decode()
    for auth, want in [(bad, 401)] * 20 + [(good, 200)]:
        conn = UnixHTTPConnection(sock, timeout=timeout(10))
        conn.request("GET", "/daemonstatus.json", headers={"Authorization": auth})
        assert conn.getresponse().status == want
        conn.close()


def test_auth_throttle_loopback_throttles_loopback_again(deployed):
    d = deployed(auth_throttle_loopback="on")
    for _ in range(10):
        assert d.request("GET", "/daemonstatus.json", auth=(USER, WRONG)).status_code == 401
    r = d.request("GET", "/daemonstatus.json", auth=(USER, WRONG))
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
    # the right password waits out the window too
    assert d.request("GET", "/listprojects.json", auth=(USER, RIGHT)).status_code == 429
    r = d.request("GET", API + "/status", auth=(USER, RIGHT))
    assert r.status_code == 429 and r.json()["error"]["code"] == "SPD_ETHROTTLED"
    assert "127.0.0.1" in r.json()["error"]["message"]


# ---- behind nginx ------------------------------------------------------------------

def access_lines(d, addr):
    return [line for line in d.stderr_text().splitlines()
            if re.search(r"\[spiderd\.http#debug\] " + re.escape(addr) + ' "', line)]


@pytest.mark.skipif(not nginx.available(), reason="needs nginx (Debian's nginx-light)")
def test_clients_behind_a_trusted_nginx_are_told_apart(deployed, tmp_path):
    d = deployed(trusted_proxies="127.0.0.1, ::1")
    with nginx.Nginx(tmp_path / "nginx", upstream_port=d.port) as ngx:
        A = {"X-Forwarded-For": CLIENT_A}
        B = {"X-Forwarded-For": CLIENT_B}
        s = requests.Session()
        s.trust_env = False

        def get(path, auth, headers):
            return s.get(ngx.url + path, auth=auth, headers=headers, timeout=timeout(30))

        # A brute-forces through the proxy: 401 up to the limit, then 429
        for _ in range(10):
            assert get("/daemonstatus.json", (USER, WRONG), A).status_code == 401
        r = get("/daemonstatus.json", (USER, WRONG), A)
        assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0, r.text
        assert get("/listprojects.json", (USER, RIGHT), A).status_code == 429
        r = get(API + "/status", (USER, RIGHT), A)
        assert r.status_code == 429 and CLIENT_A in r.json()["error"]["message"]
        # B, behind the same proxy, is not punished for A
        for _ in range(3):
            for path, r in client_calls(ngx.url, (USER, RIGHT), B):
                assert r.status_code == 200, (path, r.status_code, r.text[:200])
            assert get("/daemonstatus.json", (USER, WRONG), B).status_code == 401
        who = get(API + "/auth/whoami", (USER, RIGHT), B).json()
        assert who["addr"] == CLIENT_B
        # a client on loopback through the proxy keeps its exemption: only the
        # forwarded address counts, and here it is 127.0.0.1 itself
        for _ in range(15):
            assert get("/daemonstatus.json", (USER, WRONG), {}).status_code == 401
        assert get("/daemonstatus.json", (USER, RIGHT), {}).status_code == 200

        # the audit trail records B's address, not the proxy's
        events = d.request("GET", API + "/events", params={"order": "desc", "limit": 100},
                           auth=(USER, RIGHT)).json()["events"]
        queued = [e for e in events if e["type"] == "job.queued"]
        assert queued and all(e["data"]["addr"] == CLIENT_B for e in queued), queued
        # and so do the daemon's log lines of each request and of the throttle
        a_lines = access_lines(d, CLIENT_A)
        assert any('"GET /daemonstatus.json" 429' in x for x in a_lines), a_lines[-5:]
        assert any('"GET /daemonstatus.json" 401' in x for x in a_lines)
        b_lines = access_lines(d, CLIENT_B)
        assert any('"POST /schedule.json" 200' in x for x in b_lines), b_lines[-5:]
        assert f"{CLIENT_A}: 10 failed logins" in d.stderr_text()
        assert not any('429' in x for x in access_lines(d, "127.0.0.1"))
        s.close()

    # under a location prefix, with X-Forwarded-Prefix
    with nginx.Nginx(tmp_path / "nginx-prefix", upstream_port=d.port, prefix="/spiderd") as ngx:
        r = requests.get(ngx.url + "/daemonstatus.json", auth=(USER, RIGHT),
                         headers={"X-Forwarded-For": CLIENT_B}, timeout=timeout(30))
        assert r.status_code == 200 and r.json()["status"] == "ok"
        r = requests.get(ngx.url + "/", auth=(USER, RIGHT), timeout=timeout(30))
        assert r.status_code == 200 and 'href="/spiderd/jobs"' in r.text
        assert ngx.url.endswith("/spiderd")


@pytest.mark.skipif(not nginx.available(), reason="needs nginx (Debian's nginx-light)")
def test_a_trusted_nginx_on_the_unix_socket(deployed, tmp_path):
    # the Unix socket's peer is nginx; 127.0.0.1 is the hop nginx saw (this test)
    d = deployed(trusted_proxies="unix 127.0.0.1")
    sock = d.path("spiderd.sock")
    with nginx.Nginx(tmp_path / "nginx", upstream=f"unix:{sock}:") as ngx:
        A = {"X-Forwarded-For": CLIENT_A}
        for _ in range(10):
            r = requests.get(ngx.url + "/daemonstatus.json", auth=(USER, WRONG), headers=A,
                             timeout=timeout(30))
            assert r.status_code == 401
        r = requests.get(ngx.url + API + "/status", auth=(USER, RIGHT), headers=A,
                         timeout=timeout(30))
        assert r.status_code == 429 and CLIENT_A in r.json()["error"]["message"]
        r = requests.get(ngx.url + API + "/auth/whoami", auth=(USER, RIGHT),
                         headers={"X-Forwarded-For": CLIENT_B}, timeout=timeout(30))
        assert r.status_code == 200 and r.json()["addr"] == CLIENT_B


def test_forwarded_for_is_ignored_without_trusted_proxies(deployed):
    d = deployed(auth_throttle_loopback="on")
    # a forged header per request would spread the failures over many addresses
    for i in range(10):
        r = d.request("GET", "/daemonstatus.json", auth=(USER, WRONG),
                      headers={"X-Forwarded-For": f"203.0.113.{i + 1}"})
        assert r.status_code == 401
    r = d.request("GET", "/daemonstatus.json", auth=(USER, WRONG),
                  headers={"X-Forwarded-For": "203.0.113.99"})
    assert r.status_code == 429
    assert "127.0.0.1: 10 failed logins" in d.stderr_text()
    assert not re.search(r"203\.0\.113\.\d+", "\n".join(access_lines(d, "203.0.113.1")))


def test_forwarded_for_is_ignored_from_an_untrusted_peer(deployed):
    # only a proxy on another address is trusted: the loopback peer is not one
    d = deployed(trusted_proxies="192.0.2.0/24 2001:db8::/32")
    r = d.request("GET", API + "/auth/whoami", auth=(USER, RIGHT),
                  headers={"X-Forwarded-For": CLIENT_A})
    assert r.status_code == 200 and r.json()["addr"] == "127.0.0.1"


@pytest.mark.parametrize("value, says", [
    ("10.0.0.0/33", "10.0.0.0/33"),
    ("proxy.example.com", "proxy.example.com"),
    ("127.0.0.1, 300.1.1.1", "300.1.1.1"),
    ("2001:db8::/129", "2001:db8::/129"),
])
def test_a_bad_trusted_proxies_value_stops_the_start(spiderd, value, says):
    d = spiderd(spiderd={"trusted_proxies": value}, start=False)
    p = subprocess.run([BIN, "serve"], cwd=d.workdir, env=d.environ(), capture_output=True,
                       text=True, timeout=timeout(30))
    assert p.returncode != 0
    assert "trusted_proxies" in p.stderr and says in p.stderr, p.stderr
