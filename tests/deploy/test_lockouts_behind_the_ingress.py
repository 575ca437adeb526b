"""Login lockouts and the API's anonymous throttle count the client behind the Ingress, not the Ingress.

Every request reaches the web from the Ingress controller's pod (REMOTE_ADDR); the Ingress appends the
address it got the request from to X-Forwarded-For. With PROXY_COUNT proxies the client is that many
entries from the right (`portal.addresses`); entries further left are the client's own writing.
"""

import pytest
from django.test import Client, RequestFactory, override_settings
from rest_framework.request import Request

from axes.models import AccessAttempt
from portal.addresses import client_address
from tenants.auth import TokenRateThrottle
from tests.deploy.manifests import by_kind, source_objects

INGRESS = "10.244.1.7"  # the Ingress controller's pod: REMOTE_ADDR of every request the web sees
ATTACKER, PERSON = "203.0.113.66", "198.51.100.10"


def behind_the_ingress(forwarded_for: str) -> Client:
    return Client(REMOTE_ADDR=INGRESS, HTTP_X_FORWARDED_FOR=forwarded_for)


@pytest.mark.django_db
@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=5, PROXY_COUNT=1)
def test_wrong_passwords_from_elsewhere_do_not_lock_the_person_out(owner):
    attacker = behind_the_ingress(ATTACKER)
    for _ in range(5):
        attacker.post("/login/", {"username": "owner", "password": "wrong"})

    person = behind_the_ingress(PERSON)
    answer = person.post("/login/", {"username": "owner", "password": "pw"})

    assert answer.status_code == 302 and "_auth_user_id" in person.session
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == [ATTACKER]


@pytest.mark.django_db
@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=5, PROXY_COUNT=1)
def test_the_guesser_is_locked_out_whatever_addresses_it_writes_in_x_forwarded_for(owner):
    for made_up in range(5):
        behind_the_ingress(f"192.0.2.{made_up}, {ATTACKER}").post("/login/", {"username": "owner", "password": "wrong"})

    answer = behind_the_ingress(f"192.0.2.99, {ATTACKER}").post("/login/", {"username": "owner", "password": "pw"})

    assert answer.status_code == 429


@pytest.mark.django_db
@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=5, PROXY_COUNT=0)
def test_without_a_proxy_x_forwarded_for_is_not_read(owner):
    for made_up in range(5):
        Client(REMOTE_ADDR=ATTACKER, HTTP_X_FORWARDED_FOR=f"192.0.2.{made_up}").post(
            "/login/", {"username": "owner", "password": "wrong"})  # fmt: skip

    answer = Client(REMOTE_ADDR=ATTACKER).post("/login/", {"username": "owner", "password": "pw"})

    assert answer.status_code == 429


@pytest.mark.parametrize(
    ("proxies", "forwarded_for", "address"),
    [
        pytest.param(0, f"192.0.2.1, {ATTACKER}", INGRESS, id="no proxy: the connection's address"),
        pytest.param(1, "", INGRESS, id="one proxy, no header (a probe inside the cluster): the connection's"),
        pytest.param(1, ATTACKER, ATTACKER, id="one proxy: the entry it wrote"),
        pytest.param(1, f"192.0.2.1, {ATTACKER}", ATTACKER, id="one proxy: not the entries the client wrote"),
        pytest.param(2, f"192.0.2.1, {ATTACKER}, 10.0.0.9", ATTACKER, id="two proxies: the second from the right"),
        pytest.param(2, ATTACKER, ATTACKER, id="two proxies, one entry (a proxy bypassed): the leftmost"),
        pytest.param(1, "2001:db8::7", "2001:db8::7", id="an IPv6 client"),
        pytest.param(1, "192.0.2.1, not-an-address", INGRESS, id="an entry that is no address: the connection's"),
    ],
)
def test_the_client_is_read_as_many_entries_from_the_right_as_there_are_proxies(proxies, forwarded_for, address):
    request = RequestFactory().get("/login/", REMOTE_ADDR=INGRESS, HTTP_X_FORWARDED_FOR=forwarded_for)
    with override_settings(PROXY_COUNT=proxies):
        assert client_address(request) == address
        assert TokenRateThrottle().get_ident(Request(request)) == address  # the API's anonymous budget


def test_the_kustomize_base_counts_its_ingress():
    config = by_kind(source_objects(), "ConfigMap")["gangway-config"]["data"]
    assert config["PROXY_COUNT"] == "1"
