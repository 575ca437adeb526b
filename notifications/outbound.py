"""Where a team webhook may post: addresses on the internet, never the portal's own network.

A team lead chooses the URL, and the worker posts to it from inside the cluster, so
an unchecked URL would let a lead make Gangway call the cloud's metadata service,
the API server or the portal's own admin, and read the answer's status back on the
notifications page. Unless WEBHOOK_ALLOW_PRIVATE is on (development, or an egress
proxy on a private address), a URL whose host resolves to a loopback, private,
link-local, shared or reserved address is refused when it is saved (`host_problem`),
and every post checks the address it actually connected to, so a name that
resolves elsewhere later (DNS rebinding) is refused too. Redirects are not followed.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import urllib.request
from urllib.parse import urlsplit

from django.conf import settings


class PrivateAddress(OSError):
    """The webhook's host is on a private or local network."""


def is_public(address: str) -> bool:
    """Whether `address` (an IPv4 or IPv6 address) is one the internet routes to."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def host_problem(url: str) -> str:
    """The sentence saying why `url`'s host may not receive webhooks, or "" when it may."""
    if settings.WEBHOOK_ALLOW_PRIVATE:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        found = addresses(host, parts.port or (443 if parts.scheme == "https" else 80))
    except (OSError, ValueError, UnicodeError):
        return f"Could not find the host {host}; check the URL."
    private = sorted({address for address in found if not is_public(address)})
    if private:
        return (f"{host} is on a private or local network ({', '.join(private)}); a webhook must be an "
                "address on the internet, such as Slack's.")  # fmt: skip
    return ""


def addresses(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to (raises OSError when it does not)."""
    return [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def _connect_public(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None):
    sock = socket.create_connection(address, timeout, source_address)
    peer = sock.getpeername()[0]
    if not is_public(peer):
        sock.close()
        raise PrivateAddress(f"{address[0]} is on a private or local network ({peer}); not posted.")
    return sock


class _PublicHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._create_connection = _connect_public


class _PublicHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._create_connection = _connect_public


class _PublicHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(_PublicHTTPConnection, req)


class _PublicHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        return self.do_open(_PublicHTTPSConnection, req, context=self._context)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the 3xx reaches the caller as an HTTPError


def opener() -> urllib.request.OpenerDirector:
    """The opener webhooks are posted with: public addresses only (see the module), no redirects."""
    if settings.WEBHOOK_ALLOW_PRIVATE:
        return urllib.request.build_opener(_NoRedirects)
    return urllib.request.build_opener(_PublicHTTPHandler, _PublicHTTPSHandler, _NoRedirects)
