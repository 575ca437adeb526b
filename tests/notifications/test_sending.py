"""A job's moments reach the people and webhooks that asked for them, once each, with retries; every send is recorded."""

from __future__ import annotations

import pytest
from django.db import transaction
from kombu.exceptions import OperationalError

from jobs.models import Job
from jobs.transitions import transition
from notifications import audience, claims, outcomes, sending, tasks
from notifications.models import Delivery, Subscription, TeamWebhook

pytestmark = pytest.mark.django_db


def run(job, *moves, capture):
    """Moves the job through `moves` (state, message), each committed, running what waits for the commit."""
    with capture(execute=True):
        for to, message in moves:
            transition(job, to, message=message)


def fail(job, capture, message="Replica worker-0 exited with code 1 (Error): RuntimeError: boom"):
    run(job, (Job.State.ADMITTED, "Admitted."), (Job.State.RUNNING, "Running."), (Job.State.FAILED, f"Failed: {message}"),
        capture=capture)  # fmt: skip


def test_the_owner_is_emailed_when_their_job_fails(submit, owner_with_address, smtp, django_capture_on_commit_callbacks):
    Subscription.objects.create(user=owner_with_address, team=None, on_fail=True)
    job = submit()
    fail(job, django_capture_on_commit_callbacks)

    ((recipients, message),) = smtp.messages
    assert recipients == ["owner@example.com"]
    assert f"Subject: [Gangway] resnet (#{job.pk}) failed" in message
    assert f"Job resnet (#{job.pk}) of team maps failed: Failed: Replica worker-0 exited with code 1" in message
    assert f"https://gangway.example.com/jobs/{job.pk}/" in message
    delivery = Delivery.objects.get()
    assert (delivery.channel, delivery.state, delivery.attempts, delivery.event.kind) == ("email", "sent", 1, "failed")


def test_only_the_moments_asked_for_are_sent(submit, owner_with_address, member, smtp, django_capture_on_commit_callbacks):
    member.email = "member@example.com"
    member.save()
    Subscription.objects.create(user=owner_with_address, team=None, on_fail=False, on_start=True)
    Subscription.objects.create(user=member, team=submit().team, on_fail=False, on_success=True)
    fail(Job.objects.get(), django_capture_on_commit_callbacks)
    assert [recipients for recipients, _ in smtp.messages] == [["owner@example.com"]]
    assert "started" in smtp.messages[0][1]


def test_a_team_subscription_stops_when_its_member_leaves(submit, member, smtp, django_capture_on_commit_callbacks):
    member.email = "member@example.com"
    member.save()
    job = submit()
    Subscription.objects.create(user=member, team=job.team, on_fail=True)
    member.memberships.all().delete()
    fail(job, django_capture_on_commit_callbacks)
    assert smtp.messages == [] and not Delivery.objects.exists()


def test_the_team_webhook_gets_slack_json(submit, receiver, django_capture_on_commit_callbacks):
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    fail(job, django_capture_on_commit_callbacks)
    (post,) = receiver.posts
    assert post["text"].startswith(f"Job resnet (#{job.pk}) of team maps failed: ")
    assert post["text"].endswith(f"<https://gangway.example.com/jobs/{job.pk}/|Open the job>")
    assert Delivery.objects.get().state == "sent"


def test_a_webhook_that_fails_for_a_while_is_retried(submit, receiver, django_capture_on_commit_callbacks):
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer(503, 500)
    fail(job, django_capture_on_commit_callbacks)
    assert len(receiver.posts) == 3
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.error) == ("sent", 3, "")


def test_a_webhook_that_refuses_is_recorded_as_failed_without_retries(submit, receiver, django_capture_on_commit_callbacks):
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer(404)
    fail(job, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("failed", 1) and "answered 404" in delivery.error
    assert len(receiver.posts) == 1


def test_a_webhook_that_connects_to_a_local_address_is_not_sent(submit, receiver, settings,
                                                                 django_capture_on_commit_callbacks):  # fmt: skip
    """Saved while its name was public, it resolves to 127.0.0.1 now (DNS rebinding): the post is refused."""
    settings.WEBHOOK_ALLOW_PRIVATE = False
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    fail(job, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("failed", 1) and receiver.posts == []
    assert delivery.error == "Not sent: 127.0.0.1 is on a private or local network."


def test_a_webhook_that_redirects_is_not_followed(submit, receiver, django_capture_on_commit_callbacks):
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer(302)
    fail(job, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("failed", 1) and "answered 302" in delivery.error
    assert len(receiver.posts) == 1


def test_a_mail_server_that_is_down_is_retried_then_recorded_as_failed(submit, owner_with_address, settings,
                                                                         django_capture_on_commit_callbacks):  # fmt: skip
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", closed.getsockname()[1]  # nothing listens
    Subscription.objects.create(user=owner_with_address, team=None, on_fail=True)
    fail(submit(), django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("failed", tasks.MAX_RETRIES + 1)
    assert "Could not send the e-mail" in delivery.error


def test_a_second_notify_run_sends_nothing_again(submit, owner_with_address, smtp, django_capture_on_commit_callbacks):
    Subscription.objects.create(user=owner_with_address, team=None, on_fail=True)
    job = submit()
    fail(job, django_capture_on_commit_callbacks)
    event = job.events.get(kind="failed")
    assert tasks.notify(event.pk) == 0
    assert len(smtp.messages) == 1 and Delivery.objects.count() == 1


def test_a_rolled_back_transition_tells_nobody(submit, owner_with_address, smtp, django_capture_on_commit_callbacks):
    Subscription.objects.create(user=owner_with_address, team=None, on_start=True)
    job = submit()
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError), transaction.atomic():
            transition(job, Job.State.ADMITTED, message="Admitted.")
            raise RuntimeError("the cycle failed after the move")
    assert smtp.messages == [] and not Delivery.objects.exists()


def test_a_broker_that_is_down_never_breaks_a_transition(submit, monkeypatch, django_capture_on_commit_callbacks, caplog):
    def down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.notify, "apply_async", down)
    job = submit()
    run(job, (Job.State.ADMITTED, "Admitted."), (Job.State.RUNNING, "Running."), capture=django_capture_on_commit_callbacks)
    assert Job.objects.get(pk=job.pk).state == "running"
    assert "could not enqueue the notifications" in caplog.text


def test_events_nobody_can_ask_about_enqueue_nothing(submit, monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr(tasks.notify, "apply_async", lambda *args, **kwargs: sent.append(args))
    run(submit(), (Job.State.ADMITTED, "Admitted."), (Job.State.CANCELLING, "Cancel."), capture=django_capture_on_commit_callbacks)
    assert sent == []


def test_an_owner_who_left_the_team_hears_nothing_more_of_its_jobs(submit, owner_with_address, smtp,
                                                                   django_capture_on_commit_callbacks):  # fmt: skip
    Subscription.objects.create(user=owner_with_address, team=None, on_fail=True)
    job = submit()
    owner_with_address.memberships.all().delete()
    fail(job, django_capture_on_commit_callbacks)
    assert smtp.messages == []


def test_staff_subscribed_to_a_team_hear_of_it_and_each_person_once(submit, owner_with_address, staff, smtp,
                                                                    django_capture_on_commit_callbacks):  # fmt: skip
    staff.email = "ops@example.com"
    staff.save()
    job = submit()
    Subscription.objects.create(user=staff, team=job.team, on_fail=True)
    Subscription.objects.create(user=owner_with_address, team=None, on_fail=True)
    Subscription.objects.create(user=owner_with_address, team=job.team, on_fail=True)
    fail(job, django_capture_on_commit_callbacks)
    assert sorted(recipients[0] for recipients, _ in smtp.messages) == ["ops@example.com", "owner@example.com"]


def test_a_slow_receiver_gets_the_message_once_and_the_record_says_its_answer_is_unknown(
        submit, receiver, settings, django_capture_on_commit_callbacks):  # fmt: skip
    settings.WEBHOOK_DEADLINE = 0.3
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer(1.0)  # takes the post, answers after a second
    fail(job, django_capture_on_commit_callbacks)
    assert len(receiver.posts) == 1  # six, when each timeout was retried
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("sent", 1)
    assert delivery.error.startswith("The webhook took longer than 0.3 s to answer; it may well have received")


def test_an_answer_that_is_not_http_is_retried_never_left_sending(submit, receiver, django_capture_on_commit_callbacks):
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer(b"SSH-2.0-OpenSSH_9.6\r\n")
    fail(job, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("sent", 2)  # the retry went through


def test_a_429_is_retried_no_sooner_than_it_asks(submit, receiver, retries, django_capture_on_commit_callbacks):
    waits = retries
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer((429, 120), 503)
    fail(job, django_capture_on_commit_callbacks)
    assert waits[0] >= 120 and 24 <= waits[1] <= 72  # Retry-After, then the backoff with its spread
    assert Delivery.objects.get().state == "sent"


def test_a_retry_is_not_sent_to_someone_who_left_the_team(submit, member, smtp, settings, monkeypatch,
                                                          django_capture_on_commit_callbacks):  # fmt: skip
    member.email = "member@example.com"
    member.save()
    job = submit()
    Subscription.objects.create(user=member, team=job.team, on_fail=True)
    sent = sending.send

    def down_then_left(digest, attempt):  # the mail server fails once; meanwhile the member leaves the team
        monkeypatch.setattr(sending, "send", sent)
        member.memberships.all().delete()
        raise outcomes.SendFailed("Could not send the e-mail: connection refused", retry=True)

    monkeypatch.setattr(sending, "send", down_then_left)
    fail(job, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert smtp.messages == []
    assert (delivery.state, delivery.error) == ("failed", "Not sent: member is no longer in team maps.")


def test_a_retry_is_not_posted_to_a_webhook_the_lead_replaced(submit, receiver, monkeypatch,
                                                             django_capture_on_commit_callbacks):  # fmt: skip
    job = submit()
    hook = TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    receiver.answer(503)
    original = tasks.deliver.retry

    def replaced_meanwhile(*args, **kwargs):
        TeamWebhook.objects.filter(pk=hook.pk).update(url="https://hooks.example.com/new")
        return original(*args, **kwargs)

    monkeypatch.setattr(tasks.deliver, "retry", replaced_meanwhile)
    fail(job, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert len(receiver.posts) == 1
    assert (delivery.state, delivery.error) == ("failed", "Not sent: team maps's webhook was changed or removed since.")


def test_a_delivery_whose_worker_died_while_sending_is_sent_again(submit, owner_with_address, smtp):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import JobEvent

    Subscription.objects.create(user=owner_with_address, team=None, on_fail=True)
    job = submit()
    event = JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom")
    (delivery,) = audience.deliveries_for(event)
    Delivery.objects.filter(pk=delivery.pk).update(state="sending", attempts=1,  # claimed, then the worker died
                                                   claimed_at=timezone.now() - timedelta(minutes=3))
    assert tasks.resend_lost() == 0 and claims.claim(delivery.pk) is None  # it may still be sending
    Delivery.objects.filter(pk=delivery.pk).update(claimed_at=timezone.now() - claims.STALE_CLAIM - timedelta(seconds=1))
    assert tasks.resend_lost() == 1
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("sent", 2) and len(smtp.messages) == 1


@pytest.mark.parametrize(("answer", "state", "attempts"), [
    ("553 5.7.1 Sender address rejected: not owned by user", "failed", 1),  # permanent: the settings are wrong
    ("451 4.3.0 Temporary local problem, try again", "failed", tasks.MAX_RETRIES + 1),  # may pass: retried
], ids=["5xx is not retried", "4xx is retried"])
def test_a_mail_server_refusal_is_retried_only_when_it_may_pass(submit, owner_with_address, smtp, answer, state, attempts,
                                                                django_capture_on_commit_callbacks):  # fmt: skip
    smtp.sender_answer = answer
    Subscription.objects.create(user=owner_with_address, team=None, on_fail=True)
    fail(submit(), django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == (state, attempts)
    assert delivery.error == f"The mail server answered {answer}"
