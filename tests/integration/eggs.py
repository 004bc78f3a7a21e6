"""Builds the eggs of the Scrapy test projects in projects/.

build_egg(name, dest_dir) builds projects/<name> with
`/usr/bin/python3 setup.py bdist_egg` in a temporary copy (the source tree
stays clean), once per process, and copies the egg to dest_dir/<name>.egg.

A project directory holding a file BASE is an overlay: the project named in
BASE is copied first and this directory's files on top of it (testproj_v2 is
testproj with version 2.0 and one more spider).
"""

import atexit
import os
import shutil
import subprocess
import tempfile
import threading

PYTHON = "/usr/bin/python3"
PROJECTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "projects")

_IGNORE = shutil.ignore_patterns(
    "build", "dist", "*.egg-info", "__pycache__", "*.pyc", "BASE"
)
_lock = threading.Lock()
_built = {}  # name -> egg path inside _cache_dir
_cache_dir = None


def _cache():
    global _cache_dir
    if _cache_dir is None:
        _cache_dir = tempfile.mkdtemp(prefix="spiderd-eggs-")
        atexit.register(shutil.rmtree, _cache_dir, True)
    return _cache_dir


def _assemble(name, into):
    src = os.path.join(PROJECTS_DIR, name)
    if not os.path.isdir(src):
        raise ValueError(f"no test project {name!r} in {PROJECTS_DIR}")
    base_file = os.path.join(src, "BASE")
    if os.path.exists(base_file):
        with open(base_file, encoding="utf-8") as f:
            _assemble(f.read().strip(), into)
    shutil.copytree(src, into, ignore=_IGNORE, dirs_exist_ok=True)


def _build(name):
    work = tempfile.mkdtemp(prefix=f"build-{name}-", dir=_cache())
    try:
        src = os.path.join(work, "src")
        dist = os.path.join(work, "dist")
        _assemble(name, src)
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        proc = subprocess.run(
            [PYTHON, "setup.py", "-q", "bdist_egg", "-d", dist],
            cwd=src,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"building the egg of {name} failed ({proc.returncode}):\n{proc.stdout}"
            )
        eggs = [f for f in os.listdir(dist) if f.endswith(".egg")]
        if len(eggs) != 1:
            raise RuntimeError(f"building {name} made {eggs!r}, not one egg")
        egg = os.path.join(_cache(), f"{name}.egg")
        shutil.move(os.path.join(dist, eggs[0]), egg)
        return egg
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_egg(name: str, dest_dir: str) -> str:
    """Returns the path of dest_dir/<name>.egg, the egg of projects/<name>."""
    with _lock:
        egg = _built.get(name)
        if egg is None:
            egg = _built[name] = _build(name)
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, f"{name}.egg")
    shutil.copyfile(egg, dest)
    return dest
