"""Test processes running real workers at once on one Redis never take or empty each other's queues
(tests/workers.py): each owns the broker keys under its own prefix."""

from __future__ import annotations

import os

import pytest
from celery import Celery
from django.conf import settings

from portal.celery import app
from scheduling.tasks import ping
from tests.workers import PREFIX_VARIABLE, celery_worker, forget, forget_own

# The broker keys of another test process, as its settings would name them.
OTHER = f"gangway-test-other-{os.getpid()}:"


@pytest.fixture
def other_process():
    """A Celery client as another test process has one: its tasks go under OTHER's keys."""
    other = Celery("other", broker=settings.CELERY_BROKER_URL, backend=settings.CELERY_RESULT_BACKEND,
                   set_as_current=False)  # the tasks here stay this process's
    other.conf.broker_transport_options = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, "global_keyprefix": OTHER}
    yield other
    forget(OTHER)


def waiting(queue: str) -> int:
    """How many tasks of this process wait in `queue` (the app's own connection reads its own keys)."""
    with app.connection_for_write() as broker:
        return broker.default_channel.client.llen(queue)


@pytest.mark.worker
def test_a_worker_another_test_process_starts_neither_empties_nor_takes_this_ones_tasks(transactional_db,
                                                                                       other_process):  # fmt: skip
    forget_own()  # what earlier tests of this process left queued (tasks sent with no worker running)
    mine = ping.apply_async(ignore_result=False)  # this process has no worker yet: its task waits
    assert waiting("celery") == 1

    # Another test process starts its worker (emptying its own keys first) and sends it a task: it runs it.
    with celery_worker(**{PREFIX_VARIABLE: OTHER}) as theirs:
        assert other_process.send_task("gangway.ping", ignore_result=False).get(timeout=60) == "pong", theirs.stdout
        assert waiting("celery") == 1  # this process's task was neither emptied nor taken

    with celery_worker(flush=False):
        assert mine.get(timeout=60) == "pong"
    assert waiting("celery") == 0
