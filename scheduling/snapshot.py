"""Reading the world into the policy's snapshot, and jobs into the cluster port's shape.

Data flows one way: database + cluster readings -> Snapshot -> policy -> Plan.
Policy ids are job primary keys as strings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db.models import Prefetch

from jobs.models import Job
from portal.compiled import CompiledQuery
from scheduling.policy import model as policy
from scheduling.cluster.base import ClusterJob, NodeInfo, OutsidePod, ReplicaSpec, cluster_name, volume_mounts
from tenants.models import PriorityTier, Quota, Team


@dataclass
class World:
    """A snapshot and the rows behind it, so a plan can be applied to them."""

    snapshot: policy.Snapshot
    jobs: dict[str, Job] = field(default_factory=dict)  # policy id -> job (running and pending)
    teams: dict[str, Team] = field(default_factory=dict)


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def teams_with_quotas() -> list[Team]:
    # Each team's rows by resource, as Quota's own ordering gives them, without its join on the team's slug.
    quotas = Prefetch("quotas", queryset=Quota.objects.order_by("resource"))
    return list(Team.objects.prefetch_related(quotas).order_by("slug"))


class QuotaRow(NamedTuple):
    """A quota row's limits, read without the model (see `policy_teams`)."""

    resource: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    max_per_replica: int | None
    default_per_replica: int | None


def quota_limits(team: Team) -> dict[str, dict[str, int]]:
    """The team's quota rows as per-resource mappings, keyed like the policy's and the port's fields."""
    return limits_of(team.quotas.all())


def limits_of(quotas: Iterable[Quota | QuotaRow]) -> dict[str, dict[str, int]]:
    """Quota rows as per-resource mappings, keyed like the policy's and the port's fields.

    Returns nominal, borrowing_limit, lending_limit, per_replica_max and
    replica_defaults; a limit left empty (no limit) is absent from its mapping.
    The snapshot, the previews and the tenant sync read quotas through this one place.
    """
    quotas = list(quotas)
    return {
        "nominal": {q.resource: q.nominal for q in quotas},
        "borrowing_limit": {q.resource: q.borrowing_limit for q in quotas if q.borrowing_limit is not None},
        "lending_limit": {q.resource: q.lending_limit for q in quotas if q.lending_limit is not None},
        "per_replica_max": {q.resource: q.max_per_replica for q in quotas if q.max_per_replica is not None},
        "replica_defaults": {q.resource: q.default_per_replica for q in quotas if q.default_per_replica},
    }


def replica_defaults(team: Team) -> dict[str, int]:
    """What a replica gets for CPU and memory when it asks for none (the LimitRange default)."""
    return quota_limits(team)["replica_defaults"]


def policy_team(team: Team) -> policy.Team:
    return _policy_team(team.slug, team.weight, quota_limits(team))


def _policy_team(slug: str, weight: float, limits: dict[str, dict[str, int]]) -> policy.Team:
    return policy.Team(
        name=slug,
        nominal=limits["nominal"],
        borrowing_limit=limits["borrowing_limit"],
        lending_limit=limits["lending_limit"],
        weight=weight,
        per_replica_max=limits["per_replica_max"],
    )


def policy_teams() -> dict[str, tuple[policy.Team, dict[str, int]]]:
    """Every team as the policy sees it, with its replica defaults, by slug, in slug order.

    One query (teams joined to their quota rows, its SQL built once) where `teams_with_quotas`
    makes two and builds every row: the submission's R10 check reads all
    teams on every submission and needs nothing else of them.
    """
    grouped: dict[str, tuple[float, list[QuotaRow]]] = {}
    for slug, weight, *quota in _TEAMS_WITH_QUOTA_ROWS():
        _, quotas = grouped.setdefault(slug, (weight, []))
        if quota[0] is not None:  # a team without quota rows comes back once, with nulls
            quotas.append(QuotaRow(*quota))
    teams = {}
    for slug, (weight, quotas) in grouped.items():
        limits = limits_of(quotas)
        teams[slug] = _policy_team(slug, weight, limits), limits["replica_defaults"]
    return teams


# Read on every submission (R10): the SQL is built once (`portal.compiled`), the rows are read fresh each time.
_TEAMS_WITH_QUOTA_ROWS = CompiledQuery(
    lambda: Team.objects.order_by("slug", "quotas__resource").values_list(
        "slug", "weight", *(f"quotas__{name}" for name in QuotaRow._fields)
    )
)


def policy_replicas(groups: list[dict], defaults: dict[str, int]) -> tuple[policy.ReplicaGroup, ...]:
    return tuple(
        policy.ReplicaGroup(
            count=group["count"],
            gpu=group.get("gpu", 0),
            cpu=group.get("cpu") or defaults.get("cpu", 0),
            memory=group.get("memory") or defaults.get("memory", 0),
        )
        for group in groups
    )


def policy_tiers() -> tuple[policy.Tier, ...]:
    return tuple(
        policy.Tier(name=tier.name, value=tier.value, preemptible=tier.preemptible)
        for tier in PriorityTier.objects.order_by("-value", "name")
    )


def policy_settings() -> policy.Settings:
    return policy.Settings(
        starvation_after=settings.STARVATION_AFTER,
        min_runtime_before_preemption=settings.MIN_RUNTIME_BEFORE_PREEMPTION,
        default_runtime=settings.DEFAULT_RUNTIME,
    )


def build_world(
    *,
    now: datetime,
    nodes: list[NodeInfo],
    outside: list[OutsidePod],
    teams: list[Team] | None = None,
    extra_pending: tuple[policy.PendingJob, ...] = (),
) -> World:
    """The snapshot of `now`: admitted and running jobs hold their nodes, queued jobs wait.

    Queued jobs backing off after a stuck admission (R13) are left out until
    their time comes. Jobs being preempted or cancelled are left out too: the
    room they free is already promised to the job that preempted them.
    """
    teams = teams if teams is not None else teams_with_quotas()
    by_slug = {team.slug: team for team in teams}
    defaults = {team.pk: replica_defaults(team) for team in teams}
    node_names = {node.name for node in nodes}
    world = World(snapshot=None, teams=by_slug)  # type: ignore[arg-type]
    running: list[policy.RunningJob] = [
        policy.RunningJob(
            id=f"outside:{pod.namespace}/{pod.name}", team=None, tier=None, started=0,
            replicas=(policy.ReplicaGroup(count=1, gpu=pod.gpu, cpu=pod.cpu, memory=pod.memory),),
            nodes=(pod.node,),
        )  # fmt: skip
        for pod in outside
        if pod.node in node_names
    ]
    active = Job.objects.filter(state__in=Job.ACTIVE_STATES).select_related("team", "tier").order_by("id")
    for job in active:
        replicas = policy_replicas(job.replicas, defaults.get(job.team_id, {}))
        if len(job.placement) != sum(group.count for group in replicas) or not set(job.placement) <= node_names:
            continue  # placed on nodes that are gone: the cluster's own reading will correct it
        world.jobs[str(job.pk)] = job
        running.append(
            policy.RunningJob(
                id=str(job.pk), team=job.team.slug, tier=job.tier.name,
                started=epoch(job.started_at or job.admitted_at or now), replicas=replicas,
                nodes=tuple(job.placement), max_runtime=job.max_runtime, queued=epoch(job.queued_at),
            )  # fmt: skip
        )
    pending: list[policy.PendingJob] = []
    queued = Job.objects.filter(state=Job.State.QUEUED).select_related("team", "tier").order_by("id")
    for job in queued:
        if job.not_before and job.not_before > now:
            continue
        world.jobs[str(job.pk)] = job
        pending.append(
            policy.PendingJob(
                id=str(job.pk), team=job.team.slug, tier=job.tier.name, queued=epoch(job.queued_at),
                replicas=policy_replicas(job.replicas, defaults.get(job.team_id, {})), max_runtime=job.max_runtime,
            )  # fmt: skip
        )
    pending.extend(extra_pending)
    world.snapshot = policy.Snapshot(
        now=epoch(now),
        nodes=tuple(policy.Node(name=n.name, gpu=n.gpu, cpu=n.cpu, memory=n.memory) for n in nodes),
        tiers=policy_tiers(),
        teams=tuple(policy_team(team) for team in teams),
        running=tuple(running),
        pending=tuple(pending),
        settings=policy_settings(),
    )
    return world


def to_cluster_job(job: Job, *, placement: tuple[str, ...] = ()) -> ClusterJob:
    """The port's view of a job: everything an adapter needs to create, suspend or resume it."""
    defaults = replica_defaults(job.team)
    return ClusterJob(
        job_id=job.pk,
        name=cluster_name(job.pk, job.name),
        namespace=job.team.slug,
        team=job.team.slug,
        kind=job.kind,
        image=job.image,
        command=tuple(job.command),
        args=tuple(job.args),
        env=tuple(sorted(job.env.items())),
        replicas=tuple(
            ReplicaSpec(
                role=group["role"], count=group["count"], gpu=group.get("gpu", 0),
                cpu=group.get("cpu") or defaults.get("cpu", 0), memory=group.get("memory") or defaults.get("memory", 0),
            )  # fmt: skip
            for group in job.replicas
        ),
        tier=job.tier.name,
        grace_period=job.tier.grace_period,
        max_runtime=job.max_runtime,
        attempt=job.attempt,
        checkpoint_claim=job.team.checkpoint_claim,
        sim_duration=job.sim_duration,
        sim_fail=job.sim_fail,
        placement=placement or tuple(job.placement),
        volumes=volume_mounts(job.volumes), shm=job.shm,
    )
