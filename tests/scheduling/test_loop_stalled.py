"""The loop stopped without a failure to show (beat or the worker gone, its lock held by a lost session, a
database that takes no writes): /readyz and the staff banner say so, and the cycle's lock is let go by a
session that went quiet in the middle of a cycle."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connections, transaction
from django.test import override_settings
from django.utils import timezone

from scheduling import locks
from scheduling.locks import try_transaction_lock
from scheduling.loop import CYCLE_LOCK
from scheduling.models import Cycle

pytestmark = pytest.mark.django_db


def test_readyz_fails_once_no_cycle_has_run_for_longer_than_one_could_take(client):
    """No cycle row comes, and none of them is a failure."""
    assert client.get("/readyz").status_code == 200, "no cycle yet: nothing to judge"
    Cycle.objects.create(started_at=timezone.now() - timedelta(minutes=10), duration=0.1)

    response = client.get("/readyz")

    assert response.status_code == 503 and response.json()["failing"] == ["cycles"]
    assert "No admission cycle has run for 10 min" in response.json()["checks"]["cycles"]["error"]
    assert client.get("/readyz?exclude=cluster&exclude=cycles").status_code == 200  # the web's probe: pages stay
    Cycle.objects.create(started_at=timezone.now(), duration=0.1)
    assert client.get("/readyz").status_code == 200


def test_staff_see_a_banner_while_the_loop_has_stopped(client):
    Cycle.objects.create(started_at=timezone.now() - timedelta(minutes=10), duration=0.1)
    staff = get_user_model().objects.create_user("ops", password="pw", is_staff=True)
    engineer = get_user_model().objects.create_user("eng", password="pw")

    client.force_login(engineer)
    assert b"admission loop has stopped" not in client.get("/").content
    client.force_login(staff)
    assert b"The admission loop has stopped: no cycle has run for 10 min" in client.get("/").content
    Cycle.objects.create(started_at=timezone.now(), duration=0.1)
    assert b"admission loop has stopped" not in client.get("/").content


@override_settings(CELERY_TASK_TIME_LIMIT=100, ADMISSION_INTERVAL=5, CYCLE_FAILURES_BEFORE_UNREADY=3)
def test_a_cycle_as_long_as_the_time_limit_does_not_look_stalled(client):
    Cycle.objects.create(started_at=timezone.now() - timedelta(seconds=110), duration=100)

    assert client.get("/readyz").json()["checks"]["cycles"]["status"] == "ok"


@pytest.mark.django_db(transaction=True)
def test_the_cycle_lock_of_a_worker_gone_quiet_mid_cycle_is_let_go(monkeypatch, settings):
    """A worker whose node lost its network (or whose process froze) mid-cycle leaves its session idle in
    its transaction: PostgreSQL would keep the lock until TCP keepalive gives up, two hours by default,
    and every cycle meanwhile is skipped. The lock's transaction ends once quiet longer than a cycle may take."""
    settings.CELERY_TASK_TIME_LIMIT = 1
    monkeypatch.setattr(locks, "LOST_SESSION_MARGIN", 1, raising=False)
    held, gone = threading.Event(), threading.Event()

    def quiet_worker() -> None:
        try:
            with transaction.atomic():
                assert try_transaction_lock(CYCLE_LOCK)
                held.set()
                gone.wait(timeout=15)  # says nothing more, as if its node were cut off
        except DatabaseError:
            pass  # the server ended the session (idle-in-transaction timeout)
        finally:
            connections.close_all()

    def try_lock(outcome: list) -> None:
        try:
            with transaction.atomic():
                outcome.append(try_transaction_lock(CYCLE_LOCK))
        finally:
            connections.close_all()

    worker = threading.Thread(target=quiet_worker)
    worker.start()
    assert held.wait(timeout=15)
    outcomes: list[bool] = []
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not any(outcomes):
            attempt = threading.Thread(target=try_lock, args=(outcomes,))
            attempt.start()
            attempt.join()
            time.sleep(0.25)
    finally:
        gone.set()
        worker.join()
    assert outcomes[0] is False, "held while its worker may still be working"
    assert outcomes[-1] is True, "still held 8 s after its worker went quiet"
