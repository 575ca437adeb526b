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
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, field

from ..engine import Actions, Cluster, Entry, News


@dataclass(slots=True)
class KubeDefault:
    name: str = "kube-default"
    by_size: dict[int, list] = field(default_factory=dict)  # next pod size -> [(key, id, entry)]

    def _queue(self, entry: Entry) -> None:
        size = entry.pods[len(entry.nodes)]
        key = (entry.queued, len(entry.nodes), entry.job.line, entry.id)
        insort(self.by_size.setdefault(size, []), (key, entry))

    def admit(self, cluster: Cluster, now: int, news: News, act: Actions) -> None:
        for entry in news.arrived:
            self._queue(entry)
        if not (news.freed or news.arrived):
            return
        failed: set[int] = set()
        free = cluster.free
        while True:
            heads = [(queue[0][0], size) for size, queue in self.by_size.items()
                     if queue and size not in failed]
            if not heads:
                return
            _, size = min(heads)
            entry = self.by_size[size][0][1]
            node = free.best_fit(size)
            if node is None:
                failed.add(size)
                continue
            self.by_size[size].pop(0)
            act.start(entry, (node,))
            if len(entry.nodes) < len(entry.pods):
                self._queue(entry)
