"""One deadline for a whole exchange with a receiver, and the settings that size it.

A webhook post (WEBHOOK_DEADLINE) and an e-mail's SMTP session (EMAIL_DEADLINE) each keep to one deadline in
all: looking up the receiver's address, connecting to each address in turn, the TLS handshake, every send and
every read. A timeout per read alone would let a receiver trickling its answer a byte at a time hold a worker
until Celery's soft time limit, and getaddrinfo takes no timeout at all: a resolver that never answers would
do the same. The webhook's connection (`outbound.py`) and the mail connection (`mail.py`) use these pieces.
"""

from __future__ import annotations

import io
import math
import queue
import socket
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Seconds a webhook post may take in all, unless the WEBHOOK_DEADLINE setting says otherwise (`webhook_deadline`):
# a receiver slow to answer, or trickling its answer, holds a notifier no longer than this. The settings read
# both from environment variables of the same names, with these defaults (`portal/settings.py`).
WEBHOOK_DEADLINE_DEFAULT = 5
# Seconds an e-mail's SMTP session may take in all, unless the EMAIL_DEADLINE setting says otherwise
# (`email_deadline`): longer than a webhook's, as many mail servers scan a message before they confirm it.
EMAIL_DEADLINE_DEFAULT = 30


class DeadlinePassed(TimeoutError):
    """The exchange used up its deadline."""


class NotResolved(DeadlinePassed):
    """Looking up the receiver's address (`host`) did not end within what was left of the deadline."""

    def __init__(self, host: str, seconds: float):
        self.host = host
        super().__init__(f"looking up {host} took longer than {seconds:g} s")


class Deadline:
    """The time one exchange with a receiver may take in all, from when it is made."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._ends = time.monotonic() + seconds

    def left(self) -> float:
        """The seconds left; raises DeadlinePassed once there are none."""
        left = self._ends - time.monotonic()
        if left <= 0:
            raise DeadlinePassed(f"timed out: {self.seconds:g} s passed")
        return left

    def timeout(self, most: float | None = None) -> float:
        """The timeout for one wait (a connect, a send, a read): what is left, or `most` seconds when that is
        sooner (a timeout per read, such as EMAIL_TIMEOUT); raises DeadlinePassed once nothing is left."""
        left = self.left()
        return left if most is None else min(left, most)

    def passed(self) -> bool:
        """Whether the deadline has passed: a wait it bounded that timed out ended at it or after."""
        return time.monotonic() >= self._ends


def addresses(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to (raises OSError when it does not)."""
    return [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def resolve(lookup: Callable[[], list[str]], host: str, deadline: Deadline) -> list[str]:
    """What `lookup` returns (the addresses of `host`), waited for no longer than what is left of `deadline`;
    raises NotResolved past it, and what the lookup raises (OSError when the name does not resolve).

    getaddrinfo takes no timeout, so the lookup runs in a thread of its own; one the deadline gives up on is
    left behind, a daemon, and ends when the resolver answers or gives up."""
    left = deadline.left()
    answers: queue.SimpleQueue[tuple[list[str] | None, Exception | None]] = queue.SimpleQueue()

    def look_up() -> None:
        try:
            answers.put((lookup(), None))
        except Exception as error:  # noqa: BLE001 - handed to the caller, which raises it
            answers.put((None, error))

    threading.Thread(target=look_up, name=f"resolve {host}", daemon=True).start()
    try:
        found, error = answers.get(timeout=left)
    except queue.Empty:
        raise NotResolved(host, deadline.seconds) from None
    if error is not None:
        raise error
    return found


def connect(found: list[str], port: int, deadline: Deadline, source_address=None, *,
            most: float | None = None) -> socket.socket:  # fmt: skip
    """A socket connected to the first of the addresses `found` that answers, the tries together within what
    is left of `deadline` (each at most `most` seconds, when given): a host with several unreachable addresses
    holds the worker no longer than one deadline. Its timeout is then what is left, so that a TLS handshake
    waits no longer. Raises the last try's error, or DeadlinePassed once the tries before used it up."""
    error: OSError = OSError("no address to connect to")
    for ip in found:
        timeout = deadline.timeout(most)
        try:
            sock = socket.create_connection((ip, port), timeout, source_address)
        except OSError as exc:
            error = exc
            continue
        try:
            sock.settimeout(deadline.timeout(most))
        except DeadlinePassed:
            sock.close()
            raise
        return sock
    raise error


class Reader(io.RawIOBase):
    """A connected socket's bytes, each read waiting at most what is left of the deadline (and at most `most`
    seconds, when given); read through io.BufferedReader, as a socket's makefile("rb") is."""

    def __init__(self, sock, deadline: Deadline, most: float | None = None):
        super().__init__()
        self._sock, self._deadline, self._most = sock, deadline, most
        self._raw = sock.makefile("rb", buffering=0)  # keeps the socket open until the reader is closed

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:
        self._sock.settimeout(self._deadline.timeout(self._most))
        return self._raw.readinto(buffer)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


def webhook_deadline() -> float:
    """WEBHOOK_DEADLINE: the seconds one webhook post may take in all (looking up its host, connecting, posting,
    its answer's status and headers), WEBHOOK_DEADLINE_DEFAULT unless set. A bad value stops every process at
    startup (`checks.webhook_deadline_is_valid`), and is refused here too."""
    return _deadline_setting("WEBHOOK_DEADLINE", WEBHOOK_DEADLINE_DEFAULT)


def email_deadline() -> float:
    """EMAIL_DEADLINE: the seconds one e-mail's SMTP session may take in all (looking up the mail server,
    connecting, STARTTLS, the commands, the message and its confirmation), EMAIL_DEADLINE_DEFAULT unless set.
    A bad value stops every process at startup (`checks.email_deadline_is_valid`), and is refused here too."""
    return _deadline_setting("EMAIL_DEADLINE", EMAIL_DEADLINE_DEFAULT)


def _deadline_setting(name: str, default: float) -> float:
    """The setting `name`, in seconds: above 0 and at most half the worker's soft time limit, so that a
    receiver that trickles its answer is given up on long before the limit stops the task."""
    deadline = getattr(settings, name, default)
    soft = getattr(settings, "CELERY_TASK_SOFT_TIME_LIMIT", None)
    most = soft / 2 if soft else math.inf
    if isinstance(deadline, bool) or not isinstance(deadline, int | float) or not 0 < deadline <= most:
        within = f" and at most half of CELERY_TASK_SOFT_TIME_LIMIT ({soft} s)" if soft else ""
        raise ImproperlyConfigured(f"{name} must be a number of seconds above 0{within}, not {deadline!r}.")
    return float(deadline)
