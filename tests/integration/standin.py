"""What every stand-in crawl interpreter (fakecrawl.py, faultcrawl.py,
limitcrawl.py) does first. The daemon runs it as `[spiderd] python`:

- `-m spiderd_runner.template`: a stand-in has no warm start template, so it
  exits at once and its crawls start cold;
- anything but `-m spiderd_runner crawl ...` (the spider listing at deploy
  and schedule time) goes to the real interpreter;
- a crawl dies with its node on a shared store (SPIDERD_DIE_WITH_NODE), as
  the runner's do.
"""

import ctypes
import os
import signal
import sys

REAL = "/usr/bin/python3"


def crawl_args():
    """The crawl's arguments (`-m spiderd_runner crawl SPIDER ...`); returns
    only for a crawl."""
    args = sys.argv[1:]
    if args[:2] == ["-m", "spiderd_runner.template"]:
        sys.exit(0)
    if args[:3] != ["-m", "spiderd_runner", "crawl"]:
        os.execv(REAL, [REAL] + args)
    node_pid = os.environ.get("SPIDERD_DIE_WITH_NODE")
    if node_pid:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if str(os.getppid()) != node_pid:
            os._exit(1)
    return args
