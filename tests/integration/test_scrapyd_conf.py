"""A Scrapyd configuration's class keys and [services] entries, and the
daemon's JSON log, against the real daemon.

Scrapyd's default classes start and the log says what spiderd does in
their place; any other class (a plugin spiderd cannot load) stops start-up
with a message naming the key, the class and what spiderd offers instead,
unless unknown_scrapyd_classes = warn. log_format = json makes every line
the daemon writes one JSON object, and a crawl's lines name its job.
"""
import json
import re
import subprocess

from conftest import BIN, NODE, timeout

# Scrapyd 1.6's default_scrapyd.conf
DEFAULT_CLASSES = {
    "application": "scrapyd.app.application",
    "spiderqueue": "scrapyd.spiderqueue.SqliteSpiderQueue",
    "poller": "scrapyd.poller.QueuePoller",
    "launcher": "scrapyd.launcher.Launcher",
    "webroot": "scrapyd.website.Root",
    "eggstorage": "scrapyd.eggstorage.FilesystemEggStorage",
    "jobstorage": "scrapyd.jobstorage.MemoryJobStorage",
}
DEFAULT_SERVICES = {
    "schedule.json": "scrapyd.webservice.Schedule",
    "cancel.json": "scrapyd.webservice.Cancel",
    "status.json": "scrapyd.webservice.Status",
    "addversion.json": "scrapyd.webservice.AddVersion",
    "listprojects.json": "scrapyd.webservice.ListProjects",
    "listversions.json": "scrapyd.webservice.ListVersions",
    "listspiders.json": "scrapyd.webservice.ListSpiders",
    "delproject.json": "scrapyd.webservice.DeleteProject",
    "delversion.json": "scrapyd.webservice.DeleteVersion",
    "listjobs.json": "scrapyd.webservice.ListJobs",
    "daemonstatus.json": "scrapyd.webservice.DaemonStatus",
}
OVERRIDE = "set unknown_scrapyd_classes = warn in [spiderd]"


def refused(d):
    """Runs the daemon of d's configuration, which must refuse to start;
    returns its stderr."""
    p = subprocess.run([BIN, "serve"], cwd=d.workdir, env=d.environ(), capture_output=True,
                       text=True, timeout=timeout(30))
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "started" not in p.stderr
    return p.stderr


def test_scrapyd_default_classes_start_and_the_log_says_what_each_becomes(spiderd):
    d = spiderd(scrapyd=dict(DEFAULT_CLASSES), services=dict(DEFAULT_SERVICES))
    assert d.call("daemonstatus.json")["status"] == "ok"
    log = d.stderr_text()
    store = re.search(r"store='([^']*)'", log).group(1)
    assert (f"[spiderd.config#info] spiderqueue = scrapyd.spiderqueue.SqliteSpiderQueue: "
            f"spiderd keeps its queue in its store (store = {store})") in log
    for key, cls in DEFAULT_CLASSES.items():
        assert len(re.findall(rf"#info\] {key} = {re.escape(cls)}: spiderd ", log)) == 1, key
    for name, cls in DEFAULT_SERVICES.items():
        assert f"#info] [services] {name} = {cls}: spiderd serves /{name} itself" in log
    assert "warning" not in log
    # Scrapyd's second job storage is its own too
    d2 = spiderd(scrapyd={"jobstorage": "scrapyd.jobstorage.SqliteJobStorage"})
    assert "jobstorage = scrapyd.jobstorage.SqliteJobStorage: spiderd keeps finished jobs " \
           "in its store" in d2.stderr_text()


def test_a_plugin_queue_class_refuses_to_start_and_says_to_share_a_store(spiderd):
    d = spiderd(scrapyd={"spiderqueue": "scrapyd_pg.queue.PostgresSpiderQueue"}, start=False)
    err = refused(d)
    assert err.startswith(f"spiderd: {d.conf_path}: [scrapyd] spiderqueue = "
                          "scrapyd_pg.queue.PostgresSpiderQueue: "), err
    assert "store = postgresql://" in err and OVERRIDE in err
    # told to, it starts, says what it ignores, and queues jobs in its own store
    d.spiderd["unknown_scrapyd_classes"] = "warn"
    d.write_conf()
    d.start()
    assert d.call("daemonstatus.json")["status"] == "ok"
    assert ("[spiderd.config#warning] spiderqueue = scrapyd_pg.queue.PostgresSpiderQueue: "
            "ignored (unknown_scrapyd_classes = warn): ") in d.stderr_text()


def test_a_custom_launcher_or_job_storage_is_refused_with_what_spiderd_offers(spiderd):
    d = spiderd(scrapyd={"launcher": "mycompany.DockerLauncher"}, start=False)
    err = refused(d)
    assert "[scrapyd] launcher = mycompany.DockerLauncher: " in err
    assert "[hooks]" in err and "max_proc" in err and OVERRIDE in err
    d = spiderd(scrapyd={"jobstorage": "scrapyd_mongo.MongoJobStorage"}, start=False)
    err = refused(d)
    assert "finished_to_keep" in err and "jobs_to_keep" in err


def test_services_a_custom_entry_is_refused_a_disabled_one_is_not_served(spiderd):
    services = dict(DEFAULT_SERVICES, **{"mywebservice.json": "amodule.MyWebService",
                                         "listversions.json": ""})
    d = spiderd(services=services, start=False)
    err = refused(d)
    assert "[services] mywebservice.json = amodule.MyWebService: spiderd has no endpoint " \
           "/mywebservice.json" in err
    assert "schedule.json" in err and "/api/v1/" in err and OVERRIDE in err
    # a built-in endpoint given another class is refused too
    d2 = spiderd(services={"schedule.json": "mine.Schedule"}, start=False)
    assert "spiderd serves its own /schedule.json" in refused(d2)

    d.spiderd["unknown_scrapyd_classes"] = "warn"
    d.write_conf()
    d.start()
    log = d.stderr_text()
    assert "#warning] [services] mywebservice.json = amodule.MyWebService: ignored" in log
    assert "#info] [services] listversions.json = (empty): disabled: spiderd does not serve " \
           "/listversions.json" in log
    assert d.request("GET", "/mywebservice.json").status_code == 404
    assert d.request("GET", "/listversions.json?project=x").status_code == 404
    assert d.call("listprojects.json")["status"] == "ok"


def test_unknown_scrapyd_keys_are_ignored_with_a_warning(spiderd):
    d = spiderd(scrapyd={"postgres_dsn": "host=db"})
    assert "[spiderd.config#warning] [scrapyd] postgres_dsn (" in d.stderr_text()
    assert "host=db" not in d.stderr_text()  # a value may be a secret


TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def json_lines(text):
    """Every line the daemon wrote, as JSON (the harness's start markers aside)."""
    out = []
    for line in text.splitlines():
        if line.startswith("==== spiderd start #"):
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}\n----\n{text[-4000:]}")
    return out


def test_json_log_of_real_crawls_names_their_jobs(spiderd, egg):
    d = spiderd(spiderd={"log_format": "json"},
                scrapyd={"spiderqueue": DEFAULT_CLASSES["spiderqueue"]})
    d.upload("jsonlog", "1", egg("testproj"))
    ok = d.schedule("jsonlog", "quick")
    bad = d.schedule("jsonlog", "crash")
    d.wait_finished(ok)
    d.wait_finished(bad)
    d.stop()
    lines = json_lines(d.stderr_text())
    assert len(lines) > 5
    for e in lines:
        assert TIME.match(e["time"]), e
        assert e["level"] in ("debug", "info", "warning", "error"), e
        assert e["node"] == NODE and e["component"] and isinstance(e["message"], str), e
    assert any(e["component"] == "config" and e["message"].startswith("spiderqueue = ")
               for e in lines)
    assert any(e["message"].startswith("spiderd ") and " started: max_proc=" in e["message"]
               for e in lines)

    def of(job):
        return [e for e in lines if e.get("job") == job]
    started = [e for e in of(ok) if e["message"].startswith("Process started:")]
    assert len(started) == 1, of(ok)
    assert (started[0]["project"], started[0]["spider"], started[0]["level"]) == \
        ("jsonlog", "quick", "info")
    assert any(e["message"].startswith("Process finished:") and e["spider"] == "quick"
               for e in of(ok)), of(ok)
    died = [e for e in of(bad) if e["message"].startswith("Process died:")]
    assert len(died) == 1 and died[0]["level"] == "error", of(bad)
    assert (died[0]["project"], died[0]["spider"]) == ("jsonlog", "crash")
    # lines about no job carry no job fields
    assert all("job" not in e for e in lines if e["component"] in ("main", "config"))


def test_json_log_to_a_file(spiderd):
    d = spiderd(spiderd={"log_format": "json", "log_file": "daemon.log"})
    d.stop()
    with open(d.path("daemon.log"), encoding="utf-8") as f:
        lines = json_lines(f.read())
    assert lines[-1]["message"] == "stopped" and lines[-1]["node"] == NODE
