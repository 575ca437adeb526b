"""Kubernetes quantities, read and written in one place: CPU in millicores, memory in bytes.

Gangway stores integers; people, manifests and the API server speak quantities
("2", "500m", "4Gi", "1.5e3"). The grammar is Kubernetes' own: an optionally
signed decimal number in ASCII digits, then a binary suffix (Ki, Mi, Gi, Ti, Pi, Ei), a decimal
one (n, u, m, k, M, G, T, P, E) or an exponent (e3, E-2). JSON and YAML numbers
are read as numbers. NaN, infinities, exponents too large to hold and anything
else are refused with `NotFinite`, `TooLarge` or `NotAQuantity`, all ValueErrors.
"""

from __future__ import annotations

import re
from decimal import Context, Decimal, localcontext

BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Digits are ASCII only, as Kubernetes' own parser has them ("٣" is not three).
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
# The exponent is tried before the suffix E (exa): "1E3" is a thousand, "1E" an exa.
_SUFFIX = r"(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE]?)"
_QUANTITY = re.compile(f"([+-]?{_NUMBER})({_SUFFIX})")
# The grammar as a JSON Schema pattern, for the API's schema: a quantity with no minus sign, as every
# field takes (a negative one parses, and the field refuses it). How large, and how fine, is the field's.
QUANTITY_PATTERN = f"^\\+?{_NUMBER}{_SUFFIX}$"
# Enough digits that no quantity a person writes is rounded on its way to millicores or bytes.
_EXACT = Context(prec=200)
# The largest power of ten `Decimal.scaleb` takes in that context.
_EXPONENT_BOUND = 2 * (_EXACT.Emax + _EXACT.prec)
# Suffixes for writing memory, largest first.
_MEMORY_SUFFIXES = tuple(sorted(BINARY.items(), key=lambda item: -item[1]))


class NotAQuantity(ValueError):
    """The value is not a Kubernetes quantity at all."""


class NotFinite(ValueError):
    """The value is a number, but NaN or infinite."""


class TooLarge(ValueError):
    """The value is a quantity, but its exponent is beyond what can be held ("1e9999999")."""


def parse_quantity(value: object) -> Decimal:
    """Returns the exact value of a quantity (a string, or a JSON/YAML number) as a Decimal.

    Raises NotAQuantity for anything that does not follow the grammar (a
    bool, an empty or padded string, "lots", "4K", "1_000"), NotFinite for
    NaN and infinities, and TooLarge for an exponent beyond what can be held.
    Negative values parse: callers bound their ranges.
    """
    if isinstance(value, bool):
        raise NotAQuantity(f"Not a quantity: {value!r}.")
    if isinstance(value, (int, float, Decimal)):
        number = Decimal(value)
        if not number.is_finite():
            raise NotFinite(f"Not a finite number: {value!r}.")
        return number
    if not isinstance(value, str):
        raise NotAQuantity(f"Not a quantity: {value!r}.")
    if value.lstrip("+-").lower() in ("nan", "inf", "infinity", "snan"):
        raise NotFinite(f"Not a finite number: {value!r}.")
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise NotAQuantity(f"Not a quantity: {value!r}.")
    number, suffix = match.groups()
    try:
        with localcontext(_EXACT):
            mantissa = Decimal(number)
            if suffix in BINARY:
                return mantissa * 1024 ** BINARY[suffix]
            return mantissa.scaleb(_exponent(suffix))
    except ArithmeticError:  # an exponent beyond what a Decimal holds
        raise TooLarge(f"Too large to hold: {value!r}.") from None


def _exponent(suffix: str) -> int:
    """The power of ten of a decimal suffix or an exponent, held within what `Decimal.scaleb` takes: a larger
    one overflows (TooLarge), a smaller one ends at zero, and thousands of digits are never read."""
    if suffix[:1] not in ("e", "E") or len(suffix) == 1:
        return DECIMAL[suffix]
    digits = suffix.lstrip("eE+-")
    exponent = int(digits) if len(digits) <= len(str(_EXPONENT_BOUND)) else _EXPONENT_BOUND
    return min(exponent, _EXPONENT_BOUND) * (-1 if suffix[1] == "-" else 1)


def cpu_millicores(value: object) -> Decimal:
    """Returns a CPU quantity in millicores, exactly ("500m" -> 500, "2" -> 2000, "0.1" -> 100)."""
    number = parse_quantity(value)
    try:
        with localcontext(_EXACT):
            return number.scaleb(3)
    except ArithmeticError:  # a thousand times the largest Decimal
        raise TooLarge(f"Too large to hold: {value!r}.") from None


def memory_bytes(value: object) -> Decimal:
    """Returns a memory quantity in bytes, exactly ("4Gi" -> 4294967296, "1e3" -> 1000)."""
    return parse_quantity(value)


# Gangway's units for each resource, from a quantity: GPUs count cards.
IN_UNITS = {"gpu": parse_quantity, "cpu": cpu_millicores, "memory": memory_bytes}


def format_cpu(millicores: int) -> str:
    """Returns millicores as a quantity: 2000 -> "2", 500 -> "500m"."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def format_memory(size: int) -> str:
    """Returns bytes as the largest binary quantity that is exact: 4294967296 -> "4Gi",
    1536 -> "1536" (not a whole number of Ki)."""
    for suffix, power in _MEMORY_SUFFIXES:
        factor = 1024**power
        if size and size % factor == 0:
            return f"{size // factor}{suffix}"
    return str(size)


def format_quantity(resource: str, amount: int) -> str:
    """Returns an amount of a Gangway resource (gpu cards, cpu millicores, memory bytes) as a quantity."""
    if resource == "cpu":
        return format_cpu(amount)
    if resource == "memory":
        return format_memory(amount)
    return str(amount)


def memory_text(size: int) -> str:
    """Returns bytes for people, in the largest binary unit it reaches: 4294967296 -> "4 GiB",
    1610612736 -> "1.5 GiB", 512 -> "512 B"."""
    for suffix, power in _MEMORY_SUFFIXES:
        if power >= 2 and size >= 1024**power:
            return f"{size / 1024**power:g} {suffix}B"
    return f"{size} B"
