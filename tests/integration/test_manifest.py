"""Spiders in any language: projects that are a zip or a tar.gz with a
spiderd.json manifest (docs/spiders.md), deployed and run beside a Scrapy egg
by a real daemon. The archives are built here with zipfile and tarfile."""

import glob
import io
import json
import os
import tarfile
import time
import zipfile

import pytest

from conftest import TESTPROJ_SPIDERS, get_job, wait_for

API = "/api/v1"

MANIFEST = {
    "spiders": {
        "hello": {"command": ["node", "crawl.js", "{spider}"]},
        "count": {"command": ["sh", "count.sh"]},
        "slow": {"command": ["sh", "slow.sh"]},
        "fails": {"command": ["sh", "-c", "echo failing >&2; exit 3"]},
        "missing": {"command": ["nosuch-program-spiderd", "{spider}"]},
    }
}

CRAWL_JS = r"""
const fs = require('fs');
const { double } = require('./lib/util.js');
const spider = process.argv[2];
const args = JSON.parse(process.env.SPIDERD_ARGS);
const settings = JSON.parse(process.env.SPIDERD_SETTINGS);
const n = parseInt(args.count || '2', 10);
console.log(`node spider ${spider} job ${process.env.SPIDERD_JOB} argc ${process.argv.length}`);
console.log(`greeting=${args.greeting} delay=${settings.DOWNLOAD_DELAY} url=${process.env.SPIDERD_URL}`);
console.log(`cwd=${process.cwd()}`);
for (let i = 0; i < n; i++) {
  fs.appendFileSync(process.env.SPIDERD_ITEMS_FILE, JSON.stringify({ i, twice: double(i), spider }) + '\n');
}
fs.writeFileSync(process.env.SPIDERD_STATS_FILE, JSON.stringify({
  items: n, requests: 1, responses: 1, errors: 0, finish_reason: 'finished', elapsed: 0.25 }));
"""

UTIL_JS = "exports.double = (x) => 2 * x;\n"

COUNT_SH = r"""
echo "count spider $SPIDERD_SPIDER job=$SPIDERD_JOB"
echo "args=$SPIDERD_ARGS"
echo "settings=$SPIDERD_SETTINGS"
for i in 1 2 3; do echo "{\"n\": $i}" >> "$SPIDERD_ITEMS_FILE"; done
echo '{"items": 3, "requests": 0, "responses": 0, "errors": 0, "finish_reason": "finished", "elapsed": 0.5}' > "$SPIDERD_STATS_FILE"
echo "count done" >&2
"""

SLOW_SH = r"""
trap 'echo "slow got TERM"; exit 143' TERM
echo "slow started"
while :; do sleep 0.1; done
"""

FILES = {
    "spiderd.json": json.dumps(MANIFEST),
    "crawl.js": CRAWL_JS,
    "lib/util.js": UTIL_JS,
    "count.sh": COUNT_SH,
    "slow.sh": SLOW_SH,
}


def make_zip(files, extra=None):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)
        for info, data in extra or []:
            z.writestr(info, data)
    return buf.getvalue()


def make_targz(files, extra=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
        for info in extra or []:
            t.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return buf.getvalue()


def upload_bytes(d, project, version, data):
    return d.call("addversion.json", data={"project": project, "version": version},
                  files={"egg": ("project.zip", data)})


@pytest.fixture(scope="module")
def d(module_spiderd, egg_bytes):
    daemon = module_spiderd(name="manifest", scrapyd={"items_dir": "items"},
                            spiderd={"max_upload": 4 * 1024 * 1024})
    obj = upload_bytes(daemon, "mf", "1.0", make_zip(FILES))
    assert obj["status"] == "ok" and obj["spiders"] == len(MANIFEST["spiders"]), obj
    obj = upload_bytes(daemon, "eggproj", "1.0", egg_bytes("testproj"))
    assert obj["status"] == "ok", obj
    return daemon


def items(d, project, spider, job):
    with open(d.items_path(project, spider, job), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_listspiders_reads_the_manifest(d):
    assert d.api("listspiders.json", project="mf")["spiders"] == sorted(MANIFEST["spiders"])
    assert d.api("listspiders.json", project="mf", _version="1.0")["spiders"] == sorted(
        MANIFEST["spiders"])
    assert d.api("listspiders.json", project="eggproj")["spiders"] == TESTPROJ_SPIDERS
    r = d.request("GET", f"{API}/projects/mf/spiders")
    assert r.status_code == 200, r.text
    assert r.json()["spiders"] == sorted(MANIFEST["spiders"])
    assert "mf" in d.api("listprojects.json")["projects"]


def test_shell_spider_runs(d):
    job = d.schedule("mf", "count", settings=["DOWNLOAD_DELAY=2"], color="blue")
    entry = d.wait_finished(job)
    assert entry["spider"] == "count"
    log = d.read_log("mf", "count", job)
    assert f"count spider count job={job}" in log
    assert "count done" in log  # stderr too
    args = json.loads(log.split("args=", 1)[1].split("\n", 1)[0])
    assert args == {"color": "blue", "_job": job}
    settings = json.loads(log.split("settings=", 1)[1].split("\n", 1)[0])
    assert settings == {"DOWNLOAD_DELAY": "2"}
    assert items(d, "mf", "count", job) == [{"n": 1}, {"n": 2}, {"n": 3}]
    j = get_job(d, job)
    assert j["state"] == "finished" and j["exit_code"] == 0, j
    assert j["stats"]["items"] == 3 and j["stats"]["finish_reason"] == "finished", j


def test_node_spider_runs(d):
    job = d.schedule("mf", "hello", settings=["DOWNLOAD_DELAY=0.5"], greeting="hi there",
                     count="4", _version="1.0")
    d.wait_finished(job)
    log = d.read_log("mf", "hello", job)
    # {spider} replaced, no other argument appended.
    assert f"node spider hello job {job} argc 3" in log, log
    assert f"greeting=hi there delay=0.5 url={d.url}" in log, log
    cwd = log.split("cwd=", 1)[1].split("\n", 1)[0]
    assert os.path.isfile(os.path.join(cwd, "lib", "util.js"))
    assert cwd.startswith(d.path("dbs", "spiders", "mf") + "/"), cwd
    got = items(d, "mf", "hello", job)
    assert got == [{"i": i, "twice": 2 * i, "spider": "hello"} for i in range(4)]
    j = get_job(d, job)
    assert j["state"] == "finished" and j["stats"]["items"] == 4, j
    assert j["stats"]["elapsed"] == 0.25
    assert j["args"]["greeting"] == "hi there"


def test_side_by_side_with_an_egg(d):
    egg_job = d.schedule("eggproj", "quick", count="2")
    sh_job = d.schedule("mf", "count")
    d.wait_finished(egg_job, seconds=60)
    d.wait_finished(sh_job)
    assert get_job(d, egg_job)["stats"]["items"] == 2
    assert get_job(d, sh_job)["stats"]["items"] == 3


def test_exit_code_and_missing_program(d):
    job = d.schedule("mf", "fails")
    d.wait_finished(job)
    j = get_job(d, job)
    assert j["state"] == "failed" and j["exit_code"] == 3, j
    assert "failing" in d.read_log("mf", "fails", job)
    job = d.schedule("mf", "missing")
    d.wait_finished(job)
    assert get_job(d, job)["state"] == "failed"
    assert "cannot start nosuch-program-spiderd" in d.read_log("mf", "missing", job)


def test_unknown_spider_refused(d):
    msg = d.api_error("schedule.json", project="mf", spider="nosuch")
    assert msg == "spider 'nosuch' not found"


def test_cancel_sends_term(d):
    job = d.schedule("mf", "slow")
    d.wait_running(job)
    d.wait_log("mf", "slow", job, "slow started")
    assert d.cancel("mf", job, "TERM") == "running"
    d.wait_finished(job, seconds=20)
    assert "slow got TERM" in d.read_log("mf", "slow", job)
    assert get_job(d, job)["state"] == "cancelled"


def test_tar_gz_project(d):
    data = make_targz(FILES)
    r = d.request("POST", f"{API}/projects/mft/versions", params={"version": "2"}, data=data,
                  headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    assert r.json()["spiders"] == sorted(MANIFEST["spiders"])
    job = d.schedule("mft", "count")
    d.wait_finished(job)
    assert get_job(d, job)["state"] == "finished"
    assert items(d, "mft", "count", job) == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_default_command_for_listed_spiders(d):
    files = {"spiderd.json": json.dumps({"command": ["sh", "-c", "echo spider is $0", "{spider}"],
                                         "spiders": ["one", "two"]})}
    assert upload_bytes(d, "mfd", "1", make_zip(files))["spiders"] == 2
    job = d.schedule("mfd", "two")
    d.wait_finished(job)
    assert "spider is two" in d.read_log("mfd", "two", job)


def _symlink_zip(target):
    info = zipfile.ZipInfo("link")
    info.create_system = 3
    info.external_attr = (0o120777 << 16)
    return make_zip(FILES, [(info, target)])


def _tar_with(info):
    return make_targz(FILES, [info])


def _tar_symlink(name, target):
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return _tar_with(info)


def _tar_file(name):
    info = tarfile.TarInfo(name)
    info.size = 1
    return _tar_with(info)


BROKEN = [
    ("bad json", lambda: make_zip({**FILES, "spiderd.json": '{"spiders": '}),
     "spiderd.json: not valid JSON"),
    ("unknown key", lambda: make_zip({**FILES, "spiderd.json": json.dumps({**MANIFEST, "x": 1})}),
     "spiderd.json: unknown key 'x'"),
    ("empty command", lambda: make_zip({"spiderd.json": '{"spiders": {"a": {"command": []}}}'}),
     "the command of spider 'a' is empty"),
    ("bad placeholder", lambda: make_zip(
        {"spiderd.json": '{"spiders": {"a": {"command": ["sh", "{job}"]}}}'}),
     "unknown placeholder '{job}'"),
    ("dotdot zip", lambda: make_zip(FILES, [(zipfile.ZipInfo("../x"), "x")]),
     "archive member '../x': '..' is not allowed"),
    ("dotdot tar", lambda: _tar_file("a/../../x"), "'..' is not allowed"),
    ("absolute tar", lambda: _tar_file("/tmp/spiderd-abs-x"), "absolute paths are not allowed"),
    ("absolute zip", lambda: make_zip(FILES, [(zipfile.ZipInfo("/tmp/spiderd-abs-z"), "x")]),
     "absolute paths are not allowed"),
    ("symlink out tar", lambda: _tar_symlink("link", "../../../etc"),
     "symlink to '../../../etc' may point outside the project"),
    ("symlink abs tar", lambda: _tar_symlink("link", "/etc/passwd"),
     "may point outside the project"),
    ("symlink out zip", lambda: _symlink_zip("../outside"), "may point outside the project"),
    ("no manifest", lambda: make_targz({"count.sh": COUNT_SH}),
     "no spiderd.json at the archive's root"),
]


@pytest.mark.parametrize("what,build,message", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_project_refused_and_previous_kept(d, what, build, message):
    obj = upload_bytes(d, "mf", "9.9", build())
    assert obj["status"] == "error", obj
    assert obj["message"].startswith("ManifestError: "), obj
    assert message in obj["message"], obj
    assert d.api("listversions.json", project="mf")["versions"] == ["1_0"]
    assert d.api("listspiders.json", project="mf")["spiders"] == sorted(MANIFEST["spiders"])
    assert not os.path.exists("/tmp/spiderd-abs-x") and not os.path.exists("/tmp/spiderd-abs-z")


def test_broken_project_refused_by_rest(d):
    r = d.request("POST", f"{API}/projects/mf/versions", params={"version": "9.9"},
                  data=_tar_symlink("link", "/etc"),
                  headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 400, r.text
    e = r.json()["error"]
    assert e["code"] == "SPD_EBADEGG" and "may point outside the project" in e["message"], e
    assert d.api("listversions.json", project="mf")["versions"] == ["1_0"]


def test_new_version_gets_its_own_directory(d):
    files = dict(FILES)
    files["count.sh"] = 'echo "version two" ; exit 0\n'
    assert upload_bytes(d, "mf", "2.0", make_zip(files))["status"] == "ok"
    job = d.schedule("mf", "count")
    d.wait_finished(job)
    assert "version two" in d.read_log("mf", "count", job)
    # The same version uploaded again runs its new content; the old
    # extraction goes once no job runs in it, and so does a deleted version's.
    files["count.sh"] = 'echo "version two again" ; exit 0\n'
    assert upload_bytes(d, "mf", "2.0", make_zip(files))["status"] == "ok"
    job = d.schedule("mf", "count")
    d.wait_finished(job)
    assert "version two again" in d.read_log("mf", "count", job)
    assert len(glob.glob(d.path("dbs", "spiders", "mf", "2_0-*"))) == 1
    d.api("delversion.json", project="mf", version="2.0")
    old = d.schedule("mf", "count", _version="1.0")
    d.wait_finished(old)
    assert "count done" in d.read_log("mf", "count", old)
    assert glob.glob(d.path("dbs", "spiders", "mf", "1_0-*"))
    assert not glob.glob(d.path("dbs", "spiders", "mf", "2_0-*"))
