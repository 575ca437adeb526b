"""Two submissions for a team's last queue slot at the same moment (real PostgreSQL, two connections): the
team's row lock orders them, so the second counts the first one's job and is refused; the cap holds."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from jobs import services
from jobs.models import Job, JobEvent
from jobs.services import QueueFull, job_submit
from jobs.spec import parse_spec
from tests.conftest import spec_data

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_submissions_for_the_last_slot_at_once_queue_one_and_refuse_the_other(settings, maps, monkeypatch):
    settings.MAX_QUEUED_PER_TEAM = 1
    filter_jobs = services.Job.objects.filter
    counted = threading.Barrier(2, timeout=5)

    def slow_filter(*args, **kwargs):
        found = filter_jobs(*args, **kwargs)
        if kwargs.get("state") == Job.State.QUEUED:
            try:
                counted.wait(timeout=1)  # without the lock, both would count 0 here before either writes
            except threading.BrokenBarrierError:
                pass  # the lock held the other submission back: it counts after this one commits
            time.sleep(0.2)
        return found

    monkeypatch.setattr(services.Job.objects, "filter", slow_filter)
    outcomes: dict[str, str] = {}

    def submit(name: str) -> None:
        try:
            job_submit(team=maps, spec=parse_spec(spec_data(name=name)))
            outcomes[name] = "queued"
        except QueueFull:
            outcomes[name] = "refused"
        finally:
            connections.close_all()

    threads = [threading.Thread(target=submit, args=(name,)) for name in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes.values()) == ["queued", "refused"]
    assert Job.objects.filter(team=maps, state=Job.State.QUEUED).count() == 1
    assert JobEvent.objects.filter(kind=JobEvent.Kind.SUBMITTED).count() == 1
