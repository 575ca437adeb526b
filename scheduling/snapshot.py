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
from django.db.models import Prefetch, Q

from jobs import job_tokens
from jobs.codes import Because
from jobs.models import Job
from portal.compiled import CompiledQuery
from scheduling.policy import model as policy
from scheduling.policy.demand import GPU
from scheduling.policy.reasons import amount
from scheduling.policy.runtime import ESTIMATE_FROM, learned_estimate
from scheduling.policy.types import type_of_key
from scheduling.handed_back import given_back
from scheduling.cluster.base import (
    RUNS, ClusterJob, JobStatus, NodeInfo, OutsidePod, ReplicaSpec, cluster_name, missing_claims_error, volume_mounts,
)
from scheduling.cluster.node_types import label_of, type_of
from scheduling.gpu_types import known_types
from scheduling.held import Held
from scheduling.sweeps import HOLDING, within_caps
from tenants.models import PriorityTier, Quota, Team


# Jobs being preempted that the cluster refused, or failed (a server error), to stop (`refusals.stop_refused`,
# which keeps when it first refused in `not_before`, and when it first failed in `stop_failed_at`), and jobs
# being cancelled whose pods may still run (`Job.held_until_stopped`: until reconcile has stopped them,
# however long the cluster refuses or fails, `refusals.cancel_refused`): they run on, so a cycle counts each
# as a running job of its team, in its quota as well as its room, and never as a victim again
# (`RunningJob.stopping`).
UNSTOPPED = ((Q(state=Job.State.PREEMPTING) & (Q(not_before__isnull=False) | Q(stop_failed_at__isnull=False)))
             | Q(state=Job.State.CANCELLING, held_until_stopped=True))
# What Gangway does about a job's object that runs though the database does not count it (`_left_running`).
STOPS_IT = "Gangway stops it at its next reconcile, asking again at every one while the cluster refuses"
# The node a replica is charged to when no node takes pods and it was placed on none (`_charged_placements`): no
# node is so named, and the policy gives a node it does not list no room, while the GPUs count in quota.
UNLISTED = "(no node)"


@dataclass
class World:
    """A snapshot and the rows behind it, so a plan can be applied to them."""

    snapshot: policy.Snapshot
    jobs: dict[str, Job] = field(default_factory=dict)  # policy id -> job (running and pending)
    teams: dict[str, Team] = field(default_factory=dict)
    # Queued jobs not offered to the policy, with why they wait: a Katib trial beyond its sweep's GPU cap
    # (`sweeps.within_caps`), a tier not allowed, a missing claim, an object left running.
    held: dict[str, tuple[Job, Held]] = field(default_factory=dict)
    # The policy ids of the jobs the database does not count whose objects run all the same (`_left_running`):
    # each is a running job of `jobs`, being stopped.
    left_running: set[str] = field(default_factory=set)


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
        "per_replica_max": _per_replica_max(quotas),
        "replica_defaults": {q.resource: q.default_per_replica for q in quotas if q.default_per_replica},
    }


def _per_replica_max(quotas: list[Quota | QuotaRow]) -> dict[str, int]:
    """The most one replica may ask for, per resource. GPU types' rows (`gpu:<type>`) give one `gpu`
    figure, the smallest they set: a LimitRange limits nvidia.com/gpu per pod whatever the model,
    and R10 reads `gpu` for every type, so a limit set on any type holds on all of them."""
    limits = {q.resource: q.max_per_replica for q in quotas
              if q.max_per_replica is not None and type_of_key(q.resource) is None}  # fmt: skip
    typed = [q.max_per_replica for q in quotas if q.max_per_replica is not None and type_of_key(q.resource)]
    if typed and "gpu" not in limits:
        limits["gpu"] = min(typed)
    return limits


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
        max_reservations=settings.MAX_RESERVATIONS,
        reservation_slack=settings.RESERVATION_SLACK,
    )


Group = tuple[int, str, int]  # R14's group of a job: team id, kind, GPU count


def group_of(job: Job) -> Group:
    """Returns the group whose successes R14 learns a job's runtime from."""
    return (job.team_id, job.kind, job.gpu_total)


_LATEST_SUCCESSES = CompiledQuery(
    lambda team, kind, gpus: Job.objects.filter(
        state=Job.State.SUCCEEDED, team_id=team, kind=kind, gpu_total=gpus, started_at__isnull=False,
        finished_at__isnull=False,
    ).order_by("-finished_at", "-pk").values_list("started_at", "finished_at")[:ESTIMATE_FROM],
    987_653, "marker-kind", 987_654,  # markers: where each call's values go
)


def latest_runs(groups: Iterable[Group]) -> dict[Group, list[float]]:
    """Returns, for each of `groups` that has succeeded, the runtimes in seconds of its latest
    ESTIMATE_FROM successes, latest first, however old they are: one read of an index
    (`job_latest_successes`) per group."""
    runs: dict[Group, list[float]] = {}
    for group in sorted(set(groups)):
        rows = _LATEST_SUCCESSES(*group)
        if rows:
            runs[group] = [(finished - started).total_seconds() for started, finished in rows]
    return runs


def learned_runtimes(groups: Iterable[Group]) -> dict[Group, int]:
    """Returns R14's estimates for `groups`: the median runtime of the latest 5 succeeded jobs of
    the group, where there are at least 2, capped at DEFAULT_RUNTIME. A group with no estimate is
    absent."""
    learned = {group: learned_estimate(seconds, settings.DEFAULT_RUNTIME)
               for group, seconds in latest_runs(groups).items()}  # fmt: skip
    return {group: estimate for group, estimate in learned.items() if estimate is not None}


def _estimate(job: Job, learned: dict[Group, int]) -> int | None:
    return None if job.max_runtime else learned.get(group_of(job))


def _checkpointed(job: Job) -> int | None:
    """Returns when the job's current run last reported a checkpoint (R8), or None when it has not:
    its unsaved work then counts from its start. A checkpoint from before this run's admission (the
    one a preempted job saved in its grace period, which this run resumed from) saves none of this
    run's work; the job page still shows it."""
    run = job.admitted_at or job.started_at
    if job.checkpointed_at is None or (run is not None and job.checkpointed_at < run):
        return None
    return epoch(job.checkpointed_at)


def _reservation(job: Job, node_order: dict[str, int]) -> policy.Reservation | None:
    """The room the last cycle reserved for the job (R4), on the nodes the cluster still has that take pods."""
    held = job.reservation or {}
    placement = tuple(sorted(((node, count) for node, count in (held.get("placement") or {}).items()
                              if node in node_order), key=lambda item: node_order[item[0]]))  # fmt: skip
    if not placement or "start" not in held:
        return None
    return policy.Reservation(id=str(job.pk), start=epoch(datetime.fromisoformat(held["start"])), placement=placement)


def build_world(
    *,
    now: datetime,
    nodes: list[NodeInfo],
    outside: list[OutsidePod],
    statuses: Iterable[JobStatus] = (),
    teams: list[Team] | None = None,
    extra_pending: tuple[policy.PendingJob, ...] = (),
    claims: dict[str, set[str] | str] | None = None,
) -> World:
    """The snapshot of `now`: every cluster object that takes room counts, queued jobs wait.

    Admitted and running jobs hold their whole demand, on their placement, and so
    do jobs being preempted that the cluster refused, or failed, to stop, and jobs being cancelled whose pods
    may still run (`UNSTOPPED`, `Job.held_until_stopped`), and jobs the database does not count whose objects
    run all the same until reconcile stops them (`_left_running`: a queued job's create reported refused that
    went through, an ended job's object not stopped yet), a queued one held meanwhile; a
    replica with no known node (a job whose pods have not all
    started, a node that went away, one lost with a drained node) is charged to the node with the most room
    left, so a job never counts for less than it asks. Other pods of cluster jobs
    (those of a job being preempted or cancelled that have not stopped yet, its quota being the job's it was
    preempted for; those of a job the database does not know, of a copy of a job's object, of an adopted job's
    object given back to its owner) take room as outside usage (R12), as do `outside`: the pods Gangway
    did not create and those of no job object (`JobStatuses.strays`, which the
    loop's reading adds). Queued jobs backing off after a
    stuck admission (R13) are left out until their time comes, and so are jobs whose tier their
    team may no longer use and Katib trials beyond their sweep's GPU cap (`world.held`, with the
    reason they wait). With `claims` (each namespace's claims, or the sentence of the cluster's
    refusal to list them, read for the namespaces `claim_namespaces` gives), a job mounting a claim
    its namespace lacks is held too: its create would be refused, after preempting others.
    """
    teams = teams if teams is not None else teams_with_quotas()
    by_slug = {team.slug: team for team in teams}
    defaults = {team.pk: replica_defaults(team) for team in teams}
    world = World(snapshot=None, teams=by_slug)  # type: ignore[arg-type]
    active = list(Job.objects.filter(Q(state__in=Job.ACTIVE_STATES) | UNSTOPPED).select_related("team", "tier")
                  .order_by("id"))  # fmt: skip
    statuses = list(statuses)  # read three times below
    mine = own_statuses(statuses, {job.pk: job for job in active}, orphans=False)
    left = _left_running([status for status in statuses if status.job_id not in mine and status.phase in RUNS])
    mine.update({job.pk: status for job, status in left})
    charged = active + [job for job, _ in left]
    outside = list(outside) + [pod for status in statuses if mine.get(status.job_id) is not status
                               for pod in status.pods]  # fmt: skip
    bound = {job_id: status.pods for job_id, status in mine.items() if status.pods}
    # Jobs whose objects the cluster lists as running, their bound pods read with them (`_charged_placements`).
    listed = {job_id for job_id, status in mine.items() if status.phase in RUNS}
    # Only the nodes that take pods hold room; the others are in the snapshot for R10 alone. A job placed or
    # bound on one of them is charged there: it holds none of the room a plan gives, and its GPUs still count
    # in its team's quota (the policy takes no room on such a node). Outside pods on them are left out.
    placeable = [node for node in nodes if node.schedulable]
    closed = {node.name for node in nodes if not node.schedulable}
    node_names = {node.name for node in placeable}
    running: list[policy.RunningJob] = [
        policy.RunningJob(
            id=f"outside:{pod.namespace}/{pod.name}", team=None, tier=None, started=0,
            replicas=(policy.ReplicaGroup(count=1, gpu=pod.gpu, cpu=pod.cpu, memory=pod.memory),),
            nodes=(pod.node,),
        )  # fmt: skip
        for pod in outside
        if pod.node in node_names
    ]
    replicas_of = {job.pk: policy_replicas(job.replicas, defaults.get(job.team_id, {})) for job in charged}
    queued = [job for job in Job.objects.filter(state=Job.State.QUEUED).select_related("team", "tier", "sweep")
              .order_by("id") if not (job.not_before and job.not_before > now)]  # fmt: skip
    learned = learned_runtimes(group_of(job) for job in charged + queued if not job.max_runtime)
    placements = _charged_placements(placeable, running, charged, replicas_of, bound, closed, listed)
    world.left_running = {str(job.pk) for job, _ in left}
    for job in charged:
        if not placements[job.pk]:
            continue  # no replica to charge at all
        world.jobs[str(job.pk)] = job
        left_running = str(job.pk) in world.left_running
        # A job left running is expected to end when reconcile stops it, about one interval from now, whatever
        # the job would run for: its team's estimated starts count on its room from then.
        started, max_runtime, estimate = (
            (epoch(now), None, settings.RECONCILE_INTERVAL) if left_running
            else (epoch(job.started_at or job.admitted_at or now), job.max_runtime, _estimate(job, learned)))
        running.append(
            policy.RunningJob(
                id=str(job.pk), team=job.team.slug, tier=job.tier.name, started=started, replicas=replicas_of[job.pk],
                nodes=placements[job.pk], max_runtime=max_runtime, queued=epoch(job.queued_at), estimate=estimate,
                checkpointed=_checkpointed(job),
                gpu_type=job.assigned_gpu_type or None,
                # UNSTOPPED jobs and those left running are being stopped: never a victim, stopping them frees nothing.
                stopping=job.state in Job.STOPPING_STATES or left_running,
            )  # fmt: skip
        )
    pending: list[policy.PendingJob] = []
    reservations: list[policy.Reservation] = []
    node_order = {node.name: index for index, node in enumerate(placeable)}
    # Trials that hold GPUs, or will until they stop: those left running too.
    holding = [*Job.objects.filter(state__in=HOLDING, sweep__isnull=False).only("sweep_id", "gpu_total"),
               *(job for job, _ in left if job.sweep_id is not None)]  # fmt: skip
    left_out = _tiers_not_allowed(queued)  # first: only a person ends this wait, whatever else holds the job
    left_out.update(_running_unadmitted([job for job in queued if job.pk not in left_out
                                         and str(job.pk) in world.left_running]))  # fmt: skip
    if claims is not None:
        left_out.update(_missing_claims([job for job in queued if job.pk not in left_out], claims))
    # A trial held for its tier or its claims takes none of its sweep's cap.
    left_out.update(within_caps([job for job in queued if job.pk not in left_out], holding))
    for job in queued:
        if job.pk in left_out:
            world.held[str(job.pk)] = (job, left_out[job.pk])
            continue
        world.jobs[str(job.pk)] = job
        pending.append(
            policy.PendingJob(
                id=str(job.pk), team=job.team.slug, tier=job.tier.name, queued=epoch(job.queued_at),
                replicas=policy_replicas(job.replicas, defaults.get(job.team_id, {})), max_runtime=job.max_runtime,
                estimate=_estimate(job, learned), gpu_type=tuple(job.gpu_type),
            )  # fmt: skip
        )
        if job.reservation and (held := _reservation(job, node_order)) is not None:
            reservations.append(held)
    pending.extend(extra_pending)
    types = known_types()
    world.snapshot = policy.Snapshot(
        now=epoch(now),
        nodes=policy_nodes(nodes, types),
        gpu_types=tuple(t.name for t in types),
        tiers=policy_tiers(),
        teams=tuple(policy_team(team) for team in teams),
        running=tuple(running),
        pending=tuple(pending),
        settings=policy_settings(),
        reservations=tuple(reservations),
    )
    return world


def claim_names(job: Job) -> set[str]:
    """The claims a job mounts, by name (its stored volumes: {claim | config_map, path, read_only})."""
    return {volume["claim"] for volume in job.volumes if "claim" in volume}


def claim_namespaces() -> list[str]:
    """The namespaces where a queued job mounts a claim: the ones whose claims a cycle reads."""
    queued = Job.objects.filter(state=Job.State.QUEUED).exclude(volumes=[]).select_related("team").only("team__slug",
                                                                                                      "volumes")
    return sorted({job.team.slug for job in queued if claim_names(job)})


def _missing_claims(queued: list[Job], claims: dict[str, set[str] | str]) -> dict[int, Held]:
    """The queued jobs mounting a claim their namespace lacks (or whose claims could not be
    read), each with the sentence saying so."""
    held = {}
    for job in queued:
        present = claims.get(job.team.slug)
        if present is None or not claim_names(job):
            continue  # mounts no claim; claims are read only where a queued job mounts one
        if isinstance(present, str):
            held[job.pk] = Held(reason=f"Waiting for its claims: the cluster did not list the claims of namespace "
                                f"{job.team.slug} ({present}).", code=Because.MISSING_CLAIM)  # fmt: skip
        elif (error := missing_claims_error(to_cluster_job(job), present)) is not None:
            held[job.pk] = Held(reason=f"Waiting for its claims: {error}", code=Because.MISSING_CLAIM)
    return held


def _tiers_not_allowed(queued: list[Job]) -> dict[int, Held]:
    """The queued jobs whose tier their team may no longer use (staff took it off the team's tiers
    after they were submitted), each with the sentence saying so and what ends the wait; empty when
    every queued job's tier is allowed. The teams' tiers are read once, in one query.

    Such a job is never offered to the policy, so it is neither admitted at its tier nor rejected:
    it waits until staff allow the tier again or it is cancelled (a job's tier cannot be changed, so
    its owner resubmits it at another). Jobs admitted or running at the tier are not held: they were
    admitted while it was allowed.
    """
    if not queued:
        return {}
    allowed: dict[int, list[tuple[int, str]]] = {}  # team id -> its tiers (id, name), in tier order
    rows = (Team.tiers.through.objects.filter(team_id__in={job.team_id for job in queued})
            .order_by("-prioritytier__value", "prioritytier__name")
            .values_list("team_id", "prioritytier_id", "prioritytier__name"))  # fmt: skip
    for team_id, tier_id, name in rows:
        allowed.setdefault(team_id, []).append((tier_id, name))
    held = {}
    for job in queued:
        tiers = allowed.get(job.team_id, [])
        if any(tier_id == job.tier_id for tier_id, _ in tiers):
            continue
        tier, team = job.tier.name, job.team.slug
        if tiers:
            names = ", ".join(name for _, name in tiers)
            reason = (f"Its tier {tier} is no longer allowed for team {team} (it may use {names}): cancel it and "
                      f"resubmit it at one of those tiers, or ask staff to allow {tier} again.")  # fmt: skip
        else:
            reason = (f"Its tier {tier} is no longer allowed for team {team}, which may use no tier now: ask staff "
                      f"to allow {tier} again, or cancel it.")  # fmt: skip
        held[job.pk] = Held(reason=reason, code=Because.TIER_NOT_ALLOWED)
    return held


def policy_nodes(nodes: Iterable[NodeInfo], types) -> tuple[policy.Node, ...]:
    """The nodes as the policy sees them, each with the GPU type its labels tell (None: no type) and,
    for one that takes no new pods, why (it counts only for R10)."""
    return tuple(policy.Node(name=n.name, gpu=n.gpu, cpu=n.cpu, memory=n.memory, gpu_type=type_of(n, types) or None,
                             schedulable=n.schedulable, unschedulable=n.unschedulable)
                 for n in nodes)  # fmt: skip


def _charged_placements(
    nodes: list[NodeInfo], outside: list[policy.RunningJob], jobs: list[Job],
    replicas_of: dict[int, tuple[policy.ReplicaGroup, ...]], bound: dict[int, tuple[OutsidePod, ...]] | None = None,
    closed: set[str] | frozenset[str] = frozenset(), listed: set[int] | frozenset[int] = frozenset(),
) -> dict[int, tuple[str, ...]]:
    """Returns the node each replica of each job is charged to: the node a pod of its size is
    bound to (`bound`, from the cluster: the scheduler may bind elsewhere than the plan), else
    its placement where that node is known, else the node with the most GPUs (then cpu, memory)
    left, even below zero. When the cluster has no node that takes pods, a replica on no known node
    is charged to the node it was placed on, else to UNLISTED: either holds no room, and the job is
    never left out of its team's quota. A replica on a node of `closed` (known, but taking no new
    pods) is charged there and takes none of `nodes`' room, unless its job is `listed` (the cluster lists
    its object as running, with the pods bound to nodes) and no pod of it is bound there: that replica was
    lost with its node (a drain), or never started there, and its pod waits for room on another, so it is
    charged as a replica of no known node, and no cycle gives away the room it is about to take. This reads
    the pods, not the replicas R13 counts as short (`JobStatus.waiting_pods`): an elastic job training on
    without its lost replica is not short, yet that replica's pod takes room once some frees.

    Over-charging a node only keeps other jobs off it until the cluster's next reading;
    under-charging would let a cycle admit into room that is taken.
    """
    free = {node.name: [node.gpu, node.cpu, node.memory] for node in nodes}
    for pod in outside:
        _take(free, pod.nodes[0], pod.replicas[0])
    needs = {job.pk: [group for group in replicas_of[job.pk] for _ in range(group.count)] for job in jobs}
    charged: dict[int, list[str | None]] = {}
    for job in jobs:
        known: list[str | None] = [node if node in free or node in closed else None
                                   for node in job.placement[: len(needs[job.pk])]]  # fmt: skip
        known += [None] * (len(needs[job.pk]) - len(known))
        pods = [pod for pod in (bound or {}).get(job.pk, ()) if pod.node in free or pod.node in closed]
        if pods or job.pk in listed:
            known = _where_bound(known, needs[job.pk], pods, lost=closed if job.pk in listed else frozenset())
        for node, group in zip(known, needs[job.pk]):
            if node is not None:
                _take(free, node, group)
        charged[job.pk] = known
    if not free:
        # No node takes pods: a replica on no known node is charged to the node it was placed on, else to
        # one the snapshot does not list. Either holds no room, and the job still counts in its team's quota.
        return {job.pk: tuple(node or _placed(job, index) for index, node in enumerate(charged[job.pk]))
                for job in jobs}  # fmt: skip
    order = {name: index for index, name in enumerate(free)}
    for job in jobs:  # in id order, once every known placement is charged
        for index, group in enumerate(needs[job.pk]):
            if charged[job.pk][index] is None:
                node = max(free, key=lambda name: (free[name], -order[name]))
                _take(free, node, group)
                charged[job.pk][index] = node
    return {pk: tuple(replica_nodes) for pk, replica_nodes in charged.items()}  # type: ignore[misc]


def _placed(job: Job, index: int) -> str:
    """The node a job's replica `index` was placed on, else UNLISTED."""
    return job.placement[index] if index < len(job.placement) and job.placement[index] else UNLISTED


def _where_bound(planned: list[str | None], replicas: list[policy.ReplicaGroup], pods: list[OutsidePod],
                 lost: set[str] | frozenset[str] = frozenset()) -> list[str | None]:
    """Each replica's node: that of a bound pod of its GPU count (one on its planned node first),
    else its planned node unless that is one of `lost` (None then: its node is not known). A replica
    bound elsewhere frees its planned node."""
    left = list(pods)
    nodes: list[str | None] = [None] * len(replicas)
    for on_plan in (True, False):
        for index, replica in enumerate(replicas):
            if nodes[index] is not None:
                continue
            pod = next((pod for pod in left if pod.gpu == replica.gpu and (not on_plan or pod.node == planned[index])),
                       None)  # fmt: skip
            if pod is not None:
                nodes[index] = pod.node
                left.remove(pod)
    return [node if node is not None else None if planned[index] in lost else planned[index]
            for index, node in enumerate(nodes)]


def _take(free: dict[str, list[int]], node: str, group: policy.ReplicaGroup) -> None:
    """Charges one replica of `group` to `node`, if the cluster has that node."""
    room = free.get(node)
    if room is not None:
        room[0] -= group.gpu
        room[1] -= group.cpu
        room[2] -= group.memory


def own_statuses(statuses: Iterable[JobStatus], jobs: dict[int, Job], *, orphans: bool = True) -> dict[int, JobStatus]:
    """The statuses of the jobs' own objects, by job id: each in its team's namespace, under its name.

    A copy of a job's object (`kubectl get -o yaml`, applied elsewhere or under another name) keeps
    its `gangway.io/job-id` label, and its pods too, yet it is not the job: its pods take room as
    outside usage (R12), and it is neither followed nor stopped as the job. With `orphans`, the
    statuses of ids none of `jobs` has are kept too (reconcile deletes those Gangway created).
    """
    own = {}
    for status in statuses:
        job = jobs.get(status.job_id)
        if job is None and orphans or job is not None and (status.namespace, status.name) == _object_of(job):
            own[status.job_id] = status
    return own


def _left_running(statuses: list[JobStatus]) -> list[tuple[Job, JobStatus]]:
    """The queued and ended jobs of `statuses` (objects that run, of jobs the cycle does not count as running)
    whose own object Gangway is to stop, with its status, in id order.

    Such an object runs though no admission stands behind it: a queued job's is a create reported refused that
    went through, or one its owner resumed outside Gangway (an adopted job); an ended job's was not stopped
    yet. Reconcile stops each (`_correct`, `_stop_leftovers`), asking again at every pass while the cluster
    refuses, and until it has, the pods run: the job counts as a running job of its team, in its quota as well
    as its room, and is never a victim. Left out: a job being stopped, whose room and quota the job it was
    preempted for now holds (one the cluster refuses or fails to stop is UNSTOPPED); an adopted job's object
    given back to its owner (`given_back`), and a copy of a job's object (`own_statuses`): their pods are
    outside usage.
    """
    if not statuses:
        return []
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=[status.job_id for status in statuses])
            .exclude(state__in=Job.STOPPING_STATES).select_related("team", "tier")}  # fmt: skip
    own = own_statuses(statuses, jobs, orphans=False)
    back = given_back((jobs[job_id], status) for job_id, status in own.items())
    return [(jobs[job_id], status) for job_id, status in sorted(own.items()) if job_id not in back]


def _running_unadmitted(jobs: list[Job]) -> dict[int, Held]:
    """The queued jobs whose object runs all the same (`_left_running`), each with the sentence saying so: such
    a job waits until reconcile has stopped it, so that it never runs twice, and its GPUs meanwhile count in
    its team's quota."""
    held = {}
    for job in jobs:
        gpus = amount(GPU, job.gpu_total)
        held[job.pk] = Held(
            reason=(f"Waiting for its object in the cluster to stop: it runs there without an admission (a create "
                    f"reported refused that went through, or a resume made outside Gangway), and its {gpus} count "
                    f"in the quota of team {job.team.slug} meanwhile. {STOPS_IT}; the job waits in the queue "
                    f"again then."),
            code=Because.NOT_ADMITTED)  # fmt: skip
    return held


def _object_of(job: Job) -> tuple[str, str]:
    """The namespace and name of a job's own object in the cluster."""
    return job.team.slug, job.cluster_name or cluster_name(job.pk, job.name)


def replica_specs(job: Job, defaults: dict[str, int]) -> tuple[ReplicaSpec, ...]:
    """The job's replica groups as its pods ask: a group naming no CPU or memory gets its team's `defaults`."""
    return tuple(
        ReplicaSpec(
            role=group["role"], count=group["count"], gpu=group.get("gpu", 0),
            cpu=group.get("cpu") or defaults.get("cpu", 0), memory=group.get("memory") or defaults.get("memory", 0),
        )  # fmt: skip
        for group in job.replicas
    )


def to_cluster_job(job: Job, *, placement: tuple[str, ...] = ()) -> ClusterJob:
    """The port's view of a job: everything an adapter needs to create, suspend or resume it."""
    defaults = replica_defaults(job.team)
    namespace, name = _object_of(job)
    return ClusterJob(
        job_id=job.pk,
        name=name,
        namespace=namespace,
        team=job.team.slug,
        kind=job.kind,
        runtime=job.runtime,
        image=job.image,
        command=tuple(job.command),
        args=tuple(job.args),
        env=tuple(sorted(job.env.items())),
        replicas=replica_specs(job, defaults),
        tier=job.tier.name,
        grace_period=job.tier.grace_period,
        max_runtime=job.max_runtime,
        attempt=job.attempt,
        checkpoint_claim=job.team.checkpoint_claim,
        sim_duration=job.sim_duration,
        sim_fail=job.sim_fail,
        placement=placement or tuple(job.placement),
        gangway_url=settings.PUBLIC_URL,
        job_token=job_tokens.issue(job.pk) if settings.PUBLIC_URL else "",
        volumes=volume_mounts(job.volumes), shm=job.shm, adopted=job.adopted, uid=job.cluster_uid,
        defaults=tuple(sorted(defaults.items())),
        gpu_type=job.assigned_gpu_type,
        gpu_type_label=label_of(job.assigned_gpu_type, known_types()) if job.assigned_gpu_type else (),
    )
