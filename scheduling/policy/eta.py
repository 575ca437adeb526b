"""Estimated starts: the policy replayed forward in virtual time.

The replay starts from the plan just made: victims are gone and wait again
with their queue time, admitted jobs run from `now`. Running jobs end at
`started + max_runtime` (or `settings.default_runtime`); a job already past
that end is assumed to end at `now + 1`. No new jobs arrive. At each moment a
job ends, one cycle runs over the waiting jobs in R3 order with the same fit
rules as the plan: quota (R2), gang placement (R1, R11) and backfill with the
starvation guard (R4) on the virtual clock.

Simplifications, for speed (the estimate is a forecast, not a promise):
- no preemption in the replay: a job that would start by preempting later
  gets the start that ends of running jobs give it;
- no fair-borrowing reordering (R9) in the replay: R3 order only;
- the replay stops at `HORIZON` seconds after `now`; jobs not started by then,
  or blocked when no job is left to end, get no estimate (None).
"""

from __future__ import annotations

import heapq

from .demand import demand_of
from .model import Admission, PendingJob, Snapshot
from .order import r3_key
from .placement import place
from .state import State

HORIZON = 30 * 86400


def estimate_starts(snapshot: Snapshot, waiting: list[PendingJob],
                    admitted: list[Admission], planned: State) -> dict[str, int | None]:
    """Returns the estimated start of each waiting job, None when unknown."""
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
                   j.replicas, j.max_runtime)
        for j in snapshot.running if j.id in victims
    ]
    queue = sorted(waiting + requeued, key=lambda job: r3_key(job, tiers))
    replay = Snapshot(now, snapshot.nodes, snapshot.tiers, snapshot.teams,
                      tuple(running), (), settings)
    state = State(replay)
    ends = {job.id: job.started + (job.max_runtime or settings.default_runtime)
            for job in running}
    for a in admitted:
        job = pending[a.id]
        state.hold(planned.holders[a.id])
        ends[job.id] = now + (job.max_runtime or settings.default_runtime)
    events: list[tuple[int, str]] = []
    for job_id, end in ends.items():
        heapq.heappush(events, (max(end, now + 1), job_id))

    estimates: dict[str, int | None] = {job.id: None for job in waiting}
    alive = queue
    smallest = min((min((g[1] for g in demand_of(j.replicas).groups), default=0)
                    for j in queue), default=0)
    limit = now + HORIZON
    done: set[str] = set()  # started jobs still in `alive`, skipped by cycles
    first = 0
    while len(alive) > len(done) and events and events[0][0] <= limit:
        t = events[0][0]
        while events and events[0][0] == t:
            _, job_id = heapq.heappop(events)
            holder = state.holders.pop(job_id)
            state.remove(holder)
        # Nothing can start while no node has room for the smallest replica.
        if smallest > 0 and state.room.largest_free_gpu() < smallest:
            continue
        while first < len(alive) and alive[first].id in done:
            first += 1  # jobs start roughly in order: skip the started prefix for good
        started = _cycle(state, alive, first, done, tiers, t, settings.starvation_after)
        if not started:
            continue
        for job in started:
            if job.id in estimates:
                estimates[job.id] = t
            runtime = job.max_runtime or settings.default_runtime
            heapq.heappush(events, (t + runtime, job.id))
        for job in started:
            done.add(job.id)
        # Compact only when half the list has started: linear overall.
        if 2 * len(done) > len(alive):
            alive = [job for job in alive if job.id not in done]
            done.clear()
            first = 0
    return estimates


def _cycle(state: State, queue: list[PendingJob], first: int, done: set[str], tiers,
           t: int, starvation_after: int) -> list[PendingJob]:
    """Runs one replayed cycle at virtual time `t`; returns the jobs started."""
    started = []
    held: set[str] = set()
    no_room = set()
    for k in range(first, len(queue)):
        job = queue[k]
        if job.team in held or job.id in done:
            continue
        demand = demand_of(job.replicas)
        tier = tiers[job.tier]
        refusal = state.quota.refuse(job.team, demand.total, not tier.preemptible)
        placement = None
        if refusal is None and demand not in no_room:
            placement = place(state.room, demand)
            if placement is None:
                no_room.add(demand)
        if placement is not None:
            state.admit(job.id, job.team, tier, demand, placement, t)
            started.append(job)
            continue
        if t - job.queued > starvation_after:
            if refusal is None:
                break  # the whole cluster is held for this job
            held.add(job.team)
    return started

