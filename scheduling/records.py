"""What the loop writes besides transitions: nodes seen, usage samples, sentences for people."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone as dt_timezone

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from core.durations import clock_time, duration
from jobs.codes import Because
from jobs.models import Job, JobEvent
from scheduling.cluster.base import NodeInfo, OutsidePod
from scheduling.cluster.node_types import type_of
from scheduling.cluster_words import RBAC_RULES
from scheduling.gpu_types import known_types
from scheduling.models import ClusterNode, Cycle, CycleTotals, UsageSample
from scheduling.policy.types import typed_key
from scheduling.selectors import latest_gpu_usage
from scheduling.snapshot import World
from tenants.models import Team

log = logging.getLogger("gangway.admission")
SAMPLE_EVERY = timedelta(seconds=60)
# Upper bounds (seconds) of the cycle duration histogram's buckets.
CYCLE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def cycle_counts() -> tuple[int, float, list[int]]:
    """Returns (cycles, seconds, cycles at or under each bound of CYCLE_BUCKETS)
    over every cycle, the pruned ones included, so the counts never go down."""
    total, seconds, buckets = _counts(Cycle.objects.all())
    pruned = CycleTotals.objects.filter(pk=1).first()
    if pruned is not None:
        total += pruned.cycles
        seconds += pruned.seconds
        buckets = [n + pruned.buckets.get(str(bound), 0) for n, bound in zip(buckets, CYCLE_BUCKETS)]
    return total, seconds, buckets


def cycle_failures() -> int:
    """Returns how many cycles ever failed, the pruned ones included."""
    pruned = CycleTotals.objects.filter(pk=1).values_list("failures", flat=True).first() or 0
    return Cycle.objects.filter(failed=True).count() + pruned


def _counts(cycles: QuerySet[Cycle]) -> tuple[int, float, list[int]]:
    """Returns (cycles, seconds, cycles at or under each bound) of these rows, in one query.

    Only `duration` is read, so the rows come from its index (`cycle_durations`) and not from a
    week of cycle rows with their plans' figures: /metrics asks at every scrape.
    """
    rows = cycles.aggregate(
        total=Count("duration"), seconds=Sum("duration"),
        **{f"le_{i}": Count("duration", filter=Q(duration__lte=bound)) for i, bound in enumerate(CYCLE_BUCKETS)},
    )  # fmt: skip
    return rows["total"], rows["seconds"] or 0.0, [rows[f"le_{i}"] for i in range(len(CYCLE_BUCKETS))]


def cycle_retention() -> timedelta:
    """Returns how long cycle rows and usage samples are kept: the CYCLE_RETENTION setting."""
    return timedelta(seconds=settings.CYCLE_RETENTION)


def prune_cycles(now: datetime) -> int:
    """Deletes the Cycle rows older than CYCLE_RETENTION, adding them to the
    totals first (one transaction); returns how many went."""
    old = Cycle.objects.filter(started_at__lt=now - cycle_retention())
    if not old.exists():
        return 0
    with transaction.atomic():
        totals, _ = CycleTotals.objects.select_for_update().get_or_create(pk=1)
        count, seconds, buckets = _counts(old)
        totals.failures += old.filter(failed=True).count()
        totals.cycles += count
        totals.seconds += seconds
        totals.buckets = {str(bound): totals.buckets.get(str(bound), 0) + n
                          for bound, n in zip(CYCLE_BUCKETS, buckets)}  # fmt: skip
        totals.save()
        old.delete()
    return count


UNREACHABLE_REASON = "The cluster cannot be reached; jobs stay queued, in order, until it answers again."
READ_REFUSED_REASON = ("The cluster refuses to let Gangway read it (a permission taken away); jobs stay queued, "
                       f"in order, until an operator restores Gangway's RBAC rules ({RBAC_RULES}).")  # fmt: skip


def cluster_unreachable(reason: str = UNREACHABLE_REASON) -> None:
    """Every queued job says why nothing moves (`reason`: unreachable, or READ_REFUSED_REASON); an
    event only where the reason is new.

    The sentence names no address: people read it on their job's page; operators
    find the error itself in the cycle's row (the admin) and the logs.
    """
    queued = Job.objects.filter(state=Job.State.QUEUED)
    for job in queued.exclude(reason_code=Because.CLUSTER_UNREACHABLE, reason=reason):
        JobEvent.objects.create(job=job, kind=JobEvent.Kind.WAITING, from_state=job.state, to_state=job.state,
                                message=reason, code=Because.CLUSTER_UNREACHABLE)  # fmt: skip
    queued.update(reason=reason, reason_code=Because.CLUSTER_UNREACHABLE)


def cycle_done(now: datetime, duration: float, result, *, nodes_moved: bool = False) -> Cycle:
    """Records a cycle that ran to its end (the cluster may have been unreachable); returns its row.

    The row says whether the cycle changed anything a page shows besides the row itself
    (`changed`, what the polled parts' version moves with): it did when it
    1. admitted, preempted or rejected a job, or wrote a waiting job's figures (`written`);
    2. changed the node mirror (`nodes_moved`: nodes, their GPUs or what outside pods take);
    3. made a plan whose GPU figures per team differ from those the pages read until now;
    4. reached the cluster where the cycle before it did not, or the other way round, or follows
       a failed cycle (the first cycle always counts).
    A steady queue makes none of these: its cycles leave every polled part's 304 standing.
    """
    reachable = not result.error
    changed = bool(result.admitted or result.preempted or result.rejected or result.written or nodes_moved)
    if not changed and result.gpu_usage is not None:
        changed = {team["team"]: team for team in result.gpu_usage} != latest_gpu_usage()
    if not changed:
        last = Cycle.objects.order_by("-started_at", "-id").values_list("cluster_reachable", "failed").first()
        changed = last != (reachable, False)
    return Cycle.objects.create(
        started_at=now, duration=duration, admitted=result.admitted, preempted=result.preempted,
        rejected=result.rejected, waiting=result.waiting, cluster_reachable=reachable,
        error=result.error[:1000], gpu_usage=result.gpu_usage, changed=changed,
    )  # fmt: skip


def cycle_failed(now: datetime, duration: float, error: BaseException) -> None:
    """Records a cycle that raised, in a transaction of its own, so the failure is seen
    (the admin, `/metrics`, `/readyz`, the staff banner) even though its work rolled back."""
    text = f"{type(error).__name__}: {error}"[:1000]
    log.error("admission cycle failed: %s", text, exc_info=error)
    try:
        with transaction.atomic():
            Cycle.objects.create(started_at=now, duration=duration, failed=True, error=text)
    except DatabaseError as unrecorded:  # the database itself is what failed: the log line is all there is
        log.error("could not record the failed cycle: %s", unrecorded)


@dataclass(frozen=True)
class LoopTrouble:
    """What is wrong with the admission loop, from one read of its latest cycles (`loop_trouble`)."""

    failing: int  # how many of the latest CYCLE_FAILURES_BEFORE_UNREADY cycles failed in a row
    stalled_for: float | None  # seconds since a cycle last started, once the loop has stopped; else None

    @property
    def failing_too_long(self) -> bool:
        return self.failing >= settings.CYCLE_FAILURES_BEFORE_UNREADY


def loop_trouble(now: datetime) -> LoopTrouble:
    """Reads the latest CYCLE_FAILURES_BEFORE_UNREADY cycles, newest first: how many of them failed
    in a row, and whether the loop has stopped: no cycle, failed or not, started for longer than
    one may take (the task's hard time limit) plus that many admission intervals (never before the
    first cycle).

    A loop that stopped leaves no failure to show: beat or the worker gone, the cycle's lock held by
    a lost session (every cycle is skipped, and a skipped one writes no row), or a database that
    takes no writes (a failed cycle cannot record itself).
    """
    limit = settings.CYCLE_FAILURES_BEFORE_UNREADY
    latest = list(Cycle.objects.order_by("-started_at", "-id").values_list("started_at", "failed")[:limit])
    failing = 0
    for _, failed in latest:
        if not failed:
            break
        failing += 1
    stalled = None
    if latest:
        quiet = (now - latest[0][0]).total_seconds()
        if quiet > settings.CELERY_TASK_TIME_LIMIT + limit * settings.ADMISSION_INTERVAL:
            stalled = quiet
    return LoopTrouble(failing, stalled)


def nodes_seen(nodes: list[NodeInfo], outside: list[OutsidePod], now: datetime) -> bool:
    """Mirror the cluster's nodes, with the room outside pods take and why a node takes no new pods, for
    the pages and the fit preview; returns whether a row was added, changed or deleted (a node seen again
    as it was is not written)."""
    taken: dict[str, list[int]] = {}
    for pod in outside:
        room = taken.setdefault(pod.node, [0, 0, 0])
        room[0] += pod.gpu
        room[1] += pod.cpu
        room[2] += pod.memory
    existing = {node.name: node for node in ClusterNode.objects.all()}
    types = known_types()
    moved = False
    for position, node in enumerate(nodes):
        gpu, cpu, memory = taken.get(node.name, (0, 0, 0))
        values = dict(position=position, gpu=node.gpu, cpu=node.cpu, memory=node.memory, outside_gpu=gpu,
                      outside_cpu=cpu, outside_memory=memory, gpu_type=type_of(node, types),
                      unschedulable=node.unschedulable, seen_at=now)  # fmt: skip
        row = existing.pop(node.name, None)
        if row is None:
            ClusterNode.objects.create(name=node.name, **values)
            moved = True
        elif any(getattr(row, key) != value for key, value in values.items() if key != "seen_at"):
            ClusterNode.objects.filter(pk=row.pk).update(**values)
            moved = True
    if existing:
        ClusterNode.objects.filter(name__in=list(existing)).delete()
        moved = True
    return moved


def usage_sample(now: datetime) -> None:
    """A GPU usage sample per team, at most one a minute, for the team page's chart: the
    figures the latest plan gave (`latest_gpu_usage`), so the chart agrees with every other page.
    On a cluster with GPU types, one more sample per team and type (`gpu_type`) beside the total.
    Samples older than CYCLE_RETENTION are deleted."""
    latest = UsageSample.objects.order_by("-at").values_list("at", flat=True).first()
    if latest and now - latest < SAMPLE_EVERY:
        return
    figures = latest_gpu_usage()
    teams = dict(Team.objects.filter(slug__in=figures).values_list("slug", "pk"))
    UsageSample.objects.bulk_create(
        UsageSample(team_id=teams[slug], at=now, gpu_used=of["used"], gpu_nominal=of["nominal"],
                    gpu_borrowed=of["borrowed"], gpu_waiting=of["waiting"], gpu_type=of.get("gpu_type", ""))
        for slug, team in figures.items() if slug in teams
        for of in (team, *team.get("by_type", ()))
    )  # fmt: skip
    UsageSample.objects.filter(at__lt=now - cycle_retention()).delete()


_MOMENT = re.compile(r"\bt=(\d+)")
_AT_MOST = re.compile(r"at most (\d+) s\b")
# "job 12", "jobs 12 and 19", "jobs 12, 19, 22 and 3 more" (the policy names at most three, then counts)
_JOBS = re.compile(r"\b(jobs?) (\d+(?:, \d+)*)(?: and (\d+)( more)?)?")


def readable_reason(reason: str, *, team: str, teams_of: dict[str, str], now: datetime) -> str:
    """A policy sentence as the waiting job's owner reads it.

    The policy speaks in snapshot seconds and job ids (`manage.py plan` prints
    them as they are). For people: a moment becomes a clock time to the nearest
    minute in the portal's time zone, named ("about 20:04 UTC"); a number of seconds
    a duration, rounded down where it is a bound ("at most 7 min" when 468 s are
    left); and a job id "#12" when the job is of the reader's team, "a job of team
    research" otherwise (another team's job names are not theirs to read), several
    of one team counted ("2 jobs of team research").
    """

    def moment(match: re.Match) -> str:
        at = datetime.fromtimestamp(int(match.group(1)), tz=dt_timezone.utc)
        return clock_time(timezone.localtime(at), timezone.localtime(now).date())

    def jobs(match: re.Match) -> str:
        ids = re.findall(r"\d+", match.group(2))
        more = 0
        if match.group(4):
            more = int(match.group(3))
        elif match.group(3):
            ids.append(match.group(3))
        own = [f"#{job_id}" for job_id in ids if teams_of.get(job_id) in (None, team)]
        others: dict[str, int] = {}
        for job_id in ids:
            if teams_of.get(job_id) not in (None, team):
                others[teams_of[job_id]] = others.get(teams_of[job_id], 0) + 1
        parts = own + [f"{'a job' if n == 1 else f'{n} jobs'} of team {slug}" for slug, n in others.items()]
        if more:
            parts.append(f"{more} more")
        text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"{match.group(1)} {text}" if not others else text

    reason = _MOMENT.sub(moment, reason)
    reason = _AT_MOST.sub(lambda m: f"at most {duration(int(m.group(1)), at_most=True)}", reason)
    return _JOBS.sub(jobs, reason)


class GpuTally:
    """GPUs each team holds of each GPU type ("" on a cluster without types) as a cycle's decisions are
    committed, for the sentences victims read."""

    def __init__(self, used: dict[tuple[str, str], int]):
        self.used = used

    @classmethod
    def of(cls, snapshot) -> "GpuTally":
        types = {node.name: node.gpu_type for node in snapshot.nodes}
        used: dict[tuple[str, str], int] = {}
        for job in snapshot.running:
            if job.team is not None:  # its type, else its first node's (as the policy charges it)
                kind = job.gpu_type or next((types.get(node) for node in job.nodes), None) or ""
                key = (job.team, kind)
                used[key] = used.get(key, 0) + sum(group.count * group.gpu for group in job.replicas)
        return cls(used)

    def add(self, job: Job) -> None:
        key = (job.team.slug, job.assigned_gpu_type)
        self.used[key] = self.used.get(key, 0) + job.gpu_total

    def remove(self, job: Job) -> None:
        key = (job.team.slug, job.assigned_gpu_type)
        self.used[key] = self.used.get(key, 0) - job.gpu_total


def preemption_sentence(world: World, victim: Job, preemptor: Job, usage: GpuTally) -> str:
    """Why a job is preempted, for its owner: reclaim by another team, or a higher tier of its own.

    Another team's job is named only by its team: the victim's owner may not see it.
    The numbers are the victim team's as this cycle left them, its own admissions included.
    """
    if victim.team_id == preemptor.team_id:
        return (
            f"Preempted for job {preemptor.name} (#{preemptor.pk}) of the same team, whose tier "
            f"{preemptor.tier.name} ranks above {victim.tier.name}; it will be requeued with its place kept."
        )
    team = next((t for t in world.snapshot.teams if t.name == victim.team.slug), None)
    kind = victim.assigned_gpu_type  # with GPU types, its type's figures: each type has its own quota
    nominal = team.nominal.get(typed_key(kind) if kind else "gpu", 0) if team else 0
    used = usage.used.get((victim.team.slug, kind), 0)
    gpus = f"{kind} GPUs" if kind else "GPUs"
    return (
        f"Preempted to return {gpus} borrowed by team {victim.team.slug} ({used} in use, {nominal} nominal) "
        f"to team {preemptor.team.slug}, which is reclaiming its nominal quota for a job of its own; "
        f"it will be requeued with its place kept."
    )
