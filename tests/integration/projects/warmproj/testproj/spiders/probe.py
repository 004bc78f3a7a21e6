import json
import logging
import os
import resource
import signal
import sys
import warnings

import scrapy

SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGPIPE", "SIGCHLD", "SIGUSR1",
           "SIGUSR2", "SIGALRM", "SIGXCPU", "SIGXFSZ")
RLIMITS = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_CORE",
           "RLIMIT_STACK", "RLIMIT_DATA", "RLIMIT_FSIZE")


def _handler(h):
    if h in (signal.SIG_DFL, signal.SIG_IGN) or h is None:
        return str(h)
    return f"{getattr(h, '__module__', '?')}.{getattr(h, '__qualname__', type(h).__name__)}"


def _fd_target(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError as e:
        return f"<{e.strerror}>"


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _reactor_refs(reactor):
    """Does each place in Twisted that takes the reactor at import hold the
    crawl's reactor (None: that module is not imported)?"""
    out = {}
    helper = sys.modules.get("twisted.conch.insults.helper")
    if helper is not None:
        out["helper.reactor"] = helper.reactor is reactor
        out["helper.expect"] = helper.ExpectableBuffer.expect.__defaults__[-1] is reactor
    ftp = sys.modules.get("twisted.protocols.ftp")
    if ftp is not None:
        out["ftp.reactor"] = ftp.reactor is reactor
        out["ftp.FTP.listenFactory"] = ftp.FTP.listenFactory == reactor.listenTCP
        out["ftp.FTPClient.connectFactory"] = ftp.FTPClient.connectFactory == reactor.connectTCP
    return out


class ProbeSpider(scrapy.Spider):
    """Writes, as JSON to `out`, everything about the process it crawls in
    that a spider (or `ps`) can see: argv, the whole environment, its
    arguments and every setting, working directory, ids, umask, open file
    descriptors, signal handlers and masks, rlimits, sys.path, the reactor;
    and /proc/self's cmdline, comm and environ. Then stays `hold` seconds
    (default 0) with a request held in the downloader."""

    name = "probe"

    def __init__(self, out=None, hold=None, **kwargs):
        self.spider_kwargs = dict(kwargs)
        if out is not None:
            self.spider_kwargs["out"] = out
        if hold is not None:
            self.spider_kwargs["hold"] = hold
        super().__init__(**kwargs)
        self.out = out
        self.hold = float(hold or 0)

    def start_requests(self):
        yield scrapy.Request("data:,probe")

    def parse(self, response):
        from twisted.internet import reactor

        status = {}
        for line in _read("/proc/self/status").decode().splitlines():
            key, _, value = line.partition(":")
            if key in ("SigBlk", "SigIgn", "SigCgt", "NoNewPrivs", "Seccomp", "CapEff"):
                status[key] = value.strip()
        umask = os.umask(0)
        os.umask(umask)
        fds = {str(fd): _fd_target(fd) for fd in sorted(int(x) for x in os.listdir("/proc/self/fd"))}
        main = sys.modules.get("__main__")
        dump = {
            "argv": list(sys.argv),
            "executable": sys.executable,
            "env": dict(os.environ),
            "kwargs": self.spider_kwargs,
            "settings": self.settings.copy_to_dict(),
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "pgid": os.getpgid(0),
            "sid": os.getsid(0),
            "umask": umask,
            "fds": fds,
            "stdio_tty": [os.isatty(fd) for fd in (0, 1, 2)],
            "signals": {name: _handler(signal.getsignal(getattr(signal, name))) for name in SIGNALS},
            "sigmask": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
            "proc_status": status,
            "rlimits": {name: list(resource.getrlimit(getattr(resource, name))) for name in RLIMITS},
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "sys_path": list(sys.path),
            "flags": str(sys.flags),
            "reactor": f"{type(reactor).__module__}.{type(reactor).__name__}",
            # Twisted's modules that take the reactor at import, as the
            # crawl's telnet console and FTP handler import them.
            "reactor_refs": _reactor_refs(reactor),
            "main": [getattr(main, "__file__", None),
                     getattr(getattr(main, "__spec__", None), "name", None)],
            "root_log_handlers": [type(h).__name__ for h in logging.root.handlers],
            "root_log_level": logging.root.level,
            "warning_filters": [str(f) for f in warnings.filters],
            "spider_module": sys.modules[type(self).__module__].__file__,
            # Seen from outside (ps, /proc): what the kernel says this process is.
            "cmdline": _read("/proc/self/cmdline").decode(errors="replace").split("\0")[:-1],
            "comm": _read("/proc/self/comm").decode(errors="replace").strip(),
            "proc_environ": sorted(_read("/proc/self/environ").decode(errors="replace").split("\0")[:-1]),
            "orig_argv": list(getattr(sys, "orig_argv", [])),
            "hash": hash("spiderd warm start"),
        }
        dump = json.loads(json.dumps(dump, default=str))
        if self.out:
            tmp = self.out + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(dump, f)
            os.replace(tmp, self.out)
        yield {"probe": self.out, "pid": dump["pid"]}
        if self.hold > 0:
            yield scrapy.Request("data:,hold", callback=self.done, meta={"delay": self.hold})

    def done(self, response):
        return None
