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

A job larger than its pool can never start; it is rejected at submission.
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

    def _pool(self, entry: Entry) -> str:
        return "" if self.pooled else entry.team

    def _limit(self, pool: str) -> int:
        return self.world.capacity if self.pooled else self.world.nominal[pool]

    def admit(self, cluster: Cluster, now: int, news: News, act: Actions) -> None:
        for entry in news.arrived:
            pool = self._pool(entry)
            if entry.gpus > self._limit(pool):
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
                if not self.pooled and cluster.used[pool] + entry.gpus > self._limit(pool):
                    break
                nodes = cluster.free.gang(entry.pods, self.world.owned.get(pool))
                if nodes is None:
                    break
                heapq.heappop(queue)
                act.start(entry, nodes)


def isolated_fifo(world: World) -> Fifo:
    return Fifo("isolated-fifo", world, pooled=False)


def isolated_sjf(world: World) -> Fifo:
    return Fifo("isolated-sjf", world, pooled=False, key=shortest_first)


def pooled_fifo(world: World) -> Fifo:
    return Fifo("pooled-fifo", world, pooled=True)
