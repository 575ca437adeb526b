"""One admission cycle: read the world, plan, apply the plan, record every decision."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone as dt_timezone

from django.db import transaction
from django.utils import timezone

from jobs.models import Job, JobEvent
from jobs.transitions import StaleJob, note, transition
from scheduling import records
from scheduling.cluster.base import Cluster, ClusterError, ClusterUnavailable
from scheduling.locks import try_transaction_lock
from scheduling.models import Cycle
from scheduling.policy import plan as make_plan
from scheduling.policy.model import Admission, Plan
from scheduling.snapshot import World, build_world, to_cluster_job

log = logging.getLogger("gangway.admission")
CYCLE_LOCK = "gangway.admission_cycle"


@dataclass
class CycleResult:
    admitted: int = 0
    preempted: int = 0
    rejected: int = 0
    waiting: int = 0
    skipped: bool = False
    error: str = ""

    @property
    def summary(self) -> str:
        if self.skipped:
            return "Another admission cycle is running; nothing done."
        if self.error:
            return f"Cluster unreachable ({self.error}); jobs stay queued."
        return f"Admitted {self.admitted}, preempted {self.preempted}, rejected {self.rejected}, waiting {self.waiting}."


def admission_cycle(*, cluster: Cluster, now: datetime | None = None) -> CycleResult:
    """Run one cycle in one transaction; returns what it did (skipped when another cycle runs).

    1. Take the single-flight lock.
    2. Read the cluster's nodes and outside usage; if it cannot be reached,
       every queued job says so and nothing else changes.
    3. Build the snapshot from the database and those readings.
    4. Plan (the pure policy).
    5. For each admission: preempt its victims, then admit it and create it in
       the cluster, in a savepoint, so a refusal undoes only that admission.
    6. Reject what can never fit.
    7. Record each waiting job's reason, positions and estimated start.
    8. Record the nodes, a usage sample per team, and the cycle.
    """
    started, now = time.monotonic(), now or timezone.now()
    result = CycleResult()
    with transaction.atomic():
        # 1.
        if not try_transaction_lock(CYCLE_LOCK):
            return CycleResult(skipped=True)
        # 2.
        try:
            nodes, outside = cluster.nodes(), cluster.outside_usage()
        except ClusterUnavailable as error:
            result.error = str(error)
            records.cluster_unreachable(str(error))
            Cycle.objects.create(started_at=now, duration=time.monotonic() - started, cluster_reachable=False,
                                 error=str(error)[:1000])  # fmt: skip
            return result
        # 3. and 4.
        world = build_world(now=now, nodes=nodes, outside=outside)
        plan = make_plan(world.snapshot)
        # 5.
        unavailable = ""
        for admission in plan.admit:
            if unavailable:
                break
            try:
                with transaction.atomic():
                    result.preempted += _admit(world, admission, cluster, now)
                    result.admitted += 1
            except ClusterUnavailable as error:
                unavailable = str(error)
            except ClusterError as error:
                _refused(world.jobs[admission.id], str(error))
            except StaleJob:
                continue  # cancelled or finished since the snapshot; the next cycle plans again
        # 6.
        for rejection in plan.reject:
            job = world.jobs[rejection.id]
            try:
                transition(job, Job.State.REJECTED, message=rejection.reason, code=rejection.code,
                           finished_at=now, reason=rejection.reason, reason_code=rejection.code,
                           position=None, team_position=None, eta=None)  # fmt: skip
            except StaleJob:
                continue
            _log_decision("rejected", job, rejection.code, rejection.reason)
            result.rejected += 1
        # 7.
        result.waiting = _record_waits(world, plan, unavailable)
        # 8.
        records.nodes_seen(nodes, outside, now)
        records.usage_sample(now)
        Cycle.objects.create(
            started_at=now, duration=time.monotonic() - started, admitted=result.admitted,
            preempted=result.preempted, rejected=result.rejected, waiting=result.waiting,
            cluster_reachable=not unavailable, error=unavailable[:1000],
        )  # fmt: skip
        records.prune_cycles(now)
    return result


def _admit(world: World, admission: Admission, cluster: Cluster, now: datetime) -> int:
    """Preempt the admission's victims, admit its job and create it; returns the victims preempted."""
    job = world.jobs[admission.id]
    for victim_id in admission.victims:
        victim = world.jobs[victim_id]
        message = records.preemption_sentence(world, victim, job)
        # Reclaim (R6) takes back lent quota; a preemption within the team makes way for a higher tier (R5).
        code = "reclaimed" if victim.team_id != job.team_id else "preempted"
        transition(victim, Job.State.PREEMPTING, message=message, code=code,
                   preemption_count=victim.preemption_count + 1)  # fmt: skip
        cluster.suspend_job(to_cluster_job(victim))
        _log_decision("preempted", victim, code, message)
    nodes = admission.nodes or _expand(admission.placement)
    where = ", ".join(f"{count} on {node}" for node, count in admission.placement)
    message = f"Admitted: all {len(nodes)} replicas placed at once ({where})."
    if admission.victims:
        message += f" Starts once {len(admission.victims)} preempted job(s) have stopped."
    transition(job, Job.State.ADMITTED, message=message, code="admitted", admitted_at=now, placement=list(nodes),
               reason="", reason_code="", position=None, team_position=None, eta=None)  # fmt: skip
    cluster.create_job(to_cluster_job(job))
    _log_decision("admitted", job, "admitted", message)
    return len(admission.victims)


def _log_decision(action: str, job: Job, rule: str, reason: str) -> None:
    """One log line per decision; the fields are also attached for a structured formatter."""
    fields = {"job": job.pk, "team": job.team.slug, "rule": rule, "reason": reason}
    log.info("%s job=%s team=%s rule=%s: %s", action, job.pk, job.team.slug, rule, reason, extra=fields)


def _expand(placement: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    return tuple(node for node, count in placement for _ in range(count))


def _refused(job: Job, error: str) -> None:
    message = f"The cluster refused to create it: {error}"
    Job.objects.filter(pk=job.pk).update(reason=message, reason_code="cluster_refused")
    note(job, JobEvent.Kind.NOTE, message, code="cluster_refused")


def _record_waits(world: World, plan: Plan, unavailable: str) -> int:
    """Store every waiting job's reason, positions and ETA; an event when its reason changes."""
    changed = []
    for wait in plan.wait:
        job = world.jobs[wait.id]
        reason, code = wait.reason, wait.code
        if unavailable:
            reason, code = f"The cluster could not be reached: {unavailable}", "cluster_unreachable"
        if code != job.reason_code and job.state == Job.State.QUEUED:
            note(job, JobEvent.Kind.WAITING, reason, code=code)
        job.reason, job.reason_code = reason, code
        job.position, job.team_position = wait.position, wait.team_position
        job.eta = datetime.fromtimestamp(wait.eta, tz=dt_timezone.utc) if wait.eta is not None else None
        changed.append(job)
    Job.objects.bulk_update(changed, ["reason", "reason_code", "position", "team_position", "eta"], batch_size=500)
    return len(changed)


def backoff(attempt: int) -> timedelta:
    """How long a job evicted for a stuck admission waits: 30 s doubling per attempt, at most 1 hour."""
    return timedelta(seconds=min(3600, 30 * 2 ** max(0, attempt - 1)))
