"""R5-R8: choose the fewest useful victims for a job that does not fit.

Victim order, as R8 writes it:

1. Jobs of other teams eligible for reclaim (R6): preemptible, of a team above
   its nominal in a resource the preemptor needs, and only while the
   preemptor's team will be within its nominal in every resource it needs once
   the preemptor is admitted, its own victims counted as gone. The thrash
   guard does not apply: the lender's quota is owed to it.
2. Jobs of the preemptor's own team at a strictly lower tier (R5), started at
   least `min_runtime_before_preemption` ago.

Within each group: lower tier first, then most recently started, then id. Never
victims: outside usage (R12), non-preemptible tiers, jobs admitted earlier in
this cycle, jobs another preemptor already took. A team within its nominal is
never preempted by another team (R7): its jobs are simply not in group 1.

The set is found as Kueue does: take the first eligible job of the whole
ordered list, recompute eligibility, repeat until the preemptor fits (quota and
placement) or nothing is left, in which case nothing is preempted. Then put
back, in reverse order, every victim without which the preemptor still fits and
every remaining victim is still eligible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .demand import Demand, Vector
from .model import Settings, Tier
from .placement import Placement, place
from .state import Holder, State


@dataclass(frozen=True, slots=True)
class Preemption:
    """Victims in the order they were chosen, where the preemptor goes, and the
    free room of the victims' nodes before any of them was counted as gone."""

    victims: tuple[Holder, ...]
    placement: Placement
    before: dict[int, Vector]


class _Search:
    def __init__(self, state: State, team: str, tier: Tier, demand: Demand,
                 settings: Settings, now: int) -> None:
        self.state = state
        self.team = team
        self.tier = tier
        self.demand = demand
        self.steady = not tier.preemptible
        self.relevant = tuple(r for r in demand.needs() if r in state.quota.named[team])
        self.guard_since = now - settings.min_runtime_before_preemption

    def fits(self) -> Placement | None:
        """Returns the preemptor's placement when it fits now (R2 and R1), else None."""
        if self.state.quota.refuse(self.team, self.demand.total, self.steady) is not None:
            return None
        return place(self.state.room, self.demand)

    def own_eligible(self, h: Holder) -> bool:
        return (
            not h.taken and not h.fresh and h.tier is not None and h.tier.preemptible
            and h.tier.value < self.tier.value and h.started <= self.guard_since
        )

    def may_reclaim(self) -> bool:
        """Returns whether the preemptor's team ends within nominal (R6)."""
        if not self.relevant:
            return False
        quota = self.state.quota
        used, nominal, need = quota.usage[self.team], quota.nominal[self.team], self.demand.total
        return all(used[r] + need[r] <= nominal[r] for r in self.relevant)

    def other_eligible(self, h: Holder) -> bool:
        return not h.taken and not h.fresh and h.tier is not None and h.tier.preemptible

    def first_candidate(self, chosen: set[str]) -> Holder | None:
        """Returns the first eligible job of the whole ordered list, or None."""
        state = self.state
        if self.may_reclaim():
            best = None
            for team, held in state.by_team.items():
                if team == self.team or not state.quota.above_nominal(team, self.relevant):
                    continue
                for h in held:
                    if h.id not in chosen and self.other_eligible(h):
                        if best is None or h.victim_key() < best.victim_key():
                            best = h
                        break
            if best is not None:
                return best
        for h in state.by_team.get(self.team, ()):
            if h.id not in chosen and self.own_eligible(h):
                return h
        return None

    def still_eligible(self, victims: list[Holder]) -> bool:
        """Returns whether every victim in `victims` (all counted as gone) was
        eligible at its turn in selection order."""
        others = [h for h in victims if h.team != self.team]
        if not others:
            return True
        if not self.may_reclaim():
            return False
        quota = self.state.quota
        later: dict[str, list[int]] = {}
        for h in reversed(others):
            add = later.setdefault(h.team, [0, 0, 0])
            for r in range(3):
                add[r] += h.usage[r]
            used, nominal = quota.usage[h.team], quota.nominal[h.team]
            named = quota.named[h.team]
            if not any(r in named and used[r] + add[r] > nominal[r] for r in self.relevant):
                return False
        return True


def find_victims(state: State, team: str, tier: Tier, demand: Demand,
                 settings: Settings, now: int) -> Preemption | None:
    """Returns the minimal useful victim set and placement for a job that does
    not fit as things are, or None when preempting cannot make it fit.

    The state is left as found when it returns None; otherwise the victims
    stay counted as gone and the caller admits the preemptor.
    """
    search = _Search(state, team, tier, demand, settings, now)
    victims: list[Holder] = []
    restores: dict[str, Callable[[], None]] = {}
    before: dict[int, Vector] = {}
    chosen: set[str] = set()

    def take(h: Holder) -> None:
        for i in h.on_nodes:
            if i not in before:
                before[i] = state.room.free(i)
        restores[h.id] = state.remove(h)

    placement = None
    while True:
        candidate = search.first_candidate(chosen)
        if candidate is None:
            for h in reversed(victims):
                restores[h.id]()
            return None
        take(candidate)
        victims.append(candidate)
        chosen.add(candidate.id)
        if _may_fit(state, demand):
            placement = search.fits()
            if placement is not None:
                break
    for h in reversed(list(victims)):
        restores[h.id]()
        remaining = [v for v in victims if v is not h]
        if search.still_eligible(remaining):
            fit = search.fits()
            if fit is not None:
                victims = remaining
                placement = fit
                continue
        restores[h.id] = state.remove(h)
    placement = search.fits()
    assert placement is not None
    return Preemption(tuple(victims), placement, before)


def _may_fit(state: State, demand: Demand) -> bool:
    """Returns False when the cluster's free total is short of the gang: a
    cheap test before the placement search."""
    total = state.room.total
    need = demand.total
    return need[0] <= total[0] and need[1] <= total[1] and need[2] <= total[2]
