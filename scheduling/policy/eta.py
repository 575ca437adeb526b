"""Estimated starts: the policy replayed forward in virtual time.

The replay starts from the plan just made: victims are gone and wait again
with their queue time, admitted jobs run from `now`, reservations hold their
room. Every job runs for its expected runtime (R14: `max_runtime`, else
`estimate`, else `settings.default_runtime`); a running job already past its
expected end ends `reservation_slack` from now; outside usage with neither
never ends. No new jobs arrive. At each moment a job ends, one cycle runs
over the waiting jobs in R3 order with the same fit rules as the plan: quota
(R2), gang placement (R1, R11) on the room left after reservations, and
backfill with the starvation guard (R4) on the virtual clock: a starving job
refused by quota holds its team; one refused for room reserves room while
fewer than `max_reservations` jobs do (or, with the "hold" guard, holds the
whole cluster). A reserving job starts at its reservation's start.

Simplifications, for speed (the estimate is a forecast, not a promise):
- no preemption in the replay: a job that would start by preempting later
  gets the start that ends of running jobs give it;
- no fair-borrowing reordering (R9) in the replay: R3 order only;
- jobs behind a starving job that found no room, of the same team, tier,
  shape and max_runtime, are not visited again in that cycle: they could not
  start either, and the team hold one of them might place once the team's
  usage grew in the cycle is left out;
- the replay stops at `HORIZON` seconds after `now`; jobs not started by then,
  or blocked when no job is left to end, get no estimate (None).

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
  line (see the simplification above), or holds the cluster ("hold" guard),
  exactly as the walk would at that job.
With reservations a line is also one `max_runtime`, since that decides
whether a job may use reserved room. Once a cycle has *settled* (no job could
reserve room), a job without room changes nothing: the cycle ends when no
shape of the queue fits, and passes by a team whose lines left all have
shapes that found no room; while some job could use reserved room, "fits"
and "no room" are on all room, reserved room included.
Teams are merged by their first head, so a held team costs one step, and a
team that would be held at once in every cycle sleeps out of the walk (see
`_Lines`).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort

from .demand import Demand
from .model import Admission, PendingJob, Snapshot, Tier
from .order import r3_key
from .placement import place, usage_on_nodes
from .quota import Quota, Refusal
from .reasons import Code
from .reservation import Hold, Holds, earliest_hold
from .runtime import expected_runtime
from .state import State

HORIZON = 30 * 86400


def estimate_starts(snapshot: Snapshot, waiting: list[PendingJob],
                    admitted: list[Admission], planned: State,
                    holds: list[Hold] = ()) -> dict[str, int | None]:
    """Returns the estimated start of each waiting job, None when unknown;
    a job holding one of `holds` (the plan's reservations) starts at its
    start."""
    if not waiting:
        return {}
    now = snapshot.now
    settings = snapshot.settings
    tiers = {t.name: t for t in snapshot.tiers}
    pending = {job.id: job for job in snapshot.pending}
    victims = {v for a in admitted for v in a.victims}
    running = [job for job in snapshot.running if job.id not in victims]
    requeued = [
        PendingJob(j.id, j.team, j.tier, j.queued if j.queued is not None else j.started,
                   j.replicas, j.max_runtime, j.estimate)
        for j in snapshot.running if j.id in victims
    ]
    pending.update((job.id, job) for job in requeued)
    reserving = {h.id: h for h in holds}
    queue = sorted((job for job in waiting + requeued if job.id not in reserving),
                   key=lambda job: r3_key(job, tiers))
    replay = Snapshot(now, snapshot.nodes, snapshot.tiers, snapshot.teams,
                      tuple(running), (), settings)
    state = State(replay)
    for a in admitted:
        state.hold(planned.holders[a.id])
    # (time, 0: a job ends / 1: a reservation starts, job id)
    events: list[tuple[int, int, str]] = [
        (h.end, 0, h.id) for h in state.holders.values() if h.end is not None]
    heapq.heapify(events)
    kept = Holds(state.room)
    for h in holds:
        kept.add(Hold(h.id, h.start, h.placement, h.on_nodes,
                      {i: list(v) for i, v in h.headroom.items()}, h.ending, h.end))
        heapq.heappush(events, (h.start, 1, h.id))

    estimates: dict[str, int | None] = {job.id: None for job in waiting}
    for h in holds:
        if h.id in estimates:
            estimates[h.id] = h.start
    reserve = settings.starvation_guard == "reserve"
    lines = _Lines(queue, tiers, reserve)
    smallest = min((min((g[1] for g in j.demand.groups), default=0)
                    for j in queue), default=0)
    limit = now + HORIZON
    left = len(queue)
    while left and events and events[0][0] <= limit:
        t = events[0][0]
        while events and events[0][0] == t:
            _, kind, job_id = heapq.heappop(events)
            if kind == 1:
                _start_reserved(state, kept, job_id, pending, tiers, settings, events)
                continue
            holder = state.holders.pop(job_id)
            state.release(holder)
            if kept and any(i in kept.nodes for i in holder.on_nodes):
                kept.refresh()
            lines.ended(holder.team)
        # Nothing can start while no node has room for the smallest replica,
        # reserved room included (a job sure to end before its start may use
        # it), and no job could reserve room.
        if (smallest > 0 and (not reserve or len(kept) >= settings.max_reservations)
                and _largest_free_gpu(state, kept) < smallest):
            continue
        started, reserved = lines.cycle(state, t, settings, kept if reserve else None)
        left -= len(started) + len(reserved)
        for job in started:
            if job.id in estimates:
                estimates[job.id] = t
            heapq.heappush(events, (state.holders[job.id].end, 0, job.id))
        for hold in reserved:
            if hold.id in estimates:
                estimates[hold.id] = hold.start
            heapq.heappush(events, (hold.start, 1, hold.id))
    return estimates


def _largest_free_gpu(state: State, holds: Holds) -> int:
    """Returns the most free GPUs any node has, reserved room included."""
    largest = state.room.largest_free_gpu()
    for i, v in holds.blocked.items():
        largest = max(largest, state.room.gpu[i] + v[0])
    return largest


def _start_reserved(state: State, holds: Holds, job_id: str, pending: dict, tiers,
                    settings, events: list) -> None:
    """Starts a reserving job at its reservation's start, on the room it
    reserved (or, should reclaim have taken it, where it fits then)."""
    at = next(k for k, h in enumerate(holds.holds) if h.id == job_id)
    hold, earlier = holds.holds[at], holds.holds[:at]
    holds.drop(hold)
    job = pending[job_id]
    placement = hold.placement
    if any(state.room.free(i)[r] < v[r] for i, v in hold.on_nodes.items() for r in range(3)):
        placement = place(state.room, job.demand) or placement
    end = hold.start + expected_runtime(job.max_runtime, job.estimate, settings)
    state.admit(job.id, job.team, tiers[job.tier], job.demand, placement, hold.start, end)
    # Later holds were made as if this job held its room already.
    holds.charge(usage_on_nodes(job.demand, placement), None, holds=earlier)
    holds.refresh()
    heapq.heappush(events, (end, 0, job.id))


class _Lines:
    """The jobs not yet started, one line per (team, tier, shape) in R3 order.

    Each team keeps its lines' heads sorted by R3 key (`team_heads`), and the
    teams are kept sorted by their first head (`order`), so a cycle merges
    teams, and within a team its lines, and a held team costs one step.

    A team whose first head is refused by quota while starving is held at
    once in every cycle, without effect, until quota could change its answer:
    such a team sleeps out of `order`. Usage only grows between the ends of
    the team's own jobs, so a refusal by its own limits (borrowing limit,
    nominal-only) stands until one ends; a refusal for lack of borrowable
    quota also ends when what borrowers draw from the pool falls low enough.
    """

    def __init__(self, queue: list[PendingJob], tiers, by_runtime: bool = False) -> None:
        by_key: dict[tuple, int] = {}
        self.jobs: list[list[PendingJob]] = []
        self.keys: list[list[tuple]] = []
        self.demand: list[Demand] = []
        self.tier: list[Tier] = []
        shapes: dict[Demand, int] = {}
        self.shape: list[int] = []  # a small number per demand, cheap to hash
        for job in queue:  # already in R3 order, so each line is too
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
            self.keys[n].append(r3_key(job, tiers))
        self.shapes = list(shapes)  # shape number -> demand
        # The shortest max_runtime in the queue: no job is spared by a hold
        # starting sooner than this after a cycle.
        self.shortest = min((job.max_runtime for job in queue if job.max_runtime), default=None)
        self.at = [0] * len(self.jobs)  # index of each line's head
        self.team_heads: dict[str, list[tuple[tuple, int]]] = {}
        for n, jobs in enumerate(self.jobs):
            self.team_heads.setdefault(jobs[0].team, []).append((self.keys[n][0], n))
        for heads in self.team_heads.values():
            heads.sort()
        self.order = sorted((heads[0][0], team) for team, heads in self.team_heads.items())
        self.asleep: dict[str, int] = {}  # team -> its sleep's number
        self.slept = 0
        # Per resource, (-pool draw at which to wake, sleep number, team).
        self.wake_at: list[list[tuple[int, int, str]]] = [[], [], []]

    def ended(self, team: str | None) -> None:
        """Notes that a job of `team` ended: its usage dropped."""
        if team in self.asleep:
            self._wake(team)

    def _wake(self, team: str) -> None:
        """Puts a sleeping team back in `order` at its first head."""
        del self.asleep[team]
        insort(self.order, (self.team_heads[team][0][0], team))

    def _sleep(self, team: str, refusal: Refusal, quota: Quota) -> None:
        """Takes a team held at its first head out of `order` until one of its
        jobs ends or, for want of borrowable quota, the pool could serve it."""
        self.slept += 1
        self.asleep[team] = self.slept
        del self.order[bisect_left(self.order, (self.team_heads[team][0][0], team))]
        if refusal.code is Code.NOTHING_TO_BORROW:
            at = quota.regained_at(team, refusal)
            heapq.heappush(self.wake_at[refusal.resource], (-at, self.slept, team))

    def cycle(self, state: State, t: int, settings,
              holds: Holds | None) -> tuple[list[PendingJob], list[Hold]]:
        """Runs one replayed cycle at virtual time `t`; returns the jobs started
        and the reservations made. `holds` None: the "hold" guard."""
        quota = state.quota
        starvation_after = settings.starvation_after
        later: list[tuple[tuple, str]] = []  # teams whose next head changed this cycle
        # Teams asleep for want of borrowable quota that the pool, as it is
        # now, might serve: visited in their place, and woken only if the
        # pool still might when their turn comes (it only shrinks in a cycle).
        maybe: dict[str, tuple[int, int, int]] = {}
        for r, heap in enumerate(self.wake_at):
            while heap and -heap[0][0] >= quota.above[r]:
                mark, number, team = heapq.heappop(heap)
                if self.asleep.get(team) == number:
                    maybe[team] = (r, mark, number)
                    heapq.heappush(later, (self.team_heads[team][0][0], team))
        rejoin = []
        started = []
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
        jobs, keys, at, team_heads, order = self.jobs, self.keys, self.at, self.team_heads, self.order
        moved: dict[int, tuple] = {}  # line -> key of its head when the cycle began
        # Per team visited this cycle: the next index into its sorted heads and
        # a heap of the heads that came up during this cycle.
        cursor: dict[str, int] = {}
        risen: dict[str, list[tuple[tuple, int]]] = {}
        sleepy: list[tuple[str, Refusal]] = []
        i = 0
        while True:
            if later and (i == len(order) or later[0] < order[i]):
                team = heapq.heappop(later)[1]
                first = team in maybe
                if first:
                    r, mark, number = maybe.pop(team)
                    if quota.above[r] > -mark:
                        heapq.heappush(self.wake_at[r], (mark, number, team))
                        continue  # still refused: held, and still asleep
                    del self.asleep[team]
                    rejoin.append(team)
                    cursor[team] = 0
                    risen[team] = []
            elif i < len(order):
                team = order[i][1]
                i += 1
                cursor[team] = 0
                risen[team] = []
                first = True
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
            refusal = quota.refuse(team, demand.total, not self.tier[n].preemptible)
            placement = hold = None
            until = t + job.max_runtime if job.max_runtime else None
            tried = False
            if refusal is None and latest is not None and until is not None and until <= latest:
                restore = holds.spared(until)
                placement = place(state.room, demand)
                if placement is not None:
                    self._admit(state, job, n, placement, t, settings, holds, until)
                restore()
                tried = True
            elif refusal is None and self.shape[n] not in no_room:
                placement = place(state.room, demand)
                if placement is None:
                    no_room.add(self.shape[n])
                else:
                    self._admit(state, job, n, placement, t, settings, holds, None)
                tried = True
            if placement is not None:
                fits.clear()
                fits_at_all.clear()
            elif tried and settled:
                if not spare:
                    nothing = self._nothing_fits(state.room, no_room, fits)
                else:
                    restore = holds.lifted()
                    nothing = self._nothing_fits(state.room, no_room_at_all, fits_at_all)
                    restore()
                if nothing:
                    break  # nothing can start or reserve room now
            if placement is None and t - job.queued > starvation_after:
                if refusal is not None:
                    if first:
                        sleepy.append((team, refusal))
                    continue  # the team is held: none of its jobs is visited again
                if holds is None:
                    break  # the whole cluster is held for this job
                if len(holds) < settings.max_reservations:
                    runtime = expected_runtime(job.max_runtime, job.estimate, settings)
                    restore = holds.lifted()
                    hold = earliest_hold(state, job.id, demand, runtime, holds)
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
                if placement is not None:
                    started.append(job)
                moved.setdefault(n, keys[n][at[n]])
                at[n] += 1
                if at[n] < len(jobs[n]):
                    heapq.heappush(up, (keys[n][at[n]], n))
            # Else not starving: nothing later in this line starts or starves now.
            c = cursor[team]
            if placement is None and settled and self._stuck(team, heads, c, up, dead, live):
                continue  # none of the team's jobs left could start, reserve or hold
            if up and (c == len(heads) or up[0] < heads[c]):
                heapq.heappush(later, (up[0][0], team))
            elif c < len(heads):
                heapq.heappush(later, (heads[c][0], team))
        for team, (r, mark, number) in maybe.items():  # not reached: still asleep
            heapq.heappush(self.wake_at[r], (mark, number, team))
        for team in rejoin:
            insort(order, (team_heads[team][0][0], team))
        if moved:
            self._settle(moved)
        for team, refusal in sleepy:
            self._sleep(team, refusal, quota)
        return started, reserved

    def _stuck(self, team: str, heads, c: int, up, no_room: set[int],
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

    def _nothing_fits(self, room, no_room: set[int], fits: set[int]) -> bool:
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

    def _admit(self, state: State, job: PendingJob, n: int, placement, t: int, settings,
               holds: Holds | None, until: int | None) -> None:
        """Starts a job at `t` for its expected runtime."""
        demand = self.demand[n]
        end = t + expected_runtime(job.max_runtime, job.estimate, settings)
        state.admit(job.id, job.team, self.tier[n], demand, placement, t, end)
        if holds:
            holds.charge(usage_on_nodes(demand, placement), until)

    def _settle(self, moved: dict[int, tuple]) -> None:
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
            del heads[bisect_left(heads, (old, n))]
            if at[n] < len(jobs[n]):
                insort(heads, (keys[n][at[n]], n))
        for team in changed:
            if team_heads[team]:
                insort(order, (team_heads[team][0][0], team))
