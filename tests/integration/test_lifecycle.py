"""The daemon's life: stop with crawls running, restart with pending jobs and
history, kill -9 in the middle of a crawl, the Unix socket next to TCP,
basic auth on every path, configuration errors and overrides."""

import base64
import os
import signal
import stat
import time

import pytest
import requests

from conftest import (Daemon, GET_ENDPOINTS, POST_ENDPOINTS, SHARED_STORE, SLOW, TESTPROJ_SPIDERS,
                      UnixHTTPConnection, error_body, free_port, ok_body, parse_time, pid_alive, timeout, wait_for)


def test_sigterm_stops_crawls_records_them_and_restart_keeps_everything(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 1}, spiderd={"shutdown_grace": 2})
    d.upload("p", "1.0", egg("testproj"))
    d.schedule("p", "quick", count=1, jobid="done1")
    d.wait_finished("done1")
    # drain=60: a graceful stop would take a minute, so shutdown_grace must cut it.
    d.schedule("p", "slow", settings=["LOG_LEVEL=DEBUG"], drain=60, jobid="run1")
    pid = d.wait_running("run1")["pid"]
    d.wait_crawling("p", "slow", "run1")
    d.schedule("p", "quick", count=1, jobid="p1")
    d.schedule("p", "quick", count=1, jobid="p2")

    t0 = time.monotonic()
    assert d.stop() == 0
    took = time.monotonic() - t0
    assert took < (2 + 8) * SLOW, f"stopping took {took:.1f}s with shutdown_grace = 2"
    assert not pid_alive(pid), "the crawl outlived the daemon"
    assert "Received SIGTERM" in d.read_log("p", "slow", "run1")

    d.start()
    finished = {e["id"]: e for e in d.listjobs()["finished"]}
    assert finished["done1"]["state"] == "finished"
    run1 = finished["run1"]
    assert run1["state"] == "cancelled"
    assert parse_time(run1["start_time"]) <= parse_time(run1["end_time"])
    # The pending jobs survived the stop and now run, first come first served.
    e1, e2 = d.wait_finished("p1"), d.wait_finished("p2")
    assert e1["state"] == e2["state"] == "finished"
    assert parse_time(e1["start_time"]) <= parse_time(e2["start_time"])
    assert d.api("listprojects.json")["projects"] == ["p"]
    assert d.api("listversions.json", project="p")["versions"] == ["1_0"]
    assert d.api("listspiders.json", project="p")["spiders"] == TESTPROJ_SPIDERS
    assert d.api("daemonstatus.json")["finished"] == 4


def test_kill9_mid_crawl_the_crawl_is_adopted_or_lost_never_forgotten(spiderd, egg, tmp_path):
    d = spiderd(scrapyd={"max_proc": 1})
    d.upload("p", "1.0", egg("testproj"))
    d.schedule("p", "quick", count=1, jobid="done1")
    d.wait_finished("done1")
    markers = tmp_path / "markers"
    markers.mkdir()
    d.schedule("p", "marker", dir=str(markers), wait=6, jobid="m1")
    marker = markers / "m1"
    wait_for(marker.exists, 30, "the marker spider's pid file")
    pid = int(marker.read_text())
    d.schedule("p", "quick", count=1, jobid="after")

    d.kill9()
    if SHARED_STORE:
        # On a shared store a crawl dies with its node (docs/cluster.md):
        # another node may retry its job once this one is declared dead.
        wait_for(lambda: not pid_alive(pid), 10, "the crawl to die with its node")
    else:
        assert pid_alive(pid), "the crawl died with the daemon"
    d.start()

    def settled():
        section, e = d.find("m1")
        assert section in ("running", "finished"), f"m1 was forgotten after the restart ({section})"
        if section == "running":
            assert e["pid"] == pid
            return None
        return e
    e = wait_for(settled, 40, "m1 to be finished or lost", interval=0.1)
    assert e["state"] in ("finished", "lost"), e
    assert int(marker.read_text()) == pid, "m1 was run a second time"
    assert d.wait_finished("after", 60)["state"] == "finished"
    assert d.find("done1")[0] == "finished"
    assert d.api("listspiders.json", project="p")["spiders"] == TESTPROJ_SPIDERS


def test_sigint_also_stops_the_daemon_cleanly(spiderd):
    d = spiderd()
    assert d.stop(signal.SIGINT) == 0


def test_unix_socket_and_tcp_both_serve(spiderd, tmp_path):
    sock = str(tmp_path / "s.sock")
    d = spiderd(scrapyd={"unix_socket_path": sock})
    assert d.api("daemonstatus.json")["running"] == 0  # TCP
    st = os.stat(sock)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660
    conn = UnixHTTPConnection(sock, timeout=timeout(10))
    try:
        conn.request("GET", "/daemonstatus.json")
        r = conn.getresponse()
        assert r.status == 200
        assert r.read() == ok_body({"pending": 0, "running": 0, "finished": 0})
        conn.request("POST", "/cancel.json", body="project=x&job=y",
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        r = conn.getresponse()
        assert r.read() == error_body("project 'x' not found")
    finally:
        conn.close()


AUTH_PATHS = ([("GET", "/" + e) for e in GET_ENDPOINTS] + [("POST", "/" + e) for e in POST_ENDPOINTS] +
              [("GET", "/"), ("GET", "/jobs"), ("GET", "/logs/"), ("GET", "/logs/x.log"), ("GET", "/nosuch"),
               ("OPTIONS", "/daemonstatus.json"), ("OPTIONS", "/schedule.json"), ("HEAD", "/"),
               ("PUT", "/listjobs.json")])


def test_basic_auth_on_every_path(spiderd):
    # many wrong logins on purpose: no throttling here (test_auth.py has it)
    d = spiderd(scrapyd={"username": "user", "password": "pa:ss w"},
                spiderd={"auth_fail_limit": 0})
    os.makedirs(d.path("logs"), exist_ok=True)
    with open(d.path("logs", "x.log"), "w") as f:
        f.write("log\n")
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    bad_headers = [{}, {"Authorization": "Basic " + b64("user:wrong")},
                   {"Authorization": "Basic " + b64("other:pa:ss w")},
                   {"Authorization": "Basic !!!"}, {"Authorization": "Bearer abc"},
                   {"Authorization": "Basic " + b64("nocolon")}, {"Authorization": "Basic"}]
    for method, path in AUTH_PATHS:
        for headers in bad_headers:
            r = d.request(method, path, auth=None, headers=headers)
            assert r.status_code == 401, (method, path, headers, r.status_code)
            assert r.headers.get("WWW-Authenticate") == 'basic realm="Scrapyd"'
            assert r.headers.get("Content-Type", "").startswith("text/html")
            if method != "HEAD":
                assert r.content == b"Unauthorized"
        r = d.request(method, path)  # with the right credentials
        assert r.status_code != 401, (method, path)
    assert d.get("/", auth=None, headers={"Authorization": "Basic " + b64("user:pa:ss w")}).status_code == 200
    assert d.api("daemonstatus.json")["status"] == "ok"
    for path in ("/", "/jobs", "/logs/", "/logs/x.log"):
        assert d.get(path).status_code == 200, path


def test_basic_auth_from_the_environment_and_only_with_both(spiderd):
    d = spiderd(env={"SCRAPYD_USERNAME": "u", "SCRAPYD_PASSWORD": "p"})
    assert d.get("/daemonstatus.json").status_code == 401
    d.auth = ("u", "p")
    assert d.api("daemonstatus.json")["status"] == "ok"
    d2 = spiderd(scrapyd={"username": "only"})
    assert d2.get("/daemonstatus.json").status_code == 200


@pytest.mark.parametrize("scrapyd,word", [
    ({"username": "a:b", "password": "x"}, "username"),
    ({"max_proc": "abc"}, "max_proc"),
])
def test_configuration_errors_abort_start_up(spiderd, scrapyd, word):
    d = spiderd(start=False, scrapyd=scrapyd)
    proc = d.spawn()
    rc = proc.wait(timeout(15))
    d.proc = None
    assert rc != 0
    assert word in d.stderr_text()


def test_environment_overrides_the_configured_port(spiderd):
    d = spiderd(start=False)
    conf_port = d.port
    d.port = free_port()
    d.env_extra["SCRAPYD_HTTP_PORT"] = str(d.port)
    d.start()
    assert d.api("daemonstatus.json")["status"] == "ok"
    with pytest.raises(requests.ConnectionError):
        Daemon.new_session().get(f"http://127.0.0.1:{conf_port}/daemonstatus.json", timeout=2)
