"""One admission cycle, in five phases: read, plan, commit, apply, record.

Intent first, then the cluster. The cycle commits every decision (admissions
with their placement, preemptions, rejections, waiting reasons, each with its
event) before it makes a single cluster call that changes anything (the dry
runs it asks for before preempting store nothing), and the calls it then makes
only carry out what is committed. Every call is idempotent (deterministic names),
so a crash anywhere leaves one of two things:
- before the commit: nothing (the transaction rolls back, the cluster was not touched);
- after it: committed decisions not yet carried out, which reconcile finishes
  (an admitted job missing from the cluster is created, a job being preempted
  that still runs is suspended) or the next cycle's reading counts as taken room.
The database therefore never says less is taken than the cluster has, and a
cycle can never admit into room it cannot see.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.codes import Because
from jobs.models import Job
from jobs.transitions import StaleJob, transition
from scheduling import cluster_words, records
from scheduling.cluster.base import (
    Cluster,
    ClusterError,
    ClusterUnavailable,
    JobStatus,
    NodeInfo,
    OutsidePod,
    ServerFailing,
    on_one_object,
)
from scheduling.locks import try_transaction_lock
from scheduling.policy import plan as make_plan, team_gpus_to_dict
from scheduling.policy.model import Admission, Plan
from scheduling.refusals import (
    hold_for_unstopped, hold_for_victim, hold_refused, log_decision, requeue_for_victim, requeue_refused, stop_refused,
    stop_victim, victim_refused,
)
from scheduling.snapshot import World, build_world, claim_namespaces, to_cluster_job
from scheduling.waits import record_waits

log = logging.getLogger("gangway.admission")
CYCLE_LOCK = "gangway.admission_cycle"


@dataclass
class CycleResult:
    admitted: int = 0
    preempted: int = 0
    rejected: int = 0
    waiting: int = 0
    written: int = 0  # waiting jobs whose reason, places, estimated start or reservation were written
    skipped: bool = False
    error: str = ""  # the cluster could not be reached (for operators: it may name the API server)
    refused: bool = False  # `error` is the cluster refusing the read (a permission), not an outage
    # The plan's GPU figures per team, as the plan JSON gives them; None when nothing was planned.
    gpu_usage: list[dict] | None = None

    @property
    def summary(self) -> str:
        if self.skipped:
            return "Another admission cycle is running; nothing done."
        if self.refused:
            return self.error  # the sentence says that jobs stay queued and which rules to check
        if self.error:
            return f"Cluster unreachable ({self.error}); jobs stay queued."
        return f"Admitted {self.admitted}, preempted {self.preempted}, rejected {self.rejected}, waiting {self.waiting}."


@dataclass(frozen=True)
class Reading:
    """What the cluster said at the start of a cycle."""

    nodes: list[NodeInfo]
    # Pods that take room outside any Gangway job (R12): those Gangway did not create, and the labelled
    # pods of no job object (`JobStatuses.strays`: a deleted job's, still terminating; a bare copy).
    outside: list[OutsidePod]
    statuses: list[JobStatus]
    # The claims of each namespace where a queued job mounts one, by name, or why the cluster did not list them.
    claims: dict[str, set[str] | str] = field(default_factory=dict)


@dataclass
class Decided:
    """One committed admission and its victims, for the apply phase."""

    job: Job
    victims: list[Job] = field(default_factory=list)


def admission_cycle(*, cluster: Cluster, now: datetime | None = None) -> CycleResult:
    """Run one cycle; returns what it decided (skipped when another cycle holds the lock).

    1. Read: take the single-flight lock, read the cluster (nodes, outside
       pods, every Gangway job's pods) and the database into a snapshot. If
       the cluster cannot be reached, queued jobs say so and nothing else changes.
    2. Plan: the pure policy. Each admission that preempts has its create
       tried first as a dry run, and the suspend of each adopted victim (which
       Gangway can only suspend, never delete); a job the cluster would refuse,
       or whose victim it would not let stop (or refuses to stop already), backs
       off, and the plan is made again without it (`_checked`).
    3. Commit: preemptions, admissions with their placement, rejections and
       waiting reasons, with their events, in one transaction.
    4. Apply: for each admission, suspend its victims, then create it, only
       once every victim was asked to stop (a victim the cluster refuses to stop
       holds its room: the job is requeued with a backoff instead). The cluster
       being unreachable stops the phase (reconcile finishes it); a refused
       create requeues that job with a backoff.
    5. Record: nodes seen, the cycle row with the plan's GPU figures per team
       and whether it changed anything the pages show, a usage sample from
       those figures.
    A cycle that raises is recorded as failed in a transaction of its own,
    then the error goes on to the caller.
    """
    started, now = time.monotonic(), now or timezone.now()
    result = CycleResult()
    decided: list[Decided] = []
    reading: Reading | None = None
    try:
        with transaction.atomic():
            # 1. Read.
            if not try_transaction_lock(CYCLE_LOCK):
                return CycleResult(skipped=True)
            try:
                reading = _read(cluster)
            except ClusterUnavailable as error:
                result.error = str(error)
                records.cluster_unreachable()
            except ClusterError as error:  # a read refused (an RBAC change): nothing to plan on, as unreachable
                result.error = cluster_words.refused("the cycle's read", error, meanwhile="jobs stay queued")
                result.refused = True
                log.error("the cluster refused the admission cycle's read: %s", error)
                records.cluster_unreachable(records.READ_REFUSED_REASON)
            if reading is not None:
                world = build_world(now=now, nodes=reading.nodes, outside=reading.outside, statuses=reading.statuses,
                                    claims=reading.claims)  # fmt: skip
                # 2. Plan, then try the creates that would preempt (a dry run): nobody is preempted for
                # a job the cluster would refuse.
                plan = _checked(world, make_plan(world.snapshot), cluster, now)
                result.gpu_usage = [team_gpus_to_dict(team) for team in plan.teams]
                # 3. Commit.
                decided = _commit(world, plan, now, result)
        # 4. Apply.
        if decided:
            result.error = _apply(decided, cluster, now)
            result.admitted = sum(1 for d in decided if d.job.state == Job.State.ADMITTED)
        # 5. Record.
        with transaction.atomic():
            # Under the lock again: the next cycle may be in its commit phase by now, and two
            # cycles writing the node mirror at once would collide. Lost, it leaves the mirror to that one.
            mirrored = reading is not None and try_transaction_lock(CYCLE_LOCK)
            nodes_moved = mirrored and records.nodes_seen(reading.nodes, reading.outside, now)
            records.cycle_done(now, time.monotonic() - started, result, nodes_moved=nodes_moved)
            if mirrored:
                records.usage_sample(now)
            records.prune_cycles(now)
    except Exception as error:
        records.cycle_failed(now, time.monotonic() - started, error)
        raise
    return result


def _read(cluster: Cluster) -> Reading:
    nodes, outside, statuses = cluster.nodes(), cluster.outside_usage(), cluster.job_statuses()
    reading = Reading(nodes=nodes, outside=[*outside, *statuses.strays], statuses=statuses)
    for namespace in claim_namespaces():
        try:
            reading.claims[namespace] = {claim.name for claim in cluster.claims(namespace)}
        except ClusterError as error:  # one namespace's refusal holds only its jobs that mount claims
            reading.claims[namespace] = str(error).rstrip(". ")
    return reading


def _checked(world: World, plan: Plan, cluster: Cluster, now: datetime) -> Plan:
    """Returns the plan once every admission in it that preempts has had its create tried as a dry run
    (`Cluster.check_create`: admission webhooks, the namespace's quota, validation), and the suspend of
    each of its adopted victims (`Cluster.check_suspend`).

    A job the cluster would refuse backs off (`hold_refused`) and the plan is made again without it,
    so nobody is preempted, losing their unsaved work, for a job that cannot be created; before, each
    try preempted its victims again. So does a job with an adopted victim whose suspend the cluster would
    refuse (`hold_for_victim`: an admission webhook that forbids it): Gangway never deletes an adopted
    job, so that victim would keep its room and the job could not start. So, without asking, does a job
    whose victim is being preempted already, the cluster refusing, or failing, to stop it, or being cancelled,
    or whose object runs though the database does not count it (`hold_for_unstopped`): the snapshot counts
    such a job as running (`snapshot.UNSTOPPED`, `World.left_running`) and marks it stopping, so the policy
    never picks it; this guards the apply phase should a plan do so all the same. The new
    plan's own preempting admissions are tried in turn; each round leaves out at least one job, so this
    ends. A dry run the cluster cannot answer proves nothing: the plan goes ahead as made, and no more dry
    runs are tried in the cycle (the apply phase meets the same outage, and reconcile finishes it).
    """
    tried: set[str] = set()
    answering = True
    while True:
        refused: set[str] = set()
        for admission in plan.admit:
            if not admission.victims or admission.id in tried:
                continue
            tried.add(admission.id)
            job = world.jobs[admission.id]
            stopping = next((world.jobs[victim_id] for victim_id in admission.victims
                             if world.jobs[victim_id].state in Job.STOPPING_STATES
                             or victim_id in world.left_running),
                            None)  # fmt: skip
            if stopping is not None:
                hold_for_unstopped(job, stopping, now)
                refused.add(admission.id)
                continue
            if not answering:
                continue
            try:
                with on_one_object(cluster):
                    cluster.check_create(to_cluster_job(job, placement=admission.nodes or _expand(admission.placement)))
                held = victim_refused(world, admission, cluster)
            except ClusterUnavailable as error:
                log.warning("could not try the create of job %s before preempting for it: %s", job.pk, error)
                answering = False  # those refused already still leave the plan
                continue
            except ClusterError as error:
                hold_refused(job, str(error), now, failing=isinstance(error, ServerFailing))
                refused.add(admission.id)
                continue
            if held is not None:
                hold_for_victim(job, *held, now)
                refused.add(admission.id)
        if not refused:
            return plan
        pending = tuple(job for job in world.snapshot.pending if job.id not in refused)
        world.snapshot = replace(world.snapshot, pending=pending)
        plan = make_plan(world.snapshot)


def _commit(world: World, plan: Plan, now: datetime, result: CycleResult) -> list[Decided]:
    """Write the plan's decisions; returns the admissions committed, with their victims.

    Each admission with its victims is one savepoint: a job someone else moved
    since the snapshot (cancelled, ended) undoes only that admission; the next
    cycle plans again.
    """
    usage = records.GpuTally.of(world.snapshot)
    decided = []
    for admission in plan.admit:
        job = world.jobs[admission.id]
        try:
            with transaction.atomic():
                victims = [_preempt(world, world.jobs[victim_id], job, usage) for victim_id in admission.victims]
                _admit(job, admission, now)
        except StaleJob:
            continue
        usage.add(job)
        decided.append(Decided(job, victims))
        result.preempted += len(victims)
    for rejection in plan.reject:
        job = world.jobs[rejection.id]
        try:
            transition(job, Job.State.REJECTED, message=rejection.reason, code=rejection.code,
                       finished_at=now, reason=rejection.reason, reason_code=rejection.code,
                       position=None, team_position=None, eta=None, reservation=None)  # fmt: skip
        except StaleJob:
            continue
        log_decision("rejected", job, rejection.code, rejection.reason)
        result.rejected += 1
    result.waiting, result.written = record_waits(world, plan, now)
    return decided


def _preempt(world: World, victim: Job, preemptor: Job, usage: records.GpuTally) -> Job:
    """Move a victim to preempting, with the sentence its owner reads; returns it."""
    message = records.preemption_sentence(world, victim, preemptor, usage)
    # Reclaim (R6) takes back lent quota; a preemption within the team makes way for a higher tier (R5).
    code = Because.RECLAIMED if victim.team_id != preemptor.team_id else Because.PREEMPTED
    # `not_before` of a job being preempted says the cluster refused to stop it (`stop_refused`), as a
    # value left from an earlier backoff would, and `stop_failed_at` that it failed to: both cleared.
    # Counted with F(): taken back with F() if the cluster refuses to stop it for good (`stop_refused`).
    transition(victim, Job.State.PREEMPTING, message=message, code=code,
               preemption_count=F("preemption_count") + 1, not_before=None, stop_failed_at=None)  # fmt: skip
    usage.remove(victim)
    log_decision("preempted", victim, code, message)
    return victim


def _admit(job: Job, admission: Admission, now: datetime) -> None:
    """Move a job to admitted with its placement, the one the cluster will be given."""
    nodes = admission.nodes or _expand(admission.placement)
    where = ", ".join(f"{count} on {node}" for node, count in admission.placement)
    placed = f"all {len(nodes)} replicas placed at once" if len(nodes) > 1 else "its replica placed"
    message = f"Admitted: {placed} ({where})."
    if admission.gpu_type:
        message = f"Admitted on {admission.gpu_type} GPUs{_type_choice(job, admission.gpu_type)}: {placed} ({where})."
    if admission.victims:
        message += f" Starts once {len(admission.victims)} preempted job(s) have stopped."
    transition(job, Job.State.ADMITTED, message=message, code=Because.ADMITTED, admitted_at=now, placement=list(nodes),
               assigned_gpu_type=admission.gpu_type or "", reason="", reason_code="", position=None,
               team_position=None, eta=None, reservation=None)  # fmt: skip
    log_decision("admitted", job, Because.ADMITTED, message)


def _type_choice(job: Job, given: str) -> str:
    """Why the job got type `given`, for its admission event: "" when it was the job's first choice."""
    asked = list(job.gpu_type)
    if not asked:
        return " (it named no type; its team's types are tried cheapest first)"
    rank = asked.index(given) if given in asked else 0
    if rank == 0:
        return ""
    return f" (choice {rank + 1} of {len(asked)}: {', '.join(asked[:rank])} could not take it now)"


def _apply(decided: list[Decided], cluster: Cluster, now: datetime) -> str:
    """Carry out committed admissions: suspend the victims, then create the job.

    Returns "" when every call went through, else the error that stopped the
    phase: the jobs not yet created stay admitted, saying so, and reconcile
    creates them once the cluster answers. A job whose create the cluster
    refuses is requeued with a backoff (`requeue_refused`); a 500 that one
    object's namespace keeps answering while the cluster answers a read is
    such a refusal (`on_one_object`), not an outage. A job with a victim the
    cluster refused to stop (an adopted job's suspend refused, or a job of
    Gangway's whose suspend and delete both were) is not created: that victim
    still holds the room, and a job with victims starts once they have
    stopped. It is requeued with a backoff (`requeue_for_victim`); the victim
    stays preempting, counted as running, and reconcile asks it to stop again
    at every pass until it gives up on it (`stop_refused`).
    """
    for index, item in enumerate(decided):
        try:
            unstopped: tuple[Job, ClusterError] | None = None
            for victim in item.victims:
                try:
                    stop_victim(victim, cluster)
                except ClusterError as error:  # reconcile tries again at every pass, and says so on the victim
                    log.warning("the cluster refused to stop job %s, preempted for job %s: %s", victim.pk,
                                item.job.pk, error)  # fmt: skip
                    stop_refused(victim, error, now)
                    unstopped = unstopped or (victim, error)
            if unstopped is not None:
                requeue_for_victim(item.job, *unstopped, now)
                continue
            # A cancel may have come since the commit (reconcile stops whatever ran for it anyway).
            if Job.objects.filter(pk=item.job.pk, state=Job.State.ADMITTED).exists():
                with on_one_object(cluster):
                    cluster.create_job(to_cluster_job(item.job))
        except ClusterUnavailable as error:
            _creation_pending([d.job for d in decided[index:]])
            log.warning("cluster unreachable while applying admissions: %s", error)
            return str(error)
        except ClusterError as error:
            if isinstance(error, ServerFailing) and error.unanswered:
                # The create may have gone through: reconcile finds its object, or creates it, as after an outage.
                log.warning("no answer in time to the create of job %s: %s", item.job.pk, error)
                _creation_pending([item.job], UNANSWERED)
                continue
            requeue_refused(item.job, str(error), now, failing=isinstance(error, ServerFailing))
    return ""


UNREACHABLE = ("Admitted, but the cluster cannot be reached to create it; it is created as soon as the cluster "
               "answers, on the nodes already set aside for it.")  # fmt: skip
UNANSWERED = ("Admitted; the cluster did not answer its create in time. Reconcile finds it created, or creates it, "
              "on the nodes already set aside for it.")  # fmt: skip


def _creation_pending(jobs: list[Job], reason: str = UNREACHABLE) -> None:
    Job.objects.filter(pk__in=[job.pk for job in jobs], state=Job.State.ADMITTED).update(
        reason=reason, reason_code=Because.CREATE_PENDING
    )


def _expand(placement: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    return tuple(node for node, count in placement for _ in range(count))
