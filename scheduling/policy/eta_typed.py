"""Estimated starts on a cluster with GPU types: the policy replayed forward
in virtual time, each job trying its types in order.

The replay is eta.py's, walked plainly: victims wait again with their queue
time, admitted jobs run from `now`, reservations hold their room, every job
runs for its expected runtime (R14), no new jobs arrive. At each moment a
job ends, one cycle walks the waiting jobs in R3 order: a job starts on the
first of its types where quota (R2, per type) and placement (R1, R11, on the
nodes of the type and the room left after reservations) let it; a starving
job refused by quota on every type holds its team (refused GPUs of each
type, its team's jobs of those types only, as the cycle does), one refused for room
reserves room on the first type whose quota admits it while fewer than
`max_reservations` jobs do (with the "hold" guard it holds every team's
jobs of the types whose quota admits it). As in eta.py: no preemption and no R9 reordering in the replay,
reserved room serves only its job, and jobs not started within `HORIZON`
get no estimate.

A cycle skips a job whose shape already found no room on that type in the
cycle (room only shrinks within a cycle), ends once every shape of the
queue found no room on every type it could use, and passes by teams and
jobs that could change nothing: see typed_queue.py.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from .eta import HORIZON, requeue
from .model import Admission, PendingJob, Snapshot
from .order import r3_key
from .placement import place, usage_on_nodes
from .reservation import Hold, Holds
from .runtime import expected_runtime
from .state import State
from .typed_queue import TypedQueue


def estimate_typed(snapshot: Snapshot, waiting: list[PendingJob], admitted: list[Admission],
                   planned: State, holds: list[Hold],
                   kinds_of: dict[str, tuple[int | None, ...]]) -> dict[str, int | None]:
    """Returns the estimated start of each waiting job, None when unknown; a
    job holding one of `holds` starts at its start. `kinds_of` gives the GPU
    types each pending job tries, in order."""
    if not waiting:
        return {}
    now, settings = snapshot.now, snapshot.settings
    tiers = {t.name: t for t in snapshot.tiers}
    victims = {v for a in admitted for v in a.victims}
    state = State(replace(snapshot, running=tuple(j for j in snapshot.running
                                                  if j.id not in victims),
                          pending=(), reservations=()))
    kinds = dict(kinds_of)
    requeued = []
    for j in snapshot.running:
        if j.id in victims:
            held = planned.holders[j.id]
            requeued.append(requeue(j))
            kinds[j.id] = (held.kind,)
    for a in admitted:
        state.hold(planned.holders[a.id])
    reserving = {h.id: h for h in holds}
    queue = sorted((job for job in waiting + requeued if job.id not in reserving),
                   key=lambda job: r3_key(job, tiers))
    pending = {job.id: job for job in [*waiting, *requeued]}
    events = [(h.end, 0, h.id) for h in state.holders.values() if h.end is not None]
    heapq.heapify(events)
    kept = Holds(state.room)
    for h in holds:
        kept.add(Hold(h.id, h.start, h.placement, h.on_nodes,
                      {i: list(v) for i, v in h.headroom.items()}, h.ending, h.end, h.gpu_type))
        heapq.heappush(events, (h.start, 1, h.id))
    estimates: dict[str, int | None] = {job.id: None for job in waiting}
    estimates.update((h.id, h.start) for h in holds if h.id in estimates)
    reserve = settings.starvation_guard == "reserve"
    lines = TypedQueue(queue, kinds, tiers)
    limit = now + HORIZON
    while lines and events and events[0][0] <= limit:
        t = events[0][0]
        while events and events[0][0] == t:
            _, what, job_id = heapq.heappop(events)
            if what == 1:
                _start_reserved(state, kept, pending[job_id], tiers, settings, events)
                continue
            holder = state.holders.pop(job_id)
            state.release(holder)
            lines.ended(holder.team)
            kept.refresh()
        started, reserved = lines.cycle(state, kept, settings, t, reserve)
        for job in started:
            estimates[job.id] = t
            end = state.holders[job.id].end
            assert end is not None  # started for its expected runtime
            heapq.heappush(events, (end, 0, job.id))
        for hold in reserved:
            estimates[hold.id] = hold.start
            heapq.heappush(events, (hold.start, 1, hold.id))
        if started or reserved:
            lines.remove_taken()
    return estimates


def _start_reserved(state: State, holds: Holds, job: PendingJob, tiers, settings,
                    events: list) -> None:
    """Starts a reserving job at its reservation's start, on the room it
    reserved (or, should the room be gone, where it fits on its type)."""
    at = next(k for k, h in enumerate(holds.holds) if h.id == job.id)
    hold, earlier = holds.holds[at], holds.holds[:at]
    holds.drop(hold)
    types = state.types
    assert types is not None  # the replay on a cluster with types
    kind = None if hold.gpu_type is None else types.index.get(hold.gpu_type)
    state.select(kind)
    placement = hold.placement
    if any(state.room.free(i)[r] < v[r] for i, v in hold.on_nodes.items() for r in range(3)):
        placement = place(state.room, job.demand) or placement
    end = hold.start + expected_runtime(job.max_runtime, job.estimate, settings)
    state.admit(job.id, job.team, tiers[job.tier], job.demand, placement, hold.start, end)
    state.select(None)
    holds.charge(usage_on_nodes(job.demand, placement), None, holds=earlier)
    holds.refresh()
    heapq.heappush(events, (end, 0, job.id))
