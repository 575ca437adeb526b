"""Writes on jobs: submit and cancel. Views, the API, commands and the CLI call these."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.quantities import format_memory
from jobs.codes import Because
from jobs.models import Job, JobEvent
from jobs.spec import JobSpec, SpecError, counted_replicas, spec_to_data
from jobs.transitions import transition
from portal import triggers
from scheduling.policy.model import Rejection
from tenants.models import Quota, Team
from tenants.selectors import gpu_types, tier_for


class IdempotencyConflict(Exception):
    """The idempotency key was used before with a different spec."""

    def __init__(self, job: Job):
        self.job = job
        super().__init__(
            f"Idempotency key {job.idempotency_key!r} was already used for job {job.name} (#{job.pk}) "
            "with a different spec; use a new key for a new job."
        )


class NeverFits(Exception):
    """The job could never run on this cluster under this team's quota (R10)."""

    def __init__(self, reason: str, code: str):
        self.reason, self.code = reason, code
        super().__init__(reason)


class QueueFull(Exception):
    """The team already has MAX_QUEUED_PER_TEAM jobs queued: a new one is refused until some start or are cancelled."""

    code = "queue_full"  # the API's `code`, beside the sentence

    def __init__(self, team: Team, queued: int, cap: int):
        self.team, self.queued, self.cap = team, queued, cap
        jobs = "job" if queued == 1 else "jobs"
        limit = "the most a team may queue" if queued <= cap else f"more than the {cap:,} a team may queue"
        super().__init__(f"Team {team.slug} already has {queued:,} {jobs} queued, {limit} (MAX_QUEUED_PER_TEAM); "
                         "wait for some to start or cancel some.")  # fmt: skip


class KatibTrial(Exception):
    """The job is a trial of a Katib sweep, which Katib creates and stops: a cancel here would leave
    its Trial waiting on a suspended job for good, and a copy would run outside its experiment."""

    CANCEL, RESUBMIT = "cancel", "resubmit"

    def __init__(self, job: Job, action: str):
        self.job, self.action = job, action
        trial = f"{job.name} (#{job.pk}) is trial {job.cluster_name} of Katib experiment {job.sweep.experiment}"
        if action == self.CANCEL:
            said = (f"{trial}, and Katib stops its trials: delete the trial in Katib (kubectl delete trial "
                    f"{job.cluster_name} -n {job.team.slug}) and Gangway ends this job once its trial is gone.")
        else:
            said = (f"{trial}, and Katib creates its trials: a copy submitted here would run outside the "
                    "experiment; to run more trials, raise the experiment's maxTrialCount.")
        super().__init__(said)


def refuse_if_trial(job: Job, action: str) -> None:
    """Raises KatibTrial when `job` is a trial of a Katib sweep, which Gangway neither cancels nor copies
    (`action`: KatibTrial.CANCEL or KatibTrial.RESUBMIT); returns nothing for any other job."""
    if job.is_trial:
        raise KatibTrial(job, action)


class PipelinesStep(Exception):
    """The job is a step a Kubeflow Pipelines run created: a copy submitted here would run outside the run
    (nothing would pass its outputs on, and the run would not wait for it)."""

    def __init__(self, job: Job):
        self.job = job
        super().__init__(f"{job.name} (#{job.pk}) is a step of Kubeflow Pipelines run {job.pipelines_run}, and "
                         "Pipelines creates its steps: a copy submitted here would run outside the run; to run it "
                         "again, retry the run in Pipelines.")  # fmt: skip


def refuse_copy(job: Job) -> None:
    """Raises what refuses a copy of `job` submitted in Gangway: KatibTrial for a trial of a Katib sweep,
    PipelinesStep for a step of a Kubeflow Pipelines run; returns nothing for any other job (one adopted
    from kubectl included: its copy is a Gangway job of its own)."""
    refuse_if_trial(job, KatibTrial.RESUBMIT)
    if job.pipelines_run:
        raise PipelinesStep(job)


def spec_digest(spec: JobSpec) -> str:
    return hashlib.sha256(json.dumps(spec_to_data(spec), sort_keys=True).encode()).hexdigest()


def check_spec_for_team(spec: JobSpec, team: Team):
    """The tier the job gets; raises SpecError for what the team's settings refuse.

    Replica limits (LimitRange-like) are checked here with the quota defaults
    filled in; whether the job could ever fit is the policy's call (R10).
    """
    tier, problem = tier_for(team, spec.tier)
    if problem:
        raise SpecError({"tier": [problem]})
    if problem := gpu_type_problem(spec):
        raise SpecError({"gpu_type": [problem]})
    return tier


def gpu_type_problem(spec: JobSpec) -> str:
    """Why the cluster cannot give the GPU types the spec names, in one sentence; "" when it can (or
    the spec names none). Read fresh from the GPU types an admin keeps, so a type added a moment ago
    is accepted."""
    if not spec.gpu_type:
        return ""
    known = [gpu_type.name for gpu_type in gpu_types()]
    if not known:
        return (f"This cluster has no GPU types (its GPUs are all of one kind), so it cannot honour "
                f"{', '.join(spec.gpu_type)}; leave gpu_type out.")  # fmt: skip
    unknown = [name for name in spec.gpu_type if name not in known]
    if unknown:
        which = "GPU type " + unknown[0] if len(unknown) == 1 else "GPU types " + ", ".join(unknown)
        return f"No {which} on this cluster; its types are {', '.join(known)}."
    return ""


def counted_spec(spec: JobSpec, team: Team) -> JobSpec:
    """The spec as quota and placement count it: /dev/shm added to each replica's memory.

    Raises SpecError when a replica names no memory, asks for shm, and its team has no
    memory default to start from. Reads the team's default only when the spec asks for shm.
    """
    if not spec.shm:
        return spec
    default = (
        Quota.objects.filter(team=team, resource="memory").values_list("default_per_replica", flat=True).first() or 0
    )
    if not default:
        missing = {
            f"replicas[{index}].memory": [
                f"Give a memory request: the {format_memory(spec.shm)} /dev/shm is counted in it, and team "
                f"{team.slug} has no default memory per replica."
            ]
            for index, group in enumerate(spec.replicas)
            if not group.memory
        }
        if missing:
            raise SpecError(missing)
    return replace(spec, replicas=counted_replicas(spec, default))


def job_check(*, team: Team, spec: JobSpec):
    """The tier the job would get if submitted now; writes nothing.

    Raises SpecError for what the team's settings refuse and NeverFits for a
    job that can never run: the answers job_submit gives, for the form's YAML
    import, which fills the form without submitting.
    """
    tier = check_spec_for_team(spec, team)
    _refuse_if_never_fits(team, counted_spec(spec, team), tier)
    return tier


# R10 is the policy's to decide, over the nodes the loop last read: scheduling, which sits
# above jobs, names its judge when it loads (SchedulingConfig.ready), so submission asks
# the policy without importing the loop's app.
FitJudge = Callable[..., Rejection | None]
_fit_judge: dict[str, FitJudge] = {}


def judge_fit_with(judge: FitJudge) -> None:
    """Names the function that answers R10: called as judge(team=, spec=, tier=), it returns
    the policy's refusal of the job, or None when the job could fit some day."""
    _fit_judge["R10"] = judge


def _refuse_if_never_fits(team: Team, spec: JobSpec, tier) -> None:
    try:
        judge = _fit_judge["R10"]
    except KeyError:
        raise ImproperlyConfigured("No R10 judge: the scheduling app must be in INSTALLED_APPS.") from None
    rejection = judge(team=team, spec=spec, tier=tier)
    if rejection is not None:
        raise NeverFits(rejection.reason, rejection.code)


def job_submit(
    *, team: Team, spec: JobSpec, owner=None, via: str = "form", idempotency_key: str = "", queue_cap: bool = True
) -> tuple[Job, bool]:
    """Queue a new job; returns (job, created).

    With an idempotency key already used for the same spec, returns the
    original job and False, even when the team's queue is full. Raises SpecError
    for a spec the team's settings refuse, NeverFits for a job that can never run,
    QueueFull when the team already has MAX_QUEUED_PER_TEAM jobs queued (nothing
    is written for any of these), and IdempotencyConflict for a reused key with a
    different spec.

    `queue_cap=False` is for jobs adopted from the cluster (scheduling.adoption):
    they exist there already, and refusing them would not remove them, so the cap
    does not apply to them (they do count towards it for later submissions).
    """
    tier = check_spec_for_team(spec, team)
    counted = counted_spec(spec, team)
    digest = spec_digest(spec)
    if idempotency_key:
        existing = Job.objects.filter(team=team, idempotency_key=idempotency_key).first()
        if existing is not None:
            return _same_or_conflict(existing, digest), False
    _refuse_if_never_fits(team, counted, tier)
    now = timezone.now()
    try:
        with transaction.atomic():
            if queue_cap and (replay := _refuse_if_queue_full(team, idempotency_key)) is not None:
                return _same_or_conflict(replay, digest), False
            job = Job.objects.create(
                team=team, owner=owner, submitted_via=via[:100], name=spec.name, kind=spec.kind, runtime=spec.runtime,
                image=spec.image, command=list(spec.command), args=list(spec.args), env=dict(spec.env),
                replicas=counted.replicas_as_data(), gpu_total=spec.gpu_total, tier=tier,
                volumes=[volume.as_data() for volume in spec.volumes], shm=spec.shm,
                max_runtime=spec.max_runtime, gpu_type=list(spec.gpu_type), idempotency_key=idempotency_key,
                spec_digest=digest, queued_at=now, sim_duration=spec.sim_duration, sim_fail=spec.sim_fail,
                reason="Waiting for the next admission cycle.", reason_code=Because.NEW,
            )  # fmt: skip
            JobEvent.objects.create(
                job=job, kind=JobEvent.Kind.SUBMITTED, to_state=job.state, actor=owner,
                message=f"Submitted by {owner or via}: {_count(spec.gpu_total, 'GPU')} over "
                f"{_count(sum(g.count for g in spec.replicas), 'replica')}, tier {tier.name}.",
            )  # fmt: skip
            _refuse_if_types_changed(spec)
            triggers.trigger_on_commit(triggers.ADMISSION_CYCLE)
    except IntegrityError:
        # A concurrent submission with the same key won the insert.
        existing = Job.objects.filter(team=team, idempotency_key=idempotency_key).first()
        if not idempotency_key or existing is None:
            raise
        return _same_or_conflict(existing, digest), False
    return job, True


def _refuse_if_queue_full(team: Team, idempotency_key: str) -> Job | None:
    """Raises QueueFull when `team` has MAX_QUEUED_PER_TEAM (> 0) jobs queued; returns the job a
    concurrent submission just made with `idempotency_key`, or None.

    Called in the submission's transaction: the team's row is locked first, so two submissions
    cannot both pass the count for the last slot (FOR NO KEY UPDATE: rows that merely reference
    the team, such as adopted jobs, are not held up). A submission that waited for the lock
    behind one with the same key finds that one's job here and replays it, not a full queue.
    """
    cap = settings.MAX_QUEUED_PER_TEAM
    if not cap:
        return None
    Team.objects.select_for_update(no_key=True).filter(pk=team.pk).values_list("pk").get()
    if idempotency_key and (existing := Job.objects.filter(team=team, idempotency_key=idempotency_key).first()):
        return existing
    queued = Job.objects.filter(team=team, state=Job.State.QUEUED).count()
    if queued >= cap:
        raise QueueFull(team, queued, cap)
    return None


def _refuse_if_types_changed(spec: JobSpec) -> None:
    """Raises SpecError, in the submission's transaction after its job is written, when a GPU type the spec
    names was renamed or deleted since `check_spec_for_team` read the types; returns nothing otherwise.

    A type change refuses while open jobs name the type, counting them under every team's row lock
    (`tenants.services`), and the job's insert waits for that lock (it references its team). Read again
    now, the types settle it: either the change committed first and is seen here, or it waits for this
    job and counts it.
    """
    if spec.gpu_type and (problem := gpu_type_problem(spec)):
        raise SpecError({"gpu_type": [problem]})


def _count(number: int, word: str) -> str:
    return f"{number} {word}" if number == 1 else f"{number} {word}s"


def _same_or_conflict(job: Job, digest: str) -> Job:
    if job.spec_digest != digest:
        raise IdempotencyConflict(job)
    return job


def job_cancel(*, job: Job, actor=None, via: str = "") -> Job:
    """Ask for the job to stop. A queued job is cancelled at once; others stop in the next reconcile.

    Returns the job, unchanged when it has already ended or is being cancelled. Raises KatibTrial, and
    changes nothing, for an open trial of a Katib sweep: Katib stops it (reconcile ends it here then).
    """
    who = actor or via or "an operator"
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if not job.cancellable:
            return job
        refuse_if_trial(job, KatibTrial.CANCEL)
        was_queued = job.state == Job.State.QUEUED
        # Its pods may run until reconcile stops them: it counts as running meanwhile (`snapshot.UNSTOPPED`).
        # Not a victim whose stop went through (its room is the job's it was preempted for); one the cluster
        # refused, or failed, to stop keeps the mark of that (`refusals.cancel_refused`).
        refused = (job.stop_failed_at or job.not_before) if job.state == Job.State.PREEMPTING else None
        held = job.state in Job.ACTIVE_STATES or refused is not None
        transition(job, Job.State.CANCELLING, message=f"Cancel requested by {who}.", actor=actor,
                   held_until_stopped=held, stop_failed_at=refused)  # fmt: skip
        if was_queued:
            # Its wait ends with it: no reason to wait, no place, no estimated start, no reserved room.
            message = "Cancelled before it was admitted; nothing ran."
            transition(
                job, Job.State.CANCELLED, message=message, actor=actor, finished_at=timezone.now(), position=None,
                team_position=None, eta=None, reservation=None, reason=message, reason_code="",
            )  # fmt: skip
        triggers.trigger_on_commit(triggers.ADMISSION_CYCLE if was_queued else triggers.RECONCILE)
    return job


# A job whose pods may be running reports checkpoints: admitted (its pods can start before
# reconcile marks it running), running, and preempting (its grace period, exactly when a training
# script saves; the next run resumes from that checkpoint).
CHECKPOINT_STATES = (Job.State.ADMITTED, Job.State.RUNNING, Job.State.PREEMPTING)


class NotRunning(Exception):
    """The job is in none of CHECKPOINT_STATES: no pod of it runs, so it has no work to checkpoint."""


def job_checkpoint(*, job_id: int, at) -> Job:
    """Record that the job's training saved a checkpoint `at` (R8: least unsaved work is preempted first).

    Returns the job. Raises Job.DoesNotExist for no such job and NotRunning when it is not in
    CHECKPOINT_STATES. A conditional UPDATE, so a job that ended or was requeued meanwhile is left as it is,
    and so is one that already holds a checkpoint as late: a report never moves it back. The endpoint
    reports its own moment; reconcile, the moment a cluster says the job's pods saved (`JobStatus`).
    """
    moved = (Job.objects.filter(pk=job_id, state__in=CHECKPOINT_STATES).exclude(checkpointed_at__gte=at)
             .update(checkpointed_at=at))  # fmt: skip
    job = Job.objects.get(pk=job_id)
    if not moved and job.state not in CHECKPOINT_STATES:
        raise NotRunning(f"Job {job.name} (#{job.pk}) is {job.state}; only an admitted, running or preempting "
                         "job reports checkpoints.")  # fmt: skip
    return job
