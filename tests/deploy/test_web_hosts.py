"""The Host names a web pod accepts: the portal's, and those of whatever reaches it inside the cluster.

web.yaml builds ALLOWED_HOSTS from the ConfigMap's host, localhost (the probes send it), the Service's DNS
names (Prometheus scraping the Service) and the pod's address (Prometheus scraping each pod). On an IPv6
cluster a Host header carries the address in brackets, which the settings accept for a bare IPv6 address.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import DisallowedHost
from django.test import RequestFactory, override_settings

from tests.deploy.manifests import by_kind, source_objects

ROOT = Path(__file__).resolve().parents[2]
OBJECTS = source_objects()
NAMESPACE = "gangway"  # kustomization.yaml
WEB = by_kind(OBJECTS, "Deployment")["gangway-web"]["spec"]["template"]["spec"]["containers"][0]


def expanded(value: str, pod_ip: str) -> str:
    """`value` as the kubelet expands it in the web container of a pod of address `pod_ip`."""
    known = {**by_kind(OBJECTS, "ConfigMap")["gangway-config"]["data"], "POD_IP": pod_ip, "POD_NAMESPACE": NAMESPACE}
    for name, known_value in known.items():
        value = value.replace(f"$({name})", known_value)
    assert "$(" not in value, value
    return value


def allowed_hosts(pod_ip: str) -> list[str]:
    """ALLOWED_HOSTS as the settings read web.yaml's value in a pod of address `pod_ip`."""
    value = expanded(next(e["value"] for e in WEB["env"] if e["name"] == "ALLOWED_HOSTS"), pod_ip)
    env = {"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "portal.settings", "SECRET_KEY": "x" * 50,
           "ALLOWED_HOSTS": value}  # fmt: skip
    script = "import json; from django.conf import settings; print(json.dumps(settings.ALLOWED_HOSTS))"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120, check=True)  # fmt: skip
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=["10.1.2.3", "fd00::5"], ids=["an IPv4 pod", "an IPv6 pod"])
def pod(request) -> tuple[str, list[str]]:
    return request.param, allowed_hosts(request.param)


def accepted(host: str, hosts: list[str]) -> bool:
    request = RequestFactory().get("/healthz", HTTP_HOST=host)
    with override_settings(ALLOWED_HOSTS=hosts):
        try:
            request.get_host()
        except DisallowedHost:
            return False
    return True


def test_the_probes_send_a_host_every_pod_accepts(pod):
    _, hosts = pod
    for probe in ("readinessProbe", "livenessProbe"):
        [header] = WEB[probe]["httpGet"]["httpHeaders"]
        assert header["name"] == "Host" and accepted(header["value"], hosts), probe


@pytest.mark.parametrize("host", ["gangway-web", "gangway-web.gangway:80", "gangway-web.gangway.svc:80",
                                  "gangway-web.gangway.svc.cluster.local"])  # fmt: skip
def test_a_scrape_of_the_service_by_its_dns_names_is_answered(pod, host):
    _, hosts = pod
    assert accepted(host, hosts)


def test_a_scrape_of_the_pod_by_its_address_is_answered(pod):
    address, hosts = pod
    assert accepted(f"[{address}]:8000" if ":" in address else f"{address}:8000", hosts)


def test_the_portals_host_is_answered_and_no_other(pod):
    _, hosts = pod
    assert accepted("gangway.example.com", hosts)
    assert not accepted("elsewhere.example.com", hosts)
    assert not accepted("10.9.9.9:8000", hosts)  # another pod's address
