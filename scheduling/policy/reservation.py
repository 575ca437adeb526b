"""R4: room reserved for a starving job, and backfill around it.

A reservation (a *hold* here) is the earliest time S at which a starving job
could be placed if every job holding room ended when expected (R14), and the
room R11 gives it on what is free at S. Other jobs are placed on the room left
after holds: on a reserved node, a job that may still run at S gets at most
what the node has free at S beyond the reservation (its *headroom*); a job
whose `max_runtime` ends it by S may use the reserved room too.

The holds keep that room out of `State.room` (`blocked`), so placement,
victim search and estimates need to know nothing about them: the room they
see is the room left after holds. A job spared by a hold (it ends by S) sees
that hold's room through `spared`, a what-if that returns its restore closure.

A later hold is computed as if earlier ones held their room from now until
their job is expected to end: conservative, and never in conflict with them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .demand import Demand, Vector
from .placement import Placement, place, usage_on_nodes
from .preemption import Preemption, Verdict, find_victims, search_victims
from .room import Room
from .runtime import merge_ends
from .state import Holder, State


@dataclass(slots=True)
class Hold:
    """Room reserved for job `id` from `start`, on `on_nodes` (node -> room).

    `headroom` is, per reserved node, what is free at `start` beyond the
    reservation; jobs that may still run at `start` take from it. `ending`
    names the jobs due to end at `start`; `end` is when the reserving job is
    expected to end once started.
    """

    id: str
    start: int
    placement: Placement
    on_nodes: dict[int, Vector]
    headroom: dict[int, list[int]]
    ending: tuple[str, ...]
    end: int
    # The GPU type of the room; None on a cluster without types.
    gpu_type: str | None = None


class Holds:
    """The holds of one cycle (or one replay) and the room they keep out of
    `room`, which always shows the room left after every hold."""

    def __init__(self, room: Room) -> None:
        self.room = room
        self.holds: list[Hold] = []
        self.blocked: dict[int, Vector] = {}
        self.nodes: set[int] = set()

    def __len__(self) -> int:
        return len(self.holds)

    def add(self, hold: Hold) -> None:
        """Takes a new hold into account."""
        self._lift()
        self.holds.append(hold)
        self.nodes.update(hold.on_nodes)
        self._impose()

    def drop(self, hold: Hold) -> None:
        """Forgets a hold (its job starts, or the replay passed its start)."""
        self._lift()
        self.holds.remove(hold)
        self.nodes = {i for h in self.holds for i in h.on_nodes}
        self._impose()

    def _lift(self) -> None:
        for i, v in self.blocked.items():
            self.room.give(i, v)
        self.blocked = {}

    def _impose(self, spared_until: int | None = None) -> None:
        """Keeps out of room what the holds not sparing a job that ends at
        `spared_until` (None: runs on) need."""
        limits: dict[int, list[int]] = {}
        for h in self.holds:
            if spared_until is not None and spared_until <= h.start:
                continue
            for i, room in h.headroom.items():
                limit = limits.get(i)
                if limit is None:
                    limits[i] = [max(0, x) for x in room]
                else:
                    for r in range(3):
                        limit[r] = min(limit[r], max(0, room[r]))
        for i, limit in limits.items():
            free = self.room.free(i)
            blocked = (max(0, free[0] - limit[0]), max(0, free[1] - limit[1]),
                       max(0, free[2] - limit[2]))
            if blocked != (0, 0, 0):
                self.blocked[i] = blocked
                self.room.take(i, blocked)

    def refresh(self) -> None:
        """Recomputes the room kept out after room changed on reserved nodes."""
        if self.holds:
            self._lift()
            self._impose()

    def spares(self, until: int | None) -> bool:
        """Returns whether a job sure to end by `until` (None: not sure to
        end) may use some hold's room."""
        return until is not None and any(until <= h.start for h in self.holds)

    def spared(self, until: int | None) -> Callable[[], None]:
        """Shows the room a job sure to end by `until` may use, reserved room
        of the holds it ends before included; returns the closure that keeps
        that room out again."""
        self._lift()
        self._impose(until)

        def restore() -> None:
            self._lift()
            self._impose()

        return restore

    def lifted(self) -> Callable[[], None]:
        """Shows all reserved room (reclaim may take it, R6); returns the
        closure that keeps it out again."""
        return self.spared(-1 << 62)  # a job ending before every start

    def charge(self, on_nodes: dict[int, Vector], until: int | None,
               holds: list[Hold] | None = None) -> None:
        """Notes that a job taking `on_nodes` and sure to end by `until` (None:
        not sure) was placed: the holds it does not spare (of `holds`, all by
        default) lose that headroom. A job placed on the room as it shows
        leaves the room kept out as it was; one placed while room was lifted
        or spared needs `refresh` (or the restore closure) after."""
        for h in self.holds if holds is None else holds:
            if until is not None and until <= h.start:
                continue
            for i, v in on_nodes.items():
                room = h.headroom.get(i)
                if room is not None:
                    room[0] -= v[0]
                    room[1] -= v[1]
                    room[2] -= v[2]

    def in_the_way(self, on_nodes) -> list[Hold]:
        """Returns the holds whose reserved room a placement on lifted room
        (node -> room) takes, in the order they were made."""
        found = []
        for h in self.holds:
            if any(i in h.headroom and i in self.blocked for i in on_nodes):
                found.append(h)
        return found


def earliest_hold(state: State, job_id: str, demand: Demand, runtime: int,
                  holds: Holds, nodes: set[int] | None = None,
                  ends: Iterator[tuple[int, str]] | None = None,
                  by: int | None = None) -> Hold | None:
    """Returns the hold of a job that does not fit now: the first moment a job
    ends after which it can be placed (R1, R11 on the room free then), with
    earlier holds holding their room until their job ends; only on `nodes`
    when given. Returns None when it never fits, even once every job with an
    expected end has ended, or, given `by`, when it would start after `by`.

    `ends` yields what `state.expected_ends()` returns, soonest first, for a
    caller that keeps the ends in order already (the estimate replay);
    without it the walk reads `state.ends_in_order()`. Either way it reads
    only the ends it passes.
    The room must be lifted (no hold kept out) when this is called.

    On all nodes of a cluster without GPU types, the walk gives and takes
    on the state's own room and undoes it all before it returns, instead of
    copying the room (a thousand nodes) for the few ends it passes.
    """
    whole = state.room
    if nodes is None and whole.master is None and not whole.parts:
        cached = list(whole.sorted)
        changes: list[tuple[int, Vector]] = []  # room given back, taken again on return
        try:
            return _earliest_hold(state, whole, job_id, demand, runtime, holds, None, ends, by,
                                  changes)
        finally:
            for i, v in reversed(changes):
                whole.take(i, v)
            # Every node is back in its bucket: the buckets' sorted lists hold again.
            whole.sorted[:] = cached
    return _earliest_hold(state, whole.copy(), job_id, demand, runtime, holds, nodes, ends, by,
                          None)


def _earliest_hold(state: State, room: Room, job_id: str, demand: Demand, runtime: int,
                   holds: Holds, nodes: set[int] | None, ends: Iterator[tuple[int, str]] | None,
                   by: int | None, changes: list[tuple[int, Vector]] | None) -> Hold | None:
    """`earliest_hold` on `room`, the state's room or a copy of it; `changes`
    given, each room given back is noted there (a hold's room taken is
    noted as negative room given)."""
    # Nodes left out keep no room, and get none back as jobs end.
    out: set[int] = set()
    names = None  # of `nodes`: the jobs whose end frees none of them are passed over
    if nodes is not None:
        out = set(range(len(room.names))) - nodes
        if out:
            room.confine(nodes)
            names = {room.names[i] for i in nodes}
    # (end, job id) or (end, "", number of a hold), soonest first (a job's
    # id is never empty, so the two compare as they read). A job's room is
    # read only once the walk reaches its end.
    held: list[Hold] = []
    others: list[tuple[int, str, int]] = []
    for h in holds.holds:
        for i, v in h.on_nodes.items():
            if i not in out:
                room.take(i, v)
                if changes is not None:
                    changes.append((i, (-v[0], -v[1], -v[2])))
        others.append((h.end, "", len(held)))
        held.append(h)
    others.sort()
    if ends is None:
        ends = state.ends_in_order()
    events: Iterator[tuple] = merge_ends(ends, others) if others else iter(ends)
    need = demand.total
    total = room.total
    event = next(events, None)
    while event is not None:
        t = event[0]
        if by is not None and t > by:
            return None
        ending: list[tuple[str, dict[int, Vector]]] = []  # (job id, its room)
        while event is not None and event[0] == t:
            name = event[1]
            if not name:
                freed = held[event[2]].on_nodes
            elif names is not None and nodes is not None and not state.touches(name, nodes, names):
                event = next(events, None)
                continue
            else:
                freed = state.on_nodes(name)
            event = next(events, None)
            for i, v in freed.items():
                if i not in out:
                    room.give(i, v)
                    if changes is not None:
                        changes.append((i, v))
            if name:
                ending.append((name, freed))
        if need[0] > total[0] or need[1] > total[1] or need[2] > total[2]:
            continue
        placement = place(room, demand)
        if placement is not None:
            on_nodes = usage_on_nodes(demand, placement)
            headroom = {}
            for i, v in on_nodes.items():
                free = room.free(i)
                headroom[i] = [free[0] - v[0], free[1] - v[1], free[2] - v[2]]
            # The jobs whose end makes room on the reserved nodes.
            due = tuple(sorted(name for name, freed in ending
                               if any(i in on_nodes for i in freed)))
            return Hold(job_id, t, placement, on_nodes, headroom, due, t + runtime)
    return None


def outside_without_end(state: State) -> Vector:
    """Returns the room outside usage (R12) with no expected end takes."""
    g = c = m = 0
    for h in state.holders.values():
        if h.team is None and h.end is None:
            for v in h.on_nodes.values():
                g += v[0]
                c += v[1]
                m += v[2]
    return (g, c, m)


def charge_holder(holds: Holds, holder: Holder, sign: int) -> None:
    """Notes a running job's room coming back (`sign` -1, a victim) or taken
    again (1): a job expected to run past a hold's start is not in its
    headroom."""
    for h in holds.holds:
        if holder.end is not None and holder.end <= h.start:
            continue
        for i, v in holder.on_nodes.items():
            room = h.headroom.get(i)
            if room is not None:
                room[0] -= sign * v[0]
                room[1] -= sign * v[1]
                room[2] -= sign * v[2]


def preempt_around(state: State, holds: Holds, team: str, tier, demand: Demand,
                   settings, now: int, until: int | None) -> tuple[Preemption | None, Verdict]:
    """Returns `find_victims`' answer with holds in force, and what the upper
    bound of the search on all room said (a lasting verdict proves the
    None): reclaim (R6, a victim of another team) may take reserved room; a
    preemption within the team (R5) may not, and is refused when it would.

    The search runs first on all room, reserved room included: when even
    that finds nothing, nothing would with less room. A preemption within
    the team found there stands if it leaves every hold its room; else the
    search runs again with holds in force.

    On a preemption the room is left lifted or spared as the search saw it;
    the caller admits the job, charges its room, then calls `holds.refresh`.
    """
    if not holds:
        return search_victims(state, team, tier, demand, settings, now)
    restore = holds.lifted()
    found, bound = search_victims(state, team, tier, demand, settings, now)
    if found is None:
        restore()
        return None, bound
    if _may_stand(holds, found, team, demand, until):
        return found, bound
    _undo(state, found)
    restore()
    restore = holds.spared(until)
    found = find_victims(state, team, tier, demand, settings, now)
    if found is not None and _may_stand(holds, found, team, demand, until):
        return found, bound
    _undo(state, found)
    restore()
    return None, bound


def _may_stand(holds: Holds, found: Preemption, team: str, demand: Demand,
               until: int | None) -> bool:
    """Returns whether a preemption may stand with holds in force, and if so
    gives the holds back the headroom its victims free."""
    if not found.victims:
        return False  # it fits on reserved room alone: not a preemption
    for v in found.victims:
        charge_holder(holds, v, -1)
    if any(v.team != team for v in found.victims):
        return True
    if _within_headroom(holds, usage_on_nodes(demand, found.placement), until):
        return True
    for v in found.victims:
        charge_holder(holds, v, 1)
    return False


def _undo(state: State, found: Preemption | None) -> None:
    """Counts a preemption's victims as holding their room again."""
    if found is not None:
        for v in found.victims:
            state.restore(v)


def _within_headroom(holds: Holds, on_nodes: dict[int, Vector], until: int | None) -> bool:
    """Returns whether room taken on `on_nodes` by a job sure to end by
    `until` leaves every hold it does not spare its room at its start."""
    for h in holds.holds:
        if until is not None and until <= h.start:
            continue
        for i, v in on_nodes.items():
            room = h.headroom.get(i)
            if room is not None and (v[0] > room[0] or v[1] > room[1] or v[2] > room[2]):
                return False
    return True
