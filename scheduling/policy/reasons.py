"""Reason codes and the sentences a person reads: one sentence each, numbers included, naming the limit.

Every code is stable (pages, events and the API key on it) and has exactly one
sentence template; `Code.say(**numbers)` fills it in. Amounts carry units:
GPUs, CPU in cores, memory in GiB.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from .demand import CPU, GPU, MEMORY

GIB = 1 << 30


class Code(StrEnum):
    # Waiting (positions and estimates apply)
    BORROWING_LIMIT = "borrowing_limit"  # R2: own ceiling reached
    NOTHING_TO_BORROW = "nothing_to_borrow"  # R2: pool used up by others
    NOMINAL_ONLY = "nominal_only"  # R2: non-preemptible work stays within nominal
    NO_ROOM = "no_room"  # R1: not enough free in the whole cluster
    FRAGMENTED = "fragmented"  # R1: enough free in total, no set of nodes holds the gang
    HELD = "held"  # R4: the starvation guard holds this job's pool
    RESERVING = "reserving"  # R4: starving, it holds a reservation of room
    RESERVED_ROOM = "reserved_room"  # R4: it would fit only on room reserved for another job
    NO_RESERVATION = "no_reservation"  # R4: starving, but outside usage with no end blocks it
    UNSCHEDULABLE = "unschedulable"  # R10: it fits only with nodes that take no pods now (cordoned)
    # Rejected (R10)
    PER_REPLICA_MAX = "per_replica_max"
    REPLICA_TOO_LARGE = "replica_too_large"
    ABOVE_TEAM_MAX = "above_team_max"
    ABOVE_NOMINAL_STEADY = "above_nominal_steady"
    NEVER_PLACEABLE = "never_placeable"
    UNKNOWN_GPU_TYPE = "unknown_gpu_type"

    @property
    def template(self) -> str:
        return TEMPLATES[self]

    def say(self, **numbers: object) -> str:
        """Returns the sentence of this code with `numbers` filled in."""
        return self.template.format(**numbers)


TEMPLATES: dict[Code, str] = {
    Code.BORROWING_LIMIT: (
        "Waiting for quota: needs {need}; team {team} uses {used} of its {nominal} nominal "
        "and may borrow only {more} more (its borrowing limit is {limit}); it starts when "
        "jobs of the team free {short}.{ahead}"
    ),
    Code.NOTHING_TO_BORROW: (
        "Waiting for quota: needs {need}; team {team} uses {used} of its {nominal} nominal "
        "and {free} in its nominal or idle in other teams; it starts "
        "once that grows by {short}.{ahead}"
    ),
    Code.NOMINAL_ONLY: (
        "Waiting for quota: needs {need} at tier {tier}, which is not preemptible and so "
        "may only use nominal; team {team} already runs {used} of {nominal} nominal at "
        "such tiers."
    ),
    Code.NO_ROOM: (
        "Waiting for room: needs {need} in {replicas}; only {free} free in the cluster."
    ),
    Code.FRAGMENTED: (
        "Waiting for room: needs {need} in {replicas}; {free} free in the cluster, but "
        "no set of nodes has room for every replica at once."
    ),
    Code.HELD: "Held for job {job}, which has waited {waited}.",
    Code.RESERVING: "Reserved {room} from t={start}{when}.",
    Code.RESERVED_ROOM: (
        "Would use {what} reserved for job {job} on {nodes} from t={start}; a max_runtime "
        "of at most {most} s lets it start now."
    ),
    Code.NO_RESERVATION: (
        "Waiting for room: needs {need} in {replicas}; no room can be reserved for it, as "
        "pods Gangway did not create hold {outside} with no expected end."
    ),
    Code.UNSCHEDULABLE: (
        "Waiting for nodes that take no new pods: only {nodes} could hold {what}."
    ),
    Code.PER_REPLICA_MAX: (
        "A replica asks for {asked}; team {team} allows at most {limit} per replica "
        "(per_replica_max)."
    ),
    Code.REPLICA_TOO_LARGE: (
        "A replica asks for {asked}; no node has that much at once (largest node: {largest})."
    ),
    Code.ABOVE_TEAM_MAX: (
        "Requested {need}; team {team} may use at most {most} ({nominal} nominal + "
        "{borrowable} borrowable)."
    ),
    Code.ABOVE_NOMINAL_STEADY: (
        "Requested {need} at tier {tier}, which is not preemptible; team {team} may use "
        "at most its nominal {nominal} at such tiers."
    ),
    Code.NEVER_PLACEABLE: (
        "Requested {need} in {replicas}; even on the empty cluster no set of nodes has "
        "room for every replica at once."
    ),
    Code.UNKNOWN_GPU_TYPE: "{gpu_type}: the cluster has no GPUs of this type.",
}

WAIT_CODES = frozenset(
    {Code.BORROWING_LIMIT, Code.NOTHING_TO_BORROW, Code.NOMINAL_ONLY, Code.NO_ROOM,
     Code.FRAGMENTED, Code.HELD, Code.RESERVING, Code.RESERVED_ROOM, Code.NO_RESERVATION,
     Code.UNSCHEDULABLE}
)


def _number(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def amount(r: int, value: int) -> str:
    """Returns `value` of resource `r` with its unit: "8 GPUs", "2 cores", "4 GiB"."""
    if r == GPU:
        return f"{value} GPU" if value == 1 else f"{value} GPUs"
    if r == CPU:
        cores = _number(value / 1000)
        return f"{cores} core" if cores == "1" else f"{cores} cores"
    return f"{_number(value / GIB)} GiB"


def more_free(r: int, value: int) -> str:
    """Returns how much more of resource `r` is free, verb agreeing: "none is free",
    "only 1 more is free", "only 7 more are free" (GPUs, counted bare as the
    sentence's nominal is), "only 2 more cores are free", "only 4 GiB more is free"."""
    if value <= 0:
        return "none is free"
    if r == GPU:
        return f"only {value} more {'is' if value == 1 else 'are'} free"
    if r == CPU:
        cores = _number(value / 1000)
        return f"only {cores} more core is free" if cores == "1" else f"only {cores} more cores are free"
    return f"only {amount(r, value)} more is free"


def amounts(v: Sequence[int]) -> str:
    """Returns the non-zero parts of `v` with units, "8 GPUs, 16 cores and 64 GiB"."""
    parts = [amount(r, v[r]) for r in (GPU, CPU, MEMORY) if v[r]]
    if not parts:
        return "nothing"
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def replicas_text(groups: tuple[tuple[int, int, int, int], ...]) -> str:
    """Returns the gang as words: "2 replicas of 4 GPUs", groups joined by "and"."""
    parts = []
    for count, gpu, cpu, memory in groups:
        noun = "replica" if count == 1 else "replicas"
        parts.append(f"{count} {noun} of {amounts((gpu, cpu, memory))}")
    return " and ".join(parts) if parts else "no replicas"


def per_type(said: Sequence[tuple[Code, str | None, str]]) -> tuple[Code, str]:
    """Returns the code and sentence of a job's reasons on each of its GPU types, given as (code, type
    name or None, sentence) in the job's order of types: each distinct sentence once, led by the names
    of the types it is about ("l4, a100: A replica asks for 6 GPUs; ..."), so a limit that is the same
    on every type is not read twice. The code is the first type's."""
    if len(said) == 1:
        _, name, sentence = said[0]
        return said[0][0], sentence if name is None else f"{name}: {sentence}"
    names: dict[str, list[str]] = {}
    for _, name, sentence in said:
        names.setdefault(sentence.rstrip("."), []).append(name or "")
    parts = [f"{', '.join(n for n in named if n)}: {sentence}" if any(named) else sentence
             for sentence, named in names.items()]
    return said[0][0], "; ".join(parts) + "."
