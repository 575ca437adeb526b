"""The record of every notification is not kept for ever: beat deletes the deliveries sent or failed longer
than DELIVERY_RETENTION ago, a bounded batch at a time, and never one still to be sent; and the notices that an
API token expires made as long ago, once their token no longer authenticates, never while it does (it would be
told of again). The job's events, the trail people read, stay."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import JobEvent
from notifications import retention, tasks
from notifications.models import Delivery, TokenNotice
from tenants.models import ApiToken
from tenants.tokens import token_create

pytestmark = pytest.mark.django_db

DAY = 86400


@pytest.fixture
def made(submit, owner):
    """Makes a delivery of a new event of one job, `days` old, in `state`; returns it."""
    job = submit()

    def _made(days: float, state: str, channel: str = "email", error: str = "") -> Delivery:
        event = JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom")
        target = "owner@example.com" if channel == "email" else "https://hooks.example.com/T0/B0/x"
        person = owner if channel == "email" else None
        delivery = Delivery.objects.create(event=event, job=job, channel=channel, target=target, user=person,
                                           state=state, error=error)  # fmt: skip
        Delivery.objects.filter(pk=delivery.pk).update(created_at=timezone.now() - timedelta(days=days))
        return delivery

    return _made


def kept(*deliveries: Delivery) -> list[bool]:
    return [Delivery.objects.filter(pk=delivery.pk).exists() for delivery in deliveries]


def test_deliveries_sent_or_failed_longer_ago_than_the_retention_are_deleted_their_events_kept(made, settings):
    settings.DELIVERY_RETENTION = 30 * DAY
    gone = [made(31, "sent"), made(31, "failed", error="The mail server refused owner@example.com"),
            made(40, "failed", "webhook", error="Not sent: team maps's webhook was changed or removed since."),
            made(31, "sent", "webhook")]  # fmt: skip
    recent = [made(29, "sent"), made(29, "failed", "webhook")]
    events = JobEvent.objects.count()

    assert tasks.prune_deliveries() == 4
    assert kept(*gone) == [False] * 4
    assert kept(*recent) == [True, True]
    assert JobEvent.objects.count() == events


@pytest.mark.parametrize("state", ["pending", "sending", "retrying"])
def test_a_delivery_still_to_be_sent_is_never_deleted_however_old(made, settings, state):
    settings.DELIVERY_RETENTION = 30 * DAY
    waiting = made(90, state)
    assert tasks.prune_deliveries() == 0
    assert kept(waiting) == [True]


def test_the_retention_is_the_setting(made, settings):
    old, older = made(2, "sent"), made(4, "sent")
    settings.DELIVERY_RETENTION = 3 * DAY
    assert tasks.prune_deliveries() == 1
    assert kept(old, older) == [True, False]
    settings.DELIVERY_RETENTION = DAY
    assert tasks.prune_deliveries() == 1
    assert kept(old) == [False]


def test_a_retention_of_0_keeps_every_delivery(made, settings):
    settings.DELIVERY_RETENTION = 0
    ancient = made(3650, "sent")
    assert tasks.prune_deliveries() == 0
    assert kept(ancient) == [True]


def test_it_deletes_in_bounded_batches_oldest_first_and_a_backlog_drains_over_runs(made, settings, monkeypatch):
    settings.DELIVERY_RETENTION = DAY
    monkeypatch.setattr(retention, "PRUNE_BATCH", 2)
    monkeypatch.setattr(retention, "PRUNE_BATCHES", 2)
    backlog = [made(days, "sent") for days in (10, 9, 8, 7, 6)]
    with CaptureQueriesContext(connection) as queries:
        assert tasks.prune_deliveries() == 4
    assert sum(query["sql"].startswith("DELETE") for query in queries) == 2
    assert kept(*backlog) == [False, False, False, False, True]
    assert tasks.prune_deliveries() == 1
    assert tasks.prune_deliveries() == 0


def test_beat_runs_the_pruning_at_least_daily():  # its queue: tests/deploy/test_queues.py, for every task
    schedule = settings.CELERY_BEAT_SCHEDULE.values()
    [entry] = [entry for entry in schedule if entry["task"] == tasks.prune_deliveries.name]
    assert entry["schedule"] <= 24 * 3600
    assert tasks.prune_deliveries.name == "notifications.prune_deliveries"


@pytest.mark.parametrize(("value", "starts"), [("3600", False), ("86400", True), ("0", True)])
def test_a_retention_shorter_than_a_day_is_refused_at_start_up(tmp_path, value, starts):
    """Shorter, a notification worked out again within a day (`resend_lost`) would find no record of its
    message and tell people twice."""
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.DELIVERY_RETENTION)"],
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1",
             "GANGWAY_VAR_DIR": str(tmp_path), "DELIVERY_RETENTION": value},
        capture_output=True, text=True, cwd=str(Path(__file__).resolve().parents[2]),
    )  # fmt: skip
    assert (result.returncode == 0) == starts, result.stderr
    if not starts:
        refusal = "DELIVERY_RETENTION must be 0 (keep every delivery) or at least 86400 (a day), got 3600."
        assert refusal in result.stderr


@pytest.fixture
def noticed(owner):
    """Makes a notice, `days` old, of a user token of the owner's made 60 days ago whose expiry is `expires_in`
    from now (past when negative), revoked or not; returns it."""

    def _noticed(days: float, *, expires_in: timedelta, revoked: bool = False, state: str = "sent") -> TokenNotice:
        token, _ = token_create(name=f"laptop-{ApiToken.objects.count()}", user=owner, days=30)
        ApiToken.objects.filter(pk=token.pk).update(created_at=timezone.now() - timedelta(days=60),
                                                    expires_at=timezone.now() + expires_in,
                                                    revoked_at=timezone.now() if revoked else None)  # fmt: skip
        notice = TokenNotice.objects.create(token=token, kind=TokenNotice.Kind.SOON, user=owner, state=state)
        TokenNotice.objects.filter(pk=notice.pk).update(created_at=timezone.now() - timedelta(days=days))
        return notice

    return _noticed


def notices_kept(*notices: TokenNotice) -> list[bool]:
    return [TokenNotice.objects.filter(pk=notice.pk).exists() for notice in notices]


def test_token_notices_older_than_the_retention_go_once_their_token_no_longer_authenticates(noticed, settings):
    settings.DELIVERY_RETENTION = DAY
    gone = [noticed(3, expires_in=-timedelta(hours=1)), noticed(3, expires_in=timedelta(days=5), revoked=True),
            noticed(3, expires_in=-timedelta(days=1), state="failed")]  # fmt: skip
    recent = noticed(0.5, expires_in=-timedelta(hours=1))
    assert tasks.prune_deliveries() == 3
    assert notices_kept(*gone) == [False] * 3
    assert notices_kept(recent) == [True]


def test_a_token_notice_is_kept_however_old_while_its_token_authenticates_so_it_is_never_sent_twice(
        noticed, settings, smtp):
    settings.DELIVERY_RETENTION = DAY
    notice = noticed(3, expires_in=timedelta(days=10))  # its 14 days' notice went out 3 days ago
    assert tasks.prune_deliveries() == 0
    assert notices_kept(notice) == [True]
    notice.user.email = "owner@example.com"
    notice.user.save()
    tasks.warn_expiring_tokens()  # beat's next run finds it made and sent
    assert smtp.messages == [] and TokenNotice.objects.count() == 1


def test_a_retention_of_0_keeps_every_token_notice(noticed, settings):
    settings.DELIVERY_RETENTION = 0
    ancient = noticed(3650, expires_in=-timedelta(days=3600))
    assert tasks.prune_deliveries() == 0
    assert notices_kept(ancient) == [True]
