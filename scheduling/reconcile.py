"""Reconcile job states with the cluster, level-triggered.

Each pass compares what the database says with what the cluster has and
corrects the difference, whatever edge was missed: a create or suspend that
never reached the cluster, a job running without an admission, a lost worker,
a job deleted by hand.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.codes import Because
from jobs.models import Job, JobEvent
from jobs.services import CHECKPOINT_STATES, NotRunning, job_checkpoint
from jobs.transitions import StaleJob, note, transition
from portal import triggers
from scheduling.adoption import adopt_outside_jobs, changed_reason
from scheduling.evictions import evict, follow_short, running_of
from scheduling.handed_back import given_back
from scheduling.cluster import outside as outside_objects
from scheduling.cluster.base import (
    ChangedOutside,
    Cluster,
    ClusterError,
    ClusterUnavailable,
    JobStatus,
    OutsideJob,
    Phase,
    RUNS,
    ServerFailing,
    on_one_object,
)
from scheduling.locks import lease
from scheduling.refusals import (
    cancel_refused, note_refused, requeue_for_victim, requeue_refused, stop_began, stop_refused, stop_victim,
)
from scheduling.snapshot import own_statuses, replica_defaults, replica_specs, to_cluster_job

log = logging.getLogger("gangway.reconcile")
RECONCILE_LOCK = "gangway.reconcile"
STOPPING = Job.STOPPING_STATES
# Objects of long-ended jobs deleted in one pass, at most: a backlog (the first pass after an upgrade to
# retention, or after ENDED_JOB_RETENTION is lowered) drains over passes instead of holding one for minutes.
EXPIRED_PER_PASS = 100
# What a pass reads of a job that is no longer open but that the cluster still lists: its object's
# namespace and name (`own_statuses`), its state and when it ended (`_stop_leftovers`, `_delete_expired`).
ENDED_FIELDS = ("id", "name", "cluster_name", "state", "finished_at", "team__slug")


@dataclass(frozen=True)
class Unstopped:
    """A job being preempted (or cancelled since) that the cluster refused to stop in this pass (or gave up on:
    it runs on), with the refusal and the event of its preemption: no admitted job is created while it still
    runs that was admitted after it was preempted or that is placed on its nodes (`_held_back`)."""

    job: Job
    error: ClusterError
    preempted: int  # the pk of the event that moved it to preempting, 0 when it has none

    @classmethod
    def of(cls, job: Job, error: ClusterError) -> Unstopped | None:
        """None for a job being cancelled that holds nothing back: one cancelled while it was admitted or
        running (every cycle since counted it, `held_until_stopped`, so no admission counted on its room), and a
        victim whose stop had gone through (held no more: its room is the job's it was preempted for)."""
        if job.state == Job.State.CANCELLING and not job.held_until_stopped:
            return None
        began = stop_began(job)
        if began is not None and began[1] == Job.State.CANCELLING:
            return None
        return cls(job, error, began[0] if began is not None else 0)


@dataclass
class ReconcileResult:
    changed: int = 0
    created: int = 0
    suspended: int = 0
    deleted: int = 0
    adopted: int = 0
    refused: int = 0
    skipped: bool = False
    error: str = ""

    @property
    def summary(self) -> str:
        if self.skipped:
            return "Another reconcile is running; nothing done."
        outside = ""
        if self.adopted or self.refused:
            outside = f" Adopted {self.adopted} jobs from elsewhere, refused {self.refused}."
        done = (f"Moved {self.changed} jobs, created {self.created}, suspended {self.suspended}, "
                f"deleted {self.deleted} cluster objects.{outside}")
        if not self.error:
            return done
        if not (self.changed or self.created or self.suspended or self.deleted or self.adopted or self.refused):
            return f"Cluster unreachable ({self.error}); nothing changed."
        return f"Cluster unreachable ({self.error}); the pass stopped there. Before that: {done}"


def reconcile(*, cluster: Cluster, now: datetime | None = None) -> ReconcileResult:
    """Bring job states in line with the cluster; returns what it corrected.

    1. Read every Gangway job the cluster has and the jobs created elsewhere that ask for a team's queue
       (one read: an adopted object is listed once); adopt those, and cancel the adopted ones deleted in
       the cluster (`adoption.adopt_outside_jobs`); record the checkpoints the cluster reports their pods
       saved (`_record_checkpoints`). A job adopted in this pass has no status yet: it is queued.
    2. For each job the database follows, jobs being stopped first, apply the
       one correction its pair of states calls for (see `_correct`); an adopted job's is read with its object
       as step 1 found it (a running one its owner suspended: `_stopped_by_owner`).
    3. Delete cluster jobs that belong to no Gangway job (orphans), never one Gangway adopted,
       and stop those of jobs that ended here but still run there (`_stop_leftovers`); then delete
       the objects of jobs that ended more than ENDED_JOB_RETENTION ago (`_delete_expired`).
    Each correction commits on its own under a lease (one reconcile at a time, `locks.lease`), so
    a cancel never waits behind a slow cluster call and a late error undoes nothing done before.
    """
    now = now or timezone.now()
    result = ReconcileResult()
    with lease(RECONCILE_LOCK, seconds=settings.CELERY_TASK_TIME_LIMIT + 60) as held:
        if not held:
            return ReconcileResult(skipped=True)
        try:
            # One read of the cluster's jobs, Gangway's and those from elsewhere: an adopted object carries
            # both labels, and is read once.
            listed = cluster.job_statuses(with_outside=True)
            outside = adopt_outside_jobs(cluster=cluster, now=now, found=listed.outside)
        except ClusterUnavailable as error:
            return ReconcileResult(error=str(error))
        result.adopted, result.refused, result.changed = outside.adopted, outside.refused, outside.cancelled
        jobs = list(Job.objects.filter(state__in=Job.OPEN_STATES).select_related("team", "tier").order_by("id"))
        known = {job.pk for job in jobs}
        # The jobs the cluster still lists that are not open: mostly ended ones kept there for
        # ENDED_JOB_RETENTION, thousands on a busy cluster. Only what names their object and says whether
        # and when they ended is read (`ENDED_FIELDS`); the one to stop is read whole (`_stop_ended`).
        others = {job.pk: job for job in Job.objects.filter(pk__in={status.job_id for status in listed} - known)
                  .select_related("team").only(*ENDED_FIELDS)}  # fmt: skip
        statuses = own_statuses(listed, {job.pk: job for job in jobs} | others)
        _record_checkpoints(jobs, statuses)
        objects = {item.uid: item for item in (listed.outside.jobs if listed.outside is not None else ()) if item.uid}
        # Jobs being stopped first: a victim is suspended before the job it made room for is created, and one
        # the cluster refuses to stop keeps that job, and any admitted since its preemption, from starting
        # (`_held_back`).
        unstopped: list[Unstopped] = []
        for job in sorted(jobs, key=lambda job: (job.state not in STOPPING, job.pk)):
            try:
                with on_one_object(cluster), transaction.atomic():
                    _correct(job, statuses.get(job.pk), cluster, now, result, unstopped,
                             obj=objects.get(job.cluster_uid) if job.adopted else None)
            except StaleJob:
                continue  # moved by a cycle or a user meanwhile; the next pass sees the new state
            except ClusterUnavailable as error:
                result.error = str(error)
                break
            except ClusterError as error:
                # The cluster refused this one job: it must not stop every other correction.
                stopping = job.state in STOPPING
                if _refused(job, error, now, statuses.get(job.pk)):
                    result.changed += 1
                held = Unstopped.of(job, error) if stopping else None
                if held is not None:  # still being stopped, or running on: either way it holds its nodes and quota
                    unstopped.append(held)
        if not result.error:
            _stop_leftovers(statuses, known, others, cluster, result)
        if not result.error:
            _delete_expired(statuses, others, cluster, now, result)
        if result.changed:
            # A job ended, was requeued or stopped (room may have opened), or runs on after all: plan again soon.
            triggers.trigger_on_commit(triggers.ADMISSION_CYCLE)
    return result


def _record_checkpoints(jobs: list[Job], statuses: dict[int, JobStatus]) -> None:
    """Records each checkpoint a job's own object reports (`JobStatus.checkpointed_at`: the simulated
    cluster's training, at the moment its log gives) later than the one stored, through the service the
    checkpoint endpoint uses, so R8 and the job page read it as a report from the job's pods.

    A pass writes only new checkpoints. Each is one conditional UPDATE of its own, in no transaction,
    after the cluster's read has committed: no simulated row is ever locked while a job row is. A job
    that left CHECKPOINT_STATES since this pass read it is left as it is.
    """
    for job in jobs:
        status = statuses.get(job.pk)
        at = status.checkpointed_at if status else None
        if at is None or job.state not in CHECKPOINT_STATES or (job.checkpointed_at and job.checkpointed_at >= at):
            continue
        try:
            job_checkpoint(job_id=job.pk, at=at)
        except (NotRunning, Job.DoesNotExist):
            continue  # ended, requeued or deleted meanwhile: nothing of it runs to have saved


def _stop_leftovers(statuses: dict[int, JobStatus], known: set[int], others: dict[int, Job], cluster: Cluster,
                    result: ReconcileResult) -> None:
    """Stop what runs in the cluster for no open job: orphans, and jobs that ended here.

    An orphan (no Gangway job) is deleted, never an adopted one. A job that ended here may
    still run there: a cancel that crossed the create of a cycle on another worker, or a
    create reported refused that went through. It is deleted as a cancel would (an adopted
    one suspended, unless it is its owner's again: `given_back`), with an event saying why. A
    refusal is logged and tried again next pass.
    """
    ended = {job_id: (job, status) for job_id, status in statuses.items()
             if job_id not in known and (job := others.get(job_id)) is not None and job.is_terminal
             and status.phase in RUNS}  # fmt: skip
    back = given_back(ended.values())
    for job_id, status in statuses.items():
        if job_id in known:
            continue
        job = others.get(job_id)
        try:
            with on_one_object(cluster):
                if job is None and not status.adopted:
                    cluster.delete_job(status.namespace, status.name, status.kind)
                    log.info("deleted orphan %s/%s: no Gangway job %s", status.namespace, status.name, job_id)
                    result.deleted += 1
                elif job_id in ended and job_id not in back:
                    _stop_ended(job, status, cluster, result)
        except ClusterUnavailable as error:
            result.error = str(error)
            return
        except ClusterError as error:
            log.warning("the cluster refused to stop %s/%s (job %s): %s", status.namespace, status.name, job_id, error)


def _delete_expired(statuses: dict[int, JobStatus], others: dict[int, Job], cluster: Cluster, now: datetime,
                    result: ReconcileResult) -> None:
    """Delete the objects of jobs Gangway created that ended more than ENDED_JOB_RETENTION ago, and
    so their pods, at most EXPIRED_PER_PASS a pass, the longest ended first.

    Without it the cluster keeps every job ever run (their pods too), and every cycle and every
    reconcile lists them all: a pass that costs more each day. The job's record and events stay;
    its page says its pods, and so their logs, are gone. An adopted object is its owner's, never
    deleted; one still running is `_stop_leftovers`' to stop. A refusal is logged and tried again next pass.
    """
    keep = settings.ENDED_JOB_RETENTION
    if not keep:
        return
    expired = sorted(
        (job.finished_at, job_id) for job_id, job in others.items()
        if job.is_terminal and job.finished_at is not None and (now - job.finished_at).total_seconds() > keep
        and job_id in statuses and not statuses[job_id].adopted and statuses[job_id].phase not in RUNS
    )  # fmt: skip
    for _, job_id in expired[:EXPIRED_PER_PASS]:
        status = statuses[job_id]
        try:
            with on_one_object(cluster):
                cluster.delete_job(status.namespace, status.name, status.kind)
        except ClusterUnavailable as error:
            result.error = str(error)
            return
        except ClusterError as error:
            log.warning("the cluster refused to delete %s/%s (job %s, ended): %s", status.namespace, status.name,
                        job_id, error)  # fmt: skip
            continue
        result.deleted += 1


def _stop_ended(job: Job, status: JobStatus, cluster: Cluster, result: ReconcileResult) -> None:
    """Stop the cluster job of a job that ended here (see `_stop_leftovers`); an event says so."""
    if status.adopted:  # never deleted: it is its owner's object; suspended as the whole job says
        cluster.suspend_job(to_cluster_job(Job.objects.select_related("team", "tier").get(pk=job.pk)))
        result.suspended += 1
    else:
        cluster.delete_job(status.namespace, status.name, status.kind)
        result.deleted += 1
    if not job.events.filter(code=Because.ENDED_HERE).exists():  # said once, however often its owner resumes it
        note(job, JobEvent.Kind.NOTE, f"Stopped in the cluster: it had ended here ({job.state}) but was still "
             f"{status.phase.lower()} there.", code=Because.ENDED_HERE)  # fmt: skip
    log.info("stopped %s/%s: job %s is %s", status.namespace, status.name, job.pk, job.state)


class CreateRefused(ClusterError):
    """The cluster refused to create (or resume) a job's object, as opposed to stopping it; `failing`
    when it was a server error (ServerFailing), not a verdict on the job; `changed` when it was an adopted
    job's object that its owner changed to ask otherwise (ChangedOutside), saying how: one that Gangway's own
    suspend stopped, its database write rolled back, then changed by its owner before the resume."""

    def __init__(self, message: str, *, failing: bool = False, changed: str = ""):
        super().__init__(message)
        self.failing = failing
        self.changed = changed


def _create(job: Job, cluster: Cluster, now: datetime) -> bool:
    """Creates the job's object (a suspended one is resumed); a refusal, a 500 of that object's
    namespace included, is a CreateRefused. Returns False when the server took the create and did not
    answer in time: the job stays as it is, and the next pass finds its object or creates it; until R13's
    ADMISSION_TIMEOUT has passed since its admission, when it is requeued as after a 500 (its object, should
    it turn up, is stopped as a queued job's)."""
    try:
        with on_one_object(cluster):
            cluster.create_job(to_cluster_job(job))
    except ServerFailing as error:
        if not error.unanswered or _stuck(job, now):
            raise CreateRefused(str(error), failing=True) from error
        log.warning("no answer in time to the create of job %s: %s", job.pk, error)
        return False
    except ChangedOutside as error:
        raise CreateRefused(str(error), changed=error.changed) from error
    except ClusterError as error:
        raise CreateRefused(str(error)) from error
    return True


def _refused(job: Job, refusal: ClusterError, now: datetime, status: JobStatus | None) -> bool:
    """A create of an admitted job refused: requeue it with a backoff, counted toward failing it
    unless it was a server error (`requeue_refused`). Any other refusal (the suspend of a stuck job or of a
    running one short of replicas, a victim's, a cancelled job's, a resume of a running job) is logged for
    operators and said once on the job; the next pass tries again, except for a victim the cluster has refused
    to stop for ADMISSION_TIMEOUT, which runs on (`stop_refused`). A victim or a cancelled job whose stop is
    refused, or fails, counts as running meanwhile (`stop_refused`, `cancel_refused`). A running adopted job
    whose object was changed to ask otherwise is not resumed: it is rejected (`_reject_stopped`). Returns whether
    the job went back to running, or was rejected."""
    error = str(refusal)
    job.refresh_from_db()
    if isinstance(refusal, CreateRefused) and job.state == Job.State.ADMITTED:
        requeue_refused(job, error, now, failing=refusal.failing)
        return False
    if isinstance(refusal, CreateRefused) and refusal.changed and job.state == Job.State.RUNNING:
        _reject_stopped(job, refusal.changed, now)
        return True
    log.warning("the cluster refused a correction of job %s (%s): %s", job.pk, job.state, error)
    if job.state == Job.State.PREEMPTING:
        return stop_refused(job, refusal, now)
    if job.state == Job.State.CANCELLING:
        # For a victim: a suspended object whose pods are still in their grace period counts as stopped, as in
        # `_correct`.
        cancel_refused(job, refusal, now, runs=status is not None and status.phase in RUNS)
        return False
    # A running job's create is a resume (its object suspended outside Gangway); anything else refused of an
    # admitted or running job is the suspend of its eviction (R13).
    # A resume the server failed comes as a CreateRefused marked `failing`, a stop's as ServerFailing itself.
    note_refused(job, "resume" if isinstance(refusal, CreateRefused) else "stop", error,
                 failing=isinstance(refusal, ServerFailing) or getattr(refusal, "failing", False))
    return False


def _correct(job: Job, status: JobStatus | None, cluster: Cluster, now: datetime, result: ReconcileResult,
             unstopped: list[Unstopped], *, obj: OutsideJob | None = None) -> None:  # fmt: skip
    """Apply the correction for one job: (database state, cluster phase) -> move. `obj` is an adopted job's
    object as this pass read it (None when it was not read, and for a job Gangway created)."""
    phase = status.phase if status else None
    state = job.state
    if state == Job.State.QUEUED:
        if phase in RUNS:
            # Running though no committed admission stands behind it (a create reported refused that
            # went through after all, or a crash in a version that created before it committed).
            # Adopting it would skip quota and room; it is suspended instead, as a preempted job is:
            # it keeps the work up to its last checkpoint (the simulated cluster too), and resumes
            # from there when a cycle admits it. Until then the cycles hold it and count it as a running job of
            # its team (`snapshot._left_running`); a suspend the cluster refuses deletes it instead, as a
            # victim's does, so that its room is freed.
            suspended = stop_victim(job, cluster)
            note(job, JobEvent.Kind.NOTE, "Stopped in the cluster: it was running without an admission; it "
                 "resumes from its last checkpoint when a cycle admits it.", code=Because.NOT_ADMITTED)  # fmt: skip
            _count_stop(result, suspended)
    elif state in (Job.State.ADMITTED, Job.State.RUNNING):
        _follow(job, status, cluster, now, result, unstopped, obj=obj)
    elif state == Job.State.PREEMPTING:
        if phase in (Phase.SUCCEEDED, Phase.FAILED):
            _finish(job, status, now)  # it ended before its suspend landed: nothing to resume
            result.changed += 1
            return
        if phase in RUNS:
            # Level-triggered: the cycle committed the preemption but its suspend may never have
            # reached the cluster (a crash, an outage). Suspending again is harmless. A refusal goes
            # to the caller (`_refused`), which gives up on it in time.
            _count_stop(result, stop_victim(job, cluster))
        if phase in (None, Phase.SUSPENDED, Phase.CREATED) or (status and status.running_pods == 0):
            # `not_before` and `stop_failed_at` cleared: the cluster may have refused, or failed, to stop it
            # for a while (`stop_refused`).
            transition(job, Job.State.QUEUED, message="Requeued with its original place in the queue; it will "
                       f"resume as attempt {job.attempt + 1}.", code=Because.REQUEUED, attempt=F("attempt") + 1,
                       placement=[], started_at=None, admitted_at=None, not_before=None,
                       stop_failed_at=None, short_since=None)  # fmt: skip
            result.changed += 1
    elif state == Job.State.CANCELLING:
        if phase in (Phase.SUCCEEDED, Phase.FAILED):
            # It ended on its own before its cancel landed: there was nothing to stop. It ends as the cluster
            # says, as a victim that finishes before its suspend lands does, its nodes kept and no longer counted
            # (`held_until_stopped`); an adopted one's object is left as it ended (`adoption` marks Failed only a
            # cancelled job's).
            note(job, JobEvent.Kind.NOTE, f"Its cancel came after it had ended on its own ({phase.lower()} in the "
                 "cluster); nothing was stopped.", code=Because.ENDED_BEFORE_CANCEL)  # fmt: skip
            _finish(job, status, now, held_until_stopped=False, stop_failed_at=None)
            result.changed += 1
            return
        if status is not None and job.adopted:
            cluster.suspend_job(to_cluster_job(job))  # never deleted: it is its owner's object
            result.suspended += 1
        elif status is not None:
            cluster.delete_job(status.namespace, status.name, status.kind)
            result.deleted += 1
        # Its placement stays, as a finished job's does: where it ran, for its page. The node map and the invariants
        # read open jobs only; the snapshot charges an ended job only while its object still runs (`_left_running`:
        # a cancel that crossed a create), and then where it ran.
        transition(job, Job.State.CANCELLED, message="Cancelled; its pods were stopped.", finished_at=now,
                   held_until_stopped=False, stop_failed_at=None)  # fmt: skip
        result.changed += 1


def _stopped_by_owner(job: Job, obj: OutsideJob, cluster: Cluster, now: datetime) -> None:
    """A running adopted job whose object is suspended without Gangway's mark: its owner suspended it (`kubectl
    patch`, which the admission policy allows). Gangway marks every suspend it sends
    (`manifests.SUSPENDED_BY_ANNOTATION`) and moves the job out of running with it (a preemption, an eviction, a
    cancel), so one still running with the mark is Gangway's own suspend whose database write rolled back. Its owner
    means it: Gangway does not resume it, nor admit it again. Changed in the same update to ask otherwise
    (`outside.demand_change`, read on `obj`, its object as this pass found it), it is rejected, saying what
    changed (`_reject_stopped`); else it is cancelled in Gangway, its nodes and its team's quota free at once,
    its object its owner's again, left suspended (`handed_back.given_back`): to run it again its owner creates
    it again, and Gangway queues the new job. Two moves in one transaction, with their events; its owner is told
    on the object too, in a Normal event (`kubectl describe`), as best it can be: an event the cluster does not
    take is logged and changes nothing."""
    defaults = replica_defaults(job.team)
    changed = outside_objects.demand_change(replica_specs(job, defaults), obj.manifest, defaults)
    if changed:
        _reject_stopped(job, changed, now)
        return
    transition(job, Job.State.CANCELLING, code=Because.SUSPENDED_OUTSIDE,
               message=f"Stopped by its owner: its {job.kind} {job.team.slug}/{job.cluster_name} was suspended in "
               "the cluster while it ran. Gangway leaves it suspended; its nodes and its team's quota are free.")  # fmt: skip
    transition(job, Job.State.CANCELLED, finished_at=now, position=None, team_position=None, eta=None,
               reservation=None, message=f"Cancelled: its owner suspended it. To run it again, delete its {job.kind} "
               f"and create it again suspended, with the label {outside_objects.QUEUE_LABEL}: {job.team.slug}; "
               "Gangway queues the new job.")  # fmt: skip
    released = (f"Gangway no longer counts this job (Gangway job #{job.pk}): it was suspended while it ran, so its "
                "nodes and its team's quota were given back, and Gangway leaves it suspended. To run it again, delete "
                f"it and create it again suspended, with the label {outside_objects.QUEUE_LABEL}: {job.team.slug}.")  # fmt: skip
    try:
        cluster.mark_outside(obj, released=released)
    except (ClusterError, ClusterUnavailable) as error:
        log.warning("job %s: the event telling its owner it is no longer counted was not written: %s", job.pk, error)


def _reject_stopped(job: Job, changed: str, now: datetime) -> None:
    """A running adopted job whose owner suspended its object (its pods stopped) and changed what it asks in
    the same update, which the admission policy allows: Gangway runs a job as it adopted it, so it is not
    resumed. It no longer holds its room and quota, and is rejected as a waiting job so changed is
    (`adoption.changed_reason`), the refusal written back on its object. Three moves in one transaction, the
    first two notes (the owner stopped it; nobody preempted it)."""
    reason = changed_reason(job, changed)
    transition(job, Job.State.PREEMPTING, event_kind=JobEvent.Kind.NOTE, code=Because.CHANGED_OUTSIDE,
               message=f"Stopped by its owner: its {job.kind} was suspended and changed in the cluster ({changed}).")
    transition(job, Job.State.QUEUED, event_kind=JobEvent.Kind.NOTE, code=Because.CHANGED_OUTSIDE,
               message="No longer running: its nodes and its team's quota are free.", placement=[], started_at=None,
               admitted_at=None, not_before=None, stop_failed_at=None)  # fmt: skip
    transition(job, Job.State.REJECTED, message=f"Rejected: {reason}", code=Because.CHANGED_OUTSIDE, reason=reason,
               reason_code=Because.CHANGED_OUTSIDE, finished_at=now, position=None, team_position=None, eta=None,
               reservation=None)  # fmt: skip


def _count_stop(result: ReconcileResult, suspended: bool) -> None:
    """Counts a stop `stop_victim` made: a suspend, or a delete when the cluster refused the suspend."""
    if suspended:
        result.suspended += 1
    else:
        result.deleted += 1


def _follow(job: Job, status: JobStatus | None, cluster: Cluster, now: datetime, result: ReconcileResult,
            unstopped: list[Unstopped], *, obj: OutsideJob | None = None) -> None:  # fmt: skip
    """An admitted or running job: start, finish, re-create, or evict when stuck (R13: an admission not started
    in time, or a running job short of replicas for as long, `evictions.follow_short`); an admitted one not
    created while a job being preempted that the cluster refused to stop still runs is requeued instead
    (`_held_back`); a running adopted one its owner suspended is theirs again (`_stopped_by_owner`, `obj`
    its object as this pass read it)."""
    phase = status.phase if status else None
    if status is None and job.adopted:
        return  # not labelled yet, or deleted by its owner: the adoption step relabels or cancels it
    if job.state == Job.State.ADMITTED and (status is None or phase is Phase.SUSPENDED):
        held = _held_back(job, unstopped)
        if held is not None:
            # Its cycle's apply phase never ran (a crash or an outage after the commit): a job with victims
            # starts once they have stopped, and this one still runs.
            requeue_for_victim(job, held.job, held.error, now)
            result.changed += 1
            return
    if status is None:
        # Level-triggered: the database says it should exist (admitted by a cycle whose create never
        # reached the cluster, or deleted by hand), so create it (same name: harmless).
        if _create(job, cluster, now):
            _created(job, again="was gone from the cluster (deleted outside Gangway): created again")
            result.created += 1
        return
    if phase is not Phase.SUSPENDED:
        _created(job)  # there: a create whose answer was lost (a timeout) went through after all
    if phase in (Phase.SUCCEEDED, Phase.FAILED):
        _finish(job, status, now)
        result.changed += 1
        return
    if phase is Phase.SUSPENDED and _stuck(job, now):
        # R13 before the resume: an admission the cluster never takes (an adopted job whose patch conflicts at
        # every try, its owner's controller writing it meanwhile) would otherwise be sent again at every pass.
        _evict_stuck(job, status, cluster, now,
                     why=f"its {job.kind} stayed suspended in the cluster: its admission was never written to it")  # fmt: skip
        result.changed += 1
        return
    if (phase is Phase.SUSPENDED and job.adopted and job.state == Job.State.RUNNING and obj is not None
            and not obj.suspended_by_gangway):  # fmt: skip
        # Not resumed: its owner suspended it. An admitted one is not told apart (its admission may not have
        # been written yet: a patch that conflicted, sent again below), nor one whose object this pass did not
        # read; one that carries Gangway's mark was suspended by Gangway (a preemption or an eviction whose
        # database write rolled back), and is resumed below.
        _stopped_by_owner(job, obj, cluster, now)
        result.changed += 1
        return
    if phase is Phase.SUSPENDED:
        # Suspended while the database says it should run (a preemption whose cycle rolled back,
        # or a person): resume it, as a create of a suspended job does.
        if _create(job, cluster, now):
            _created(job, again="was suspended outside Gangway: resumed")
            result.created += 1
        return
    if job.state == Job.State.RUNNING:
        if follow_short(job, status, cluster, now):
            result.changed += 1
        return
    total = job.replica_count
    if phase is Phase.RUNNING and status.running_pods >= total:
        started = f"all {total} replicas started" if total > 1 else "its replica started"
        transition(job, Job.State.RUNNING, message=f"Running: {started}.", started_at=now, short_since=None,
                   placement=list(status.nodes) or job.placement)  # fmt: skip
        result.changed += 1
        return
    if _stuck(job, now):
        _evict_stuck(job, status, cluster, now)
        result.changed += 1


def _held_back(job: Job, unstopped: list[Unstopped]) -> Unstopped | None:
    """The job being preempted (or a victim cancelled since), refused its stop in this pass, that keeps
    admitted `job` from being created; None when nothing does.

    Its victims do: each was preempted in the savepoint that admitted it, just before its admission's event.
    Nothing records which admission a victim was preempted for (the preemption's sentence names the job only
    within one team), so every job preempted before the admission counts, wherever it runs: a preemption for
    quota (R5, R6) may place the job on other nodes than its victim's, and were it created beside a victim
    that runs on, its team would hold more than its quota. A job whose admission owed nothing to such a
    victim waits one backoff with it, while the cluster refuses (ADMISSION_TIMEOUT at most, or for as long as it
    refuses the delete of a victim cancelled since) or fails, and the cycle that admits it again counts that
    victim as running (`snapshot.UNSTOPPED`). A job placed on such a victim's nodes is held back too, whenever
    that victim was preempted. A victim cancelled since counts as one while its pods run; a job cancelled
    while it ran never does (every cycle since counted it: `Job.held_until_stopped`)."""
    if not unstopped:
        return None
    moved = job.events.filter(to_state=Job.State.ADMITTED).exclude(from_state=Job.State.ADMITTED)  # not a note
    admitted = moved.order_by("-pk").values_list("pk", flat=True).first()
    return next((held for held in unstopped
                 if held.preempted < (admitted or 0) or not set(held.job.placement).isdisjoint(job.placement)),
                None)  # fmt: skip


def _stuck(job: Job, now: datetime) -> bool:
    """R13: whether an admitted job has not started within ADMISSION_TIMEOUT of its admission."""
    return (job.state == Job.State.ADMITTED and job.admitted_at is not None
            and (now - job.admitted_at).total_seconds() > settings.ADMISSION_TIMEOUT)  # fmt: skip


def _created(job: Job, *, again: str = "") -> None:
    """The job's object is there (created or resumed): it no longer says it waits for the cluster to create it.
    A running job's (`again` says what happened to its object) says so on its timeline: its pods start over."""
    if job.reason_code == Because.CREATE_PENDING:
        Job.objects.filter(pk=job.pk, reason_code=Because.CREATE_PENDING).update(reason="", reason_code="")
    if again and job.state == Job.State.RUNNING:
        note(job, JobEvent.Kind.NOTE, f"Its {job.kind} {again} on its nodes; its pods start over, from its last "
             "checkpoint if it saves them.", code=Because.CREATED_AGAIN)  # fmt: skip


def _finish(job: Job, status: JobStatus, now: datetime, **fields) -> None:
    """Ends the job as the cluster reports it: succeeded or failed, with `fields` updated too."""
    to = Job.State.SUCCEEDED if status.phase is Phase.SUCCEEDED else Job.State.FAILED
    word = "Succeeded" if to == Job.State.SUCCEEDED else "Failed"
    transition(job, to, message=f"{word}: {status.message or 'the training operator reported it.'}",
               finished_at=now, **fields)  # fmt: skip


def _evict_stuck(job: Job, status: JobStatus, cluster: Cluster, now: datetime, *, why: str = "") -> None:
    """R13: suspend a job whose pods did not all start in time (one whose object is suspended already is left
    as it is), and requeue it after a backoff (`evictions.evict`); the event says why (`why`, else the
    cluster's message)."""
    why = why or status.message or "its pods did not all start"
    evict(job, status, cluster, now, code=Because.STUCK_ADMISSION, after="after a stuck admission",
          message=f"Evicted: {running_of(status.running_pods, job.replica_count, past=True)} "
          f"{settings.ADMISSION_TIMEOUT} s after admission ({why}).")  # fmt: skip
