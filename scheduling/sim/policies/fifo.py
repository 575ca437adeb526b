"""Gang FIFO baselines: rigid per-team quotas, or one pool without quotas.

- `isolated-fifo`: every team confined to its nominal quota; each team's queue
  in submit order, strict: the first job that cannot be placed stops the
  team's queue (no backfill, no preemption). With nodes shared (the default
  partition) a team's quota is GPUs anywhere in the cluster; with
  `--partition nodes` it is the team's own nodes, the baseline the Helios
  simulator and most published replays use.
- `isolated-sjf`: as above, shortest job first by the trace's own durations
  (an oracle), a published reference for checking the replay.
- `pooled-fifo`: one pool, strict FIFO over all teams, no quotas: the upper
  bound on sharing, with no fairness.

With GPU types a pool is per type too: a job tries the types it accepts in
its order, each confined to that type's nodes and, isolated, to its team's
nominal of that type; the first that holds it now takes it.

A job larger than its pool (of every type it accepts) can never start; it
is rejected at submission.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from ..engine import Actions, Cluster, Entry, News
from ..world import World

Key = Callable[[Entry], tuple]


def submit_order(entry: Entry) -> tuple:
    return (entry.queued, entry.job.line)


def shortest_first(entry: Entry) -> tuple:
    return (entry.job.duration, entry.queued, entry.job.line)


@dataclass(slots=True)
class Fifo:
    """Strict gang FIFO per pool; `pooled` makes the whole cluster one pool."""

    name: str
    world: World
    pooled: bool
    key: Key = submit_order
    queues: dict[str, list] = field(default_factory=dict)
    ranges: dict[str, range] = field(default_factory=dict)  # GPU type -> its nodes

    def __post_init__(self) -> None:
        self.ranges = {kind: self.world.nodes_of(kind) for kind in self.world.gpu_types}

    def _pool(self, entry: Entry) -> str:
        return "" if self.pooled else entry.team

    def _limit(self, pool: str, kind: str | None) -> int:
        """Returns the GPUs pool `pool` may hold of type `kind` (None: untyped)."""
        if kind is None:
            return self.world.capacity if self.pooled else self.world.nominal[pool]
        if self.pooled:
            return len(self.ranges[kind]) * (self.world.nodes[0].gpu if self.world.nodes else 0)
        return self.world.type_nominal(pool, kind)

    def _used(self, cluster: Cluster, pool: str, kind: str | None) -> int:
        return cluster.used[pool] if kind is None else cluster.team_type_used[(pool, kind)]

    def _kinds(self, entry: Entry) -> tuple[str | None, ...]:
        """Returns the GPU types `entry` may take, in its order; (None,) without types."""
        return self.world.type_of.get(entry.id, self.world.gpu_types) or (None,)

    def _within(self, pool: str, kind: str | None) -> range | None:
        return self.world.owned.get(pool) if kind is None else self.ranges[kind]

    def admit(self, cluster: Cluster, now: int, news: News, act: Actions) -> None:
        for entry in news.arrived:
            pool = self._pool(entry)
            if all(entry.gpus > self._limit(pool, kind) for kind in self._kinds(entry)):
                act.reject(entry)
                continue
            heapq.heappush(self.queues.setdefault(pool, []),
                           (self.key(entry), entry.id, entry))
        if not (news.freed or news.arrived):
            return  # nothing freed, nothing new: every head still waits
        for pool in sorted(self.queues):
            queue = self.queues[pool]
            while queue:
                entry = queue[0][2]
                nodes = self._place(cluster, pool, entry)
                if nodes is None:
                    break
                heapq.heappop(queue)
                act.start(entry, nodes)

    def _place(self, cluster: Cluster, pool: str, entry: Entry) -> tuple[int, ...] | None:
        """Returns the nodes of the first type (in the job's order) where its
        pool's limit and the free room hold it now, or None."""
        for kind in self._kinds(entry):
            if not self.pooled and self._used(cluster, pool, kind) + entry.gpus > self._limit(pool, kind):
                continue
            nodes = cluster.free.gang(entry.pods, self._within(pool, kind))
            if nodes is not None:
                return nodes
        return None


def isolated_fifo(world: World) -> Fifo:
    return Fifo("isolated-fifo", world, pooled=False)


def isolated_sjf(world: World) -> Fifo:
    return Fifo("isolated-sjf", world, pooled=False, key=shortest_first)


def pooled_fifo(world: World) -> Fifo:
    return Fifo("pooled-fifo", world, pooled=True)
