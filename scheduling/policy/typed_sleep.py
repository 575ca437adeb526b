"""Teams the typed estimate replay leaves out of its cycles (see typed_queue.py).

A cycle walks a team's jobs in R3 order. When that walk started nothing,
reserved nothing and held only the team's own types, the same walk in a later
cycle does the same, without effect, until one of the things it read changes
in the team's favour:

- a refusal by R2 stands while the team's usage does not drop (one of its
  jobs ends: `ended`) and, for want of borrowable quota, while borrowers draw
  more from that quota's pool than the need leaves room for (`regained_at`);
- a shape on a type that found no room, for a job R2 admitted there, stays
  without room until a cycle begins in which it fits;
- a job R2 admits with no room reserves room if it starves in a cycle that
  may still reserve (fewer reservations than `max_reservations`), so such a
  cycle wakes every team that sleeps for room.

Nothing else moves the team's walk: its jobs keep their order, and a job
that starves meanwhile only holds its team's types sooner, which takes
effects away and never adds one. So such a team sleeps out of the walk, and
any of the changes above wakes it. Under the "hold" guard a starving job
with quota but no room holds every team's types, an effect on others, so
there a team sleeps only on refusals.
"""

from __future__ import annotations

import heapq

from .quota import Refusal
from .reasons import Code


class Sleepers:
    """The teams asleep, and what wakes each of them."""

    def __init__(self) -> None:
        self.asleep: dict[str, int] = {}  # team -> its sleep's number
        self.slept = 0
        # Per (quota, resource), a heap of (-pool draw at which to wake,
        # sleep number, team).
        self.wake_at: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
        # (shape, type) -> the teams asleep until it fits, with their sleep numbers.
        self.dormant: dict[tuple, dict[str, int]] = {}
        self.for_room: dict[str, int] = {}  # teams asleep (also) for room

    def __contains__(self, team: str) -> bool:
        return team in self.asleep

    def __bool__(self) -> bool:
        return bool(self.asleep)

    def ended(self, team: str | None) -> None:
        """Notes that a job of `team` ended: its usage dropped."""
        if team is not None:
            self.asleep.pop(team, None)

    def wake(self, quotas, fits: set | None) -> None:
        """Wakes, as a cycle begins, the teams whose quota's pool now has
        room for a need they were refused, and those asleep for room: with a
        shape in `fits` (the pairs with room now), or all of them when `fits`
        is None (the cycle may reserve room)."""
        asleep = self.asleep
        for (q, r), heap in self.wake_at.items():
            above = quotas[q].above[r]
            while heap and -heap[0][0] >= above:
                _, number, team = heapq.heappop(heap)
                if asleep.get(team) == number:
                    del asleep[team]
        if fits is None:
            woken, self.for_room, self.dormant = self.for_room, {}, {}
            for team, number in woken.items():
                if asleep.get(team) == number:
                    del asleep[team]
            return
        for pair in fits:
            teams = self.dormant.pop(pair, None)
            if teams:
                for team, number in teams.items():
                    if asleep.get(team) == number:
                        del asleep[team]

    def sleep(self, team: str, refusals: list[tuple[int, Refusal]], rooms: set, quotas) -> None:
        """Puts `team` to sleep until one of its `refusals` (quota index,
        refusal) could be lifted or one of the pairs in `rooms` fits."""
        self.slept += 1
        number = self.asleep[team] = self.slept
        for q, refusal in refusals:
            if refusal.code is Code.NOTHING_TO_BORROW:
                at = quotas[q].regained_at(team, refusal)
                heapq.heappush(self.wake_at.setdefault((q, refusal.resource), []),
                               (-at, number, team))
        if rooms:
            self.for_room[team] = number
            for pair in rooms:
                self.dormant.setdefault(pair, {})[team] = number
