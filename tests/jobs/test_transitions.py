"""The job state machine: every legal move works and is recorded; every other move is refused."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from jobs.models import Job, JobEvent
from jobs.transitions import ALLOWED, IllegalTransition, StaleJob, transition

STATES = [state.value for state in Job.State]
LEGAL = [(old, new) for old, targets in ALLOWED.items() for new in sorted(targets)]
ILLEGAL = [(old, new) for old in STATES for new in STATES if new not in ALLOWED.get(old, ())]


def put_in_state(job: Job, state: str) -> Job:
    Job.objects.filter(pk=job.pk).update(state=state)
    job.refresh_from_db()
    return job


def test_the_design_moves_are_all_allowed():
    design = {
        ("queued", "admitted"), ("admitted", "running"), ("running", "succeeded"), ("running", "failed"),
        ("queued", "cancelling"), ("admitted", "cancelling"), ("running", "cancelling"), ("cancelling", "cancelled"),
        ("admitted", "preempting"), ("running", "preempting"), ("preempting", "queued"), ("queued", "rejected"),
    }  # fmt: skip
    assert design <= set(LEGAL)


@pytest.mark.parametrize(("old", "new"), LEGAL, ids=[f"{o} to {n} is allowed" for o, n in LEGAL])
def test_it_moves_and_records_an_event(submit, old, new):
    job = put_in_state(submit(), old)
    transition(job, new, message=f"moved to {new}", code="test")
    job.refresh_from_db()
    assert job.state == new
    event = job.events.order_by("-id").first()
    assert (event.from_state, event.to_state, event.message, event.code) == (old, new, f"moved to {new}", "test")


@pytest.mark.parametrize(("old", "new"), ILLEGAL, ids=[f"{o} to {n} is refused" for o, n in ILLEGAL])
def test_it_refuses_an_illegal_move_and_writes_nothing(submit, old, new):
    job = put_in_state(submit(), old)
    events = JobEvent.objects.count()
    with pytest.raises(IllegalTransition, match=f"cannot go from {old} to {new}"):
        transition(job, new, message="nope")
    job.refresh_from_db()
    assert job.state == old
    assert JobEvent.objects.count() == events


def test_a_stale_instance_cannot_move_the_job(submit):
    job = submit()
    other = Job.objects.get(pk=job.pk)
    transition(other, Job.State.CANCELLING, message="first")
    with pytest.raises(StaleJob):
        transition(job, Job.State.ADMITTED, message="second")
    assert Job.objects.get(pk=job.pk).state == Job.State.CANCELLING
    assert not JobEvent.objects.filter(job=job, message="second").exists()


def test_fields_move_with_the_state(submit):
    job = transition(submit(), Job.State.ADMITTED, message="in", placement=["node-01", "node-01"])
    job.refresh_from_db()
    assert job.placement == ["node-01", "node-01"]


@pytest.mark.django_db(transaction=True)
def test_two_transactions_moving_the_same_job_never_both_succeed(tiers):
    """Two connections race to move one queued job; PostgreSQL lets exactly one win."""
    from tests.conftest import make_team, make_user, spec_data
    from jobs.services import job_submit
    from jobs.spec import parse_spec

    team = make_team("maps", tiers, gpu=8)
    user = make_user("racer", teams=[team])
    job, _ = job_submit(team=team, spec=parse_spec(spec_data()), owner=user)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def race(target: str) -> None:
        try:
            mine = Job.objects.get(pk=job.pk)  # both read "queued"
            barrier.wait()
            with transaction.atomic():
                transition(mine, target, message=f"to {target}")
                time.sleep(0.3)  # hold the row so the other UPDATE has to wait for this commit
            outcomes.append("won")
        except StaleJob:
            outcomes.append("lost")
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(t,)) for t in (Job.State.ADMITTED, Job.State.CANCELLING)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["lost", "won"]
    moved = Job.objects.get(pk=job.pk)
    assert moved.state in (Job.State.ADMITTED, Job.State.CANCELLING)
    assert JobEvent.objects.filter(job=job).exclude(kind=JobEvent.Kind.SUBMITTED).count() == 1


def test_every_state_is_either_open_or_terminal():
    from jobs.models import Job

    assert set(Job.OPEN_STATES) | set(Job.TERMINAL_STATES) == set(Job.State.values)
    assert not set(Job.OPEN_STATES) & set(Job.TERMINAL_STATES)
