"""Each project version brings its own dependencies: a Python environment
per distinct (interpreter, requirements), built once by pip from a local
wheel directory the tests write themselves (no internet), shared by the
versions that need the same, and used by their crawls, cold and warm
(docs/environments.md)."""

import io
import json
import os
import shutil
import tarfile
import threading
import time
import zipfile

import pytest

from conftest import timeout, wait_for
from pyenvs import dep_wheel, make_egg, project_wheel

API = "/api/v1"

@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("wheels"))
    for v in ("1.0", "2.0"):
        dep_wheel(d, "depmod", v)
    dep_wheel(d, "othermod", "1.0")
    for i in range(10):
        dep_wheel(d, f"pkg{i}", "1.0")
    return d


def env_conf(wheels, **more):
    conf = {"pip_index_url": "none", "pip_find_links": wheels}
    conf.update(more)
    return conf


@pytest.fixture(scope="module")
def d(module_spiderd, wheels):
    return module_spiderd(name="envs", spiderd=env_conf(wheels))


def upload(d, project, version, path, check=True, **fields):
    with open(path, "rb") as f:
        data = f.read()
    form = {"project": project, "version": version}
    form.update(fields)
    obj = d.call("addversion.json", data=form, files={"egg": ("project.egg", data)},
                 timeout=timeout(120))
    if check:
        assert obj["status"] == "ok", obj
    return obj


def envs_dir(d):
    return d.path("dbs", "envs")


def envs(d):
    """The built environments on disk."""
    root = envs_dir(d)
    return sorted(e for e in os.listdir(root)
                  if not e.startswith(".") and os.path.exists(os.path.join(root, e,
                                                                             "spiderd-env.json")))


def probe(d, project, out, warm=None, **args):
    settings = [] if warm is None else [f"SPIDERD_WARM_START={'1' if warm else '0'}"]
    job = d.schedule(project, "probe", settings=settings, out=out, **args)
    e = d.wait_finished(job, 90)
    assert e["state"] == "finished", (e, d.stderr_tail(3000))
    with open(out) as f:
        return job, json.load(f)


def start_kind(d, jobid):
    row = d.request("GET", f"{API}/jobs/{jobid}").json()["id"]
    r = d.request("GET", f"{API}/events", params={"job": row, "type": "job.", "limit": 100})
    started = [e["data"] for e in r.json()["events"] if e["type"] == "job.started"]
    return started[0].get("start")


def test_two_projects_with_conflicting_versions_run_side_by_side(d, tmp_path):
    # One names its requirement inside the egg, the other on the upload.
    a = upload(d, "pa", "1", make_egg(tmp_path / "a.egg", requirements="depmod==1.0\n"))
    b = upload(d, "pb", "1", make_egg(tmp_path / "b.egg"), requirements="depmod==2.0")
    assert a["spiders"] == 1 and b["spiders"] == 1
    assert len(envs(d)) == 2
    seen = {}
    for project, want in (("pa", "1.0"), ("pb", "2.0")):
        _, rep = probe(d, project, str(tmp_path / f"{project}-cold.json"), warm=False)
        assert rep["version"] == want, rep
        assert rep["prefix"].startswith(envs_dir(d)), rep
        seen[project] = rep["prefix"]
    assert seen["pa"] != seen["pb"]
    # Warm: crawls fork from a template started with the environment's
    # python; run until one is warm, and it must see the same.
    for project, want in (("pa", "1.0"), ("pb", "2.0")):
        deadline = time.monotonic() + timeout(60)
        while True:
            job, rep = probe(d, project, str(tmp_path / f"{project}-warm.json"))
            assert rep["version"] == want and rep["prefix"] == seen[project], rep
            if start_kind(d, job) == "warm":
                break
            assert time.monotonic() < deadline, "no warm start"
            time.sleep(0.3)


def test_the_same_requirements_share_one_environment(d, tmp_path):
    before = envs(d)
    upload(d, "pc", "1", make_egg(tmp_path / "c.egg"), requirements="# the same\ndepmod==1.0\n\n")
    assert envs(d) == before
    _, rep = probe(d, "pc", str(tmp_path / "c.json"), warm=False)
    assert rep["version"] == "1.0"


def test_a_version_with_no_requirements_runs_on_the_system_packages(d, tmp_path):
    # The system has no depmod: this one imports the standard library.
    r = upload(d, "plain", "1", make_egg(tmp_path / "p.egg", dep="json"))
    assert r["spiders"] == 1
    _, rep = probe(d, "plain", str(tmp_path / "p.json"), warm=False)
    assert not rep["prefix"].startswith(envs_dir(d)), rep


def test_an_uber_egg_deploys_and_runs(d, tmp_path):
    # scrapyd-client's --include-dependencies: the dependencies' code at the
    # egg's root and requirements.txt beside it.
    egg = make_egg(tmp_path / "uber.egg", requirements="depmod==2.0\n",
                   extra={"depmod/__init__.py": "VERSION = '2.0'\n"})
    assert upload(d, "uber", "1", egg)["spiders"] == 1
    _, rep = probe(d, "uber", str(tmp_path / "u.json"), warm=False)
    assert rep["version"] == "2.0" and rep["prefix"].startswith(envs_dir(d)), rep


def test_a_wheel_uploaded_instead_of_an_egg_runs(d, tmp_path):
    whl = project_wheel(str(tmp_path), requires=["depmod==1.0"])
    assert upload(d, "wheel", "1", whl)["spiders"] == 1
    _, rep = probe(d, "wheel", str(tmp_path / "w.json"), warm=False)
    assert rep["version"] == "1.0" and rep["prefix"].startswith(envs_dir(d)), rep


def test_a_broken_requirement_is_refused_with_pips_reason_and_leaves_nothing(d, tmp_path):
    # A crawl runs meanwhile and must end as if nothing happened.
    upload(d, "busy", "1", make_egg(tmp_path / "busy.egg", requirements="depmod==1.0\n"))
    out = str(tmp_path / "busy.json")
    job = d.schedule("busy", "probe", out=out, sleep=3)
    d.wait_running(job)
    before = envs(d)
    msg = d.api_error("addversion.json", project="broken", version="1",
                      requirements="nosuchpkg==1.0")  # no egg: refused first
    assert "egg" in msg
    r = upload(d, "broken", "1", make_egg(tmp_path / "x.egg"), check=False,
               requirements="depmod==1.0\nnosuchpkg==1.0")
    assert r["status"] == "error"
    assert "EnvironmentError" in r["message"]
    assert "No matching distribution found for nosuchpkg" in r["message"], r["message"]
    assert envs(d) == before
    left = [e for e in os.listdir(envs_dir(d)) if e not in before]
    assert left == [] or all(e.startswith(".trash") for e in left), left
    assert d.api("listprojects.json")["projects"].count("broken") == 0
    assert not os.path.exists(d.path("eggs", "broken", "1.egg"))
    e = d.wait_finished(job, 60)
    assert e["state"] == "finished", e
    with open(out) as f:
        assert json.load(f)["version"] == "1.0"


def test_bad_requirements_and_pythons_are_refused_clearly(d, tmp_path):
    egg = make_egg(tmp_path / "e.egg")
    r = upload(d, "bad", "1", egg, check=False, requirements="-r other.txt")
    assert r["status"] == "error" and "option" in r["message"], r
    r = upload(d, "bad", "1", egg, check=False, python="2.7")
    assert r["status"] == "error" and "no installed Python matches python = 2.7" in r["message"]
    r = upload(d, "bad", "1", egg, check=False, python="three")
    assert r["status"] == "error" and "version such as 3.11" in r["message"], r
    # scrapy.cfg's [deploy] python inside the egg is read the same way.
    cfg_egg = make_egg(tmp_path / "f.egg", scrapy_cfg="[deploy]\nurl = x\npython = 2.6\n")
    r = upload(d, "bad", "1", cfg_egg, check=False)
    assert r["status"] == "error" and "python = 2.6" in r["message"], r
    # The REST upload answers 400 with the same reason.
    with open(egg, "rb") as f:
        resp = d.request("POST", f"{API}/projects/bad/versions", params={"version": "1"},
                         files={"egg": ("e.egg", f.read())}, data={"python": "2.7"})
    assert resp.status_code == 400, resp.text
    assert "no installed Python matches" in resp.json()["error"]["message"]


def test_the_installed_python_by_version_is_used(d, tmp_path):
    import sys
    want = "%d.%d" % sys.version_info[:2]
    assert upload(d, "py", "1", make_egg(tmp_path / "py.egg", requirements="depmod==2.0\n"),
                  python=want)["spiders"] == 1
    _, rep = probe(d, "py", str(tmp_path / "py.json"), warm=False)
    assert rep["version"] == "2.0"


def test_deleting_the_last_version_using_an_environment_removes_it(d, tmp_path):
    upload(d, "gone", "1", make_egg(tmp_path / "g.egg", dep="othermod"), requirements="othermod==1.0")
    n = len(envs(d))
    d.api("delversion.json", project="gone", version="1")
    assert len(envs(d)) == n - 1


def test_an_environment_stays_while_a_crawl_runs_in_it(d, tmp_path):
    """Deleting the last version that uses an environment removes it, but not
    from under a crawl running in it: it goes when that crawl has ended."""
    upload(d, "busy", "1", make_egg(tmp_path / "b.egg", dep="othermod"),
           requirements="othermod==1.0\npkg9==1.0")
    before = envs(d)
    out = str(tmp_path / "busy.json")
    job = d.schedule("busy", "probe", out=out, sleep="3")

    # Started: its egg is open (a crawl that has not opened it yet fails
    # when its version goes, as under Scrapyd).
    d.wait_log("busy", "probe", job, "Spider opened", 30)
    d.api("delversion.json", project="busy", version="1")
    assert envs(d) == before
    e = d.wait_finished(job, 90)
    assert e["state"] == "finished", (e, d.stderr_tail(3000))
    with open(out) as f:
        assert json.load(f)["prefix"].startswith(envs_dir(d))
    wait_for(lambda: len(envs(d)) == len(before) - 1, timeout(10),
             "the environment's removal once the crawl ended")


def test_two_concurrent_uploads_with_the_same_requirements_build_once(spiderd, wheels, tmp_path):
    d = spiderd(spiderd=env_conf(wheels))
    reqs = "\n".join(f"pkg{i}==1.0" for i in range(10))
    results = {}

    def go(project):
        results[project] = upload(d, project, "1", make_egg(tmp_path / f"{project}.egg",
                                                            dep="pkg3"),
                                  check=False, requirements=reqs)
    threads = [threading.Thread(target=go, args=(p,)) for p in ("c1", "c2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in ("c1", "c2"):
        assert results[p]["status"] == "ok", results[p]
    assert len(envs(d)) == 1
    builds = d.stderr_text().count("building environment")
    assert builds == 1, d.stderr_tail(3000)


def test_the_api_shows_each_versions_environment_and_rebuilds_it(d, tmp_path):
    r = d.request("GET", f"{API}/projects/pa/versions/1/environment", params={"log": "true"})
    assert r.status_code == 200, r.text
    env = r.json()["environment"]
    assert env["state"] == "ready" and len(env["key"]) == 16
    assert env["python"].startswith("/usr/bin/python3")
    assert env["requirements"] == "depmod==1.0\n"
    assert {"name": "depmod", "version": "1.0"} in env["packages"], env["packages"]
    assert env["size"] > 0 and env["build_ms"] > 0 and env["built_at"] > 0
    assert "Successfully installed depmod-1.0" in env["log"], env["log"]
    r = d.request("GET", f"{API}/projects/plain/versions/1/environment")
    assert r.json()["environment"] is None
    # A rebuild answers once built; crawls then run in the new one.
    r = d.request("POST", f"{API}/projects/pa/versions/1/environment/rebuild",
                  timeout=timeout(120))
    assert r.status_code == 200, r.text
    again = r.json()["environment"]
    assert again["key"] == env["key"] and again["built_at"] > env["built_at"]
    _, rep = probe(d, "pa", str(tmp_path / "after.json"))
    assert rep["version"] == "1.0"


def test_an_index_password_stays_out_of_logs(spiderd, wheels, tmp_path):
    # An index that refuses connections: pip then finds the wheel locally.
    url = "http://builder:s3cr3tpw@127.0.0.1:9/simple"
    d = spiderd(spiderd=env_conf(wheels, pip_index_url=url), env={"PIP_RETRIES": "0"})
    upload(d, "pw", "1", make_egg(tmp_path / "pw.egg", dep="othermod"),
           requirements="othermod==1.0")
    log = d.request("GET", f"{API}/projects/pw/versions/1/environment",
                    params={"log": "true"}).json()["environment"]["log"]
    assert "builder:****@127.0.0.1" in log, log
    assert "s3cr3tpw" not in log and "s3cr3tpw" not in d.stderr_text()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                assert b"s3cr3tpw" not in f.read(), pid
        except OSError:
            pass  # gone meanwhile


def test_a_node_without_the_environment_builds_it_on_first_claim(spiderd, tmp_path):
    # What a node of a cluster meets: the version's archive copied from the
    # store, no environment here. Here the record and the environment are
    # removed behind the daemon's back.
    wheels = str(tmp_path / "w")
    os.makedirs(wheels)
    dep_wheel(wheels, "depmod", "2.0")
    d = spiderd(spiderd=env_conf(wheels))
    upload(d, "lazy", "1", make_egg(tmp_path / "l.egg"), requirements="depmod==2.0")
    import shutil
    key = envs(d)[0]
    with zipfile.ZipFile(d.path("eggs", "lazy", "1.egg")) as z:
        assert z.read("requirements.txt") == b"depmod==2.0"  # carried by the archive
    os.unlink(d.path("eggs", "lazy", "1.env"))
    # Without the record, the daemon may remove the environment itself
    # meanwhile (on a shared store, the node's copy of the egg arriving
    # after the upload makes it collect unused environments).
    shutil.rmtree(os.path.join(envs_dir(d), key), ignore_errors=True)
    _, rep = probe(d, "lazy", str(tmp_path / "l.json"), warm=False)
    assert rep["version"] == "2.0" and envs(d) == [key], rep
    # Built here on first use: by the claim, or by the spider listing the
    # schedule call makes when the archive changed meanwhile (on a shared
    # store, the node's copy may replace it after the upload).
    assert "waits for environment %s to be built here" % key in d.stderr_text()
    # A node that cannot build it says why; alone, the job fails.
    os.unlink(d.path("eggs", "lazy", "1.env"))
    shutil.rmtree(os.path.join(envs_dir(d), key), ignore_errors=True)
    os.unlink(os.path.join(wheels, "depmod-2.0-py3-none-any.whl"))
    job = d.schedule("lazy", "probe", out=str(tmp_path / "x.json"))
    e = d.wait_finished(job, 90)
    assert e["state"] == "failed", e
    wait_for(lambda: "No matching distribution found for depmod==2.0" in d.stderr_text(), 10,
             "the reason in the daemon's log")


def test_a_daemon_stopping_mid_build_answers_the_upload_and_leaves_nothing(spiderd, tmp_path):
    import socket
    # A package source that accepts and never answers: the build hangs in pip.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    d = spiderd(spiderd=env_conf(f"http://127.0.0.1:{port}/"))
    # A job of a version copied from elsewhere waits for the same build.
    results = {}

    def go():
        try:
            results["r"] = upload(d, "hang", "1", make_egg(tmp_path / "h.egg", dep="json"),
                                  check=False, requirements="depmod==1.0")
        except Exception as e:  # the connection may close with the daemon
            results["r"] = e
    t = threading.Thread(target=go)
    t.start()
    wait_for(lambda: "building environment" in d.stderr_text(), 30, "the build to start")
    d.stop()
    t.join(30)
    r = results.get("r")
    assert not isinstance(r, dict) or r["status"] == "error", r
    srv.close()
    d.start()
    assert os.listdir(envs_dir(d)) == []
    assert d.api("listprojects.json")["projects"] == []


def test_with_env_prebuild_a_restarted_node_builds_what_it_lacks(spiderd, wheels, tmp_path):
    import shutil
    d = spiderd(spiderd=env_conf(wheels, env_prebuild="on"))
    upload(d, "pre", "1", make_egg(tmp_path / "p.egg"), requirements="depmod==2.0")
    key = envs(d)[0]
    d.stop()
    shutil.rmtree(os.path.join(envs_dir(d), key))
    os.unlink(d.path("eggs", "pre", "1.env"))
    d.start()
    wait_for(lambda: envs(d) == [key] and os.path.exists(d.path("eggs", "pre", "1.env")),
             timeout(60), "the environment built at start-up, and recorded")


def command_archive(kind, files):
    """A command project's archive: a zip, or a tar.gz whose names start
    with "./" as `tar -C dir -czf x.tar.gz .` writes them."""
    buf = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buf, "w") as z:
            for name, text in files.items():
                z.writestr(name, text)
    else:
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            for name, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo("./" + name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("kind,reqs", [("zip", "othermod==1.0\n"),
                                       ("tar.gz", "othermod==1.0\npkg8==1.0\n")])
def test_a_command_project_with_a_requirements_txt_runs_its_python_in_its_environment(
        d, tmp_path, kind, reqs):
    manifest = {"spiders": {"dep": {"command": [
        "sh", "-c", "python3 -c 'import othermod, sys; print(\"DEP\", othermod.VERSION, sys.prefix)'"]}}}
    project = "cmd" if kind == "zip" else "cmdtgz"
    path = tmp_path / f"cmd.{kind}"
    path.write_bytes(command_archive(kind, {"spiderd.json": json.dumps(manifest),
                                            "requirements.txt": reqs}))
    before = set(envs(d))
    assert upload(d, project, "1", path)["spiders"] == 1
    key = (set(envs(d)) - before).pop()

    def run():
        job = d.schedule(project, "dep")
        e = d.wait_finished(job, 90)
        assert e["state"] == "finished", e
        return d.read_log(project, "dep", job)
    assert "DEP 1.0 " + os.path.join(envs_dir(d), key) in run()
    # A node without it (a copy from another node) builds it first.
    os.unlink(d.path("eggs", project, "1.env"))
    shutil.rmtree(os.path.join(envs_dir(d), key))
    assert "DEP 1.0 " + os.path.join(envs_dir(d), key) in run()
    # Its fields belong in the archive, which every node copies.
    r = upload(d, project, "2", path, check=False, requirements="depmod==1.0")
    assert r["status"] == "error" and "requirements.txt" in r["message"], r
