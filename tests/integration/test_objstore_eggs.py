"""Eggs in the object store ([spiderd] object_store_eggs = on).

Two nodes on one PostgreSQL store and one bucket (a real radosgw of the
test's own, tests/s3server.sh, checked with awscli through s3util.py): an
uploaded egg's bytes are in the bucket at PREFIX/eggs/PROJECT/VERSION.egg
and the store's row has its size and no bytes; the other node copies it
from the bucket and runs a crawl of it; deleting the version or the project
deletes the objects; and an upload while the bucket cannot be reached is
refused (503 on the REST face) and stores nothing anywhere."""

import os
import shutil

import pytest

from conftest import need, timeout, wait_for
import s3util
from s3util import s3_server  # noqa: F401  (a fixture)
from test_objstore import PREFIX, node

API = "/api/v1"


@pytest.fixture(autouse=True)
def _tools():
    need(os.path.exists(s3util.AWS) and shutil.which("radosgw") is not None,
         "needs radosgw and awscli (make deps)")


def egg_key(version, project="testproj"):
    return f"{PREFIX}/eggs/{project}/{version}.egg"


def egg_rows(d):
    return {r["version"]: (r["nbytes"], r["size"]) for r in
            d.sql("SELECT version, length(data) AS nbytes, size FROM eggs "
                  "WHERE project = 'testproj'")}


def pair(spiderd, srv, pg_url):
    fast = {"node_heartbeat": 0.3, "node_timeout": 3, "store": pg_url,
            "object_store_eggs": "on"}
    a = node(spiderd, srv, name="a", scrapyd={"node_name": "a"}, **fast)
    b = node(spiderd, srv, name="b", scrapyd={"node_name": "b"}, **fast)
    return a, b


def test_an_egg_lives_in_the_bucket_and_another_node_runs_it(spiderd, egg, s3_server,  # noqa: F811
                                                             own_pg):
    srv = s3_server
    a, b = pair(spiderd, srv, own_pg[0])
    data = open(egg("testproj"), "rb").read()
    a.upload("testproj", "1", egg("testproj"))
    a.upload("testproj", "2", egg("testproj"))
    # The bucket has the bytes; the store only their size.
    assert s3util.get(srv, egg_key("1")) == data
    assert s3util.get(srv, egg_key("2")) == data
    assert egg_rows(a) == {"1": (0, len(data)), "2": (0, len(data))}

    # b copies from the bucket (it is the only node left to run the crawl).
    a.stop()
    job = b.schedule("testproj", "quick", _version="1", lines=3, every=0.01)
    b.wait_finished(job, timeout(60))
    local = os.path.join(b.abs_dir("eggs_dir"), "testproj", "1.egg")
    assert open(local, "rb").read() == data
    assert "copied egg testproj/1 from the store" in b.stderr_text()
    got = [j for j in b.listjobs("testproj")["finished"] if j["id"] == job]
    assert got, b.listjobs("testproj")

    # Deleting a version, then the project, deletes their objects.
    assert b.api("delversion.json", project="testproj", version="1")["status"] == "ok"
    wait_for(lambda: egg_key("1") not in s3util.keys(srv, f"{PREFIX}/eggs/"), timeout(10),
             "version 1's object to go")
    assert egg_key("2") in s3util.keys(srv, f"{PREFIX}/eggs/")
    assert egg_rows(b) == {"2": (0, len(data))}
    assert b.api("delproject.json", project="testproj")["status"] == "ok"
    assert s3util.keys(srv, f"{PREFIX}/eggs/") == []
    assert egg_rows(b) == {}


def test_an_upload_while_the_bucket_is_down_is_refused_and_stores_nothing(
        spiderd, egg, s3_server, own_pg):  # noqa: F811
    srv = s3_server
    d = node(spiderd, srv, store=own_pg[0], object_store_eggs="on")
    data = open(egg("testproj"), "rb").read()
    s3util.cut_server(srv)
    try:
        r = d.request("POST", f"{API}/projects/testproj/versions", params={"version": "1"},
                      data=data, headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 503, r.text
        e = r.json()["error"]
        assert e["code"] == "SPD_ESTORE" and "could not be stored" in e["message"], e
        obj = d.upload("testproj", "1", egg("testproj"), check=False)
        assert obj["status"] == "error" and "cannot store the egg" in obj["message"], obj
        assert "cannot put egg testproj/1 in the object store" in d.stderr_text()
        assert egg_rows(d) == {}
        assert "testproj" not in d.api("listprojects.json")["projects"]
        assert not os.path.exists(os.path.join(d.abs_dir("eggs_dir"), "testproj", "1.egg"))
    finally:
        s3util.resume_server(srv)
    assert s3util.keys(srv, f"{PREFIX}/eggs/") == []
    # Once it answers, the same upload is stored.
    d.upload("testproj", "1", egg("testproj"))
    assert s3util.get(srv, egg_key("1")) == data


def test_without_object_store_the_key_is_said_to_have_no_effect(spiderd):
    d = spiderd(spiderd={"object_store_eggs": "on"})
    assert "object_store_eggs = on has no effect without object_store" in d.stderr_text()
