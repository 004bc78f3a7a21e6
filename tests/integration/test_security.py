"""A security review, one test per point, against a real daemon over real
HTTP:

1. names that become paths are refused through every route that takes them
   (Scrapyd's endpoints, every REST route with a path parameter as the API
   index lists them, every JSON-RPC method behind those routes, /logs/ and
   /items/), and nothing outside the data directories is created or read;
2. uploaded archives are bounded (declared size, real size, member count,
   body size) and a refused one leaves nothing behind;
3. headers, bodies and JSON nesting are bounded on every face, with the
   error shape of the face;
4. webhooks reach no loopback, private, link-local or otherwise non-public
   address, however it is spelled or resolved, unless allowed, and follow
   no redirect;
5. a job's token opens its own queues only, and nothing else;
6. secrets appear in no log, event, listing, status or metrics answer.

What other files prove already is referenced rather than repeated:
test_badinput.py (Scrapyd's DirectoryTraversalError messages, invalid
UTF-8, unsafe job ids, 413 for Scrapyd's endpoints), test_web.py (traversal
under /logs/ and /items/ in every spelling), test_manifest.py (members with
'..', absolute paths, symlinks out), test_auth.py (roles and project
limits), test_store_secrets.py (store passwords)."""

import base64
import http.client
import io
import itertools
import json
import os
import re
import socket
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import snapshot, timeout, wait_for

API = "/api/v1"
ADMIN_PW = "adm1n-pw-5ecret-77"
USER_PW = "us3r-pw-5ecret-88"
WEBHOOK_SECRET = "wh-5ecret-99"
HOOK_PW = "hook-pw-5ecret-66"
SETTING_SECRET = "sett1ng-5ecret-55"
MARK = "spiderd-security-outside-marker"


# ---- the daemon -------------------------------------------------------------

@pytest.fixture(scope="module")
def sd(module_spiderd, egg_bytes):
    """One daemon with basic auth, items stored, debug logging, a webhook
    secret and a webhook URL with a password (refused: it is loopback, so
    the refusal is logged with the URL); project "tp" = testproj, project
    "other" = testproj too."""
    d = module_spiderd(
        name="sec", scrapyd={"username": "admin", "password": ADMIN_PW, "items_dir": "items"},
        spiderd={"auth_fail_limit": 0, "log_level": "debug", "webhook_secret": WEBHOOK_SECRET,
                 "webhooks": f"http://hook:{HOOK_PW}@127.0.0.1:9/x", "webhook_events": "*",
                 "webhook_retries": 0},
        # The same secrets from the environment too, as the docs advise.
        env={"SCRAPYD_PASSWORD": ADMIN_PW, "SPIDERD_WEBHOOK_SECRET": WEBHOOK_SECRET})
    # A file beside the daemon's directory: no answer may ever carry it.
    with open(os.path.join(os.path.dirname(d.workdir), "secret.txt"), "w") as f:
        f.write(MARK)
    for project in ("tp", "other"):
        r = d.request("POST", f"{API}/projects/{project}/versions", params={"version": "1.0"},
                      data=egg_bytes("testproj"),
                      headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 201, r.text
    return d


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def raw(d, method, path, body=None, headers=None, auth=True):
    """A request whose path goes out byte for byte (requests would remove
    dot segments and re-encode)."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout(20))
    h = {"Host": "x"}
    if auth:
        h["Authorization"] = basic("admin", ADMIN_PW)
    h.update(headers or {})
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in h.items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def error_shape(status, headers, body, where):
    assert headers.get("Content-Type") == "application/json", (where, status, body[:200])
    doc = json.loads(body)
    assert list(doc) == ["error"], (where, doc)
    e = doc["error"]
    assert e["code"].startswith("SPD_"), (where, e)
    assert isinstance(e["message"], str) and len(e["message"]) > 5, (where, e)
    return e


def outside_untouched(d, before):
    """Nothing new beside the daemon's directory, nothing new in it outside
    its data directories, and no evil path anywhere."""
    root = os.path.dirname(d.workdir)
    here = os.path.basename(d.workdir)
    new = snapshot(root) - before
    allowed = tuple(f"{here}/{x}" for x in ("logs", "items", "dbs", "eggs/.staging"))
    assert all(p.startswith(allowed) for p in new), sorted(new)
    for p in ("/tmp/sec-evil", "/etc/sec-evil", "/sec-evil", os.path.join(root, "x"),
              os.path.join(root, "sec-evil")):
        assert not os.path.exists(p), p


# ---- 1. names that become paths ------------------------------------------------

# Names that must never become a path component, as a form, query or JSON
# value (the HTTP client encodes them).
UNSAFE = {
    "dotdot": "..", "dot": ".", "up": "../sec-evil", "deep": "../../../../../tmp/sec-evil",
    "slash": "a/b", "absolute": "/etc/sec-evil", "backslash": "a\\b", "up-backslash": "..\\sec-evil",
    "nul": "a\x00b", "newline": "a\nb", "control": "a\x01b", "del": "a\x7fb", "empty": "",
    "long": "x" * 300, "trailing-dotdot": "x/..",
}

# The same as raw path segments, percent-encoded in every way a decoder
# could be fooled by.
SEGMENTS = [
    "..", "%2e%2e", "%2E%2e", ".%2e", ".", "%2e", "..%2fsec-evil", "%2e%2e%2fsec-evil",
    "%2e%2e%2f%2e%2e%2f%2e%2e%2ftmp%2fsec-evil", "a%2fb", "%2fetc%2fsec-evil", "a%5cb",
    "..%5csec-evil", "a%00b", "a%0ab", "a%01b", "a%7fb", "x" * 300,
]

# (endpoint, the unsafe parameter, the other parameters). Scrapyd's
# endpoints answer a refusal as Scrapyd does: HTTP 200, {"status": "error",
# "message": ...} (d.call checks that envelope); lookups of a job answer as
# for an unknown job (ok, state null).
SCRAPYD_CASES = [
    ("addversion.json", "project", {"version": "9"}),
    ("schedule.json", "project", {"spider": "quick"}),
    ("schedule.json", "spider", {"project": "tp"}),
    ("schedule.json", "jobid", {"project": "tp", "spider": "quick"}),
    ("schedule.json", "_version", {"project": "tp", "spider": "quick"}),
    ("cancel.json", "project", {"job": "j"}),
    ("cancel.json", "job", {"project": "tp"}),
    ("listversions.json", "project", {}),
    ("listspiders.json", "project", {}),
    ("listspiders.json", "_version", {"project": "tp"}),
    ("listjobs.json", "project", {}),
    ("delversion.json", "project", {"version": "1.0"}),
    ("delversion.json", "version", {"project": "tp"}),
    ("delproject.json", "project", {}),
    ("status.json", "job", {}),
    ("status.json", "project", {"job": "j"}),
]
LOOKUPS = {("cancel.json", "job"): "prevstate", ("status.json", "job"): "currstate"}


def all_jobs(d):
    lj = d.listjobs()
    return sorted(e["id"] for s in ("pending", "running", "finished") for e in lj[s])


def test_unsafe_names_are_refused_by_every_scrapyd_endpoint(sd, egg_bytes):
    before = snapshot(os.path.dirname(sd.workdir))
    jobs = all_jobs(sd)
    egg = egg_bytes("testproj")
    for endpoint, name, rest in SCRAPYD_CASES:
        for what, value in UNSAFE.items():
            params = dict(rest, **{name: value})
            if endpoint == "addversion.json":
                obj = sd.call(endpoint, data=params, files={"egg": ("project.egg", egg)})
            elif endpoint in ("listversions.json", "listspiders.json", "listjobs.json",
                              "status.json"):
                obj = sd.call(endpoint, params=params)
            else:
                obj = sd.call(endpoint, data=params)
            where = (endpoint, name, what)
            if (endpoint, name) in LOOKUPS and obj["status"] == "ok":
                assert obj[LOOKUPS[endpoint, name]] is None, (where, obj)
                continue
            assert obj["status"] == "error", (where, obj)
            assert len(obj["message"]) > 5, (where, obj)
    # The same through a raw query string, percent-encoded: decoded once.
    for seg in SEGMENTS:
        status, _, body = raw(sd, "GET", f"/listversions.json?project={seg}")
        assert status == 200 and json.loads(body)["status"] == "error", (seg, body)
    # Decoded once: a double-encoded '..' is a name of its own, of no project.
    status, _, body = raw(sd, "GET", "/listversions.json?project=%252e%252e")
    assert status == 200 and json.loads(body)["versions"] == [], body
    # A leading dot would collide with eggs/.staging: no project starts with one.
    for project in (".staging", ".hidden"):
        obj = sd.call("addversion.json", data={"project": project, "version": "1"},
                      files={"egg": ("project.egg", egg)})
        assert obj["status"] == "error", (project, obj)
    # A version becomes a file name (sanitized): not empty, at most 200 bytes.
    for version, message in (("", "version must not be empty"),
                             ("v" * 201, "version is longer than 200 bytes"),
                             ("v" * 300, "version is longer than 200 bytes")):
        obj = sd.call("addversion.json", data={"project": "tp", "version": version},
                      files={"egg": ("project.egg", egg)})
        assert obj["status"] == "error" and obj["message"] == message, obj
    assert sorted(sd.api("listprojects.json")["projects"]) == ["other", "tp"]
    assert all_jobs(sd) == jobs
    assert sd.api("listversions.json", project="tp")["versions"] == ["1_0"]
    outside_untouched(sd, before)


def index_routes(d):
    r = d.request("GET", API + "/")
    assert r.status_code == 200, r.text
    doc = r.json()
    return doc["routes"], doc["jsonrpc"]["methods"]


VALID = {"project": "tp", "version": "1.0", "id": "1", "schedule": "s1", "name": "tp.q"}


def test_unsafe_path_parameters_on_every_rest_route(sd):
    """Every route of the API index with a path parameter, each parameter in
    turn, every spelling of SEGMENTS: 400 or 404 with the error shape, and
    nothing done. A new route is covered by being in the index."""
    routes, _ = index_routes(sd)
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "src", "api",
                           "openapi.json"), encoding="utf-8") as f:
        openapi = json.load(f)
    documented = openapi["paths"]
    tried = 0
    before = snapshot(os.path.dirname(sd.workdir))
    jobs = all_jobs(sd)
    for route in routes:
        names = re.findall(r"\{(\w+)\}", route["path"])
        if not names:
            continue
        # The index and the OpenAPI document agree on the path parameters.
        op = documented[route["path"]][route["method"].lower()]
        params = op.get("parameters", []) + documented[route["path"]].get("parameters", [])
        in_path = set()
        for p in params:
            if "$ref" in p:
                p = openapi["components"]["parameters"][p["$ref"].rsplit("/", 1)[1]]
            if p.get("in") == "path":
                in_path.add(p["name"])
        assert in_path == set(names), (route, in_path)
        for bad in names:
            for seg in SEGMENTS:
                path = route["path"]
                for n in names:
                    path = path.replace("{" + n + "}", seg if n == bad else VALID[n])
                status, headers, body = raw(sd, route["method"], path, body=b"{}",
                                            headers={"Content-Type": "application/json"})
                where = (route["method"], path)
                assert status in (400, 404), (where, status, body[:300])
                error_shape(status, headers, body, where)
                assert MARK.encode() not in body
                tried += 1
    assert tried > 400
    # Names in JSON bodies: a job's project, spider, job id and version; a
    # schedule's; the projects of a token and a user.
    bodies = [("/jobs", {"project": "tp", "spider": "quick"}, ("project", "spider", "jobid", "version")),
              ("/schedules", {"name": "s", "project": "tp", "spider": "quick", "cron": "0 0 * * *"},
               ("project", "spider", "version")),
              ("/tokens", {"role": "read"}, ("projects",)),
              ("/users", {"name": "u1", "password": "long-enough-1", "role": "read"}, ("projects",))]
    for path, good, fields in bodies:
        for field in fields:
            for what, value in UNSAFE.items():
                body = dict(good, **{field: [value] if field == "projects" else value})
                r = sd.request("POST", API + path, json=body)
                assert r.status_code in (400, 404), (path, field, what, r.status_code, r.text)
                error_shape(r.status_code, r.headers, r.content, (path, field, what))
    # Decoded once: a double-encoded '..' is a name of its own, not found.
    status, headers, body = raw(sd, "GET", f"{API}/projects/%252e%252e/versions")
    assert status == 404 and "'%2e%2e'" in error_shape(status, headers, body, "2x")["message"]
    assert sorted(sd.api("listprojects.json")["projects"]) == ["other", "tp"]
    assert sd.api("listversions.json", project="tp")["versions"] == ["1_0"]
    assert all_jobs(sd) == jobs
    outside_untouched(sd, before)


def rpc(d, method, params, headers=None):
    """A JSON-RPC call, as the admin or (headers) as someone else."""
    kw = {"auth": None, "headers": headers} if headers else {}
    r = d.request("POST", API + "/jsonrpc", **kw,
                  json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
    assert r.status_code == 200, r.text
    return r.json()


def test_unsafe_names_on_every_json_rpc_method(sd):
    """The JSON-RPC method behind every route with a path parameter, each
    parameter in turn, every value of UNSAFE: an error with a message and
    the spiderd code, never a result. The Gerapy-style alias of a method
    (listed right after it in the index) is called too."""
    routes, methods = index_routes(sd)
    ops = {r["op"] for r in routes if r["op"]}
    aliases, last = {}, None
    for m in methods:
        if m in ops:
            last = m
        else:
            aliases.setdefault(last, []).append(m)
    before = snapshot(os.path.dirname(sd.workdir))
    tried = 0
    for route in routes:
        names = re.findall(r"\{(\w+)\}", route["path"])
        if not names or not route["op"]:
            continue
        assert route["op"] in methods, route
        for bad, (what, value), method in itertools.product(
                names, UNSAFE.items(), [route["op"]] + aliases.get(route["op"], [])):
            params = {n: (value if n == bad else VALID[n]) for n in names}
            if route["op"] == "versions.add":
                params["egg"] = base64.b64encode(b"PK\x05\x06" + b"\0" * 18).decode()
            doc = rpc(sd, method, params)
            where = (method, bad, what)
            assert "result" not in doc, (where, doc)
            e = doc["error"]
            assert e["data"]["code"].startswith("SPD_") and len(e["message"]) > 5, (where, e)
            tried += 1
    assert tried > 300
    # A leading dot names no project.
    doc = rpc(sd, "versions.add", {"project": ".staging", "version": "1",
                                   "egg": base64.b64encode(b"x").decode()})
    assert "error" in doc, doc
    assert sorted(sd.api("listprojects.json")["projects"]) == ["other", "tp"]
    outside_untouched(sd, before)


def test_logs_and_items_paths_read_nothing_outside(sd):
    """test_web.py walks /logs/ and /items/ spellings on an open daemon;
    here the same under auth, with names of a real project and job and the
    REST log and items routes."""
    for prefix in ("/logs", "/items"):
        for tail in ("/../secret.txt", "/%2e%2e/secret.txt", "/tp/..%2f..%2fsecret.txt",
                     "/tp/quick/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fsecret.txt",
                     "/tp/quick/..%5c..%5csecret.txt", "/tp/quick/a%00.log",
                     "/%2e%2e%2f%2e%2e%2fdbs%2fspiderd.db", "/tp/%2e%2e/%2e%2e/%2e%2e/scrapyd.conf"):
            status, _, body = raw(sd, "GET", prefix + tail)
            assert status in (400, 403, 404), (prefix + tail, status)
            assert MARK.encode() not in body and ADMIN_PW.encode() not in body
            assert b"SQLite format" not in body
    for tail in ("log", "items"):
        for seg in ("..", "%2e%2e%2f%2e%2e%2fsecret.txt", "..%2f..%2fsecret"):
            status, headers, body = raw(sd, "GET", f"{API}/jobs/{seg}/{tail}")
            assert status in (400, 404), (seg, status)
            error_shape(status, headers, body, seg)


# ---- 2. uploaded archives ----------------------------------------------------

MANIFEST = json.dumps({"spiders": {"a": {"command": ["true"]}}})


def zip_bomb(size):
    """A zip whose one member is `size` zero bytes: it compresses ~1000:1."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("spiderd.json", MANIFEST)
        with z.open("zeros.bin", "w", force_zip64=True) as f:
            chunk = b"\0" * (1 << 20)
            for _ in range(size >> 20):
                f.write(chunk)
    return buf.getvalue()


def tar_gz(members):
    """members: TarInfo objects, each followed by its (possibly absent) data."""
    out = io.BytesIO()
    import gzip
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6) as g:
        for info, data in members:
            g.write(info.tobuf(format=tarfile.GNU_FORMAT))
            if data:
                g.write(data)
                g.write(b"\0" * ((512 - len(data) % 512) % 512))
        g.write(b"\0" * 1024)
    return out.getvalue()


def tar_member(name, size, data=b""):
    info = tarfile.TarInfo(name)
    info.size = size
    return info, data


def test_archive_bombs_are_refused_and_leave_nothing(sd):
    before = snapshot(os.path.dirname(sd.workdir))
    manifest = MANIFEST.encode()
    cases = {
        # 600 MiB of zeros in ~600 KB: over the 512 MiB extracted limit.
        "zip bomb": (zip_bomb(600 << 20), "more than 536870912 bytes once extracted"),
        # A tar member that says it holds 600 MiB.
        "tar size": (tar_gz([tar_member("spiderd.json", len(manifest), manifest),
                             tar_member("big.bin", 600 << 20)]),
                     "more than 536870912 bytes once extracted"),
        # 20,001 empty members (~10 MB of headers, ~60 KB compressed).
        "members": (tar_gz([tar_member("spiderd.json", len(manifest), manifest)] +
                           [tar_member(f"f{i:05d}", 0) for i in range(20001)]),
                    "more than 20000 members"),
    }
    for what, (data, message) in cases.items():
        assert len(data) < 1024 * 1024, (what, len(data))  # under max_upload
        obj = sd.call("addversion.json", data={"project": "bomb", "version": "1"},
                      files={"egg": ("project.egg", data)})
        assert obj["status"] == "error" and message in obj["message"], (what, obj)
        r = sd.request("POST", f"{API}/projects/bomb/versions", params={"version": "1"},
                       data=data, headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 400, (what, r.status_code, r.text[:300])
        e = error_shape(r.status_code, r.headers, r.content, what)
        assert e["code"] == "SPD_EBADEGG" and message in e["message"], (what, e)
    # Members named outside and links out: test_manifest.py proves each;
    # here one of each kind through REST, with the filesystem checked.
    link = tarfile.TarInfo("link")
    link.type = tarfile.SYMTYPE
    link.linkname = "/tmp/sec-evil"
    for what, data in {
        "dotdot": tar_gz([tar_member("spiderd.json", len(manifest), manifest),
                          tar_member("../../../../tmp/sec-evil", 1, b"x")]),
        "absolute": tar_gz([tar_member("spiderd.json", len(manifest), manifest),
                            tar_member("/tmp/sec-evil", 1, b"x")]),
        "symlink": tar_gz([tar_member("spiderd.json", len(manifest), manifest), (link, b"")]),
    }.items():
        r = sd.request("POST", f"{API}/projects/bomb/versions", params={"version": "1"},
                       data=data, headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 400, (what, r.text)
        assert error_shape(r.status_code, r.headers, r.content, what)["code"] == "SPD_EBADEGG"
    assert sorted(sd.api("listprojects.json")["projects"]) == ["other", "tp"]
    assert not os.path.exists(sd.path("eggs", "bomb"))
    assert not os.path.exists(sd.path("dbs", "spiders", "bomb"))
    outside_untouched(sd, before)


def test_an_upload_over_max_upload_is_413_on_every_face(sd):
    """test_badinput.py proves it for addversion.json's encodings; here the
    REST upload and JSON-RPC, with the native error shape."""
    big = b"PK" + os.urandom(1536 * 1024)
    r = sd.request("POST", f"{API}/projects/huge/versions", params={"version": "1"},
                   data=big, headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 413, r.status_code
    e = error_shape(413, r.headers, r.content, "rest upload")
    assert e["code"] == "SPD_ETOOBIG" and "1048576 bytes" in e["message"], e
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "versions.add",
                       "params": {"project": "huge", "version": "1",
                                  "egg": base64.b64encode(big).decode()}}).encode()
    r = sd.request("POST", API + "/jsonrpc", data=body,
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert error_shape(413, r.headers, r.content, "rpc upload")["code"] == "SPD_ETOOBIG"
    assert sorted(sd.api("listprojects.json")["projects"]) == ["other", "tp"]
    assert not os.path.exists(sd.path("eggs", "huge"))


# ---- 3. headers, bodies, nesting -------------------------------------------------

def test_oversized_headers_are_431_on_every_face(sd):
    for path in ("/daemonstatus.json", API + "/status", API + "/jsonrpc", "/logs/", "/"):
        status, _, _ = raw(sd, "GET", path, headers={"X-Big": "a" * 20000})
        assert status == 431, (path, status)
        # Many small headers add up the same way.
        many = {f"X-H{i}": "b" * 100 for i in range(200)}
        status, _, _ = raw(sd, "GET", path, headers=many)
        assert status == 431, (path, status)
    assert sd.api("daemonstatus.json")["status"] == "ok"


def test_oversized_bodies_are_413_for_form_multipart_and_json(sd):
    big = "x" * (1536 * 1024)
    # Scrapyd's face: form and multipart.
    r = sd.request("POST", "/schedule.json", data={"project": "tp", "spider": big})
    assert r.status_code == 413
    r = sd.request("POST", "/schedule.json", files={"project": (None, "tp"), "spider": (None, big)})
    assert r.status_code == 413
    # The native API: JSON on REST and JSON-RPC, a form on REST.
    for path, body in ((API + "/jobs", {"project": "tp", "spider": big}),
                       (API + "/jsonrpc", {"jsonrpc": "2.0", "id": 1, "method": "jobs.create",
                                           "params": {"project": "tp", "spider": big}}),
                       (API + "/queues/tp.q/put", {"elements": [big]})):
        r = sd.request("POST", path, json=body)
        assert r.status_code == 413, (path, r.status_code)
        e = error_shape(413, r.headers, r.content, path)
        assert e["code"] == "SPD_ETOOBIG", e
    r = sd.request("POST", API + "/jobs", data={"project": "tp", "spider": big})
    assert r.status_code == 413
    assert sd.api("daemonstatus.json")["pending"] == 0


def test_deep_json_is_refused_on_rest_and_json_rpc(sd):
    deep = "[" * 5000 + "]" * 5000
    for path, body in ((API + "/jobs", '{"project": "tp", "spider": "quick", "args": %s}' % deep),
                       (API + "/queues/tp.q/put", '{"elements": %s}' % deep),
                       (API + "/schedules", '{"name": "d", "project": "tp", "spider": "quick", '
                                            '"cron": "* * * * *", "settings": %s}' % deep)):
        r = sd.request("POST", path, data=body, headers={"Content-Type": "application/json"})
        assert r.status_code in (400, 413), (path, r.status_code)
        e = error_shape(r.status_code, r.headers, r.content, path)
        assert "nested deeper than" in e["message"], e
    body = ('{"jsonrpc": "2.0", "id": 1, "method": "queues.put", "params": {"name": "tp.q", '
            '"elements": %s}}' % deep)
    r = sd.request("POST", API + "/jsonrpc", data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 200
    doc = r.json()
    assert doc["error"]["code"] == -32700 and "nested deeper than" in doc["error"]["message"], doc
    # Brackets inside strings do not count; 32 levels pass the depth check
    # (and are then judged as elements).
    r = sd.request("POST", API + "/queues/tp.deep/put", json={"elements": ["[{" * 100]})
    assert r.status_code == 200, r.text
    assert sd.request("DELETE", API + "/queues/tp.deep").status_code in (200, 204)
    r = sd.request("POST", API + "/queues/tp.deep/put",
                   json={"elements": json.loads("[" * 31 + "]" * 31)})
    assert r.status_code == 400 and "nested deeper" not in r.text, r.text
    assert sd.api("daemonstatus.json")["pending"] == 0


# ---- 4. webhooks -----------------------------------------------------------------

class Recorder:
    """HTTP servers on loopback that record every request; one of them
    answers 307 to another."""

    def __init__(self):
        self.hits = []
        self.servers = []
        self.lock = threading.Lock()

    def serve(self, host="127.0.0.1", family=socket.AF_INET, redirect_to=None):
        rec = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                with rec.lock:
                    rec.hits.append((host, self.server.server_address[1], self.path))
                if redirect_to:
                    self.send_response(307)
                    self.send_header("Location", redirect_to)
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        class S(ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

        s = S((host, 0), H)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        self.servers.append(s)
        return s.server_address[1]

    def close(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()


@pytest.fixture
def recorder():
    r = Recorder()
    yield r
    r.close()


def ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def delivering(d):
    """Waits until the node holds the webhook lease and its cursor: events
    from now on are delivered."""
    wait_for(lambda: "delivers webhooks now" in d.stderr_text(), timeout(10), "the webhook lease")


def queue_event(d):
    """A cheap event: a queue's settings changed."""
    r = d.request("PUT", API + "/queues/hooks", json={"visibility": 30})
    assert r.status_code == 200, r.text


def test_webhooks_reach_no_private_address(spiderd, recorder):
    port = recorder.serve()
    urls = [f"http://127.0.0.1:{port}/loopback",
            f"http://localhost:{port}/name",               # a name resolving to loopback
            f"http://2130706433:{port}/decimal",           # 127.0.0.1 as one number
            f"http://0177.0.0.1:{port}/octal",
            f"http://0x7f.1:{port}/hex",
            f"http://127.1:{port}/short",
            f"http://0.0.0.0:{port}/zero",                 # reaches loopback on Linux
            f"http://[::ffff:127.0.0.1]:{port}/mapped",
            f"http://[::ffff:7f00:1]:{port}/mapped-hex",
            f"http://10.0.0.1:{port}/private",
            f"http://172.16.0.1:{port}/private",
            f"http://192.168.0.1:{port}/private",
            f"http://100.64.0.1:{port}/shared",
            f"http://169.254.169.254:{port}/metadata",     # link-local: cloud metadata
            f"http://[fd00::1]:{port}/ula",
            f"http://[fe80::1]:{port}/link-local",
            f"http://[::]:{port}/unspecified"]
    if ipv6_loopback():
        port6 = recorder.serve("::1", socket.AF_INET6)
        urls.append(f"http://[::1]:{port6}/v6")
    # One URL a line: a configuration line holds at most ~200 characters.
    d = spiderd(spiderd={"webhooks": "\n  ".join(urls), "webhook_events": "queue.",
                         "webhook_retries": 3, "webhook_backoff": 0.1, "webhook_timeout": 2},
                env={"no_proxy": "*", "NO_PROXY": "*"})
    delivering(d)
    queue_event(d)

    # Each URL is refused at once (no retries): the log names it and why.
    wait_for(lambda: len(re.findall(r"refused: .* address \(\[spiderd\] webhook_allow_private",
                                    d.stderr_text())) >= len(urls), timeout(15),
             "every delivery refused")
    text = d.stderr_text()
    for u in urls:
        assert re.search(re.escape(u) + r" refused: \S+ is an? [^\n]+ address \(\[spiderd\] webhook_allow_private", text), u
    assert "127.0.0.1 is a loopback address" in text
    assert "169.254.169.254 is a link-local address" in text
    assert "10.0.0.1 is a private address" in text
    assert "fd00::1 is a unique local (private) address" in text
    assert not re.search(r"to http\S+ failed \(.*\); retry", text), text[-2000:]
    assert recorder.hits == []


def test_webhook_allow_list_and_no_redirects(spiderd, recorder):
    """The allow-list lets one receiver in; its redirect to another loopback
    server is not followed; a bad allow-list stops start-up."""
    target = recorder.serve("127.0.0.1")
    first = recorder.serve("127.0.0.2", redirect_to=f"http://127.0.0.1:{target}/stolen")
    d = spiderd(spiderd={"webhooks": f"http://127.0.0.2:{first}/in", "webhook_events": "queue.",
                         "webhook_allow_private": "127.0.0.2/32", "webhook_retries": 0,
                         "webhook_timeout": 2},
                env={"no_proxy": "*", "NO_PROXY": "*"})
    delivering(d)
    queue_event(d)
    # The attempt is logged once its transfer is over: a redirect followed
    # would have been followed by then.
    wait_for(lambda: "HTTP 307" in d.stderr_text(), timeout(10), "the 307 answer")
    assert [h[0] for h in recorder.hits] == ["127.0.0.2"], recorder.hits
    d.stop()

    bad = spiderd(start=False, spiderd={"webhook_allow_private": "10.0.0.0/33"})
    bad.spawn()
    assert bad.proc.wait(timeout(15)) != 0
    assert "webhook_allow_private" in bad.stderr_text() and "10.0.0.0/33" in bad.stderr_text()


# ---- 5. a job's token ------------------------------------------------------------

def test_a_job_token_opens_its_own_queues_and_nothing_else(sd, tmp_path):
    out, hold = str(tmp_path / "seen.json"), str(tmp_path / "hold")
    # Another job of another project, to reach for.
    other = sd.request("POST", API + "/jobs", json={"project": "other", "spider": "quick"}).json()
    wait_for(lambda: sd.request("GET", f"{API}/jobs/{other['id']}").json()["state"]
             in ("finished", "failed"), timeout(60), "the other job")
    assert sd.request("PUT", API + "/queues/other.urls", json={"visibility": 30}).status_code == 200
    assert sd.request("POST", API + "/queues/other.urls/put",
                      json={"elements": ["keep"]}).status_code == 200
    r = sd.request("POST", API + "/jobs", json={
        "project": "tp", "spider": "queueput",
        "args": {"queue": "tp.frontier", "elements": "u1", "out": out, "hold": hold}})
    assert r.status_code == 201, r.text
    job = r.json()
    try:
        wait_for(lambda: os.path.exists(out), timeout(60), "the spider's report")
        with open(out, encoding="utf-8") as f:
            seen = json.load(f)
        assert seen["put"][0] == 200, seen
        bearer = {"Authorization": "Bearer " + seen["token"]}
        s = sd.new_session()

        def call(method, path, **kw):
            return s.request(method, sd.url + path, headers=bearer, timeout=timeout(10), **kw)

        # Its own project's queues: yes.
        assert call("GET", API + "/queues/tp.frontier").status_code == 200
        # Jobs (its own, another), logs, items, Scrapyd's endpoints, admin
        # routes: refused by the server.
        for method, path in [
                ("GET", f"{API}/jobs/{job['id']}"), ("GET", f"{API}/jobs/{other['id']}"),
                ("POST", f"{API}/jobs/{other['id']}/cancel"), ("POST", f"{API}/jobs/{job['id']}/cancel"),
                ("GET", f"{API}/jobs/{other['id']}/log"), ("GET", f"{API}/jobs"),
                ("GET", "/listjobs.json?project=other"), ("POST", "/cancel.json"),
                ("GET", f"/logs/other/quick/{other['job']}.log"), ("GET", "/items/"),
                ("GET", API + "/tokens"), ("POST", API + "/tokens"), ("GET", API + "/users"),
                ("POST", API + "/users"), ("POST", API + "/nodes/self/drain"),
                ("GET", API + "/events"), ("GET", API + "/status"), ("GET", "/daemonstatus.json"),
                ("POST", "/addversion.json"), ("DELETE", API + "/projects/other")]:
            r = call(method, path, json={})
            assert r.status_code in (401, 403), (method, path, r.status_code)
        # JSON-RPC: anything but queues is forbidden.
        for method, params in [("jobs.get", {"id": other["id"]}), ("jobs.cancel", {"id": other["id"]}),
                               ("tokens.create", {"role": "admin"}), ("users.list", {}),
                               ("projects.delete", {"project": "other"}), ("status.get", {})]:
            doc = rpc(sd, method, params, headers=bearer)
            assert doc["error"]["data"]["code"] == "SPD_EFORBIDDEN", (method, doc)
        # Another project's queues: refused, through REST and JSON-RPC.
        for method, path, body in [("GET", "/queues/other.urls", None),
                                   ("POST", "/queues/other.urls/take", {"max": 1}),
                                   ("POST", "/queues/other.urls/put", {"elements": ["x"]}),
                                   ("POST", "/queues/other.urls/purge", {}),
                                   ("DELETE", "/queues/other.urls", None),
                                   ("GET", "/queues/other", None)]:
            r = call(method, API + path, json=body)
            assert r.status_code == 403, (method, path, r.status_code, r.text)
            assert error_shape(403, r.headers, r.content, path)["code"] == "SPD_EFORBIDDEN"
        doc = rpc(sd, "queues.take", {"name": "other.urls"}, headers=bearer)
        assert doc["error"]["data"]["code"] == "SPD_EFORBIDDEN", doc
        listed = call("GET", API + "/queues").json()
        assert "other.urls" not in json.dumps(listed), listed
        s.close()
    finally:
        open(hold, "w").close()
    wait_for(lambda: sd.request("GET", f"{API}/jobs/{job['id']}").json()["state"]
             in ("finished", "failed"), timeout(60), "the queueput job")
    r = sd.request("GET", API + "/queues/other.urls/items")
    assert [i["element"] for i in r.json()["items"]] == ["keep"]
    assert sd.request("GET", API + "/jobs/" + str(other["id"])).json()["state"] == "finished"


# ---- 6. secrets ------------------------------------------------------------------

def test_secrets_appear_nowhere(sd, tmp_path):
    # A token, a user with a password, the user logging in, a wrong password,
    # a bearer token in a query string, a job with its token.
    r = sd.request("POST", API + "/tokens", json={"role": "run", "name": "ci"})
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    r = sd.request("POST", API + "/users", json={"name": "carol", "password": USER_PW,
                                                 "role": "read"})
    assert r.status_code == 201, r.text
    assert sd.request("GET", API + "/status", auth=("carol", USER_PW)).status_code == 200
    assert sd.request("GET", API + "/status", auth=("carol", USER_PW + "x")).status_code == 401
    assert sd.request("GET", API + "/status", auth=("token", token)).status_code == 200
    assert sd.request("GET", API + "/status", auth=None,
                      headers={"Authorization": "Bearer " + token}).status_code == 200
    r = sd.request("PATCH", API + "/users/carol", json={"password": USER_PW + "2"})
    assert r.status_code == 200, r.text
    out = str(tmp_path / "seen.json")
    job = sd.schedule("tp", "queueput", queue="tp.s", elements="e", out=out)
    sd.wait_finished(job, 60)
    with open(out, encoding="utf-8") as f:
        job_token = json.load(f)["token"]
    assert job_token
    # A crawl that prints its whole environment into its log.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("spiderd.json", json.dumps(
            {"spiders": {"env": {"command": ["sh", "-c", "env; echo env-done"]}}}))
    assert sd.call("addversion.json", data={"project": "envp", "version": "1"},
                   files={"egg": ("p.zip", buf.getvalue())})["status"] == "ok"
    env_job = sd.schedule("envp", "env")
    sd.wait_finished(env_job, 60)
    env_log = sd.read_log("envp", "env", env_job)
    assert "env-done" in env_log and "SPIDERD_TOKEN=" in env_log, env_log[-2000:]
    sd.api("delproject.json", project="envp")
    # Every place a secret could leak to.
    answers = [sd.get("/listjobs.json").text, sd.get("/listjobs.json?project=tp").text,
               sd.get(f"/status.json?job={job}").text, sd.get("/daemonstatus.json").text,
               sd.get(API + "/status").text, sd.get(API + "/events?limit=1000").text,
               sd.get(API + "/jobs?limit=1000").text, sd.get(API + "/tokens").text,
               sd.get(API + "/users").text, sd.get(API + "/nodes").text,
               sd.get("/metrics").text, sd.get(API + "/auth/whoami").text,
               json.dumps(rpc(sd, "jobs.list", {})),
               json.dumps(rpc(sd, "events.list", {"limit": 1000}))]
    files = []
    for root in (sd.path("logs"), sd.path("items")):
        for dirpath, _, filenames in os.walk(root):
            files += [os.path.join(dirpath, f) for f in filenames]
    files.append(sd.stderr_path)
    answers.append(env_log)
    texts = answers + [open(f, encoding="utf-8", errors="replace").read() for f in files]
    secrets = {"admin password": ADMIN_PW, "user password": USER_PW, "api token": token,
               "token secret": token.rsplit("_", 1)[1], "another job's token": job_token,
               "webhook secret": WEBHOOK_SECRET, "webhook URL password": HOOK_PW,
               "basic header": basic("admin", ADMIN_PW).split()[1]}
    for what, secret in secrets.items():
        for i, text in enumerate(texts):
            assert secret not in text, (what, (answers + files)[i] if i >= len(answers) else i)
    # The refused webhook was logged, with its password masked.
    assert "http://hook:***@127.0.0.1:9/x refused" in sd.stderr_text()
