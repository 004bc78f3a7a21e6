"""Builds one Python environment of project versions (docs/environments.md).

`<interpreter> -m spiderd_runner.envbuild DIR REQUIREMENTS_FILE`

The daemon runs it with the interpreter the environment is for, its stdout
and stderr going to the build log. It makes DIR a virtual environment that
sees the system's packages (so Debian's Scrapy stays available unless the
requirements name another), installs the requirements with pip, and writes
DIR/spiderd-env.json last: a directory without that file is not an
environment (a build under way, or one a crash interrupted).

pip's package sources come from the daemon as PIP_INDEX_URL,
PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS and PIP_TRUSTED_HOST in the
environment, never on a command line a `ps` would show. On failure DIR is
removed and the exit status is not 0; the log's last lines say why.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import venv

READY = "spiderd-env.json"

# What the environment itself installed (not the system's packages it sees).
_LIST = r"""
import json, sys
from importlib import metadata
seen = {}
for d in metadata.distributions():
    where = str(getattr(d, "_path", ""))
    if where.startswith(sys.prefix + "/"):
        name = d.metadata["Name"]
        if name and name.lower() not in seen:
            seen[name.lower()] = {"name": name, "version": d.version}
print(json.dumps(sorted(seen.values(), key=lambda p: p["name"].lower())))
"""


def _say(text):
    print(f"spiderd: {text}", flush=True)


def _du(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            try:
                if not os.path.islink(p):
                    total += os.lstat(p).st_size
            except OSError:
                pass
    return total


def _shown_sources():
    # What pip will read, with any password in a URL masked: this goes to
    # a log people read.
    import re

    out = []
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST"):
        v = os.environ.get(var)
        if v:
            masked = re.sub(r"//([^/@:]*):[^/@]*@", r"//\1:****@", v)
            out.append(f"{var}={masked}")
    return " ".join(out) or "pip's defaults"


def build(path, req_file):
    t0 = time.monotonic()
    with open(req_file, encoding="utf-8") as f:
        requirements = f.read()
    if os.path.isdir(path):
        shutil.rmtree(path)
    _say(f"creating {path} with {sys.executable} (Python {sys.version.split()[0]})")
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(path)
    py = os.path.join(path, "bin", "python")
    with open(os.path.join(path, "requirements.txt"), "w", encoding="utf-8") as f:
        f.write(requirements)
    lines = [ln for ln in requirements.splitlines() if ln.strip()]
    if lines:
        _say(f"installing {len(lines)} requirement(s) from {_shown_sources()}")
        cmd = [py, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
               "--no-warn-script-location", "--progress-bar", "off",
               "-r", os.path.join(path, "requirements.txt")]
        rc = subprocess.call(cmd, stdin=subprocess.DEVNULL)
        if rc != 0:
            _say(f"pip failed (exit status {rc})")
            return rc
    out = subprocess.run([py, "-c", _LIST], check=True, stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL).stdout
    info = {
        "python": sys.executable,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "requirements": requirements,
        "packages": json.loads(out),
        "size": _du(path),
        "build_ms": int((time.monotonic() - t0) * 1000),
        "built_at": int(time.time() * 1000),
    }
    tmp = os.path.join(path, READY + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(info, f)
    os.rename(tmp, os.path.join(path, READY))
    _say(f"ready: {len(info['packages'])} package(s), {info['size']} bytes, "
         f"{info['build_ms']} ms")
    return 0


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: python -m spiderd_runner.envbuild DIR REQUIREMENTS_FILE\n")
        return 2
    path = argv[1]
    try:
        rc = build(path, argv[2])
    except Exception as e:  # the log says what, the daemon refuses the version
        _say(f"build failed: {type(e).__name__}: {e}")
        rc = 1
    if rc != 0:
        shutil.rmtree(path, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
