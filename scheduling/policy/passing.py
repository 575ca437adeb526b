"""Passing a team's inert heads at once in a settled replayed cycle (lines.py).

Once a cycle is settled (no job may reserve room) and no job can use
reserved room, a head is tried only when quota admits it and its shape has
not yet found no room; a head not tried has an effect only when it is
starving and quota refuses it: it holds its team. `pass_inert` passes such
heads at once instead of each at its turn in the walk, and what it cannot
answer yet (quota at a head's turn) is owed and answered at the team's next
head (`Owed.held`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .quota import Quota

if TYPE_CHECKING:
    from .lines import Lines


STUCK = "stuck"  # `pass_inert`: the walk leaves the team


@dataclass(slots=True)
class Owed:
    """Starving heads a team passed by (`pass_inert`), quota
    admitting them then: (R3 key, need, non-preemptible) each, with the
    pool's draw then and how many starts the cycle had made."""

    mark: int
    above: tuple[int, int, int]
    heads: list[tuple[tuple, tuple[int, int, int], bool]]

    def held(self, team: str, quota: Quota, log: list) -> bool:
        """Returns whether one of the heads, at its turn, would have been
        refused by quota and so held its team.

        The pool's draw at a head's turn is the one after the last start
        before it in R3 order (starts come in that order), the team's own
        usage unchanged since. Heads before the first such start see the
        draw they were passed with: quota admitted them. Among heads seeing
        one draw, quota refuses one exactly when it refuses their largest
        need per resource (`Quota.most`), per tier kind."""
        if len(log) == self.mark:
            return False  # nothing started: quota answers as it did
        k = self.mark
        above = None  # the draw of the heads being gathered; None: as passed
        peak: dict[bool, list[int]] = {}  # non-preemptible -> largest need
        for key, need, steady in self.heads:
            if k < len(log) and log[k][0] < key:
                if above is not None and _refuses(quota, team, above, peak):
                    return True
                peak = {}
                while k < len(log) and log[k][0] < key:
                    above = log[k][1]
                    k += 1
            if above is None:
                continue
            most = peak.get(steady)
            if most is None:
                peak[steady] = list(need)
            else:
                for r in range(3):
                    if need[r] > most[r]:
                        most[r] = need[r]
        return above is not None and _refuses(quota, team, above, peak)


def _refuses(quota: Quota, team: str, above: tuple[int, int, int],
             needs: dict[bool, list[int]]) -> bool:
    """Returns whether quota, with the pool's draw at `above`, refuses one
    of `needs` (non-preemptible -> need) for `team`."""
    restore = quota.drawn(above)
    refused = any(_above(need, quota.most(team, steady)) for steady, need in needs.items())
    restore()
    return refused


def _above(need, most: list[int | None]) -> bool:
    """Returns whether some positive amount of `need` is above `most` (what
    `Quota.refuse` refuses)."""
    return any(q > 0 and m is not None and q > m for q, m in zip(need, most))


def pass_inert(lines: Lines, team: str, heads, up, cursor: dict[str, int], quota: Quota, t: int,
                starvation_after: int, no_room: set[int], dead: set[int],
                live: dict[str, int], mark: int) -> Owed | str | None:
    """Passes the team's next heads that the walk would visit without
    effect, at once rather than each at its turn; returns what is owed
    (below), None when a head holds the team on the way, or `STUCK`
    when the walk's test for a stuck team would leave it.

    Called only once the cycle is settled and no job can use reserved
    room: a head is then tried only when quota admits it and its shape
    is not in `no_room`, and a head not tried has an effect only when
    it is starving and quota refuses it (it holds its team). Nothing
    of this team starts between now and its next head that is not
    passed, so up to then its usage stands and the pool's draw only
    grows with other teams' starts: a refusal now is a refusal at the
    head's turn (the team is held), and a head passed by refuses at its
    turn exactly when it does with the draw as it will be then. Those
    starving heads are owed: `Owed.held` answers at the next head's
    turn. The walk's test for a stuck team (`Lines.stuck`, False when this
    is called) runs again only after a head with room is passed (quota
    refused it): the sets it reads do not change meanwhile (no head is
    tried), and passing a head in `dead` leaves the line with room it
    found ahead.
    """
    jobs, at, shape, tier, demand = lines.jobs, lines.at, lines.shape, lines.tier, lines.demand
    owe = Owed(mark, (quota.above[0], quota.above[1], quota.above[2]), [])
    most: dict[bool, list[int | None]] = {}  # steady -> quota.most, fixed meanwhile
    refused: dict[tuple[int, bool], bool] = {}
    c = cursor[team]
    while True:
        if up and (c == len(heads) or up[0] < heads[c]):
            n, risen = up[0][1], True
        elif c < len(heads):
            n, risen = heads[c][1], False
        else:
            return STUCK
        steady = not tier[n].preemptible
        known = (shape[n], steady)
        no = refused.get(known)
        if no is None:
            limit = most.get(steady)
            if limit is None:
                limit = most[steady] = quota.most(team, steady)
            no = refused[known] = _above(demand[n].total, limit)
        job = jobs[n][at[n]]
        starving = t - job.queued > starvation_after
        if no:
            if starving:
                return None
        elif shape[n] in no_room:
            if starving:
                owe.heads.append((lines.keys[n][at[n]], demand[n].total, steady))
        else:
            cursor[team] = c
            return owe
        if risen:
            heapq.heappop(up)
        else:
            c += 1
        cursor[team] = c
        # The walk's test found a line with room ahead when this scan
        # began; passing a head without room leaves it ahead.
        if shape[n] not in dead and lines.stuck(team, heads, c, up, dead, live):
            return STUCK
