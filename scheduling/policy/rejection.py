"""R10: reject at once what can never fit, naming the limit and the numbers.

A job is rejected only for limits that no change of load can lift: a replica
above the team's per-replica limit or larger than any node, a gang the empty
cluster could not hold, or more than the team could ever hold under its quota.
Whatever could fit later waits instead.
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
