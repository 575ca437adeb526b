"""A webhook receiver that trickles (a byte every tenth of a second, each read well within any per-read timeout)
holds a worker no longer than the post's deadline for the whole exchange (WEBHOOK_DEADLINE): a post given up on
before it went out is retried with backoff, one whose answer trickled is not posted again."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobs.models import JobEvent
from notifications import deadlines, tasks
from notifications.models import Delivery, TeamWebhook

pytestmark = pytest.mark.django_db

# 200 OK, a byte every 0.1 s: 7 s to the end, where a deadline of 0.5 s gives up.
TRICKLED_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Slow: " + b"." * 30 + b"\r\n\r\nok"
# The start of a TLS handshake record of 16 kB, 4 s of it a byte at a time, and then nothing more.
TRICKLED_HANDSHAKE = b"\x16\x03\x03\x40\x00" + b"\x02" * 35


def post_failure(job, url: str) -> None:
    TeamWebhook.objects.create(team=job.team, url=url, on_fail=True)
    tasks.notify(JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom").pk)


def test_a_receiver_trickling_its_answer_is_given_up_on_at_the_deadline_and_not_posted_again(submit, trickler,
                                                                                             settings):  # fmt: skip
    settings.WEBHOOK_DEADLINE = 0.5
    receiver = trickler(TRICKLED_OK)
    post_failure(submit(), receiver.url)

    assert receiver.written() < len(TRICKLED_OK)  # the worker hung up long before the answer's end
    assert len(receiver.posts) == 1  # it took the post: sent again, it would have it twice
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("sent", 1)
    assert delivery.error == ("The webhook took longer than 0.5 s to answer; it may well have received the message, "
                              "so it is not sent again.")  # fmt: skip


def test_a_receiver_trickling_its_tls_handshake_is_given_up_on_at_the_deadline_and_retried_with_backoff(
        submit, trickler, settings, retries_held):  # fmt: skip
    settings.WEBHOOK_DEADLINE = 0.5
    receiver = trickler(TRICKLED_HANDSHAKE, tls=True)
    post_failure(submit(), receiver.url)

    assert receiver.written() < len(TRICKLED_HANDSHAKE)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("retrying", 1)
    assert delivery.error == "Could not reach the webhook within 0.5 s; the message did not go out."
    (wait,) = retries_held
    assert 24 <= wait <= 36  # the first step of the backoff


def test_a_receiver_trickling_its_tls_handshake_for_good_fails_after_the_retries(submit, trickler, settings, retries):
    settings.WEBHOOK_DEADLINE = 0.2
    receiver = trickler(TRICKLED_HANDSHAKE, tls=True)
    post_failure(submit(), receiver.url)

    assert [receiver.written() < len(TRICKLED_HANDSHAKE) for _ in range(tasks.MAX_RETRIES + 1)] == [True] * (tasks.MAX_RETRIES + 1)
    assert all(later > sooner for sooner, later in zip(retries, retries[1:], strict=False))  # backed off
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("failed", tasks.MAX_RETRIES + 1)


@pytest.mark.parametrize("deadline", [0, -1, 51, "10", True, float("nan")])
def test_a_webhook_deadline_that_is_not_well_under_the_soft_time_limit_is_refused_naming_the_setting(settings,
                                                                                                     deadline):  # fmt: skip
    settings.CELERY_TASK_SOFT_TIME_LIMIT = 100
    settings.WEBHOOK_DEADLINE = deadline
    with pytest.raises(ImproperlyConfigured, match=r"^WEBHOOK_DEADLINE must be a number of seconds above 0 and at "
                                                   r"most half of CELERY_TASK_SOFT_TIME_LIMIT \(100 s\), not "):  # fmt: skip
        deadlines.webhook_deadline()


def test_the_webhook_deadline_is_five_seconds_unless_set(settings):
    del settings.WEBHOOK_DEADLINE
    assert deadlines.webhook_deadline() == 5.0
