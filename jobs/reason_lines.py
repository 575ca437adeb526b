"""A waiting reason as the pages lay it out: what it says of every GPU type once, then a line per type.

The policy says why a job waits on each of its GPU types in one sentence: each type's part led by
the type's name, the parts joined by "; " in the order the job tries its types, and a part the same
on several types said once, led by their names (scheduling/policy/reasons.py, `per_type`). Read in
a table, a job that accepts three types shows three long parts in a row that mostly repeat one
another: "l4: Waiting for quota: needs 8 GPUs; team maps uses 2 of its 4 nominal ...; a100: Waiting
for quota: needs 8 GPUs; team maps uses 3 of its 4 nominal ...".

The pages show the clauses every part begins with once ("Waiting for quota: needs 8 GPUs;"), then
one line per type with the rest of its part, then the closing sentences every part ends with once
("1 earlier job of the team waits for quota too (8 GPUs)."). Parts that read the same once the loop
has put them in people's words (two moments in the same minute, two jobs of one other team) are
said once, led by the names of their types. The sentence itself, as the API and the job's events
give it, is left as the loop wrote it: only its layout is the page's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

# Where a part's clauses meet: after its lead's colon ("Waiting for quota: needs ...") and between its
# clauses ("needs 8 GPUs; team maps uses ..."). A clock time's colon ("20:04") has no space after it.
CLAUSE = re.compile(r"(?<=[:;]) ")
# Where a part's sentences meet ("... free 2 GPUs. 1 earlier job of the team ..."); a figure's point
# ("1.5 GiB") has no space after it.
SENTENCE = re.compile(r"(?<=\.) (?=[A-Z0-9])")


@dataclass(frozen=True, slots=True)
class TypeLine:
    """What a reason says of some GPU types: their names ("l4" or "l4, a100") and its words between
    the lead and the tail, ending as the sentence does there: ";" before the next type's part, "."
    after the last."""

    types: str
    text: str


@dataclass(frozen=True, slots=True)
class ReasonLines:
    """A reason about several GPU types: the clauses every type's part begins with (`lead`, ending
    with its ":" or ";"), a line per type or per types said in the same words, and the sentences every
    part ends with (`tail`). The lead and the tail are "" when there are none, and always are when
    there is one line (every type said in the same words)."""

    lead: str
    lines: tuple[TypeLine, ...]
    tail: str = ""


# The start of a reason led by GPU type names (DNS-1123 labels: "l4: ", "l4, a100: "); the policy's own
# sentences begin with a capital ("Waiting for room: ...").
NAMED = re.compile(r"[a-z0-9][-a-z0-9]*(?:, [a-z0-9][-a-z0-9]*)*: ")


def may_name_types(reason: str) -> bool:
    """Whether `reason` may be about several GPU types: led by names, with "; " between its parts. Pages
    read the cluster's types only for such a reason."""
    return bool(NAMED.match(reason)) and "; " in reason


@lru_cache(maxsize=16)
def _type_leads(names: tuple[str, ...]) -> re.Pattern:
    """The pattern of a part's lead: the names of one or more of `names` and a colon, at the start of
    the sentence or after the "; " that joins two parts. The longest name is tried first ("a100-80g"
    before "a100")."""
    one = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?:^|; )((?:{one})(?:, (?:{one}))*): ")


def _shared(pieces: list[list[str]]) -> int:
    """How many first pieces all of `pieces` have in common, leaving each at least one of its own."""
    count = 0
    while all(len(each) > count + 1 for each in pieces) and len({each[count] for each in pieces}) == 1:
        count += 1
    return count


def reason_lines(reason: str, type_names: Iterable[str]) -> ReasonLines | None:
    """Returns `reason` laid out by GPU type, or None when it is about one type, about several in the
    policy's one part ("l4, a100: ..."), or about none: a sentence to show as it is.

    `type_names` are the cluster's GPU types; a reason whose first words are not one of them followed
    by a colon is about no type (a cluster without types, a sweep's cap, a tier not allowed)."""
    names = tuple(name for name in type_names if name)
    if not names or not reason:
        return None
    leads = list(_type_leads(names).finditer(reason))
    if len(leads) < 2 or leads[0].start() != 0:
        return None
    said: dict[str, list[str]] = {}  # a part's words -> the names of the types it is about, in the job's order
    for lead, after in zip(leads, [*leads[1:], None]):
        words = reason[lead.end():after.start() if after else len(reason)].removesuffix(".")  # fmt: skip
        said.setdefault(words, []).append(lead.group(1))
    if len(said) < 2:  # the same words on every type once in people's words: said once
        words, types = next(iter(said.items()))
        return ReasonLines("", (TypeLine(", ".join(types), words + "."),))
    # 1. The closing sentences every part ends with, read backwards from each part's end.
    sentences = [SENTENCE.split(words)[::-1] for words in said]
    ending = _shared(sentences)
    rests = [" ".join(each[ending:][::-1]).removesuffix(".") for each in sentences]
    # 2. The opening clauses every part begins with, in what is left.
    clauses = [CLAUSE.split(rest) for rest in rests]
    opening = _shared(clauses)
    last = len(clauses) - 1
    lines = tuple(TypeLine(", ".join(types), " ".join(each[opening:]) + ("." if n == last else ";"))
                  for n, (types, each) in enumerate(zip(said.values(), clauses)))  # fmt: skip
    tail = " ".join(sentences[0][:ending][::-1]) + "." if ending else ""
    return ReasonLines(" ".join(clauses[0][:opening]), lines, tail)
