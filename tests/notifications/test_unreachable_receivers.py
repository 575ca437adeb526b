"""A webhook whose host has several addresses, none of which answers, holds the worker no longer than the
post's one deadline (WEBHOOK_DEADLINE) in all, not a deadline per address; and an https post builds its
connection as every supported Python accepts it."""

from __future__ import annotations

import socket
import types
import urllib.request

import pytest

from notifications import deadlines, outbound, webhooks
from notifications.attempts import Attempt
from notifications.outcomes import SendFailed

ADDRESSES = ["93.184.215.14", "8.8.8.8", "1.1.1.1"]  # of every host not in example.com (see conftest)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def unreachable(monkeypatch):
    """Three addresses for every host name (an address, itself); connecting to each waits out its whole timeout on a fake clock, then
    times out. Returns the timeouts the connects were given."""
    clock, timeouts = Clock(), []
    monkeypatch.setattr(deadlines, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, *args, **kwargs: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
        for ip in ([host] if host in ADDRESSES else ADDRESSES)])  # fmt: skip

    class Unanswered:
        def __init__(self, *args, **kwargs):
            self.timeout = None

        def settimeout(self, timeout):
            self.timeout = timeout

        def connect(self, address):
            timeouts.append(self.timeout)
            clock.now += self.timeout
            raise TimeoutError("timed out")

        def close(self):
            pass

    monkeypatch.setattr(socket, "socket", Unanswered)
    return timeouts


@pytest.mark.parametrize("allow_private", [False, True])
@pytest.mark.parametrize("url", ["https://hooks.receiver.test/x", "http://hooks.receiver.test/x"])
def test_a_host_none_of_whose_addresses_answers_is_given_up_on_within_one_deadline(
        settings, unreachable, allow_private, url):  # fmt: skip
    settings.WEBHOOK_ALLOW_PRIVATE = allow_private
    settings.WEBHOOK_DEADLINE = 0.3
    with pytest.raises(SendFailed, match=r"^Could not reach the webhook within 0.3 s; the message did not go out"):
        webhooks.post(url, "hello", attempt=Attempt())
    assert unreachable  # it did try to connect
    assert sum(unreachable) <= 0.3 + 1e-9


def test_an_https_post_builds_its_connection_without_check_hostname(monkeypatch):
    """Python 3.12 took the check_hostname argument away; the context checks the host's name."""
    made = {}

    class Stop(Exception):
        pass

    def as_python_312_would(host, *, timeout=None, context=None, blocksize=8192, **exchange):
        made.update(exchange, context=context)
        raise Stop

    monkeypatch.setattr(outbound, "_HTTPSConnection", as_python_312_would)
    opener = outbound.opener(deadline=outbound.Deadline(10), attempt=Attempt())
    with pytest.raises(Stop):
        opener.open(urllib.request.Request("https://hooks.example.com/x", data=b"{}", method="POST"))
    assert "check_hostname" not in made
    assert set(made) == {"deadline", "attempt", "public", "context"}
