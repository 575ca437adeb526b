"""R13: a job whose pods do not all run is evicted and requeued with a backoff, saying why.

Two cases, one timeout (ADMISSION_TIMEOUT):

1. an admitted job whose pods have not all started that long after its admission (`reconcile` tells it);
2. a running job that has been short of replicas that long (`follow_short`): a pod lost with its node
   (failed or drained) and made again by the operator, that no node takes, whose image cannot be pulled or
   whose claim does not attach. Its other replicas hold their GPUs meanwhile, waiting for it: the partial
   gang that admission (R1) never lets start. An elastic job running at least the fewest replicas it trains
   with is not short: it trains on without the others (`JobStatus.waiting_pods` names none of them). The
   first pass that sees it short notes since when, on the job and on its timeline, and the job page shows why
   until every replica runs again.

Either way the job is suspended (an adopted one too: Gangway never deletes what it did not create) and
requeued with its place kept, after a backoff (`refusals.backoff`), as its next attempt, placed anew.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from core.durations import clock_time
from jobs.codes import Because
from jobs.models import Job, JobEvent
from jobs.transitions import note, transition
from scheduling.cluster.base import Cluster, JobStatus, Phase, WaitingPod
from scheduling.refusals import backoff
from scheduling.snapshot import to_cluster_job

SHOWN = 3  # waiting replicas a sentence names; it counts the others (`_who`)


def evict(job: Job, status: JobStatus, cluster: Cluster, now: datetime, *, code: str, message: str,
          after: str) -> None:  # fmt: skip
    """Suspends `job` (one whose object is suspended already is left as it is) and requeues it after a backoff,
    as its next attempt with no placement: two events, the eviction's `message` with its `code`, then the
    requeue; its reason says it backs off `after` what ("after a stuck admission"). Returns nothing."""
    wait = backoff(job.attempt)
    seconds = int(wait.total_seconds())
    if status.phase is not Phase.SUSPENDED:
        cluster.suspend_job(to_cluster_job(job))
    transition(job, Job.State.PREEMPTING, event_kind=JobEvent.Kind.EVICTED, code=code, message=message)
    transition(job, Job.State.QUEUED, code=Because.BACKOFF, attempt=F("attempt") + 1, placement=[], admitted_at=None,
               started_at=None, short_since=None, not_before=now + wait, reason_code=Because.BACKOFF,
               reason=f"Backing off for {seconds} s {after}.",
               message=f"Requeued with its place kept; not admitted again for {seconds} s.")  # fmt: skip


def follow_short(job: Job, status: JobStatus, cluster: Cluster, now: datetime) -> bool:
    """R13 for a running job whose object runs (RUNS): notes when some of its replicas wait to start
    (`JobStatus.waiting_pods`), clears the note once none does, and evicts it once it has been short for more
    than ADMISSION_TIMEOUT. Each change is a conditional update of the running job with its event (a job moved
    meanwhile is left to the next pass). Returns whether it evicted the job."""
    waiting = status.waiting_pods
    if not waiting:
        if job.short_since is not None:
            _no_longer_short(job, status, now)
        return False
    if job.short_since is None:
        _short(job, status, now)
        return False
    if (now - job.short_since).total_seconds() > settings.ADMISSION_TIMEOUT:
        evict(job, status, cluster, now, code=Because.SHORT_OF_REPLICAS, after="after running short of replicas",
              message=f"Evicted: only {status.running_pods} of {job.replica_count} replicas were running "
              f"{settings.ADMISSION_TIMEOUT} s after it ran short: {_who(waiting)} had not started{_why(waiting)}; "
              "its other replicas held their GPUs meanwhile.")  # fmt: skip
        return True
    reason = _reason(job, status, now)
    if reason != job.reason:  # what the cluster says of the waiting pods changed: the page says it as it is now
        Job.objects.filter(pk=job.pk, state=Job.State.RUNNING, reason_code=Because.SHORT_OF_REPLICAS).update(
            reason=reason)
    return False


def _short(job: Job, status: JobStatus, now: datetime) -> None:
    """The first pass that finds the running job short: since `now`, said on the job and on its timeline."""
    reason = _reason(job, status, now, since=now)
    marked = Job.objects.filter(pk=job.pk, state=Job.State.RUNNING, short_since__isnull=True).update(
        short_since=now, reason=reason, reason_code=Because.SHORT_OF_REPLICAS)
    if marked:
        job.short_since, job.reason, job.reason_code = now, reason, Because.SHORT_OF_REPLICAS
        note(job, JobEvent.Kind.NOTE, reason, code=Because.SHORT_OF_REPLICAS)


def _no_longer_short(job: Job, status: JobStatus, now: datetime) -> None:
    """No replica of the short job waits any more: since when it was short is cleared, with its reason, and its
    timeline says so. Its placement becomes where its replicas run when every one runs, as when it started: a
    replica made again may have started on another node."""
    fields: dict = {"short_since": None}
    if job.reason_code == Because.SHORT_OF_REPLICAS:
        fields.update(reason="", reason_code="")
    if len(status.nodes) == job.replica_count:
        fields["placement"] = list(status.nodes)
    if Job.objects.filter(pk=job.pk, state=Job.State.RUNNING, short_since=job.short_since).update(**fields):
        waited = int((now - job.short_since).total_seconds())
        for name, value in fields.items():
            setattr(job, name, value)
        total = job.replica_count
        # Fewer than all may run with none waiting: the others completed, or an elastic job trains without them.
        running = (f"All {total} replicas running again" if status.running_pods >= total else
                   f"No replica it needs waits to start any more ({status.running_pods} of {total} running)")
        note(job, JobEvent.Kind.NOTE, f"{running}, after {max(0, waited)} s short of some; it is no longer to be "
             "evicted.", code=Because.SHORT_OF_REPLICAS)  # fmt: skip


def _reason(job: Job, status: JobStatus, now: datetime, *, since: datetime | None = None) -> str:
    """"Only 3 of 4 replicas running: worker-2 waits to start (why); evicted and requeued if it has not started by
    about 14:05 UTC.": the evicting time ADMISSION_TIMEOUT after `since` (the job's `short_since` when None)."""
    at = (since or job.short_since) + timedelta(seconds=settings.ADMISSION_TIMEOUT)
    deadline = clock_time(timezone.localtime(at), timezone.localtime(now).date())
    waiting = status.waiting_pods
    waits, started = ("waits", "it has") if len(waiting) == 1 else ("wait", "they have")
    return (f"Only {status.running_pods} of {job.replica_count} replicas running: {_who(waiting)} {waits} to "
            f"start{_why(waiting)}; evicted and requeued if {started} not started by {deadline}.")


def _who(waiting: tuple[WaitingPod, ...]) -> str:
    """"worker-2", "worker-2 and worker-3", "worker-1, worker-2, worker-3 and 2 more": at most SHOWN named."""
    names = [pod.replica for pod in waiting[:SHOWN]]
    if len(waiting) > SHOWN:
        names.append(f"{len(waiting) - SHOWN} more")
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _why(waiting: tuple[WaitingPod, ...]) -> str:
    """" (why)" when every waiting replica the cluster says something of waits for one reason, else
    " (worker-2: why; worker-3: why)" for those `_who` names; "" when it says nothing."""
    whys = list(dict.fromkeys(_plain(pod.why) for pod in waiting if pod.why))
    if len(whys) == 1:
        return f" ({whys[0]})"
    each = "; ".join(f"{pod.replica}: {_plain(pod.why)}" for pod in waiting[:SHOWN] if pod.why)
    return f" ({each})" if each else ""


def _plain(why: str) -> str:
    """The cluster's words, set inside a sentence: without their closing full stop."""
    return why.strip().rstrip(".")
