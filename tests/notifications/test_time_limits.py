"""The worker's soft time limit stopping a send in the middle: a message that may have reached its receiver is
recorded as sent, its answer unknown, and never sent twice; one that provably never left is tried again."""

from __future__ import annotations

import pytest

from jobs.models import JobEvent
from notifications import tasks
from notifications.models import Delivery, TeamWebhook

SENT_UNKNOWN = ("Stopped at the worker's time limit while the {} was going out or awaiting {}'s answer; it may "
                "well have been received, so it is not sent again.")  # fmt: skip
NOT_SENT = "Stopped at the worker's time limit before the {} went out; it is tried again."

pytestmark = pytest.mark.django_db


def failed(job) -> int:
    """Records that the job failed and works out its notifications (eagerly: they are sent at once)."""
    return tasks.notify(JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom").pk)


def test_an_email_the_server_took_whole_when_the_limit_came_is_not_sent_again(submit, mailed_owner, smtp, soft_limit):
    """The server has the message and is scanning it when the limit comes: sent again, it would arrive twice."""
    smtp.instead_of_confirming = soft_limit
    failed(submit())

    assert len(smtp.messages) == 1
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("sent", 1)
    assert delivery.error == SENT_UNKNOWN.format("e-mail", "the mail server")


def test_an_email_the_server_confirmed_is_sent_though_the_limit_came_while_saying_goodbye(submit, mailed_owner, smtp,
                                                                                         soft_limit):  # fmt: skip
    smtp.instead_of_bye = soft_limit
    failed(submit())

    assert len(smtp.messages) == 1
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.error) == ("sent", 1, "")


def test_an_email_stopped_before_the_server_greeted_is_tried_again(submit, mailed_owner, smtp, soft_limit,
                                                                   retries_held):  # fmt: skip
    smtp.before_greeting = soft_limit
    failed(submit())

    assert smtp.messages == []
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("retrying", 1)
    assert delivery.error == NOT_SENT.format("e-mail")
    (wait,) = retries_held
    assert 24 <= wait <= 36  # the first step of the backoff, as any failure that may pass


def test_an_email_stopped_before_it_went_out_reaches_its_reader_once_on_the_retry(submit, mailed_owner, smtp,
                                                                                  soft_limit):  # fmt: skip
    smtp.before_greeting = soft_limit
    failed(submit())

    assert len(smtp.messages) == 1
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.error) == ("sent", 2, "")


def test_a_webhook_post_awaiting_its_answer_when_the_limit_came_is_not_posted_again(submit, trickler, soft_limit):
    receiver = trickler()  # takes the post, then never answers
    receiver.on_read = soft_limit
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    failed(job)

    assert len(receiver.posts) == 1
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("sent", 1)
    assert delivery.error == SENT_UNKNOWN.format("message", "the webhook")


def test_a_webhook_post_stopped_in_the_tls_handshake_is_tried_again(submit, trickler, soft_limit, retries_held):
    """Nothing of the message leaves before the handshake is done: the receiver cannot have it."""
    receiver = trickler(tls=True)  # reads the client's hello, never answers it
    receiver.on_read = soft_limit
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    failed(job)

    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("retrying", 1)
    assert delivery.error == NOT_SENT.format("message")
    assert len(retries_held) == 1
