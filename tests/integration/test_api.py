"""Scrapyd's JSON API surface: envelope, headers, methods, every endpoint's
parameters and error messages, egg storage (addversion, listversions,
listspiders, delversion, delproject, listprojects)."""

import http.client
import json
import os
import re
import socket
import uuid

import pytest

from conftest import (ENDPOINTS, TESTPROJ_SPIDERS,
                      check_cors, endpoint_verb, error_body, ok_body, raw_request,
                      timeout)


@pytest.fixture(scope="module")
def d(module_spiderd, egg):
    """One daemon for the module with project "api" = testproj, version 1.0."""
    daemon = module_spiderd(name="api")
    daemon.upload("api", "1.0", egg("testproj"))
    return daemon


def call_bytes(d, endpoint, **params):
    """The raw body of a call (its envelope checked by d.call)."""
    if endpoint_verb(endpoint) == "GET":
        d.call(endpoint, params=params)
    else:
        d.call(endpoint, data=params)
    return d.last.content


# ---- envelope and headers ----------------------------------------------

def test_fresh_daemon_answers_with_scrapyds_exact_bytes(spiderd):
    d = spiderd()
    assert call_bytes(d, "daemonstatus.json") == \
        b'{"pending": 0, "running": 0, "finished": 0, "status": "ok", "node_name": "testnode"}\n'
    assert call_bytes(d, "listprojects.json") == ok_body({"projects": []})
    assert call_bytes(d, "listjobs.json") == ok_body({"pending": [], "running": [], "finished": []})
    # Unknown project: an empty list, not an error (as Scrapyd).
    assert call_bytes(d, "listversions.json", project="nosuch") == ok_body({"versions": []})
    assert call_bytes(d, "status.json", job="nosuch") == ok_body({"currstate": None})


def test_node_name_defaults_to_the_hostname(spiderd):
    d = spiderd(scrapyd={"node_name": None})
    assert d.api("daemonstatus.json")["node_name"] == socket.gethostname()


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_every_endpoint_has_json_and_cors_headers(d, endpoint):
    # Without parameters: success for some endpoints, an error for the
    # others; both must come as HTTP 200 with the full set of headers
    # (checked by d.call).
    if endpoint_verb(endpoint) == "GET":
        d.call(endpoint)
    else:
        d.call(endpoint, data={})


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_options_is_204_with_allow_and_cors(d, endpoint):
    verb = endpoint_verb(endpoint)
    r = d.request("OPTIONS", "/" + endpoint)
    assert r.status_code == 204
    assert r.content == b""
    assert r.headers.get("Allow") == f"OPTIONS, HEAD, {verb}"
    check_cors(r, verb)
    assert r.headers.get("Content-Length") == "0"


@pytest.mark.parametrize("endpoint,params", [
    ("daemonstatus.json", {}),
    ("listprojects.json", {}),
    ("listversions.json", {"project": "api"}),
    ("listspiders.json", {"project": "api"}),
    ("status.json", {"job": "nosuch"}),
    ("listjobs.json", {"project": "api"}),
])
def test_head_gives_the_get_headers_without_body(d, endpoint, params):
    get = d.get("/" + endpoint, params=params)
    head = d.request("HEAD", "/" + endpoint, params=params)
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers.get("Content-Type") == "application/json"
    assert head.headers.get("Content-Length") == str(len(get.content))
    check_cors(head, "GET")


def test_head_on_a_post_endpoint_has_the_headers_of_scrapyds_error(d):
    r = d.request("HEAD", "/schedule.json")
    assert r.status_code == 200
    assert r.content == b""
    assert r.headers.get("Content-Type") == "application/json"
    expected = error_body("AttributeError: 'Schedule' object has no attribute 'render_GET'")
    assert r.headers.get("Content-Length") == str(len(expected))


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "WRONG"])
def test_unsupported_methods_give_twisteds_message(d, endpoint, method):
    verb = endpoint_verb(endpoint)
    if method == "WRONG":
        method = "POST" if verb == "GET" else "GET"
    obj = d.call(endpoint, method=method, data={} if method != "GET" else None)
    assert d.last.content == error_body(
        f"UnsupportedMethod: Expected one of [b'HEAD', b'OPTIONS', b'{verb}']")
    assert obj["status"] == "error"


def test_http_10_and_keep_alive(d):
    raw = raw_request(d.port, b"GET /daemonstatus.json HTTP/1.0\r\nHost: x\r\n\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert re.match(rb"HTTP/1\.[01] 200", head), head
    assert json.loads(body)["status"] == "ok"

    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout(10))
    try:
        conn.request("GET", "/daemonstatus.json")
        r1 = conn.getresponse()
        assert r1.status == 200
        r1.read()
        sock = conn.sock
        assert sock is not None, "the connection was closed after an HTTP/1.1 request"
        conn.request("GET", "/listprojects.json")
        r2 = conn.getresponse()
        assert r2.status == 200
        assert json.loads(r2.read())["projects"] == ["api"]
        assert conn.sock is sock, "the second request did not reuse the connection"
    finally:
        conn.close()


# ---- parameters --------------------------------------------------------

@pytest.mark.parametrize("endpoint,params,missing", [
    ("listversions.json", {}, "project"),
    ("listspiders.json", {}, "project"),
    ("status.json", {}, "job"),
    ("status.json", {"project": "api"}, "job"),
    ("addversion.json", {}, "project"),
    ("addversion.json", {"project": "api"}, "version"),
    ("addversion.json", {"project": "api", "version": "9"}, "egg"),
    ("schedule.json", {}, "project"),
    ("schedule.json", {"project": "api"}, "spider"),
    ("schedule.json", {"spider": "quick"}, "project"),
    ("cancel.json", {}, "project"),
    ("cancel.json", {"project": "api"}, "job"),
    ("delversion.json", {}, "project"),
    ("delversion.json", {"project": "api"}, "version"),
    ("delproject.json", {}, "project"),
])
def test_missing_parameter_messages(d, endpoint, params, missing):
    assert call_bytes(d, endpoint, **params) == error_body(f"'{missing}' parameter is required")


def test_post_parameters_may_come_in_the_query_string(d):
    r = d.request("POST", "/cancel.json", params={"project": "api", "job": "nosuch"})
    assert d.check_api_response(r, "POST") == {"prevstate": None, "status": "ok", "node_name": "testnode"}


def test_json_bodies_are_not_parsed(d):
    r = d.request("POST", "/cancel.json", json={"project": "api", "job": "x"})
    d.check_api_response(r, "POST")
    assert r.content == error_body("'project' parameter is required")


def test_first_value_wins_and_the_body_hides_the_query(d):
    r = d.get("/listversions.json", params=[("project", "api"), ("project", "nosuch")])
    assert d.check_api_response(r, "GET")["versions"] == ["1_0"]
    # project=nosuch in the query, project=api in the body: the body wins.
    r = d.request("POST", "/cancel.json", params={"project": "nosuch"},
                  data={"project": "api", "job": "x"})
    assert r.content == ok_body({"prevstate": None})


# ---- addversion and egg storage ----------------------------------------

def test_addversion_scrapyd_client_multipart(spiderd, egg, egg_bytes):
    d = spiderd()
    d.upload("p1", "r42", egg("testproj"))
    assert d.last.content == ok_body({"project": "p1", "version": "r42", "spiders": len(TESTPROJ_SPIDERS)})
    with open(d.path("eggs", "p1", "r42.egg"), "rb") as f:
        assert f.read() == egg_bytes("testproj")
    assert d.api("listprojects.json")["projects"] == ["p1"]
    assert d.api("listversions.json", project="p1")["versions"] == ["r42"]
    assert call_bytes(d, "listspiders.json", project="p1") == ok_body({"spiders": TESTPROJ_SPIDERS})


def test_addversion_scrapydweb_urlencoded_egg_and_query_string(spiderd, egg_bytes):
    d = spiderd()
    # ScrapydWeb sends the egg as a url-encoded form field, not a file.
    obj = d.call("addversion.json", data={"project": "p2", "version": "1.0", "egg": egg_bytes("testproj")})
    assert d.last.content == ok_body({"project": "p2", "version": "1.0", "spiders": len(TESTPROJ_SPIDERS)})
    assert obj["version"] == "1.0"  # raw, not sanitized
    with open(d.path("eggs", "p2", "1_0.egg"), "rb") as f:
        assert f.read() == egg_bytes("testproj")
    # project and version in the query string, the egg alone in the body.
    r = d.request("POST", "/addversion.json", params={"project": "p3", "version": "7"},
                  files={"egg": ("project.egg", egg_bytes("testproj"))})
    assert r.content == ok_body({"project": "p3", "version": "7", "spiders": len(TESTPROJ_SPIDERS)})
    assert sorted(d.api("listprojects.json")["projects"]) == ["p2", "p3"]


def test_addversion_sanitizes_the_version_and_overwrites_the_same_name(spiderd, egg):
    d = spiderd()
    obj = d.upload("p", "v 1/x.y", egg("testproj"))
    assert obj["version"] == "v 1/x.y"
    assert os.path.isfile(d.path("eggs", "p", "v_1_x_y.egg"))
    assert d.api("listversions.json", project="p")["versions"] == ["v_1_x_y"]
    assert d.api("listspiders.json", project="p")["spiders"] == TESTPROJ_SPIDERS
    # The same sanitized name replaces the egg, and its spider list with it.
    d.upload("p", "v_1_x_y", egg("testproj_v2"))
    assert d.api("listversions.json", project="p")["versions"] == ["v_1_x_y"]
    assert sorted(os.listdir(d.path("eggs", "p"))) == ["v_1_x_y.egg"]
    assert d.api("listspiders.json", project="p")["spiders"] == sorted(TESTPROJ_SPIDERS + ["extra"])
    assert d.api("listspiders.json", project="p", _version="v 1/x.y")["spiders"] == \
        sorted(TESTPROJ_SPIDERS + ["extra"])


def test_addversion_rejects_a_body_that_is_not_a_zip(spiderd):
    d = spiderd()
    d.call("addversion.json", data={"project": "nz", "version": "1"},
           files={"egg": ("project.egg", b"this is not a zip file")})
    assert d.last.content == error_body(
        "egg is not a ZIP file (if using curl, use egg=@path not egg=path)")
    assert d.api("listprojects.json")["projects"] == []
    assert not os.path.exists(d.path("eggs", "nz"))


@pytest.mark.parametrize("broken", ["brokenproj", "noentry"])
def test_addversion_of_a_broken_egg_is_refused_and_not_stored(spiderd, egg, egg_bytes, broken):
    d = spiderd()
    obj = d.call("addversion.json", data={"project": "bp", "version": "1.0"},
                 files={"egg": ("project.egg", egg_bytes(broken))})
    assert obj["status"] == "error"
    assert obj["message"].startswith("RunnerError: ")
    assert len(obj["message"]) > len("RunnerError: ") + 5
    if broken == "brokenproj":
        assert "Traceback (most recent call last)" in obj["message"]
        assert "brokenproj settings fail to import on purpose" in obj["message"]
    # Not stored: no project, no version, no file.
    assert d.api("listprojects.json")["projects"] == []
    assert d.api("listversions.json", project="bp")["versions"] == []
    assert not any(f.endswith(".egg") for _, _, fs in os.walk(d.path("eggs")) for f in fs)
    assert d.api_error("listspiders.json", project="bp") == "project 'bp' not found"

    # A broken egg as a new version of a good project changes nothing either.
    d.upload("good", "1.0", egg("testproj"))
    obj = d.call("addversion.json", data={"project": "good", "version": "2.0"},
                 files={"egg": ("project.egg", egg_bytes(broken))})
    assert obj["message"].startswith("RunnerError: ")
    assert d.api("listversions.json", project="good")["versions"] == ["1_0"]
    assert sorted(os.listdir(d.path("eggs", "good"))) == ["1_0.egg"]
    assert d.api("listspiders.json", project="good")["spiders"] == TESTPROJ_SPIDERS


def test_listversions_sorts_versions_latest_last(spiderd, egg):
    d = spiderd()
    for version, name in [("2.0", "testproj"), ("10.0", "testproj_v2"),
                          ("1.5", "testproj"), ("2.0rc1", "testproj")]:
        d.upload("vs", version, egg(name))
    assert call_bytes(d, "listversions.json", project="vs") == \
        ok_body({"versions": ["1_5", "2_0rc1", "2_0", "10_0"]})
    # The latest (default) version is 10.0, the only one with "extra".
    assert "extra" in d.api("listspiders.json", project="vs")["spiders"]
    assert "extra" not in d.api("listspiders.json", project="vs", _version="2.0")["spiders"]
    # scrapyd-deploy's integer versions sort numerically.
    for version in ["100", "9", "10"]:
        d.upload("ints", version, egg("testproj"))
    assert d.api("listversions.json", project="ints")["versions"] == ["9", "10", "100"]


def test_listspiders(d):
    assert call_bytes(d, "listspiders.json", project="api") == ok_body({"spiders": TESTPROJ_SPIDERS})
    assert d.api("listspiders.json", project="api", _version="1.0")["spiders"] == TESTPROJ_SPIDERS
    assert d.api("listspiders.json", project="api", _version="1_0")["spiders"] == TESTPROJ_SPIDERS
    assert call_bytes(d, "listspiders.json", project="api", _version="9.9") == \
        error_body("version '9.9' not found")
    assert call_bytes(d, "listspiders.json", project="nosuch") == error_body("project 'nosuch' not found")


def test_listprojects_includes_settings_section_projects(spiderd, egg):
    d = spiderd(settings={"cfgproj": "cfgproj.settings"})
    assert d.api("listprojects.json")["projects"] == ["cfgproj"]
    d.upload("zegg", "1", egg("testproj"))
    # Egg projects first, then the [settings] ones (as Scrapyd).
    assert d.api("listprojects.json")["projects"] == ["zegg", "cfgproj"]


def test_delversion_and_delproject(spiderd, egg):
    d = spiderd()
    d.upload("p", "1.0", egg("testproj"))
    d.upload("p", "2.0", egg("testproj_v2"))
    assert call_bytes(d, "delversion.json", project="p", version="1.0") == ok_body({})
    assert d.api("listversions.json", project="p")["versions"] == ["2_0"]
    assert not os.path.exists(d.path("eggs", "p", "1_0.egg"))
    assert call_bytes(d, "delversion.json", project="p", version="9.9") == error_body("version '9.9' not found")
    assert call_bytes(d, "delversion.json", project="nosuch", version="1.0") == \
        error_body("version '1.0' not found")
    assert d.api_error("schedule.json", project="p", spider="quick", _version="1.0") == \
        "version '1.0' not found"
    # The sanitized name works too; deleting the last version removes the project.
    assert call_bytes(d, "delversion.json", project="p", version="2_0") == ok_body({})
    assert d.api("listversions.json", project="p")["versions"] == []
    assert d.api("listprojects.json")["projects"] == []
    assert not os.path.exists(d.path("eggs", "p"))
    assert d.api_error("listspiders.json", project="p") == "project 'p' not found"

    # Uploaded again, the version's spider list is the new egg's, not a cached one.
    d.upload("p", "1.0", egg("testproj"))
    assert d.api("listspiders.json", project="p", _version="1.0")["spiders"] == TESTPROJ_SPIDERS
    d.upload("q", "1", egg("testproj"))
    assert call_bytes(d, "delproject.json", project="p") == ok_body({})
    assert d.api("listprojects.json")["projects"] == ["q"]
    assert d.api("listversions.json", project="p")["versions"] == []
    assert not os.path.exists(d.path("eggs", "p"))
    assert call_bytes(d, "delproject.json", project="p") == error_body("project 'p' not found")
    assert d.api_error("schedule.json", project="p", spider="quick") == "project 'p' not found"


# ---- schedule, status, listjobs, cancel (no crawl needed) ---------------

def test_schedule_errors(d):
    pending = len(d.listjobs()["pending"])
    assert d.api_error("schedule.json", project="nosuch", spider="quick") == "project 'nosuch' not found"
    assert d.api_error("schedule.json", project="api", spider="quick", _version="9.9") == \
        "version '9.9' not found"
    assert d.api_error("schedule.json", project="api", spider="nosuch") == "spider 'nosuch' not found"
    assert d.api_error("schedule.json", project="api", spider="quick", priority="abc") == \
        "priority is invalid: could not convert string to float: b'abc'"
    assert d.api_error("schedule.json", project="api", spider="quick", setting="NOEQUALS") == \
        "ValueError: dictionary update sequence element #0 has length 1; 2 is required"
    for arg in ("settings", "_job", "name"):
        message = d.api_error("schedule.json", project="api", spider="quick", **{arg: "x"})
        assert re.fullmatch(rf"TypeError: .*got multiple values for (keyword )?argument '{arg}'", message), message
    assert len(d.listjobs()["pending"]) == pending


def test_schedule_default_jobid_is_a_uuid1_hex(d):
    job = d.schedule("api", "quick", count=1)
    assert re.fullmatch(r"[0-9a-f]{32}", job), job
    assert uuid.UUID(job).version == 1
    assert d.wait_finished(job)["state"] == "finished"


def test_schedule_escapes_non_ascii_like_python(d):
    job = "\u00f1"
    d.schedule("api", "quick", count=1, jobid=job)
    assert d.last.content == b'{"jobid": "\\u00f1", "status": "ok", "node_name": "testnode"}\n'
    entry = d.wait_finished(job)
    assert entry["id"] == job
    assert entry["log_url"] == f"/logs/api/quick/{job}.log"


def test_status_and_listjobs_errors(d):
    assert call_bytes(d, "status.json", job="nosuch") == ok_body({"currstate": None})
    assert call_bytes(d, "status.json", job="nosuch", project="api") == ok_body({"currstate": None})
    assert call_bytes(d, "status.json", job="x", project="nosuch") == error_body("project 'nosuch' not found")
    assert call_bytes(d, "listjobs.json", project="nosuch") == error_body("project 'nosuch' not found")
    lj = d.listjobs("api")
    assert list(lj) == ["pending", "running", "finished", "status", "node_name"]


def test_cancel_unknown_job_and_project(d):
    assert call_bytes(d, "cancel.json", project="api", job="nosuch") == ok_body({"prevstate": None})
    assert call_bytes(d, "cancel.json", project="nosuch", job="x") == error_body("project 'nosuch' not found")


def test_unknown_endpoint_paths_are_404(d):
    for path in ("/nosuch.json", "/DAEMONSTATUS.JSON", "/daemonstatus.json/"):
        r = d.get(path)
        assert r.status_code == 404, path
        assert b"No Such Resource" in r.content, path


def test_repeated_slashes_are_one(d):
    # scrapyd-client 2 calls f"{url}/listprojects.json" with the url of
    # scrapy.cfg, which `scrapy startproject` writes with a trailing slash.
    # Scrapyd answers 404 there; spiderd reads the path as nginx does.
    for path in ("//listprojects.json", "///listprojects.json"):
        r = d.get(path)
        assert r.status_code == 200, path
        assert "api" in r.json()["projects"]
    r = d.get("//listspiders.json", params={"project": "api"})
    assert r.json()["spiders"] == TESTPROJ_SPIDERS


# ---- client flows ------------------------------------------------------

def test_scrapyd_client_and_python_scrapyd_api_flow(d):
    ua = {"User-Agent": "Scrapyd-client/2.0.3"}
    r = d.get("/listprojects.json", headers=ua)
    assert "api" in d.check_api_response(r, "GET")["projects"]
    r = d.get("/listspiders.json", params={"project": "api"}, headers=ua)
    assert d.check_api_response(r, "GET")["spiders"] == TESTPROJ_SPIDERS
    # scrapyd-client posts the spider arguments first, then project and spider;
    # `--arg setting=...` becomes a setting field.
    r = d.request("POST", "/schedule.json", headers=ua,
                  data=[("setting", "DOWNLOAD_DELAY=0"), ("count", "1"), ("project", "api"), ("spider", "quick")])
    job = d.check_api_response(r, "POST")["jobid"]
    # python-scrapyd-api's job_status(): scan listjobs?project= for the id.
    lj = d.listjobs("api")
    assert job in [e["id"] for section in ("pending", "running", "finished") for e in lj[section]]
    assert d.wait_finished(job)["state"] == "finished"
    assert d.api("status.json", job=job, project="api")["currstate"] == "finished"


def test_scrapydweb_flow(d):
    # Start-up connectivity check, then its polling calls.
    assert d.get("/").status_code == 200
    st = d.api("daemonstatus.json")
    assert {"pending", "running", "finished", "status", "node_name"} <= set(st)
    assert d.api("listversions.json", project="api")["versions"] == ["1_0"]
    assert d.api("listspiders.json", project="api", _version="1_0")["spiders"] == TESTPROJ_SPIDERS
    # ScrapydWeb's own job ids: %Y-%m-%dT%H_%M_%S.
    job = "2019-01-01T00_00_01"
    assert d.schedule("api", "quick", settings=["CLOSESPIDER_TIMEOUT=60"], _version="1_0",
                      jobid=job, count=1) == job
    assert d.wait_finished(job)["state"] == "finished"
    r = d.get("/jobs")
    assert r.status_code == 200 and f"<td>{job}</td>" in r.text
    log = d.get(f"/logs/api/quick/{job}.log")
    assert log.status_code == 200 and b"Spider closed (finished)" in log.content
