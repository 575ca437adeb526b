"""One admission cycle: snapshot in, plan out, in numbered phases.

1. Build the working state: node room and team usage from running jobs (R12:
   outside usage takes room and no quota).
2. Reject what can never fit (R10; on a cluster with GPU types, what fits
   none of the job's types, naming each type's limit). R10 counts the nodes
   that take no new pods now (cordoned, tainted); a job that fits only with
   them waits on those types, naming the nodes, and is tried only on its
   other types.
3. Consider the rest in R3 order (R9 inside a tier value). For each job:
   a. held by the starvation guard (R4)? It waits and holds nothing itself;
   b. fits (R2 quota, R1 gang, R11 placement) on the room left after
      reservations (or on reserved room its `max_runtime` frees by the
      reservation's start), on the first of its GPU types where it does
      (types.py: that type's nodes and quota)? Admit it there; its usage
      counts for every later job;
   c. else find victims (R5-R8; reclaim may take reserved room) on the
      first of its types where some make it fit; admit it with them;
   d. else it waits, its sentence naming each type; a job waiting longer
      than `starvation_after` is starving: refused by quota on every type,
      it holds its team (on a cluster with GPU types, refused GPUs of each
      type, it holds its team's jobs of those types only: quota is per type,
      so a job of another type takes nothing it waits for, and a job that
      accepts a held type and others tries only the others); else it
      reserves room (reservation.py) of the first type whose quota admits
      it, while fewer than `max_reservations` jobs do. With
      `starvation_guard` "hold" it holds the whole cluster instead (with
      GPU types, every team's jobs of the types whose quota admits it).
4. Rank the waiting jobs (positions) in R3 order.
5. Estimate starts by replaying forward (eta.py, or eta_typed.py on a
   cluster with GPU types); a reserving job starts at its reservation's start.
6. Each team's GPU figures once the admissions count (usage.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from core.durations import duration

from .demand import Demand
from .eta import estimate_starts
from .eta_typed import estimate_typed
from .hopeless import Hopeless
from .model import Admission, PendingJob, Plan, Rejection, Reservation, Snapshot, Team, Tier, Wait
from .order import R3Queue, admission_order, first_quota, r3_sorted
from .placement import place, replica_nodes, usage_on_nodes
from .quota import Refusal
from .reasons import Code, amounts, replicas_text
from .rejection import closed_types, reject_reason, reject_typed, reject_untyped
from .reservation import Hold, Holds, earliest_hold, outside_without_end, preempt_around
from .room import Room
from .runtime import expected_runtime
from .standing import Standing
from .state import State
from .usage import team_gpus
from .waiting import QuotaQueue, reserving, type_name, typed, why_waiting


NO_TYPE = (None,)  # the GPU types a job tries on a cluster without types


class Fit(IntEnum):
    """How a job fits right now, ordered: more is better."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


def plan(snapshot: Snapshot, *, with_eta: bool = True, with_waits: bool = True,
         standing: Standing | None = None, queue: R3Queue | None = None) -> Plan:
    """Returns the plan for `snapshot`: who is admitted (with placement and
    victims), who waits (position, reason, estimated start), who is rejected,
    and the room reserved for starving jobs.

    `with_waits=False` leaves the waiting jobs and the team figures out of
    the plan (no positions, reasons, estimates or usage), for callers that act only on admissions and
    rejections, such as the trace replay; the admissions are the same.
    `standing`, given by a caller that keeps its running jobs indexed from
    one cycle to the next (standing.py, the trace replay), is read instead
    of going over every running job when `snapshot.running` is its
    `running`; the plan is the same. `queue`, given by a caller that keeps
    its pending jobs in R3 order from one cycle to the next (order.py),
    saves sorting them when `snapshot.pending` is its `pending`; the plan
    is the same.
    Pure and deterministic: the same snapshot always gives the same plan.
    """
    made = decide(snapshot, with_waits=with_waits, standing=standing, queue=queue)
    state, holds, waiting = made.state, made.holds, made.waiting

    # 4. Positions among waiting jobs, in R3 order.
    ranked = [job for job in made.queue if job.id in waiting]
    # 5. Estimated starts, of the jobs some schedulable node could hold.
    kinds, estimated = made.kinds, ranked
    if made.closed:
        kinds = {job: tuple(k for k in tried if k not in made.closed.get(job, ()))
                 for job, tried in kinds.items()}
        estimated = [job for job in ranked if kinds[job.id]]
    if not with_eta:
        etas = {}
    elif state.types is None:
        etas = estimate_starts(snapshot, estimated, made.admitted, state, holds)
    else:
        etas = estimate_typed(snapshot, estimated, made.admitted, state, holds, kinds)
    waits = []
    per_team: dict[str, int] = {}
    for position, job in enumerate(ranked, start=1):
        per_team[job.team] = per_team.get(job.team, 0) + 1
        code, reason = waiting[job.id]
        waits.append(Wait(job.id, position, per_team[job.team], str(code), reason,
                          etas.get(job.id)))
    reservations = tuple(Reservation(h.id, h.start, _names(state, h.placement),
                                     replica_nodes(h.placement, state.room.names), h.gpu_type)
                         for h in holds)
    # 6. Team figures.
    teams = team_gpus(snapshot, made.admitted, waiting, state) if with_waits else ()
    return Plan(tuple(made.admitted), tuple(waits), tuple(made.rejected), reservations, teams)


@dataclass(frozen=True, slots=True)
class Decisions:
    """Phases 1-3 of a cycle: what `plan` ranks and estimates from.

    `queue` is every job not rejected, in R3 order; `waiting` maps a waiting
    job to its code and sentence (empty without waits); `state` is the room
    and quota once the admissions count; `holds` the reservations made.
    """

    admitted: list[Admission]
    waiting: dict[str, tuple[Code, str]]
    rejected: list[Rejection]
    queue: list[PendingJob]
    state: State
    holds: list[Hold]
    # job id -> the GPU types it tries, in order (None: no type); on a
    # cluster without types only when some node takes no new pods (`closed`
    # reads it), every job trying (None,)
    kinds: dict[str, tuple[int | None, ...]]
    # job id -> its GPU types (None: no type) it fits only with nodes that
    # take no new pods now -> the code and sentence saying so
    closed: dict[str, dict[int | None, tuple[Code, str]]]


def decide(snapshot: Snapshot, *, with_waits: bool = True,
           standing: Standing | None = None, queue: R3Queue | None = None) -> Decisions:
    """Returns the admissions, rejections, waits and reservations of one
    cycle, before positions and estimates (phases 1-3); `standing` and
    `queue` as `plan` reads them."""
    tiers = {t.name: t for t in snapshot.tiers}
    teams = {t.name: t for t in snapshot.teams}
    now = snapshot.now
    settings = snapshot.settings

    # 1. Working state.
    state = State(snapshot, standing)

    # 2. Reject what can never fit.
    types = state.types
    empty = state.empty
    cache: dict[object, bool] = {}
    # The verdict depends on the team, the tier, the shape and the types only.
    verdicts: dict[tuple, tuple[Code, str] | None] = {}
    kinds_of: dict[str, tuple[int | None, ...]] = {}  # job id -> the GPU types it tries
    closed: dict[str, dict[int | None, tuple[Code, str]]] = {}
    # (shape, GPU type) -> whether it fits only with nodes that take no new pods, and why
    unplaceable: dict[tuple[Demand, int | None], tuple[Code, str] | None] = {}
    rejected: list[Rejection] = []
    # Already in R3 order when the caller's queue vouches for the snapshot's.
    in_order = queue is not None and queue.orders(snapshot.pending, tiers)
    # Without GPU types, every job tries (None,), kept only for `closed`.
    each_kind = types is not None or state.open is not None
    kept: list[PendingJob] = []
    if queue is not None and in_order and not each_kind and all(
            _untyped_verdict(job, teams, tiers, state, empty, cache, verdicts) is None
            for _, job in queue.shapes.values()):
        kept = list(snapshot.pending)  # R10 reads a job's shape alone, and passes every one
    else:
        for job in snapshot.pending:
            demand = job.demand
            kinds = NO_TYPE if types is None else types.candidates(job, teams[job.team])
            key = (job.team, job.tier, demand, job.gpu_type)  # its types follow from these
            if key in verdicts:
                verdict = verdicts[key]
            elif types is None:
                verdict = _untyped_verdict(job, teams, tiers, state, empty, cache, verdicts)
            else:
                verdict = verdicts[key] = reject_typed(job, kinds, teams[job.team], tiers[job.tier],
                                                       state, empty)
            if verdict is None:
                kept.append(job)
                if each_kind:
                    kinds_of[job.id] = kinds if types is None else tuple(k for k in kinds if k != -1)
                if state.open is not None:
                    found = closed_types(demand, kinds_of[job.id], state, unplaceable)
                    if found:
                        closed[job.id] = found
            else:
                rejected.append(Rejection(job.id, str(verdict[0]), verdict[1]))
    ordered = kept if in_order else r3_sorted(kept, tiers)

    # 3. Admit in order.
    admitted: list[Admission] = []
    waiting: dict[str, tuple[Code, str]] = {}
    held_by: dict[str | None, PendingJob] = {}  # team (None: whole cluster) -> holder
    # (team, GPU type) -> holder: the types a starving job was refused GPUs of;
    # (None, GPU type): the types a starving job holds for room under "hold" (3d).
    held_types: dict[tuple[str | None, int | None], PendingJob] = {}
    # Shapes (and types) that found no room; room only shrinks.
    no_room: set[Demand | tuple[Demand, int]] = set()
    hopeless = Hopeless()  # victim searches known to find nothing (hopeless.py)
    holds = Holds(state.room)
    reserve = settings.starvation_guard == "reserve"
    previous = {r.id: r for r in snapshot.reservations}
    # type -> shape -> why reserved room stops it
    kept_off: dict[int | None, dict[Demand, tuple[Code, str] | None]] = {}
    ahead = QuotaQueue()  # the jobs each team has waiting for quota so far

    def skip_team(team: str) -> bool:
        return None in held_by or team in held_by

    held_reason: dict[str, str] = {}  # holder id -> the sentence its held jobs show

    def held_sentence(holder: PendingJob) -> str:
        reason = held_reason.get(holder.id)
        if reason is None:
            reason = held_reason[holder.id] = Code.HELD.say(
                job=holder.id, waited=duration(now - holder.queued))
        return reason

    order = admission_order(ordered, tiers, state.quota, skip_team,
                            None if types is None else first_quota(state, kinds_of))
    for job in order:
        demand = job.demand
        tier = tiers[job.tier]
        holder = held_by.get(None) or held_by.get(job.team)
        if holder is not None:
            if None in held_by and not with_waits:
                break  # the whole cluster is held: every later job waits
            if with_waits:
                waiting[job.id] = (Code.HELD, held_sentence(holder))
            continue
        every = kinds_of[job.id] if each_kind else NO_TYPE
        kinds = every
        # Its types closed to it -> why: only nodes taking no pods could hold
        # it there, or a starving job holds the type (the sentence naming the holder).
        shut: dict[int | None, tuple[Code, str]] = closed.get(job.id, {})
        if held_types:
            shut = dict(shut)
            for kind in every:
                type_holder = held_types.get((job.team, kind)) or held_types.get((None, kind))
                if type_holder is not None and kind not in shut:
                    shut[kind] = (Code.HELD, held_sentence(type_holder))
        if shut:
            kinds = tuple(kind for kind in every if kind not in shut)
            if not kinds:
                if with_waits:
                    waiting[job.id] = why_waiting(job, demand, every, [], state, holds,
                                                  kept_off, now, shut)
                continue
        # Sure to end by then (R4: only max_runtime counts, not an estimate).
        until = now + job.max_runtime if job.max_runtime else None
        spared = holds.spares(until)
        end = now + expected_runtime(job.max_runtime, job.estimate, settings)
        # Its types in order: the first where it fits without preemption...
        refusals: list[Refusal | None] = []
        fit = Fit.NO_FIT
        for kind in kinds:
            state.select(kind)
            refusal = state.quota.refuse(job.team, demand.total, not tier.preemptible)
            refusals.append(refusal)
            shape = demand if kind is None else (demand, kind)
            placement = None
            if refusal is None and spared:
                restore = holds.spared(until)
                placement = place(state.room, demand)
                if placement is not None:
                    fit = Fit.FIT
                    holds.charge(usage_on_nodes(demand, placement), until)
                    _admit(state, job, tier, demand, placement, end, admitted, hopeless)
                restore()
            elif refusal is None and shape not in no_room:
                placement = place(state.room, demand)
                if placement is None:
                    no_room.add(shape)
                else:
                    fit = Fit.FIT
                    if holds:
                        holds.charge(usage_on_nodes(demand, placement), None)
                    _admit(state, job, tier, demand, placement, end, admitted, hopeless)
            if fit is Fit.FIT:
                break
        if fit is Fit.FIT:
            continue
        # ...else the first where it fits with victims.
        for kind in kinds:
            state.select(kind)
            if _preempt(state, holds, job, tier, demand, kind, until, spared, end, admitted,
                        hopeless):
                fit = Fit.PREEMPT
                break
        if fit is Fit.PREEMPT:
            continue
        # ...else it waits.
        if with_waits:
            waiting[job.id] = why_waiting(job, demand, every, refusals, state, holds,
                                          kept_off, now, shut, ahead)
        if now - job.queued <= settings.starvation_after:
            continue
        if all(refusal is not None for refusal in refusals):
            if types is not None and all(refusal is not None and refusal.resource == 0
                                         for refusal in refusals):
                for kind in kinds:  # refused GPUs of these types: their pools only
                    held_types.setdefault((job.team, kind), job)
            else:  # no types, or refused CPU or memory, which every type shares
                held_by.setdefault(job.team, job)
        elif not reserve and types is not None and None not in kinds:
            for kind, refusal in zip(kinds, refusals):
                if refusal is None:  # its quota admits it there: room is what it waits for
                    held_types.setdefault((None, kind), job)
        elif not reserve:
            held_by.setdefault(None, job)
        elif len(holds) < settings.max_reservations:
            kind = kinds[[refusal is None for refusal in refusals].index(True)]
            state.select(kind)
            name = type_name(state, kind)
            before = previous.get(job.id)
            if before is not None and before.gpu_type != name:
                before = None  # room of another type keeps nothing for this one
            hold = _reserve(state, holds, job, before, settings)
            if hold is not None:
                hold.gpu_type = name
                holds.add(hold)
                kept_off.clear()
                if with_waits:
                    waiting[job.id] = (Code.RESERVING, typed(name, reserving(hold, demand, state)))
            elif with_waits:
                outside = outside_without_end(state)
                if any(outside):
                    waiting[job.id] = (Code.NO_RESERVATION, Code.NO_RESERVATION.say(
                        need=amounts(demand.total), replicas=replicas_text(demand.groups),
                        outside=amounts(outside)))

    state.select(None)
    rejected.sort(key=lambda r: r.id)
    return Decisions(admitted, waiting, rejected, ordered, state, holds.holds, kinds_of, closed)


def _untyped_verdict(job: PendingJob, teams: dict[str, Team], tiers: dict[str, Tier], state: State,
                     empty: Room, cache: dict, verdicts: dict[tuple, tuple[Code, str] | None]
                     ) -> tuple[Code, str] | None:
    """Returns R10's rejection of a job on a cluster without GPU types, or
    None; kept in `verdicts` for its shape, which is all it reads."""
    key = (job.team, job.tier, job.demand, job.gpu_type)
    if key in verdicts:
        return verdicts[key]
    verdict: tuple[Code, str] | None
    if job.gpu_type and job.demand.total[0]:
        verdict = reject_untyped(job)
    else:
        verdict = reject_reason(job, job.demand, teams[job.team], tiers[job.tier], state.quota, empty, cache)
    verdicts[key] = verdict
    return verdict


def _admit(state: State, job: PendingJob, tier, demand: Demand, placement, end: int,
           admitted: list[Admission], hopeless: Hopeless) -> None:
    """Admits a job that fits without victims, on the selected GPU type: its
    usage counts from now on."""
    state.admit(job.id, job.team, tier, demand, placement, state.now, end)
    # A team borrowing offers reclaim candidates, more as it grows.
    hopeless.admitted(job.team, state.borrowing(job.team))
    admitted.append(Admission(job.id, _names(state, placement),
                              nodes=replica_nodes(placement, state.room.names),
                              gpu_type=type_name(state, state.kind)))


def _preempt(state: State, holds: Holds, job: PendingJob, tier, demand: Demand,
             kind: int | None, until: int | None, spared: bool, end: int,
             admitted: list[Admission], hopeless: Hopeless) -> bool:
    """Admits the job with victims on the selected GPU type when some make it
    fit (R5-R8); returns whether it did."""
    now = state.now
    # A job that may use reserved room searches on more room than others.
    shape = (job.team, tier.value, tier.preemptible, demand, until if spared else None, kind)
    lasting = (tier.value, tier.preemptible, demand, kind)
    if hopeless.known(shape, lasting, job.team):
        return False
    preemption, bound = preempt_around(state, holds, job.team, tier, demand, state.settings,
                                       now, until)
    if preemption is None:
        hopeless.note(shape, lasting, job.team, bound)
        return False
    state.take(preemption.victims)
    state.admit(job.id, job.team, tier, demand, preemption.placement, now, end)
    hopeless.preempted(job.team, {v.team for v in preemption.victims},
                       state.borrowing(job.team))
    if holds:
        holds.charge(usage_on_nodes(demand, preemption.placement), until)
    state.reserve(preemption.before)
    holds.refresh()
    admitted.append(Admission(job.id, _names(state, preemption.placement),
                              tuple(v.id for v in preemption.victims),
                              replica_nodes(preemption.placement, state.room.names),
                              type_name(state, kind)))
    return True


def _reserve(state: State, holds: Holds, job: PendingJob, previous: Reservation | None,
             settings) -> Hold | None:
    """Returns the room a starving job reserves (R4), or None when it would
    never fit. The reservation of the previous cycle keeps its nodes while
    they give a start no later than the best one plus `reservation_slack`."""
    runtime = expected_runtime(job.max_runtime, job.estimate, settings)
    restore = holds.lifted()
    best = earliest_hold(state, job.id, job.demand, runtime, holds)
    if best is not None and previous is not None:
        index = state.room.index
        nodes = {index[name] for name, _ in previous.placement if name in index}
        if nodes and set(best.on_nodes) != nodes:
            kept = earliest_hold(state, job.id, job.demand, runtime, holds, nodes,
                                 by=best.start + settings.reservation_slack)
            if kept is not None:
                best = kept
    restore()
    return best


def _names(state: State, placement) -> tuple[tuple[str, int], ...]:
    """Returns a placement as (node name, replicas) in snapshot node order."""
    return tuple((state.room.names[i], sum(counts)) for i, counts in placement)
