"""A local port nothing listens on, for "unreachable" tests."""

import socket


def closed_port() -> int:
    """Returns a port that was free a moment ago; connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
