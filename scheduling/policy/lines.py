"""The estimate replay's waiting jobs, kept in lines (see eta.py).

How a cycle avoids re-walking the queue (the result is the same as walking
every waiting job in R3 order, which tests/policy/test_policy_eta.py checks):
the waiting jobs are split into *lines*, one per (team, tier, shape), each in
R3 order, and a cycle visits only the head of each line, merging the heads in
R3 order. Within a cycle room and usage only shrink, so once a line's head is
refused every later job of that line is refused too; and a line shares one
tier value, so its starving jobs (R4) are its oldest, a prefix. Hence:
- a head that starts is replaced by the next job of its line;
- a head refused while not starving: the whole line is refused and none of it
  starves, so the line is done for this cycle;
- a head refused while starving holds its team (quota); refused for room,
  it reserves room and gives way to the next job of its line, or leaves its
  line (see the simplifications in eta.py), or holds the cluster ("hold" guard),
  exactly as the walk would at that job.
With reservations a line is also one `max_runtime`, since that decides
whether a job may use reserved room. Once a cycle has *settled* (no job could
reserve room), a job without room changes nothing: the cycle ends when no
shape of the queue fits, and passes by a team whose lines left all have
shapes that found no room; while some job could use reserved room, "fits"
and "no room" are on all room, reserved room included.
Teams are merged by their first head, so a held team costs one step, and a
team whose walk had no effect sleeps out of later walks until what it read
could change in its favour (see `Lines`).

Two more shortcuts once a cycle has settled, exact for the same reasons:
- a team's heads that the walk would pass without effect (a shape with no
  room, and not refused by R2 while starving) are passed in one scan, R2's
  answers kept per (team, need, tier preemptible) until a job starts; when
  one starts and draws more from the pool of borrowable quota (the only
  thing it changes that R2's answers to other teams read), R2 is asked
  again for the heads passed that come after that job, and a team is sent
  back to the first of them that starves and is refused now, which holds
  it (`Lines._recheck`);
- a team none of whose lines has a shape with room, or held after heads
  that found none, leaves the walk until a cycle begins in which one of
  those shapes fits (`Lines._rouse`), or another of its wakes comes.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterator

from .demand import Demand
from .model import PendingJob, Settings, Tier
from .placement import Placement, place
from .quota import Quota, Refusal
from .reasons import Code
from .reservation import Hold, Holds, earliest_hold
from .room import Room
from .runtime import expected_runtime, merge_ends
from .state import State


class Passed:
    """Per team waiting in a settled cycle's walk, the range of its sorted
    heads passed over on the way (`Lines._pass`), and when R2 must be asked
    about them again after a start (`Lines._recheck`): at the first start
    after the range was passed, then only once the pool's draw of a
    resource passes the limit up to which R2's test of what is available
    passes every starving head left in it (`Quota.draw_limits`, worked out
    for the most any of them needs). R2's other tests read only the team's
    own usage, which does not change while it waits."""

    __slots__ = ("ranges", "kept", "fresh", "limits", "count")

    def __init__(self) -> None:
        self.ranges: dict[str, tuple[int, int]] = {}
        # team -> the number of the `keep` that gave its range its limits
        # (a number, not the range itself: ranges are compared by value)
        self.kept: dict[str, int] = {}
        self.fresh: list[str] = []  # teams whose range is new since the last start
        # Per resource, a heap of (draw limit, keep's number, team): the
        # entry stands while the team's range is the one that keep gave it.
        self.limits: tuple[list[tuple[int, int, str]], ...] = ([], [], [])
        self.count = 0

    def add(self, team: str, c0: int, c1: int) -> None:
        """Notes that the walk passed a team's heads `c0` to `c1` (not
        included), not yet asked about after a start."""
        self.ranges[team] = (c0, c1)
        self.kept.pop(team, None)
        self.fresh.append(team)

    def keep(self, team: str, c0: int, c1: int, limits: list[tuple[int, int]]) -> None:
        """Keeps a team's range `c0` to `c1`, asked about after a start,
        with the draw limits up to which R2 admits every starving head in it."""
        self.ranges[team] = (c0, c1)
        self.count += 1
        self.kept[team] = self.count
        for r, most in limits:
            heapq.heappush(self.limits[r], (most, self.count, team))

    def drop(self, team: str) -> None:
        """Forgets a team's range: the walk is at the team, or sent it back."""
        self.ranges.pop(team, None)
        self.kept.pop(team, None)

    def due(self, above: list[int]) -> list[tuple[str, tuple[int, int]]]:
        """Returns, after a start that drew `above` from the pool, the teams
        whose range R2 must be asked about again, with their ranges: the
        new ones, and those whose draw limit `above` passed."""
        ranges = self.ranges
        due: dict[str, tuple[int, int]] = {}
        for team in self.fresh:
            fresh = ranges.get(team)
            if fresh is not None:
                due[team] = fresh
        self.fresh.clear()
        for r, heap in enumerate(self.limits):
            while heap and heap[0][0] < above[r]:
                _, count, team = heapq.heappop(heap)
                if self.kept.get(team) == count:  # else the entry is stale
                    due[team] = ranges[team]
        return list(due.items())


class Lines:
    """The jobs not yet started, one line per (team, tier, shape) in R3 order.

    Each team keeps its lines' heads sorted by R3 order (`team_heads`), and
    the teams are kept sorted by their first head (`order`), so a cycle
    merges teams, and within a team its lines, and a held team costs one
    step. A job's key in all of these is its place in the queue, which comes
    in R3 order: unique, and cheaper to compare than R3's own key.

    A team whose walk in a cycle had no effect sleeps out of `order` until
    what it read could change in its favour (`_sleep`). Such a walk meets
    only heads refused by quota and heads whose shape has no room, and ends
    held (a head refused while starving) or with no line left that has room:
    - a refusal stands while the team's usage does not drop: usage only
      grows between the ends of the team's own jobs, so a refusal by its own
      limits (borrowing limit, nominal-only) stands until one ends; one for
      lack of borrowable quota also ends when what borrowers draw from the
      pool falls low enough;
    - a shape without room stays so until a cycle begins in which it fits
      (`_rouse`; all room is tested while some job could use reserved room,
      the room left after reservations otherwise), or one that may reserve
      room, where the team is visited in its place unless the cycle has
      settled by then and none of its shapes fits (`_drowsy`);
    - the room a job may use never grows with time alone: it may use
      reserved room only if its `max_runtime` ends it by the reservation's
      start, and a later cycle ends it later;
    - the walk's order does not change, and a head that starves meanwhile
      only holds its team sooner.
    A walk meeting a shape without room sleeps only in a settled cycle.
    """

    def __init__(self, queue: list[PendingJob], tiers: dict[str, Tier], by_runtime: bool = False,
                 events: list[tuple[int, int, str]] | None = None) -> None:
        by_key: dict[tuple, int] = {}
        self.jobs: list[list[PendingJob]] = []
        self.keys: list[list[int]] = []
        self.demand: list[Demand] = []
        self.tier: list[Tier] = []
        shapes: dict[Demand, int] = {}
        self.shape: list[int] = []  # a small number per demand, cheap to hash
        for rank, job in enumerate(queue):  # already in R3 order, so each line is too
            demand = job.demand
            key = (job.team, job.tier, demand, job.max_runtime if by_runtime else None)
            n = by_key.get(key)
            if n is None:
                n = by_key[key] = len(self.jobs)
                self.jobs.append([])
                self.keys.append([])
                self.demand.append(demand)
                self.tier.append(tiers[job.tier])
                self.shape.append(shapes.setdefault(demand, len(shapes)))
            self.jobs[n].append(job)
            self.keys[n].append(rank)
        self.shapes = list(shapes)  # shape number -> demand
        # Lines asking R2 the same question (team, need, tier preemptible)
        # share a number: within a cycle, between starts, the same answer.
        asks: dict[tuple, int] = {}
        self.ask = [asks.setdefault((jobs[0].team, self.demand[n].total, self.tier[n].preemptible),
                                    len(asks)) for n, jobs in enumerate(self.jobs)]
        # The shortest max_runtime in the queue: no job is spared by a hold
        # starting sooner than this after a cycle.
        self.shortest = min((job.max_runtime for job in queue if job.max_runtime), default=None)
        self.at = [0] * len(self.jobs)  # index of each line's head
        self.team_heads: dict[str, list[tuple[int, int]]] = {}  # (key, line)
        for n, jobs in enumerate(self.jobs):
            self.team_heads.setdefault(jobs[0].team, []).append((self.keys[n][0], n))
        for heads in self.team_heads.values():
            heads.sort()
        self.order = sorted((heads[0][0], team) for team, heads in self.team_heads.items())
        # The replay's events heap, (time, 0, job id) for each job's expected
        # end, kept by eta.py; None: a search for a reservation's start lists
        # the ends itself.
        self.events = events
        # Teams out of `order` (see _sleep), each with its sleep's number:
        # what would wake it is kept with the number, and is stale once the
        # team sleeps again or wakes.
        self.asleep: dict[str, int] = {}
        self.slept = 0
        self.by_end: dict[str, int] = {}  # teams woken by an end of their own
        # Per resource, (-pool draw at which to wake, sleep number, team).
        self.wake_at: list[list[tuple[int, int, str]]] = [[], [], []]
        # The teams asleep for room: the shapes each waits for, and per shape
        # the teams woken when it fits. Only sleeping teams are in either.
        self.waits_for: dict[str, set[int]] = {}
        self.dormant: dict[int, set[str]] = {}
        # The widest replica of each shape: no node with fewer free GPUs fits it.
        self.widest = [max((g[1] for g in demand.groups), default=0) for demand in self.shapes]
        # Per team, the shapes of its lines' heads, kept until they change
        # (never changed once made: a sleeping team's `waits_for` may be it).
        self.shapes_of: dict[str, set[int]] = {}

    def ended(self, team: str | None) -> None:
        """Notes that a job of `team` ended: its usage dropped."""
        if team is None:
            return
        number = self.by_end.get(team)
        if number is not None and self.asleep.get(team) == number:
            self._wake(team)
            insort(self.order, (self.team_heads[team][0][0], team))

    def _wake(self, team: str) -> None:
        """Ends a team's sleep; the caller puts it back in `order`."""
        del self.asleep[team]
        if team in self.by_end:
            del self.by_end[team]
        dormant = self.dormant
        for k in self.waits_for.pop(team, ()):
            teams = dormant[k]
            teams.discard(team)
            if not teams:
                del dormant[k]

    def _sleep(self, team: str, refusals: list[Refusal], shapes, quota: Quota) -> None:
        """Takes a team whose walk had no effect out of `order` until one of
        its jobs ends (when quota refused it), the pool could serve a need
        it was refused for want of borrowable quota, or one of `shapes`
        (which found no room) fits as a cycle begins."""
        self.slept += 1
        number = self.asleep[team] = self.slept
        del self.order[bisect_left(self.order, (self.team_heads[team][0][0], team))]
        if refusals:
            self.by_end[team] = number
        for refusal in refusals:
            if refusal.code is Code.NOTHING_TO_BORROW:
                at = quota.regained_at(team, refusal)
                heapq.heappush(self.wake_at[refusal.resource], (-at, number, team))
        if shapes:
            self.waits_for[team] = shapes
            for k in shapes:
                self.dormant.setdefault(k, set()).add(team)

    def cycle(self, state: State, t: int, settings: Settings,
              holds: Holds | None) -> tuple[list[PendingJob], list[Hold]]:
        """Runs one replayed cycle at virtual time `t`; returns the jobs started
        and the reservations made. `holds` None: the "hold" guard."""
        quota = state.quota
        starvation_after = settings.starvation_after
        later: list[tuple[int, str]] = []  # teams whose next head changed this cycle
        rejoin: list[str] = []
        started: list[PendingJob] = []
        reserved: list[Hold] = []
        no_room: set[int] = set()
        fits: set[int] = set()  # shapes that fit as room is since the last start
        # The same two, on all room, reserved room included.
        no_room_at_all: set[int] = set()
        fits_at_all: set[int] = set()
        live: dict[str, int] = {}  # see _stuck
        latest = max((h.start for h in holds.holds), default=None) if holds else None
        # Could some job use reserved room, its max_runtime ending it in time?
        spare = latest is not None and self.shortest is not None and t + self.shortest <= latest
        # Once no job could reserve room, a job without room changes nothing:
        # the walk may pass it, or its team, by. Which shapes have no room:
        # on the room left after reservations, or, while some job could use
        # reserved room, on all room.
        settled = holds is not None and len(holds) >= settings.max_reservations
        dead = no_room_at_all if spare else no_room
        # Teams asleep for room, when the cycle may reserve room: visited in
        # their place, and woken only if it still may, or one of their
        # shapes fits, when their turn comes (see _drowsy).
        drowsy: dict[str, int] = {}
        if self.dormant:
            if settled:
                assert holds is not None  # settled only with reservations
                self._rouse(state, holds, spare)
            else:
                drowsy = self._drowsy(later)
        # Teams asleep for want of borrowable quota that the pool, as it is
        # now, might serve: visited in their place, and woken only if the
        # pool still might when their turn comes (it only shrinks in a cycle).
        maybe: dict[str, list[tuple[int, int, int]]] = {}  # team -> (resource, mark, number)
        for r, heap in enumerate(self.wake_at):
            while heap and -heap[0][0] >= quota.above[r]:
                mark, number, team = heapq.heappop(heap)
                if self.asleep.get(team) == number:
                    if team not in maybe:
                        maybe[team] = []
                        heapq.heappush(later, (self.team_heads[team][0][0], team))
                    maybe[team].append((r, mark, number))
        expect = {team: self.team_heads[team][0][0] for team in maybe.keys() | drowsy.keys()}
        refused: set[int] = set()  # lines whose head quota refused in this cycle
        jobs, keys, at, team_heads, order = self.jobs, self.keys, self.at, self.team_heads, self.order
        moved: dict[int, int] = {}  # line -> key of its head when the cycle began
        # Per team visited this cycle: the next index into its sorted heads and
        # a heap of the heads that came up during this cycle.
        cursor: dict[str, int] = {}
        risen: dict[str, list[tuple[int, int]]] = {}
        # Teams whose walk had no effect, with the refusals and shapes
        # without room it met (see _sleep); and the teams whose walk had.
        sleepy: dict[str, tuple[list[Refusal], set[int]]] = {}
        met: dict[str, list[Refusal]] = {}
        lively: set[str] = set()
        answers: dict[int, Refusal | None] = {}  # R2's answers since the last start
        since = t - starvation_after  # queued before then: starving
        # Per team waiting in `later`: the key it waits at, and the range of its
        # sorted heads passed over on the way there (see _pass and Passed).
        passed = Passed()
        i = 0
        while True:
            if later and (i == len(order) or later[0] < order[i]):
                key, team = heapq.heappop(later)
                if expect.get(team) != key:
                    continue  # moved earlier by _recheck
                del expect[team]
                passed.drop(team)
                # Asked first: mostly both are empty, and a compiled pop with a default is a call.
                marks = maybe.pop(team, None) if team in maybe else None
                sleep = drowsy.pop(team, None) if team in drowsy else None
                if marks is not None or sleep is not None:
                    pool = marks is not None and any(quota.above[r] <= -mark
                                                     for r, mark, _ in marks)
                    if not pool and (sleep is None or (
                            settled and holds is not None
                            and not self._room_for(team, state, holds, spare, dead))):
                        for r, mark, number in marks or ():
                            heapq.heappush(self.wake_at[r], (mark, number, team))
                        continue  # its walk still has no effect, and it sleeps on
                    self._wake(team)
                    rejoin.append(team)
                    cursor[team] = 0
                    risen[team] = []
            elif i < len(order):
                team = order[i][1]
                i += 1
                cursor[team] = 0
                risen[team] = []
            else:
                break
            heads, up, c = team_heads[team], risen[team], cursor[team]
            if up and (c == len(heads) or up[0] < heads[c]):
                n = heapq.heappop(up)[1]
            else:
                n = heads[c][1]
                cursor[team] = c = c + 1
            job = jobs[n][at[n]]
            demand = self.demand[n]
            ask = self.ask[n]
            if ask in answers:
                refusal = answers[ask]
            else:
                refusal = answers[ask] = quota.refuse(team, demand.total,
                                                      not self.tier[n].preemptible)
            placement = hold = None
            until = t + job.max_runtime if job.max_runtime else None
            tried = False
            if refusal is not None:
                met.setdefault(team, []).append(refusal)
                refused.add(n)
            elif latest is not None and until is not None and until <= latest:
                assert holds is not None  # `latest` is a hold's start
                restore = holds.spared(until)
                placement = place(state.room, demand)
                if placement is not None:
                    drew = self._admit(state, job, n, placement, t, settings, holds, until)
                restore()
                tried = True
            elif self.shape[n] not in no_room:
                placement = place(state.room, demand)
                if placement is None:
                    no_room.add(self.shape[n])
                else:
                    drew = self._admit(state, job, n, placement, t, settings, holds, None)
                tried = True
            if placement is not None:
                fits.clear()
                fits_at_all.clear()
                answers.clear()
                if drew:  # other teams' R2 answers change only with the pool's draw
                    if passed.ranges:  # teams are waiting after heads passed over
                        self._recheck(keys[n][at[n]], passed, cursor, expect, later, answers,
                                      quota, since)
            elif tried and settled:
                if not spare:
                    nothing = self._nothing_fits(state.room, no_room, fits)
                else:
                    assert holds is not None  # `spare` needs a hold
                    restore = holds.lifted()
                    nothing = self._nothing_fits(state.room, no_room_at_all, fits_at_all)
                    restore()
                if nothing:
                    break  # nothing can start or reserve room now
            if placement is None and t - job.queued > starvation_after:
                if refusal is not None:
                    if team not in lively:
                        # Held at its head number c - 1, after heads refused or without room.
                        shapes = self._roomless(heads[:cursor[team] - 1], refused)
                        if settled or not shapes:
                            sleepy[team] = (met[team], shapes)
                    continue  # the team is held: none of its jobs is visited again
                if holds is None:
                    break  # the whole cluster is held for this job
                if len(holds) < settings.max_reservations:
                    runtime = expected_runtime(job.max_runtime, job.estimate, settings)
                    restore = holds.lifted()
                    hold = earliest_hold(state, job.id, demand, runtime, holds,
                                         ends=self._ends(state, started))
                    restore()
                    if hold is not None:
                        holds.add(hold)
                        reserved.append(hold)
                        latest = max(h.start for h in holds.holds)
                        spare = self.shortest is not None and t + self.shortest <= latest
                        settled = len(holds) >= settings.max_reservations
                        if dead is not (no_room_at_all if spare else no_room):
                            dead = no_room_at_all if spare else no_room
                            live.clear()  # scans resume only while shapes join `dead`
                        fits.clear()
            if placement is not None or hold is not None:
                lively.add(team)
                if placement is not None:
                    started.append(job)
                moved.setdefault(n, keys[n][at[n]])
                at[n] += 1
                if at[n] < len(jobs[n]):
                    heapq.heappush(up, (keys[n][at[n]], n))
            # Else not starving: nothing later in this line starts or starves now.
            c = cursor[team]
            if placement is None and settled and self._stuck(team, heads, c, up, dead, live):
                if team not in lively:
                    refusals = met.get(team)
                    if refusals is None:  # no line of the team was refused: all its heads
                        sleepy[team] = ([], self._shapes(team))
                    else:
                        sleepy[team] = (refusals, self._roomless(heads, refused))
                continue  # none of the team's jobs left could start, reserve or hold
            if settled:
                skip = self._pass(team, heads, c, up, dead, answers, quota, since)
                if skip > c:
                    passed.add(team, c, skip)
                    cursor[team] = c = skip
            if up and (c == len(heads) or up[0] < heads[c]):
                expect[team] = up[0][0]
                heapq.heappush(later, (up[0][0], team))
            elif c < len(heads):
                expect[team] = heads[c][0]
                heapq.heappush(later, (heads[c][0], team))
        for team, marks in maybe.items():  # not reached: still asleep
            for r, mark, number in marks:
                heapq.heappush(self.wake_at[r], (mark, number, team))
        for team in rejoin:
            insort(order, (team_heads[team][0][0], team))
        if moved:
            self._settle(moved)
        for team, (refusals, shapes) in sleepy.items():
            if refusals or shapes:
                self._sleep(team, refusals, shapes, quota)
        return started, reserved

    def _ends(self, state: State, started: list[PendingJob]) -> Iterator[tuple[int, str]] | None:
        """Returns (expected end, job id) of every job holding room, soonest
        first, as `State.expected_ends` lists them: the ends in the replay's
        events heap, read in order without listing them all, merged with
        those of the jobs started in this cycle (not in the heap yet)."""
        if self.events is None:
            return None
        holders = state.holders
        fresh: list[tuple[int, str]] = []
        for job in started:
            end = holders[job.id].end
            assert end is not None  # started for its expected runtime
            fresh.append((end, job.id))
        fresh.sort()
        return merge_ends(job_ends(self.events), fresh)

    def _pass(self, team: str, heads: list[tuple[int, int]], c: int, up: list[tuple[int, int]],
              dead: set[int], answers: dict[int, Refusal | None], quota: Quota, since: int) -> int:
        """Returns the index of the first of a team's sorted heads from `c`
        that a settled cycle must visit (up to the first head risen in the
        cycle): the heads before it have shapes in `dead` and are not refused
        by R2 while starving, so visiting them would change nothing. R2 is
        asked as it answers now; `_recheck` asks again should a job start
        before the walk reaches them."""
        shape, ask, jobs, at = self.shape, self.ask, self.jobs, self.at
        stop = len(heads)
        if up:
            stop = bisect_left(heads, up[0], c)
        while c < stop:
            n = heads[c][1]
            if shape[n] not in dead:
                return c
            if jobs[n][at[n]].queued < since:
                a = ask[n]
                if a in answers:
                    refusal = answers[a]
                else:
                    refusal = answers[a] = quota.refuse(team, self.demand[n].total,
                                                        not self.tier[n].preemptible)
                if refusal is not None:
                    return c
            c += 1
        return c

    def _recheck(self, key: int, passed: Passed, cursor: dict[str, int], expect: dict[str, int],
                 later: list[tuple[int, str]], answers: dict[int, Refusal | None], quota: Quota,
                 since: int) -> None:
        """After a job with key `key` started and drew more from the pool,
        sends each team back to the first head it passed over after that
        job that starves and that R2 refuses now: the walk holds the team
        there. A team with no such head waits where it was.

        Exact: a head passed over has a shape without room, which stays so
        to the cycle's end, so only a team hold there could change the
        walk, and that needs a starving head that R2 refuses at its turn.
        R2's answer to a team that is not visited changes only as the pool's
        draw grows, that is at a start that draws more (each rechecks here,
        and the range passed over is kept for the next); so a head R2
        admits now is admitted at its turn unless a later start rechecks it
        first. Heads passed over before `key` come before every later start
        too, so they are dropped from the range. Only the ranges new since
        the last start and those whose draw limits the pool's draw passed
        are asked again (`Passed.due`). A team left waiting sleeps, should
        its walk have no effect, on what a walk before that start met."""
        team_heads, jobs, at, ask, demand, tier = (self.team_heads, self.jobs, self.at, self.ask,
                                                  self.demand, self.tier)
        for team, (c0, c1) in passed.due(quota.above):
            heads = team_heads[team]
            k = first = bisect_left(heads, (key,), c0, c1)
            g = c = m = 0  # the most any starving head left in the range needs
            while k < c1:
                n = heads[k][1]
                if jobs[n][at[n]].queued < since:
                    a = ask[n]
                    if a in answers:
                        refusal = answers[a]
                    else:
                        refusal = answers[a] = quota.refuse(team, demand[n].total,
                                                            not tier[n].preemptible)
                    if refusal is not None:
                        break
                    total = demand[n].total
                    if total[0] > g:
                        g = total[0]
                    if total[1] > c:
                        c = total[1]
                    if total[2] > m:
                        m = total[2]
                k += 1
            if k > first:
                passed.keep(team, first, k, quota.draw_limits(team, (g, c, m)))
            else:
                passed.drop(team)
            if k < c1:
                cursor[team] = k
                expect[team] = heads[k][0]
                heapq.heappush(later, (heads[k][0], team))

    def _roomless(self, heads: list[tuple[int, int]], refused: set[int]) -> set[int]:
        """Returns the shapes of `heads` (sorted heads a walk met) not refused
        by quota: in a walk without effect, shapes that found no room."""
        shape = self.shape
        return {shape[n] for _, n in heads if n not in refused}

    def _shapes(self, team: str) -> set[int]:
        """Returns the shapes of a team's lines' heads (the set kept: never to be changed)."""
        shapes = self.shapes_of.get(team)
        if shapes is None:
            shape = self.shape
            shapes = self.shapes_of[team] = {shape[n] for _, n in self.team_heads[team]}
        return shapes

    def _rouse(self, state: State, holds: Holds, spare: bool) -> None:
        """Wakes, as a settled cycle begins, the teams asleep for room with a
        shape that fits the room (all room, reserved room included, while
        some job could use reserved room). Room only shrinks within a
        cycle, so a team left asleep stays without room to the cycle's end."""
        restore = holds.lifted() if spare else None
        room = state.room
        largest = room.largest_free_gpu()
        fit = [k for k in self.dormant
               if self.widest[k] <= largest and place(room, self.shapes[k]) is not None]
        if restore is not None:
            restore()
        woken: set[str] = set()
        for k in fit:
            woken.update(self.dormant[k])
        for team in woken:
            self._wake(team)
            insort(self.order, (self.team_heads[team][0][0], team))

    def _drowsy(self, later: list[tuple[int, str]]) -> dict[str, int]:
        """Returns the teams asleep for room, with their sleeps' numbers, as
        a cycle that may reserve room begins, and puts them in `later` at
        their first heads: a starving job of theirs that R2 admits might
        reserve room, if the cycle still may when their turn comes."""
        asleep, drowsy = self.asleep, {}
        for team in self.waits_for:
            drowsy[team] = asleep[team]
            heapq.heappush(later, (self.team_heads[team][0][0], team))
        return drowsy

    def _room_for(self, team: str, state: State, holds: Holds, spare: bool,
                  dead: set[int]) -> bool:
        """Returns whether a shape a sleeping team waits for fits now, in a
        cycle that has settled since it began: on all room while some job
        could use reserved room, else on the room left after reservations.
        `dead` keeps the shapes known to have none, as the cycle does."""
        restore = holds.lifted() if spare else None
        found = False
        for k in self.waits_for[team]:
            if k in dead:
                continue
            if place(state.room, self.shapes[k]) is not None:
                found = True
                break
            dead.add(k)
        if restore is not None:
            restore()
        return found

    def _stuck(self, team: str, heads: list[tuple[int, int]], c: int, up: list[tuple[int, int]],
               no_room: set[int],
               live: dict[str, int]) -> bool:
        """Returns whether every line of a team still to be visited in this
        cycle (sorted heads from `c`, and those risen in the cycle) has a
        shape in `no_room`: none of them can start, and with no reservation
        to make, a team hold among them would hold nothing.

        `live` keeps, per team, where the last scan found a shape with room:
        while shapes only join `no_room`, a scan resumes there."""
        shape = self.shape
        k = max(c, live.get(team, 0))
        while k < len(heads):
            if shape[heads[k][1]] not in no_room:
                live[team] = k
                return False
            k += 1
        live[team] = k
        return all(shape[n] in no_room for _, n in up)

    def _nothing_fits(self, room: Room, no_room: set[int], fits: set[int]) -> bool:
        """Returns whether no shape of the queue fits the room as it is,
        testing the shapes not yet known (room only shrinks in a cycle)."""
        for k, demand in enumerate(self.shapes):
            if k in no_room or k in fits:
                continue
            if place(room, demand) is None:
                no_room.add(k)
            else:
                fits.add(k)
        return len(no_room) == len(self.shapes)

    def _admit(self, state: State, job: PendingJob, n: int, placement: Placement, t: int,
               settings: Settings,
               holds: Holds | None, until: int | None) -> bool:
        """Starts a job at `t` for its expected runtime; returns whether it
        drew more from the pool of borrowable quota (what borrowers draw,
        `Quota.above`), the only way it changes R2's answers to other teams."""
        demand = self.demand[n]
        end = t + expected_runtime(job.max_runtime, job.estimate, settings)
        above = state.quota.above
        before = (above[0], above[1], above[2])
        holder = state.admit(job.id, job.team, self.tier[n], demand, placement, t, end)
        if holds:
            holds.charge(holder.on_nodes, until)
        return (above[0], above[1], above[2]) != before

    def _settle(self, moved: dict[int, int]) -> None:
        """Puts the new heads of the lines in `moved` (line -> old head key) in
        their sorted places, and their teams in `order`."""
        jobs, keys, at, team_heads, order = self.jobs, self.keys, self.at, self.team_heads, self.order
        changed = set()
        for n, old in moved.items():
            team = jobs[n][0].team
            heads = team_heads[team]
            if team not in changed:
                changed.add(team)
                del order[bisect_left(order, (heads[0][0], team))]
                self.shapes_of.pop(team, None)
            del heads[bisect_left(heads, (old, n))]
            if at[n] < len(jobs[n]):
                insort(heads, (keys[n][at[n]], n))
        for team in changed:
            if team_heads[team]:
                insort(order, (team_heads[team][0][0], team))


def job_ends(events: list[tuple[int, int, str]]) -> Iterator[tuple[int, str]]:
    """Yields (expected end, job id) of the jobs ending in the replay's events
    heap, soonest first, leaving the heap as it is: each event read puts its
    two children in a frontier heap, as (time, kind, job id, index) so that
    the frontier compares numbers first.

    A generator function, not an expression: the policy compiled with mypyc
    (native.py) reads a generator expression whole, and the walk reads only
    the ends it passes."""
    size = len(events)
    if not size:
        return
    t, kind, name = events[0]
    frontier = [(t, kind, name, 0)]
    while frontier:
        t, kind, name, k = heapq.heappop(frontier)
        if kind == 0:
            yield t, name
        child = 2 * k + 1
        if child < size:
            t, kind, name = events[child]
            heapq.heappush(frontier, (t, kind, name, child))
            child += 1
            if child < size:
                t, kind, name = events[child]
                heapq.heappush(frontier, (t, kind, name, child))
