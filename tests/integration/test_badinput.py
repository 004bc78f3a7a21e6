"""Hostile and broken input: invalid UTF-8, path traversal in every name on
every endpoint, job ids that Scrapyd turned into a leaked slot, bodies over
max_upload, malformed multipart, garbage HTTP."""

import http.client
import io
import os
import re
import threading
import zipfile

import pytest
import requests

from conftest import ENDPOINTS, endpoint_verb, error_body, raw_request, snapshot, timeout

CONTRACT_UTF8_MESSAGE = ("project is invalid: 'utf-8' codec can't decode byte 0xc3 in position 0: "
                         "invalid continuation byte")

BAD_UTF8 = [b"\xc3(", b"ab\xc3", b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"ok\xe2\x82x"]


def python_message(name, raw):
    """Scrapyd's message: the parameter name and Python's UnicodeDecodeError."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"{name} is invalid: {e}"
    raise AssertionError(f"{raw!r} is valid UTF-8")


@pytest.fixture(scope="module")
def bd(module_spiderd, egg):
    d = module_spiderd(name="bad", scrapyd={"max_proc": 1})
    d.upload("bad", "1.0", egg("testproj"))
    return d


def all_job_ids(d):
    lj = d.listjobs()
    return [e["id"] for section in ("pending", "running", "finished") for e in lj[section]]


def raw_get(d, path):
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout(10))
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


# ---- invalid UTF-8 -----------------------------------------------------

def test_invalid_utf8_gives_scrapyds_exact_message(bd):
    r = bd.get("/listversions.json", params={"project": b"\xc3("})
    bd.check_api_response(r, "GET")
    assert r.content == error_body(CONTRACT_UTF8_MESSAGE)


@pytest.mark.parametrize("raw", BAD_UTF8)
def test_invalid_utf8_messages_match_python(bd, raw):
    r = bd.get("/listspiders.json", params={"project": raw})
    bd.check_api_response(r, "GET")
    assert r.content == error_body(python_message("project", raw))


FIRST_PARAM = {"listversions.json": "project", "listspiders.json": "project", "listjobs.json": "project",
               "status.json": "job", "schedule.json": "project", "cancel.json": "project",
               "delversion.json": "project", "delproject.json": "project", "addversion.json": "project"}


@pytest.mark.parametrize("endpoint", sorted(FIRST_PARAM))
def test_invalid_utf8_on_every_endpoint_and_encoding(bd, egg_bytes, endpoint):
    name = FIRST_PARAM[endpoint]
    raw = b"\xc3("
    rest = {"project": "bad", "job": "j", "spider": "quick", "version": "1"}
    rest.pop(name)
    if endpoint == "addversion.json":
        rest["egg"] = egg_bytes("testproj")
    expected = error_body(python_message(name, raw))
    if endpoint_verb(endpoint) == "GET":
        r = bd.get("/" + endpoint, params={name: raw, **rest})
        assert bd.check_api_response(r, "GET") and r.content == expected
        return
    # url-encoded body, multipart body, and the query string of a POST.
    r = bd.request("POST", "/" + endpoint, data={name: raw, **rest})
    assert bd.check_api_response(r, "POST") and r.content == expected
    files = {k: (None, v) for k, v in {name: raw, **rest}.items() if k != "egg"}
    if "egg" in rest:
        files["egg"] = ("project.egg", rest["egg"])
    r = bd.request("POST", "/" + endpoint, files=files)
    assert bd.check_api_response(r, "POST") and r.content == expected
    r = bd.request("POST", "/" + endpoint, params={name: raw},
                   data={k: v for k, v in rest.items()})
    assert bd.check_api_response(r, "POST") and r.content == expected
    assert bd.api("listprojects.json")["projects"] == ["bad"]


def test_invalid_utf8_in_a_spider_argument_schedules_nothing(bd):
    before = all_job_ids(bd)
    obj = bd.call("schedule.json", data={"project": "bad", "spider": "quick", "arg": b"\xc3("})
    assert obj["status"] == "error"
    assert "can't decode byte 0xc3 in position 0" in obj["message"]
    assert all_job_ids(bd) == before


def test_query_string_decoding_like_python(bd):
    status, body = raw_get(bd, "/listspiders.json?project=%ZZ")
    assert status == 200 and body == error_body("project '%ZZ' not found")
    status, body = raw_get(bd, "/listspiders.json?project=a+b%2Bc")
    assert status == 200 and body == error_body("project 'a b+c' not found")


# ---- path traversal ----------------------------------------------------

TRAVERSAL_PROJECTS = ["../p", "a/b", "..", "/abs", "../../../../tmp/evil"]


def test_path_traversal_on_every_endpoint(bd, egg_bytes):
    root = os.path.dirname(bd.workdir)
    here = os.path.basename(bd.workdir)
    before = snapshot(root)
    egg = egg_bytes("testproj")

    for p in TRAVERSAL_PROJECTS:
        expected = f"DirectoryTraversalError: {p}"
        obj = bd.call("addversion.json", data={"project": p, "version": "1"},
                      files={"egg": ("project.egg", egg)})
        assert obj.get("message") == expected, (p, obj)
        assert bd.api_error("listversions.json", project=p) == expected
        assert bd.api_error("delversion.json", project=p, version="1") == expected
        assert bd.api_error("delproject.json", project=p) == expected
        for endpoint, params in [("schedule.json", {"spider": "quick"}), ("listspiders.json", {}),
                                 ("listjobs.json", {}), ("status.json", {"job": "j"}),
                                 ("cancel.json", {"job": "j"})]:
            message = bd.api_error(endpoint, project=p, **params)
            assert p in message, (endpoint, p, message)

    # "." must not name the eggs directory itself.
    for endpoint, params in [("addversion.json", {"version": "1", "egg": egg}),
                             ("delversion.json", {"version": "1"}), ("delproject.json", {})]:
        obj = bd.call(endpoint, data={"project": ".", **params})
        assert obj["status"] == "error", (endpoint, obj)

    assert bd.api_error("schedule.json", project="bad", spider="../x") == "spider '../x' not found"
    assert bd.api_error("schedule.json", project="bad", spider="quick", _version="../x") == \
        "version '../x' not found"
    assert bd.api_error("listspiders.json", project="bad", _version="../x") == "version '../x' not found"
    assert bd.api_error("delversion.json", project="bad", version="../x") == "version '../x' not found"
    assert bd.api("cancel.json", project="bad", job="../x")["prevstate"] is None
    assert bd.api("status.json", project="bad", job="../x")["currstate"] is None

    # A version is sanitized into a file name: it cannot leave the project.
    obj = bd.call("addversion.json", data={"project": "bad", "version": "../../v"},
                  files={"egg": ("project.egg", egg)})
    if obj["status"] == "ok":
        assert os.path.isfile(bd.path("eggs", "bad", "______v.egg"))
        assert sorted(bd.api("listversions.json", project="bad")["versions"]) == ["1_0", "______v"]
        bd.api("delversion.json", project="bad", version="../../v")
    assert bd.api("listversions.json", project="bad")["versions"] == ["1_0"]

    assert bd.api("listprojects.json")["projects"] == ["bad"]
    assert os.path.isfile(bd.path("eggs", "bad", "1_0.egg"))
    assert sorted(os.listdir(bd.path("eggs"))) in (["bad"], [".staging", "bad"])
    new = snapshot(root) - before
    allowed = (f"{here}/logs", f"{here}/dbs", f"{here}/eggs/.staging")
    assert all(path.startswith(allowed) for path in new), sorted(new)
    assert not os.path.exists("/tmp/evil") and not os.path.exists("/abs")


@pytest.mark.parametrize("jobid", ["../x", "a/b", "..", "a..b", "x/../../y", "/abs", ".", "a\x00b", "a\nb", ""])
def test_unsafe_job_ids_are_refused(bd, jobid):
    before = all_job_ids(bd)
    obj = bd.call("schedule.json", data={"project": "bad", "spider": "quick", "jobid": jobid})
    assert obj["status"] == "error", obj
    if jobid.isprintable() and jobid:
        assert jobid in obj["message"], obj["message"]
    assert all_job_ids(bd) == before


def test_a_refused_job_id_does_not_leak_the_only_slot(bd):
    for jobid in ("../x", "a/b"):
        assert bd.call("schedule.json", data={"project": "bad", "spider": "quick", "jobid": jobid})["status"] == "error"
    job = bd.schedule("bad", "quick", count=1)
    assert bd.wait_finished(job, 30)["state"] == "finished"
    assert bd.api("daemonstatus.json")["pending"] == 0


@pytest.mark.parametrize("project", ["a\x00b", "a\nb", "a\x7fb", ""])
def test_control_characters_in_project_names_are_refused(bd, egg_bytes, project):
    obj = bd.call("addversion.json", data={"project": project, "version": "1"},
                  files={"egg": ("project.egg", egg_bytes("testproj"))})
    assert obj["status"] == "error", obj
    assert bd.api("listprojects.json")["projects"] == ["bad"]
    assert sorted(os.listdir(bd.path("eggs"))) in (["bad"], [".staging", "bad"])


# ---- request bodies ----------------------------------------------------

def zip_of(size):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("blob.bin", os.urandom(size))
    return buf.getvalue()


def test_uploads_over_max_upload_are_413_and_store_nothing(spiderd):
    d = spiderd(spiderd={"max_upload": 1048576})
    big = zip_of(2 * 1024 * 1024)

    # A client that asks first (curl does for big bodies) is refused on the
    # Content-Length alone, before it sends the body.
    head = raw_request(d.port, b"POST /addversion.json HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Type: application/x-www-form-urlencoded\r\n"
                       b"Expect: 100-continue\r\n"
                       b"Content-Length: 3000000\r\n\r\n", read_timeout=5)
    assert re.match(rb"HTTP/1\.[01] 413", head), head[:200]

    r = d.request("POST", "/addversion.json", data={"project": "big", "version": "1"},
                  files={"egg": ("project.egg", big)})
    assert r.status_code == 413
    r = d.request("POST", "/addversion.json", data={"project": "big", "version": "1", "egg": big})
    assert r.status_code == 413

    def chunks():
        for i in range(0, len(big), 65536):
            yield big[i:i + 65536]
    try:
        r = d.request("POST", "/addversion.json?project=big&version=1", data=chunks(),
                      headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 413
    except requests.ConnectionError:
        pass  # the server may close a streamed upload it refuses

    assert d.api("listprojects.json")["projects"] == []
    assert not os.path.exists(d.path("eggs", "big"))
    # Under the limit, the same kind of body is read (and refused as an egg).
    obj = d.call("addversion.json", data={"project": "small", "version": "1"},
                 files={"egg": ("project.egg", zip_of(900 * 1024))})
    assert obj["status"] == "error" and obj["message"].startswith("RunnerError: ")
    assert d.api("listprojects.json")["projects"] == []


@pytest.mark.parametrize("content_type,body", [
    ("multipart/form-data", b"--XYZ\r\nContent-Disposition: form-data; name=\"project\"\r\n\r\nbad\r\n--XYZ--\r\n"),
    ("multipart/form-data; boundary=XYZ", b"this is not a multipart body at all"),
    ("multipart/form-data; boundary=XYZ",
     b"--XYZ\r\nContent-Disposition: form-data; name=\"project\"\r\n\r\nbad\r\n"
     b"--XYZ\r\nContent-Disposition: form-data; name=\"job\"\r\n\r\nj"),
])
def test_malformed_multipart_is_400(bd, content_type, body):
    r = bd.request("POST", "/cancel.json", data=body, headers={"Content-Type": content_type})
    assert r.status_code == 400, (r.status_code, r.content[:200])
    assert bd.api("daemonstatus.json")["status"] == "ok"


def test_garbage_requests_do_not_hurt_the_daemon(bd):
    for data in (b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x00\x01\x02\xff\r\n\r\n"):
        reply = raw_request(bd.port, data, read_timeout=3)
        assert reply == b"" or re.match(rb"HTTP/1\.[01] [45]\d\d", reply), reply[:100]
        assert bd.api("daemonstatus.json")["status"] == "ok"
    # A huge header and a body shorter than announced: any answer, but the daemon lives on.
    for data in (b"GET /daemonstatus.json HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n",
                 b"POST /schedule.json HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nshort"):
        raw_request(bd.port, data, read_timeout=1)
        assert bd.api("daemonstatus.json")["status"] == "ok"


def test_concurrent_requests(bd):
    errors = []

    def worker():
        s = requests.Session()
        try:
            for _ in range(25):
                r = s.get(bd.url + "/daemonstatus.json", timeout=timeout(20))
                if r.status_code != 200 or r.json()["status"] != "ok":
                    errors.append(r.content)
        except Exception as e:  # collected and reported below
            errors.append(repr(e))
        finally:
            s.close()
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_every_endpoint_survives_empty_and_long_parameters(bd):
    for endpoint in ENDPOINTS:
        # A query string stays under the 8 KB request line common servers take.
        for value in ("", "x" * (1500 if endpoint_verb(endpoint) == "GET" else 100000)):
            params = {"project": value, "job": value, "spider": value, "version": value}
            if endpoint_verb(endpoint) == "GET":
                obj = bd.call(endpoint, params=params)
            else:
                obj = bd.call(endpoint, data=params)
            assert obj["status"] in ("ok", "error")
    assert bd.api("listprojects.json")["projects"] == ["bad"]
