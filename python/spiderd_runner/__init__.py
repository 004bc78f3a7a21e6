"""spiderd's crawl runner: Scrapyd's scrapyd/runner.py for a daemon in C.

`python3 -m spiderd_runner <scrapy command> [args...]`, e.g.
`crawl quick -s LOG_FILE=/x.log -a _job=J` or `list -s LOG_STDOUT=0`.

Environment (set by the daemon):
  SCRAPY_PROJECT          the project name (Scrapy's own project lookup uses it)
  SPIDERD_EGG             absolute path of the egg to activate; absent for a
                          project configured by settings module, which then
                          comes with SCRAPY_SETTINGS_MODULE
  SCRAPYD_EGG_VERSION     the version asked for, if any (informational here)
  SPIDERD_STATS_FILE      crawl only: where to write the crawl's stats (JSON,
                          see spiderd_runner.stats)
  SPIDERD_HEARTBEAT_FILE  crawl only: the file a reactor-driven heartbeat
                          touches (see spiderd_runner.heartbeat)
  SPIDERD_HEARTBEAT_INTERVAL  seconds between heartbeats (default 5)

Like Scrapyd's runner, the egg is activated in place (its zip goes on
sys.path), SCRAPY_SETTINGS_MODULE defaults to the egg's `scrapy`/`settings`
entry point, and scrapy.cmdline.execute() runs with sys.argv unchanged, so a
spider sees the same sys.argv as under Scrapyd.
"""

import os
import sys
import warnings

EXIT_EGG_ERROR = 1


class EggError(Exception):
    """The egg cannot be used; the message is for a person."""


def _activate_with_pkg_resources(egg_path):
    # Importing pkg_resources warns about its own deprecation on newer
    # setuptools; that noise would land in every job log.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pkg_resources

        dists = list(pkg_resources.find_distributions(egg_path, only=True))
        if not dists:
            # pkg_resources only looks into files named *.egg; a zip by any
            # other name still works from sys.path.
            return _activate_by_hand(egg_path)
        dist = dists[0]
        dist.activate()
        entry = dist.get_entry_info("scrapy", "settings")
    return entry.module_name if entry is not None else None


def _activate_by_hand(egg_path):
    # Where pkg_resources is gone (setuptools without it) or will not look
    # (a file not named *.egg): an egg is a zip whose
    # EGG-INFO/entry_points.txt is an INI file.
    import configparser
    import zipfile

    try:
        with zipfile.ZipFile(egg_path) as zf:
            try:
                text = zf.read("EGG-INFO/entry_points.txt").decode("utf-8")
            except KeyError:
                # A wheel uploaded instead of an egg: its entry points are
                # in <dist>.dist-info/, and a pure wheel imports from its zip.
                names = [n for n in zf.namelist()
                         if n.count("/") == 1 and n.endswith(".dist-info/entry_points.txt")]
                text = zf.read(names[0]).decode("utf-8") if names else ""
    except (OSError, zipfile.BadZipFile) as e:
        raise EggError(f"{egg_path}: unknown or corrupt egg ({e})") from None
    sys.path.insert(0, egg_path)
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str
    parser.read_string(text)
    if parser.has_option("scrapy", "settings"):
        return parser.get("scrapy", "settings").split(":")[0].strip()
    return None


def activate_egg(egg_path):
    """Puts the egg on sys.path and sets SCRAPY_SETTINGS_MODULE from its
    `scrapy`/`settings` entry point unless already set. Raises EggError."""
    if not os.path.isfile(egg_path):
        raise EggError(f"{egg_path}: no such egg file")
    try:
        module = _activate_with_pkg_resources(egg_path)
    except ImportError:
        module = _activate_by_hand(egg_path)
    if not module:
        raise EggError(
            f"{egg_path}: the egg has no 'scrapy' entry point named 'settings' "
            "(setup.py needs entry_points={'scrapy': ['settings = "
            "<project>.settings']})"
        )
    os.environ.setdefault("SCRAPY_SETTINGS_MODULE", module)
    return module


def _command_name(argv):
    for arg in argv[1:]:
        if not arg.startswith("-"):
            return arg
    return None


def _die_with_node():
    """On a shared store the daemon asks its crawls to die with it (a node
    declared dead has its jobs run elsewhere): the kernel KILLs this process
    when its parent, the daemon, exits."""
    node_pid = os.environ.get("SPIDERD_DIE_WITH_NODE")
    if not node_pid or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if str(os.getppid()) != node_pid:  # the daemon died before prctl
        os._exit(1)


def main():
    _die_with_node()
    stats_path = os.environ.get("SPIDERD_STATS_FILE")
    writer = None
    if stats_path and _command_name(sys.argv) == "crawl":
        from spiderd_runner import stats

        # Removes a stale file first, so whatever the daemon finds afterwards
        # is this run's.
        writer = stats.install(stats_path)
    try:
        return _run()
    finally:
        if writer is not None:
            writer.write_final()


def _run():
    egg_path = os.environ.get("SPIDERD_EGG")
    if egg_path:
        try:
            activate_egg(egg_path)
        except EggError as e:
            sys.stderr.write(f"spiderd_runner: {e}\n")
            return EXIT_EGG_ERROR

    from scrapy.cmdline import execute
    from scrapy.utils.project import get_project_settings

    settings = get_project_settings()
    if "EDITOR" in os.environ:  # what execute() does when given no settings
        settings["EDITOR"] = os.environ["EDITOR"]
    from spiderd_runner import stats

    if stats.installed() is not None:
        # EXTENSIONS_BASE, not EXTENSIONS: a project's or a -s EXTENSIONS
        # value replaces EXTENSIONS whole and would drop ours.
        settings["EXTENSIONS_BASE"][stats.EXTENSION_PATH] = stats.EXTENSION_ORDER
    state_dir = os.environ.get("SPIDERD_STATE_DIR")
    if state_dir and _command_name(sys.argv) == "crawl":
        # The crawl keeps its scheduler queue and seen requests there, so a
        # pause (SIGTERM) can be resumed; at the default priority, so the
        # project's own JOBDIR or a -s JOBDIR (Scrapyd's jobs_dir) wins.
        settings.set("JOBDIR", state_dir, priority="default")
    if os.environ.get("SPIDERD_HEARTBEAT_FILE") and _command_name(sys.argv) == "crawl":
        from spiderd_runner import heartbeat

        settings["EXTENSIONS_BASE"][heartbeat.EXTENSION_PATH] = heartbeat.EXTENSION_ORDER
    # sys.argv itself, as Scrapyd's runner does: Scrapy edits it in place and
    # spiders that read sys.argv see the same list as under Scrapyd.
    execute(sys.argv, settings)
    return 0
