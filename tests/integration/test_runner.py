"""spiderd_runner run directly (no daemon), with the environment the daemon
gives it: SCRAPY_PROJECT, SPIDERD_EGG, SCRAPYD_EGG_VERSION, SPIDERD_STATS_FILE.
"""

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from eggs import PROJECTS_DIR, PYTHON, build_egg  # noqa: E402

PYTHON_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
TESTPROJ_SPIDERS = ["crash", "envdump", "fail", "flaky", "hang", "marker", "metaset", "queueput",
                    "quick", "slow"]


@pytest.fixture(scope="module")
def eggs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("eggs"))
    return {
        name: build_egg(name, d)
        for name in ("testproj", "testproj_v2", "brokenproj", "noentry")
    }


def runner_env(egg=None, project="testproj", **extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SCRAPY", "SPIDERD_", "PYTHON"))
    }
    env.update(
        PYTHONPATH=PYTHON_DIR,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONIOENCODING="UTF-8",
        SCRAPY_PROJECT=project,
    )
    if egg is not None:
        env["SPIDERD_EGG"] = egg
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(args, env, cwd, timeout=60):
    return subprocess.run(
        [PYTHON, "-m", "spiderd_runner", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
    )


def start(args, env, cwd):
    out = open(os.path.join(cwd, "runner.out"), "w")
    try:
        return subprocess.Popen(
            [PYTHON, "-m", "spiderd_runner", *args],
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    finally:
        out.close()


def crawl_args(spider, tmp_path, *args, job="job1"):
    """The argv the daemon builds: user -s, LOG_FILE, FEEDS, then -a."""
    feeds = {f"file://{tmp_path}/items.jl": {"format": "jsonlines"}}
    return [
        "crawl",
        spider,
        "-s",
        f"LOG_FILE={tmp_path}/crawl.log",
        "-s",
        "FEEDS=" + json.dumps(feeds),
        "-a",
        f"_job={job}",
        *args,
    ]


def read_items(tmp_path):
    with open(tmp_path / "items.jl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_stats(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def log_contains(tmp_path, text):
    try:
        with open(tmp_path / "crawl.log", encoding="utf-8") as f:
            return text in f.read()
    except FileNotFoundError:
        return False


def kill_if_running(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait()


# --- list -----------------------------------------------------------------


def test_list_prints_spiders_sorted_one_per_line(eggs, tmp_path):
    r = run(["list", "-s", "LOG_STDOUT=0"], runner_env(eggs["testproj"]), tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(f"{s}\n" for s in TESTPROJ_SPIDERS)


def test_list_second_version_has_extra_spider(eggs, tmp_path):
    r = run(
        ["list", "-s", "LOG_STDOUT=0"],
        runner_env(eggs["testproj_v2"], SCRAPYD_EGG_VERSION="2.0"),
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == sorted(TESTPROJ_SPIDERS + ["extra"])


def test_list_project_by_settings_module_without_egg(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(os.path.join(PROJECTS_DIR, "testproj"), src)
    env = runner_env(SCRAPY_SETTINGS_MODULE="testproj.settings")
    env["PYTHONPATH"] = f"{PYTHON_DIR}:{src}"
    r = run(["list", "-s", "LOG_STDOUT=0"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == TESTPROJ_SPIDERS


def test_list_broken_settings_fails_with_traceback(eggs, tmp_path):
    r = run(["list", "-s", "LOG_STDOUT=0"], runner_env(eggs["brokenproj"], "brokenproj"), tmp_path)
    assert r.returncode != 0
    assert r.stdout == ""
    assert "Traceback (most recent call last)" in r.stderr
    assert "RuntimeError: brokenproj settings fail to import on purpose" in r.stderr


def test_egg_without_entry_point_fails_clearly(eggs, tmp_path):
    r = run(["list"], runner_env(eggs["noentry"], "noentry"), tmp_path)
    assert r.returncode == 1
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("spiderd_runner: ")
    assert "no 'scrapy' entry point named 'settings'" in r.stderr


def test_missing_egg_fails_clearly(tmp_path):
    r = run(["list"], runner_env(str(tmp_path / "nope.egg")), tmp_path)
    assert r.returncode == 1
    assert "no such egg file" in r.stderr


def test_corrupt_egg_fails_clearly(tmp_path):
    egg = tmp_path / "bad.egg"
    egg.write_bytes(b"this is not a zip file")
    r = run(["list"], runner_env(str(egg)), tmp_path)
    assert r.returncode == 1
    assert "spiderd_runner: " in r.stderr
    assert "corrupt egg" in r.stderr


def test_egg_file_not_named_dot_egg_still_works(eggs, tmp_path):
    egg = tmp_path / "stored-egg"
    shutil.copyfile(eggs["testproj"], egg)
    r = run(["list"], runner_env(str(egg)), tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == TESTPROJ_SPIDERS


# --- crawl ----------------------------------------------------------------


def test_crawl_quick_writes_items_and_stats(eggs, tmp_path):
    stats_file = tmp_path / "stats.json"
    env = runner_env(eggs["testproj"], SPIDERD_STATS_FILE=stats_file)
    r = run(crawl_args("quick", tmp_path), env, tmp_path)
    assert r.returncode == 0, r.stderr

    items = read_items(tmp_path)
    assert [i["n"] for i in items] == [0, 1, 2]
    assert items[0] == {"n": 0, "url": "data:,quick0", "text": "quick0"}
    assert log_contains(tmp_path, "Spider closed (finished)")

    stats = read_stats(stats_file)
    assert stats["items"] == 3
    assert stats["requests"] == 3
    assert stats["responses"] == 3
    assert stats["errors"] == 0
    assert stats["finish_reason"] == "finished"
    assert isinstance(stats["elapsed"], float) and stats["elapsed"] >= 0
    start_time = datetime.datetime.fromisoformat(stats["start_time"])
    finish_time = datetime.datetime.fromisoformat(stats["finish_time"])
    assert start_time.utcoffset() == datetime.timedelta(0)
    assert start_time <= finish_time
    assert stats["scrapy"]["item_scraped_count"] == 3
    assert isinstance(stats["scrapy"]["start_time"], str)
    # the write is atomic: no temp file is left next to it
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "crawl.log",
        "items.jl",
        "stats.json",
    ]


def test_crawl_count_argument(eggs, tmp_path):
    r = run(crawl_args("quick", tmp_path, "-a", "count=5"), runner_env(eggs["testproj"]), tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(read_items(tmp_path)) == 5


def test_crawl_without_stats_file_variable_writes_none(eggs, tmp_path):
    r = run(crawl_args("quick", tmp_path), runner_env(eggs["testproj"]), tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crawl.log", "items.jl"]


def test_envdump_sees_settings_module_and_kwargs(eggs, tmp_path):
    out = tmp_path / "env.json"
    env = runner_env(eggs["testproj"], SCRAPYD_EGG_VERSION="1.0")
    args = [
        "crawl",
        "envdump",
        "-s",
        "DOWNLOAD_DELAY=0.5",
        "-s",
        "USER_AGENT=ua-test",
        "-a",
        "_job=myjob1",
        "-a",
        "arg1=val1",
        "-a",
        f"out={out}",
        "-a",
        "_version=1.0",
    ]
    r = run(args, env, tmp_path)
    assert r.returncode == 0, r.stderr
    dump = read_stats(out)
    assert dump["env"]["SCRAPY_SETTINGS_MODULE"] == "testproj.settings"
    assert dump["env"]["SCRAPY_PROJECT"] == "testproj"
    assert dump["env"]["SCRAPYD_EGG_VERSION"] == "1.0"
    assert dump["env"]["SPIDERD_EGG"] == eggs["testproj"]
    assert dump["kwargs"] == {
        "_job": "myjob1",
        "arg1": "val1",
        "out": str(out),
        "_version": "1.0",
    }
    # Scrapy drops the program name from sys.argv in place, as under Scrapyd
    assert dump["argv"] == args
    assert dump["settings"]["DOWNLOAD_DELAY"] == "0.5"
    assert dump["settings"]["USER_AGENT"] == "ua-test"
    assert dump["cwd"] == str(tmp_path)
    assert dump["project_version"] == "1.0"
    # activated in place: modules are imported from inside the egg file
    assert dump["module_file"].startswith(eggs["testproj"] + os.sep)


def test_settings_module_in_environment_wins_over_entry_point(eggs, tmp_path):
    env = runner_env(eggs["testproj"], SCRAPY_SETTINGS_MODULE="nosuchmod.settings")
    r = run(["list"], env, tmp_path)
    assert r.returncode != 0
    assert "No module named 'nosuchmod'" in r.stderr


def test_second_version_runs_its_own_code(eggs, tmp_path):
    r = run(crawl_args("extra", tmp_path), runner_env(eggs["testproj_v2"]), tmp_path)
    assert r.returncode == 0, r.stderr
    assert read_items(tmp_path) == [{"extra": True, "version": "2.0"}]


def test_crash_exits_nonzero_and_leaves_stats_of_a_crawl_that_never_opened(eggs, tmp_path):
    stats_file = tmp_path / "stats.json"
    stats_file.write_text("stale")
    env = runner_env(eggs["testproj"], SPIDERD_STATS_FILE=stats_file)
    r = run(crawl_args("crash", tmp_path), env, tmp_path)
    assert r.returncode != 0
    assert "crash spider fails in __init__ on purpose" in r.stderr
    stats = read_stats(stats_file)
    assert stats["finish_reason"] is None
    assert stats["elapsed"] is None
    assert stats["start_time"] is None and stats["finish_time"] is None
    assert stats["items"] == 0 and stats["requests"] == 0


def test_unknown_spider_exits_nonzero_with_empty_stats(eggs, tmp_path):
    stats_file = tmp_path / "stats.json"
    stats_file.write_text('{"items": 99}')
    env = runner_env(eggs["testproj"], SPIDERD_STATS_FILE=stats_file)
    r = run(["crawl", "nosuch", "-a", "_job=j"], env, tmp_path)
    assert r.returncode != 0
    assert "Spider not found: nosuch" in r.stderr
    stats = read_stats(stats_file)
    assert stats["items"] == 0
    assert stats["finish_reason"] is None
    assert stats["scrapy"] == {}


def test_bad_egg_crawl_removes_stale_stats_and_writes_empty_ones(tmp_path):
    stats_file = tmp_path / "stats.json"
    stats_file.write_text('{"items": 99}')
    env = runner_env(str(tmp_path / "nope.egg"), SPIDERD_STATS_FILE=stats_file)
    r = run(["crawl", "quick"], env, tmp_path)
    assert r.returncode == 1
    assert read_stats(stats_file)["items"] == 0


def test_list_leaves_stats_file_alone(eggs, tmp_path):
    stats_file = tmp_path / "stats.json"
    stats_file.write_text("untouched")
    env = runner_env(eggs["testproj"], SPIDERD_STATS_FILE=stats_file)
    r = run(["list"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert stats_file.read_text() == "untouched"


def test_fail_finishes_with_error_counted(eggs, tmp_path):
    stats_file = tmp_path / "stats.json"
    env = runner_env(eggs["testproj"], SPIDERD_STATS_FILE=stats_file)
    r = run(crawl_args("fail", tmp_path), env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert read_items(tmp_path) == [{"before": "error"}]
    stats = read_stats(stats_file)
    assert stats["finish_reason"] == "finished"
    assert stats["items"] == 1
    assert stats["errors"] >= 1
    assert stats["scrapy"]["spider_exceptions/ValueError"] == 1


def test_marker_writes_its_pid_under_the_job_id(eggs, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    r = run(
        crawl_args("marker", tmp_path, "-a", f"dir={marks}", job="jobM"),
        runner_env(eggs["testproj"]),
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    pid = int((marks / "jobM").read_text())
    assert read_items(tmp_path) == [{"marker": str(marks / "jobM"), "pid": pid}]
    assert os.listdir(marks) == ["jobM"]


def test_marker_wait_keeps_the_process_alive(eggs, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    t0 = time.monotonic()
    r = run(
        crawl_args("marker", tmp_path, "-a", f"dir={marks}", "-a", "wait=2"),
        runner_env(eggs["testproj"]),
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 >= 2
    assert (marks / "job1").exists()


def test_slow_finishes_after_its_seconds(eggs, tmp_path):
    stats_file = tmp_path / "stats.json"
    env = runner_env(eggs["testproj"], SPIDERD_STATS_FILE=stats_file)
    r = run(crawl_args("slow", tmp_path, "-a", "seconds=1.5"), env, tmp_path)
    assert r.returncode == 0, r.stderr
    stats = read_stats(stats_file)
    assert stats["finish_reason"] == "finished"
    assert stats["elapsed"] >= 1.5
    assert stats["items"] >= 2


def start_slow(eggs, tmp_path, *args):
    stats_file = tmp_path / "stats.json"
    env = runner_env(eggs["testproj"], SPIDERD_STATS_FILE=stats_file)
    proc = start(crawl_args("slow", tmp_path, *args), env, tmp_path)
    try:
        wait_for(lambda: log_contains(tmp_path, "Spider opened"), 30, "the spider to open")
        time.sleep(1.2)  # a few ticks at DOWNLOAD_DELAY 0.5 (items log at DEBUG only)
    except BaseException:
        kill_if_running(proc)
        raise
    return proc, stats_file


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_slow_gracefully(eggs, tmp_path, signum):
    proc, stats_file = start_slow(eggs, tmp_path)
    try:
        proc.send_signal(signum)
        assert proc.wait(timeout=20) == 0
    finally:
        kill_if_running(proc)
    stats = read_stats(stats_file)
    assert stats["finish_reason"] == "shutdown"
    assert stats["items"] >= 2
    assert log_contains(tmp_path, "Spider closed (shutdown)")


def test_first_sigint_drains_before_exit(eggs, tmp_path):
    proc, stats_file = start_slow(eggs, tmp_path, "-a", "drain=3")
    try:
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert time.monotonic() - t0 >= 2.5
    finally:
        kill_if_running(proc)
    assert read_stats(stats_file)["finish_reason"] == "shutdown"
    assert log_contains(tmp_path, "Spider closed (shutdown)")


def test_second_sigint_forces_exit_during_drain(eggs, tmp_path):
    proc, stats_file = start_slow(eggs, tmp_path, "-a", "drain=60")
    try:
        proc.send_signal(signal.SIGINT)
        wait_for(lambda: log_contains(tmp_path, "Draining for"), 10, "the drain")
        time.sleep(0.5)
        assert proc.poll() is None  # still draining
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        assert time.monotonic() - t0 < 5
    finally:
        kill_if_running(proc)
    assert log_contains(tmp_path, "forcing unclean shutdown")
    assert not log_contains(tmp_path, "Spider closed")
    # written when the close began, so a forced exit still leaves it
    stats = read_stats(stats_file)
    assert stats["finish_reason"] == "shutdown"
    assert stats["items"] >= 2
