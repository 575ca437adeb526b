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

How a cycle avoids re-walking the queue: see lines.py.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Sequence
from functools import partial

from .lines import Lines
from .model import Admission, PendingJob, RunningJob, Snapshot, Tier
from .order import r3_key
from .placement import place, usage_on_nodes
from .reservation import Hold, Holds
from .runtime import expected_runtime
from .state import State

HORIZON = 30 * 86400


def estimate_starts(snapshot: Snapshot, waiting: list[PendingJob],
                    admitted: list[Admission], planned: State,
                    holds: Sequence[Hold] = ()) -> dict[str, int | None]:
    """Returns the estimated start of each waiting job (`waiting`, in R3
    order), None when unknown; a job holding one of `holds` (the plan's
    reservations) starts at its start."""
    if not waiting:
        return {}
    now = snapshot.now
    settings = snapshot.settings
    tiers = {t.name: t for t in snapshot.tiers}
    pending = {job.id: job for job in snapshot.pending}
    victims = {v for a in admitted for v in a.victims}
    running = [job for job in snapshot.running if job.id not in victims]
    requeued = [requeue(j) for j in snapshot.running if j.id in victims]
    pending.update((job.id, job) for job in requeued)
    reserving = {h.id for h in holds}
    queue = [job for job in merged(waiting, requeued, tiers) if job.id not in reserving]
    replay = Snapshot(now, snapshot.nodes, snapshot.tiers, snapshot.teams,
                      tuple(running), (), settings)
    state = State(replay)
    for a in admitted:
        state.hold(planned.admitted(a.id))
    # Every holder by job id, the same dict as the state admits and releases.
    holders = state.holders
    # (time, 0: a job ends / 1: a reservation starts, job id)
    events: list[tuple[int, int, str]] = [
        (h.end, 0, h.id) for h in holders.values() if h.end is not None]
    heapq.heapify(events)
    kept = Holds(state.room)
    for h in holds:
        kept.add(Hold(h.id, h.start, h.placement, h.on_nodes,
                      {i: list(v) for i, v in h.headroom.items()}, h.ending, h.end))
        heapq.heappush(events, (h.start, 1, h.id))

    estimates: dict[str, int | None] = dict.fromkeys(job.id for job in waiting)
    for h in holds:
        if h.id in estimates:
            estimates[h.id] = h.start
    reserve = settings.starvation_guard == "reserve"
    lines = Lines(queue, tiers, reserve, events)
    # The lines' shapes are the queue's demands, each once.
    smallest = min((min((g[1] for g in demand.groups), default=0)
                    for demand in lines.shapes), default=0)
    limit = now + HORIZON
    left = len(queue)
    while left and events and events[0][0] <= limit:
        t = events[0][0]
        while events and events[0][0] == t:
            _, kind, job_id = heapq.heappop(events)
            if kind == 1:
                _start_reserved(state, kept, job_id, pending, tiers, settings, events)
                continue
            holder = holders.pop(job_id)
            state.release(holder)
            if not kept.nodes.isdisjoint(holder.on_nodes):  # without holds, no nodes
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
            end = holders[job.id].end
            assert end is not None  # started for its expected runtime
            heapq.heappush(events, (end, 0, job.id))
        for hold in reserved:
            if hold.id in estimates:
                estimates[hold.id] = hold.start
            heapq.heappush(events, (hold.start, 1, hold.id))
    return estimates


def merged(waiting: list[PendingJob], requeued: list[PendingJob],
           tiers: dict[str, Tier]) -> list[PendingJob]:
    """Returns `waiting + requeued` in R3 order, as a stable sort of it
    would (`waiting` itself when no victim waits again).

    `waiting` comes in R3 order already (the plan's queue), so only the
    victims that wait again are sorted, and each goes in after the waiting
    jobs whose keys are not above its own (bisect_right: on a tie the
    waiting job stays first, as in the sort), found by bisection. R3's key
    is worked out for the victims and the few waiting jobs each bisection
    reads, not for the whole queue."""
    if not requeued:
        return waiting
    key = partial(r3_key, tiers=tiers)
    requeued = sorted(requeued, key=key)
    queue: list[PendingJob] = []
    at = 0
    for job in requeued:
        k = bisect_right(waiting, key(job), at, key=key)
        queue.extend(waiting[at:k])
        queue.append(job)
        at = k
    queue.extend(waiting[at:])
    return queue


def requeue(victim: RunningJob) -> PendingJob:
    """Returns a victim as the job that waits again, with its queue time."""
    # Outside usage (R12), the only job without a team or tier, is never a victim.
    assert victim.team is not None and victim.tier is not None
    return PendingJob(victim.id, victim.team, victim.tier,
                      victim.queued if victim.queued is not None else victim.started,
                      victim.replicas, victim.max_runtime, victim.estimate)


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
