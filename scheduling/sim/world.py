"""The replayed cluster and its conventions, as the policy sees them.

Conventions (so results compare with published work): nodes of 8 GPUs, as
many as the teams' sizes add up to; each team's nominal quota is its size;
a job of g GPUs is a gang of one replica when g <= 8, of g/8 whole-node
replicas when g is a multiple of 8, otherwise floor(g/8) whole-node replicas
plus one replica of the rest. Tiers are drawn per job with a seeded random:
10% production (not preemptible), 60% standard, 30% experiment.

Two ways to give teams their nodes (`--partition`): `shared` (the default),
where a team's nominal is a quota over nodes every team shares, and
`nodes`, where each team owns whole nodes (as many as its size, given in the
order the teams are listed) and the isolated baselines place its jobs only
there, as the Helios simulator and most published replays do. Policies that
share the cluster ignore the partition.

`estimates` says how the replay fills R14's runtimes (see runtimes.py).

GPU types (`--types l4:256,a100:96`): a synthetic heterogeneous cluster of
that many 8-GPU nodes of each type, in the order written, which is the
cluster's order (cheapest first: jobs that accept any type try them in it).
Each team's nominal is split over the types in proportion to their
capacity: its share of all team sizes times each type's GPUs, rounded by
largest remainder so every type's GPUs are all in some team's nominal (the
teams' sizes are scaled to the cluster the flag builds). Each job draws,
with the same seeded random after its tier, whether it accepts any type
(`any_type`, 30% by default: every type, in the cluster's order) or only a
preferred type, drawn in proportion to capacity among the types that can
hold it. Without types nothing of this is drawn, so tiers and every figure
stay those of the untyped replay.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from scheduling.policy import Node, ReplicaGroup, Team, Tier
from scheduling.policy.types import typed_key

from .trace import GPUS_PER_NODE, Trace, TraceError

PRODUCTION = Tier("production", 1000, preemptible=False)
STANDARD = Tier("standard", 100)
EXPERIMENT = Tier("experiment", 10)
TIERS = (PRODUCTION, STANDARD, EXPERIMENT)
TIER_DRAW = ((0.1, PRODUCTION), (0.7, STANDARD), (1.0, EXPERIMENT))


PARTITIONS: tuple[str, ...] = ("shared", "nodes")
ANY_TYPE = 0.3  # share of jobs accepting every GPU type, when the cluster has types


def parse_types(text: str) -> tuple[tuple[str, int], ...]:
    """Returns `(type, nodes)` pairs of `--types`, e.g. "l4:256,a100:96", in
    the order written (the cluster's order, cheapest first); () for "".
    Raises TraceError naming a malformed pair, a repeated type or a count
    that is not a positive whole number."""
    pairs: list[tuple[str, int]] = []
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, _, count = part.partition(":")
        name = name.strip()
        if not name or not count.strip().isdigit() or int(count) < 1:
            raise TraceError(f"--types: expected type:nodes with at least 1 node, e.g. a100:96, got {part!r}")
        if name in dict(pairs):
            raise TraceError(f"--types: {name} is named twice")
        pairs.append((name, int(count)))
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class World:
    """Nodes (in node order), teams with their nominal GPUs, each job's tier,
    the nodes each team owns (empty when nodes are shared) and how R14's
    runtimes are filled."""

    nodes: tuple[Node, ...]
    teams: tuple[Team, ...]
    tiers: tuple[Tier, ...]
    tier_of: dict[str, Tier]
    nominal: dict[str, int]
    owned: dict[str, range] = field(default_factory=dict)
    estimates: str = "history"
    # The GPU types, in the cluster's order (cheapest first); () without types.
    gpu_types: tuple[str, ...] = ()
    # job id -> the types it accepts, in order of preference (only with types).
    type_of: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def capacity(self) -> int:
        return sum(n.gpu for n in self.nodes)

    def nodes_of(self, gpu_type: str) -> range:
        """Returns the indices of the nodes of `gpu_type` (a type's nodes are
        consecutive, in the cluster's order of types); empty for an unknown type."""
        kinds = [k for k, node in enumerate(self.nodes) if node.gpu_type == gpu_type]
        return range(kinds[0], kinds[-1] + 1) if kinds else range(0)

    def type_nominal(self, team: str, gpu_type: str) -> int:
        """Returns the team's nominal GPUs of `gpu_type` (0 when its quota names none)."""
        return next(t.nominal.get(typed_key(gpu_type), 0) for t in self.teams if t.name == team)


def build_world(trace: Trace, seed: int, *, partition: str = "shared",
                estimates: str = "history", types: tuple[tuple[str, int], ...] = (),
                any_type: float = ANY_TYPE) -> World:
    """Returns the cluster for `trace`: one 8-GPU node per 8 GPUs of team size,
    teams with nominal = size, a seeded tier for every job and, under the
    `nodes` partition, each team's nodes; with `types` ((name, nodes) pairs),
    the typed cluster of the module docstring instead."""
    if partition not in PARTITIONS:
        raise ValueError(f"partition must be one of {', '.join(PARTITIONS)}, got {partition!r}")
    if types:
        if partition != "shared":
            raise TraceError("--types takes the shared partition: teams own no nodes in a typed cluster")
        return _typed_world(trace, seed, estimates, types, any_type)
    total = sum(size for _, size in trace.teams)
    count = -(-total // GPUS_PER_NODE)
    width = len(str(count))
    nodes = tuple(Node(f"n{i:0{width}d}", gpu=GPUS_PER_NODE) for i in range(count))
    teams = tuple(Team(name, {"gpu": size}) for name, size in trace.teams)
    rng = random.Random(seed)
    tier_of = {job.id: _tier(rng) for job in trace.jobs}
    owned = {}
    if partition == "nodes":
        first = 0
        for name, size in trace.teams:
            if size % GPUS_PER_NODE:
                raise ValueError(f"team {name} has {size} GPUs: owning nodes takes a "
                                 f"multiple of {GPUS_PER_NODE}")
            owned[name] = range(first, first + size // GPUS_PER_NODE)
            first = owned[name].stop
    return World(nodes, teams, TIERS, tier_of, dict(trace.teams), owned, estimates)


def _typed_world(trace: Trace, seed: int, estimates: str, types: tuple[tuple[str, int], ...],
                 any_type: float) -> World:
    """Returns the typed cluster of the module docstring."""
    if not 0 <= any_type <= 1:
        raise TraceError(f"--any-type must be a share from 0 to 1, got {any_type}")
    names = tuple(name for name, _ in types)
    capacity = {name: count * GPUS_PER_NODE for name, count in types}
    nodes = tuple(Node(f"{name}-{i:0{len(str(count))}d}", gpu=GPUS_PER_NODE, gpu_type=name)
                  for name, count in types for i in range(count))
    split = {team: {} for team, _ in trace.teams}
    for name in names:
        for team, gpus in _shares(trace.teams, capacity[name]).items():
            split[team][typed_key(name)] = gpus
    teams = tuple(Team(team, split[team]) for team, _ in trace.teams)
    rng = random.Random(seed)
    tier_of = {job.id: _tier(rng) for job in trace.jobs}  # first, as untyped: the same tiers
    type_of = {}
    for job in trace.jobs:
        if rng.random() < any_type:
            type_of[job.id] = names
            continue
        fitting = [name for name in names if capacity[name] >= job.gpus] or list(names)
        type_of[job.id] = (rng.choices(fitting, [capacity[name] for name in fitting])[0],)
    nominal = {team: sum(quota.values()) for team, quota in split.items()}
    return World(nodes, teams, TIERS, tier_of, nominal, {}, estimates, names, type_of)


def _shares(teams: tuple[tuple[str, int], ...], gpus: int) -> dict[str, int]:
    """Returns `gpus` split over teams in proportion to their sizes, by largest
    remainder (ties to team order), so the parts add up to `gpus`."""
    total = sum(size for _, size in teams) or 1
    exact = [(team, gpus * size / total) for team, size in teams]
    parts = {team: int(share) for team, share in exact}
    left = gpus - sum(parts.values())
    by_remainder = sorted(range(len(exact)), key=lambda k: (-(exact[k][1] - int(exact[k][1])), k))
    for k in by_remainder[:left]:
        parts[exact[k][0]] += 1
    return parts


def _tier(rng: random.Random) -> Tier:
    draw = rng.random()
    return next(tier for edge, tier in TIER_DRAW if draw < edge)


def replicas_of(gpus: int) -> tuple[ReplicaGroup, ...]:
    """Returns the gang shape of a job of `gpus` GPUs (see the module docstring)."""
    if gpus <= GPUS_PER_NODE:
        return (ReplicaGroup(1, gpu=gpus),)
    whole, rest = divmod(gpus, GPUS_PER_NODE)
    if not rest:
        return (ReplicaGroup(whole, gpu=GPUS_PER_NODE),)
    return (ReplicaGroup(whole, gpu=GPUS_PER_NODE), ReplicaGroup(1, gpu=rest))


def pods_of(gpus: int) -> tuple[int, ...]:
    """Returns the GPUs of each replica of the gang, in expansion order."""
    return tuple(g.gpu for g in replicas_of(gpus) for _ in range(g.count))


def restart_overhead(gpus: int) -> int:
    """Returns the seconds a restarted job spends before doing work again."""
    if gpus <= 1:
        return 7
    return 30 if gpus <= GPUS_PER_NODE else 60
