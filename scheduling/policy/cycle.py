"""One admission cycle: snapshot in, plan out, in numbered phases.

1. Build the working state: node room and team usage from running jobs (R12:
   outside usage takes room and no quota).
2. Reject what can never fit (R10).
3. Consider the rest in R3 order (R9 inside a tier value). For each job:
   a. held by the starvation guard (R4)? It waits and holds nothing itself;
   b. fits (R2 quota, R1 gang, R11 placement)? Admit it; its usage counts for
      every later job;
   c. else find victims (R5-R8); with some, admit it with them;
   d. else it waits; a job waiting longer than `starvation_after` holds its
      pool: its team when quota refused it, otherwise the whole cluster.
4. Rank the waiting jobs (positions) in R3 order.
5. Estimate starts by replaying forward (eta.py).
"""

from __future__ import annotations

from enum import IntEnum

from .demand import Demand
from .eta import estimate_starts
from .model import Admission, PendingJob, Plan, Rejection, Snapshot, Wait
from .order import admission_order, r3_sorted
from .placement import place, replica_nodes
from .preemption import find_victims
from .quota import Refusal
from .reasons import Code, amount, amounts, duration, replicas_text
from .rejection import reject_reason
from .room import Room
from .state import State


class Fit(IntEnum):
    """How a job fits right now, ordered: more is better."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


def plan(snapshot: Snapshot, *, with_eta: bool = True, with_waits: bool = True) -> Plan:
    """Returns the plan for `snapshot`: who is admitted (with placement and
    victims), who waits (position, reason, estimated start), who is rejected.

    `with_waits=False` leaves the waiting jobs out of the plan (no positions,
    reasons or estimates), for callers that act only on admissions and
    rejections, such as the trace replay; the admissions are the same.
    Pure and deterministic: the same snapshot always gives the same plan.
    """
    tiers = {t.name: t for t in snapshot.tiers}
    teams = {t.name: t for t in snapshot.teams}
    now = snapshot.now
    settings = snapshot.settings

    # 1. Working state.
    state = State(snapshot)

    # 2. Reject what can never fit.
    empty = Room(snapshot.nodes)
    cache: dict[object, bool] = {}
    # The verdict depends on the team, the tier and the shape only.
    verdicts: dict[tuple[str, str, Demand], tuple[Code, str] | None] = {}
    rejected: list[Rejection] = []
    queue: list[PendingJob] = []
    for job in snapshot.pending:
        demand = job.demand
        key = (job.team, job.tier, demand)
        if key in verdicts:
            verdict = verdicts[key]
        else:
            verdict = verdicts[key] = reject_reason(job, demand, teams[job.team],
                                                    tiers[job.tier], state.quota, empty, cache)
        if verdict is None:
            queue.append(job)
        else:
            rejected.append(Rejection(job.id, str(verdict[0]), verdict[1]))
    queue = r3_sorted(queue, tiers)

    # 3. Admit in order.
    admitted: list[Admission] = []
    waiting: dict[str, tuple[Code, str]] = {}
    held_by: dict[str | None, PendingJob] = {}  # team (None: whole cluster) -> holder
    no_room: set[Demand] = set()  # shapes that found no room; room only shrinks
    # (team, tier value, preemptible, shape) that found no victims. Candidates
    # and room only shrink, so it stays true until a preemption frees quota
    # or a team starts borrowing and so becomes reclaimable.
    cannot_preempt: set[tuple] = set()

    def skip_team(team: str) -> bool:
        return None in held_by or team in held_by

    held_reason: dict[str, str] = {}  # holder id -> the sentence its held jobs show
    for job in admission_order(queue, tiers, state.quota, skip_team):
        demand = job.demand
        tier = tiers[job.tier]
        holder = held_by.get(None) or held_by.get(job.team)
        if holder is not None:
            if None in held_by and not with_waits:
                break  # the whole cluster is held: every later job waits
            if with_waits:
                reason = held_reason.get(holder.id)
                if reason is None:
                    reason = held_reason[holder.id] = Code.HELD.say(
                        job=holder.id, waited=duration(now - holder.queued))
                waiting[job.id] = (Code.HELD, reason)
            continue
        refusal = state.quota.refuse(job.team, demand.total, not tier.preemptible)
        fit, placement = Fit.NO_FIT, None
        if refusal is None and demand not in no_room:
            placement = place(state.room, demand)
            if placement is None:
                no_room.add(demand)
            else:
                fit = Fit.FIT
        if fit is Fit.FIT:
            above = state.quota.above_nominal(job.team, (0, 1, 2))
            state.admit(job.id, job.team, tier, demand, placement, now)
            if not above and state.quota.above_nominal(job.team, (0, 1, 2)):
                # A team now borrowing offers reclaim candidates it did not before.
                cannot_preempt.clear()
            admitted.append(Admission(job.id, _names(state, placement),
                                      nodes=replica_nodes(placement, state.room.names)))
            continue
        shape = (job.team, tier.value, tier.preemptible, demand)
        preemption = None
        if shape not in cannot_preempt:
            preemption = find_victims(state, job.team, tier, demand, settings, now)
            if preemption is None:
                cannot_preempt.add(shape)
        if preemption is not None:
            cannot_preempt.clear()
            for victim in preemption.victims:
                victim.taken = True
            state.admit(job.id, job.team, tier, demand, preemption.placement, now)
            state.reserve(preemption.before)
            admitted.append(Admission(job.id, _names(state, preemption.placement),
                                      tuple(v.id for v in preemption.victims),
                                      replica_nodes(preemption.placement, state.room.names)))
            continue
        if with_waits:
            waiting[job.id] = _why_waiting(job, demand, refusal, state)
        if now - job.queued > settings.starvation_after:
            held_by.setdefault(job.team if refusal is not None else None, job)

    # 4. Positions among waiting jobs, in R3 order.
    ranked = [job for job in queue if job.id in waiting]
    etas = estimate_starts(snapshot, ranked, admitted, state) if with_eta else {}
    waits = []
    per_team: dict[str, int] = {}
    for position, job in enumerate(ranked, start=1):
        per_team[job.team] = per_team.get(job.team, 0) + 1
        code, reason = waiting[job.id]
        waits.append(Wait(job.id, position, per_team[job.team], str(code), reason,
                          etas.get(job.id)))
    rejected.sort(key=lambda r: r.id)
    return Plan(tuple(admitted), tuple(waits), tuple(rejected))


def _names(state: State, placement) -> tuple[tuple[str, int], ...]:
    """Returns a placement as (node name, replicas) in snapshot node order."""
    return tuple((state.room.names[i], sum(counts)) for i, counts in placement)


def _why_waiting(job: PendingJob, demand: Demand, refusal: Refusal | None,
                 state: State) -> tuple[Code, str]:
    """Returns the code and sentence for a job that neither fits nor preempts."""
    if refusal is not None:
        r = refusal.resource
        numbers = dict(need=amount(r, refusal.need), team=job.team,
                       used=_bare(r, refusal.used), nominal=_bare(r, refusal.nominal))
        if refusal.code is Code.BORROWING_LIMIT:
            borrowed = max(0, refusal.used - refusal.nominal)
            return refusal.code, refusal.code.say(
                more=_bare(r, max(0, refusal.limit - borrowed)),
                limit=_bare(r, refusal.limit), **numbers)
        if refusal.code is Code.NOMINAL_ONLY:
            return refusal.code, refusal.code.say(tier=job.tier, **numbers)
        return refusal.code, refusal.code.say(available=_bare(r, refusal.limit), **numbers)
    total = state.room.total
    free = tuple(max(0, x) for x in total)
    short = [r for r in range(3) if demand.total[r] > free[r]]
    words = dict(need=amounts(demand.total), replicas=replicas_text(demand.groups))
    if short:
        return Code.NO_ROOM, Code.NO_ROOM.say(free=amount(short[0], free[short[0]]), **words)
    shown = tuple(free[r] if demand.total[r] else 0 for r in range(3))
    return Code.FRAGMENTED, Code.FRAGMENTED.say(free=amounts(shown), **words)


def _bare(r: int, value: int) -> str:
    """Returns a GPU count bare ("6 of 8 nominal"), other amounts with units."""
    return str(value) if r == 0 else amount(r, value)
