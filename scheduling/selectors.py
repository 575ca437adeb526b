"""Reads on the cluster as the loop last recorded it: usage per team, capacity, the node map.

Nothing here calls the cluster or the policy; pages and the API stay fast and
keep working while the cluster is unreachable.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q, Sum

from jobs.models import Job, JobEvent, Sweep
from scheduling.cluster.job_manifests import job_manifest
from scheduling.models import ClusterNode, Cycle, UsageSample
from scheduling.policy.runtime import ESTIMATE_AT_LEAST, learned_estimate
from scheduling.policy.types import typed_key
from scheduling.snapshot import UNSTOPPED, group_of, latest_runs, to_cluster_job
from tenants.models import AuditEntry, Quota, Team
from tenants.selectors import gpu_types


@dataclass(frozen=True)
class TeamUsage:
    """A team's GPUs as the latest plan left them: used within nominal, borrowed above it, and its
    unused nominal lent or idle (the policy computes every figure; see scheduling/policy/usage.py)."""

    slug: str
    name: str
    nominal: int
    used: int
    within: int
    borrowed: int
    lent: int  # of its unused nominal, what other teams use now
    idle: int  # unused nominal nobody uses
    waiting: int  # GPUs asked for by its waiting jobs
    borrowing_limit: int | None
    borrowed_from: dict[str, int] = field(default_factory=dict)  # lender -> GPUs
    # On a cluster with GPU types: type name -> the team's figures of that type (whose own
    # `by_type` is empty), in the cluster's order; the figures above add them up. Empty without types.
    by_type: dict[str, TeamUsage] = field(default_factory=dict)

    @property
    def unlent(self) -> int:
        """Of `borrowed`, the GPUs no lender lent: capacity no team's quota covers, which borrowing takes
        first (scheduling/policy/usage.py: `borrowed_from` names the lenders, the rest comes from it)."""
        return max(0, self.borrowed - sum(self.borrowed_from.values()))


@dataclass(frozen=True)
class GpuRoom:
    """The GPUs of some nodes as the dashboard says them, the same way over a GPU type's team bars and over its
    group of the node map (`scheduling.views.room_words`): what Gangway's jobs hold of the nodes that take new
    pods, and apart what pods Gangway did not create hold there (a GPU held by anything is not free), then
    the GPUs of the nodes that take none (cordoned, tainted) and what Gangway's jobs still hold there.
    A GPU type's is its `TypeSummary.room`, the figures /api/v1/cluster and /metrics give; `room_of` is
    that of nodes no type matches."""

    capacity: int  # GPUs of its nodes that take new pods
    in_use: int  # of those, what Gangway's jobs hold
    outside: int  # of those, what pods Gangway did not create hold
    unschedulable: int = 0  # GPUs of its nodes that take no new pods
    unschedulable_nodes: int = 0  # how many of its nodes with GPUs take no new pods
    unschedulable_used: int = 0  # of those GPUs, what Gangway's jobs hold

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.in_use - self.outside)


@dataclass(frozen=True)
class TypeSummary:
    """One GPU type across the cluster: its nodes' GPUs and every team's figures of that type.

    `capacity` and `outside` are those of its nodes that take pods; the GPUs of its nodes that take
    none (cordoned, tainted) are counted apart, with the GPUs Gangway's jobs still hold there, so
    `in_use` of `capacity` never counts a job on a drained node against room it is not in."""

    name: str
    description: str
    capacity: int
    outside: int
    teams: list[TeamUsage] = field(default_factory=list)
    unschedulable: int = 0  # GPUs of its nodes that take no new pods
    unschedulable_nodes: int = 0  # how many of its nodes with GPUs take no new pods
    unschedulable_used: int = 0  # of those GPUs, what Gangway's jobs hold
    placed: int | None = None  # GPUs jobs are placed on its nodes that take pods; read while some node takes none

    @property
    def used(self) -> int:
        """GPUs of this type the teams use, wherever their jobs run (the teams' own figures added up)."""
        return sum(team.used for team in self.teams)

    @property
    def in_use(self) -> int:
        """GPUs of this type Gangway's jobs hold on its nodes that take pods: what `capacity` is used by."""
        return _in_use(self.used, self.unschedulable_used, self.placed)

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.in_use - self.outside)

    @property
    def room(self) -> GpuRoom:
        """This type's GPUs as its heading over the team bars and its group of the node map say them."""
        return GpuRoom(self.capacity, self.in_use, self.outside, self.unschedulable, self.unschedulable_nodes,
                       self.unschedulable_used)  # fmt: skip


@dataclass(frozen=True)
class ClusterSummary:
    capacity: int  # of the nodes that take pods
    used: int  # by Gangway jobs (admitted and running), wherever they run: the teams' figures added up
    outside: int  # by pods Gangway did not create, on the nodes that take pods
    reserved_idle: int  # nominal quota of teams that is neither used nor lent
    teams: list[TeamUsage] = field(default_factory=list)
    last_cycle: Cycle | None = None
    # One per GPU type, in the cluster's order; empty on a cluster without types.
    by_type: list[TypeSummary] = field(default_factory=list)
    # GPUs of the nodes that take no new pods (cordoned, tainted): neither capacity nor free.
    unschedulable: int = 0
    # Of those GPUs, what Gangway's jobs still hold (they keep running through a drain).
    unschedulable_used: int = 0
    placed: int | None = None  # GPUs jobs are placed on the nodes that take pods; read while some node takes none

    @property
    def in_use(self) -> int:
        """GPUs Gangway's jobs hold on the nodes that take pods: what `capacity` is used by. The node map's
        headings count the same way; the jobs on the other nodes are `unschedulable_used`."""
        return _in_use(self.used, self.unschedulable_used, self.placed)

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.in_use - self.outside)


def _in_use(used: int, apart: int, placed: int | None) -> int:
    """The GPUs of `used` (the plan's, wherever jobs run) on the nodes that take pods: less the `apart` on
    the others, and never more than jobs are `placed` there now (None: not read, every node takes pods).
    The plan's figures hold until the next cycle: a job ending on a drained node in between leaves
    `apart` at once, and must not move its GPUs into a capacity it was never in."""
    in_use = max(0, used - apart)
    return in_use if placed is None else min(in_use, placed)


def latest_gpu_usage() -> dict[str, dict]:
    """Returns the GPU figures per team (by slug, as the plan JSON gives them) of the latest
    cycle that made a plan; {} before any did."""
    figures = (Cycle.objects.filter(gpu_usage__isnull=False).order_by("-started_at", "-id")
               .values_list("gpu_usage", flat=True).first())  # fmt: skip
    return {team["team"]: team for team in figures or ()}


def team_usage(teams: list[Team] | None = None, *, types: list[str] | None = None) -> list[TeamUsage]:
    """GPU usage of every team (or those given), with what it lends, as the latest cycle's plan gave it;
    on a cluster with GPU types, with each type's figures too (`by_type`, of the types the plan
    names, else of `types`: the cluster's type names when the caller has read them).

    A team the latest plan did not know (created since) uses nothing yet: all its nominal is idle.
    """
    teams = teams if teams is not None else list(Team.objects.order_by("slug"))
    quotas: dict[int, dict[str, Quota]] = defaultdict(dict)
    for quota in Quota.objects.filter(resource__startswith="gpu"):
        quotas[quota.team_id][quota.resource] = quota
    figures = latest_gpu_usage()
    types = plan_types(figures) or list(types or ())
    usages = []
    for team in teams:
        got = figures.get(team.slug)
        of_type = {entry["gpu_type"]: entry for entry in (got or {}).get("by_type", ())}
        by_type = {name: _usage(team, of_type.get(name), quotas[team.pk].get(typed_key(name))) for name in types}
        total = _usage(team, got, quotas[team.pk].get("gpu"), by_type)
        usages.append(total)
    return usages


def _usage(team: Team, got: dict | None, quota: Quota | None, by_type: dict[str, TeamUsage] | None = None) -> TeamUsage:
    """A team's figures from the plan's `got` (all types or one), its nominal idle when the plan did
    not know it. With `by_type`, the total's nominal and borrowing limit are its types' added up
    (no limit when one type has none), as the policy reads a typed quota."""
    if by_type:
        nominal = sum(usage.nominal for usage in by_type.values())
        limits = [usage.borrowing_limit for usage in by_type.values()]
        borrowing_limit = None if None in limits else sum(limits)
    else:
        nominal = quota.nominal if quota else 0
        borrowing_limit = quota.borrowing_limit if quota else None
    got = got or {"nominal": nominal, "idle": nominal}
    return TeamUsage(
        slug=team.slug, name=team.name, nominal=got["nominal"], used=got.get("used", 0),
        within=got.get("within", 0), borrowed=got.get("borrowed", 0), lent=got.get("lent", 0),
        idle=got["idle"], waiting=got.get("waiting", 0), borrowing_limit=borrowing_limit,
        borrowed_from=got.get("borrowed_from", {}), by_type=by_type or {},
    )  # fmt: skip


def plan_types(figures: dict[str, dict]) -> list[str]:
    """The GPU types the plan's `figures` give per team, in the cluster's order (the policy's:
    tenants.GpuType's order, then types only a quota or a node names); [] for an untyped plan.
    Read from the figures so a page on an untyped cluster costs no query more."""
    return [entry["gpu_type"] for entry in next(iter(figures.values()), {}).get("by_type", ())]


def type_names() -> list[str]:
    """The cluster's GPU types in its order (tenants.GpuType); [] on a cluster without types."""
    return [gpu_type.name for gpu_type in gpu_types()]


def cluster_summary(types: list[str] | None = None) -> ClusterSummary:
    """The cluster's GPUs and every team's figures; `types`: the cluster's GPU type names when the
    caller has read them already (`type_names`). Capacity is that of the nodes that take pods; the
    GPUs of the others (cordoned, tainted), and what jobs still hold there, are counted apart."""
    taking = Q(unschedulable="")
    nodes = ClusterNode.objects.aggregate(capacity=Sum("gpu", filter=taking), outside=Sum("outside_gpu", filter=taking),
                                          unschedulable=Sum("gpu", filter=~taking))  # fmt: skip
    teams = team_usage(types=types)
    unschedulable = nodes["unschedulable"] or 0
    # Where jobs are placed is read only during a drain: while every node takes pods, no query more.
    held = _held_on(_gpu_nodes()) if unschedulable else None
    placed, apart = _where_held(held)
    return ClusterSummary(
        capacity=nodes["capacity"] or 0,
        used=sum(team.used for team in teams),
        outside=nodes["outside"] or 0,
        reserved_idle=sum(team.idle for team in teams),
        teams=teams,
        last_cycle=Cycle.objects.order_by("-started_at").first(),
        by_type=_type_summaries(teams, types, held),
        unschedulable=unschedulable,
        unschedulable_used=min(unschedulable, sum(apart.values())),
        placed=None if held is None else sum(placed.values()),
    )


def _gpu_nodes() -> dict[str, tuple[str, bool]]:
    """Each node with GPUs, by name: (its GPU type, "" without types; whether it takes new pods)."""
    rows = ClusterNode.objects.filter(gpu__gt=0).values_list("name", "gpu_type", "unschedulable")
    return {name: (gpu_type, not why) for name, gpu_type, why in rows}


def _where_held(held: dict[tuple[str, tuple[str, bool]], int] | None) -> tuple[dict[str, int], dict[str, int]]:
    """`held` (`_held_on(_gpu_nodes())`; None: not read) added up per GPU type: (on the nodes that take pods,
    on the others)."""
    placed: dict[str, int] = defaultdict(int)
    apart: dict[str, int] = defaultdict(int)
    for (_, (gpu_type, taking)), gpus in (held or {}).items():
        (placed if taking else apart)[gpu_type] += gpus
    return placed, apart


def _type_summaries(teams: list[TeamUsage], types: list[str] | None,
                    held: dict[tuple[str, tuple[str, bool]], int] | None) -> list[TypeSummary]:
    """Each GPU type's capacity (its nodes as the last cycle read them), its GPUs on nodes that take no
    new pods, what `held` (`_held_on(_gpu_nodes())`; None, not read, while every node takes pods) says
    jobs hold on both, and every team's figures of it, in the order of the teams' `by_type`; [] without types."""
    names = list(teams[0].by_type) if teams else list(types if types is not None else type_names())
    if not names:
        return []
    taking, gpus = Q(unschedulable=""), Q(gpu__gt=0)
    rows = (ClusterNode.objects.exclude(gpu_type="").values("gpu_type").order_by("gpu_type")
            .annotate(capacity=Sum("gpu", filter=taking), outside=Sum("outside_gpu", filter=taking),
                      out_gpus=Sum("gpu", filter=~taking), out_nodes=Count("pk", filter=~taking & gpus)))  # fmt: skip
    nodes = {row["gpu_type"]: row for row in rows}
    placed, apart = _where_held(held)
    described = {gpu_type.name: gpu_type.description for gpu_type in gpu_types()}
    summaries = []
    for name in names:
        row = nodes.get(name, {})
        unschedulable = row.get("out_gpus") or 0
        summaries.append(TypeSummary(
            name, described.get(name, ""), row.get("capacity") or 0, row.get("outside") or 0,
            [team.by_type[name] for team in teams], unschedulable=unschedulable,
            unschedulable_nodes=row.get("out_nodes") or 0,
            unschedulable_used=min(unschedulable, apart[name]), placed=None if held is None else placed[name],
        ))  # fmt: skip
    return summaries


def held_on_unschedulable(team: Team | None = None) -> dict[tuple[str, str], int]:
    """Returns the GPUs Gangway's jobs (`holding_jobs`) hold on the nodes that take no new pods
    (cordoned, tainted), by (team slug, the node's GPU type: "" without types); `team`: its jobs only.
    {} when every node takes pods.

    A team's own figures count these GPUs (quota is about what a team holds, not where); the
    cluster's and each type's "in use" of their capacity leave them out and say them apart.
    """
    nodes = dict(ClusterNode.objects.exclude(unschedulable="").filter(gpu__gt=0).values_list("name", "gpu_type"))
    return _held_on(nodes, team) if nodes else {}


def holding_jobs():
    """Returns the jobs that hold GPUs where they were placed, as the admission cycle's snapshot counts them:
    admitted and running ones, those being preempted that the cluster refuses, or fails, to stop, and those being
    cancelled until they have stopped (`UNSTOPPED`).
    The node map, its fingerprint and the drain figures read these, so they never show free what a plan
    counts as taken, but for the rare job whose object runs though the database does not count it
    (`snapshot._left_running`), which only a cycle's reading of the cluster shows."""
    return Job.objects.filter(Q(state__in=Job.ACTIVE_STATES) | UNSTOPPED)


def _held_on(nodes: dict, team: Team | None = None) -> dict[tuple, int]:
    """Returns the GPUs Gangway's jobs (`holding_jobs`; `team`: its jobs only) hold on `nodes`, by
    (team slug, what `nodes` maps the node's name to), read from where each replica was placed, as the
    node map reads it."""
    jobs = holding_jobs()
    if team is not None:
        jobs = jobs.filter(team=team)
    held: dict[tuple, int] = defaultdict(int)
    for slug, replicas, placement in jobs.values_list("team__slug", "replicas", "placement"):
        for node, gpus in zip(placement, replica_gpus(replicas)):
            if gpus and node in nodes:
                held[(slug, nodes[node])] += gpus
    return dict(held)


def replica_gpus(replicas: list[dict]) -> list[int]:
    """Each replica's GPUs in replica order, as a job's `placement` lists their nodes."""
    return [group.get("gpu", 0) for group in replicas for _ in range(group["count"])]


def gpus_per_type() -> list[tuple[str, int, int]]:
    """Each GPU type's (name, GPUs, GPUs used outside Gangway) on the nodes the last cycle read that
    take pods, by name; GPU nodes of no type are left out, and [] on a cluster without types."""
    rows = (ClusterNode.objects.exclude(gpu_type="").filter(unschedulable="").values("gpu_type").order_by("gpu_type")
            .annotate(capacity=Sum("gpu"), outside=Sum("outside_gpu")))  # fmt: skip
    return [(row["gpu_type"], row["capacity"] or 0, row["outside"] or 0) for row in rows]


@dataclass(frozen=True)
class Loan:
    """GPUs one team lends another right now, as the latest plan attributed them."""

    lender: str
    borrower: str
    gpus: int


def loans_now(usages: list[TeamUsage]) -> list[Loan]:
    """Who lends GPUs to whom now, read from each borrower's figures; empty when nobody lends."""
    return [Loan(lender, usage.slug, gpus) for usage in usages for lender, gpus in usage.borrowed_from.items()]


def usage_series(team: Team, since, types: list[str] = ()) -> tuple[list, dict[str, list]]:
    """The team's usage samples since `since`, oldest first, as (at, used, borrowed, nominal,
    waiting) rows: those of all GPU types, and those of each type (in `types` order, then any
    other sampled type); {} without typed samples. One query for both."""
    total: list = []
    series: dict[str, list] = {name: [] for name in types}
    rows = (UsageSample.objects.filter(team=team, at__gte=since).order_by("at")
            .values_list("gpu_type", "at", "gpu_used", "gpu_borrowed", "gpu_nominal", "gpu_waiting"))  # fmt: skip
    for gpu_type, *row in rows:
        (series.setdefault(gpu_type, []) if gpu_type else total).append(tuple(row))
    return total, {name: rows for name, rows in series.items() if rows}


@dataclass(frozen=True)
class NodeRow:
    """A node for the dashboard's map: its GPUs as runs of (team slug, job id, job name, GPUs) in replica order."""

    name: str
    gpu: int
    runs: list
    outside: int
    gpu_type: str = ""  # the GPU type its labels tell; "" without types, or a GPU node no type matches
    unschedulable: str = ""  # why it takes no new pods ("cordoned", "tainted <key>"); "" when it takes them

    @property
    def held(self) -> int:
        """GPUs Gangway's jobs hold here (never more than it has): the node's GPUs in use."""
        return min(self.gpu, sum(run[3] for run in self.runs))

    @property
    def outside_used(self) -> int:
        """GPUs pods Gangway did not create hold here, of those its jobs leave: what the map draws "outside"."""
        return min(self.outside, self.gpu - self.held)

    @property
    def used(self) -> int:
        """GPUs held here by anything, Gangway's jobs or pods it did not create: none of them is free."""
        return self.held + self.outside_used


def room_of(rows: list[NodeRow]) -> GpuRoom:
    """The GPUs of these nodes (`node_rows`) as a `GpuRoom`, read from where jobs are placed now: for a group
    of the node map no GPU type's summary covers (GPU nodes whose labels match no type)."""
    taking = [row for row in rows if not row.unschedulable]
    out = [row for row in rows if row.unschedulable and row.gpu]
    return GpuRoom(sum(row.gpu for row in taking), sum(row.held for row in taking),
                   sum(row.outside_used for row in taking), sum(row.gpu for row in out), len(out),
                   sum(row.held for row in out))  # fmt: skip


def node_rows() -> list[NodeRow]:
    """Every node with the jobs holding its GPUs, as runs rather than one object per GPU.

    The dashboard polls this; a cluster of 500 nodes holds 4,000 GPUs, so rows
    stay plain tuples and a job's GPUs on a node are one run.
    """
    runs: dict[str, list] = defaultdict(list)
    active = holding_jobs().order_by("id").values_list(
        "team__slug", "id", "name", "replicas", "placement"
    )
    for slug, job_id, name, replicas, placement in active:
        gpus = replica_gpus(replicas)
        held: dict[str, int] = defaultdict(int)
        for node, count in zip(placement, gpus):
            held[node] += count
        for node, count in held.items():
            if count:
                runs[node].append((slug, job_id, name, count))
    nodes = ClusterNode.objects.order_by("position", "name").values_list("name", "gpu", "outside_gpu", "gpu_type",
                                                                          "unschedulable")
    return [NodeRow(name, gpu, runs.get(name, []), outside, kind, why) for name, gpu, outside, kind, why in nodes]


@dataclass(frozen=True)
class Reserved:
    """GPUs on one node reserved for a starving job (R4)."""

    team: str
    job_id: int
    job_name: str
    gpus: int
    start: str  # ISO time


def reserved_by_node() -> dict[str, list[Reserved]]:
    """Each node's GPUs held by reservations of waiting jobs, as the last cycle made them."""
    reserved: dict[str, list[Reserved]] = defaultdict(list)
    rows = Job.objects.filter(state=Job.State.QUEUED, reservation__isnull=False).order_by("id").values_list(
        "team__slug", "id", "name", "replicas", "reservation"
    )
    for slug, job_id, name, replicas, held in rows:
        gpus = replica_gpus(replicas)
        per_node: dict[str, int] = defaultdict(int)
        for node, count in zip(held.get("nodes") or (), gpus):
            per_node[node] += count
        for node, count in per_node.items():
            if count:
                reserved[node].append(Reserved(slug, job_id, name, count, held.get("start", "")))
    return reserved


@dataclass(frozen=True)
class TypeOffer:
    """What one GPU type offers a team right now, from its quota row, the latest plan's figures of
    the type and the node mirror: figures a person can check, not the policy's verdict on one job
    (the fit preview gives that)."""

    name: str
    description: str
    nominal: int | None  # the team's nominal of this type; None when its quota does not name the type
    team_used: int  # GPUs of this type the team used once the latest plan's admissions counted
    gpus: int  # on the nodes of this type
    free: int  # on those nodes, neither held by a job nor by pods Gangway did not create

    @property
    def summary(self) -> str:
        """One line for the submit form: "a100 — 80 GB · team nominal 4 GPUs, 2 in use · 6 of 8 free on its nodes"."""
        quota = ("no team nominal (borrowing only)" if self.nominal is None
                 else f"team nominal {self.nominal} GPU{'s' if self.nominal != 1 else ''}, {self.team_used} in use")
        about = f" — {self.description}" if self.description else ""
        return f"{self.name}{about} · {quota} · {self.free} of {self.gpus} GPUs free on its nodes"


def gpu_type_offers(team: Team) -> list[TypeOffer]:
    """Each of the cluster's GPU types, cheapest first, with the team's nominal and use of it as the
    latest plan gave them (`by_type`, the policy's own figures) and the free GPUs on its nodes as
    the last cycle saw them; [] on a cluster without types."""
    types = gpu_types()
    if not types:
        return []
    nominal = dict(Quota.objects.filter(team=team, resource__in=[t.resource for t in types])
                   .values_list("resource", "nominal"))  # fmt: skip
    figures = latest_gpu_usage().get(team.slug) or {}
    used = {entry["gpu_type"]: entry["used"] for entry in figures.get("by_type", ())}
    gpus: dict[str, int] = defaultdict(int)
    free: dict[str, int] = defaultdict(int)
    for row in node_rows():
        if row.unschedulable:
            continue  # takes no new pods: none of its GPUs is on offer
        gpus[row.gpu_type] += row.gpu
        free[row.gpu_type] += row.gpu - row.used
    return [TypeOffer(t.name, t.description, nominal.get(t.resource), used.get(t.name, 0), gpus[t.name], free[t.name])
            for t in types]  # fmt: skip


def live_version(*, every_cycle: bool = False) -> tuple:
    """What the live parts of the pages move with, in one query of four maxima: the last cycle
    that changed something a page shows (decisions, waiting figures, the node mirror, the plan's
    GPU figures, reaching the cluster: `records.cycle_done`), the last job event (every
    transition records one, whoever makes it), the last audit entry (quota, tier, GPU type, team
    and membership changes record one) and the last change of a sweep (its objective, learned
    by reconcile). `every_cycle`: the last cycle, changed or not, for a part that shows the
    cycle itself (the dashboard's tiles show when it ran).
    """
    cycles = Cycle._meta.db_table if every_cycle else f"{Cycle._meta.db_table} WHERE changed"
    reads = [f"max(id) FROM {cycles}", f"max(id) FROM {JobEvent._meta.db_table}",
             f"max(id) FROM {AuditEntry._meta.db_table}", f"max(updated_at) FROM {Sweep._meta.db_table}"]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(f"(SELECT {read})" for read in reads))
        return tuple(cursor.fetchone())


def manifest_of(job: Job) -> dict:
    """The manifest of its kind (TFJob, PyTorchJob...) the Kubernetes adapter would create
    for the job now; read by the job page and the manifest command."""
    return job_manifest(to_cluster_job(job))


def gpu_type_capacity() -> dict[str, tuple[int, int]]:
    """Returns each GPU type's (nodes, GPUs) as the last cycle read the nodes that take pods, by type name;
    a type no such node holds is absent, and so is "" (GPU nodes no type matches, on a cluster with types)."""
    rows = ClusterNode.objects.exclude(gpu_type="").filter(unschedulable="").values("gpu_type").annotate(nodes=Count("pk"), gpus=Sum("gpu"))
    return {row["gpu_type"]: (row["nodes"], row["gpus"] or 0) for row in rows}


@dataclass(frozen=True)
class ExpectedRuntime:
    """How long a job is expected to run (R14) and why: its `max_runtime`, the median of its team's
    latest successes of the same kind and GPU count (`runs` of them), or the default runtime."""

    seconds: int
    source: str  # "max_runtime", "learned" or "default"
    runs: int = 0
    needed: int = ESTIMATE_AT_LEAST  # successes a median is learned from, at least
    capped: bool = False  # learned, but the median was above the default runtime, which caps it


def expected_runtime_of(job: Job) -> ExpectedRuntime:
    """The expected runtime the snapshot gives this job (R14), from the same successes it reads
    (`snapshot.latest_runs`): the latest ESTIMATE_FROM of its team, kind and GPU count."""
    if job.max_runtime:
        return ExpectedRuntime(job.max_runtime, "max_runtime")
    seconds = latest_runs([group_of(job)]).get(group_of(job), [])
    estimate = learned_estimate(seconds, settings.DEFAULT_RUNTIME)
    if estimate is None:
        return ExpectedRuntime(settings.DEFAULT_RUNTIME, "default", len(seconds))
    return ExpectedRuntime(estimate, "learned", len(seconds), capped=estimate == settings.DEFAULT_RUNTIME)
