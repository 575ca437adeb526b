"""The apps below the loop ask for its tasks by name, once their transaction commits."""

import pytest
from celery import current_app
from django.db import transaction
from django.core.cache import cache
from kombu.exceptions import OperationalError

import scheduling.tasks
from portal import triggers


@pytest.fixture
def sent(monkeypatch):
    cache.delete_many([f"gangway:trigger:{name}" for name in
                       (triggers.ADMISSION_CYCLE, triggers.RECONCILE, triggers.SYNC_TENANTS)])  # fmt: skip
    names = []
    monkeypatch.setattr(current_app, "send_task", lambda name, **options: names.append(name))
    return names


def test_each_name_is_a_task_the_worker_registers():
    registered = {scheduling.tasks.admission_cycle.name, scheduling.tasks.reconcile.name,
                  scheduling.tasks.sync_tenants.name}  # fmt: skip
    assert registered == {triggers.ADMISSION_CYCLE, triggers.RECONCILE, triggers.SYNC_TENANTS}
    assert registered <= set(current_app.tasks)


def test_a_burst_of_triggers_sends_one_task(sent):
    for _ in range(5):
        triggers.trigger(triggers.ADMISSION_CYCLE)
    triggers.trigger(triggers.RECONCILE)
    assert sent == [triggers.ADMISSION_CYCLE, triggers.RECONCILE]


@pytest.mark.django_db(transaction=True)
def test_it_sends_only_once_the_transaction_commits(sent):
    with transaction.atomic():
        triggers.trigger_on_commit(triggers.ADMISSION_CYCLE, triggers.SYNC_TENANTS)
        assert sent == []
    assert sent == [triggers.ADMISSION_CYCLE, triggers.SYNC_TENANTS]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_change_sends_nothing(sent):
    with pytest.raises(RuntimeError), transaction.atomic():
        triggers.trigger_on_commit(triggers.ADMISSION_CYCLE)
        raise RuntimeError
    assert sent == []


def test_a_broker_that_is_down_is_logged_not_raised(monkeypatch, caplog, sent):
    def down(name, **options):
        raise OperationalError("connection refused")

    monkeypatch.setattr(current_app, "send_task", down)
    triggers.trigger(triggers.RECONCILE)
    assert "could not enqueue gangway.reconcile" in caplog.text


def test_after_a_refused_publish_nothing_is_tried_for_a_few_seconds(monkeypatch, caplog):
    """Each try against a broker that is down costs its connect timeout: a cycle committing sixty notable
    events would wait minutes, a cancel seconds, for publishes bound to fail."""
    tries = []

    def down():
        tries.append(1)
        raise OperationalError("timed out")

    clock = iter([100.0, 101.0, 102.0, 106.0])
    monkeypatch.setattr(triggers.time, "monotonic", lambda: next(clock))
    assert triggers.publish(down, "a") is False  # tried at 100, refused at 101: nothing tried until 106
    assert triggers.publish(down, "b") is False  # at 102: not tried
    assert len(tries) == 1 and "did not enqueue b: the broker was unreachable less than 5 s ago" in caplog.text
    assert triggers.publish(lambda: None, "c") is True  # at 106: tried again, and it went out
