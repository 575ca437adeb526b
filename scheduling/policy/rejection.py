"""R10: reject at once what can never fit, naming the limit and the numbers.

A job is rejected only for limits that no change of load can lift: a replica
above the team's per-replica limit or larger than any node, a gang the empty
cluster could not hold, or more than the team could ever hold under its quota.
Whatever could fit later waits instead.

Nodes that take no new pods now (cordoned for a drain, tainted) count here,
and only here: they may take pods again. A job that fits the empty cluster
only with them waits, its sentence naming them (`only_unschedulable`).
"""

from __future__ import annotations

from .demand import Demand
from .model import RESOURCES, PendingJob, Team, Tier
from .placement import place
from .quota import Quota
from .reasons import Code, amount, amounts, per_type, replicas_text
from .room import Room


def reject_reason(
    job: PendingJob,
    demand: Demand,
    team: Team,
    tier: Tier,
    quota: Quota,
    empty: Room,
    empty_fit: dict[object, bool],
) -> tuple[Code, str] | None:
    """Returns `(code, sentence)` when the job can never be admitted, else None.

    `empty` is the room of the empty cluster; `empty_fit` caches, per shape,
    whether it can be placed there. A job asking for GPUs where no node has any
    now (every node of its type drained, or a type a quota names before any node
    carries it) is judged by its limits alone: nodes may come back, and what
    could fit later waits.
    """
    judge_room = bool(empty.total[0]) or not demand.total[0]
    for _, gpu, cpu, memory in demand.groups:
        replica = (gpu, cpu, memory)
        for r, name in enumerate(RESOURCES):
            limit = team.per_replica_max.get(name)
            if limit is not None and replica[r] > limit:
                return Code.PER_REPLICA_MAX, Code.PER_REPLICA_MAX.say(
                    asked=amount(r, replica[r]), team=team.name, limit=amount(r, limit)
                )
        if not judge_room:
            continue
        holds = empty_fit.get(replica)
        if holds is None:
            holds = empty_fit[replica] = any(
                empty.gpu[i] >= gpu and empty.cpu[i] >= cpu and empty.memory[i] >= memory
                for i in empty.indices
            )
        if not holds:
            largest = max(
                empty.indices,
                key=lambda i: (empty.gpu[i], empty.cpu[i], empty.memory[i]),
                default=None,
            )
            biggest = "none" if largest is None else amounts(empty.free(largest))
            return Code.REPLICA_TOO_LARGE, Code.REPLICA_TOO_LARGE.say(
                asked=amounts(replica), largest=biggest
            )
    steady = not tier.preemptible
    for r in quota.named[team.name]:
        need = demand.total[r]
        most, borrowable = quota.most_ever(team.name, r, steady)
        if need <= most:
            continue
        if steady:
            return Code.ABOVE_NOMINAL_STEADY, Code.ABOVE_NOMINAL_STEADY.say(
                need=amount(r, need), tier=tier.name, team=team.name,
                nominal=amount(r, most),
            )
        nominal = quota.nominal[team.name][r]
        return Code.ABOVE_TEAM_MAX, Code.ABOVE_TEAM_MAX.say(
            need=amount(r, need), team=team.name, most=_bare(r, most),
            nominal=_bare(r, nominal), borrowable=_bare(r, borrowable),
        )
    if not judge_room:
        return None
    fits = empty_fit.get(demand)
    if fits is None:
        fits = empty_fit[demand] = place(empty, demand) is not None
    if not fits:
        return Code.NEVER_PLACEABLE, Code.NEVER_PLACEABLE.say(
            need=amounts(demand.total), replicas=replicas_text(demand.groups)
        )
    return None


def _bare(r: int, value: int) -> str:
    """Returns an amount without its unit when the unit is GPUs (reads as
    "at most 12 (8 nominal + 4 borrowable)"), with it otherwise."""
    text = amount(r, value)
    return text.split(" ")[0] if r == 0 else text


def reject_typed(job: PendingJob, kinds: tuple[int | None, ...], team: Team, tier: Tier,
                 state, empty: Room) -> tuple[Code, str] | None:
    """Returns `(code, sentence)` when the job can never be admitted on any
    of its GPU types (`kinds`, indices into `state.types`; -1 a type the
    cluster lacks), naming each type's limit ("a100: ...; h100: ..."), else
    None. The code is its first type's."""
    said = []
    for k, kind in enumerate(kinds):
        if kind == -1:  # only a job's own list names types the cluster lacks
            name = job.gpu_type[k]
            said.append((Code.UNKNOWN_GPU_TYPE, None, Code.UNKNOWN_GPU_TYPE.say(gpu_type=name)))
            continue
        quota = state.quotas[0 if kind is None else kind]
        # Each type's empty room gets its own cache: the same shape fits one and not another.
        cache = state.empty_fits.setdefault(kind, {})
        verdict = reject_reason(job, job.demand, team, tier, quota, empty.part(kind), cache)
        if verdict is None:
            return None
        code, reason = verdict
        said.append((code, None if kind is None else state.types.names[kind], reason))
    return per_type(said)



def reject_untyped(job: PendingJob) -> tuple[Code, str]:
    """Returns the rejection of a job asking for GPU types on a cluster
    without types: none of them exists."""
    said = [Code.UNKNOWN_GPU_TYPE.say(gpu_type=name).rstrip(".") for name in job.gpu_type]
    return Code.UNKNOWN_GPU_TYPE, "; ".join(said) + "."


def closed_types(demand: Demand, kinds: tuple[int | None, ...], state,
                 known: dict[tuple[Demand, int | None], tuple[Code, str] | None]
                 ) -> dict[int | None, tuple[Code, str]]:
    """Returns the GPU types of `kinds` (None: no type) where a job R10 let
    through fits only with nodes that take no new pods now, each with the
    code and sentence saying so; empty when it could fit on each as the
    nodes are. `known` keeps each (shape, type)'s answer for the cycle."""
    closed = {}
    for kind in kinds:
        key = (demand, kind)
        if key not in known:
            known[key] = only_unschedulable(demand, kind, state)
        said = known[key]
        if said is not None:
            closed[kind] = said
    return closed


def only_unschedulable(demand: Demand, kind: int | None, state) -> tuple[Code, str] | None:
    """Returns `(code, sentence)` when the job fits the empty cluster's nodes of
    GPU type `kind` (None: all nodes) only with nodes that take no new pods
    now, naming them: a replica no schedulable node could hold, or a gang
    the schedulable nodes could not hold at once. Returns None when the
    schedulable nodes could hold it, when the cluster has no such nodes,
    and when even every node could not (R10 or its other types decide)."""
    if state.open is None:
        return None
    empty = state.empty.part(kind)
    if demand.total[0] and not empty.total[0]:
        return None  # no GPUs of the type at all: judged by its limits (reject_reason)
    room = state.open.part(kind)
    fits = state.open_fits.setdefault(kind, {})
    for _, gpu, cpu, memory in demand.groups:
        replica = (gpu, cpu, memory)
        holds = fits.get(replica)
        if holds is None:
            holds = fits[replica] = any(
                room.gpu[i] >= gpu and room.cpu[i] >= cpu and room.memory[i] >= memory
                for i in room.indices
            )
        if holds:
            continue
        able = [i for i in empty.indices
                if empty.gpu[i] >= gpu and empty.cpu[i] >= cpu and empty.memory[i] >= memory]
        if not able:
            return None
        return Code.UNSCHEDULABLE, Code.UNSCHEDULABLE.say(
            nodes=_nodes_text(state, able, "or"), what=f"a replica of {amounts(replica)}")
    whole = fits.get(demand)
    if whole is None:
        whole = fits[demand] = place(room, demand) is not None
    if whole:
        return None
    placement = place(empty, demand)
    needed = [] if placement is None else [i for i, _ in placement if i in state.unschedulable]
    if not needed:
        return None
    return Code.UNSCHEDULABLE, Code.UNSCHEDULABLE.say(
        nodes="the cluster with " + _nodes_text(state, needed, "and"),
        what=replicas_text(demand.groups) + " at once")


SHOWN = 3  # nodes a sentence names; the rest are counted


def _nodes_text(state, indices: list[int], joiner: str) -> str:
    """Returns the nodes that take no new pods among `indices`, each with why:
    "node-03 (cordoned) or node-04 (tainted maintenance)", past SHOWN "and 5 more"."""
    names = state.empty.names
    parts = [f"{names[i]} ({state.unschedulable[i]})" for i in indices
             if i in state.unschedulable]
    if len(parts) > SHOWN:
        parts = parts[:SHOWN] + [f"{len(parts) - SHOWN} more"]
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + f" {joiner} " + parts[-1]
