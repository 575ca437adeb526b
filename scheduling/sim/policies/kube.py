"""`kube-default`: what plain Kubernetes does with distributed jobs.

No gang: every pod is placed on its own, in submit order, on the node that
fits it best (ties to node order); a pod that fits nowhere waits and later
pods still go ahead. Pods of jobs submitted in the same second interleave
(first pods of each, then second pods, as an operator creating them side by
side does), which is how two gangs end up each holding part of what the
other needs. A job runs once all its pods are placed; until then its
placed pods hold their GPUs and do nothing. No quotas, no preemption. When no
job runs and none arrives, nothing can ever start again: the engine records a
deadlock.

Pods of one size that find no room in a pass all fail in that pass (room
only shrinks during a pass), so the queue is kept per size of the next pod
and only the heads are tried: the same pods land on the same nodes as a scan
of every pod, in far less time.

With GPU types a job's first pod goes to the first type it accepts with a
node that holds it; its other pods then go to nodes of that type only (as
a node affinity on the type label would keep them). The queue is kept per
size and accepted types, so the same argument holds.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, field

from ..engine import Actions, Cluster, Entry, News
from ..placement import Free
from ..world import World


@dataclass(slots=True)
class KubeDefault:
    name: str = "kube-default"
    # (next pod size, GPU types it may go to) -> [(key, entry)]
    by_size: dict[tuple[int, tuple[str, ...]], list] = field(default_factory=dict)
    ranges: dict[str, range] = field(default_factory=dict)  # GPU type -> its nodes
    type_of: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, world: World) -> KubeDefault:
        """Returns the policy for `world`, knowing its GPU types' nodes."""
        return cls(ranges={kind: world.nodes_of(kind) for kind in world.gpu_types},
                   type_of=world.type_of)

    def _queue(self, entry: Entry) -> None:
        size = entry.pods[len(entry.nodes)]
        kinds = (entry.gpu_type,) if entry.gpu_type else self.type_of.get(entry.id, ())
        key = (entry.queued, len(entry.nodes), entry.job.line, entry.id)
        insort(self.by_size.setdefault((size, kinds), []), (key, entry))

    def _fit(self, free: Free, size: int, kinds: tuple[str, ...]) -> int | None:
        """Returns the best-fit node for a pod of `size` GPUs on the first of
        `kinds` that has one (anywhere when `kinds` is empty), or None."""
        if not kinds:
            return free.best_fit(size)
        for kind in kinds:
            node = free.best_fit(size, within=self.ranges[kind])
            if node is not None:
                return node
        return None

    def admit(self, cluster: Cluster, now: int, news: News, act: Actions) -> None:
        for entry in news.arrived:
            self._queue(entry)
        if not (news.freed or news.arrived):
            return
        failed: set[tuple[int, tuple[str, ...]]] = set()
        free = cluster.free
        while True:
            heads = [(queue[0][0], line) for line, queue in self.by_size.items()
                     if queue and line not in failed]
            if not heads:
                return
            _, line = min(heads)
            entry = self.by_size[line][0][1]
            node = self._fit(free, *line)
            if node is None:
                failed.add(line)
                continue
            self.by_size[line].pop(0)
            act.start(entry, (node,))
            if len(entry.nodes) < len(entry.pods):
                self._queue(entry)
