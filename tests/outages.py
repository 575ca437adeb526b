"""Services that cannot be reached, simulated on loopback: a port that refuses, and one that never answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from tests.deploy.ports import closed_port


def refused_redis() -> str:
    """A Redis URL whose connections are refused at once (a Redis restarting)."""
    return f"redis://127.0.0.1:{closed_port()}/0"


@contextmanager
def silent_redis() -> Iterator[str]:
    """Yields a Redis URL whose connections are never answered (a lost route, a dead node):
    a listening socket whose backlog is full, so the kernel drops every new SYN."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        for sock in (*fillers, listener):  # a connect still waiting is refused now
            sock.close()
