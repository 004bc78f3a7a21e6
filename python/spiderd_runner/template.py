"""A warm start template: one per (interpreter, project, version) in use.

`python3 -m spiderd_runner.template`, started by the daemon with the
environment a crawl of that version gets (without the job's own variables)
and fd 3 one end of a SOCK_SEQPACKET socket pair. It imports Python, Twisted,
Scrapy, the egg, the project's settings, its spider modules and the
components its settings name, so that a crawl forked from it starts in
milliseconds instead of importing all of that again. It installs no reactor,
starts no thread, holds no socket or log file: nothing that must not cross a
fork (a file a module keeps open is inherited by each crawl). An import that
would install a reactor (Scrapy's telnet console, a spider module with
`from twisted.internet import reactor`) is undone, and that module is
imported by the crawl itself, as on a cold start. Two modules of Twisted's
own that every Scrapy crawl imports (through its telnet console and FTP
handler) name the reactor at import but only use it when called: they are
preloaded with a stand-in, which each crawl replaces by its reactor the
moment it installs one (_LateReactor). What the imports print is replayed at
the top of each crawl's log.

Protocol, one JSON document per datagram:
  template -> daemon, once:  {"ready": true, "ms": N, "modules": N,
                              "skipped": [what was undone, ...]}
                          or {"ready": false, "why": "..."} (then it exits)
  daemon -> template:        {"argv": [...], "env": {...}, "spider": "...",
                              "rlimits": [[res, soft, hard], ...]}
                             with the job's log fd attached (SCM_RIGHTS)
  template -> daemon:        {"pid": N} | {"cold": "why"} | {"error": "why"}

The crawl is created with clone(CLONE_PARENT): it is the daemon's child, not
the template's, so the daemon reaps it and sees its exit status as for any
crawl it spawned, and no crawl depends on the template staying alive. The
child then leads a session of its own, takes the log as stdout and stderr,
the job's environment and rlimits, sets sys.argv,
sys.orig_argv and __main__ to the cold start's, and runs
spiderd_runner.main() exactly as a cold start does;
its exit goes through the interpreter's exit (_exit_as_python_would).

The template exits when the daemon closes its end of the socket, and is
KILLed by the kernel if the daemon dies.
"""

import json
import os
import platform
import pkgutil
import signal
import socket
import sys
import time
import types

TEMPLATE_FD = 3
MAX_REQUEST = 4 << 20
CLONE_PARENT = 0x00008000
SYS_CLONE = {"x86_64": 56, "aarch64": 220}
REACTOR = "twisted.internet.reactor"

# Settings whose values are dicts of component paths, and those naming one.
COMPONENT_DICTS = (
    "DOWNLOADER_MIDDLEWARES_BASE", "DOWNLOADER_MIDDLEWARES",
    "SPIDER_MIDDLEWARES_BASE", "SPIDER_MIDDLEWARES",
    "EXTENSIONS_BASE", "EXTENSIONS",
    "ITEM_PIPELINES_BASE", "ITEM_PIPELINES",
    "DOWNLOAD_HANDLERS_BASE", "DOWNLOAD_HANDLERS",
    "FEED_EXPORTERS_BASE", "FEED_EXPORTERS",
    "FEED_STORAGES_BASE", "FEED_STORAGES",
)
COMPONENTS = (
    "SCHEDULER", "DUPEFILTER_CLASS", "STATS_CLASS", "LOG_FORMATTER",
    "REQUEST_FINGERPRINTER_CLASS", "SCHEDULER_PRIORITY_QUEUE",
    "SCHEDULER_DISK_QUEUE", "SCHEDULER_MEMORY_QUEUE", "DOWNLOADER",
    "SPIDER_LOADER_CLASS", "DOWNLOADER_CLIENTCONTEXTFACTORY",
    "DOWNLOADER_HTTPCLIENTFACTORY", "DNS_RESOLVER",
)
MODULES = (
    "scrapy.cmdline", "scrapy.crawler", "scrapy.commands.crawl",
    "scrapy.core.engine", "scrapy.core.scraper", "scrapy.utils.log",
    "scrapy.utils.reactor", "scrapy.pipelines", "spiderd_runner.stats",
    "spiderd_runner.heartbeat", "resource",
)


class Refused(Exception):
    """This version cannot be served warm; the message is for a person."""


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    if not sys.platform.startswith("linux"):
        raise Refused("warm starts need Linux")
    parent = os.getppid()
    PR_SET_PDEATHSIG = 1
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


# Twisted modules that take the reactor at import (`from twisted.internet
# import reactor`) but use it only when called: Conch's insults helper (under
# Scrapy's telnet console) and the FTP protocol (under its FTP handler).
LATE_REACTOR_MODULES = ("twisted.conch.insults.helper", "twisted.protocols.ftp")
LATE_PLACES = []  # (kind, owner, key, value): where the stand-in or a _LateAttr is held
LATE_STUB = []  # the stand-in, once those modules hold it

SKIPPED = []  # what was not preloaded because it installs a reactor
IMPORT_OUTPUT = b""  # what the imports printed: each crawl's log begins with it
KEEP_FDS = ()  # descriptors the imports opened and hold: each crawl inherits them
SPIDERS = {}  # name -> class, of the spider modules preloaded


def _refers_to(value, bad_names, bad_ids):
    if id(value) in bad_ids:
        return True
    try:
        if isinstance(value, types.ModuleType):
            return value.__name__ in bad_names
        return getattr(value, "__module__", None) in bad_names
    except Exception:  # an object whose attributes cannot be read
        return False


def _forget(names):
    """Un-imports the modules names (so a crawl imports them itself)."""
    for name in names:
        sys.modules.pop(name, None)
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and hasattr(sys.modules[parent], child):
            try:
                delattr(sys.modules[parent], child)
            except AttributeError:
                pass


def _dispose(reactor):
    """Closes a reactor that never ran: its waker, its poller (epoll, poll),
    an asyncio reactor's event loop."""
    for close in (lambda: reactor.removeReader(reactor.waker),
                  lambda: reactor.waker.connectionLost(None),
                  lambda: reactor._poller.close(),
                  lambda: reactor._asyncioEventloop.close()):
        try:
            close()
        except Exception:  # that reactor has no such part
            pass


def _guarded(what, fn):
    """Runs fn (which imports). If that installed a Twisted reactor, the
    reactor goes again, with every module it imported that holds the
    reactor, or a module, class or function of one that goes (so the crawl
    imports those itself, and its reactor is the one they see); the rest
    stays preloaded. True if nothing had to go."""
    before = set(sys.modules)
    fds_before = _open_fds()
    try:
        fn()
    except Exception:  # the crawl will report it, as on a cold start
        pass
    if REACTOR not in sys.modules:
        return True
    new = [n for n in sys.modules if n not in before]
    reactor = sys.modules[REACTOR]
    bad_names = {REACTOR}
    bad_ids = {id(reactor)}
    changed = True
    while changed:
        changed = False
        for name in new:
            module = sys.modules.get(name)
            if name in bad_names or module is None:
                continue
            if any(_refers_to(v, bad_names, bad_ids) for v in list(vars(module).values())):
                bad_names.add(name)
                bad_ids.add(id(module))
                changed = True
    _forget(bad_names)
    # The reactor's descriptors are closed by their own objects: one closed
    # here by number while its object lived on would be closed again when
    # that object goes, whatever file has the number by then. What the
    # undone modules held goes with them (a file they opened is closed by
    # its own object); what nothing owns any more is closed here.
    _dispose(reactor)
    del reactor
    import gc

    gc.collect()
    for fd in _open_fds() - fds_before:
        os.close(fd)
    SKIPPED.append(what)
    return False


class _LateReactor:
    """The reactor, for a module of LATE_REACTOR_MODULES imported by the
    template, where no reactor may exist. An attribute read once a reactor
    is installed is that reactor's; one read before (at import: FTP's
    `listenFactory = reactor.listenTCP`) is a _LateAttr. A crawl's
    installReactor then puts its reactor, and its attributes, wherever the
    stand-in and its _LateAttrs are held (_bind_late_reactor), so that a warm
    crawl's modules hold what a cold crawl's do."""

    made = []  # every _LateAttr, to find where each is held

    def __getattr__(self, name):
        real = sys.modules.get(REACTOR)
        if real is not None and real is not self:
            return getattr(real, name)
        if name.startswith("__"):
            raise AttributeError(name)
        attr = _LateAttr(name)
        _LateReactor.made.append(attr)
        return attr


class _LateAttr:
    """reactor.NAME read before there was a reactor: calls the installed
    reactor's NAME (no __get__: as a class attribute it stays unbound, as a
    bound method of the reactor would)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        return getattr(sys.modules[REACTOR], self.name)(*args, **kwargs)


def _is_late(value, stub):
    return value is stub or isinstance(value, _LateAttr)


def _late_defaults(f, stub, places, owners):
    f = getattr(f, "__func__", f)  # staticmethod, classmethod
    if isinstance(f, types.FunctionType):
        if any(_is_late(v, stub) for v in f.__defaults__ or ()):
            places.append(("defaults", f, None, None))
            owners.add(id(f.__defaults__))
        if any(_is_late(v, stub) for v in (f.__kwdefaults__ or {}).values()):
            places.append(("kwdefaults", f, None, None))
            owners.add(id(f.__kwdefaults__))


def _late_places(stub, names):
    """Where the modules names hold the stand-in or a _LateAttr: module
    globals, class attributes, functions' defaults. None if anything else
    holds one (then it cannot be replaced for sure)."""
    import gc

    places, owners = [], set()
    for name in names:
        module = sys.modules.get(name)
        if module is None:
            continue
        for key, value in list(vars(module).items()):
            if _is_late(value, stub):
                places.append(("attr", module, key, value))
                owners.add(id(vars(module)))
            elif isinstance(value, type) and value.__module__ == name:
                for k, v in list(vars(value).items()):
                    if _is_late(v, stub):
                        places.append(("attr", value, k, v))
                        owners.update(id(d) for d in gc.get_referents(value.__dict__))
                    else:
                        _late_defaults(v, stub, places, owners)
            elif getattr(value, "__module__", None) == name:
                _late_defaults(value, stub, places, owners)
    ours = {id(_LateReactor.made), id(places)}
    for holder in gc.get_referrers(stub, *_LateReactor.made):
        if id(holder) not in owners and id(holder) not in ours:
            return None
    return places


def _preload_late_reactor_modules():
    """Imports LATE_REACTOR_MODULES with the stand-in as the reactor; undone
    (they are then imported by each crawl) if another module took it."""
    import importlib

    import twisted.internet

    stub = _LateReactor()
    before = set(sys.modules)
    sys.modules[REACTOR] = stub
    twisted.internet.reactor = stub
    try:
        for name in LATE_REACTOR_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # the crawl will meet it as a cold one would
                pass
    finally:
        if sys.modules.get(REACTOR) is stub:
            del sys.modules[REACTOR]
        if getattr(twisted.internet, "reactor", None) is stub:
            del twisted.internet.reactor
    new = [n for n in sys.modules if n not in before]
    places = _late_places(stub, new)
    if places is None:
        _forget(new)
        _LateReactor.made.clear()
        SKIPPED.append("Twisted's modules that take the reactor at import")
        return
    LATE_PLACES[:] = places
    LATE_STUB[:] = [stub]


def _bind_late_reactor(reactor):
    """Gives the crawl's reactor to every place that holds the stand-in."""
    stub = LATE_STUB[0]

    def real(v):
        if v is stub:
            return reactor
        return getattr(reactor, v.name) if isinstance(v, _LateAttr) else v

    for kind, owner, key, value in LATE_PLACES:
        if kind == "attr":
            setattr(owner, key, real(value))
        elif kind == "defaults":
            owner.__defaults__ = tuple(real(v) for v in owner.__defaults__)
        elif kind == "kwdefaults":
            owner.__kwdefaults__ = {k: real(v) for k, v in owner.__kwdefaults__.items()}


def _arm_late_reactor():
    """In a crawl: the reactor it installs goes where the stand-in is."""
    if not LATE_PLACES:
        return
    from twisted.internet import main

    original = main.installReactor

    def installReactor(reactor):  # noqa: N802 - Twisted's name
        main.installReactor = original
        original(reactor)
        _bind_late_reactor(reactor)

    main.installReactor = installReactor


def _preload():
    """Imports what every crawl of this version imports. Raises Refused."""
    import importlib

    from spiderd_runner import EggError, activate_egg

    egg = os.environ.get("SPIDERD_EGG")
    if egg:
        try:
            activate_egg(egg)
        except EggError as e:
            raise Refused(str(e)) from None
    _preload_late_reactor_modules()
    for name in MODULES:
        _guarded(name, lambda n=name: importlib.import_module(n))
    if REACTOR in sys.modules:
        raise Refused("importing Scrapy installed a Twisted reactor")
    from scrapy.utils.misc import load_object
    from scrapy.utils.project import get_project_settings

    settings = get_project_settings()
    if not settings.getbool("SPIDERD_WARM_START", True):
        raise Refused("the project's settings say SPIDERD_WARM_START = False")
    for key in COMPONENT_DICTS:
        # Paths are the keys (middlewares, ...) or the values (handlers, ...).
        for pair in settings.getdict(key).items():
            for path in pair:
                if isinstance(path, str) and "." in path:
                    _guarded(path, lambda p=path: load_object(p))
    for key in COMPONENTS:
        path = settings.get(key)
        if isinstance(path, str) and path:
            _guarded(path, lambda p=path: load_object(p))
    # Scrapy's commands, as `scrapy crawl` walks them to find its own.
    from scrapy.cmdline import _get_commands_dict

    _guarded("Scrapy's commands", lambda: _get_commands_dict(settings, inproject=True))
    # The spider modules, one by one as `scrapy crawl` walks them, so that
    # one which installs a reactor leaves the others preloaded.
    for name in settings.getlist("SPIDER_MODULES"):
        _guarded(name, lambda n=name: importlib.import_module(n))
        pkg = sys.modules.get(name)
        for info in pkgutil.walk_packages(getattr(pkg, "__path__", None) or [], name + "."):
            _guarded(info.name, lambda n=info.name: importlib.import_module(n))
    if REACTOR in sys.modules:
        raise Refused("a reactor stays installed after the imports were undone")
    from scrapy.utils.spider import iter_spider_classes

    prefixes = tuple(settings.getlist("SPIDER_MODULES"))
    for name, module in list(sys.modules.items()):
        if module is not None and name.startswith(prefixes):
            for cls in iter_spider_classes(module):
                SPIDERS.setdefault(cls.name, cls)


def _build_caches():
    """Builds what every crawl would build on first use with the same result
    in each. Scrapy logs the platform at each crawl's start, and Python's
    platform module finds the processor by running `uname -p` in a
    subprocess: a fork of the whole crawl, after which every page the crawl
    writes faults once more. Asked here, the answer is cached for all."""
    import platform

    platform.platform()
    platform.uname().processor  # noqa: B018 - cached on first access


def _capture_output(fn):
    """Runs fn with stdout and stderr going to memory, kept in
    IMPORT_OUTPUT: what a project prints or warns while it is imported
    belongs in each crawl's log, as on a cold start."""
    global IMPORT_OUTPUT
    sys.stdout.flush()
    sys.stderr.flush()
    mem = os.memfd_create("spiderd-import-output")
    saved = [os.dup(1), os.dup(2)]
    os.dup2(mem, 1)
    os.dup2(mem, 2)
    try:
        fn()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        size = os.lseek(mem, 0, os.SEEK_END)
        IMPORT_OUTPUT = os.pread(mem, min(size, 1 << 20), 0)
        os.close(mem)


def _open_fds():
    """The descriptors open now (the one listing /proc/self/fd is closed
    again when it is checked, so it is left out)."""
    fds = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(name))
            fds.add(int(name))
        except OSError:
            pass
    return fds


def _keep_fds():
    """What the imports left open is the crawls' too (a module that keeps a
    file open reads it in every crawl, as on a cold start); a socket would
    be one connection shared by every crawl, so it refuses."""
    import stat

    global KEEP_FDS
    keep = sorted(fd for fd in _open_fds() if fd > 2 and fd != TEMPLATE_FD)
    for fd in keep:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise Refused(f"a module opened a socket at import (fd {fd})")
    KEEP_FDS = tuple(keep)


def _close_fds_but(keep):
    top = os.sysconf("SC_OPEN_MAX")
    top = top if top > 0 else 65536
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, top)


def _check_forkable():
    import logging
    import threading

    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
        raise Refused("a module started a thread at import")
    for h in logging.getLogger().handlers:
        if isinstance(h, logging.FileHandler):
            raise Refused("a module opened a log file at import")


def _spider_refuses(name):
    """Does the spider's class (when its module was preloaded) set
    SPIDERD_WARM_START to a false value in its custom_settings?"""
    cls = SPIDERS.get(name)
    value = (getattr(cls, "custom_settings", None) or {}).get("SPIDERD_WARM_START", True)
    if str(value).lower() in ("0", "false", "no", "off"):
        return f"spider '{name}' sets SPIDERD_WARM_START = False"
    return None


def _clone():
    """fork(), but the child's parent is the daemon (CLONE_PARENT)."""
    import ctypes

    nr = SYS_CLONE.get(platform.machine())
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    api = ctypes.pythonapi
    sys.stdout.flush()
    sys.stderr.flush()
    api.PyOS_BeforeFork()
    pid = libc.syscall(nr, ctypes.c_ulong(CLONE_PARENT | signal.SIGCHLD), 0, 0, 0, 0)
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    err = ctypes.get_errno()
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, os.strerror(err))
    return pid


def _clone_as(argv, cmdline):
    """_clone(), the child showing argv as its /proc/PID/cmdline from its
    first instant (the template's own is back once it has forked)."""
    if cmdline is None:
        return _clone()
    cmdline.set(argv)
    pid = -1
    try:
        pid = _clone()
    finally:
        if pid != 0:
            cmdline.restore()
    return pid


def _crawl_argv(req):
    """The crawl's cold start's argv."""
    return [sys.orig_argv[0], "-m", "spiderd_runner"] + list(req["argv"])


def _become_crawl(req, fds):
    """In the child: the cold start's process state, then its code."""
    os.setsid()
    log_fd = fds[0] if fds else 2
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    _close_fds_but(KEEP_FDS)
    if IMPORT_OUTPUT:  # what a cold crawl's imports would have printed into its log
        os.write(1, IMPORT_OUTPUT)
    env = req["env"]
    for key in [k for k in os.environ if k not in env]:
        del os.environ[key]
    for key, value in env.items():  # mostly the template's own already
        if os.environ.get(key) != value:
            os.environ[key] = value
    _arm_late_reactor()
    import resource

    for res, soft, hard in req.get("rlimits") or ():
        resource.setrlimit(res, (soft, hard))
    import spiderd_runner

    main_py = os.path.join(os.path.dirname(os.path.abspath(spiderd_runner.__file__)), "__main__.py")
    sys.argv[:] = [main_py] + list(req["argv"])
    sys.orig_argv[:] = sys.orig_argv[:1] + ["-m", "spiderd_runner"] + list(req["argv"])
    _main_module(main_py)
    return spiderd_runner.main()


def _main_module(main_py):
    """sys.modules['__main__'] as `python3 -m spiderd_runner` makes it."""
    import builtins
    import importlib.util

    import spiderd_runner

    spec = importlib.util.spec_from_file_location("spiderd_runner.__main__", main_py)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=main_py, __spec__=spec, __loader__=spec.loader,
                           __package__="spiderd_runner", __builtins__=builtins,
                           __cached__=spec.cached, sys=sys, main=spiderd_runner.main)
    sys.modules["__main__"] = module


class Cmdline:
    """The memory the kernel shows as /proc/PID/cmdline (what ps prints):
    the template's own argv strings, which the daemon pads with a long last
    argument so that a crawl's argv fits in them. The template writes a
    crawl's cold start argv there (NUL-separated, the rest NULs) just before
    it forks, and its own again just after: the crawl's /proc/PID/cmdline
    is its own from its first instant, before its pid is even known."""

    def __init__(self):
        self.own = None
        with open("/proc/self/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
        self.start, self.end = int(fields[45]), int(fields[46])  # arg_start, arg_end

    def set(self, args):
        import ctypes

        size = self.end - self.start
        if size <= 1:
            return
        data = b"\0".join(a.encode("utf-8", "surrogateescape") for a in args)[: size - 1]
        ctypes.memmove(self.start, data + b"\0" * (size - len(data)), size)

    def restore(self):
        if self.own is not None:
            self.set(self.own)


def _exit_as_python_would(run):
    """Runs the crawl and ends the process as the interpreter's exit does:
    the exit code of a SystemExit (its message on stderr), a traceback and
    1 for an exception, death by SIGINT for a KeyboardInterrupt; threads
    joined, atexit functions run, files flushed. What it skips is tearing
    down the modules the crawl shares with its template (about half a cold
    crawl's exit, and most of the memory it would copy)."""
    import gc
    import io
    import threading

    interrupted = False
    try:
        code = run()
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code, interrupted = 1, True
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    try:
        gc.collect()  # what a cold exit's collection would log (a Deferred's lost error)
        threading._shutdown()
        import atexit

        atexit._run_exitfuncs()
    finally:
        is_file = {}  # by type: io.IOBase is an ABC, slow to ask object by object
        for obj in gc.get_objects():  # the crawl's own (the template's are frozen)
            kind = is_file.get(type(obj))
            if kind is None:
                kind = is_file[type(obj)] = isinstance(obj, io.IOBase)
            if kind:
                try:
                    if not obj.closed:
                        obj.flush()
                except Exception:
                    pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        if interrupted:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code & 0xFF)


def _send(sock, doc):
    sock.send(json.dumps(doc).encode())


def serve(sock, cmdline):
    """Answers requests until the daemon hangs up. A crawl forked here
    never returns."""
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 4)
        except InterruptedError:
            continue
        if not msg:
            return None
        try:
            req = json.loads(msg)
            why = _spider_refuses(req.get("spider"))
            if why:
                _send(sock, {"cold": why})
                continue
            pid = _clone_as(_crawl_argv(req), cmdline)
        except Exception as e:
            for fd in fds:
                os.close(fd)
            _send(sock, {"error": f"{type(e).__name__}: {e}"})
            continue
        if pid == 0:
            sock.close()
            _exit_as_python_would(lambda: _become_crawl(req, fds))
        for fd in fds:
            os.close(fd)
        _send(sock, {"pid": pid})


def main():
    t0 = time.monotonic()
    sock = socket.socket(fileno=TEMPLATE_FD)
    try:
        _die_with_parent()
        if platform.machine() not in SYS_CLONE:
            raise Refused(f"warm starts are not built for {platform.machine()}")
        _capture_output(_preload)
        _build_caches()
        _check_forkable()
        _keep_fds()
        try:
            cmdline = Cmdline()
            project = os.environ.get("SCRAPY_PROJECT", "")
            version = os.environ.get("SCRAPYD_EGG_VERSION", "")
            cmdline.own = [sys.orig_argv[0], "-m", "spiderd_runner.template",
                           project] + ([version] if version else [])
            cmdline.restore()
        except (OSError, ValueError, IndexError):
            cmdline = None
    except Refused as e:
        _send(sock, {"ready": False, "why": str(e)})
        return 0
    except BaseException as e:  # noqa: BLE001 - anything a project's import raises
        _send(sock, {"ready": False, "why": f"{type(e).__name__}: {e}"})
        return 0
    import gc

    gc.collect()
    gc.freeze()  # what the template holds stays shared with the crawls
    _send(sock, {"ready": True, "ms": int((time.monotonic() - t0) * 1000),
                 "modules": len(sys.modules), "skipped": SKIPPED})
    serve(sock, cmdline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
