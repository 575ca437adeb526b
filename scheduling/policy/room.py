"""Free room on nodes, indexed by free GPUs so placement skips full nodes.

The index is the working state of one cycle: admissions take room, what-if
preemption gives room back and returns it through a restore closure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from operator import sub

from .demand import Vector
from .model import Node


class Room:
    """Free GPU, CPU and memory per node, in snapshot node order.

    `bucket(b)` lists, in node order, the nodes with `b` free GPUs (nodes
    overcommitted by outside pods sit in bucket 0 with a negative free count).
    `total` is the free room of all nodes, each counting none below zero: a
    node overcommitted by 8 GPUs takes no room from the others.
    Membership is a set, sorted again only when a changed bucket is read, so
    what-if removals of many jobs stay cheap.
    """

    __slots__ = ("names", "index", "gpu", "cpu", "memory", "members", "sorted", "total",
                 "indices", "parts", "part_of", "master", "kind")

    def __init__(self, nodes: tuple[Node, ...] = (), kinds: tuple[int, ...] | None = None,
                 types: int = 0) -> None:
        """`kinds`, on a cluster with GPU types, gives each node's type index
        (-1: none), and `types` how many types there are: `part(k)` is then
        the room of the nodes of type k, empty for a type no node has yet
        (a quota may name a type before any node is labelled with it)."""
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
        self.indices: Sequence[int] = range(len(nodes))
        self.master: Room | None = None
        self.kind = -1
        self.part_of = kinds
        self.parts: list[Room] = []
        if kinds is not None:
            for k in range(max(types, max(kinds, default=-1) + 1)):
                self.parts.append(self._part(k, [i for i in self.indices if kinds[i] == k]))

    def _part(self, kind: int, indices: list[int]) -> Room:
        """Returns the room of the nodes `indices`, sharing this room's free
        counts: it takes and gives through this room, which keeps its
        buckets and total."""
        part = Room()
        part.names, part.index = self.names, self.index
        part.gpu, part.cpu, part.memory = self.gpu, self.cpu, self.memory
        part.members = [set() for _ in self.members]
        for i in indices:
            part.members[max(self.gpu[i], 0)].add(i)
        part.sorted = [None] * len(self.members)
        part.total = [sum(self.gpu[i] for i in indices), sum(self.cpu[i] for i in indices),
                      sum(self.memory[i] for i in indices)]
        part.indices, part.master, part.kind = indices, self, kind
        part.part_of, part.parts = None, []
        return part

    def part(self, kind: int | None) -> Room:
        """Returns the room of the nodes of GPU type `kind`, or all room for None."""
        return self if kind is None else self.parts[kind]

    def copy(self) -> Room:
        """Returns an independent copy (same node indices); the copy of a
        type's part is that part of a copy of the whole room."""
        if self.master is not None:
            return self.master.copy().parts[self.kind]
        other = Room()
        other.names, other.index = self.names, self.index
        other.gpu, other.cpu, other.memory = list(self.gpu), list(self.cpu), list(self.memory)
        other.members = [set(m) for m in self.members]
        other.sorted = list(self.sorted)
        other.total = list(self.total)
        other.indices, other.master, other.kind = self.indices, None, -1
        other.part_of = self.part_of
        other.parts = []
        if self.parts:
            for part in self.parts:
                copy = Room()
                copy.names, copy.index = self.names, self.index
                copy.gpu, copy.cpu, copy.memory = other.gpu, other.cpu, other.memory
                copy.members = [set(m) for m in part.members]
                copy.sorted = list(part.sorted)
                copy.total = list(part.total)
                copy.indices, copy.master, copy.kind = part.indices, other, part.kind
                copy.part_of, copy.parts = None, []
                other.parts.append(copy)
        return other

    def _move(self, i: int, old: int, new: int) -> None:
        # Called for every room change of every cycle: comparisons, not max().
        if old < 0:
            old = 0
        if new < 0:
            new = 0
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
        if self.master is not None:
            self.master.take(i, v)
            return
        before, cpu, memory = self.gpu[i], self.cpu[i], self.memory[i]
        after = self.gpu[i] = before - v[0]
        self.cpu[i] = cpu - v[1]
        self.memory[i] = memory - v[2]
        # The totals count free room only: an overcommitted node adds nothing, never less than nothing.
        # Comparisons, not max(): this runs for every room change of every cycle.
        lost = (_above(before) - _above(after), _above(cpu) - _above(cpu - v[1]),
                _above(memory) - _above(memory - v[2]))
        self.total[0] -= lost[0]
        self.total[1] -= lost[1]
        self.total[2] -= lost[2]
        if v[0]:
            self._move(i, before, after)
        if self.parts:
            assert self.part_of is not None  # parts exist only on a room with kinds
            k = self.part_of[i]
            if k >= 0:
                part = self.parts[k]
                part.total[0] -= lost[0]
                part.total[1] -= lost[1]
                part.total[2] -= lost[2]
                if v[0]:
                    part._move(i, before, after)

    def take_all(self, gpu: list[int], cpu: list[int], memory: list[int]) -> None:
        """Takes room on every node of the whole room at once (a cycle's
        running jobs: what they hold on each node, in node order), cheaper
        than a `take` per node when most nodes change."""
        self.gpu[:] = map(sub, self.gpu, gpu)
        self.cpu[:] = map(sub, self.cpu, cpu)
        self.memory[:] = map(sub, self.memory, memory)
        self._refile()

    def confine(self, nodes: set[int]) -> None:
        """Leaves no free room on any node but `nodes` (of the whole room,
        when this is a type's part): a search confined to them."""
        whole = self.master or self
        for column in (whole.gpu, whole.cpu, whole.memory):
            column[:] = [v if v < 0 or i in nodes else 0 for i, v in enumerate(column)]
        whole._refile()

    def _refile(self) -> None:
        """Files every node of the whole room in its bucket again, and works
        out the totals again, after its free counts changed in place."""
        gpu, cpu, memory = self.gpu, self.cpu, self.memory
        members: list[set[int]] = [set() for _ in self.members]
        for i, free in enumerate(gpu):
            members[free if free > 0 else 0].add(i)
        self.members = members
        self.sorted = [None] * len(members)
        self.total = [_free_sum(gpu, self.indices), _free_sum(cpu, self.indices), _free_sum(memory, self.indices)]
        for part in self.parts:
            indices = part.indices
            members = [set() for _ in part.members]
            for i in indices:
                free = gpu[i]
                members[free if free > 0 else 0].add(i)
            part.members = members
            part.sorted = [None] * len(members)
            part.total = [_free_sum(gpu, indices), _free_sum(cpu, indices), _free_sum(memory, indices)]

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


def _above(free: int) -> int:
    """The part of a node's free count that is room: none below zero."""
    return free if free > 0 else 0


def _free_sum(column: list[int], indices: Sequence[int]) -> int:
    """The free room of `indices` in `column`, overcommitted nodes counting none."""
    return sum(column[i] for i in indices if column[i] > 0)
