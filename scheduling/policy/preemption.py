"""R5-R8: choose the fewest useful victims for a job that does not fit.

Victim order, as R8 writes it:

1. Jobs of other teams eligible for reclaim (R6): preemptible, of a team above
   its nominal in a resource the preemptor needs, and only while the
   preemptor's team will be within its nominal in every resource it needs once
   the preemptor is admitted, its own victims counted as gone. The thrash
   guard does not apply: the lender's quota is owed to it.
2. Jobs of the preemptor's own team at a strictly lower tier (R5), started at
   least `min_runtime_before_preemption` ago.

Within each group: lower tier first, then least unsaved work (the most recent
reported checkpoint, or start when none was reported), then id. Never
victims: outside usage (R12), non-preemptible tiers, jobs admitted earlier in
this cycle, jobs another preemptor already took, jobs being stopped already
that the cluster refuses, or fails, to stop (`RunningJob.stopping`). A team within its nominal is
never preempted by another team (R7): its jobs are simply not in group 1.

The set is found as Kueue does: take the first eligible job of the whole
ordered list, recompute eligibility, repeat until the preemptor fits (quota and
placement) or nothing is left, in which case nothing is preempted. Then put
back, in reverse order, every victim without which the preemptor still fits and
every remaining victim is still eligible. Walk and put-back count candidates as
gone beside the state, their room per node and their usage per team
(`quota.Without`), and read room through a count of the replicas it holds for a
gang of one replica group with GPUs (most), or place any other gang with that
room given back; the state then loses only the victims kept: a walk often
takes dozens of small jobs to free one node and puts back all but a few.
"""

from __future__ import annotations

from collections.abc import Iterable
import heapq
from dataclasses import dataclass
from enum import IntEnum

from .demand import Demand, Vector, add_to
from .model import Settings, Tier
from .placement import Capacity, Placement, place, placeable_with
from .quota import Without
from .state import Held, Holder, State, own_candidate


@dataclass(frozen=True, slots=True)
class Preemption:
    """Victims in the order they were chosen, where the preemptor goes, and the
    free room of the victims' nodes before any of them was counted as gone."""

    victims: tuple[Holder, ...]
    placement: Placement
    before: dict[int, Vector]


class Bound(IntEnum):
    """What the upper bound of a search (every job that could become a
    victim, all gone at once) says before the walk starts.

    NO_CANDIDATES and NO_ROOM are *lasting* proofs: they stay true while the
    candidates and the room only shrink (see `hopeless.py`). NO_ROOM is
    lasting only for a gang of one replica group, whose placement succeeds
    exactly when the nodes hold enough replicas, so more room never hurts
    and less never helps; and for any gang when the cluster's free total
    (plus all the bound frees) is short of it.
    """

    MAY_FIT = 0
    NO_QUOTA = 1  # quota refuses even with the bound gone: not lasting
    NO_CANDIDATES = 2
    NO_ROOM = 3
    NO_ROOM_FOR_NOW = 4  # a gang of several groups: not lasting

    @property
    def lasting(self) -> bool:
        return self is Bound.NO_CANDIDATES or self is Bound.NO_ROOM


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a search's upper bound said, and whether it counted other teams'
    jobs: with `reclaims` False the preemptor's team could not reclaim even
    with all its own candidates gone, so no other team's job was a
    candidate (and none becomes one while the team's usage does not drop)."""

    bound: Bound
    reclaims: bool

    @property
    def lasting(self) -> bool:
        return self.bound.lasting


@dataclass(slots=True)
class Reach:
    """The jobs of one team a search's upper bound counts (all at
    preemptible tiers), with their usage summed: in all, per node, and over
    the nodes (`on_total`: the room the nodes get back)."""

    team: str | None
    count: int  # how many jobs
    total: list[int]
    on_nodes: dict[int, list[int]]
    on_total: list[int]

    @classmethod
    def of(cls, team: str | None, jobs: list[tuple[Vector, dict[int, Vector]]]) -> Reach:
        """Returns the reach of `jobs`, each (usage, on nodes)."""
        total = [0, 0, 0]
        on_nodes: dict[int, list[int]] = {}
        on_total = [0, 0, 0]
        for u, held_on in jobs:
            total[0] += u[0]
            total[1] += u[1]
            total[2] += u[2]
            for i, v in held_on.items():
                acc = on_nodes.setdefault(i, [0, 0, 0])
                acc[0] += v[0]
                acc[1] += v[1]
                acc[2] += v[2]
                on_total[0] += v[0]
                on_total[1] += v[1]
                on_total[2] += v[2]
        return cls(team, len(jobs), total, on_nodes, on_total)


class _Search:
    """The ordered candidate list of one preemptor, walked without rescans.

    Group 1 is a heap of each reclaimable team's first eligible job; group 2 a
    pointer into the own team's jobs. Both only move forward: victims only
    leave, a team only stops being above nominal when its jobs are taken, and
    the preemptor's team only comes closer to its nominal as its own jobs go.
    """

    def __init__(self, state: State, team: str, tier: Tier, demand: Demand,
                 settings: Settings, now: int) -> None:
        self.state = state
        self.team = team
        self.tier = tier
        self.demand = demand
        self.steady = not tier.preemptible
        self.relevant = tuple(r for r in demand.needs() if r in state.quota.named[team])
        self.guard_since = now - settings.min_runtime_before_preemption
        self._own: Held | list[Holder] | None = None  # see own
        self.own_at = 0
        self.heap: list[tuple[tuple[int, int, tuple[bool, int, str]], str, int]] | None = None
        self.reclaims = True  # see upper_bound
        self.capacity: Capacity | None = None  # see count_room
        # The candidates counted as gone, which the state still holds:
        # their room per node of the selected room (and in all), and their
        # usage per team (`Without`).
        self.given: dict[int, list[int]] = {}
        self.freed = [0, 0, 0]
        self.without = Without(state.quota)
        # On a cluster with GPU types, each node's type, and the room's.
        room = state.room
        self.kinds = None if room.master is None else room.master.part_of
        self.kind = room.kind

    @property
    def own(self) -> Held | list[Holder]:
        """Returns the preemptor's team's jobs in R8 order, put in that order
        the first time the search reads them (a search its upper bound
        proves hopeless never does, without GPU types)."""
        if self._own is None:
            self._own = self.state.held(self.team)
        return self._own

    def count_room(self) -> None:
        """Counts the replicas the room holds, when the preemptor's shape
        allows it, so that `fits` reads the count, kept up to date on the
        nodes of each candidate counted as gone or back, instead of placing
        the job."""
        if Capacity.applies(self.demand):
            self.capacity = Capacity(self.state.room, self.demand)

    def remove(self, h: Holder) -> None:
        """Counts a candidate as gone: its room and its team's usage."""
        self._give(h, 1)

    def restore(self, h: Holder) -> None:
        """Counts a candidate counted as gone as holding its room again."""
        self._give(h, -1)

    def _give(self, h: Holder, sign: int) -> None:
        given, freed, kinds = self.given, self.freed, self.kinds
        nodes = []
        for i, v in h.on_nodes.items():
            if kinds is not None and kinds[i] != self.kind:
                continue  # a type's room counts only its own nodes
            g, c, m = sign * v[0], sign * v[1], sign * v[2]
            freed[0] += g
            freed[1] += c
            freed[2] += m
            add_to(given, i, g, c, m)
            nodes.append(i)
        if self.capacity is not None:
            self.capacity.moved(nodes, given)
        self.without.count(h.team, h.usage, sign)

    def settle(self, victims: list[Holder]) -> None:
        """Takes `victims`, counted as gone, out of the state's room and quota."""
        for h in victims:
            self.state.release(h)

    def fits(self) -> bool:
        """Returns whether the preemptor fits now (R2 and R1), with the
        candidates counted as gone."""
        capacity, freed = self.capacity, self.freed
        if capacity is not None and not capacity.fits():
            return False
        if self.without.refuse(self.team, self.demand.total, self.steady) is not None:
            return False
        return capacity is not None or placeable_with(
            self.state.room, self.demand, [self.given], (freed[0], freed[1], freed[2]))

    def own_eligible(self, h: Holder) -> bool:
        return (not h.taken and not h.fresh and not h.stopping
                and own_candidate(h.tier, h.started, self.tier.value, self.guard_since))

    @staticmethod
    def other_eligible(h: Holder) -> bool:
        return (not h.taken and not h.fresh and not h.stopping
                and h.tier is not None and h.tier.preemptible)

    def may_reclaim(self, gone: Vector = (0, 0, 0)) -> bool:
        """Returns whether the preemptor's team ends within nominal (R6), with
        `gone` more of its usage counted as gone."""
        if not self.relevant:
            return False
        used = self.without.used(self.team)
        nominal, need = self.state.quota.nominal[self.team], self.demand.total
        return all(used[r] - gone[r] + need[r] <= nominal[r] for r in self.relevant)

    def _next_other(self, team: str, k: int) -> None:
        """Pushes the first eligible job of `team` from index `k` while the
        team is above nominal in a resource the preemptor needs."""
        if not self.without.above_nominal(team, self.relevant):
            return
        held = self.state.held(team)
        while k < len(held) and not self.other_eligible(held[k]):
            k += 1
        if k < len(held):
            assert self.heap is not None  # first_candidate built it
            heapq.heappush(self.heap, (held[k].key, team, k))

    def first_candidate(self) -> Holder | None:
        """Returns the first eligible job of the whole ordered list, or None.
        Once the team may reclaim it still may: its usage only drops as the
        walk goes on, so the heap, once built, answers."""
        if self.heap is not None or self.may_reclaim():
            if self.heap is None:
                self.heap = []
                for team in self.state.teams:
                    if team != self.team:
                        self._next_other(team, 0)
            if self.heap:
                _, team, k = self.heap[0]
                return self.state.held(team)[k]
        own = self.own
        while self.own_at < len(own) and not self.own_eligible(own[self.own_at]):
            self.own_at += 1
        return own[self.own_at] if self.own_at < len(own) else None

    def taken(self, h: Holder) -> None:
        """Moves past a candidate that was just counted as gone."""
        if h.team == self.team:
            self.own_at += 1
            return
        assert self.heap is not None  # another team's candidate came from it
        _, team, k = heapq.heappop(self.heap)
        self._next_other(team, k + 1)

    def upper_bound(self) -> list[Reach]:
        """Returns, per team, every job that could become a victim in this
        search: if the preemptor does not fit with all of them gone, it
        never will.

        Of another team, only the jobs the walk could reach: in R8 order,
        while the team is still above nominal with the earlier ones gone.
        A team's part depends only on its jobs and usage (and the
        preemptor's tier, or the resources it needs), so it is kept until
        the team changes (`State.reaches`); another team's part, worked out
        while the cycle has not changed that team, also from cycle to cycle
        by a standing while the team's jobs stay the same (`State.lasting_reach`).
        """
        state = self.state
        kept = state.reaches(self.team)
        own_key = (self.tier.value,)
        own = kept.get(own_key)
        if own is None:
            jobs = state.own_victims(self.team, self.tier.value, self.guard_since)
            if jobs is None:
                jobs = [(h.usage, h.on_nodes) for h in self.own if self.own_eligible(h)]
            own = kept[own_key] = Reach.of(self.team, jobs)
        gone = own.total
        reaches = []
        self.reclaims = self.may_reclaim((gone[0], gone[1], gone[2]))
        if self.reclaims:
            quota = state.quota
            their_key = (self.relevant, len(self.demand.groups) != 1)
            for team in state.teams:
                if team != self.team and quota.above_nominal(team, self.relevant):
                    kept = state.reaches(team)
                    reach = kept.get(their_key)
                    if reach is None:
                        reach = state.lasting_reach(team, their_key)
                        if reach is None:
                            reach = Reach.of(team, [(h.usage, h.on_nodes) for h
                                                    in self._reachable(team, state.held(team))])
                            state.keep_reach(team, their_key, reach)
                        kept[their_key] = reach
                    if reach.count:
                        reaches.append(reach)
        if own.count:
            reaches.append(own)
        return reaches

    def _reachable(self, team: str, held: Iterable[Holder]) -> list[Holder]:
        """Returns the eligible jobs of `team` the walk may take: in R8 order,
        each while the team is above nominal with the earlier ones gone.
        With several replica groups, all eligible jobs (the walk's placement
        test is then not known to only improve as more jobs go)."""
        if len(self.demand.groups) != 1:
            return [h for h in held if self.other_eligible(h)]
        quota = self.state.quota
        used, nominal, named = list(quota.usage[team]), quota.nominal[team], quota.named[team]
        relevant = [r for r in self.relevant if r in named]
        reach = []
        for h in held:
            if not self.other_eligible(h):
                continue
            for r in relevant:
                if used[r] > nominal[r]:
                    break
            else:  # within nominal in every resource the preemptor needs: reclaim stops here
                break
            reach.append(h)
            for r in range(3):
                used[r] -= h.usage[r]
        return reach


def find_victims(state: State, team: str, tier: Tier, demand: Demand,
                 settings: Settings, now: int) -> Preemption | None:
    """Returns the minimal useful victim set and placement for a job that does
    not fit as things are, or None when preempting cannot make it fit.

    The state is left as found when it returns None; otherwise the victims
    are out of its room and quota and the caller admits the preemptor.
    """
    return search_victims(state, team, tier, demand, settings, now)[0]


def search_victims(state: State, team: str, tier: Tier, demand: Demand, settings: Settings,
                   now: int) -> tuple[Preemption | None, Verdict]:
    """Returns `find_victims`' answer and what the upper bound said: a
    preemption comes with MAY_FIT; None comes with why the bound failed, or
    MAY_FIT when the walk ran out of candidates."""
    search = _Search(state, team, tier, demand, settings, now)
    victims: list[Holder] = []
    bound = Verdict(_fits_without(search, search.upper_bound()), search.reclaims)
    if bound.bound is not Bound.MAY_FIT:
        return None, bound
    search.count_room()
    while True:
        candidate = search.first_candidate()
        if candidate is None:
            return None, bound  # the walk left the state as it was
        search.remove(candidate)
        search.taken(candidate)
        victims.append(candidate)
        if search.fits():
            break
    victims = _put_back(search, victims)
    # The walk left the room as it was: what the victims' nodes hold before they go.
    before = {i: state.room.free(i) for h in victims for i in h.on_nodes}
    search.settle(victims)
    placement = place(state.room, demand)
    assert placement is not None
    return Preemption(tuple(victims), placement, before), bound


def _put_back(search: _Search, victims: list[Holder]) -> list[Holder]:
    """Puts back, in reverse order, every victim without which the preemptor
    still fits and every remaining victim is still eligible; returns the rest.

    Only reclaim's condition on the preemptor's team (R6) can stop being
    met, as its own victims come back. A victim of another team stays
    eligible: its team was above nominal at its turn, with the team's
    victims taken before it gone, and whatever comes back, its team never
    has less usage than then (only its own victims change it)."""
    mine = search.team
    others = sum(1 for v in victims if v.team != mine)  # victims of other teams left
    back: set[str] = set()  # the victims put back
    for h in reversed(victims):
        search.restore(h)
        left = others - 1 if h.team != mine else others
        if (not left or search.may_reclaim()) and search.fits():
            back.add(h.id)
            others = left
            continue
        search.remove(h)
    return [v for v in victims if v.id not in back]


def _fits_without(search: _Search, reaches: list[Reach]) -> Bound:
    """Returns MAY_FIT when the preemptor fits with all the jobs of
    `reaches` gone, else why not; the state is left as found."""
    if not reaches:
        return Bound.NO_CANDIDATES
    state = search.state
    need, total = search.demand.total, state.room.total
    freed = [sum(reach.total[r] for reach in reaches) for r in range(3)]
    if any(need[r] > total[r] + freed[r] for r in range(3)):
        return Bound.NO_ROOM
    # Quota first, as it is cheaper and refuses most often; then room, per
    # node, not per job.
    without = Without(state.quota)
    for reach in reaches:
        without.count(reach.team, reach.total, 1)
    fits = quota_ok = without.refuse(search.team, need, search.steady) is None
    if fits:
        given = [sum(reach.on_total[r] for reach in reaches) for r in range(3)]
        fits = placeable_with(state.room, search.demand, [reach.on_nodes for reach in reaches],
                              (given[0], given[1], given[2]))
    if fits:
        return Bound.MAY_FIT
    if not quota_ok:
        return Bound.NO_QUOTA
    return Bound.NO_ROOM if len(search.demand.groups) == 1 else Bound.NO_ROOM_FOR_NOW
