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
cycle (room only shrinks within a cycle), and ends once every shape of the
queue found no room on every type it could use.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import replace

from .eta import HORIZON
from .model import Admission, PendingJob, Snapshot
from .order import r3_key
from .placement import place, usage_on_nodes
from .reservation import Hold, Holds, earliest_hold
from .runtime import expected_runtime
from .state import State


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
    for job in snapshot.running:
        if job.id in victims:
            held = planned.holders[job.id]
            requeued.append(PendingJob(job.id, job.team, job.tier,
                                       job.queued if job.queued is not None else job.started,
                                       job.replicas, job.max_runtime, job.estimate))
            kinds[job.id] = (held.kind,)
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
    # The shapes of the queue on each type they could use, with how many jobs.
    combos = Counter((job.demand, k) for job in queue for k in kinds[job.id])
    limit = now + HORIZON
    while queue and events and events[0][0] <= limit:
        t = events[0][0]
        while events and events[0][0] == t:
            _, what, job_id = heapq.heappop(events)
            if what == 1:
                _start_reserved(state, kept, pending[job_id], tiers, settings, events)
                continue
            holder = state.holders.pop(job_id)
            state.release(holder)
            kept.refresh()
        started, reserved = _cycle(state, kept, queue, kinds, combos, tiers, settings, t,
                                   reserve)
        for job in started:
            estimates[job.id] = t
            heapq.heappush(events, (state.holders[job.id].end, 0, job.id))
        for hold in reserved:
            estimates[hold.id] = hold.start
            heapq.heappush(events, (hold.start, 1, hold.id))
        gone = {job.id for job in started} | {hold.id for hold in reserved}
        if gone:
            queue = [job for job in queue if job.id not in gone]
            for job_id in gone:
                for k in kinds[job_id]:
                    key = (pending[job_id].demand, k)
                    combos[key] -= 1
                    if not combos[key]:
                        del combos[key]
    return estimates


def _cycle(state: State, holds: Holds, queue: list[PendingJob], kinds: dict, combos: Counter,
           tiers, settings, t: int, reserve: bool) -> tuple[list[PendingJob], list[Hold]]:
    """Runs one replayed cycle at virtual time `t`; returns the jobs started
    and the reservations made. `combos` holds the queue's shapes on each
    type they could use: once none has room, and no reservation can be
    made, nothing more happens in the cycle."""
    started: list[PendingJob] = []
    reserved: list[Hold] = []
    no_room: set = set()
    held: set[str] = set()  # teams held whole
    held_types: set[tuple] = set()  # (team, GPU type) held; (None, GPU type): every team's
    # (team, tier, shape, types) refused by quota on every type: within a
    # cycle usage only grows, so the refusal stands for the rest of it.
    refused: set[tuple] = set()
    settled = not reserve or len(holds) >= settings.max_reservations
    fits: set = set()  # shapes on a type that fit, as room is since the last start
    # Most cycles start nothing: a settled cycle first asks which shapes
    # have room at all, and ends at once when none has.
    if settled and _shut(state, combos, no_room, fits):
        return started, reserved
    since = t - settings.starvation_after  # queued before then: starving
    # R2's answer per (team, need, tier preemptible, type): the same for
    # every such job until a start changes usage. Asked of the type's quota directly: selecting a
    # type is needed only to place.
    answers: dict[tuple, object] = {}
    quotas = state.quotas
    for job in queue:
        if settled and len(no_room) == len(combos):
            break
        if job.team in held:
            continue
        open_kinds = kinds[job.id]
        if held_types:
            open_kinds = tuple(k for k in open_kinds
                               if (job.team, k) not in held_types and (None, k) not in held_types)
            if not open_kinds:
                continue
        tier = tiers[job.tier]
        demand = job.demand
        line = (job.team, job.tier, demand, open_kinds)
        starving = job.queued < since
        if line in refused and not starving:
            continue
        quota_ok = None
        admits = []  # the types whose quota admits it
        placed = selected = False
        gpus_refused = True  # every refusal is of GPUs (of a type), none of CPU or memory
        for kind in open_kinds:
            ask = (job.team, demand.total, tier.preemptible, kind)
            if ask in answers:
                refusal = answers[ask]
            else:
                quota = quotas[0 if kind is None else kind]
                refusal = answers[ask] = quota.refuse(job.team, demand.total, not tier.preemptible)
            if refusal is not None:
                gpus_refused = gpus_refused and refusal.resource == 0
                continue
            admits.append(kind)
            if quota_ok is None:
                quota_ok = kind
            if (demand, kind) in no_room:
                continue
            state.select(kind)
            selected = True
            placement = place(state.room, demand)
            if placement is None:
                no_room.add((demand, kind))
                continue
            end = t + expected_runtime(job.max_runtime, job.estimate, settings)
            state.admit(job.id, job.team, tier, demand, placement, t, end)
            answers.clear()
            if holds:
                holds.charge(usage_on_nodes(demand, placement), None)
            started.append(job)
            placed = True
            fits.clear()
            break
        if selected:
            state.select(None)
        if quota_ok is None:
            refused.add(line)
        if placed and settled and _shut(state, combos, no_room, fits):
            break
        if placed or not starving:
            continue
        if quota_ok is None and open_kinds:
            if None not in open_kinds and gpus_refused:
                held_types.update((job.team, k) for k in open_kinds)
            else:
                held.add(job.team)
        elif not reserve and None not in open_kinds:
            held_types.update((None, k) for k in admits)
        elif not reserve:
            break  # the whole cluster is held for this job
        elif len(holds) < settings.max_reservations:
            state.select(quota_ok)
            restore = holds.lifted()
            runtime = expected_runtime(job.max_runtime, job.estimate, settings)
            hold = earliest_hold(state, job.id, demand, runtime, holds)
            restore()
            state.select(None)
            if hold is not None:
                hold.gpu_type = None if quota_ok is None else state.types.names[quota_ok]
                holds.add(hold)
                reserved.append(hold)
                settled = len(holds) >= settings.max_reservations
                if settled and _shut(state, combos, no_room, fits):
                    break
    return started, reserved


def _shut(state: State, combos: Counter, no_room: set, fits: set) -> bool:
    """Returns whether no shape of the queue has room on any type it could
    use, testing the pairs not yet known (room only shrinks within a cycle,
    so a pair without room stays without it: `no_room` holds what a job of
    that pair would find when tried)."""
    for demand, kind in combos:
        if (demand, kind) in no_room or (demand, kind) in fits:
            continue
        state.select(kind)
        room = state.room
        widest = max((g[1] for g in demand.groups), default=0)
        if widest > room.largest_free_gpu() or place(room, demand) is None:
            no_room.add((demand, kind))
        else:
            fits.add((demand, kind))
    state.select(None)
    return len(no_room) == len(combos)


def _start_reserved(state: State, holds: Holds, job: PendingJob, tiers, settings,
                    events: list) -> None:
    """Starts a reserving job at its reservation's start, on the room it
    reserved (or, should the room be gone, where it fits on its type)."""
    at = next(k for k, h in enumerate(holds.holds) if h.id == job.id)
    hold, earlier = holds.holds[at], holds.holds[:at]
    holds.drop(hold)
    kind = None if hold.gpu_type is None else state.types.index.get(hold.gpu_type)
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
