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
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from scheduling.policy import Node, ReplicaGroup, Team, Tier

from .trace import GPUS_PER_NODE, Trace

PRODUCTION = Tier("production", 1000, preemptible=False)
STANDARD = Tier("standard", 100)
EXPERIMENT = Tier("experiment", 10)
TIERS = (PRODUCTION, STANDARD, EXPERIMENT)
TIER_DRAW = ((0.1, PRODUCTION), (0.7, STANDARD), (1.0, EXPERIMENT))


PARTITIONS: tuple[str, ...] = ("shared", "nodes")


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

    @property
    def capacity(self) -> int:
        return sum(n.gpu for n in self.nodes)


def build_world(trace: Trace, seed: int, *, partition: str = "shared",
                estimates: str = "history") -> World:
    """Returns the cluster for `trace`: one 8-GPU node per 8 GPUs of team size,
    teams with nominal = size, a seeded tier for every job and, under the
    `nodes` partition, each team's nodes (see the module docstring)."""
    if partition not in PARTITIONS:
        raise ValueError(f"partition must be one of {', '.join(PARTITIONS)}, got {partition!r}")
    total = sum(size for _, size in trace.teams)
    count = -(-total // GPUS_PER_NODE)
    width = len(str(count))
    nodes = tuple(Node(f"n{i:0{width}d}", gpu=GPUS_PER_NODE) for i in range(count))
    teams = tuple(Team(name, {"gpu": size}) for name, size in trace.teams)
    rng = random.Random(seed)
    tier_of = {}
    for job in trace.jobs:
        draw = rng.random()
        tier_of[job.id] = next(tier for edge, tier in TIER_DRAW if draw < edge)
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
