"""Python environments on nodes sharing a store (docs/environments.md,
Cluster): the archive carries its requirements, and a node that claims a job
of a version it has no environment for builds it first."""

import json
import os

import pytest

from conftest import SHARED_STORE, timeout, wait_for
from pyenvs import dep_wheel, make_egg
from test_cluster import all_jobs, cluster
from test_pyenvs import env_conf, envs, upload

pytestmark = pytest.mark.skipif(not SHARED_STORE, reason="needs a shared store (make test-pg)")


def test_a_node_builds_the_environment_of_the_job_it_claims(spiderd, tmp_path):
    wheels = str(tmp_path / "wheels")
    os.makedirs(wheels)
    dep_wheel(wheels, "depmod", "2.0")
    (a, b), _ = cluster(spiderd, 2, tmp_path, scrapyd={"max_proc": 1},
                        spiderd=env_conf(wheels, warm_templates=0))
    upload(a, "cl", "1", make_egg(tmp_path / "cl.egg"), requirements="depmod==2.0")
    assert len(envs(a)) == 1 and envs(b) == []
    wait_for(lambda: "cl" in b.api("listprojects.json")["projects"], timeout(10),
             "the egg on the other node")
    # a is busy: the next job runs on b, which has no environment yet.
    first = a.schedule("cl", "probe", out=str(tmp_path / "first.json"), sleep=20)
    wait_for(lambda: any(j["job"] == first and j["state"] == "running" for j in all_jobs(a)),
             timeout(20), "the first job running")
    busy = next(j for j in all_jobs(a) if j["job"] == first)["node"]
    free = b if busy == "n0" else a
    out = str(tmp_path / "second.json")
    second = free.schedule("cl", "probe", out=out)
    wait_for(lambda: any(j["job"] == second and j["state"] in ("finished", "failed")
                         for j in all_jobs(a)), timeout(90), "the second job's end")
    j2 = next(j for j in all_jobs(a) if j["job"] == second)
    assert j2["state"] == "finished" and j2["node"] != busy, j2
    runner = b if j2["node"] == "n1" else a
    with open(out) as f:
        rep = json.load(f)
    assert rep["version"] == "2.0" and rep["prefix"].startswith(runner.path("dbs", "envs")), rep
    assert len(envs(runner)) == 1
    a.cancel("cl", first, "KILL")


def test_with_env_prebuild_a_node_builds_ahead_of_any_job(spiderd, tmp_path):
    wheels = str(tmp_path / "wheels")
    os.makedirs(wheels)
    dep_wheel(wheels, "depmod", "1.0")
    (a, b), _ = cluster(spiderd, 2, tmp_path, spiderd=env_conf(wheels, env_prebuild="on"))
    upload(a, "pre", "1", make_egg(tmp_path / "pre.egg"), requirements="depmod==1.0")
    wait_for(lambda: envs(b) == envs(a) and os.path.exists(b.path("eggs", "pre", "1.env")),
             timeout(60), "the environment built on the other node, and recorded")
    # A version deleted on one node goes from the other with its record and
    # its environment (the project stays: it has another version).
    upload(a, "pre", "2", make_egg(tmp_path / "pre2.egg", dep="json"))
    wait_for(lambda: os.path.exists(b.path("eggs", "pre", "2.egg")), timeout(30),
             "version 2 on the other node")
    a.api("delversion.json", project="pre", version="1")
    wait_for(lambda: not os.path.exists(b.path("eggs", "pre", "1.env")) and envs(b) == [],
             timeout(30), "the version, its record and its environment gone from the other node")
    assert os.path.exists(b.path("eggs", "pre", "2.egg"))
