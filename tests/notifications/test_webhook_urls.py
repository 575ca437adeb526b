"""A team webhook's URL is the team's secret and the receiver's address: one that could never be posted to (a user
and password in it, letters an HTTP request line cannot carry, a scheme other than http(s)) is refused when it is
saved, and one saved before is not posted to, its record saying why without repeating the URL or its password."""

from __future__ import annotations

import logging

import pytest

from jobs.models import JobEvent
from notifications import audience, tasks
from notifications.models import Delivery, TeamWebhook

pytestmark = pytest.mark.django_db

SECRET = "s3cret-token"


def webhook_post(url: str) -> dict:
    return {"maps-url": url, "maps-on_fail": "on"}


@pytest.mark.parametrize("url, says", [
    (f"https://bot:{SECRET}@hooks.example.com/T0/B0/x", "Put no user name or password in the URL"),
    ("https://hooks.example.com/T0/B0/équipe", "percent-encoded"),
])  # fmt: skip
def test_a_webhook_url_that_could_never_be_posted_to_is_refused_when_saved(client, login, lead, settings, url, says):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    login(lead)
    response = client.post("/notifications/webhooks/maps/", webhook_post(url))
    assert response.status_code == 422
    assert says in response.content.decode()
    assert not TeamWebhook.objects.exists()


@pytest.mark.parametrize("url", [f"https://bot:{SECRET}@hooks.example.com/T0/B0/x",
                                 f"ftp://files.example.com/{SECRET}", f"https://hooks.example.com/{SECRET}/é"])
def test_a_webhook_saved_before_that_could_never_be_posted_to_fails_once_without_repeating_its_url(
        submit, maps, settings, caplog, url):  # fmt: skip
    settings.WEBHOOK_ALLOW_PRIVATE = False
    TeamWebhook.objects.create(team=maps, url=url, on_fail=True)
    job = submit(name="resnet")
    event = JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom")
    (delivery,) = audience.deliveries_for(event)

    with caplog.at_level(logging.INFO):
        tasks.deliver.delay(delivery.pk)

    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("failed", 1)  # never retried: no retry would help
    assert delivery.error.startswith("Not sent: the webhook's URL")
    assert SECRET not in delivery.error
    assert SECRET not in caplog.text
