"""Libraries spiderd opens only when it needs them (dlopen), so an idle
daemon on SQLite does not keep them resident: libpq (with libssl, Kerberos,
LDAP) for a PostgreSQL store, libarchive (with libxml2, ICU, libstdc++) for
zip and tar.gz projects, libcurl for webhooks and ICU for schedules. Checked
in /proc/PID/maps of a real daemon, and with the libraries hidden (an empty
file bound over each in a mount namespace of the daemon's own): a daemon
that does not need them runs without them, and one that does says what to
install."""

import json
import os
import re
import shlex
import subprocess

import pytest

import conftest
from conftest import SANITIZED, STORE_TMPL
from test_manifest import make_targz

# Mapped by the sanitized build's runtime itself (libubsan needs libstdc++).
LAZY = [r"libpq\.so", r"libarchive\.so", r"libxml2\.so", r"libicu", r"libgssapi",
        r"libldap", r"libcurl", r"libssl\.so"] + ([] if SANITIZED else [r"libstdc\+\+"])

MANIFEST = {"spiders": {"count": {"command": ["sh", "-c", "echo counted"]}}}


def project_archive():
    return make_targz({"spiderd.json": json.dumps(MANIFEST)})


def mapped(d):
    """Base names of the shared objects the daemon maps now."""
    with open(f"/proc/{d.proc.pid}/maps", encoding="utf-8") as f:
        return sorted({os.path.basename(line.split()[-1]) for line in f if ".so" in line})


def matching(libs, patterns):
    return [lib for lib in libs if any(re.match(p, lib) for p in patterns)]


def sqlite_daemon(spiderd, **kw):
    """A daemon on its own SQLite file, whatever store the suite shares."""
    return spiderd(spiderd={"store": "sqlite:" + os.path.join(spiderd.base, "own.db")}, **kw)


def upload(d, project, data, name):
    return d.call("addversion.json", data={"project": project, "version": "1"},
                  files={"egg": (name, data)})


def test_idle_sqlite_daemon_maps_no_lazy_library(spiderd, egg_bytes):
    d = sqlite_daemon(spiderd)
    for _ in range(100):
        d.api("daemonstatus.json")
    libs = mapped(d)
    assert any(x.startswith("libsqlite3.so") for x in libs), libs
    assert matching(libs, LAZY) == [], libs
    # An egg is told from a project archive by libzip: still no libarchive.
    assert upload(d, "eggproj", egg_bytes("testproj"), "p.egg")["status"] == "ok"
    assert matching(mapped(d), [r"libarchive\.so", r"libxml2\.so"]) == []
    # The first project archive opens it, and is checked with it.
    obj = upload(d, "mf", project_archive(), "p.tar.gz")
    assert obj["status"] == "ok" and obj["spiders"] == 1, obj
    assert matching(mapped(d), [r"libarchive\.so"]) != []
    assert matching(mapped(d), [r"libpq\.so"]) == []


@pytest.mark.skipif(not STORE_TMPL.startswith("postgres"),
                    reason="needs SPIDERD_TEST_STORE_URL=postgresql://...")
def test_postgresql_store_opens_libpq(spiderd):
    d = spiderd()
    assert d.api("daemonstatus.json")["status"] == "ok"
    assert matching(mapped(d), [r"libpq\.so"]) != []


# ---- with the libraries hidden ----

def library_path(soname):
    """The file the dynamic loader opens for soname (ld.so.cache)."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        name, _, path = line.strip().partition(" => ")
        if path and name.split()[0] == soname:
            return os.path.realpath(path)
    return None


@pytest.fixture
def hidden(tmp_path, monkeypatch):
    """hidden(*sonames): later daemons of the test run with those libraries
    replaced by an empty file, as on a machine without them."""
    if os.geteuid() != 0:
        pytest.skip("hiding a library needs root (a mount namespace)")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.decode().strip()}")

    real = conftest.BIN

    def hide(*sonames):
        paths = [library_path(s) for s in sonames]
        assert all(paths), f"not installed: {sonames} -> {paths}"
        inner = tmp_path / "hide.sh"
        mounts = "".join(f"mount --bind /dev/null {shlex.quote(p)}\n" for p in paths)
        inner.write_text(f'set -e\n{mounts}exec {shlex.quote(real)} "$@"\n')
        wrapper = tmp_path / "spiderd-without"
        wrapper.write_text("#!/bin/sh\nexec unshare -m --propagation private "
                           f'/bin/sh {shlex.quote(str(inner))} "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setattr(conftest, "BIN", str(wrapper))
    return hide


def test_sqlite_daemon_runs_without_libpq_and_libarchive(spiderd, egg_bytes, hidden):
    hidden("libpq.so.5", "libarchive.so.13")
    d = sqlite_daemon(spiderd)
    assert d.api("daemonstatus.json")["status"] == "ok"
    assert upload(d, "eggproj", egg_bytes("testproj"), "p.egg")["status"] == "ok"
    assert "eggproj" in d.api("listprojects.json")["projects"]
    obj = upload(d, "mf", project_archive(), "p.tar.gz")
    assert obj["status"] == "error", obj
    assert "need libarchive13: apt-get install libarchive13" in obj["message"], obj
    # The REST face says the same, as the server's fault.
    r = d.request("POST", "/api/v1/projects/mf/versions", params={"version": "1"},
                  data=project_archive(), headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 500, r.text
    e = r.json()["error"]
    assert e["code"] == "SPD_ECONFIG" and "apt-get install libarchive13" in e["message"], e
    assert "mf" not in d.api("listprojects.json")["projects"]


def test_postgresql_store_without_libpq_says_what_to_install(spiderd, hidden):
    hidden("libpq.so.5")
    # Nothing listens there: libpq would only be needed to find that out.
    d = spiderd(start=False, spiderd={"store": "postgresql://127.0.0.1:1/spiderd"})
    d.spawn()
    rc = d.proc.wait(conftest.timeout(20))
    d.proc = None
    assert rc != 0
    text = d.stderr_text()
    assert "PostgreSQL store needs libpq5: apt-get install libpq5" in text, text
