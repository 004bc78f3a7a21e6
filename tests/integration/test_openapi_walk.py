"""Walks every route of the native API and every JSON-RPC method against a
real daemon and checks each answer against src/api/openapi.json: the status
is one the operation lists, the Content-Type is the documented media type,
the JSON body validates against the documented schema (errors against the
Error schema), and the bodies sent validate against the documented
requestBody. The routes and methods come from the API index, so a new route
or method without a case here fails the walk. Every object in a documented
answer must say which properties are always there (or be named in
OPEN_OBJECTS with the reason it is open).

The OpenAPI 3.0 schemas are turned into JSON Schema (Draft 7) by a small
converter: `nullable: true` adds null, `$ref: '#/components/schemas/X'`
points into the definitions. Validation uses Debian's python3-jsonschema."""

import base64
import json
import re
import time
import urllib.parse

import jsonschema
import pytest

from conftest import timeout, wait_for

API = "/api/v1"
ENDED = ("finished", "failed", "cancelled", "lost")

# Routes that cannot be walked like the others, and why. Each is still called
# and its status and Content-Type are checked.
EXCEPTIONS = {
    ("GET", API + "/events/stream"):
        "an event stream never ends: its status and Content-Type are checked "
        "and its first line read; the body has no JSON schema",
    ("GET", API + "/"):
        "takes no input and ignores the query string: its failing call is a wrong method (405)",
    ("GET", API + "/openapi.json"):
        "takes no input and ignores the query string: its failing call is a wrong method (405)",
}


# ---- OpenAPI 3.0 -> JSON Schema ---------------------------------------------

# OpenAPI keywords that are not JSON Schema (or are annotations only).
_OPENAPI_ONLY = {"nullable", "example", "discriminator", "readOnly", "writeOnly", "xml",
                 "externalDocs", "deprecated"}
# Keywords whose value is a map of names to schemas (the names are not keywords).
_SCHEMA_MAPS = {"properties", "definitions"}


def to_json_schema(node, where="schema"):
    """One OpenAPI 3.0 schema as Draft 7 JSON Schema. Fails on what 3.0 does
    not allow (a list as `type`, a $ref outside components/schemas)."""
    if isinstance(node, list):
        return [to_json_schema(x, f"{where}[{i}]") for i, x in enumerate(node)]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$ref":
            assert value.startswith("#/components/schemas/"), f"{where}: $ref {value}"
            out["$ref"] = "#/definitions/" + value.rsplit("/", 1)[1]
        elif key in _OPENAPI_ONLY or key.startswith("x-"):
            continue
        elif key in _SCHEMA_MAPS:
            out[key] = {n: to_json_schema(s, f"{where}.{n}") for n, s in value.items()}
        elif key == "type":
            assert isinstance(value, str), \
                f"{where}: type {value!r} is not OpenAPI 3.0 (use one type and nullable: true)"
            out[key] = value
        elif key in ("enum", "required", "default"):
            out[key] = value
        else:
            out[key] = to_json_schema(value, f"{where}.{key}")
    if node.get("nullable"):
        if "$ref" in out or "type" not in out:
            out = {"anyOf": [out, {"type": "null"}]}
        else:
            out["type"] = [out["type"], "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = out["enum"] + [None]
    return out


_DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("date-time")
def _is_date_time(value):
    return not isinstance(value, str) or bool(_DATE_TIME.match(value))


class Spec:
    def __init__(self, doc):
        self.doc = doc
        self.definitions = {name: to_json_schema(s, f"components.schemas.{name}")
                            for name, s in doc["components"]["schemas"].items()}
        self.checks = 0  # validations done: statuses, media types, bodies

    def operation(self, method, path):
        item = self.doc["paths"].get(path)
        assert item is not None, f"{path} is not in the document"
        op = item.get(method.lower())
        assert op is not None, f"{method} {path} is not in the document"
        return op

    def _deref(self, obj, section):
        if "$ref" in obj:
            prefix = f"#/components/{section}/"
            assert obj["$ref"].startswith(prefix), obj["$ref"]
            return self.doc["components"][section][obj["$ref"][len(prefix):]]
        return obj

    def response(self, op, status):
        responses = op["responses"]
        key = str(status)
        assert key in responses or "default" in responses, \
            f"{op['operationId']}: status {status} is not documented (only {sorted(responses)})"
        self.checks += 1
        return self._deref(responses.get(key, responses.get("default")), "responses")

    def validator(self, schema, where):
        full = {"$schema": "http://json-schema.org/draft-07/schema#",
                "definitions": self.definitions, **to_json_schema(schema, where)}
        jsonschema.Draft7Validator.check_schema(full)
        return jsonschema.Draft7Validator(full, format_checker=FORMATS)

    def validate(self, instance, schema, where):
        errors = sorted(self.validator(schema, where).iter_errors(instance),
                        key=lambda e: list(e.absolute_path))
        self.checks += 1
        if errors:
            lines = [f"  at /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
                     for e in errors[:10]]
            raise AssertionError(f"{where} does not match the document:\n" + "\n".join(lines) +
                                 f"\nvalue: {json.dumps(instance)[:1500]}")

    def is_valid(self, instance, schema, where):
        return self.validator(schema, where).is_valid(instance)

    def success_schema(self, op):
        """The JSON schema of the operation's success answer: its 2xx JSON
        body, or x-jsonrpc-result for an operation whose REST answer is 204."""
        for status in sorted(op["responses"]):
            if status.startswith("2"):
                resp = self._deref(op["responses"][status], "responses")
                media = resp.get("content", {}).get("application/json")
                if media:
                    return media["schema"]
        assert "x-jsonrpc-result" in op, \
            f"{op['operationId']}: no JSON success body and no x-jsonrpc-result"
        return op["x-jsonrpc-result"]


def media_type(value):
    return (value or "").split(";")[0].strip().lower()


# ---- the walker ---------------------------------------------------------------

class Walk:
    def __init__(self, d, spec, routes):
        self.d, self.spec = d, spec
        self.routes = routes  # (method, path) -> the index's route
        self.done = {}  # (method, path) -> {"ok": n, "fail": n}

    def call(self, method, path, args=None, *, params=None, json_body=None, data=None,
             headers=None, files=None, form=None, status=None, body_valid=None, stream=False):
        """Calls `method path` (path a template of the document, args its
        values) and checks the answer against the document. status: the one
        the daemon must answer. body_valid: whether the JSON body sent is one
        the requestBody schema accepts (default True: a refusal for what
        the body names, not for its shape)."""
        key = (method, path)
        op = self.spec.operation(method, path)
        url = path
        for name, value in (args or {}).items():
            url = url.replace("{" + name + "}", urllib.parse.quote(str(value), safe=""))
        assert "{" not in url, f"{url}: path parameters left"
        headers = dict(headers or {})
        if json_body is not None:
            data = json.dumps(json_body)
            headers.setdefault("Content-Type", "application/json")
        # The body sent: its media type is documented, and so is its shape.
        sent = None
        if files is not None:
            sent = "multipart/form-data"
        elif data is not None:
            sent = media_type(headers.get("Content-Type"))
        if sent is not None:
            content = op.get("requestBody", {}).get("content", {})
            assert sent in content, f"{method} {path}: request media type {sent} not documented"
            self.spec.checks += 1
        kw = {"params": params, "data": data, "headers": headers, "files": files}
        if stream:
            assert key in EXCEPTIONS, f"{method} {path}: say in EXCEPTIONS why it is streamed"
            kw["stream"] = True
            kw["timeout"] = timeout(10)
        r = self.d.request(method, url, **{k: v for k, v in kw.items() if v is not None})
        ok = 200 <= r.status_code < 300
        if status is not None:
            text = "" if stream else r.text[:500]
            assert r.status_code == status, \
                f"{method} {url}: {r.status_code} (wanted {status}): {text}"
        if sent == "application/json":
            want = body_valid is not False
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            body = json.loads(data)
            if want:
                self.spec.validate(body, schema, f"request body of {method} {path}")
            else:
                assert not self.spec.is_valid(body, schema, f"request body of {method} {path}"), \
                    f"{method} {path}: the daemon refuses {data[:200]} but the document accepts it"
                self.spec.checks += 1
        if form is not None:  # a multipart body: its fields, the egg as a string
            schema = op["requestBody"]["content"]["multipart/form-data"]["schema"]
            self.spec.validate(form, schema, f"multipart body of {method} {path}")
        self.check_answer(op, method, path, r)
        self.done.setdefault(key, {"ok": 0, "fail": 0})["ok" if ok else "fail"] += 1
        return r

    def check_answer(self, op, method, path, r):
        resp = self.spec.response(op, r.status_code)
        content = resp.get("content", {})
        where = f"{method} {path} -> {r.status_code}"
        if not content:
            assert r.content == b"", f"{where}: documented without a body, got {r.content[:200]!r}"
            return
        got = media_type(r.headers.get("Content-Type"))
        assert got in content, f"{where}: Content-Type {got} is not documented ({list(content)})"
        self.spec.checks += 1
        if got != "application/json":
            return
        body = r.json()
        self.spec.validate(body, content[got]["schema"], where)
        if r.status_code >= 400:
            self.spec.validate(body, {"$ref": "#/components/schemas/Error"}, where)
        return body

    def wrong_method(self, method, path, wrong):
        """A failing call for a route that takes no input: `wrong` on its path
        is 405, as the route's operation documents it."""
        assert (method, path) in EXCEPTIONS, f"{method} {path}: say in EXCEPTIONS why a 405"
        r = self.d.request(wrong, path)
        assert r.status_code == 405, f"{wrong} {path}: {r.status_code}"
        assert method in r.headers.get("Allow", "").split(", ")
        self.check_answer(self.spec.operation(method, path), wrong, path, r)
        self.done.setdefault((method, path), {"ok": 0, "fail": 0})["fail"] += 1

    # shorthands
    def ok(self, method, path, args=None, status=None, **kw):
        r = self.call(method, path, args, status=status, **kw)
        assert 200 <= r.status_code < 300, f"{method} {path} {args}: {r.status_code} {r.text[:500]}"
        return r.json() if r.content else None

    def fail(self, method, path, args=None, status=None, code=None, **kw):
        r = self.call(method, path, args, status=status, **kw)
        assert 400 <= r.status_code < 500, f"{method} {path} {args}: {r.status_code} {r.text[:500]}"
        if code:
            assert r.json()["error"]["code"] == code, r.text
        return r.json()["error"]


# ---- the daemon and the document ---------------------------------------------

@pytest.fixture(scope="module")
def d(module_spiderd):
    return module_spiderd(name="walk", scrapyd={"items_dir": "items"},
                          spiderd={"max_upload": 4 * 1024 * 1024})


@pytest.fixture(scope="module")
def spec(d):
    r = d.request("GET", API + "/openapi.json")
    assert r.status_code == 200
    return Spec(r.json())


@pytest.fixture(scope="module")
def index(d):
    r = d.request("GET", API + "/")
    assert r.status_code == 200
    return r.json()


def wait_job(w, ident, states=ENDED, seconds=60):
    def check():
        j = w.d.request("GET", f"{API}/jobs/{ident}").json()
        return j if j["state"] in states else None
    return wait_for(check, seconds, f"job {ident} in {states}", interval=0.1)


def upload(w, project, version, egg):
    return w.ok("POST", API + "/projects/{project}/versions", {"project": project},
                params={"version": version}, data=egg,
                headers={"Content-Type": "application/octet-stream"}, status=201)


# ---- the cases: one function per route, run in this order ---------------------
# Each makes at least one call that succeeds and one that fails.

P = API + "/projects/{project}"
J = API + "/jobs/{id}"
S = API + "/schedules/{schedule}"
Q = API + "/queues/{name}"
CASES = {}


def case(method, path):
    def register(fn):
        CASES[(method, path)] = fn
        return fn
    return register


@case("GET", API + "/")
def _index(w, ctx):
    w.ok("GET", API + "/")
    w.wrong_method("GET", API + "/", "POST")


@case("GET", API + "/openapi.json")
def _openapi(w, ctx):
    w.ok("GET", API + "/openapi.json")
    w.wrong_method("GET", API + "/openapi.json", "DELETE")


@case("GET", API + "/status")
def _status(w, ctx):
    w.ok("GET", API + "/status")
    w.fail("GET", API + "/status", params={"bogus": "1"}, status=400, code="SPD_EBADPARAM")


@case("GET", API + "/nodes")
def _nodes(w, ctx):
    w.ok("GET", API + "/nodes")
    w.fail("GET", API + "/nodes", params={"bogus": "1"}, status=400, code="SPD_EBADPARAM")


@case("POST", P + "/versions")
def _versions_add(w, ctx):
    egg, egg2 = ctx["egg"]("testproj"), ctx["egg"]("testproj_v2")
    upload(w, "wp", "1.0", egg)
    upload(w, "wgone", "1.0", egg)  # deleted at the end
    w.ok("POST", P + "/versions", {"project": "wp"}, data={"version": "2.0"},
         files={"egg": ("x.egg", egg2)}, form={"version": "2.0", "egg": "<egg>"}, status=201)
    w.fail("POST", P + "/versions", {"project": "wp"}, data=egg,
           headers={"Content-Type": "application/octet-stream"}, status=400, code="SPD_EMISSING")
    w.fail("POST", P + "/versions", {"project": "wp"}, params={"version": "3"}, data=b"not a zip",
           headers={"Content-Type": "application/octet-stream"}, status=400, code="SPD_EBADEGG")
    w.fail("POST", P + "/versions", {"project": "wbroken"}, params={"version": "1"},
           data=ctx["egg"]("brokenproj"), headers={"Content-Type": "application/octet-stream"},
           status=422, code="SPD_ERUNNER")


@case("GET", P + "/versions/{version}/environment")
def _versions_environment(w, ctx):
    # Requirements the system's packages satisfy: pip needs no index.
    w.ok("POST", P + "/versions", {"project": "wenv"}, params={"version": "1"},
         files={"egg": ("x.egg", ctx["egg"]("testproj"))}, data={"requirements": "scrapy"},
         form={"requirements": "scrapy", "egg": "<egg>"}, status=201)
    env = w.ok("GET", P + "/versions/{version}/environment", {"project": "wenv", "version": "1"},
               params={"log": "true"})["environment"]
    assert env["state"] == "ready" and env["log"], env
    assert w.ok("GET", P + "/versions/{version}/environment",
                {"project": "wp", "version": "1.0"})["environment"] is None
    w.fail("GET", P + "/versions/{version}/environment", {"project": "wp", "version": "9"},
           status=404, code="SPD_ENOVERSION")


@case("POST", P + "/versions/{version}/environment/rebuild")
def _versions_rebuild(w, ctx):
    env = w.ok("POST", P + "/versions/{version}/environment/rebuild",
               {"project": "wenv", "version": "1"})["environment"]
    assert env["state"] == "ready", env
    w.fail("POST", P + "/versions/{version}/environment/rebuild",
           {"project": "wp", "version": "1.0"}, status=409, code="SPD_ECONFLICT")


@case("GET", API + "/projects")
def _projects_list(w, ctx):
    w.ok("GET", API + "/projects")
    w.fail("GET", API + "/projects", params={"bogus": "1"}, status=400, code="SPD_EBADPARAM")


@case("GET", P)
def _projects_get(w, ctx):
    w.ok("GET", P, {"project": "wp"})
    w.fail("GET", P, {"project": "nosuch"}, status=404, code="SPD_ENOPROJECT")
    w.fail("GET", P, {"project": "a..b"}, status=400, code="SPD_EBADPARAM")


@case("GET", P + "/versions")
def _versions_list(w, ctx):
    w.ok("GET", P + "/versions", {"project": "wp"})
    w.fail("GET", P + "/versions", {"project": "nosuch"}, status=404, code="SPD_ENOPROJECT")


@case("GET", P + "/spiders")
def _spiders_list(w, ctx):
    w.ok("GET", P + "/spiders", {"project": "wp"})
    w.ok("GET", P + "/spiders", {"project": "wp"}, params={"version": "1.0"})
    w.fail("GET", P + "/spiders", {"project": "wp"}, params={"version": "9"}, status=404,
           code="SPD_ENOVERSION")


@case("GET", API + "/spiders")
def _scrapers_list(w, ctx):
    w.ok("GET", API + "/spiders")
    w.fail("GET", API + "/spiders", params={"bogus": "1"}, status=400, code="SPD_EBADPARAM")


@case("POST", API + "/jobs")
def _jobs_create(w, ctx):
    j = w.ok("POST", API + "/jobs", json_body={
        "project": "wp", "spider": "quick", "version": "1.0", "args": {"count": "2"},
        "settings": {"LOG_LEVEL": "INFO"}, "priority": 1.5}, status=201)
    ctx["quick"] = j["id"]
    child = w.ok("POST", API + "/jobs", json_body={
        "project": "wp", "spider": "quick", "parent": j["id"]}, status=201)
    assert child["parent_id"] == j["id"]
    ctx["slow"] = w.ok("POST", API + "/jobs", json_body={
        "project": "wp", "spider": "slow", "args": {"seconds": "60"}}, status=201)["id"]
    first = w.ok("POST", API + "/jobs", json_body={
        "project": "wp", "spider": "slow", "args": {"seconds": "60"}, "unique_key": "walk-1"},
        status=201)
    again = w.ok("POST", API + "/jobs", json_body={
        "project": "wp", "spider": "slow", "args": {"seconds": "60"}, "unique_key": "walk-1"},
        status=200)
    assert again["existing"] is True and again["id"] == first["id"]
    ctx["unique"] = first["id"]
    w.fail("POST", API + "/jobs", json_body={"project": "wp"}, status=400, code="SPD_EMISSING",
           body_valid=False)
    w.fail("POST", API + "/jobs",
           json_body={"project": "wp", "spider": "quick", "priority": "high"},
           status=400, code="SPD_EBADPARAM", body_valid=False)
    w.fail("POST", API + "/jobs", json_body={"project": "wp", "spider": "quick", "colour": "red"},
           status=400, code="SPD_EBADPARAM", body_valid=False)
    w.fail("POST", API + "/jobs", json_body={"project": "nosuch", "spider": "quick"}, status=404,
           code="SPD_ENOPROJECT")
    w.fail("POST", API + "/jobs", json_body={"project": "wp", "spider": "quick", "after": [987654]},
           status=400, code="SPD_EBADPARAM")
    w.fail("POST", API + "/jobs", json_body={"project": "wp", "spider": "nosuch"}, status=404,
           code="SPD_ENOSPIDER")


@case("GET", API + "/jobs")
def _jobs_list(w, ctx):
    page = w.ok("GET", API + "/jobs", params={"project": "wp", "limit": 2})
    assert page["next_cursor"]
    w.ok("GET", API + "/jobs", params={"limit": 2, "cursor": page["next_cursor"], "project": "wp"})
    w.ok("GET", API + "/jobs", params={"state": "pending,running"})
    w.fail("GET", API + "/jobs", params={"limit": "ten"}, status=400, code="SPD_EBADPARAM")
    w.fail("GET", API + "/jobs", params={"state": "done"}, status=400, code="SPD_EBADPARAM")


@case("GET", API + "/jobs/counts")
def _jobs_counts(w, ctx):
    w.ok("GET", API + "/jobs/counts")
    w.ok("GET", API + "/jobs/counts", params={"project": "wp"})
    w.fail("GET", API + "/jobs/counts", params={"since": "garbage"}, status=400,
           code="SPD_EBADPARAM")


@case("GET", API + "/stats/throughput")
def _throughput(w, ctx):
    w.ok("GET", API + "/stats/throughput", params={"step": 3600, "project": "wp"})
    w.fail("GET", API + "/stats/throughput", params={"step": "0"}, status=400,
           code="SPD_EBADPARAM")


@case("GET", API + "/stats")
def _stats(w, ctx):
    w.ok("GET", API + "/stats", params={"by": "spider", "project": "wp"})
    w.ok("GET", API + "/stats", params={"by": "schedule"})
    w.fail("GET", API + "/stats", params={"by": "customer"}, status=400, code="SPD_EBADPARAM")


@case("GET", J)
def _jobs_get(w, ctx):
    wait_job(w, ctx["quick"])
    parent = w.ok("GET", J, {"id": ctx["quick"]})
    assert parent["children"]["total"] == 1  # a parent shows its children's counts
    job = w.ok("GET", J, {"id": ctx["slow"]})
    w.ok("GET", J, {"id": job["job"]})  # the Scrapyd job id
    w.fail("GET", J, {"id": 987654321}, status=404, code="SPD_ENOJOB")


@case("POST", J + "/cancel")
def _jobs_cancel(w, ctx):
    wait_job(w, ctx["slow"], ("running",))
    w.ok("POST", J + "/cancel", {"id": ctx["slow"]}, json_body={"signal": "KILL"})
    w.ok("POST", J + "/cancel", {"id": ctx["unique"]})  # no body
    w.fail("POST", J + "/cancel", {"id": ctx["quick"]}, status=409, code="SPD_ECONFLICT")
    w.fail("POST", J + "/cancel", {"id": ctx["slow"]}, json_body={"signal": 5}, status=400,
           code="SPD_EBADPARAM", body_valid=False)
    w.fail("POST", J + "/cancel", {"id": 424242}, status=404, code="SPD_ENOJOB")


def _running_job(d, project):
    r = d.request("POST", API + "/jobs", json={"project": project, "spider": "slow",
                                               "args": {"seconds": "60"}})
    assert r.status_code == 201, r.text
    ident = r.json()["id"]
    wait_for(lambda: d.request("GET", f"{API}/jobs/{ident}").json()["pid"], 60,
             f"job {ident}'s process", interval=0.1)
    return ident


@case("POST", J + "/pause")
def _jobs_pause(w, ctx):
    ctx["pausing"] = _running_job(w.d, "wp")
    r = w.ok("POST", J + "/pause", {"id": ctx["pausing"]}, json_body={})
    assert r["state"] == "pausing"
    w.fail("POST", J + "/pause", {"id": ctx["quick"]}, status=409, code="SPD_ECONFLICT")
    w.fail("POST", J + "/pause", {"id": 424242}, status=404, code="SPD_ENOJOB")


@case("POST", J + "/resume")
def _jobs_resume(w, ctx):
    ident = ctx.get("pausing") or _running_job(w.d, "wp")
    wait_job(w, ident, ("paused", "running"))
    w.ok("POST", J + "/resume", {"id": ident})  # no body
    w.fail("POST", J + "/resume", {"id": ctx["quick"]}, status=409, code="SPD_ECONFLICT")
    w.fail("POST", J + "/resume", {"id": 424242}, status=404, code="SPD_ENOJOB")
    w.d.request("POST", f"{API}/jobs/{ident}/cancel", json={"signal": "KILL"})


@case("POST", J + "/cancel-children")
def _jobs_cancel_children(w, ctx):
    r = w.ok("POST", J + "/cancel-children", {"id": ctx["quick"]}, json_body={"signal": "KILL"})
    assert r["cancelled"] == 0 and r["stopping"] == 0
    w.fail("POST", J + "/cancel-children", {"id": 424242}, status=404, code="SPD_ENOJOB")


@case("PATCH", J + "/meta")
def _jobs_meta(w, ctx):
    r = w.ok("PATCH", J + "/meta", {"id": ctx["quick"]}, json_body={"meta": {"walk": "1"}})
    assert r["meta"] == {"walk": "1"}
    w.ok("GET", API + "/jobs", params={"meta.walk": "1"})
    w.fail("PATCH", J + "/meta", {"id": ctx["quick"]}, json_body={"meta": [1]}, status=400,
           code="SPD_EBADPARAM", body_valid=False)
    w.fail("PATCH", J + "/meta", {"id": 424242}, json_body={"meta": {}}, status=404,
           code="SPD_ENOJOB")


@case("POST", J + "/history")
def _jobs_history(w, ctx):
    r = w.ok("POST", J + "/history", {"id": ctx["quick"]}, json_body={"note": "walk"})
    assert r["note"] == "walk"
    w.fail("POST", J + "/history", {"id": ctx["quick"]}, json_body={"state": "running"},
           status=400, code="SPD_EBADPARAM", body_valid=False)
    w.fail("POST", J + "/history", {"id": 424242}, json_body={"note": "x"}, status=404,
           code="SPD_ENOJOB")
    ctx["live"] = w.ok("POST", API + "/jobs", json_body={
        "project": "wp", "spider": "slow", "args": {"seconds": "60"}}, status=201)["id"]
    w.fail("POST", J + "/history", {"id": ctx["live"]}, json_body={"note": "x"},
           status=409, code="SPD_ECONFLICT")


@case("POST", API + "/jobs/history")
def _jobs_history_batch(w, ctx):
    r = w.ok("POST", API + "/jobs/history", json_body={"ids": [ctx["quick"]], "note": "batch"})
    assert r["updated"] == 1
    w.fail("POST", API + "/jobs/history", json_body={"ids": [], "note": "x"}, status=400,
           code="SPD_EBADPARAM", body_valid=False)
    w.fail("POST", API + "/jobs/history", json_body={"ids": [424242], "note": "x"}, status=404,
           code="SPD_ENOJOB")
    w.fail("POST", API + "/jobs/history", json_body={"ids": [ctx["live"]], "note": "x"},
           status=409, code="SPD_ECONFLICT")
    w.ok("POST", J + "/cancel", {"id": ctx["live"]}, json_body={"signal": "KILL"})


@case("POST", API + "/jobs/history/by-status")
def _jobs_history_by_status(w, ctx):
    w.ok("POST", API + "/jobs/history/by-status",
         json_body={"status": "finished", "project": "wp", "note": "by status"})
    w.fail("POST", API + "/jobs/history/by-status", json_body={"status": "running", "note": "x"},
           status=409, code="SPD_ECONFLICT")
    w.fail("POST", API + "/jobs/history/by-status", json_body={"status": "done", "note": "x"},
           status=400, code="SPD_EBADPARAM")


@case("POST", API + "/jobs/multiprocess")
def _jobs_multiprocess(w, ctx):
    run = w.ok("POST", API + "/jobs/multiprocess", json_body={
        "project": "wp", "spider": "slow", "processes": 1, "urls": ["http://127.0.0.1:9/x"],
        "args": {"seconds": "30"}, "meta": {"walk": True}}, status=201)
    assert run["state"] == "running" and len(run["processes"]) == 1
    ctx["mp"] = run["id"]
    w.fail("POST", API + "/jobs/multiprocess", json_body={
        "project": "wp", "spider": "slow", "processes": 0, "urls": ["http://127.0.0.1:9/x"]},
        status=400, code="SPD_EBADPARAM", body_valid=False)


@case("POST", J + "/urls")
def _jobs_add_urls(w, ctx):
    w.ok("POST", J + "/urls", {"id": ctx["mp"]}, json_body={"urls": ["http://127.0.0.1:9/y"]})
    w.fail("POST", J + "/urls", {"id": 424242}, json_body={"urls": ["http://127.0.0.1:9/y"]},
           status=404, code="SPD_ENOJOB")
    w.fail("POST", J + "/urls", {"id": ctx["mp"]}, json_body={"urls": []}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("POST", API + "/jobs/states")
def _jobs_states(w, ctx):
    r = w.ok("POST", API + "/jobs/states", json_body={"ids": [ctx["quick"], "nosuch"]})
    assert r["states"]["nosuch"] is None
    w.fail("POST", API + "/jobs/states", json_body={"ids": []}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("POST", J + "/rerun")
def _jobs_rerun(w, ctx):
    ctx["rerun"] = w.ok("POST", J + "/rerun", {"id": ctx["quick"]}, json_body={}, status=201)["id"]
    w.fail("POST", J + "/rerun", {"id": 424242}, status=404, code="SPD_ENOJOB")
    w.fail("POST", J + "/rerun", {"id": ctx["quick"]}, json_body={"priority": 1}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("POST", API + "/jobs/test")
def _jobs_test_run(w, ctx):
    t = w.ok("POST", API + "/jobs/test", json_body={
        "project": "wp", "spider": "quick", "args": {"count": "3"}, "items": 1, "pages": 2,
        "seconds": 30, "meta": {"walk": "t"}}, status=201)
    assert t["test"] is True and t["existing"] is False
    w.ok("GET", API + "/jobs", params={"test": "true", "limit": 5})
    w.fail("POST", API + "/jobs/test", json_body={"project": "wp", "spider": "quick",
                                                  "seconds": 0},
           status=400, code="SPD_EBADPARAM", body_valid=False)
    w.fail("POST", API + "/jobs/test", json_body={"project": "wp"}, status=400,
           code="SPD_EMISSING")
    w.fail("POST", API + "/jobs/test", json_body={"schedule": "no-such-schedule"}, status=404,
           code="SPD_ENOSCHEDULE")


@case("GET", J + "/log")
def _jobs_log(w, ctx):
    w.ok("GET", J + "/log", {"id": ctx["quick"]})
    w.ok("GET", J + "/log", {"id": ctx["quick"]}, params={"offset": -100, "limit": 50})
    w.fail("GET", J + "/log", {"id": ctx["quick"]}, params={"offset": "x"}, status=400,
           code="SPD_EBADPARAM")
    w.fail("GET", J + "/log", {"id": 424242}, status=404, code="SPD_ENOJOB")


@case("GET", J + "/items")
def _jobs_items(w, ctx):
    w.ok("GET", J + "/items", {"id": ctx["quick"]})
    w.fail("GET", J + "/items", {"id": ctx["quick"]}, params={"limit": "0"}, status=400,
           code="SPD_EBADPARAM")
    w.fail("GET", J + "/items", {"id": 424242}, status=404, code="SPD_ENOJOB")


SCHEDULE = {"name": "walk-cron", "project": "wp", "spider": "quick", "cron": "0 3 * * *",
            "tz": "Europe/Paris", "args": {"count": "1"}, "settings": {"LOG_LEVEL": "INFO"},
            "overlap": "skip", "missed": "once", "priority": 1, "retries": 1}


@case("POST", API + "/schedules")
def _schedules_create(w, ctx):
    w.ok("POST", API + "/schedules", json_body=SCHEDULE, status=201)
    ctx["sched"] = w.ok("POST", API + "/schedules", json_body={
        "name": "walk-every", "project": "wp", "spider": "quick", "interval": 86400,
        "paused": True}, status=201)["id"]
    w.ok("POST", API + "/schedules", json_body={
        "name": "walk-once", "project": "wp", "spider": "quick", "at": "2040-01-01T00:00:00Z"},
        status=201)
    w.fail("POST", API + "/schedules", json_body=SCHEDULE, status=409, code="SPD_ECONFLICT")
    w.fail("POST", API + "/schedules", json_body={"project": "wp", "spider": "quick"},
           status=400, code="SPD_EMISSING", body_valid=False)
    w.fail("POST", API + "/schedules", json_body={**SCHEDULE, "name": "x", "paused": "yes"},
           status=400, code="SPD_EBADPARAM", body_valid=False)
    w.fail("POST", API + "/schedules", json_body={**SCHEDULE, "name": "y", "project": "nosuch"},
           status=404, code="SPD_ENOPROJECT")


@case("GET", API + "/schedules")
def _schedules_list(w, ctx):
    page = w.ok("GET", API + "/schedules", params={"limit": 2})
    assert page["next_cursor"]
    w.ok("GET", API + "/schedules", params={"limit": 2, "cursor": page["next_cursor"]})
    w.fail("GET", API + "/schedules", params={"limit": "0"}, status=400, code="SPD_EBADPARAM")


@case("GET", API + "/schedules/preview")
def _schedules_preview(w, ctx):
    w.ok("GET", API + "/schedules/preview", params={"cron": "0 3 * * *", "count": 3})
    w.ok("GET", API + "/schedules/preview", params={"interval": 60, "tz": "Europe/Paris"})
    w.fail("GET", API + "/schedules/preview", params={"cron": "nope"}, status=400)


@case("GET", S)
def _schedules_get(w, ctx):
    w.ok("GET", S, {"schedule": "walk-cron"})
    w.ok("GET", S, {"schedule": ctx["sched"]})
    w.fail("GET", S, {"schedule": "nosuch"}, status=404, code="SPD_ENOSCHEDULE")


@case("PATCH", S)
def _schedules_update(w, ctx):
    w.ok("PATCH", S, {"schedule": "walk-cron"},
         json_body={"priority": 2, "cron": "30 4 * * *", "jitter": None})
    w.fail("PATCH", S, {"schedule": "walk-cron"}, json_body={"paused": "yes"}, status=400,
           code="SPD_EBADPARAM", body_valid=False)
    w.fail("PATCH", S, {"schedule": "nosuch"}, json_body={"priority": 1}, status=404,
           code="SPD_ENOSCHEDULE")


@case("POST", S + "/pause")
def _schedules_pause(w, ctx):
    w.ok("POST", S + "/pause", {"schedule": "walk-cron"})
    w.fail("POST", S + "/pause", {"schedule": "nosuch"}, status=404, code="SPD_ENOSCHEDULE")


@case("POST", S + "/resume")
def _schedules_resume(w, ctx):
    w.ok("POST", S + "/resume", {"schedule": "walk-cron"})
    w.fail("POST", S + "/resume", {"schedule": "nosuch"}, status=404, code="SPD_ENOSCHEDULE")


@case("GET", S + "/health")
def _schedules_health(w, ctx):
    w.ok("GET", S + "/health", {"schedule": "walk-cron"})
    w.fail("GET", S + "/health", {"schedule": "nosuch"}, status=404, code="SPD_ENOSCHEDULE")


@case("PUT", S + "/health")
def _schedules_health_set(w, ctx):
    w.ok("PUT", S + "/health", {"schedule": "walk-cron"}, json_body={"rules": {"pause_after": 3}})
    w.fail("PUT", S + "/health", {"schedule": "walk-cron"}, json_body={"rules": {"history": 0}},
           status=400, code="SPD_EBADPARAM", body_valid=False)


@case("GET", P + "/health")
def _projects_health(w, ctx):
    w.ok("GET", P + "/health", {"project": "wp"})
    w.fail("GET", P + "/health", {"project": "a..b"}, status=400, code="SPD_EBADPARAM")


@case("PUT", P + "/health")
def _projects_health_set(w, ctx):
    w.ok("PUT", P + "/health", {"project": "wp"}, json_body={"rules": {"items_degraded": 0.4}})
    w.fail("PUT", P + "/health", {"project": "wp"}, json_body={"rules": {"nosuch": 1}},
           status=400, code="SPD_EBADPARAM", body_valid=False)


@case("POST", S + "/run")
def _schedules_run(w, ctx):
    ctx["sched_job"] = w.ok("POST", S + "/run", {"schedule": "walk-cron"}, status=201)["id"]
    w.fail("POST", S + "/run", {"schedule": "nosuch"}, status=404, code="SPD_ENOSCHEDULE")
    w.fail("POST", S + "/run", {"schedule": "walk-cron"}, params={"priority": "high"},
           status=400, code="SPD_EBADPARAM")


@case("GET", S + "/runs")
def _schedules_runs(w, ctx):
    w.ok("GET", S + "/runs", {"schedule": "walk-cron"})
    w.ok("GET", S + "/runs", {"schedule": "walk-cron"}, params={"state": "fired,upcoming",
                                                                 "limit": 2})
    w.fail("GET", S + "/runs", {"schedule": "nosuch"}, status=404, code="SPD_ENOSCHEDULE")
    w.fail("GET", S + "/runs", {"schedule": "walk-cron"}, params={"limit": "x"}, status=400,
           code="SPD_EBADPARAM")


@case("GET", S + "/next")
def _schedules_next(w, ctx):
    w.ok("GET", S + "/next", {"schedule": "walk-cron"}, params={"limit": 3})
    w.fail("GET", S + "/next", {"schedule": "nosuch"}, status=404, code="SPD_ENOSCHEDULE")
    w.fail("GET", S + "/next", {"schedule": "walk-cron"}, params={"cursor": "x"}, status=400,
           code="SPD_EBADPARAM")


@case("GET", API + "/schedules/next")
def _schedules_next_all(w, ctx):
    w.ok("GET", API + "/schedules/next", params={"limit": 3})
    w.fail("GET", API + "/schedules/next", params={"cursor": "x"}, status=400,
           code="SPD_EBADPARAM")


@case("GET", API + "/runs/missed")
def _runs_missed(w, ctx):
    w.ok("GET", API + "/runs/missed", params={"limit": 3})
    w.fail("GET", API + "/runs/missed", params={"schedule": "nosuch"}, status=404,
           code="SPD_ENOSCHEDULE")
    w.fail("GET", API + "/runs/missed", params={"cursor": "x"}, status=400,
           code="SPD_EBADPARAM")


def _walk_backfill(w, ctx, **extra):
    """A backfill of walk-bf (a minute-long crawl a day) over its last three days."""
    now = int(time.time() * 1000)
    body = {"from": str(now - 3 * 86400000), "to": str(now), "max_running": 1, **extra}
    return w.ok("POST", S + "/backfill", {"schedule": "walk-bf"}, json_body=body,
                status=200 if extra.get("dry_run") else 201)


@case("POST", S + "/backfill")
def _schedules_backfill(w, ctx):
    w.ok("POST", API + "/schedules", json_body={
        "name": "walk-bf", "project": "wp", "spider": "slow", "interval": 86400,
        "args": {"seconds": "60"}, "paused": True}, status=201)
    plan = _walk_backfill(w, ctx, dry_run=True, order="newest", redo="failed")
    assert plan["backfill"] is None and plan["count"] == 3
    ctx["backfill"] = _walk_backfill(w, ctx, slot_arg="day", slot_format="date")["backfill"]["id"]
    w.fail("POST", S + "/backfill", {"schedule": "walk-bf"}, json_body={"from": "x", "to": "y"},
           status=400, code="SPD_EBADPARAM")
    w.fail("POST", S + "/backfill", {"schedule": "walk-bf"}, json_body={"to": "0"},
           status=400, code="SPD_EMISSING", body_valid=False)
    w.fail("POST", S + "/backfill", {"schedule": "nosuch"}, json_body={"from": "0", "to": "1"},
           status=404, code="SPD_ENOSCHEDULE")


@case("GET", API + "/backfills")
def _backfills_list(w, ctx):
    assert w.ok("GET", API + "/backfills")["backfills"]
    w.fail("GET", API + "/backfills", params={"bogus": "1"}, status=400, code="SPD_EBADPARAM")


B = API + "/backfills/{id}"


@case("GET", B)
def _backfills_get(w, ctx):
    w.ok("GET", B, {"id": ctx["backfill"]})
    w.fail("GET", B, {"id": 424242}, status=404, code="SPD_ENOJOB")
    w.fail("GET", B, {"id": "x"}, status=400, code="SPD_EBADPARAM")


@case("POST", B + "/pause")
def _backfills_pause(w, ctx):
    assert w.ok("POST", B + "/pause", {"id": ctx["backfill"]})["paused"] is True
    w.fail("POST", B + "/pause", {"id": 424242}, status=404, code="SPD_ENOJOB")


@case("POST", B + "/resume")
def _backfills_resume(w, ctx):
    assert w.ok("POST", B + "/resume", {"id": ctx["backfill"]})["paused"] is False
    w.fail("POST", B + "/resume", {"id": 424242}, status=404, code="SPD_ENOJOB")


@case("POST", B + "/cancel")
def _backfills_cancel(w, ctx):
    w.ok("POST", B + "/cancel", {"id": ctx["backfill"]})
    w.fail("POST", B + "/cancel", {"id": ctx["backfill"]}, status=409, code="SPD_ECONFLICT")
    w.fail("POST", B + "/pause", {"id": ctx["backfill"]}, status=409, code="SPD_ECONFLICT")


CAL = {"name": "walk-hol", "tz": "Europe/Paris", "dates": ["2030-12-25"],
       "weekdays": ["sat", "sun"], "hours": ["22:00-06:00"], "note": "closed"}
C = API + "/calendars/{name}"


@case("POST", API + "/calendars")
def _calendars_create(w, ctx):
    w.ok("POST", API + "/calendars", json_body=CAL, status=201)
    w.ok("POST", API + "/calendars", json_body={"name": "walk-gone", "dates": ["2030-01-01"]},
         status=201)
    w.fail("POST", API + "/calendars", json_body=CAL, status=409, code="SPD_ECONFLICT")
    w.fail("POST", API + "/calendars", json_body={"name": "walk-bad", "dates": ["2030-02-30"]},
           status=400, code="SPD_EBADPARAM")
    w.ok("PATCH", S, {"schedule": "walk-bf"}, json_body={"calendars": ["walk-hol"]})


@case("GET", API + "/calendars")
def _calendars_list(w, ctx):
    assert w.ok("GET", API + "/calendars")["calendars"]
    w.fail("GET", API + "/calendars", params={"bogus": "1"}, status=400, code="SPD_EBADPARAM")


@case("GET", C)
def _calendars_get(w, ctx):
    assert w.ok("GET", C, {"name": "walk-hol"})["schedules"]
    w.fail("GET", C, {"name": "nosuch"}, status=404)


@case("PUT", C)
def _calendars_update(w, ctx):
    w.ok("PUT", C, {"name": "walk-hol"}, json_body={"dates": ["2030-12-24", "2030-12-25"]})
    w.fail("PUT", C, {"name": "nosuch"}, json_body={"dates": ["2030-12-24"]}, status=404)
    w.fail("PUT", C, {"name": "walk-hol"}, json_body={"hours": ["x"]}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("DELETE", C)
def _calendars_delete(w, ctx):
    w.ok("DELETE", C, {"name": "walk-gone"}, status=204)
    w.fail("DELETE", C, {"name": "walk-gone"}, status=404)
    w.fail("DELETE", C, {"name": "walk-hol"}, status=409, code="SPD_ECONFLICT")


@case("DELETE", S)
def _schedules_delete(w, ctx):
    w.ok("DELETE", S, {"schedule": "walk-once"}, status=204)
    w.fail("DELETE", S, {"schedule": "walk-once"}, status=404, code="SPD_ENOSCHEDULE")


@case("GET", API + "/events")
def _events_list(w, ctx):
    page = w.ok("GET", API + "/events", params={"limit": 5})
    assert page["events"]
    w.ok("GET", API + "/events", params={"job": ctx["quick"]})
    w.ok("GET", API + "/events", params={"schedule": ctx["sched"], "type": "schedule.created"})
    w.fail("GET", API + "/events", params={"after": "-1"}, status=400, code="SPD_EBADPARAM")


@case("GET", API + "/events/stream")
def _events_stream(w, ctx):
    r = w.call("GET", API + "/events/stream", params={"after": 0}, stream=True, status=200)
    try:
        first = next(r.iter_lines())
        assert first.startswith(b"retry:") or first.startswith(b"id:"), first
    finally:
        r.close()
    w.fail("GET", API + "/events/stream", params={"after": "x"}, status=400,
           code="SPD_EBADPARAM")


@case("PUT", Q)
def _queues_set(w, ctx):
    w.ok("PUT", Q, {"name": "wq"}, json_body={"visibility": 30, "max_deliveries": 3,
                                             "keep_done": True, "key_mode": "none"})
    w.ok("PUT", Q, {"name": "wq2"})  # no body: the defaults
    w.fail("PUT", Q, {"name": "wq"}, json_body={"visibility": "x"}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("POST", Q + "/put")
def _queues_put(w, ctx):
    w.ok("POST", Q + "/put", {"name": "wq"}, json_body={
        "elements": ["a", "b", {"element": "c", "key": "k1", "priority": 2}, "d", "e"]})
    w.ok("POST", Q + "/put", {"name": "wq"}, json_body={"element": "f", "delay": 3600})
    w.fail("POST", Q + "/put", {"name": "wq"}, json_body={"elements": 5}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("POST", Q + "/take")
def _queues_take(w, ctx):
    items = w.ok("POST", Q + "/take", {"name": "wq"}, json_body={"max": 4, "visibility": 60})
    ctx["leases"] = [i["lease"] for i in items["items"]]
    assert len(ctx["leases"]) == 4
    w.fail("POST", Q + "/take", {"name": "wq"}, json_body={"max": "x"}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("POST", Q + "/ack")
def _queues_ack(w, ctx):
    w.ok("POST", Q + "/ack", {"name": "wq"}, json_body={"leases": ctx["leases"][:1]})
    w.fail("POST", Q + "/ack", {"name": "wq"}, json_body={}, status=400, code="SPD_EMISSING",
           body_valid=False)


@case("POST", Q + "/nack")
def _queues_nack(w, ctx):
    w.ok("POST", Q + "/nack", {"name": "wq"}, json_body={
        "leases": [ctx["leases"][1], {"lease": ctx["leases"][2], "release": True}],
        "error": "walk"})
    w.fail("POST", Q + "/nack", {"name": "wq"}, json_body={"delay": 1}, status=400,
           code="SPD_EMISSING", body_valid=False)


@case("POST", Q + "/extend")
def _queues_extend(w, ctx):
    w.ok("POST", Q + "/extend", {"name": "wq"}, json_body={"leases": ctx["leases"][3:],
                                                          "visibility": 120})
    w.fail("POST", Q + "/extend", {"name": "wq"}, json_body={"leases": "x"}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("POST", Q + "/pause")
def _queues_pause(w, ctx):
    w.ok("POST", Q + "/pause", {"name": "wq2"})
    w.fail("POST", Q + "/pause", {"name": "nosuch"}, status=404, code="SPD_ENOQUEUE")


@case("POST", Q + "/resume")
def _queues_resume(w, ctx):
    w.ok("POST", Q + "/resume", {"name": "wq2"})
    w.fail("POST", Q + "/resume", {"name": "nosuch"}, status=404, code="SPD_ENOQUEUE")


@case("GET", API + "/queues")
def _queues_list(w, ctx):
    w.ok("GET", API + "/queues")
    w.fail("GET", API + "/queues", params={"bogus": "1"}, status=400, code="SPD_EBADPARAM")


@case("GET", Q)
def _queues_get(w, ctx):
    w.ok("GET", Q, {"name": "wq"})
    w.fail("GET", Q, {"name": "nosuch"}, status=404, code="SPD_ENOQUEUE")


@case("GET", Q + "/items")
def _queues_items(w, ctx):
    page = w.ok("GET", Q + "/items", {"name": "wq"}, params={"limit": 2})
    assert page["next_cursor"]
    w.ok("GET", Q + "/items", {"name": "wq"}, params={"state": "waiting,inflight,done,dead"})
    w.fail("GET", Q + "/items", {"name": "nosuch"}, status=404, code="SPD_ENOQUEUE")
    w.fail("GET", Q + "/items", {"name": "wq"}, params={"state": "gone"}, status=400,
           code="SPD_EBADPARAM")


@case("GET", Q + "/keys")
def _queues_keys(w, ctx):
    w.ok("GET", Q + "/keys", {"name": "wq"})
    w.fail("GET", Q + "/keys", {"name": "nosuch"}, status=404, code="SPD_ENOQUEUE")


@case("POST", Q + "/requeue")
def _queues_requeue(w, ctx):
    w.ok("POST", Q + "/requeue", {"name": "wq"}, json_body={"state": "done", "delay": 0})
    w.fail("POST", Q + "/requeue", {"name": "wq"}, json_body={"ids": "x"}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("POST", Q + "/purge")
def _queues_purge(w, ctx):
    w.ok("POST", Q + "/purge", {"name": "wq"}, json_body={"state": ["done"]})
    w.fail("POST", Q + "/purge", {"name": "wq"}, json_body={"state": 5}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("DELETE", Q)
def _queues_delete(w, ctx):
    w.ok("DELETE", Q, {"name": "wq2"})
    w.fail("DELETE", Q, {"name": "wq2"}, status=404, code="SPD_ENOQUEUE")


@case("DELETE", P + "/versions/{version}")
def _versions_delete(w, ctx):
    w.ok("DELETE", P + "/versions/{version}", {"project": "wp", "version": "2.0"}, status=204)
    w.fail("DELETE", P + "/versions/{version}", {"project": "wp", "version": "2.0"},
           status=404, code="SPD_ENOVERSION")


@case("DELETE", P)
def _projects_delete(w, ctx):
    w.ok("DELETE", P, {"project": "wgone"}, status=204)
    w.fail("DELETE", P, {"project": "wgone"}, status=404, code="SPD_ENOPROJECT")


@case("POST", API + "/nodes/self/drain")
def _nodes_drain(w, ctx):
    assert w.ok("POST", API + "/nodes/self/drain")["draining"] is True
    w.fail("POST", API + "/nodes/self/drain", params={"bogus": "1"}, status=400,
           code="SPD_EBADPARAM")


@case("POST", API + "/nodes/self/undrain")
def _nodes_undrain(w, ctx):
    assert w.ok("POST", API + "/nodes/self/undrain")["draining"] is False
    w.fail("POST", API + "/nodes/self/undrain", params={"bogus": "1"}, status=400,
           code="SPD_EBADPARAM")


# Users and tokens last: the first token turns authentication on, and
# revoking the last one turns it off again for what follows.
def _bearer(ctx):
    return {"Authorization": "Bearer " + ctx["token"]}


def _auth_off(w):
    wait_for(lambda: w.d.request("GET", API + "/auth/whoami").status_code == 200, 10,
             "authentication off again", interval=0.05)


@case("POST", API + "/tokens")
def _tokens_create(w, ctx):
    r = w.ok("POST", API + "/tokens", json_body={"role": "admin", "name": "walk"}, status=201)
    ctx["token"], ctx["token_id"] = r["token"], r["id"]
    w.fail("POST", API + "/tokens", json_body={"role": "king"}, headers=_bearer(ctx),
           status=400, code="SPD_EBADPARAM", body_valid=False)


@case("GET", API + "/auth/whoami")
def _whoami(w, ctx):
    r = w.ok("GET", API + "/auth/whoami", headers=_bearer(ctx))
    assert r["kind"] == "token" and r["role"] == "admin"
    w.fail("GET", API + "/auth/whoami", status=401, code="SPD_EUNAUTHORIZED")


@case("GET", API + "/tokens")
def _tokens_list(w, ctx):
    r = w.ok("GET", API + "/tokens", headers=_bearer(ctx))
    assert [t["id"] for t in r["tokens"]] == [ctx["token_id"]]
    w.fail("GET", API + "/tokens", headers={"Authorization": "Bearer sdt_0_x"}, status=401,
           code="SPD_EUNAUTHORIZED")


@case("POST", API + "/users")
def _users_create(w, ctx):
    body = {"name": "walker", "password": "long enough", "role": "read", "projects": ["wp"]}
    w.ok("POST", API + "/users", json_body=body, headers=_bearer(ctx), status=201)
    w.fail("POST", API + "/users", json_body=body, headers=_bearer(ctx), status=409,
           code="SPD_ECONFLICT")


@case("GET", API + "/users")
def _users_list(w, ctx):
    r = w.ok("GET", API + "/users", headers=_bearer(ctx))
    assert [u["name"] for u in r["users"]] == ["walker"]
    # a read-only user is below the admin role users.list needs
    w.fail("GET", API + "/users", headers={"Authorization": "Basic " + base64.b64encode(
        b"walker:long enough").decode()}, status=403, code="SPD_EFORBIDDEN")


@case("PATCH", API + "/users/{name}")
def _users_update(w, ctx):
    r = w.ok("PATCH", API + "/users/{name}", {"name": "walker"}, json_body={"role": "run"},
             headers=_bearer(ctx))
    assert r["role"] == "run" and r["projects"] == ["wp"]
    w.fail("PATCH", API + "/users/{name}", {"name": "nobody"}, json_body={"role": "run"},
           headers=_bearer(ctx), status=404, code="SPD_ENOPRINCIPAL")


@case("DELETE", API + "/users/{name}")
def _users_delete(w, ctx):
    w.ok("DELETE", API + "/users/{name}", {"name": "walker"}, headers=_bearer(ctx), status=204)
    w.fail("DELETE", API + "/users/{name}", {"name": "walker"}, headers=_bearer(ctx),
           status=404, code="SPD_ENOPRINCIPAL")


@case("DELETE", API + "/tokens/{id}")
def _tokens_delete(w, ctx):
    w.ok("DELETE", API + "/tokens/{id}", {"id": ctx["token_id"]}, headers=_bearer(ctx),
         status=204)
    _auth_off(w)
    w.fail("DELETE", API + "/tokens/{id}", {"id": ctx["token_id"]}, status=404,
           code="SPD_ENOPRINCIPAL")


A = API + "/accounts"
AA = API + "/accounts/{account}"


@case("POST", A)
def _accounts_create(w, ctx):
    r = w.ok("POST", A, json_body={"name": "walk", "description": "d", "max_running": 2},
             status=201)
    assert r["name"] == "walk" and r["max_running"] == 2
    w.fail("POST", A, json_body={"name": "walk"}, status=409, code="SPD_ECONFLICT")


@case("GET", A)
def _accounts_list(w, ctx):
    assert [a["name"] for a in w.ok("GET", A)["accounts"]] == ["walk"]
    w.fail("GET", A, params={"x": "1"}, status=400, code="SPD_EBADPARAM")


@case("GET", AA)
def _accounts_get(w, ctx):
    assert w.ok("GET", AA, {"account": "walk"})["running"] == 0
    w.fail("GET", AA, {"account": "nope"}, status=404, code="SPD_ENOACCOUNT")


@case("PATCH", AA)
def _accounts_update(w, ctx):
    assert w.ok("PATCH", AA, {"account": "walk"}, json_body={"max_running": 0})[
        "max_running"] == 0
    w.fail("PATCH", AA, {"account": "walk"}, json_body={"max_running": -1}, status=400,
           code="SPD_EBADPARAM", body_valid=False)


@case("POST", AA + "/assign")
def _accounts_assign(w, ctx):
    r = w.ok("POST", AA + "/assign", {"account": "walk"}, json_body={"project": "wp"})
    assert r["projects"] == ["wp"]
    w.fail("POST", AA + "/assign", {"account": "walk"}, json_body={"user": "ghost"},
           status=404, code="SPD_ENOPRINCIPAL")


@case("GET", AA + "/upcoming")
def _accounts_upcoming(w, ctx):
    assert isinstance(w.ok("GET", AA + "/upcoming", {"account": "walk"})["runs"], list)
    w.fail("GET", AA + "/upcoming", {"account": "nope"}, status=404, code="SPD_ENOACCOUNT")


@case("POST", AA + "/unassign")
def _accounts_unassign(w, ctx):
    assert w.ok("POST", AA + "/unassign", {"account": "walk"},
                json_body={"project": "wp"})["projects"] == []
    w.fail("POST", AA + "/unassign", {"account": "walk"}, json_body={"project": "wp"},
           status=404, code="SPD_ENOPROJECT")


@case("DELETE", AA)
def _accounts_delete(w, ctx):
    w.ok("DELETE", AA, {"account": "walk"}, status=204)
    w.fail("DELETE", AA, {"account": "walk"}, status=404, code="SPD_ENOACCOUNT")


@case("POST", API + "/jsonrpc")
def _jsonrpc(w, ctx):
    w.ok("POST", API + "/jsonrpc", json_body={"jsonrpc": "2.0", "method": "status.get", "id": 1})
    w.ok("POST", API + "/jsonrpc", json_body=[
        {"jsonrpc": "2.0", "method": "status.get", "id": 1},
        {"jsonrpc": "2.0", "method": "nodes.list", "id": "b"}])
    w.ok("POST", API + "/jsonrpc", json_body={"jsonrpc": "2.0", "method": "status.get"},
         status=204)
    # A JSON body over 1 MiB is a JSON-RPC parse error (200); a body over
    # max_upload is refused by the HTTP layer before any JSON is read (413,
    # in the error shape all the same).
    big = {"jsonrpc": "2.0", "method": "status.get", "id": 1, "params": {"x": "y" * (1 << 20)}}
    r = w.ok("POST", API + "/jsonrpc", json_body=big, status=200)
    assert r["error"]["code"] == -32700 and r["error"]["data"]["code"] == "SPD_EBADJSON"
    huge = {**big, "params": {"x": "y" * (w.d.spiderd["max_upload"] + 1024)}}
    r = w.call("POST", API + "/jsonrpc", json_body=huge, status=413)
    assert r.headers["Content-Type"] == "application/json"
    assert r.json()["error"]["code"] == "SPD_ETOOBIG"


def test_every_route_answers_as_the_document_says(d, spec, index, egg_bytes):
    routes = {(r["method"], r["path"]): r for r in index["routes"]}
    missing = sorted(set(routes) - set(CASES))
    assert not missing, f"routes of the index without a case in this walk: {missing}"
    assert not set(CASES) - set(routes), "cases for routes the daemon does not have"
    assert not set(EXCEPTIONS) - set(routes), "exceptions for routes the daemon does not have"
    w = Walk(d, spec, routes)
    ctx = {"egg": egg_bytes}
    started = time.monotonic()
    for key, fn in CASES.items():
        fn(w, ctx)
    for key in routes:
        counts = w.done.get(key, {"ok": 0, "fail": 0})
        assert counts["ok"] >= 1 and counts["fail"] >= 1, f"{key}: {counts}"
    # A wrong method on every path: 405 as each of its operations documents.
    for path, item in spec.doc["paths"].items():
        wrong = next(m for m in ("PATCH", "PUT", "DELETE", "POST", "GET") if m.lower() not in item)
        concrete = re.sub(r"\{[^}]+\}", "x1", path)
        r = d.request(wrong, concrete)
        assert r.status_code == 405, (wrong, concrete, r.status_code)
        for method in item:
            w.check_answer(spec.operation(method, path), wrong, path, r)
    print(f"\nwalked {len(routes)} routes, {spec.checks} checks, "
          f"{time.monotonic() - started:.1f}s; walked otherwise:")
    for (method, path), why in EXCEPTIONS.items():
        print(f"  {method} {path}: {why}")
    for ident in ("slow", "rerun", "sched_job", "mp"):
        if ident in ctx:
            d.request("POST", f"{API}/jobs/{ctx[ident]}/cancel", json={"signal": "KILL"})


# ---- the document itself ------------------------------------------------------

# Objects in answers whose shape the document leaves open, and why.
OPEN_OBJECTS = {
    "openapi.json.info": "the document's own parts, as OpenAPI 3.0 defines them",
    "openapi.json.paths": "the document's own parts, as OpenAPI 3.0 defines them",
    "openapi.json.components": "the document's own parts, as OpenAPI 3.0 defines them",
    "Error.error.details": "one shape per error code (field, project, ids, stderr, ...)",
    "RpcResponse.error.data.details": "the REST error's details",
    "Job.stats": "what the crawl reported; absent keys where Scrapy had none",
    "Job.meta": "the user's own fields: any JSON object within 64 KiB",
    "Schedule.meta": "the user's own fields its jobs start with: any JSON object within 64 KiB",
    "Event.data": "one shape per event type",
    "HealthRules": "the overrides set, any of the rules; effective holds them all",
}


def test_the_document_says_what_every_answer_holds(spec):
    """Every object in a documented answer lists its properties and which of
    them are always there (or is named in OPEN_OBJECTS): a bare
    `type: object` validates anything and so checks nothing."""
    loose, seen = [], set()

    def walk(s, where):
        if isinstance(s, list):
            for x in s:
                walk(x, where)
            return
        if not isinstance(s, dict):
            return
        if "$ref" in s:
            name = s["$ref"].rsplit("/", 1)[1]
            if name not in seen:
                seen.add(name)
                walk(spec.doc["components"]["schemas"][name], name)
            return
        if s.get("type") == "object" and where not in OPEN_OBJECTS:
            if s.get("properties") and not s.get("required"):
                loose.append(f"{where}: properties without required")
            if not s.get("properties") and not s.get("required") and \
                    "additionalProperties" not in s:
                loose.append(f"{where}: a bare object")
        for key, value in s.items():
            if key == "properties":
                for name, sub in value.items():
                    walk(sub, f"{where}.{name}")
            elif isinstance(value, (dict, list)):
                walk(value, where if key in ("allOf", "oneOf", "anyOf") else f"{where}.{key}")

    for path, item in spec.doc["paths"].items():
        for method, op in item.items():
            for status, resp in op["responses"].items():
                resp = spec._deref(resp, "responses")
                for media in resp.get("content", {}).values():
                    walk(media["schema"], path.rsplit("/", 1)[-1] if "$ref" not in
                         media["schema"] else "")
            if "x-jsonrpc-result" in op:
                walk(op["x-jsonrpc-result"], op["operationId"])
    assert not loose, "answers the document leaves open:\n" + "\n".join(loose)


# ---- JSON-RPC: every method of the index -------------------------------------
# Each method is called with bad params (its required params left out, or an
# unknown one when it has none: -32602) and with good ones; the answer
# validates against RpcResponse and the result against the success schema of
# the REST operation that lists the method in x-jsonrpc-methods.

def _new_job(ctx, spider="slow"):
    r = ctx["d"].request("POST", API + "/jobs", json={"project": "rpcp", "spider": spider,
                                                      "args": {"seconds": "60"}})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _new_run(ctx):
    r = ctx["d"].request("POST", API + "/jobs/multiprocess", json={
        "project": "rpcp", "spider": "slow", "processes": 1, "urls": ["http://127.0.0.1:9/x"],
        "args": {"seconds": "5"}})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _new_schedule(ctx, name):
    r = ctx["d"].request("POST", API + "/schedules", json={
        "name": name, "project": "rpcp", "spider": "quick", "interval": 86400, "paused": True})
    assert r.status_code == 201, r.text
    return name


def _new_backfill(ctx):
    """A running backfill of a minute-long crawl a day, over two days, of a
    schedule of its own (a slot that ran is not backfilled again)."""
    d = ctx["d"]
    ctx["bf_n"] = ctx.get("bf_n", 0) + 1
    name = _new_schedule(ctx, f"r-bf{ctx['bf_n']}")
    r = d.request("PATCH", API + "/schedules/" + name, json={"spider": "slow",
                                                           "args": {"seconds": "60"}})
    assert r.status_code == 200, r.text
    now = int(time.time() * 1000)
    r = d.request("POST", API + f"/schedules/{name}/backfill",
                  json={"from": str(now - 2 * 86400000), "to": str(now), "redo": "failed"})
    assert r.status_code == 201, r.text
    return r.json()["backfill"]["id"]


RPC_CASES = {  # op -> params(ctx, method); run in this order
    "status.get": lambda c, m: {},
    "nodes.list": lambda c, m: {},
    "projects.list": lambda c, m: {},
    "projects.get": lambda c, m: {"project": "rpcp"},
    "versions.add": lambda c, m: {"project": "rpcx", "version": "1",
                                  "egg": base64.b64encode(c["egg"]).decode()},
    "versions.list": lambda c, m: {"project": "rpcx"},
    "spiders.list": lambda c, m: {"project": "rpcx", "version": "1"},
    "versions.delete": lambda c, m: {"project": "rpcx", "version": "2"},
    "versions.environment": lambda c, m: {"project": "wenv", "version": "1"},
    "versions.rebuild": lambda c, m: {"project": "wenv", "version": "1"},
    "projects.delete": lambda c, m: {"project": "rpcx"},
    "scrapers.list": lambda c, m: {},
    "jobs.create": lambda c, m: {"project": "rpcp", "spider": "quick", "args": {"count": "1"}},
    "jobs.list": lambda c, m: {"project": "rpcp", "state": ["finished", "running"], "limit": 2},
    "jobs.counts": lambda c, m: {"project": "rpcp"},
    "stats.throughput": lambda c, m: {"step": 3600},
    "jobs.stats": lambda c, m: {"by": "spider"},
    "jobs.get": lambda c, m: {"id": c["quick"]},
    "jobs.cancel": lambda c, m: {"id": _new_job(c), "signal": "KILL"},
    "jobs.cancel_children": lambda c, m: {"id": _new_job(c), "signal": "KILL"},
    "jobs.pause": lambda c, m: {"id": c.setdefault("rpc_paused", _running_job(c["d"], "rpcp"))},
    "jobs.resume": lambda c, m: {"id": c.get("rpc_paused") or _new_job(c)},
    "jobs.states": lambda c, m: {"ids": [c["quick"], "nosuchjob"]},
    "jobs.meta": lambda c, m: {"id": c["quick"], "meta": {"walk": m, "gone": None}},
    "jobs.history": lambda c, m: {"id": c["quick"], "note": "walk " + m},
    "jobs.history_batch": lambda c, m: {"ids": [c["quick"]], "note": "batch " + m},
    "jobs.history_by_status": lambda c, m: {"status": "finished", "project": "rpcp",
                                            "note": "by " + m},
    "jobs.rerun": lambda c, m: {"id": c["quick"]},
    "jobs.multiprocess": lambda c, m: {"project": "rpcp", "spider": "slow", "processes": 1,
                                       "urls": ["http://127.0.0.1:9/x"], "args": {"seconds": "1"}},
    "jobs.add_urls": lambda c, m: {"id": _new_run(c), "urls": ["http://127.0.0.1:9/y"]},
    "jobs.test_run": lambda c, m: {"project": "rpcp", "spider": "quick", "items": 1},
    "jobs.log": lambda c, m: {"id": c["quick"], "offset": -200},
    "jobs.items": lambda c, m: {"id": c["quick"]},
    "schedules.create": lambda c, m: {"name": "r-" + m, "project": "rpcp", "spider": "quick",
                                      "cron": "0 3 * * *", "tz": "Europe/Paris"},
    "schedules.list": lambda c, m: {"limit": 10},
    "schedules.preview": lambda c, m: {"cron": "0 3 * * *", "count": 2},
    "schedules.get": lambda c, m: {"schedule": "r-base"},
    "schedules.update": lambda c, m: {"schedule": "r-base", "priority": 2},
    "schedules.pause": lambda c, m: {"schedule": "r-base"},
    "schedules.resume": lambda c, m: {"schedule": "r-base"},
    "schedules.run": lambda c, m: {"schedule": "r-base"},
    "schedules.health": lambda c, m: {"schedule": "r-base"},
    "schedules.health_set": lambda c, m: {"schedule": "r-base", "rules": {"history": 4}},
    "projects.health": lambda c, m: {"project": "rpcp"},
    "projects.health_set": lambda c, m: {"project": "rpcp", "rules": {}},
    "schedules.runs": lambda c, m: {"schedule": "r-base", "limit": 5},
    "schedules.next": lambda c, m: {"schedule": "r-base", "limit": 5},
    "schedules.next_all": lambda c, m: {"limit": 5},
    "runs.missed": lambda c, m: {"limit": 5},
    "schedules.delete": lambda c, m: {"schedule": _new_schedule(c, "r-del-" + m)},
    "schedules.backfill": lambda c, m: {"schedule": "r-base", "from": "2024-01-01",
                                        "to": "2024-01-03", "dry_run": True},
    "backfills.list": lambda c, m: {},
    "backfills.get": lambda c, m: {"id": _new_backfill(c)},
    "backfills.pause": lambda c, m: {"id": _new_backfill(c)},
    "backfills.resume": lambda c, m: {"id": _new_backfill(c)},
    "backfills.cancel": lambda c, m: {"id": _new_backfill(c)},
    "calendars.create": lambda c, m: {"name": "rc-" + m, "dates": ["2030-12-25"]},
    "calendars.list": lambda c, m: {},
    "calendars.get": lambda c, m: {"name": "rc-calendars.create"},
    "calendars.update": lambda c, m: {"name": "rc-calendars.create", "weekdays": ["sun"]},
    "calendars.delete": lambda c, m: {"name": "rc-calendars.create"},
    "events.list": lambda c, m: {"limit": 3},
    "queues.set": lambda c, m: {"name": "rq", "visibility": 30, "keep_done": True},
    "queues.list": lambda c, m: {},
    "queues.get": lambda c, m: {"name": "rq"},
    "queues.put": lambda c, m: {"name": "rq", "elements": ["a", "b", {"element": "c", "key": "k"}]},
    "queues.take": lambda c, m: {"name": "rq", "max": 3},
    "queues.ack": lambda c, m: {"name": "rq", "leases": c["leases"][:1]},
    "queues.nack": lambda c, m: {"name": "rq", "leases": c["leases"][1:2], "error": "rpc"},
    "queues.extend": lambda c, m: {"name": "rq", "leases": c["leases"][2:], "visibility": 60},
    "queues.pause": lambda c, m: {"name": "rq"},
    "queues.resume": lambda c, m: {"name": "rq"},
    "queues.items": lambda c, m: {"name": "rq", "state": ["waiting", "inflight", "done"]},
    "queues.keys": lambda c, m: {"name": "rq"},
    "queues.requeue": lambda c, m: {"name": "rq", "state": ["done"]},
    "queues.purge": lambda c, m: {"name": "rq", "state": ["waiting"]},
    "queues.delete": lambda c, m: {"name": "rq"},
    "nodes.drain": lambda c, m: {},
    "nodes.undrain": lambda c, m: {},  # right after: the walk's jobs must run
    "accounts.create": lambda c, m: {"name": "racct", "max_running": 1},
    "accounts.list": lambda c, m: {},
    "accounts.get": lambda c, m: {"account": "racct"},
    "accounts.update": lambda c, m: {"account": "racct", "description": "rpc"},
    "accounts.assign": lambda c, m: {"account": "racct", "project": "rpcp"},
    "accounts.upcoming": lambda c, m: {"account": "racct", "limit": 5},
    "accounts.unassign": lambda c, m: {"account": "racct", "project": "rpcp"},
    "accounts.delete": lambda c, m: {"account": "racct"},
    # last: the first token turns authentication on (the calls then send it),
    # and revoking it turns it off again
    "auth.whoami": lambda c, m: {},
    "tokens.create": lambda c, m: {"role": "admin", "name": "rpc", "expires_in": 3600},
    "tokens.list": lambda c, m: {},
    "users.create": lambda c, m: {"name": "rpcuser", "password": "long enough", "role": "run"},
    "users.list": lambda c, m: {},
    "users.update": lambda c, m: {"name": "rpcuser", "projects": ["rpcp"]},
    "users.delete": lambda c, m: {"name": "rpcuser"},
    "tokens.delete": lambda c, m: {"id": c["token_id"]},
}


def test_every_jsonrpc_method_answers_as_the_document_says(d, spec, index, egg_bytes):
    rpc_op = spec.operation("POST", API + "/jsonrpc")
    methods = index["jsonrpc"]["methods"]
    ops = {}  # op name -> (operation, its JSON-RPC methods, its route)
    routes = {r["op"]: r for r in index["routes"] if r["op"]}
    for path, item in spec.doc["paths"].items():
        for verb, op in item.items():
            if op.get("x-jsonrpc-methods"):
                ops[op["operationId"]] = (op, op["x-jsonrpc-methods"], routes[op["operationId"]])
    by_method = {m: name for name, (_, ms, _) in ops.items() for m in ms}
    missing = sorted(m for m in methods if by_method.get(m) not in RPC_CASES)
    assert not missing, f"JSON-RPC methods of the index without a case in this walk: {missing}"

    # What the calls need.
    egg = egg_bytes("testproj")
    for project, version in (("rpcp", "1"), ("rpcx", "2")):
        r = d.request("POST", f"{API}/projects/{project}/versions", params={"version": version},
                      data=egg, headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 201, r.text
    ctx = {"d": d, "egg": egg, "quick": _new_job({"d": d}, "quick")}
    _new_schedule(ctx, "r-base")
    wait_for(lambda: d.request("GET", f"{API}/jobs/{ctx['quick']}").json()["state"] in ENDED,
             60, "the quick job to end", interval=0.1)

    calls = {"ok": set(), "fail": set()}
    n = [0]

    def rpc(method, params):
        n[0] += 1
        body = {"jsonrpc": "2.0", "method": method, "params": params, "id": n[0]}
        spec.validate(body, rpc_op["requestBody"]["content"]["application/json"]["schema"],
                      f"JSON-RPC request {method}")
        headers = {"Content-Type": "application/json"}
        if "token" in ctx:
            headers["Authorization"] = "Bearer " + ctx["token"]
        r = d.request("POST", API + "/jsonrpc", data=json.dumps(body), headers=headers)
        assert r.status_code == 200, r.text
        assert media_type(r.headers.get("Content-Type")) == "application/json"
        answer = r.json()
        spec.validate(answer, rpc_op["responses"]["200"]["content"]["application/json"]["schema"],
                      f"JSON-RPC answer to {method}")
        spec.validate(answer, {"$ref": "#/components/schemas/RpcResponse"},
                      f"JSON-RPC answer to {method}")
        assert answer["id"] == n[0]
        return answer

    for name, make in RPC_CASES.items():
        op, op_methods, route = ops[name]
        for method in op_methods:
            if method not in methods:
                continue
            required = [p["name"] for p in route["params"] if p["required"]]
            bad = {} if required else {"bogus": 1}
            answer = rpc(method, bad)
            assert "result" not in answer, f"{method} {bad}: {answer}"
            assert answer["error"]["code"] == -32602, answer
            assert answer["error"]["data"]["code"] == \
                ("SPD_EMISSING" if required else "SPD_EBADPARAM"), answer
            calls["fail"].add(method)
            answer = rpc(method, make(ctx, method))
            assert "error" not in answer, f"{method}: {answer['error']}"
            spec.validate(answer["result"], spec.success_schema(op),
                          f"JSON-RPC result of {method} (as {op['operationId']})")
            if name == "tokens.create":
                ctx["token"], ctx["token_id"] = answer["result"]["token"], answer["result"]["id"]
            if name == "queues.take":
                ctx["leases"] = [i["lease"] for i in answer["result"]["items"]]
                assert len(ctx["leases"]) == 3
            calls["ok"].add(method)
    assert calls["ok"] == set(methods) and calls["fail"] == set(methods)
    wait_for(lambda: d.request("GET", API + "/auth/whoami").status_code == 200, 10,
             "authentication off again", interval=0.05)
    print(f"\ncalled {len(methods)} JSON-RPC methods, {spec.checks} checks so far")
    for job in d.request("GET", API + "/jobs", params={"state": "pending,running"}).json()["jobs"]:
        d.request("POST", f"{API}/jobs/{job['id']}/cancel", json={"signal": "KILL"})
