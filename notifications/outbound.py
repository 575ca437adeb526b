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

A post keeps to one deadline in all (`deadlines.Deadline`: looking up the host, connecting, the TLS handshake,
posting and reading the answer's status and headers), not a timeout per read, so neither a receiver that
trickles its answer nor a resolver that never answers can hold a worker; the connection notes on the try
(`attempts.Attempt`) when the request starts to go out.
"""

from __future__ import annotations

import functools
import http.client
import io
import ipaddress
import urllib.request
from urllib.parse import urlsplit

from django.conf import settings

from notifications import deadlines
from notifications.attempts import Attempt
from notifications.deadlines import Deadline, Reader, addresses

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


def url_problem(url: str) -> str:
    """The sentence saying why a webhook could never be posted to `url` whatever its host, or "" when it could: a
    scheme other than http(s) (urllib would hand it to its FTP or file handler, which check no address), a user
    or password in it (http.client reads them as the host and port, and its error would repeat the password), or
    letters outside ASCII after the host (an HTTP request line cannot carry them). Never repeats the URL: it is
    the team's secret, and the sentence is written on the delivery's record and in the worker's log."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return "Use an https:// URL"
    if "@" in parts.netloc:
        return ("Put no user name or password in the URL: the receiver's secret goes in its path, as Slack's "
                "incoming webhooks carry it")  # fmt: skip
    if not url.replace(parts.netloc, "", 1).isascii():
        return "Write letters outside ASCII in the URL's path or query percent-encoded, as the receiver gives it"
    return ""


def host_problem(url: str) -> str:
    """The sentence saying why `url`'s host may not receive webhooks, or "" when it may; its lookup waits no
    longer than WEBHOOK_DEADLINE, as a post's does."""
    if settings.WEBHOOK_ALLOW_PRIVATE:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    deadline = Deadline(deadlines.webhook_deadline())  # a resolver that never answers holds no web worker
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)  # ValueError for a port past 65535
        found = deadlines.resolve(functools.partial(addresses, host, port), host, deadline)
    except deadlines.NotResolved:
        return f"Could not look up the host {host} within {deadline.seconds:g} s; check the URL, or save again later."
    except (OSError, ValueError, UnicodeError):
        return f"Could not find the host {host}; check the URL."
    private = sorted({address for address in found if not is_public(address)})
    if private:
        return f"{_on_private(host, private)}; a webhook must be an address on the internet, such as Slack's."
    return ""


def _on_private(host: str, private: list[str]) -> str:
    where = "" if private == [host] else f" ({', '.join(private)})"
    return f"{host} is on a private or local network{where}"


def _connect(address, _timeout=None, source_address=None, *, deadline: Deadline, public: bool):
    """Connects to an address `address`'s host resolves to, looking it up and trying its addresses in turn within
    what is left of `deadline` for all of it together: a resolver that never answers (NotResolved) or a host
    with several unreachable addresses holds the worker no longer than one deadline. When `public`, only the
    public addresses the lookup found are tried (PrivateAddress when the host has none). http.client's hook
    (`_create_connection`), so its own timeout is not used."""
    host, port = address[0], address[1]
    found = deadlines.resolve(functools.partial(addresses, host, port), host, deadline)
    tried = [ip for ip in found if is_public(ip)] if public else found
    if not tried:
        raise PrivateAddress(_on_private(host, sorted(set(found))))
    return deadlines.connect(tried, port, deadline, source_address)


class _DeadlineSocket:
    """A connected socket whose every send and read waits at most what is left of the deadline: a socket
    timeout alone bounds each read, so a receiver trickling its answer a byte every few seconds would hold
    the worker until its time limit. Notes on the attempt when the request starts to go out."""

    def __init__(self, sock, deadline: Deadline, attempt: Attempt):
        self._sock, self._deadline, self._attempt = sock, deadline, attempt

    def __getattr__(self, name):
        return getattr(self._sock, name)

    def sendall(self, data, *flags):
        self._sock.settimeout(self._deadline.left())
        self._attempt.begin()  # from here its receiver may have the request
        return self._sock.sendall(data, *flags)

    def makefile(self, mode="rb", *args, **kwargs):  # http.client reads the answer through it, as "rb"
        if mode != "rb":
            raise ValueError(f"a webhook's answer is read as bytes, not in mode {mode!r}")
        return io.BufferedReader(Reader(self._sock, self._deadline))


class _KeepsToDeadline:
    """An HTTP(S) connection whose whole exchange keeps to one deadline, connecting only to public addresses
    when `public`; it notes on the attempt when the request starts to go out."""

    def __init__(self, *args, deadline: Deadline, attempt: Attempt, public: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.deadline, self.attempt = deadline, attempt
        self._create_connection = functools.partial(_connect, deadline=deadline, public=public)

    def connect(self):
        self.timeout = self.deadline.left()  # none left: nothing is tried (`_connect` times each try)
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self.deadline, self.attempt)


class _HTTPConnection(_KeepsToDeadline, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_KeepsToDeadline, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, **exchange):
        super().__init__()
        self._exchange = exchange

    def http_open(self, req):
        return self.do_open(functools.partial(_HTTPConnection, **self._exchange), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, **exchange):
        super().__init__()
        self._exchange = exchange

    def https_open(self, req):
        # The context checks the host's name (Python 3.12 has no check_hostname argument).
        return self.do_open(functools.partial(_HTTPSConnection, **self._exchange), req, context=self._context)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the 3xx reaches the caller as an HTTPError


def opener(*, deadline: Deadline, attempt: Attempt) -> urllib.request.OpenerDirector:
    """The opener one webhook is posted with: within `deadline` in all, noting on `attempt` when the request
    starts to go out; public addresses only, directly, no redirects (see the module)."""
    public = not settings.WEBHOOK_ALLOW_PRIVATE
    handlers = [_HTTPHandler(deadline=deadline, attempt=attempt, public=public),
                _HTTPSHandler(deadline=deadline, attempt=attempt, public=public), _NoRedirects]  # fmt: skip
    if public:
        handlers.insert(0, urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)
