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
        held = "; its other replicas held their GPUs meanwhile" if status.running_pods else ""
        evict(job, status, cluster, now, code=Because.SHORT_OF_REPLICAS, after="after running short of replicas",
              message=f"Evicted: {running_of(status.running_pods, job.replica_count, past=True)} "
              f"{settings.ADMISSION_TIMEOUT} s after it ran short: {_who(waiting)} had not started{_why(waiting)}"
              f"{held}.")  # fmt: skip
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
        if status.running_pods >= total:
            again = ("Its only replica is running again, after {} s not running" if total == 1 else
                     f"All {total} replicas running again, after {{}} s short of some")
        else:
            again = (f"No replica it needs waits to start any more ({status.running_pods} of {total} running), "
                     "after {} s short of some")
        note(job, JobEvent.Kind.NOTE, f"{again.format(max(0, waited))}; it is no longer to be evicted.",
             code=Because.SHORT_OF_REPLICAS)


def _reason(job: Job, status: JobStatus, now: datetime, *, since: datetime | None = None) -> str:
    """"Only 3 of 4 replicas running: worker-2 waits to start (why); evicted and requeued if it has not started by
    about 14:05 UTC." ("Its only replica is not running: ..." for a job of one): the evicting time
    ADMISSION_TIMEOUT after `since` (the job's `short_since` when None)."""
    at = (since or job.short_since) + timedelta(seconds=settings.ADMISSION_TIMEOUT)
    deadline = clock_time(timezone.localtime(at), timezone.localtime(now).date())
    waiting = status.waiting_pods
    waits, started = ("waits", "it has") if len(waiting) == 1 else ("wait", "they have")
    lead = running_of(status.running_pods, job.replica_count)
    return (f"{lead[0].upper()}{lead[1:]}: {_who(waiting)} {waits} to start{_why(waiting)}; evicted and requeued "
            f"if {started} not started by {deadline}.")


def running_of(running: int, total: int, *, past: bool = False) -> str:
    """How many of a job's `total` replicas run, in words that read right for one and for none: "only 3 of 4
    replicas running", "none of its 4 replicas running", "its only replica is not running"; with `past`, "only
    3 of 4 replicas were running", "none of its 4 replicas was running", "its only replica was not running".
    The short job's reason and both evictions' messages (here and `reconcile`) say it so."""
    if total == 1 and running == 0:
        return f"its only replica {'was' if past else 'is'} not running"
    verb = "was running" if past and running == 0 else "were running" if past else "running"
    if running == 0:
        return f"none of its {total} replicas {verb}"
    return f"only {running} of {total} replica{'s' if total != 1 else ''} {verb}"


def _who(waiting: tuple[WaitingPod, ...]) -> str:
    """"worker-2", "worker-2 and worker-3", "worker-1, worker-2, worker-3 and 2 more": at most SHOWN named."""
    names = [pod.replica for pod in waiting[:SHOWN]]
    if len(waiting) > SHOWN:
        names.append(f"{len(waiting) - SHOWN} more")
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _why(waiting: tuple[WaitingPod, ...]) -> str:
    """" (why)" when every waiting replica waits for one reason the cluster gives (" (each: why)" when several
    wait), else
    " (worker-2: why; worker-3: why)" for those `_who` names; "" when it says nothing."""
    whys = list(dict.fromkeys(_plain(pod.why) for pod in waiting if pod.why))
    if len(whys) == 1 and all(pod.why for pod in waiting):
        # The cluster's words are of one replica ("its node was drained"): "each" when several wait for them.
        return f" ({whys[0]})" if len(waiting) == 1 else f" (each: {whys[0]})"
    each = "; ".join(f"{pod.replica}: {_plain(pod.why)}" for pod in waiting[:SHOWN] if pod.why)
    return f" ({each})" if each else ""


def _plain(why: str) -> str:
    """The cluster's words, set inside a sentence: without their closing full stop."""
    return why.strip().rstrip(".")
