"""The address of the client that sent a request, through the reverse proxies in front of Gangway.

Each proxy appends the address it got the request from to X-Forwarded-For, and the web sees the last
proxy's own address as REMOTE_ADDR. Behind PROXY_COUNT proxies the client is therefore the PROXY_COUNT-th
entry from the right; entries further left were sent by the client itself and prove nothing. Login lockouts
(django-axes, through AXES_CLIENT_IP_CALLABLE) and the API's throttle of anonymous calls (`tenants.auth`)
both key on `client_address`, so both count the same client.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings


def client_address(request) -> str | None:
    """Returns the client's address: REMOTE_ADDR when PROXY_COUNT is 0 or the request carries no
    X-Forwarded-For, else the PROXY_COUNT-th entry of X-Forwarded-For from the right (the leftmost when it has
    fewer, as when a proxy was bypassed). An entry that is no IP address gives REMOTE_ADDR, so a lockout is
    never recorded against text a client wrote. None when the request has no address at all."""
    remote = request.META.get("REMOTE_ADDR") or None
    count = settings.PROXY_COUNT
    entries = [entry.strip() for entry in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if entry.strip()]
    if count == 0 or not entries:
        return remote
    entry = entries[-min(count, len(entries))]
    try:
        return str(ipaddress.ip_address(entry))
    except ValueError:
        return remote
