"""Free GPUs per node, indexed for best-fit placement by the baseline policies.

The conventions' placement: a replica of at most 8 GPUs goes to the node left
with the fewest free GPUs that holds it (best fit), ties to node order; a gang
puts its whole-node replicas on the first empty nodes and the rest best fit on
another node. Gangway and kueue-like place through the policy itself. A
search may be confined to a range of nodes (a team's own nodes).
"""

from __future__ import annotations

from bisect import insort

from .trace import GPUS_PER_NODE


class Free:
    """Free GPUs of each node; `buckets[b]` lists, in node order, nodes with b free."""

    __slots__ = ("gpu", "buckets", "total")

    def __init__(self, count: int, size: int = GPUS_PER_NODE) -> None:
        self.gpu = [size] * count
        self.buckets: list[list[int]] = [[] for _ in range(size + 1)]
        self.buckets[size] = list(range(count))
        self.total = size * count

    def take(self, i: int, gpus: int) -> None:
        self._move(i, self.gpu[i] - gpus)

    def give(self, i: int, gpus: int) -> None:
        self._move(i, self.gpu[i] + gpus)

    def _move(self, i: int, new: int) -> None:
        old = self.gpu[i]
        if new < 0 or new >= len(self.buckets):
            raise ValueError(f"node {i} would have {new} free GPUs")
        self.total += new - old
        self.gpu[i] = new
        if old != new:
            self.buckets[old].remove(i)
            insort(self.buckets[new], i)

    def largest(self) -> int:
        """Returns the most free GPUs on any one node."""
        for b in range(len(self.buckets) - 1, -1, -1):
            if self.buckets[b]:
                return b
        return 0

    def best_fit(self, gpus: int, skip: tuple[int, ...] = (),
                 within: range | None = None) -> int | None:
        """Returns the node (of `within`, when given) that holds `gpus` with
        the fewest left over, or None."""
        for b in range(max(gpus, 0), len(self.buckets)):
            for i in self.buckets[b]:
                if i not in skip and (within is None or i in within):
                    return i
        return None

    def gang(self, pods: tuple[int, ...], within: range | None = None) -> tuple[int, ...] | None:
        """Returns the node of each pod for a whole gang (on nodes of `within`,
        when given), or None when it does not fit now."""
        if sum(pods) > self.total:
            return None
        if len(pods) == 1:
            i = self.best_fit(pods[0], within=within)
            return None if i is None else (i,)
        size = len(self.buckets) - 1
        whole = [p for p in pods if p == size]
        empty = self.buckets[size]
        if within is not None:
            empty = [i for i in empty if i in within]
        if len(whole) > len(empty):
            return None
        chosen = tuple(empty[: len(whole)])
        rest = [p for p in pods if p != size]
        if not rest:
            return chosen
        i = self.best_fit(rest[0], skip=chosen, within=within)
        return None if i is None else chosen + (i,)
