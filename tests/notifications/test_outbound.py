"""Which addresses a team webhook may reach (notifications/outbound.py)."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from notifications import outbound
from notifications.attempts import Attempt


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.1.2.3", "172.16.0.9", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
    "::1", "fe80::1", "fd00::5", "::ffff:10.0.0.1",
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b:1::a00:1",  # a network's own NAT64
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "::7f00:1",  # IPv4-compatible 127.0.0.1
])  # fmt: skip
def test_private_local_and_embedded_private_addresses_are_not_public(address):
    assert not outbound.is_public(address)


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "64:ff9b::808:808",
                                     "2002:808:808::1"])  # fmt: skip
def test_internet_addresses_are_public(address):
    assert outbound.is_public(address)


def test_posts_never_go_through_a_proxy_from_the_environment(settings, monkeypatch):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    monkeypatch.setenv("HTTPS_PROXY", "http://10.0.0.3:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://10.0.0.3:3128")
    # urllib adds a ProxyHandler reading these variables unless given one; given one without proxies, none is used.
    opener = outbound.opener(deadline=outbound.Deadline(10), attempt=Attempt())
    assert [h for h in opener.handlers if isinstance(h, urllib.request.ProxyHandler)] == []
    assert [h for h in urllib.request.build_opener().handlers if isinstance(h, urllib.request.ProxyHandler)] != []


def test_a_post_connects_only_to_a_public_address_of_its_host(monkeypatch):
    tried = []
    monkeypatch.setattr(outbound, "addresses", lambda host, port: ["10.0.0.5", "127.0.0.1"])
    monkeypatch.setattr(socket, "create_connection", lambda *args, **kwargs: tried.append(args))
    with pytest.raises(outbound.PrivateAddress, match=r"^hooks.example.com is on a private or local network "
                                                      r"\(10.0.0.5, 127.0.0.1\)$"):  # fmt: skip
        outbound._connect(("hooks.example.com", 443), deadline=outbound.Deadline(10), public=True)
    assert tried == []  # nothing is learnt of a private port: no connection is even tried
