"""`spiderd` client sub-commands, run as the real binary against a real
daemon: every command's success path, API errors (exit 1 with the API's
message), bad usage (exit 2 with usage), --json, --url / SPIDERD_URL,
basic auth, and `logs -f` printing a growing log exactly once."""

import datetime
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import BIN, NODE, SANITIZER_MARKERS, free_port, rest, timeout, unique, wait_for

API = "/api/v1"


def base_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SCRAPYD_", "SPIDERD_", "SCRAPY_"))}
    env.update(extra)
    return env


def no_sanitizer_report(stderr):
    bad = [line for line in stderr.splitlines() if any(m in line for m in SANITIZER_MARKERS)]
    assert not bad, "sanitizer report from the CLI:\n" + stderr[-8000:]


def cli(d, *args, env=None, cwd=None, seconds=30, config=True):
    """Runs `spiderd ARGS` the way a user in the daemon's directory would:
    the daemon's address comes from its scrapyd.conf (config=False reads
    no config file at all)."""
    e = base_env(SPIDERD_CONFIG_FILES=d.conf_path if (config and d) else "")
    e.update(env or {})
    p = subprocess.run([BIN, *args], cwd=cwd or (d.workdir if d else None), env=e,
                       capture_output=True, text=True, timeout=timeout(seconds))
    no_sanitizer_report(p.stderr)
    return p


def ok(d, *args, **kw):
    p = cli(d, *args, **kw)
    assert p.returncode == 0, f"spiderd {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def local(ms):
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


@pytest.fixture(scope="module")
def d(module_spiderd, egg):
    daemon = module_spiderd(name="cli")
    daemon.upload("testproj", "1", egg("testproj"))
    return daemon


def wait_state(d, job_id, states, seconds=40):
    return wait_for(lambda: (lambda j: j if j["state"] in states else None)(
        rest(d, "GET", f"/jobs/{job_id}")), seconds, f"job {job_id} in {states}", interval=0.1)


# ---- usage ---------------------------------------------------------------

def test_help_and_usage_errors():
    p = cli(None, "help", config=False)
    assert p.returncode == 0
    for cmd in ("spiderd serve", "spiderd status", "spiderd schedules", "spiderd schedule add",
                "spiderd jobs", "spiderd logs", "spiderd events", "spiderd cancel"):
        assert cmd in p.stdout.replace("[serve]", "serve"), cmd

    p = cli(None, "schedule", "add", "--help", config=False)
    assert p.returncode == 0 and p.stdout.startswith("usage: spiderd schedule add NAME")
    assert "--cron EXPR" in p.stdout and "--url URL" in p.stdout
    p = cli(None, "help", "logs", config=False)
    assert p.returncode == 0 and "--follow" in p.stdout

    for args, message in [
        (("jobs", "--bogus"), "unknown option '--bogus'"),
        (("jobs", "--limit", "0"), "--limit '0': expected a number from 1 to 1000"),
        (("schedule", "add", "s", "--project", "p", "--spider", "x"), "when to run"),
        (("schedule", "add", "s", "-p", "p", "-s", "x", "--every", "soon"), "--every 'soon'"),
        (("run", "testproj"), "missing argument"),
        (("run", "testproj", "quick", "--arg", "novalue"), "expected NAME=VALUE"),
        (("schedule",), "usage:"),
        (("schedule", "frobnicate", "x"), "unknown command 'schedule frobnicate'"),
        (("logs", "1", "--tail", "10", "--from-start"), "exclude each other"),
    ]:
        p = cli(None, *args, config=False)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert message in p.stderr and "usage:" in p.stderr, (args, p.stderr)
        assert p.stdout == ""

    # `serve` and its flags are unchanged.
    p = cli(None, "--version", config=False)
    assert p.returncode == 0 and p.stdout.startswith("spiderd ")
    p = cli(None, "frobnicate", config=False)
    assert p.returncode == 2 and "unknown command 'frobnicate'" in p.stderr


# ---- status --------------------------------------------------------------

def test_status(d):
    out = ok(d, "status")
    assert f"(node {NODE})" in out and "pending" in out and d.url in out
    obj = json.loads(ok(d, "status", "--json"))
    assert obj["node_name"] == NODE and obj["stopping"] is False


# ---- schedules -----------------------------------------------------------

def test_schedule_add_show_edit_rm_round_trip(d):
    name = unique("cli")
    out = ok(d, "schedule", "add", name, "--project", "testproj", "--spider", "quick",
             "--cron", "0 3 * * *", "--tz", "Europe/Berlin", "--arg", "count=2",
             "--arg", "x=a=b", "--set", "LOG_LEVEL=INFO", "--overlap", "skip",
             "--missed", "once", "--priority", "5", "--timeout", "600", "--retries", "2",
             "--jitter", "30", "--start", "2020-01-01T00:00:00", "--end", "2099-01-01T00:00:00")
    s = rest(d, "GET", f"/schedules/{name}")
    assert f"created schedule {name} (id {s['id']})" in out
    assert (s["kind"], s["cron"], s["tz"]) == ("cron", "0 3 * * *", "Europe/Berlin")
    assert s["args"] == {"count": "2", "x": "a=b"} and s["settings"] == {"LOG_LEVEL": "INFO"}
    assert (s["overlap"], s["missed"], s["priority"], s["timeout"], s["retries"],
            s["jitter"]) == ("skip", "once", 5, 600, 2, 30)
    assert s["start"].startswith("2020-01-01T00:00:00") and s["end"].startswith("2099-01-01")
    assert s["paused"] is False

    # The listing: one row with the columns the brief asks for.
    table = ok(d, "schedules")
    header, *rows = table.splitlines()
    assert header.split() == ["ID", "NAME", "SPIDER", "WHEN", "TZ", "PAUSED", "NEXT", "RUN",
                              "OVERLAP", "MISSED"]
    row = next(r for r in rows if f" {name} " in r)
    assert row.split()[0] == str(s["id"])
    assert "cron 0 3 * * *" in row and "Europe/Berlin" in row and " skip " in row
    assert " once" in row and " no " in row
    # NEXT RUN is the first of next_runs, in the CLI's local time zone.
    nr = s["next_runs"][0]
    utc = datetime.datetime.fromisoformat(nr).astimezone(datetime.timezone.utc)
    tokyo = cli(d, "schedules", env={"TZ": "Asia/Tokyo"}).stdout
    want = (utc + datetime.timedelta(hours=9)).strftime("%Y-%m-%d %H:%M:%S")
    assert want in next(r for r in tokyo.splitlines() if f" {name} " in r)
    listed = json.loads(ok(d, "schedules", "--json"))
    assert name in [x["name"] for x in listed["schedules"]]

    # show: details, upcoming runs, missed runs; by name and by id.
    out = ok(d, "schedule", "show", name)
    assert f"name           {name}" in out and "when           cron 0 3 * * *" in out
    assert "args           count=2, x=a=b" in out
    assert "upcoming runs:" in out and "missed runs" in out
    upcoming = rest(d, "GET", f"/schedules/{name}/runs", params={"state": "upcoming"})["runs"]
    assert upcoming and local(upcoming[0]["due_ms"]) in out
    shown = json.loads(ok(d, "schedule", "show", str(s["id"]), "--json"))
    assert shown["schedule"]["name"] == name
    assert [r["due_ms"] for r in shown["upcoming"]] == [r["due_ms"] for r in upcoming[:10]]
    assert shown["missed"] == []

    # edit PATCHes only what is given.
    out = ok(d, "schedule", "edit", name, "--every", "120", "--tz", "UTC", "--arg", "count=5")
    assert f"updated schedule {name}" in out
    e = rest(d, "GET", f"/schedules/{name}")
    assert (e["kind"], e["interval"], e["cron"], e["tz"]) == ("interval", 120, None, "UTC")
    assert e["args"] == {"count": "5"}
    for kept in ("project", "spider", "settings", "overlap", "missed", "priority", "timeout",
                 "retries", "jitter"):
        assert e[kept] == s[kept], kept
    for kept in ("start", "end"):  # the same instants, now shown in UTC
        assert datetime.datetime.fromisoformat(e[kept]) == \
            datetime.datetime.fromisoformat(s[kept]), kept
    renamed = name + "b"
    edited = json.loads(ok(d, "schedule", "edit", str(s["id"]), "--name", renamed, "--json"))
    assert edited["name"] == renamed and edited["id"] == s["id"]

    # pause / resume / run
    assert ok(d, "schedule", "pause", renamed) == f"paused schedule {renamed}\n"
    assert rest(d, "GET", f"/schedules/{renamed}")["paused"] is True
    assert ok(d, "schedule", "resume", renamed) == f"resumed schedule {renamed}\n"
    assert rest(d, "GET", f"/schedules/{renamed}")["paused"] is False
    job_id = int(ok(d, "schedule", "run", renamed, "--priority", "3").strip())
    job = rest(d, "GET", f"/jobs/{job_id}")
    assert job["schedule_id"] == s["id"] and job["priority"] == 3

    # rm, then it is gone for the API and the CLI alike.
    assert ok(d, "schedule", "rm", renamed) == f"deleted schedule {renamed}\n"
    rest(d, "GET", f"/schedules/{renamed}", status=404)
    p = cli(d, "schedule", "show", renamed)
    assert p.returncode == 1 and p.stderr == f"spiderd: schedule '{renamed}' not found\n"
    assert p.stdout == ""
    wait_state(d, job_id, {"finished"})


def test_schedule_add_paused_at_and_missed_runs(d):
    name = unique("at")
    when = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1))
    at = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    obj = json.loads(ok(d, "schedule", "add", name, "-p", "testproj", "-s", "quick",
                        "--at", at, "--paused", "--json"))
    assert obj["kind"] == "once" and obj["paused"] is True
    out = ok(d, "schedules")
    row = next(r for r in out.splitlines() if f" {name} " in r)
    assert " yes " in row and "at " in row
    ok(d, "schedule", "rm", name)


def test_schedule_api_errors_exit_1_with_the_api_message(d):
    name = unique("bad")
    p = cli(d, "schedule", "add", name, "-p", "testproj", "-s", "quick", "--cron", "61 * * * *")
    assert p.returncode == 1 and p.stdout == ""
    r = d.request("POST", API + "/schedules",
                  json={"name": name, "project": "testproj", "spider": "quick",
                        "cron": "61 * * * *"})
    assert r.status_code == 400
    assert p.stderr == "spiderd: " + r.json()["error"]["message"] + "\n"
    for args in (("schedule", "edit", "nope", "--every", "5"), ("schedule", "rm", "nope"),
                 ("schedule", "pause", "nope"), ("schedule", "resume", "nope"),
                 ("schedule", "run", "nope")):
        p = cli(d, *args)
        assert p.returncode == 1, args
        assert p.stderr == "spiderd: schedule 'nope' not found\n", (args, p.stderr)
    p = cli(d, "job", "show", "999999")
    assert p.returncode == 1 and "not found" in p.stderr
    p = cli(d, "run", "testproj", "nosuchspider")
    assert p.returncode == 1 and "nosuchspider" in p.stderr


# ---- jobs ----------------------------------------------------------------

def test_run_jobs_and_job_show(d):
    job_id = int(ok(d, "run", "testproj", "quick", "--arg", "count=2", "--set",
                    "LOG_LEVEL=INFO", "--priority", "1").strip())
    job = wait_state(d, job_id, {"finished"})
    assert job["args"] == {"count": "2"} and job["settings"] == {"LOG_LEVEL": "INFO"}

    out = ok(d, "jobs", "--project", "testproj", "--spider", "quick", "--state", "finished")
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "JOB", "PROJECT", "SPIDER", "STATE", "CREATED", "STARTED",
                              "ENDED", "EXIT"]
    row = next(r for r in rows if r.split()[0] == str(job_id)).split()
    assert row[1:5] == [job["job"], "testproj", "quick", "finished"] and row[-1] == "0"
    assert " ".join(row[5:7]) == local(job["created_ms"])
    # Times follow the CLI's TZ.
    out = cli(d, "jobs", "--limit", "1000", env={"TZ": "Asia/Kolkata"}).stdout
    row = next(r for r in out.splitlines() if r.split()[0] == str(job_id)).split()
    ist = datetime.datetime.fromtimestamp(job["ended_ms"] / 1000, datetime.timezone.utc) + \
        datetime.timedelta(hours=5, minutes=30)
    assert " ".join(row[9:11]) == ist.strftime("%Y-%m-%d %H:%M:%S")

    listed = json.loads(ok(d, "jobs", "--state", "finished", "--limit", "5", "--json"))
    assert len(listed["jobs"]) <= 5 and all(j["state"] == "finished" for j in listed["jobs"])
    assert json.loads(ok(d, "jobs", "--state", "running", "--state", "pending", "--json"))["jobs"] \
        is not None

    out = ok(d, "job", "show", str(job_id))
    assert f"job:          {job['job']}" in out and "state:        finished" in out
    assert "args:         count=2" in out and "exit code:    0" in out
    assert "stats:" in out and "  items: 2" in out
    # A Scrapyd job id works too.
    shown = json.loads(ok(d, "job", "show", job["job"], "--json"))
    assert shown["id"] == job_id
    p = cli(d, "jobs", "--state", "bogus")
    assert p.returncode == 1 and "unknown state 'bogus'" in p.stderr


def test_run_json_and_cancel(d):
    obj = json.loads(ok(d, "run", "testproj", "slow", "-a", "seconds=60", "--json"))
    job_id = obj["id"]
    assert obj["spider"] == "slow" and obj["args"] == {"seconds": "60"}
    wait_state(d, job_id, {"running"})
    out = ok(d, "cancel", str(job_id), "--signal", "KILL")
    assert out.startswith(f"cancelled job {job_id} (was running")
    wait_state(d, job_id, {"cancelled"})
    p = cli(d, "cancel", str(job_id))
    assert p.returncode == 1 and "has already ended" in p.stderr


# ---- logs ----------------------------------------------------------------

def test_logs_follow_prints_the_whole_log_once_and_exits_when_the_job_ends(d):
    # Started before the job runs: the log does not exist yet.
    job = rest(d, "POST", "/jobs", status=201,
               json={"project": "testproj", "spider": "slow", "args": {"seconds": "4"},
                     "settings": {"LOG_LEVEL": "DEBUG"}})
    e = base_env(SPIDERD_CONFIG_FILES=d.conf_path)
    t0 = time.monotonic()
    p = subprocess.Popen([BIN, "logs", "-f", str(job["id"])], cwd=d.workdir, env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout(60))
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    no_sanitizer_report(err.decode())
    assert p.returncode == 0, err
    assert time.monotonic() - t0 >= 3  # it followed the job, not just a snapshot
    assert rest(d, "GET", f"/jobs/{job['id']}")["state"] == "finished"
    with open(d.log_path("testproj", "slow", job["job"]), "rb") as f:
        on_disk = f.read()
    assert out == on_disk
    assert out.count(b"Spider closed (finished)") == 1
    assert out.count(b"DEBUG: Crawled (200)") >= 5  # many polls' worth

    # Without -f: the whole log; --tail: its end; --json: the API's piece.
    assert subprocess.run([BIN, "logs", job["job"]], cwd=d.workdir, env=e,
                          capture_output=True).stdout == on_disk
    assert subprocess.run([BIN, "logs", str(job["id"]), "--tail", "300"], cwd=d.workdir, env=e,
                          capture_output=True).stdout == on_disk[-300:]
    piece = json.loads(ok(d, "logs", str(job["id"]), "--json"))
    assert piece["running"] is False and piece["size"] == len(on_disk)


def test_logs_follow_exits_1_when_the_job_fails(d):
    job_id = int(ok(d, "run", "testproj", "crash").strip())
    p = cli(d, "logs", "-f", str(job_id), seconds=60)
    assert p.returncode == 1
    assert f"spiderd: job {job_id} ended failed" in p.stderr
    assert "crash spider fails in __init__ on purpose" in p.stdout
    p = cli(d, "logs", "999999")
    assert p.returncode == 1 and "not found" in p.stderr


# ---- events --------------------------------------------------------------

def test_events_list_and_follow(d):
    name = unique("ev")
    ok(d, "schedule", "add", name, "-p", "testproj", "-s", "quick", "--cron", "@yearly")
    sid = rest(d, "GET", f"/schedules/{name}")["id"]
    out = ok(d, "events", "--type", "schedule.", "--schedule", str(sid))
    lines = out.splitlines()
    assert len(lines) == 1 and "schedule.created" in lines[0] and f"schedule={sid}" in lines[0]
    page = json.loads(ok(d, "events", "--type", "schedule.created", "--json"))
    assert all(ev["type"] == "schedule.created" for ev in page["events"])
    after = page["next_after"]
    assert name in [ev["data"]["name"] for ev in page["events"]]

    e = base_env(SPIDERD_CONFIG_FILES=d.conf_path)
    p = subprocess.Popen([BIN, "events", "-f", "--json", "--type", "schedule.",
                          "--after", str(after)], cwd=d.workdir, env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ok(d, "schedule", "pause", name)
        ok(d, "schedule", "rm", name)
        seen = []
        deadline = time.monotonic() + timeout(15)
        while len(seen) < 2 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if line:
                seen.append(json.loads(line))
        assert [ev["type"] for ev in seen] == ["schedule.paused", "schedule.deleted"]
        assert all(ev["schedule_id"] == sid for ev in seen)
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=timeout(10))
    no_sanitizer_report(err)
    assert p.returncode == 0, err


# ---- finding the daemon --------------------------------------------------

def test_url_flag_and_environment(d, tmp_path):
    # No config file: the default address (port 6800 or wherever) is not
    # this daemon's, so only --url or SPIDERD_URL can find it.
    dead = f"http://127.0.0.1:{free_port()}"
    p = cli(d, "status", cwd=str(tmp_path), config=False, env={"SPIDERD_URL": dead})
    assert p.returncode == 1 and p.stderr.startswith(f"spiderd: cannot reach spiderd at {dead}")
    out = ok(d, "status", "--url", d.url, cwd=str(tmp_path), config=False,
             env={"SPIDERD_URL": dead})
    assert f"(node {NODE})" in out
    out = ok(d, "status", cwd=str(tmp_path), config=False, env={"SPIDERD_URL": d.url + "/"})
    assert f"(node {NODE})" in out
    p = cli(d, "status", "--url", "ftp://x", config=False)
    assert p.returncode == 2 and "not an http:// or https:// URL" in p.stderr


def test_basic_auth(spiderd):
    d = spiderd(scrapyd={"username": "alice", "password": "s3cret"})
    # From the daemon's own scrapyd.conf: address and credentials.
    assert f"(node {NODE})" in ok(d, "status")
    # The config's password goes only to the config's address.
    p = cli(d, "status", "--url", d.url)
    assert p.returncode == 1
    assert p.stderr == ("spiderd: 401 Unauthorized: the daemon needs credentials (--token TOKEN "
                        "or SPIDERD_TOKEN, or --user USER:PASS or SPIDERD_USER)\n")
    p = cli(d, "status", "--url", d.url, "--user", "alice:wrong")
    assert p.returncode == 1
    assert p.stderr == "spiderd: 401 Unauthorized: the daemon refused the username and password\n"
    assert f"(node {NODE})" in ok(d, "status", "--url", d.url, "--user", "alice:s3cret")
    assert ok(d, "jobs", "--url", d.url, "-u", "alice:s3cret").startswith("ID ")
    env = {"SPIDERD_URL": d.url, "SPIDERD_USER": "alice", "SPIDERD_PASSWORD": "s3cret"}
    assert f"(node {NODE})" in ok(d, "status", config=False, env=env)
    env = {"SPIDERD_URL": d.url, "SPIDERD_USER": "alice:s3cret"}
    assert json.loads(ok(d, "status", "--json", config=False, env=env))["node_name"] == NODE
