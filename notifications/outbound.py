"""Where a team webhook may post: addresses on the internet, never the portal's own network.

A team lead chooses the URL, and the worker posts to it from inside the cluster, so
an unchecked URL would let a lead make Gangway call the cloud's metadata service,
the API server or the portal's own admin, and read the answer's status back on the
notifications page. Unless WEBHOOK_ALLOW_PRIVATE is on (development), a URL whose host
resolves to a loopback, private, link-local, shared or reserved address (IPv4 inside
IPv6 included: mapped, 6to4, Teredo, NAT64) is refused when it is saved (`host_problem`),
and every post resolves the host again and connects only to an address that passes, so
a name that resolves elsewhere later (DNS rebinding) reaches nothing private and learns
nothing of it. Posts go straight to the receiver, never through HTTP(S)_PROXY (a proxy
would connect for us, unchecked), and redirects are not followed.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import urllib.request
from urllib.parse import urlsplit

from django.conf import settings

NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: the last 32 bits are an IPv4 address
LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # a network's own translation: never public


class PrivateAddress(OSError):
    """The webhook's host is on a private or local network."""


def is_public(address: str) -> bool:
    """Whether `address` (an IPv4 or IPv6 address) is one the internet routes to."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in LOCAL_NAT64:
            return False
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return is_public(str(embedded))
    return ip.is_global and not ip.is_multicast and not ip.is_reserved


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
        return f"{_on_private(host, private)}; a webhook must be an address on the internet, such as Slack's."
    return ""


def addresses(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to (raises OSError when it does not)."""
    return [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def _on_private(host: str, private: list[str]) -> str:
    where = "" if private == [host] else f" ({', '.join(private)})"
    return f"{host} is on a private or local network{where}"


def _connect_public(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None):
    """Connects to the first public address `address`'s host resolves to; never tries another."""
    host, port = address[0], address[1]
    found = addresses(host, port)
    public = [ip for ip in found if is_public(ip)]
    if not public:
        raise PrivateAddress(_on_private(host, sorted(set(found))))
    error: OSError | None = None
    for ip in public:
        try:
            return socket.create_connection((ip, port), timeout, source_address)
        except OSError as exc:
            error = exc
    raise error


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
    """The opener webhooks are posted with: public addresses only, directly, no redirects (see the module)."""
    if settings.WEBHOOK_ALLOW_PRIVATE:
        return urllib.request.build_opener(_NoRedirects)
    direct = urllib.request.ProxyHandler({})
    return urllib.request.build_opener(direct, _PublicHTTPHandler, _PublicHTTPSHandler, _NoRedirects)
