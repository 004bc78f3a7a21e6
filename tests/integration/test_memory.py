"""Slots by memory: a node starts a job only when the job's expected memory
(its _memory_limit, else the peak of its spider's recent runs, else
job_memory_default) fits in what the node has free: the machine's
MemAvailable (or its cgroup's room) less memory_reserve and what the crawls
already running are still expected to take, and no more than jobs_memory
less what they reserve when that is set. A job that does not fit waits,
pending, and starts once room frees. max_proc stays the upper bound.

The crawls are real Scrapy runs of the healthproj egg's `allocates` spider,
which holds a number of megabytes for a few seconds. The caps are set with
jobs_memory so that the outcome does not depend on the machine's size; the
real reading is checked against /proc/meminfo, and a reserve larger than
any machine holds every job back."""

import time

import pytest

from conftest import get_job, ok, req, wait_for

PROJECT = "mem"
MB = 1 << 20
ENDED = ("finished", "failed", "cancelled", "lost")


def deploy(d, egg_bytes):
    r = req(d, "POST", f"/projects/{PROJECT}/versions", params={"version": "1.0"},
            data=egg_bytes("healthproj"), headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    return d


def create(d, spider="allocates", **args):
    return ok(req(d, "POST", "/jobs", json={"project": PROJECT, "spider": spider,
                                            "args": {k: str(v) for k, v in args.items()}}), 201)


def wait_state(d, ident, states, seconds=90):
    def check():
        j = get_job(d, ident)
        return j if j["state"] in states else None
    return wait_for(check, seconds, f"job {ident} in {states}", interval=0.05)


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def test_the_node_reads_its_free_memory(spiderd, egg_bytes):
    d = deploy(spiderd(), egg_bytes)
    m = ok(req(d, "GET", "/status"))["memory"]
    assert m["reserve"] == 256 * MB and m["reserved"] == 0 and m["waiting"] == 0
    assert m["source"] in ("meminfo", "cgroup")
    if m["source"] == "meminfo":
        assert abs(m["available"] - mem_available()) < 512 * MB, m
    assert m["free"] == max(0, m["available"] - m["reserve"])
    text = d.request("GET", "/metrics").text
    for name in ("available", "reserve", "reserved", "free"):
        assert f"\nspiderd_memory_{name}_bytes " in text, name
    # a job that fits starts at once
    j = create(d, mb=10, seconds=0)
    assert wait_state(d, j["id"], ENDED)["state"] == "finished"
    # and the node publishes what it has with its heartbeat
    def beat():
        ns = ok(req(d, "GET", "/nodes"))["nodes"]
        me = [n for n in ns if n["self"]]
        return me[0] if me and me[0]["memory_free"] > 0 else None
    n = wait_for(beat, 30, "a heartbeat with the node's memory")
    assert n["memory_reserved"] >= 0


def test_a_reserve_larger_than_the_machine_holds_every_job_back(spiderd, egg_bytes):
    d = deploy(spiderd(spiderd={"memory_reserve": "4096G"}), egg_bytes)
    j = create(d, spider="quick")
    time.sleep(3)
    assert get_job(d, j["id"])["state"] == "pending"
    m = ok(req(d, "GET", "/status"))["memory"]
    assert m["free"] == 0 and m["waiting"] == 100 * MB, m
    assert "wait for memory: the least needs 100 MB" in d.stderr_text()


def test_jobs_that_do_not_fit_together_run_one_after_the_other(spiderd, egg_bytes):
    # two jobs of 1 GB expected each in 1.5 GB: one at a time, though
    # max_proc would run both
    d = deploy(spiderd(scrapyd={"max_proc": 4}, spiderd={"jobs_memory": "1536M"}), egg_bytes)
    a = create(d, mb=20, seconds=4, _memory_limit="1G")
    wait_state(d, a["id"], ("running",))
    b = create(d, mb=20, seconds=0, _memory_limit="1G")
    c = create(d, spider="quick")  # 100 MB expected: it fits beside a
    wait_state(d, c["id"], ENDED)
    assert get_job(d, b["id"])["state"] == "pending"
    m = ok(req(d, "GET", "/status"))["memory"]
    assert m["reserved"] >= 1024 * MB and m["waiting"] == 1024 * MB, m
    a = wait_state(d, a["id"], ENDED)
    b = wait_state(d, b["id"], ENDED)
    assert a["state"] == b["state"] == "finished"
    assert b["started_ms"] >= a["ended_ms"], (a, b)


def test_a_spiders_recent_peak_is_what_its_next_run_expects(spiderd, egg_bytes):
    d = deploy(spiderd(scrapyd={"max_proc": 4}, spiderd={"jobs_memory": "400M"}), egg_bytes)
    # no history: 100 MB expected; its peak is recorded
    first = create(d, mb=150, seconds=0)
    first = wait_state(d, first["id"], ENDED)
    assert first["state"] == "finished"
    peak = first["stats"]["peak_memory_bytes"]
    assert 150 * MB < peak < 400 * MB, peak
    # two more together: each expects that peak, and two do not fit in 400M
    x = create(d, mb=150, seconds=3)
    y = create(d, mb=150, seconds=0)
    x = wait_state(d, x["id"], ENDED)
    y = wait_state(d, y["id"], ENDED)
    assert x["state"] == y["state"] == "finished"
    runs = sorted([(x["started_ms"], x["ended_ms"]), (y["started_ms"], y["ended_ms"])])
    assert runs[1][0] >= runs[0][1], runs
