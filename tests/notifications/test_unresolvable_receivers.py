"""A resolver that never answers holds a worker no longer than the send's deadline (WEBHOOK_DEADLINE,
EMAIL_DEADLINE), which bounds looking up the receiver's address too: given up on, the message never went out
and is retried with backoff, as for a receiver that cannot be reached, the record saying the name could not be
looked up in time. A name that resolves late is still refused when it names a private address."""

from __future__ import annotations

import socket
import threading

import pytest

from jobs.models import JobEvent
from notifications import tasks
from notifications.models import Delivery, Subscription, TeamWebhook
from tests.notifications.test_settings_page import webhook_post

pytestmark = pytest.mark.django_db

HANG = "hang"


class Resolver:
    """Stands in for the machine's resolver for names under receiver.test: each lookup of one takes the next of
    `answers`, a list of addresses or HANG (waits until the test ends, then gives up as a resolver does: at most
    15 s, so that a send that waits for it fails the test instead of hanging it). `finished` counts the lookups
    that ended; other names resolve as the machine resolves them."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.finished = 0
        self.released = threading.Event()
        self._machine = socket.getaddrinfo

    def getaddrinfo(self, host, port, *args, **kwargs):
        if not str(host).endswith(".receiver.test"):
            return self._machine(host, port, *args, **kwargs)
        answer = self.answers.pop(0)
        try:
            if answer == HANG:
                self.released.wait(15)
                raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in answer]
        finally:
            self.finished += 1


@pytest.fixture
def resolver(monkeypatch):
    """Returns a function installing a Resolver with the answers given."""
    made = []

    def _resolver(*answers) -> Resolver:
        made.append(Resolver(*answers))
        monkeypatch.setattr(socket, "getaddrinfo", made[-1].getaddrinfo)
        return made[-1]

    yield _resolver
    for fake in made:
        fake.released.set()


def failed(job) -> None:
    """Records that the job failed and works out its notifications (eagerly: they are sent at once)."""
    tasks.notify(JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom").pk)


def test_a_webhook_whose_host_name_never_resolves_is_given_up_on_at_the_deadline_and_retried_with_backoff(
        submit, resolver, settings, retries_held):  # fmt: skip
    settings.WEBHOOK_DEADLINE = 0.5
    lookups = resolver(HANG)
    job = submit()
    TeamWebhook.objects.create(team=job.team, url="https://hooks.receiver.test/services/x", on_fail=True)
    failed(job)

    assert lookups.finished == 0  # the worker went on while the lookup still hung
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("retrying", 1)
    assert delivery.error == ("Could not look up the webhook's host hooks.receiver.test within 0.5 s; the message "
                              "did not go out.")  # fmt: skip
    (wait,) = retries_held
    assert 24 <= wait <= 36  # the first step of the backoff


def test_a_webhook_host_that_resolves_on_the_retry_to_a_private_address_is_still_refused(submit, resolver, settings,
                                                                                          retries):  # fmt: skip
    settings.WEBHOOK_DEADLINE = 0.5
    settings.WEBHOOK_ALLOW_PRIVATE = False
    lookups = resolver(HANG, ["10.0.0.5"])
    job = submit()
    TeamWebhook.objects.create(team=job.team, url="https://hooks.receiver.test/services/x", on_fail=True)
    failed(job)

    assert lookups.finished == 1  # the retry's; the first still hung
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("failed", 2)
    assert delivery.error == "Not sent: hooks.receiver.test is on a private or local network (10.0.0.5)."


def test_an_email_whose_mail_server_name_never_resolves_is_given_up_on_at_the_deadline_and_retried_with_backoff(
        submit, owner, resolver, settings, retries_held):  # fmt: skip
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "mail.receiver.test", 25, False
    settings.EMAIL_DEADLINE = 0.5
    owner.email = "owner@example.com"
    owner.save()
    Subscription.objects.create(user=owner, team=None, on_fail=True)
    lookups = resolver(HANG)
    failed(submit())

    assert lookups.finished == 0
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("retrying", 1)
    assert delivery.error == ("Could not look up the mail server mail.receiver.test within 0.5 s; the e-mail did "
                              "not go out.")  # fmt: skip
    assert len(retries_held) == 1


def test_saving_a_webhook_whose_host_name_never_resolves_answers_at_the_deadline_and_saves_nothing(
        client, login, lead, resolver, settings):  # fmt: skip
    settings.WEBHOOK_DEADLINE = 0.5
    settings.WEBHOOK_ALLOW_PRIVATE = False
    lookups = resolver(HANG)
    login(lead)
    response = client.post("/notifications/webhooks/maps/", webhook_post("https://hooks.receiver.test/services/x"))

    assert lookups.finished == 0  # the page answered while the lookup still hung
    assert response.status_code == 422
    assert ("Could not look up the host hooks.receiver.test within 0.5 s; check the URL, or save again later."
            in response.content.decode())  # fmt: skip
    assert not TeamWebhook.objects.exists()
