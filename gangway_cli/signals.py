"""Stopping a command from outside: Ctrl-C (SIGINT), and SIGTERM, which CI sends to a step it cancels
and Kubernetes to a pod it stops.

Both raise in the main thread wherever the command is (in a request, in a sleep between polls), so
every command ends them alike: one line on standard error, no traceback, and the code a shell gives a
process that signal ended (130, 143). `gangway checkpoint` turns them into its warning instead.
"""

from __future__ import annotations

import contextlib
import signal

from gangway_cli import exits


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException, as KeyboardInterrupt is, so that no handler of errors takes it for one."""


STOPS = (KeyboardInterrupt, Terminated)


def code_for(stop: BaseException) -> int:
    """The exit code for a command that `stop` (one of STOPS) ended."""
    return exits.TERMINATED if isinstance(stop, Terminated) else exits.INTERRUPTED


def word_for(stop: BaseException) -> str:
    return "terminated" if isinstance(stop, Terminated) else "interrupted"


@contextlib.contextmanager
def sigterm_raises():
    """Inside, SIGTERM raises Terminated in the main thread; the handler before comes back after, since
    the tests run commands inside pytest's own process."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum, frame):
    # Only the first SIGTERM raises: another one while the command writes its last line would
    # interrupt that line and end in a traceback.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated
