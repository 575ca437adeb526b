"""What the loop and reconcile do when the cluster refuses: a job's create (requeued or held with a
backoff, failed or rejected at last), a victim's stop (deleted instead; for a job from elsewhere, which
Gangway never deletes, the job it was preempted for is kept from starting, and the victim runs on once
the cluster has refused to stop it for ADMISSION_TIMEOUT: a server failure is no refusal), a cancelled job's
stop (it counts as running until its stop goes through), and the events that say so.

A refused create is a verdict on its job: REFUSALS_BEFORE_FAILING in a row fail it. A server error (a 500
of one namespace) is none, and a victim's refusal is never counted against the job it was preempted for.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from core.durations import clock_time
from jobs.codes import Because
from jobs.models import Job, JobEvent
from jobs.transitions import StaleJob, note, transition
from scheduling.cluster.base import Cluster, ClusterError, ServerFailing, on_one_object
from scheduling.policy.model import Admission
from scheduling.snapshot import STOPS_IT, World, to_cluster_job

log = logging.getLogger("gangway.admission")
REFUSALS_BEFORE_FAILING = 5  # a job whose create the cluster refuses this many times in a row fails (`requeue_refused`)


def requeue_refused(job: Job, error: str, now: datetime, *, failing: bool = False) -> None:
    """Requeue an admitted job whose create the cluster refused, keeping its place, after a backoff.

    The backoff doubles with each refusal since the job last ran (`backoff`). At the
    REFUSALS_BEFORE_FAILING-th refusal in a row the job fails instead, saying why: such a refusal
    (a webhook's verdict, a quota of the namespace) rarely passes by itself. A server error
    (`failing`: a 500 of the object's namespace, such as a webhook that cannot be called) is no
    verdict on the job and passes once mended: it backs off alike but never fails the job, which
    would otherwise be lost to a few minutes' outage of a webhook. Used by the apply phase and by
    reconcile when it creates a job again.
    """
    refusals, wait, code = _refusals(job, failing)
    error = error.rstrip(". ")
    try:
        if not failing and refusals >= REFUSALS_BEFORE_FAILING:
            message = (f"Failed: the cluster refused to create it {refusals} times in a row, the last time: "
                       f"{error}. {_fix(job)}")  # fmt: skip
            transition(job, Job.State.FAILED, message=message, code=code, placement=[],
                       finished_at=now, reason=message, reason_code=code)  # fmt: skip
        else:
            what = ("failed to create it (a server error, no verdict on the job)" if failing
                    else "refused to create it")  # fmt: skip
            message = (f"The cluster {what}: {error}. Requeued with its place kept; "
                       f"tried again in {int(wait.total_seconds())} s.")  # fmt: skip
            transition(job, Job.State.QUEUED, message=message, code=code, placement=[],
                       admitted_at=None, not_before=now + wait, reason=message, reason_code=code)  # fmt: skip
    except StaleJob:
        return  # cancelled meanwhile; nothing was created
    log_decision("refused", job, code, message)


def hold_refused(job: Job, error: str, now: datetime, *, failing: bool = False) -> None:
    """Back off a queued job whose create the cluster would refuse (its dry run, before anyone was
    preempted for it), keeping its place; counted with the refusals of its creates (`requeue_refused`),
    so the REFUSALS_BEFORE_FAILING-th refusal in a row rejects it. A job moved meanwhile is left be."""
    refusals, wait, code = _refusals(job, failing)
    error = error.rstrip(". ")
    if not failing and refusals >= REFUSALS_BEFORE_FAILING:
        message = (f"Rejected: the cluster refused to create it {refusals} times in a row, the last time "
                   f"(tried before preempting anyone for it): {error}. {_fix(job)}")  # fmt: skip
        try:
            transition(job, Job.State.REJECTED, message=message, code=code, finished_at=now, reason=message,
                       reason_code=code, position=None, team_position=None, eta=None, reservation=None)  # fmt: skip
        except StaleJob:
            return
    else:
        what = ("failed to try creating it (a server error, no verdict on the job)" if failing
                else "would refuse to create it")  # fmt: skip
        message = (f"The cluster {what}: {error}. Asked before preempting anyone for it, so nobody was; "
                   f"tried again in {int(wait.total_seconds())} s, with its place kept.")  # fmt: skip
        moved = Job.objects.filter(pk=job.pk, state=Job.State.QUEUED).update(
            not_before=now + wait, reason=message, reason_code=code, position=None, team_position=None, eta=None,
            reservation=None,
        )  # fmt: skip
        if not moved:
            return
        note(job, JobEvent.Kind.WAITING, message, code=code)
    log_decision("refused", job, code, message)


def _refusals(job: Job, failing: bool) -> tuple[int, timedelta, str]:
    """For one more refusal of the job's create: the refusals in a row since it last ran (a server
    error counts none), the backoff (doubling with every try, server errors included) and its code."""
    ran = job.events.filter(kind=JobEvent.Kind.RUNNING).order_by("-pk").values_list("pk", flat=True).first()
    since = job.events.filter(pk__gt=ran or 0)
    tries = since.filter(code__in=(Because.CLUSTER_REFUSED, Because.CLUSTER_FAILING)).count() + 1
    refusals = since.filter(code=Because.CLUSTER_REFUSED).count() + (0 if failing else 1)
    return refusals, backoff(tries), Because.CLUSTER_FAILING if failing else Because.CLUSTER_REFUSED


def _fix(job: Job) -> str:
    return "Its owner changes its object and creates it again." if job.adopted else "Change the job and submit it again."


def backoff(attempt: int) -> timedelta:
    """How long a job evicted for a stuck admission (or refused by the cluster) waits: 30 s doubling
    per attempt (or refusal), at most 1 hour."""
    return timedelta(seconds=min(3600, 30 * 2 ** max(0, attempt - 1)))


def stop_victim(job: Job, cluster: Cluster) -> bool:
    """Suspends a job being preempted, or a queued one found running (reconcile); returns True, or False when
    its object was deleted instead. When the cluster refuses (a webhook, a missing permission), its object is
    deleted, so that its room frees: it is created again when admitted, from its last checkpoint. An adopted
    object is never deleted: the refusal goes to the caller (reconcile tries again at every pass and says so
    on the job)."""
    target = to_cluster_job(job)
    try:
        with on_one_object(cluster):
            cluster.suspend_job(target)
        return True
    except ClusterError as error:
        if job.adopted:
            raise
        with on_one_object(cluster):  # refused too: the caller's to say, and the others go on
            cluster.delete_job(target.namespace, target.name, target.kind)
        note(job, JobEvent.Kind.NOTE, f"The cluster refused to suspend it ({str(error).rstrip('. ')}); its "
             f"{job.kind} was deleted instead so that its room frees. It starts again from its last "
             "checkpoint when admitted.", code=Because.STOP_REFUSED)  # fmt: skip
        return False


def stop_refused(job: Job, error: ClusterError, now: datetime) -> bool:
    """The cluster refused to stop `job`, being preempted (`stop_victim`); returns whether Gangway gave
    up on its preemption: the job runs on.

    The first refusal is remembered in `not_before` (a job being preempted waits for no admission; its
    preemption clears the field), so that how long the cluster has refused is read from when it began,
    whatever ADMISSION_TIMEOUT says meanwhile. Until ADMISSION_TIMEOUT has passed since, the job stays
    preempting, asked to stop at every reconcile and saying so once (`note_refused`), and it counts as a
    running job of its team, in its quota as well as its room (`snapshot.UNSTOPPED`): nothing is admitted
    into what it still holds, the job it was preempted for included (`requeue_for_victim`). Refused after
    that, it goes back to running, an event saying why; a later cycle decides again whether it may be a
    victim (the dry run of its suspend, for a job from elsewhere). A job moved meanwhile is left be.

    A server failure (`ServerFailing`: a 500 of its namespace, a webhook that cannot be called) is no
    refusal: like an outage it starts no clock and never makes the job run on; the job stays preempting
    and is asked again at every reconcile. Its pods run on meanwhile, so from the first failure
    (`stop_failed_at`) it counts as running in its team's quota and its room as a refused one does
    (`snapshot.UNSTOPPED`), however long the failures last.
    """
    if isinstance(error, ServerFailing):
        with transaction.atomic():  # when the cluster first failed, with the event of that failure
            if job.stop_failed_at is None:
                first = Job.objects.filter(pk=job.pk, state=Job.State.PREEMPTING, stop_failed_at__isnull=True)
                first.update(stop_failed_at=now)
                job.stop_failed_at = Job.objects.filter(pk=job.pk).values_list("stop_failed_at", flat=True).first()
            note_refused(job, "stop", str(error), failing=True)
        return False
    if job.not_before is None:
        with transaction.atomic():  # when the cluster first refused, with the event of that refusal
            first = Job.objects.filter(pk=job.pk, state=Job.State.PREEMPTING, not_before__isnull=True)
            if first.update(not_before=now):
                job.not_before = now
            else:  # recorded meanwhile: its time says until when Gangway asks
                job.not_before = Job.objects.filter(pk=job.pk).values_list("not_before", flat=True).first() or now
            note_refused(job, "stop", str(error), until=_trying_until(job))
        return False
    refused_for = int((now - job.not_before).total_seconds())
    if refused_for < settings.ADMISSION_TIMEOUT:
        note_refused(job, "stop", str(error), until=_trying_until(job))
        return False
    message = (f"Runs on: the cluster refused to stop it for {refused_for} s ({str(error).rstrip('. ')}), so its "
               f"preemption is given up; it runs as any job of team {job.team.slug} does, counted in its quota, "
               "and a later cycle may preempt it again.")  # fmt: skip
    try:
        # Never stopped, so never preempted: the count the loop raised (`loop._preempt`) is taken back with the move.
        transition(job, Job.State.RUNNING, message=message, code=Because.RUNS_ON, event_kind=JobEvent.Kind.NOTE,
                   not_before=None, stop_failed_at=None,
                   preemption_count=Greatest(F("preemption_count") - 1, Value(0)))  # fmt: skip
    except StaleJob:
        return False  # cancelled, or stopped after all, meanwhile
    log_decision("kept running", job, Because.RUNS_ON, message)
    return True


def stop_began(job: Job) -> tuple[int, str] | None:
    """The event that began the stop `job` is in (or was last in): its last move from admitted or running to
    being preempted or cancelled, as (event pk, the state it moved to); None when it has none. A victim
    cancelled while being preempted began its stop with its preemption."""
    began = job.events.filter(to_state__in=Job.STOPPING_STATES, from_state__in=Job.ACTIVE_STATES)
    return began.order_by("-pk").values_list("pk", "to_state").first()


def cancel_refused(job: Job, error: ClusterError, now: datetime, *, runs: bool) -> None:
    """The cluster refused, or failed, to stop `job`, being cancelled (the delete of its object; the suspend of
    a job from elsewhere). Its pods may run on, so it counts as a running job of its team, in its quota as well
    as its room (`held_until_stopped`, `snapshot.UNSTOPPED`), never a victim, until its stop goes through: a
    person asked for it, so Gangway never gives up, and asks again at every reconcile. When the cluster first
    refused or failed is kept (`stop_failed_at`; a victim cancelled carries the mark of its refused stop over,
    `jobs.services.job_cancel`).

    A job cancelled while admitted or running stays held whatever phase its object shows (one being resumed
    still reads as suspended until its operator clears the condition). A victim cancelled is held as the
    cluster lists it at this pass (`runs`): an object that only stays, suspended once its stop went through,
    holds nothing, its room being the job's it was preempted for."""
    began = stop_began(job)
    held = runs if began is not None and began[1] == Job.State.PREEMPTING else True  # a victim's, or not
    with transaction.atomic():  # when the cluster first refused or failed, with the event that says so
        if job.stop_failed_at is None or held != job.held_until_stopped:
            still_cancelling = Job.objects.filter(pk=job.pk, state=Job.State.CANCELLING)
            still_cancelling.filter(stop_failed_at__isnull=True).update(stop_failed_at=now)
            still_cancelling.update(held_until_stopped=held)
            job.stop_failed_at = job.stop_failed_at or now
            job.held_until_stopped = held
        note_refused(job, "stop", str(error), failing=isinstance(error, ServerFailing))


def note_refused(job: Job, what: str, error: str, *, failing: bool = False, until: str = "") -> None:
    """Says on the job that the cluster refused to `what` it ("stop", "resume"), or failed to (`failing`: a
    server error), once until something else happens to it, however often it is tried again; Gangway tries
    again at every reconcile, and `until` (`_trying_until`: a victim's stop) says when it gives up."""
    did = f"failed to {what} it (a server error, no refusal)" if failing else f"refused to {what} it"
    message = f"The cluster {did} ({error.rstrip('. ')}); Gangway tries again at every reconcile{until}."
    last = job.events.order_by("-pk").first()
    if last is None or last.message != message:
        note(job, JobEvent.Kind.NOTE, message, code=Because.STOP_REFUSED)


def gives_up_at(job: Job) -> datetime:
    """When Gangway gives up on stopping `job`, an UNSTOPPED victim (`stop_refused`): ADMISSION_TIMEOUT after
    the cluster's first refusal, which `not_before` keeps."""
    return job.not_before + timedelta(seconds=settings.ADMISSION_TIMEOUT)


def _trying_until(job: Job) -> str:
    """The words that end a victim's refusal note: until when Gangway asks, and what happens then. The same at
    every refusal of one preemption (read from its first), so the note is said once."""
    until = clock_time(timezone.localtime(gives_up_at(job)), timezone.localtime(job.not_before).date())
    return (f" until {until}, {settings.ADMISSION_TIMEOUT} s after its first refusal; refused then, its preemption "
            f"is given up and it runs on, counted in the quota of team {job.team.slug}")  # fmt: skip


def still_held(world: World, now: datetime) -> dict[str, str]:
    """Sentences on the jobs being preempted that the cluster refuses, or fails, to stop, on the jobs being
    cancelled whose pods may still run (`snapshot.UNSTOPPED`), and on the jobs whose objects run though the
    database does not count them (`World.left_running`), by team: each still holds its GPUs in its team's
    quota until Gangway gives up on a refused victim (`stop_refused`: at the first refusal past its bound,
    which a server error delays), or, failed (a server error), cancelled or left running, until its stop goes
    through. For a job of that team waiting for quota (`waits.record_waits`); empty when no team holds one.
    Such a job is named: the reader is of its team."""
    today = timezone.localtime(now).date()
    said: dict[str, list[str]] = {}
    for job in world.jobs.values():
        if not job.gpu_total:
            continue
        if str(job.pk) in world.left_running:
            being = Job.State(job.state).label.lower()  # queued, or ended here: "cancelled"
            why = f"its object runs in the cluster all the same; {STOPS_IT}."
        elif job.state == Job.State.CANCELLING and job.held_until_stopped:
            being = "being cancelled"
            why = "its pods may still run; Gangway stops them at its next reconcile."
            if job.stop_failed_at is not None:
                why = ("the cluster refused or failed to stop it when last asked; Gangway asks again at every "
                       "reconcile.")  # fmt: skip
        elif job.state != Job.State.PREEMPTING:
            continue
        elif job.not_before is not None:
            being = "being preempted"
            until = clock_time(timezone.localtime(gives_up_at(job)), today)
            why = f"the cluster refuses to stop it; Gangway tries until {until}, then lets it run on."
            if gives_up_at(job) <= now:  # refused, then failed since (a server error is no refusal), or not asked yet
                why = (f"the cluster refuses to stop it; past {until}, Gangway lets it run on at the cluster's next "
                       "refusal (a server error is none).")  # fmt: skip
        elif job.stop_failed_at is not None:
            being = "being preempted"
            why = "the cluster fails to stop it (a server error); Gangway asks again at every reconcile."
        else:
            continue
        gpus = f"{job.gpu_total} {job.assigned_gpu_type + ' ' if job.assigned_gpu_type else ''}GPU"
        gpus += "" if job.gpu_total == 1 else "s"
        said.setdefault(job.team.slug, []).append(
            f"Job {job.name} (#{job.pk}), {being}, still holds {gpus} of the team's quota: {why}")
    return {team: " ".join(sentences) for team, sentences in said.items()}


def victim_refused(world: World, admission: Admission, cluster: Cluster) -> tuple[Job, ClusterError] | None:
    """The first adopted victim of `admission` whose suspend the cluster would refuse (its dry run), with the
    refusal; None when every one would be let stop. Raises ClusterUnavailable when the cluster does not answer.

    Only adopted victims are asked: one Gangway created whose suspend is refused is deleted instead, which
    frees its room (`stop_victim`)."""
    for victim_id in admission.victims:
        victim = world.jobs[victim_id]
        if not victim.adopted:
            continue
        try:
            with on_one_object(cluster):
                cluster.check_suspend(to_cluster_job(victim))
        except ClusterError as error:
            return victim, error
    return None


def _victim_named(victim: Job, preemptor: Job) -> str:
    """A victim as the preemptor's owner may read of it: by name in the same team, else by its team alone."""
    if victim.team_id == preemptor.team_id:
        return f"job {victim.name} (#{victim.pk})"
    return f"a job of team {victim.team.slug}"


def _why_unstopped(victim: Job, preemptor: Job, error: ClusterError) -> str:
    """The cluster's refusal, for the preemptor's owner: in full for a job of the same team; for another
    team's job only that it was refused (the refusal names that team's object), the rest logged."""
    if victim.team_id == preemptor.team_id:
        return f" ({str(error).rstrip('. ')})"
    return ""


def _victim_backoff(job: Job) -> timedelta:
    """The backoff of one more wait on a victim that could not be stopped: doubling with each such wait
    since the job last ran."""
    ran = job.events.filter(kind=JobEvent.Kind.RUNNING).order_by("-pk").values_list("pk", flat=True).first()
    return backoff(job.events.filter(pk__gt=ran or 0, code=Because.VICTIM_REFUSED).count() + 1)


def hold_for_victim(job: Job, victim: Job, error: ClusterError, now: datetime) -> None:
    """Back off a queued job whose adopted victim the cluster would not let stop (the suspend's dry run,
    before anyone was preempted for it), keeping its place. Never counted towards failing or rejecting the
    job: the refusal is the victim's. A job moved meanwhile is left be."""
    wait = _victim_backoff(job)
    message = (f"Waiting: it would preempt {_victim_named(victim, job)}, but the cluster would refuse to suspend "
               f"it{_why_unstopped(victim, job, error)}, and Gangway never deletes a job from elsewhere, so it "
               f"could not make room. Nobody was preempted for it; tried again in {int(wait.total_seconds())} s, "
               "with its place kept.")  # fmt: skip
    if _held(job, message, now + wait):
        log.warning("job %s not admitted: the cluster would refuse to suspend job %s, its victim: %s", job.pk,
                    victim.pk, error)  # fmt: skip


def hold_for_unstopped(job: Job, victim: Job, now: datetime) -> None:
    """Back off a queued job whose plan preempts `victim`, a job being preempted already that the cluster
    refuses, or fails, to stop (`stop_refused`), one being cancelled and not stopped yet (`cancel_refused`), or
    one whose object runs though the database does not count it (`snapshot._left_running`): it counts as
    running until its stop goes through or Gangway gives up on it, yet preempting it would free nothing. Its
    place is kept, never counted towards failing it; a job moved meanwhile is left be."""
    wait = _victim_backoff(job)
    if victim.state == Job.State.CANCELLING:
        why = "which is being cancelled and counts as running until its pods have stopped"
    elif victim.state != Job.State.PREEMPTING:  # queued or ended, its object left running (`World.left_running`)
        why = f"whose object runs in the cluster though it is {Job.State(victim.state).label.lower()} here"
    else:
        failed = victim.not_before is None and victim.stop_failed_at is not None  # a server error, no refusal
        cannot = "fails to stop (a server error)" if failed else "refuses to stop"
        why = f"which is being preempted already but which the cluster {cannot}"
    message = (f"Waiting: it would preempt {_victim_named(victim, job)}, {why}, so it could not make room. "
               f"Nobody was preempted for it; tried again in {int(wait.total_seconds())} s, with its place "
               "kept.")  # fmt: skip
    _held(job, message, now + wait)


def _held(job: Job, message: str, until: datetime) -> bool:
    """Keeps a queued job out of the plans until `until`, saying `message` as its reason and in an event;
    returns whether it was still queued."""
    moved = Job.objects.filter(pk=job.pk, state=Job.State.QUEUED).update(
        not_before=until, reason=message, reason_code=Because.VICTIM_REFUSED, position=None, team_position=None,
        eta=None, reservation=None,
    )  # fmt: skip
    if not moved:
        return False
    note(job, JobEvent.Kind.WAITING, message, code=Because.VICTIM_REFUSED)
    log_decision("held", job, Because.VICTIM_REFUSED, message)
    return True


def requeue_for_victim(job: Job, victim: Job, error: ClusterError, now: datetime) -> None:
    """Requeue an admitted job, not created, one of whose victims the cluster refused (or, a server error,
    failed) to stop (cancelled since, or not): that victim still holds the room the job was admitted into. Its
    place is kept, after a backoff; never counted towards failing it. A job cancelled meanwhile is left be
    (nothing was created)."""
    wait = _victim_backoff(job)
    did = "failed to stop it (a server error)" if isinstance(error, ServerFailing) else "refused to stop it"
    message = (f"Not started: {_victim_named(victim, job)}, preempted for it, could not be stopped: the cluster "
               f"{did}{_why_unstopped(victim, job, error)}. A job with victims starts once they have "
               f"stopped; requeued with its place kept, tried again in {int(wait.total_seconds())} s.")  # fmt: skip
    try:
        transition(job, Job.State.QUEUED, message=message, code=Because.VICTIM_REFUSED, placement=[],
                   admitted_at=None, not_before=now + wait, reason=message, reason_code=Because.VICTIM_REFUSED)  # fmt: skip
    except StaleJob:
        return
    log_decision("requeued", job, Because.VICTIM_REFUSED, message)


def log_decision(action: str, job: Job, rule: str, reason: str) -> None:
    """One log line per decision; the fields are also attached for a structured formatter."""
    fields = {"job": job.pk, "team": job.team.slug, "rule": rule, "reason": reason}
    log.info("%s job=%s team=%s rule=%s: %s", action, job.pk, job.team.slug, rule, reason, extra=fields)
