"""What a job asks for, in the shape the policy computes with.

Resource vectors are plain tuples `(gpu, cpu, memory)` in the order of
`model.RESOURCES`, so the arithmetic in quota and placement stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import ReplicaGroup

GPU, CPU, MEMORY = 0, 1, 2

Vector = tuple[int, int, int]
ZERO: Vector = (0, 0, 0)


@dataclass(frozen=True, slots=True)
class Demand:
    """A gang: replica groups `(count, gpu, cpu, memory)` with count > 0."""

    groups: tuple[tuple[int, int, int, int], ...]
    total: Vector
    # Demands key the cycle's caches, once per pending job: hashed once.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.groups, self.total)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def replicas(self) -> int:
        """Returns the number of replicas in the gang."""
        return sum(group[0] for group in self.groups)

    def needs(self) -> tuple[int, ...]:
        """Returns the indices of the resources the gang asks for."""
        return tuple(r for r in range(3) if self.total[r] > 0)


@lru_cache(maxsize=4096)
def demand_of(replicas: tuple[ReplicaGroup, ...]) -> Demand:
    """Returns the demand of a job's replica groups; shared by equal shapes."""
    groups = tuple(
        (g.count, g.gpu, g.cpu, g.memory) for g in replicas if g.count > 0
    )
    total = (
        sum(n * g for n, g, _, _ in groups),
        sum(n * c for n, _, c, _ in groups),
        sum(n * m for n, _, _, m in groups),
    )
    return Demand(groups, total)


def per_node_usage(
    replicas: tuple[ReplicaGroup, ...], nodes: tuple[str, ...]
) -> dict[str, Vector]:
    """Returns what a running job holds on each node it names.

    Replicas expand in group order and take the node names in turn.
    """
    usage: dict[str, list[int]] = {}
    names = iter(nodes)
    for group in replicas:
        for _ in range(group.count):
            name = next(names)
            held = usage.setdefault(name, [0, 0, 0])
            held[GPU] += group.gpu
            held[CPU] += group.cpu
            held[MEMORY] += group.memory
    return {name: (v[0], v[1], v[2]) for name, v in usage.items()}


def add_to(totals: dict, key, g: int, c: int, m: int) -> None:
    """Adds GPUs, CPU and memory to `totals[key]` (a node's or a team's);
    key None (a node the snapshot does not list, which holds no schedulable
    room) adds nothing."""
    if key is None:
        return
    held = totals.get(key)
    if held is None:
        totals[key] = [g, c, m]
    else:
        held[0] += g
        held[1] += c
        held[2] += m
