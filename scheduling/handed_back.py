"""Which adopted jobs' objects are their owners' again: Gangway no longer stops them, and their pods count as
outside usage (R12). Read by the snapshot, reconcile and the loop's invariants, and by adoption itself."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Exists, OuterRef, Q

from jobs.codes import Because
from jobs.models import Job, JobEvent
from scheduling.cluster.base import JobStatus


def left_the_queue() -> Exists:
    """Whether a job was cancelled because its object left the queue or the cluster (DELETED_OUTSIDE), or because
    its owner suspended it while it ran (SUSPENDED_OUTSIDE): an expression to annotate jobs with."""
    return Exists(JobEvent.objects.filter(job=OuterRef("pk"), code__in=(Because.DELETED_OUTSIDE,
                                                                       Because.SUSPENDED_OUTSIDE)))


def given_back(pairs: Iterable[tuple[Job, JobStatus]]) -> set[int]:
    """The ids of the jobs of `pairs` (a job, the status of its own object) whose object Gangway no longer stops:
    an adopted job that ended here otherwise than by a person's cancel (rejected, or cancelled because its object
    left the queue or its owner suspended it) is its owner's again, never touched, and its pods are outside usage
    (R12). Gangway stops every other job's object that runs once the job has ended. One query, only when an
    adopted job has ended."""
    adopted = [job.pk for job, status in pairs if status.adopted and job.is_terminal]
    if not adopted:
        return set()
    return set(Job.objects.filter(pk__in=adopted).annotate(left_queue=left_the_queue())
               .filter(~Q(state=Job.State.CANCELLED) | Q(left_queue=True)).values_list("pk", flat=True))  # fmt: skip
