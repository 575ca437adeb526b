"""The job state machine: the only way a job's state changes.

Each move is checked against `ALLOWED`, claimed with a conditional
`UPDATE ... WHERE state = <old>` (so two workers moving the same job never
both succeed: the loser's update matches no row), and recorded as a JobEvent
in the same transaction.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models.expressions import Combinable
from django.dispatch import Signal
from django.utils import timezone

from jobs.models import Job, JobEvent

State = Job.State

# Sent with `job` and `event` inside the transaction that moved the job; receivers that act
# outside the database (notifications) defer their work to its commit. Apps above jobs listen
# here, so jobs imports none of them.
job_moved = Signal()

ALLOWED: dict[str, frozenset[str]] = {
    State.QUEUED: frozenset({State.ADMITTED, State.CANCELLING, State.REJECTED}),
    # A short job can finish before any reconcile saw it running; a job the cluster
    # refuses to create goes back to the queue.
    State.ADMITTED: frozenset({State.QUEUED, State.RUNNING, State.PREEMPTING, State.CANCELLING, State.SUCCEEDED, State.FAILED}),
    State.RUNNING: frozenset({State.SUCCEEDED, State.FAILED, State.PREEMPTING, State.CANCELLING}),
    # A victim may finish before its suspend lands; one the cluster keeps refusing to stop runs on.
    State.PREEMPTING: frozenset({State.QUEUED, State.RUNNING, State.CANCELLING, State.SUCCEEDED, State.FAILED}),
    # A job that ends on its own before its cancel lands ends as it did.
    State.CANCELLING: frozenset({State.CANCELLED, State.SUCCEEDED, State.FAILED}),
}

# The event a move records unless the caller names another (e.g. EVICTED).
EVENT_FOR_STATE: dict[str, str] = {
    State.ADMITTED: JobEvent.Kind.ADMITTED,
    State.RUNNING: JobEvent.Kind.RUNNING,
    State.PREEMPTING: JobEvent.Kind.PREEMPTED,
    State.QUEUED: JobEvent.Kind.REQUEUED,
    State.SUCCEEDED: JobEvent.Kind.SUCCEEDED,
    State.FAILED: JobEvent.Kind.FAILED,
    State.CANCELLING: JobEvent.Kind.CANCEL_REQUESTED,
    State.CANCELLED: JobEvent.Kind.CANCELLED,
    State.REJECTED: JobEvent.Kind.REJECTED,
}


class IllegalTransition(Exception):
    """The state machine has no such move."""

    def __init__(self, job: Job, to: str):
        self.job, self.to = job, to
        allowed = ", ".join(sorted(ALLOWED.get(job.state, ()))) or "none (it has ended)"
        super().__init__(f"Job {job.name} (#{job.pk}) cannot go from {job.state} to {to}; allowed: {allowed}.")


class StaleJob(Exception):
    """Someone else moved the job first; reload it and decide again."""

    def __init__(self, job: Job, to: str):
        self.job, self.to = job, to
        super().__init__(f"Job {job.name} (#{job.pk}) is no longer {job.state}; not moved to {to}.")


def can_move(job: Job, to: str) -> bool:
    return to in ALLOWED.get(job.state, ())


def transition(
    job: Job,
    to: str,
    *,
    message: str,
    code: str = "",
    actor=None,
    event_kind: str | None = None,
    **fields,
) -> Job:
    """Move `job` to state `to`, update `fields` with it, and record an event.

    Returns the same instance, updated. Raises IllegalTransition for a move the
    machine does not allow and StaleJob when the row is no longer in the state
    the instance had (nothing is written then).
    """
    if not can_move(job, to):
        raise IllegalTransition(job, to)
    old = job.state
    now = timezone.now()
    with transaction.atomic():
        claimed = Job.objects.filter(pk=job.pk, state=old).update(state=to, updated_at=now, **fields)
        if claimed != 1:
            raise StaleJob(job, to)
        event = JobEvent.objects.create(
            job=job,
            kind=event_kind or EVENT_FOR_STATE[to],
            from_state=old,
            to_state=to,
            message=message,
            code=code,
            actor=actor,
        )
        job_moved.send(sender=Job, job=job, event=event)
    job.state = to
    job.updated_at = now
    computed = [name for name, value in fields.items() if isinstance(value, Combinable)]
    for name, value in fields.items():
        if name not in computed:
            setattr(job, name, value)
    if computed:
        job.refresh_from_db(fields=computed)
    return job


def note(job: Job, kind: str, message: str, *, code: str = "", actor=None) -> JobEvent:
    """Record a decision that does not change the state (e.g. a new wait reason)."""
    event = noted(job, kind, message, code=code, actor=actor)
    event.save()
    return event


def noted(job: Job, kind: str, message: str, *, code: str = "", actor=None) -> JobEvent:
    """The event `note` records, unsaved: for a caller recording many at once (`bulk_create`)."""
    return JobEvent(job=job, kind=kind, from_state=job.state, to_state=job.state, message=message, code=code,
                    actor=actor)
