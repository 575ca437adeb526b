"""A burst gathers for NOTIFY_BATCH_SECONDS (or waits for its receiver's retry, up to a quarter of an hour)
before its first send: whoever unsubscribes, leaves the team or changes its webhook meanwhile is not sent
what was gathered for them, and each delivery left out says why."""

from __future__ import annotations

import pytest
from django.core import mail

from jobs.models import Job
from jobs.transitions import transition
from notifications.models import Delivery, Subscription, TeamWebhook
from notifications.services import subscriptions_set, webhook_set
from tests.notifications.test_digests import held, start, trials  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def preempt(jobs, capture) -> None:
    for job in jobs:
        transition(job, Job.State.ADMITTED, message="Admitted.")
        transition(job, Job.State.RUNNING, message="Running.")
    with capture(execute=True):
        for job in jobs:
            transition(job, Job.State.PREEMPTING, message="Preempted to return GPUs to team vision.")


@pytest.fixture
def listening_member(member, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    member.email = "member@example.com"
    member.save()
    Subscription.objects.create(user=member, team=member.memberships.get().team, on_preempt=True)
    return member


def test_unsubscribing_while_a_burst_gathers_stops_its_digest(submit, listening_member, held,
                                                              django_capture_on_commit_callbacks):  # fmt: skip
    jobs = trials(submit, 5)
    preempt(jobs, django_capture_on_commit_callbacks)
    assert len(mail.outbox) == 1 and len(held) == 4  # the first went at once; the rest gather

    subscriptions_set(user=listening_member, choices={jobs[0].team: {"on_preempt": False}})
    held.run()

    assert len(mail.outbox) == 1
    left_out = Delivery.objects.exclude(job=jobs[0])
    assert set(left_out.values_list("state", "error")) == {("failed", "Not sent: member no longer asks to be told.")}


def test_leaving_the_team_while_a_burst_gathers_stops_its_digest(submit, listening_member, held,
                                                                 django_capture_on_commit_callbacks):  # fmt: skip
    jobs = trials(submit, 5)
    preempt(jobs, django_capture_on_commit_callbacks)

    listening_member.memberships.all().delete()
    held.run()

    assert len(mail.outbox) == 1
    assert set(Delivery.objects.exclude(job=jobs[0]).values_list("state", "error")) == {
        ("failed", "Not sent: member is no longer in team maps.")}


def test_a_webhook_moved_while_a_burst_gathers_is_not_posted_at_its_old_address(submit, receiver, lead, held,
                                                                                django_capture_on_commit_callbacks):  # fmt: skip
    jobs = trials(submit, 5)
    TeamWebhook.objects.create(team=jobs[0].team, url=receiver.url, on_start=True)
    start(jobs, django_capture_on_commit_callbacks)
    assert len(receiver.posts) == 1 and len(held) == 4

    # The team moved its webhook (the old address is someone else's now): the gathered news is not posted there.
    webhook_set(team=jobs[0].team, url="https://hooks.example.com/maps-new", flags={"on_start": True}, actor=lead)
    held.run()

    assert len(receiver.posts) == 1
    assert set(Delivery.objects.filter(target=receiver.url).exclude(job=jobs[0]).values_list("state", "error")) == {
        ("failed", "Not sent: team maps's webhook was changed or removed since.")}
