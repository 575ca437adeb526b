"""Quota arithmetic (R2): usage per team, what may be borrowed and lent.

Quota covers only the resources a team's `nominal` names. Borrowing follows
the cohort arithmetic of Kueue, with the whole cluster as the cohort:

- a team's *guaranteed* share is `nominal - lending_limit` (all of nominal may
  be lent when `lending_limit` does not name the resource, so it is 0);
- the *pool* of a resource is what all teams may lend plus unassigned capacity,
  `max(0, capacity - sum of nominals)`;
- every unit a team uses above its guaranteed share is drawn from the pool, and
  the pool is never overdrawn.

For a borrowing team this is exactly "other teams' unused nominal, each
lending at most its lending_limit, plus unassigned capacity"; for a team within
its nominal it means that nominal another team borrowed must be reclaimed (R6)
before the owner can use it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .demand import Vector
from .model import Team
from .model import RESOURCES
from .reasons import Code

UNLIMITED = None


@dataclass(slots=True, init=False)
class Refusal:
    """Why R2 refuses a job: the code, the resource and the numbers. Never
    changed once made.

    Its own `__init__` (the dataclass gives equality and repr): compiled
    (native.py), a dataclass's generated `__init__` runs as interpreted
    Python, and R2 refuses often."""

    code: Code
    resource: int
    need: int
    used: int
    nominal: int
    limit: int  # borrowing limit, non-preemptible usage, or what is still available

    def __init__(self, code: Code, resource: int, need: int, used: int, nominal: int,
                 limit: int) -> None:
        self.code = code
        self.resource = resource
        self.need = need
        self.used = used
        self.nominal = nominal
        self.limit = limit


class Quota:
    """Per-team usage against nominal, borrowing and lending limits."""

    def __init__(self, teams: tuple[Team, ...], capacity: Sequence[int],
                 ever: Sequence[int] | None = None) -> None:
        """`capacity` is the schedulable nodes' (R2's unassigned capacity);
        `ever`, that of every node, cordoned ones too (default: `capacity`),
        bounds what a team could ever hold (R10, `most_ever`)."""
        self.teams = {t.name: t for t in teams}
        self.usage: dict[str, list[int]] = {t.name: [0, 0, 0] for t in teams}
        self.steady: dict[str, list[int]] = {t.name: [0, 0, 0] for t in teams}
        self.named: dict[str, tuple[int, ...]] = {}
        self.nominal: dict[str, list[int]] = {}
        self.ceiling: dict[str, list[int | None]] = {}
        self.guaranteed: dict[str, list[int]] = {}
        self.pool = [0, 0, 0]
        self.above = [0, 0, 0]
        # Per resource, the teams whose nominal names it using more than it.
        self.over: list[set[str]] = [set(), set(), set()]
        # The teams whose usage changed since a reader last emptied this
        # (R9's order keeps each team's share until its usage changes).
        self.touched: set[str] = set()
        assigned = [0, 0, 0]
        for t in teams:
            named = tuple(r for r, name in enumerate(RESOURCES) if name in t.nominal)
            self.named[t.name] = named
            nominal = [t.nominal.get(name, 0) for name in RESOURCES]
            self.nominal[t.name] = nominal
            self.ceiling[t.name] = [
                nominal[r] + t.borrowing_limit[name] if name in t.borrowing_limit else None
                for r, name in enumerate(RESOURCES)
            ]
            lendable = [
                min(t.lending_limit.get(name, nominal[r]), nominal[r])
                for r, name in enumerate(RESOURCES)
            ]
            self.guaranteed[t.name] = [nominal[r] - lendable[r] for r in range(3)]
            for r in named:
                assigned[r] += nominal[r]
                self.pool[r] += lendable[r]
        self.unassigned = [max(0, capacity[r] - assigned[r]) for r in range(3)]
        # R10's pool: what teams may lend plus the unassigned capacity of every node.
        self.ever_pool = list(self.pool)
        for r in range(3):
            self.pool[r] += self.unassigned[r]
            self.ever_pool[r] += max(0, (capacity if ever is None else ever)[r] - assigned[r])

    def charge(self, team: str | None, v: Vector, steady: bool) -> None:
        """Adds `v` to a team's usage; `steady` marks a non-preemptible tier."""
        if team is None or team not in self.usage:
            return
        self.touched.add(team)
        used, nominal, guaranteed = self.usage[team], self.nominal[team], self.guaranteed[team]
        above = self.above
        for r in self.named[team]:
            # What it draws from the pool: its usage above its guaranteed
            # share. Called at every admission and end: comparisons, not max().
            before = used[r] - guaranteed[r]
            used[r] += v[r]
            after = used[r] - guaranteed[r]
            above[r] += (after if after > 0 else 0) - (before if before > 0 else 0)
            if used[r] > nominal[r]:
                self.over[r].add(team)
            else:
                self.over[r].discard(team)
        if steady:
            s = self.steady[team]
            for r in range(3):
                s[r] += v[r]

    def credit(self, team: str | None, v: Vector, steady: bool) -> None:
        """Takes `v` off a team's usage (a job stopped or is preempted)."""
        self.charge(team, (-v[0], -v[1], -v[2]), steady)

    def available(self, team: str, r: int) -> int:
        """Returns how much more of resource `r` the team may use: what is left
        of its guaranteed share plus what is left in the pool.

        The guaranteed share stays usable even when the pool is overdrawn
        (a lending limit lowered while others borrowed).
        """
        return self._available(team, r, self.usage[team][r], self.above[r])

    def _available(self, team: str, r: int, used: int, above: int) -> int:
        return max(0, self.guaranteed[team][r] - used) + max(0, self.pool[r] - above)

    def refuse(self, team: str, need: Vector, steady: bool) -> Refusal | None:
        """Returns why R2 refuses `need` for `team` now, or None when it fits.

        Only the resources the team's nominal names are checked; a
        non-preemptible job must keep the team's non-preemptible usage within
        nominal, since borrowed room has to stay reclaimable.
        """
        return self._refuse(team, need, steady, self.usage[team], self.steady[team], self.above)

    def _refuse(self, team: str, need: Vector, steady: bool, used: list[int],
                held_steady: list[int], above: list[int]) -> Refusal | None:
        nominal = self.nominal[team]
        for r in self.named[team]:
            q = need[r]
            if q <= 0:
                continue
            if steady and held_steady[r] + q > nominal[r]:
                return Refusal(Code.NOMINAL_ONLY, r, q, held_steady[r], nominal[r], nominal[r])
            ceiling = self.ceiling[team][r]
            if ceiling is not None and used[r] + q > ceiling:
                return Refusal(Code.BORROWING_LIMIT, r, q, used[r], nominal[r], ceiling - nominal[r])
            # `_available`, written out: R2 is asked for every job a cycle visits.
            own = self.guaranteed[team][r] - used[r]
            left = self.pool[r] - above[r]
            available = (own if own > 0 else 0) + (left if left > 0 else 0)
            if q > available:
                return Refusal(Code.NOTHING_TO_BORROW, r, q, used[r], nominal[r], available)
        return None

    def draw_limits(self, team: str, need: Vector) -> list[tuple[int, int]]:
        """Returns `(resource, most)` for each resource the team's nominal
        names that `need` asks for beyond what is left of the team's
        guaranteed share: R2's test of what is available (that share left
        plus the pool left) passes `need` while borrowers draw at most
        `most` of that resource from the pool (`above`), the team's usage
        the same. That test is the one part of R2 that reads what other
        teams draw; anything no larger than `need` passes it too."""
        used, guaranteed, pool = self.usage[team], self.guaranteed[team], self.pool
        limits = []
        for r in self.named[team]:
            q = need[r]
            if q <= 0:
                continue
            own = guaranteed[r] - used[r]
            short = q - (own if own > 0 else 0)
            if short > 0:
                limits.append((r, pool[r] - short))
        return limits

    def regained_at(self, team: str, refusal: Refusal) -> int:
        """Returns, for a NOTHING_TO_BORROW refusal, how much borrowers may draw
        from the pool of its resource (`above`) for that need to fit again,
        the team's usage the same or higher: the refusal stands while they
        draw more."""
        r = refusal.resource
        own = max(0, self.guaranteed[team][r] - self.usage[team][r])
        return self.pool[r] - (refusal.need - own)

    def borrows(self, team: str, need: Vector) -> bool:
        """Returns whether admitting `need` takes `team` above its nominal."""
        used, nominal = self.usage[team], self.nominal[team]
        for r in self.named[team]:  # a loop, not any(): called for each queued job at each step of R9
            q = need[r]
            if q > 0 and used[r] + q > nominal[r]:
                return True
        return False

    def above_nominal(self, team: str, resources: tuple[int, ...]) -> bool:
        """Returns whether `team` uses more than its nominal in one of `resources`."""
        over = self.over
        for r in resources:
            if team in over[r]:
                return True
        return False

    def dominant_share(self, team: str) -> float:
        """Returns usage / nominal over the named resources, divided by weight (R9)."""
        share = 0.0
        used, nominal = self.usage[team], self.nominal[team]
        for r in self.named[team]:
            if nominal[r] > 0:
                share = max(share, used[r] / nominal[r])
            elif used[r] > 0:
                share = float("inf")
        return share / self.teams[team].weight

    def most_ever(self, team: str, r: int, steady: bool) -> tuple[int, int]:
        """Returns `(most, borrowable)`: the most of `r` the team could ever
        hold and the part of it above nominal (R10), counting the capacity
        of every node, cordoned ones too: they may take pods again."""
        nominal = self.nominal[team][r]
        if steady:
            return nominal, 0
        lendable = self.ever_pool[r] - (nominal - self.guaranteed[team][r])
        borrowable = lendable
        ceiling = self.ceiling[team][r]
        if ceiling is not None:
            borrowable = min(borrowable, ceiling - nominal)
        borrowable = max(0, borrowable)
        return nominal + borrowable, borrowable


class Without:
    """Preemptible usage counted as gone from a quota without changing it
    (a victim search's candidates): per team, and how much more (or less)
    borrowers draw from the pool (`Quota.above`) without it. R2's answers
    read through it are the quota's once that usage is credited."""

    __slots__ = ("quota", "gone", "drawn")

    def __init__(self, quota: Quota) -> None:
        self.quota = quota
        self.gone: dict[str, list[int]] = {}
        self.drawn = [0, 0, 0]

    def count(self, team: str | None, v: Sequence[int], sign: int) -> None:
        """Counts preemptible usage `v` of a team as gone (`sign` 1) or
        back (-1)."""
        quota = self.quota
        if team is None or team not in quota.usage:
            return
        gone = self.gone.get(team)
        if gone is None:
            gone = self.gone[team] = [0, 0, 0]
        used, guaranteed, drawn = quota.usage[team], quota.guaranteed[team], self.drawn
        for r in quota.named[team]:
            if v[r]:  # what it draws: its usage above its guaranteed share
                was = used[r] - gone[r] - guaranteed[r]
                gone[r] += sign * v[r]
                now = used[r] - gone[r] - guaranteed[r]
                drawn[r] += (now if now > 0 else 0) - (was if was > 0 else 0)

    def used(self, team: str) -> list[int]:
        """Returns a team's usage without what is counted as gone (the
        quota's own list when none is: never to be changed)."""
        used = self.quota.usage[team]
        gone = self.gone.get(team)
        if gone is None:
            return used
        return [used[0] - gone[0], used[1] - gone[1], used[2] - gone[2]]

    def above_nominal(self, team: str, resources: tuple[int, ...]) -> bool:
        """Returns `Quota.above_nominal` without what is counted as gone."""
        quota = self.quota
        if team not in self.gone:
            return quota.above_nominal(team, resources)
        used, nominal, named = self.used(team), quota.nominal[team], quota.named[team]
        return any(r in named and used[r] > nominal[r] for r in resources)

    def refuse(self, team: str, need: Vector, steady: bool) -> Refusal | None:
        """Returns `Quota.refuse` without what is counted as gone."""
        quota, drawn, above = self.quota, self.drawn, self.quota.above
        return quota._refuse(team, need, steady, self.used(team), quota.steady[team],
                             [above[0] + drawn[0], above[1] + drawn[1], above[2] + drawn[2]])
