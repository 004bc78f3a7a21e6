"""Every Grepsr and Sneakpeek method name that /api/v1/jsonrpc answers is in
the OpenAPI document (x-jsonrpc-aliases), as the tables of src/api/grepsr.c
and src/api/sneakpeek.c have it: a Grepsr call on the operation it is, with
the parameters it sets, renames and requires; Sneakpeek's methods on the
JSON-RPC endpoint. Then each listed name is
called on a real daemon and answers as its entry says."""

import json
import os
import re

import pytest

from conftest import ok, req

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "api")
ENDED = '["finished","failed","cancelled","lost"]'


def c_string(text):
    """A C string literal's value (adjacent literals joined, ENDED expanded)."""
    text = re.sub(r'"\s*ENDED\s*"', ENDED.replace('"', '\\"'), text)
    return json.loads(text)


def grepsr_table():
    with open(os.path.join(SRC, "grepsr.c"), encoding="utf-8") as f:
        src = f.read()
    body = src[src.index("calls[] = {"):src.index("#define NCALLS")]
    s = r'(NULL|"(?:[^"\\]|\\.)*"(?:\s*ENDED\s*"(?:[^"\\]|\\.)*")?)'
    rows = re.findall(r'\{"(\w+)",\s*' + s + r',\s*' + s + r',\s*' + s + r',\s*' + s + r'\}', body)
    out = {}
    for name, op, fixed, rename, need in rows:
        e = {"op": c_string(op)}
        if fixed != "NULL":
            e["sets"] = json.loads(c_string(fixed))
        if rename != "NULL":
            a, b = c_string(rename).split("=")
            e["renames"] = {a: b}
        if need != "NULL":
            e["requires"] = [c_string(need)]
        out[name] = e
    assert len(out) >= 30 and len(out) == body.count('{"'), "grepsr.c's table did not parse"
    return out


def sneakpeek_table():
    with open(os.path.join(SRC, "sneakpeek.c"), encoding="utf-8") as f:
        names = re.findall(r'SP_OP\("(\w+)"', f.read())
    assert len(names) >= 14
    return names


@pytest.fixture(scope="module")
def d(module_spiderd):
    return module_spiderd(name="aliases")


@pytest.fixture(scope="module")
def doc(d):
    return ok(req(d, "GET", "/openapi.json"))


def documented(doc):
    """method -> (operationId, alias entry) of every x-jsonrpc-aliases entry."""
    out = {}
    for path, item in doc["paths"].items():
        for verb, op in item.items():
            for e in op.get("x-jsonrpc-aliases", []):
                assert e["method"] not in out, f"{e['method']} listed twice"
                out[e["method"]] = (op["operationId"], e)
    return out


def params_of(doc, op_id):
    for item in doc["paths"].values():
        for op in item.values():
            if op.get("operationId") == op_id:
                names = {p["name"] for p in op.get("parameters", [])}
                for media in op.get("requestBody", {}).get("content", {}).values():
                    s = media["schema"]
                    if "$ref" in s:
                        s = doc["components"]["schemas"][s["$ref"].rsplit("/", 1)[1]]
                    names |= set(s.get("properties", {}))
                return names
    raise AssertionError(f"no operation {op_id}")


def rpc(d, method, params):
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return ok(req(d, "POST", "/jsonrpc", json=body))


def test_every_grepsr_call_is_on_the_operation_it_is(doc):
    table, listed = grepsr_table(), documented(doc)
    grepsr = {m: v for m, v in listed.items() if v[1]["system"] == "grepsr"}
    assert set(grepsr) == set(table)
    for name, want in table.items():
        op_id, e = grepsr[name]
        assert op_id == want["op"], (name, op_id)
        for key in ("sets", "renames", "requires"):
            assert e.get(key) == want.get(key), (name, key, e)
        assert e.get("available", True) is True, (name, e)


def test_every_sneakpeek_method_is_on_the_jsonrpc_endpoint(doc):
    names, listed = sneakpeek_table(), documented(doc)
    sp = {m: v for m, v in listed.items() if v[1]["system"] == "sneakpeek"}
    assert set(sp) == set(names)
    ops = {op["operationId"] for item in doc["paths"].values() for op in item.values()}
    for name, (op_id, e) in sp.items():
        assert op_id == "jsonrpc", (name, op_id)
        assert e["like"] is None or e["like"] in ops, (name, e)
    assert not set(listed) - set(names) - set(grepsr_table()), "aliases no table has"


def test_each_listed_name_answers_as_documented(d, doc):
    for method, (op_id, e) in documented(doc).items():
        params = {k: "1" for k in e.get("requires", [])}
        params["__probe"] = 1
        answer = rpc(d, method, params)
        err = answer.get("error")
        assert err, (method, answer)
        assert err["code"] != -32601, (method, err)  # a method the endpoint knows
        if e["system"] != "grepsr":
            continue
        # The native op's own validation: its fields, as the document has them.
        assert err["code"] == -32602 and "unknown field '__probe'" in err["message"], err
        expected = err["message"].split("expected one of: ", 1)[1].rstrip(")").split(", ")
        known = params_of(doc, op_id)
        assert set(expected[:-1]) <= known, (method, expected, known)
        for key in e.get("sets", {}):
            answer = rpc(d, method, {key: e["sets"][key]})
            assert f"sets '{key}' itself" in answer["error"]["message"], (method, answer)
