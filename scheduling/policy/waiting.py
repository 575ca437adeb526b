"""The sentences of waiting jobs (STYLE "Messages"): why a job waits on
each of its GPU types, and what a reservation holds.

Every sentence names the rule's numbers; on a cluster with GPU types each
is led by its type's name ("a100: ...") and a job's types are joined by
"; ", in the order it tries them.
"""

from __future__ import annotations

from .demand import Demand
from .model import PendingJob
from .placement import place, usage_on_nodes
from .quota import Refusal
from .reasons import Code, amount, amounts, more_free, per_type, replicas_text
from .reservation import Hold, Holds
from .state import State


def type_name(state: State, kind: int | None) -> str | None:
    """Returns the name of GPU type `kind`, None for no type."""
    if kind is None:
        return None
    assert state.types is not None  # a type index comes only from a cluster with types
    return state.types.names[kind]


def typed(name: str | None, sentence: str) -> str:
    """Returns a sentence about one GPU type, led by its name ("a100: ...")."""
    return sentence if name is None else f"{name}: {sentence}"


def why_waiting(job: PendingJob, demand: Demand, kinds, refusals, state: State,
                holds: Holds, kept_off: dict, now: int,
                held: dict | None = None, ahead: QuotaQueue | None = None) -> tuple[Code, str]:
    """Returns the code and sentence for a job that fits no type, naming each
    type ("a100: ...; h100: ..."); the code is its first type's.

    `held` maps the types closed to the job to their code and sentence: a
    starving job holds them for the job's team (R4), or only nodes that
    take no new pods could hold it there (R10); `refusals` are R2's answers on the
    job's other types, in order. `ahead` counts the team's earlier jobs
    that wait for quota, which the sentence of a quota refusal names, and
    counts this one's refusals in."""
    said = []
    answers = iter(refusals)
    for kind in kinds:
        if held and kind in held:
            code, sentence = held[kind]
            said.append((code, type_name(state, kind), sentence))
            continue
        state.select(kind)
        refusal = next(answers)
        code, reason = _why_one(job, demand, refusal, state, holds,
                                kept_off.setdefault(kind, {}), now,
                                ahead.before(job.team, kind, refusal) if ahead else "")
        if ahead is not None:
            ahead.count(job.team, kind, refusal)
        said.append((code, type_name(state, kind), reason))
    return per_type(said)


def reserving(hold: Hold, demand: Demand, state: State) -> str:
    """Returns the sentence of a job holding a reservation."""
    names = state.room.names
    parts = []
    for k, (i, v) in enumerate(sorted(hold.on_nodes.items())):
        if demand.total[0]:
            text = amount(0, v[0]) if k == 0 else str(v[0])
        else:
            text = amounts(v)
        parts.append(f"{text} on {names[i]}")
    when = ""
    if hold.ending:
        shown = list(hold.ending[:3])
        if len(hold.ending) > 3:
            shown.append(f"{len(hold.ending) - 3} more")
        jobs = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
        noun, verb = ("job", "is") if len(hold.ending) == 1 else ("jobs", "are")
        when = f", when {noun} {jobs} {verb} due to end"
    return Code.RESERVING.say(room=_joined(parts), start=hold.start, when=when)


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


class QuotaQueue:
    """The jobs of each team, type and resource that wait because R2 refused
    them, counted in admission order: a job refused for quota is told how
    many of its team's jobs before it wait for quota too, and for how much,
    since freeing its own shortfall serves them first."""

    COUNTED = (Code.BORROWING_LIMIT, Code.NOTHING_TO_BORROW)

    def __init__(self) -> None:
        self.waiting: dict[tuple[str, int | None, int], list[int]] = {}  # -> [jobs, amount]

    def count(self, team: str, kind: int | None, refusal: Refusal | None) -> None:
        if refusal is not None and refusal.code in self.COUNTED:
            seen = self.waiting.setdefault((team, kind, refusal.resource), [0, 0])
            seen[0] += 1
            seen[1] += refusal.need

    def before(self, team: str, kind: int | None, refusal: Refusal | None) -> str:
        """Returns the words on the team's jobs ahead that wait for quota, or ""."""
        if refusal is None or refusal.code not in self.COUNTED:
            return ""
        seen = self.waiting.get((team, kind, refusal.resource))
        if seen is None:
            return ""
        jobs, need = seen
        noun, verb = ("job", "waits") if jobs == 1 else ("jobs", "wait")
        return f" {jobs} earlier {noun} of the team {verb} for quota too ({amount(refusal.resource, need)})."


def _why_one(job: PendingJob, demand: Demand, refusal: Refusal | None,
             state: State, holds: Holds, kept_off: dict, now: int,
             ahead: str = "") -> tuple[Code, str]:
    """Returns the code and sentence for a job that neither fits nor preempts;
    `ahead`, the words on the team's earlier jobs waiting for quota."""
    if refusal is None and holds:
        if demand not in kept_off:
            kept_off[demand] = _kept_off(demand, state, holds, now)
        if kept_off[demand] is not None:
            return kept_off[demand]
    if refusal is not None:
        r = refusal.resource
        numbers = dict(need=amount(r, refusal.need), team=job.team,
                       used=_bare(r, refusal.used), nominal=_bare(r, refusal.nominal))
        if refusal.code is Code.BORROWING_LIMIT:
            more = max(0, refusal.limit - max(0, refusal.used - refusal.nominal))
            return refusal.code, refusal.code.say(
                more=_bare(r, more), limit=_bare(r, refusal.limit),
                short=amount(r, max(0, refusal.need - more - max(0, refusal.nominal - refusal.used))),
                ahead=ahead, **numbers)
        if refusal.code is Code.NOMINAL_ONLY:
            return refusal.code, refusal.code.say(tier=job.tier, **numbers)
        return refusal.code, refusal.code.say(
            free=more_free(r, refusal.limit), short=amount(r, max(0, refusal.need - refusal.limit)),
            ahead=ahead, **numbers)
    total = state.room.total
    free = tuple(max(0, x) for x in total)
    short = [r for r in range(3) if demand.total[r] > free[r]]
    words = dict(need=amounts(demand.total), replicas=replicas_text(demand.groups))
    if short:
        return Code.NO_ROOM, Code.NO_ROOM.say(free=amount(short[0], free[short[0]]), **words)
    shown = tuple(free[r] if demand.total[r] else 0 for r in range(3))
    return Code.FRAGMENTED, Code.FRAGMENTED.say(free=amounts(shown), **words)


def _kept_off(demand: Demand, state: State, holds: Holds, now: int) -> tuple[Code, str] | None:
    """Returns why a job that would fit on reserved room waits, naming the
    reservation and the max_runtime that would let it start now; None when
    it would not fit even there."""
    restore = holds.lifted()
    placement = place(state.room, demand)
    restore()
    in_the_way = [] if placement is None else holds.in_the_way(
        usage_on_nodes(demand, placement))
    if not in_the_way:
        return None
    assert placement is not None  # holds are in the way only of a placement
    first = min(in_the_way, key=lambda h: h.start)
    names = state.room.names
    nodes = [names[i] for i, _ in placement if i in first.headroom]
    return Code.RESERVED_ROOM, Code.RESERVED_ROOM.say(
        what="GPUs" if demand.total[0] else "room", job=first.id, nodes=_joined(nodes),
        start=first.start, most=first.start - now)


def _bare(r: int, value: int) -> str:
    """Returns a GPU count bare ("6 of 8 nominal"), other amounts with units."""
    return str(value) if r == 0 else amount(r, value)
