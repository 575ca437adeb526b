"""Free room on nodes, indexed by free GPUs so placement skips full nodes.

The index is the working state of one cycle: admissions take room, what-if
preemption gives room back and returns it through a restore closure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .demand import Vector
from .model import Node


class Room:
    """Free GPU, CPU and memory per node, in snapshot node order.

    `bucket(b)` lists, in node order, the nodes with `b` free GPUs (nodes
    overcommitted by outside pods sit in bucket 0 with a negative free count).
    Membership is a set, sorted again only when a changed bucket is read, so
    what-if removals of many jobs stay cheap.
    """

    __slots__ = ("names", "index", "gpu", "cpu", "memory", "members", "sorted", "total")

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.names = [n.name for n in nodes]
        self.index = {n.name: i for i, n in enumerate(nodes)}
        self.gpu = [n.gpu for n in nodes]
        self.cpu = [n.cpu for n in nodes]
        self.memory = [n.memory for n in nodes]
        top = max(self.gpu, default=0)
        self.members: list[set[int]] = [set() for _ in range(top + 1)]
        for i, free in enumerate(self.gpu):
            self.members[free].add(i)
        self.sorted: list[list[int] | None] = [None] * (top + 1)
        self.total = [sum(self.gpu), sum(self.cpu), sum(self.memory)]

    def copy(self) -> Room:
        """Returns an independent copy (same node indices)."""
        other = Room.__new__(Room)
        other.names, other.index = self.names, self.index
        other.gpu, other.cpu, other.memory = list(self.gpu), list(self.cpu), list(self.memory)
        other.members = [set(m) for m in self.members]
        other.sorted = list(self.sorted)
        other.total = list(self.total)
        return other

    def _move(self, i: int, old: int, new: int) -> None:
        old, new = max(old, 0), max(new, 0)
        if old != new:
            self.members[old].discard(i)
            self.members[new].add(i)
            self.sorted[old] = self.sorted[new] = None

    def bucket(self, b: int) -> list[int]:
        """Returns the nodes with `b` free GPUs, in node order."""
        nodes = self.sorted[b]
        if nodes is None:
            nodes = self.sorted[b] = sorted(self.members[b])
        return nodes

    @property
    def top(self) -> int:
        """Returns the largest bucket index (the most GPUs a node has)."""
        return len(self.members) - 1

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
        for b in range(self.top, -1, -1):
            if self.members[b]:
                return b
        return 0

    def nodes_from(self, gpu: int) -> Iterator[tuple[int, int]]:
        """Yields `(free_gpu, node)` for nodes with at least `gpu` free GPUs,
        fewest free GPUs first, then node order (the best-fit order of R11)."""
        for b in range(max(gpu, 0), self.top + 1):
            if self.members[b]:
                for i in self.bucket(b):
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
