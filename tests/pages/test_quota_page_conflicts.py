"""Two admins on the quota page at once: a save from a page opened before the other's change is refused
with nothing saved, naming the change and who made it, and the form comes back with the figures stored
now; a save from an up-to-date page works as before."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from tenants.models import AuditEntry, Quota
from tests.conftest import make_user
from tests.page_forms import form_fields, opened

pytestmark = pytest.mark.django_db


URL = "/teams/maps/quota/"


@pytest.fixture
def alice(maps):
    client = Client()
    client.force_login(make_user("alice", staff=True))
    return client


@pytest.fixture
def bob(maps):
    client = Client()
    client.force_login(make_user("bob", staff=True))
    return client


def gpu_quota() -> tuple[int, int | None]:
    quota = Quota.objects.get(team__slug="maps", resource="gpu")
    return quota.nominal, quota.borrowing_limit


def loaded_with(token: str) -> dict:
    """The figures a page's hidden field says it was loaded with."""
    return json.loads(token)["figures"]


def clock(entry: AuditEntry) -> str:
    return f"{timezone.localtime(entry.at):%H:%M %Z}"


def test_a_save_from_a_page_opened_before_another_admins_change_is_refused(alice, bob):
    bobs_page = opened(bob, URL)
    assert alice.post(URL, opened(alice, URL) | {"gpu_nominal": "4"}).status_code == 302
    response = bob.post(URL, bobs_page | {"gpu_borrowing_limit": "0"})
    body = response.content.decode()
    assert gpu_quota() == (4, 8)  # alice's change stands and bob's was not applied
    assert response.status_code == 409
    alices = AuditEntry.objects.get()  # and nothing was recorded for bob
    assert ("Since you opened this page, gpu nominal was changed from 8 GPUs to 4 GPUs by alice at "
            f"{clock(alices)}; your change (gpu borrowing limit 8 GPUs -&gt; 0 GPUs) was not saved — the form now shows "
            "the current quota: review it and save again.") in body  # fmt: skip
    assert 'class="error-summary" role="alert"' in body
    refreshed = form_fields(response.content.decode())
    assert (refreshed["gpu_nominal"], refreshed["gpu_borrowing_limit"]) == ("4", "8")  # the figures stored now


def test_the_refused_form_saves_once_reviewed(alice, bob):
    bobs_page = opened(bob, URL)
    alice.post(URL, opened(alice, URL) | {"gpu_nominal": "4"})
    refused = bob.post(URL, bobs_page | {"gpu_borrowing_limit": "0"})
    response = bob.post(URL, form_fields(refused.content.decode()) | {"gpu_borrowing_limit": "0"})
    assert response.status_code == 302
    assert gpu_quota() == (4, 0)
    assert "gpu borrowing limit 8 GPUs -> 0 GPUs" in AuditEntry.objects.first().summary


def test_an_edit_of_the_value_the_other_admin_changed_is_refused_too(alice, bob):
    bobs_page = opened(bob, URL)
    alice.post(URL, opened(alice, URL) | {"gpu_nominal": "4"})
    response = bob.post(URL, bobs_page | {"gpu_nominal": "6"})
    assert response.status_code == 409
    assert "gpu nominal was changed from 8 GPUs to 4 GPUs by alice" in response.content.decode()
    assert gpu_quota() == (4, 8) and AuditEntry.objects.count() == 1


def test_a_changed_weight_is_named_too(alice, bob):
    bobs_page = opened(bob, URL)
    alice.post(URL, opened(alice, URL) | {"weight": "2"})
    response = bob.post(URL, bobs_page | {"gpu_nominal": "6"})
    assert response.status_code == 409
    assert "the weight was changed from 1.0 to 2.0 by alice" in response.content.decode()
    assert gpu_quota() == (8, 8)


def test_a_save_from_an_up_to_date_page_works(alice, bob):
    alice.post(URL, opened(alice, URL) | {"gpu_nominal": "4"})
    bobs_page = opened(bob, URL)
    assert loaded_with(bobs_page["based_on"])["gpu"]["nominal"] == 4  # the page says what it was loaded with
    response = bob.post(URL, bobs_page | {"gpu_borrowing_limit": "0"})
    assert response.status_code == 302
    assert gpu_quota() == (4, 0)
    assert AuditEntry.objects.count() == 2


def test_a_save_that_does_not_say_what_it_was_loaded_with_is_refused(bob):
    response = bob.post(URL, opened(bob, URL) | {"based_on": "", "gpu_nominal": "6"})
    assert response.status_code == 409
    assert "This form does not say which quota it was loaded with" in response.content.decode()
    assert gpu_quota() == (8, 8) and not AuditEntry.objects.exists()


def test_the_preview_warns_that_saving_a_stale_page_would_be_refused(alice, bob):
    bobs_page = opened(bob, URL)
    alice.post(URL, opened(alice, URL) | {"gpu_nominal": "4"})
    body = bob.post(URL, bobs_page | {"gpu_borrowing_limit": "0"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Since you opened this page, gpu nominal was changed from 8 GPUs to 4 GPUs by alice" in body
    assert "saving this form would be refused" in body
    fresh = bob.post(URL, opened(bob, URL) | {"gpu_borrowing_limit": "0"}, HTTP_HX_REQUEST="true")
    assert "would be refused" not in fresh.content.decode()
