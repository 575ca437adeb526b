"""Receivers that are slow, refuse or ask to be left alone: a message that went out is never sent again because
its answer was late, a receiver's wish to wait is honoured within reason, and the page says why a message failed."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime
from html.parser import HTMLParser

import pytest
from celery.exceptions import Retry
from django.utils import timezone

from jobs.models import Job, JobEvent
from jobs.transitions import transition
from notifications import audience, tasks
from notifications.models import Delivery, TeamWebhook

pytestmark = pytest.mark.django_db


def fail(job, capture) -> None:
    with capture(execute=True):
        for to, message in ((Job.State.ADMITTED, "Admitted."), (Job.State.RUNNING, "Running."),
                            (Job.State.FAILED, "Failed: Replica worker-0 exited with code 1 (Error).")):  # fmt: skip
            transition(job, to, message=message)


def test_a_mail_server_slow_to_confirm_a_message_gets_it_once(submit, mailed_owner, smtp, settings,
                                                              django_capture_on_commit_callbacks):  # fmt: skip
    """It scans each message for longer than the client waits for its 250: the message arrived, only the
    answer was late; sent again, it would arrive six times."""
    settings.EMAIL_TIMEOUT = 0.3
    smtp.confirm_after = 1.0
    fail(submit(), django_capture_on_commit_callbacks)

    assert len(smtp.messages) == 1
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("sent", 1)
    assert delivery.error.startswith("The mail server took longer than 0.3 s to confirm the e-mail; it may well")


def test_a_mail_server_that_times_out_before_the_message_went_out_is_retried(submit, mailed_owner, smtp, settings,
                                                                            monkeypatch,
                                                                            django_capture_on_commit_callbacks):  # fmt: skip
    """Slow to greet, then well: nothing went out the first time, so the message is sent on the retry."""
    settings.EMAIL_TIMEOUT = 0.3
    import smtplib

    connect = smtplib.SMTP.connect
    slow = [True]

    def slow_once(self, *args, **kwargs):
        answer = connect(self, *args, **kwargs)
        if slow.pop() if slow else False:
            raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed: timed out")
        return answer

    monkeypatch.setattr(smtplib.SMTP, "connect", slow_once)
    fail(submit(), django_capture_on_commit_callbacks)

    assert len(smtp.messages) == 1
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.error) == ("sent", 2, "")


@pytest.mark.parametrize("asked", ["2592000", "1e400"], ids=["thirty days", "more seconds than a float holds"])
def test_a_429_asking_to_wait_too_long_is_retried_within_the_cap(submit, receiver, retries, asked,
                                                                  django_capture_on_commit_callbacks):  # fmt: skip
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer((429, asked))
    fail(job, django_capture_on_commit_callbacks)

    assert retries == [15 * 60]  # webhooks.RETRY_AFTER_MOST: a quarter of an hour
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("sent", 2) and len(receiver.posts) == 2


def test_a_429_giving_retry_after_as_a_date_is_retried_no_sooner(submit, receiver, retries,
                                                                django_capture_on_commit_callbacks):  # fmt: skip
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer((429, format_datetime(timezone.now() + timedelta(seconds=300), usegmt=True)))
    fail(job, django_capture_on_commit_callbacks)

    (wait,) = retries
    assert 295 <= wait <= 301
    assert Delivery.objects.get().state == "sent"


class _Text(HTMLParser):
    """The text a reader sees: what is between tags, never attributes such as `title`."""

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def seen(body: str) -> str:
    reader = _Text()
    reader.feed(body)
    return " ".join(" ".join(reader.parts).split())


@pytest.mark.parametrize(("state", "error", "shown"), [
    ("failed", "The webhook answered 500 Internal Server Error.", "The webhook answered 500 Internal Server Error."),
    ("retrying", "The webhook answered 429 Too Many Requests.", "The webhook answered 429 Too Many Requests."),
    ("sent", "The webhook took longer than 5 s to answer; it may well have received the message, so it is not "
             "sent again.", "The webhook took longer than 5 s to answer"),
], ids=["failed", "retrying", "sent, its answer unknown"])  # fmt: skip
def test_the_page_says_in_words_why_a_message_failed(login, lead, submit, state, error, shown):
    """Not only in a tooltip, which a keyboard, a phone or a screen reader never shows."""
    job = submit()
    Delivery.objects.create(event=job.events.get(), job=job, channel="webhook", target="https://hooks.example.com/x",
                            state=state, attempts=3, error=error,
                            retry_at=timezone.now() + timedelta(minutes=2) if state == "retrying" else None)  # fmt: skip
    text = seen(login(lead).get("/notifications/").content.decode())
    assert shown in text
    if state == "retrying":
        assert "Next try in 2 min" in text


def test_the_page_says_news_held_for_its_receivers_retry_goes_with_it(login, lead, submit):
    """A delivery held for its receiver's retry (held_for_retry) has no error of its own: the page says why it waits."""
    job = submit()
    Delivery.objects.create(event=job.events.get(), job=job, channel="webhook", target="https://hooks.example.com/x",
                            state="pending", retry_at=timezone.now() + timedelta(minutes=2))  # fmt: skip
    text = seen(login(lead).get("/notifications/").content.decode())
    assert "Goes with its receiver's next try, in 2 min ." in text  # the time, then its full stop


def test_a_receiver_that_fails_for_good_is_tried_a_bounded_number_of_times(submit, receiver, retries,
                                                                          django_capture_on_commit_callbacks):  # fmt: skip
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer(*[500] * 20)
    fail(job, django_capture_on_commit_callbacks)

    assert len(receiver.posts) == tasks.MAX_RETRIES + 1
    assert all(later > sooner for sooner, later in zip(retries, retries[1:], strict=False))  # backed off
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("failed", tasks.MAX_RETRIES + 1)
    assert delivery.error == "The webhook answered 500 Internal Server Error."


def test_one_failed_event_leaves_the_other_receivers_untouched(submit, receiver, mailed_owner, smtp,
                                                                django_capture_on_commit_callbacks):  # fmt: skip
    """The team's webhook refuses for good; the owner's e-mail of the same event goes out once."""
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer(*[500] * 20)
    fail(job, django_capture_on_commit_callbacks)
    assert len(smtp.messages) == 1
    assert dict(Delivery.objects.values_list("channel", "state")) == {"email": "sent", "webhook": "failed"}
    assert JobEvent.objects.filter(job=job, kind="failed").count() == 1


@pytest.mark.parametrize("refusal", [(429, 120), 500], ids=["429 asking to wait 2 min", "500"])
def test_news_for_a_receiver_waiting_for_a_retry_goes_with_that_retry(submit, receiver, monkeypatch, refusal):
    """A receiver that asked to be left alone, or fails, is not posted to sooner than its retry by news made
    meanwhile: that news waits, and goes in the retry's message."""
    first, second = submit(name="trial-00"), submit(name="trial-01")
    TeamWebhook.objects.create(team=first.team, url=receiver.url, on_fail=True)
    monkeypatch.setattr(tasks.deliver, "retry", lambda *args, countdown=None, **kwargs: Retry(when=countdown))
    receiver.answer(refusal)
    (refused,) = audience.deliveries_for(JobEvent.objects.create(job=first, kind="failed", message="Failed: boom"))
    tasks.deliver.delay(refused.pk, 0)
    refused.refresh_from_db()
    assert refused.state == "retrying" and len(receiver.posts) == 1
    Delivery.objects.filter(pk=refused.pk).update(created_at=timezone.now() - timedelta(minutes=1))  # no burst
    held = []
    apply_async = tasks.deliver.apply_async

    def hold(args=None, kwargs=None, countdown=None, **options):
        if countdown:
            held.append((args, countdown))
            return None
        return apply_async(args, kwargs, **options)

    monkeypatch.setattr(tasks.deliver, "apply_async", hold)
    tasks.notify(JobEvent.objects.create(job=second, kind="failed", message="Failed: boom").pk)

    assert len(receiver.posts) == 1  # nothing posted before the retry
    ((args, countdown),) = held
    due = (refused.retry_at - timezone.now()).total_seconds()
    assert due - 2 <= countdown <= due + 1
    assert Delivery.objects.get(job=second).retry_at == refused.retry_at  # when it is due, for resend_lost
    assert tasks.resend_lost() == 0

    tasks.deliver.apply(args)  # the retry is due: both go in one post
    (_, post) = receiver.posts
    assert post["text"].startswith("2 jobs of team maps failed:")
    assert set(Delivery.objects.values_list("state", "digest_size")) == {("sent", 2)}
    assert tasks.deliver.apply((refused.pk, 1)).get() == "skipped"  # the retry's own task finds it sent


@pytest.mark.parametrize("persona", ["member", "outsider"])
def test_a_teams_webhook_and_its_failures_are_shown_to_its_leads_only(request, login, lead, maps, submit, persona):
    """The webhook's URL is a secret of the team (anyone holding it may post to its channel)."""
    job = submit()
    url = "https://hooks.example.com/T0/B0/secret"
    TeamWebhook.objects.create(team=maps, url=url, on_fail=True)
    Delivery.objects.create(event=job.events.get(), job=job, channel="webhook", target=url, state="failed",
                            attempts=6, error="The webhook answered 500 Internal Server Error.")  # fmt: skip
    assert "500 Internal Server Error" in login(lead).get("/notifications/").content.decode()
    body = login(request.getfixturevalue(persona)).get("/notifications/").content.decode()
    assert "secret" not in body and "500 Internal Server Error" not in body


def test_nobody_signed_out_sets_a_webhook(client, maps):
    response = client.post("/notifications/webhooks/maps/", {"maps-url": "https://hooks.example.com/x"})
    assert response.status_code == 302 and "/login" in response["Location"]
    assert not TeamWebhook.objects.exists()
    assert client.get("/notifications/webhooks/maps/").status_code in (302, 405)
