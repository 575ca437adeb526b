"""The edges of every input, in one place: ranges of numbers, allowed text, document depth, flag spellings.

Forms, the REST API, the job spec, YAML import and the admin read these, so a
value one path accepts is never one another refuses, and every number accepted
fits the column that stores it. Plain Python: the bottom of the import graph.
"""

from __future__ import annotations

import re
from decimal import Decimal
from itertools import accumulate

# -- Numbers ---------------------------------------------------------------------
INT32_MAX = 2**31 - 1  # PostgreSQL integer: UsageSample's GPU columns, node GPUs, counts

# A team's quota per resource (nominal, borrowing and lending limits): the most anyone may ask for.
# GPUs stay within the 32-bit columns the loop records usage in; CPU (millicores) and memory (bytes)
# within bigint; a sum over a thousand teams fits too, and every amount is exact as a JSON number.
QUOTA_MAX = {"gpu": 1_000_000, "cpu": 10**12, "memory": 2**53}
QUOTA_MAX_SHOWN = {"gpu": "1000000 GPUs", "cpu": "1000000000 cores", "memory": "8Pi"}

# A team's share weight when teams compete for borrowable capacity.
WEIGHT_MIN, WEIGHT_MAX = 0.01, 1000.0

# One replica of a job.
MAX_REPLICAS = 1000
MAX_GPU_PER_REPLICA = 64
MAX_CPU_PER_REPLICA = 1024_000  # millicores
MAX_MEMORY_PER_REPLICA = 16 * 1024**4  # 16 TiB
MAX_RUNTIME = 30 * 86400  # seconds

# -- Documents ---------------------------------------------------------------------
# A job spec nests four deep, a TFJob manifest about fifteen (with a script in a block scalar, a few more):
# 64 leaves room and still keeps the parsers' recursion and their cost small.
MAX_DEPTH = 64
MAX_YAML_BYTES = 256 * 1024

# -- Flags -------------------------------------------------------------------------
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "off"})

_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
PRINTABLE = "text must be printable Unicode."
# A string runs to its closing quote or, unterminated, to the end; possessive, so each is read once (an
# unterminated string full of escaped quotes made a plain pattern retry from every quote: seconds).
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.?)*+(?:"|\Z)', re.DOTALL)
# YAML: quoted scalars and comments may hold brackets that open nothing.
_YAML_SKIP = re.compile(
    r"\"(?:[^\"\\]|\\.?)*+(?:\"|\Z)|'(?:[^']|'')*+(?:'|\Z)|(?:^|(?<=\s))#[^\n]*", re.DOTALL | re.MULTILINE
)
_BRACKET = re.compile(r"[\[\]{}]")


def flag(value: object) -> bool:
    """A true/false value in any usual spelling (true/false, 1/0, yes/no, on/off, any case, or a boolean).

    Raises ValueError with a sentence for anything else, None included: a flag
    that is not clearly on must not be read as off.
    """
    if isinstance(value, bool):
        return value
    word = value.strip().lower() if isinstance(value, str) else None
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    shown = "null" if value is None else repr(value)[:40]
    raise ValueError(f"Must be true or false (also 1/0, yes/no, on/off), got {shown}.")


def text_problem(value: str) -> str:
    """Why `value` cannot be stored ("" when it can): NUL or a lone UTF-16 surrogate, which PostgreSQL refuses."""
    match = _BAD_TEXT.search(value)
    if match is None:
        return ""
    what = "a NUL character" if match.group() == "\x00" else "a lone surrogate (not a character)"
    return f"Contains {what} at position {match.start()}; {PRINTABLE}"


def lone_surrogate_problem(document: object, where: str = "") -> str:
    """Why a parsed document cannot be shown back on a page ("" when it can): a key or a value holds a lone
    surrogate (a JSON or YAML escape such as \\ud800), which no page can encode. Names where, never the text.
    """
    if isinstance(document, str):
        found = _SURROGATE.search(document)
        return f"{where or 'The document'} holds a lone surrogate (not a character); {PRINTABLE}" if found else ""
    if isinstance(document, dict):
        items = [(key, f"{where}.{key}" if where else str(key)) for key in document]
    elif isinstance(document, list):
        items = [(index, f"{where}[{index}]") for index in range(len(document))]
    else:
        return ""
    for key, path in items:
        if isinstance(key, str) and _SURROGATE.search(key):
            return f"A key in {where or 'the document'} holds a lone surrogate (not a character); {PRINTABLE}"
        if problem := lone_surrogate_problem(document[key], path):
            return problem
    return ""


def finite(value: Decimal) -> bool:
    """True for a number; False for NaN and the infinities, which no limit can be compared with."""
    return isinstance(value, Decimal) and value.is_finite()


def json_depth_problem(text: str) -> str:
    """Why a JSON text is refused before parsing ("" when it is not): nested deeper than MAX_DEPTH.

    Counts brackets outside strings, so a deep document costs a regex pass, not a parse.
    """
    return _depth_problem(_JSON_STRING.sub("", text), "JSON")


def yaml_depth_problem(text: str) -> str:
    """Why a YAML text is refused before parsing ("" when it is not): flow or block nesting deeper than MAX_DEPTH.

    Flow nesting ([ and {) is counted outside quoted scalars and comments; block
    nesting as the number of distinct indentations open at once, where a "- "
    sequence entry opens one more. Both overcount rather than undercount, and a
    real manifest stays far below the limit.
    """
    problem = _depth_problem(_YAML_SKIP.sub("", text), "YAML")
    if problem:
        return problem
    open_indents: list[int] = []
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        while open_indents and open_indents[-1] >= indent:
            open_indents.pop()
        open_indents.append(indent)
        dashes = len(re.match(r"(?:-[ \t]+)*", stripped).group().split("-")) - 1
        if len(open_indents) + dashes > MAX_DEPTH:
            return f"The YAML nests deeper than {MAX_DEPTH} levels; a job spec or manifest needs about fifteen."
    return ""


def _depth_problem(text: str, what: str) -> str:
    brackets = _BRACKET.findall(text)
    if brackets and max(accumulate(1 if c in "[{" else -1 for c in brackets)) > MAX_DEPTH:
        return f"The {what} nests deeper than {MAX_DEPTH} levels; a job spec or manifest needs about fifteen."
    return ""


def quota_problem(resource: str, amount: object) -> str:
    """Why `amount` cannot be a quota (nominal or limit) of `resource` ("" when it can; None is no limit)."""
    if amount is None:
        return ""
    high = QUOTA_MAX[resource]
    if isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount <= high:
        return f"Must be a whole amount from 0 to {high} ({QUOTA_MAX_SHOWN[resource]}), got {amount!r}."
    return ""


def weight_problem(weight: object) -> str:
    """Why `weight` cannot be a team's share weight ("" when it can)."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not WEIGHT_MIN <= weight <= WEIGHT_MAX:
        return f"Must be a number from {WEIGHT_MIN} to {WEIGHT_MAX:g}, got {weight!r}."
    return ""
