"""Gang placement (R1) on as few nodes as possible, best fit first (R11).

A placement is all or nothing: every replica gets a node with room for it at
once, or the job gets no placement. R11 orders the choices: fewest nodes, then
the nodes left with the fewest free GPUs, then snapshot node order.

For a job of one replica group (the common case) the node count is exact: the
nodes that can hold the most replicas are taken first until the gang fits, and
the last node is the best fit for the remainder. A job of several groups is
placed on one node when some node holds it all, otherwise first-fit decreasing:
its largest replicas first, each on a node the job already uses when one has
room (best fit), else on the node with the most free GPUs. The same function
decides R10's "placeable on the empty cluster", so the two never disagree.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence

from .demand import Demand, Vector
from .room import Room

# node index -> replicas of each group placed there
Placement = tuple[tuple[int, tuple[int, ...]], ...]


def _capacity(room: Room, i: int, gpu: int, cpu: int, memory: int,
              extra: Sequence[int] = (0, 0, 0)) -> int:
    """Returns how many replicas of one size node `i` can hold right now, or
    with `extra` room given back."""
    # Read for every node a search counts: comparisons, not min() and max().
    cap = (room.gpu[i] + extra[0]) // gpu if gpu else 1 << 30
    if cpu:
        held = (room.cpu[i] + extra[1]) // cpu
        if held < cap:
            cap = held
    if memory:
        held = (room.memory[i] + extra[2]) // memory
        if held < cap:
            cap = held
    return cap if cap > 0 else 0


def _place_on_one(room: Room, total: Vector) -> int | None:
    """Returns the best-fit node holding `total` whole, or None."""
    gpu, cpu, memory = total
    for _, i in room.nodes_from(gpu):
        if room.gpu[i] >= gpu and room.cpu[i] >= cpu and room.memory[i] >= memory:
            return i
    return None


def _place_group(room: Room, count: int, gpu: int, cpu: int, memory: int):
    """Returns `[(node, replicas)]` for one group on the fewest nodes, or None.

    The nodes that hold the most replicas go first (then fewest free GPUs,
    then node order) until what is left fits on one more node; the last node
    is the best fit for the remainder among the nodes not yet chosen.
    """
    if gpu <= 0:
        return _place_group_scan(room, count, gpu, cpu, memory)
    # A node with b free GPUs holds at most b // gpu replicas: when even that
    # many are too few, skip the scan.
    if sum(len(room.members[b]) * (b // gpu) for b in range(gpu, room.top + 1)) < count:
        return None
    chosen = []
    left = count
    for cap, _, i in _by_capacity(room, gpu, cpu, memory):
        if cap >= left:
            break
        chosen.append((i, cap))
        left -= cap
    else:
        return None  # every node counted: the gang does not fit
    taken = {i for i, _ in chosen}
    for _, i in room.nodes_from(left * gpu):
        if i not in taken and _capacity(room, i, gpu, cpu, memory) >= left:
            chosen.append((i, left))
            return chosen
    raise AssertionError("the node that ended the walk holds the remainder")


def _by_capacity(room: Room, gpu: int, cpu: int, memory: int):
    """Yields `(capacity, free GPUs, node)` for the nodes holding at least one
    replica (gpu >= 1), most replicas first, then fewest free GPUs, then node
    order, computing capacities only as far as the caller reads.

    Nodes with b free GPUs hold at most `level = b // gpu` replicas; levels
    are walked from the top. A node holding exactly its level comes out as
    it is met, buckets in ascending order; one held back by CPU or memory
    waits in a heap until the walk reaches its capacity's level.
    """
    short: list[tuple[int, int, int]] = []  # (-capacity, free GPUs, node)
    for level in range(room.top // gpu, 0, -1):
        for b in range(level * gpu, min(room.top, (level + 1) * gpu - 1) + 1):
            if not room.members[b]:
                continue
            for i in room.bucket(b):
                cap = _capacity(room, i, gpu, cpu, memory)
                if cap == level:
                    yield cap, b, i
                elif cap:
                    heapq.heappush(short, (-cap, b, i))
        while short and short[0][0] == -level:
            _, b, i = heapq.heappop(short)
            yield level, b, i


def _place_group_scan(room: Room, count: int, gpu: int, cpu: int, memory: int):
    """Returns `_place_group`'s answer for replicas without GPUs, by
    computing every node's capacity (no GPU bucket bounds them)."""
    caps = []
    held = 0
    for free_gpu, i in room.nodes_from(gpu):
        cap = _capacity(room, i, gpu, cpu, memory)
        if cap:
            caps.append((-cap, free_gpu, i))
            held += cap
    if held < count:
        return None
    caps.sort()
    chosen = []
    left = count
    k = 0
    # Largest capacities first until what is left fits on one more node.
    while -caps[k][0] < left:
        chosen.append((caps[k][2], -caps[k][0]))
        left += caps[k][0]
        k += 1
    # Best fit for the remainder among the nodes not yet chosen.
    best = min(
        (c for c in caps[k:] if -c[0] >= left),
        key=lambda c: (c[1] - left * gpu, c[2]),
    )
    chosen.append((best[2], left))
    return chosen


def _place_mixed(room: Room, demand: Demand):
    """Returns `{node: [replicas per group]}` by first-fit decreasing, or None."""
    replicas = sorted(
        (
            (gpu, cpu, memory, g)
            for g, (count, gpu, cpu, memory) in enumerate(demand.groups)
            for _ in range(count)
        ),
        reverse=True,
    )
    taken: dict[int, list[int]] = {}
    used: dict[int, list[int]] = {}
    for gpu, cpu, memory, g in replicas:
        best = None
        for i, u in used.items():
            left = (room.gpu[i] - u[0], room.cpu[i] - u[1], room.memory[i] - u[2])
            if left[0] >= gpu and left[1] >= cpu and left[2] >= memory:
                key = (left[0] - gpu, i)
                if best is None or key < best:
                    best = key
        if best is None:
            for b in range(room.top, max(gpu, 0) - 1, -1):
                for i in room.bucket(b):
                    if i in used:
                        continue
                    if room.gpu[i] >= gpu and room.cpu[i] >= cpu and room.memory[i] >= memory:
                        best = (0, i)
                        break
                if best is not None:
                    break
        if best is None:
            return None
        i = best[1]
        u = used.setdefault(i, [0, 0, 0])
        u[0] += gpu
        u[1] += cpu
        u[2] += memory
        taken.setdefault(i, [0] * len(demand.groups))[g] += 1
    return taken


def place(room: Room, demand: Demand) -> Placement | None:
    """Returns where each replica of the gang goes, in node order, or None
    when the gang cannot be placed whole (R1) on the room as it is now."""
    groups = demand.groups
    if not groups:
        return ()
    gpu, cpu, memory = demand.total
    if gpu > room.total[0] or cpu > room.total[1] or memory > room.total[2]:
        return None
    one = _place_on_one(room, demand.total)
    if one is not None:
        return ((one, tuple(count for count, *_ in groups)),)
    if len(groups) == 1:
        count, gpu, cpu, memory = groups[0]
        chosen = _place_group(room, count, gpu, cpu, memory)
        if chosen is None:
            return None
        return tuple(sorted((i, (n,)) for i, n in chosen))
    mixed = _place_mixed(room, demand)
    if mixed is None:
        return None
    return tuple(sorted((i, tuple(n)) for i, n in mixed.items()))


def placeable_with(room: Room, demand: Demand, given: Sequence[Mapping[int, Sequence[int]]],
                   given_total: Vector) -> bool:
    """Returns whether `place(room, demand)` finds a placement once the room
    of every map of `given` (node -> room; a node may be in several) is
    given back, `given_total` being all of it; the room is left as found.
    The room's free total and `given_total` bound the free total then (an
    overcommitted node gains less than what is given back to it).

    A gang of one group with GPUs is placed if and only if the nodes hold
    enough replicas. The count reads the given
    nodes map by map, each node with what was given to it so far: as a
    node's capacity only grows with room given back, the count so far never
    exceeds the final one, and it stops as soon as it covers the gang. Then
    it adds the other nodes with enough free GPUs. No room moves in and out
    of the GPU buckets.
    """
    for r in range(3):
        if demand.total[r] > room.total[r] + given_total[r]:
            return False
    groups = demand.groups
    if len(groups) != 1 or groups[0][1] <= 0:
        merged: dict[int, list[int]] = {}
        for part in given:
            for i, v in part.items():
                acc = merged.setdefault(i, [0, 0, 0])
                acc[0] += v[0]
                acc[1] += v[1]
                acc[2] += v[2]
        give_back = room.give_many({i: (v[0], v[1], v[2]) for i, v in merged.items()})
        found = place(room, demand) is not None
        give_back()
        return found
    count, gpu, cpu, memory = groups[0]
    so_far: dict[int, tuple[int, int, int, int]] = {}  # node -> (given GPU, CPU, memory, capacity)
    held = 0
    for part in given:
        for i, v in part.items():
            was = so_far.get(i)
            if was is None:
                extra = (v[0], v[1], v[2])
                before = 0
            else:
                extra = (was[0] + v[0], was[1] + v[1], was[2] + v[2])
                before = was[3]
            cap = _capacity(room, i, gpu, cpu, memory, extra)
            so_far[i] = (extra[0], extra[1], extra[2], cap)
            held += cap - before
            if held >= count:
                return True
    for b in range(room.top, gpu - 1, -1):
        for i in room.members[b]:
            if i not in so_far:
                held += _capacity(room, i, gpu, cpu, memory)
                if held >= count:
                    return True
    return False


class Capacity:
    """How many replicas of a one-group gang with GPUs the room holds,
    counted once and kept up to date as room is counted as given back on a
    few nodes (a victim search's candidates), without changing the room.

    `place` finds such a gang a placement exactly when the nodes hold
    enough replicas (the room's free total, where no node counts below
    zero, then covers it too), so `fits` answers whether `place(room,
    demand)` would find one with that room given back: what a victim
    search asks after each candidate counted as gone or back.
    """

    __slots__ = ("room", "demand", "count", "gpu", "cpu", "memory", "caps", "held")

    def __init__(self, room: Room, demand: Demand) -> None:
        (count, gpu, cpu, memory), = demand.groups
        assert gpu > 0, "a node's free GPUs bound its capacity only for replicas with GPUs"
        self.room, self.demand = room, demand
        self.count, self.gpu, self.cpu, self.memory = count, gpu, cpu, memory
        self.caps: dict[int, int] = {}  # node -> replicas it holds, when any
        self.held = 0
        for b in range(gpu, room.top + 1):
            for i in room.members[b]:
                cap = _capacity(room, i, gpu, cpu, memory)
                if cap:
                    self.caps[i] = cap
                    self.held += cap

    @staticmethod
    def applies(demand: Demand) -> bool:
        """Returns whether `demand` can be counted: one group, with GPUs."""
        return len(demand.groups) == 1 and demand.groups[0][1] > 0

    def moved(self, nodes: Iterable[int], given: Mapping[int, Sequence[int]]) -> None:
        """Counts `nodes` (of this room) again, with the room `given` says
        is given back on each."""
        room, caps = self.room, self.caps
        for i in nodes:
            cap = _capacity(room, i, self.gpu, self.cpu, self.memory, given.get(i, (0, 0, 0)))
            self.held += cap - caps.get(i, 0)
            caps[i] = cap

    def fits(self) -> bool:
        """Returns whether `place(room, demand)` would find a placement with
        the room counted as given back."""
        return self.held >= self.count


def usage_on_nodes(demand: Demand, placement: Placement) -> dict[int, Vector]:
    """Returns the room a placement takes on each node."""
    usage = {}
    for i, counts in placement:
        g = c = m = 0
        for n, (_, gpu, cpu, memory) in zip(counts, demand.groups):
            g += n * gpu
            c += n * cpu
            m += n * memory
        usage[i] = (g, c, m)
    return usage


def replica_nodes(placement: Placement, names: list[str]) -> tuple[str, ...]:
    """Returns the node of each replica, in the order the replica groups expand."""
    groups = len(placement[0][1]) if placement else 0
    return tuple(
        names[i] for g in range(groups) for i, counts in placement for _ in range(counts[g])
    )
