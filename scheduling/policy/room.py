"""Free room on nodes, indexed by free GPUs so placement skips full nodes.

The index is the working state of one cycle: admissions take room, what-if
preemption gives room back and returns it through a restore closure.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterator

from .demand import Vector
from .model import Node


class Room:
    """Free GPU, CPU and memory per node, in snapshot node order.

    `buckets[b]` lists, in node order, the nodes with `b` free GPUs (nodes
    overcommitted by outside pods sit in bucket 0 with a negative free count).
    """

    __slots__ = ("names", "index", "gpu", "cpu", "memory", "buckets", "total")

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.names = [n.name for n in nodes]
        self.index = {n.name: i for i, n in enumerate(nodes)}
        self.gpu = [n.gpu for n in nodes]
        self.cpu = [n.cpu for n in nodes]
        self.memory = [n.memory for n in nodes]
        top = max(self.gpu, default=0)
        self.buckets: list[list[int]] = [[] for _ in range(top + 1)]
        for i, free in enumerate(self.gpu):
            self.buckets[free].append(i)
        self.total = [sum(self.gpu), sum(self.cpu), sum(self.memory)]

    def _move(self, i: int, old: int, new: int) -> None:
        old, new = max(old, 0), max(new, 0)
        if old != new:
            self.buckets[old].remove(i)
            insort(self.buckets[new], i)

    def take(self, i: int, v: Vector) -> None:
        """Takes `v` from node `i` (room held by a job or reserved)."""
        before = self.gpu[i]
        self.gpu[i] = before - v[0]
        self.cpu[i] -= v[1]
        self.memory[i] -= v[2]
        self.total[0] -= v[0]
        self.total[1] -= v[1]
        self.total[2] -= v[2]
        if v[0]:
            self._move(i, before, self.gpu[i])

    def give(self, i: int, v: Vector) -> None:
        """Gives `v` back to node `i`."""
        self.take(i, (-v[0], -v[1], -v[2]))

    def free(self, i: int) -> Vector:
        """Returns the free room of node `i`."""
        return (self.gpu[i], self.cpu[i], self.memory[i])

    def largest_free_gpu(self) -> int:
        """Returns the most free GPUs any single node has."""
        for b in range(len(self.buckets) - 1, -1, -1):
            if self.buckets[b]:
                return b
        return 0

    def nodes_from(self, gpu: int) -> Iterator[tuple[int, int]]:
        """Yields `(free_gpu, node)` for nodes with at least `gpu` free GPUs,
        fewest free GPUs first, then node order (the best-fit order of R11)."""
        for b in range(max(gpu, 0), len(self.buckets)):
            for i in self.buckets[b]:
                yield b, i

    def give_many(self, held: dict[int, Vector]) -> Callable[[], None]:
        """Gives back `held` (node -> room) and returns the closure that takes
        it again, so what-if preemption leaves no trace."""
        for i, v in held.items():
            self.give(i, v)

        def restore() -> None:
            for i, v in held.items():
                self.take(i, v)

        return restore
