"""Hand-made wheels and eggs for the Python environment tests (no internet,
no build tools): a wheel is a zip with a .dist-info, an egg a zip with an
EGG-INFO, both written here with zipfile."""

import base64
import hashlib
import os
import zipfile


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(dest_dir, name, version, files, requires=()):
    """Writes dest_dir/<name>-<version>-py3-none-any.whl holding files
    ({path: text}) and returns its path."""
    dist = f"{name}-{version}.dist-info"
    meta = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    members = dict(files)
    members[f"{dist}/METADATA"] = "\n".join(meta) + "\n"
    members[f"{dist}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: spiderd-tests\n"
                                "Root-Is-Purelib: true\nTag: py3-none-any\n")
    members[f"{dist}/top_level.txt"] = name + "\n"
    record = [_record_line(p, t.encode()) for p, t in members.items()]
    record.append(f"{dist}/RECORD,,")
    members[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    path = os.path.join(dest_dir, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        for p, t in members.items():
            z.writestr(p, t)
    return path


def dep_wheel(dest_dir, name, version, requires=()):
    """A one-module package whose VERSION is its version."""
    return make_wheel(dest_dir, name, version,
                      {f"{name}/__init__.py": f"VERSION = {version!r}\n"}, requires)


SETTINGS = """BOT_NAME = "envproj"
SPIDER_MODULES = ["envproj.spiders"]
NEWSPIDER_MODULE = "envproj.spiders"
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
"""

# Reports what the crawl imports, from where, with which interpreter; sleeps
# first when asked (a crawl that is running while something else happens).
PROBE = """import json
import sys
import time

import scrapy

import {dep} as dep


class Probe(scrapy.Spider):
    name = "probe"

    def start_requests(self):
        time.sleep(float(getattr(self, "sleep", 0)))
        with open(self.out, "w") as f:
            json.dump({{"version": getattr(dep, "VERSION", None), "file": dep.__file__,
                        "prefix": sys.prefix, "executable": sys.executable}}, f)
        return []
"""


def project_files(dep="depmod"):
    return {
        "envproj/__init__.py": "",
        "envproj/settings.py": SETTINGS,
        "envproj/spiders/__init__.py": "",
        "envproj/spiders/probe.py": PROBE.format(dep=dep),
    }


def make_egg(path, requirements=None, extra=None, dep="depmod", scrapy_cfg=None):
    """An egg of the probe project, with requirements.txt at its root when
    given (extra: more members, e.g. vendored packages of an uber egg)."""
    members = project_files(dep)
    members["EGG-INFO/PKG-INFO"] = "Metadata-Version: 1.1\nName: envproj\nVersion: 1.0\n"
    members["EGG-INFO/entry_points.txt"] = "[scrapy]\nsettings = envproj.settings\n"
    members["EGG-INFO/top_level.txt"] = "envproj\n"
    if requirements is not None:
        members["requirements.txt"] = requirements
    if scrapy_cfg is not None:
        members["scrapy.cfg"] = scrapy_cfg
    members.update(extra or {})
    with zipfile.ZipFile(path, "w") as z:
        for p, t in members.items():
            z.writestr(p, t)
    return path


def project_wheel(dest_dir, requires=(), dep="depmod"):
    """The probe project as a wheel (uploaded instead of an egg)."""
    files = project_files(dep)
    files["envproj-1.0.dist-info/entry_points.txt"] = "[scrapy]\nsettings = envproj.settings\n"
    return make_wheel(dest_dir, "envproj", "1.0", files, requires)
