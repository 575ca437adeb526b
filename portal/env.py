"""Reading settings from environment variables, failing loudly on bad values.

Every reader raises ImproperlyConfigured naming the variable and the values it
takes, so a typo in a deployment stops the process at start-up instead of
surfacing later as odd behaviour.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def text(name: str, default: str | None = None) -> str:
    """The variable's value, or the content of the file named by NAME_FILE.

    Returns `default` when neither is set; raises when there is no default.
    """
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as error:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {file_name!r}: {error.strerror}") from error
    value = os.environ.get(name)
    if value is not None:
        return value
    if default is None:
        raise ImproperlyConfigured(f"{name} must be set.")
    return default


def flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1/true/yes/on or 0/false/no/off, got {raw!r}.")


def integer(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}.")
    return value


def number(name: str, default: float) -> float:
    """A number, whole or not (`0.5`); its range is the caller's to check. Returns `default` when unset."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}.") from None


def choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}.")
    return value


def items(name: str, default: str) -> list[str]:
    """A comma-separated list, blanks dropped."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]
