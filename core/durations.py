"""Spans of time as people read them, the same in reasons, pages and the CLI."""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta


def duration(seconds: float, *, at_most: bool = False) -> str:
    """Returns `seconds` rounded to its largest useful unit: "45 s", "32 min", "2 h 5 min",
    "3 d". Seconds under a minute, minutes under an hour, hours and minutes under two
    days, days beyond; a negative span reads as "0 s". `at_most` rounds down instead, for
    a bound that must hold as read ("a max_runtime of at most 7 min" when 468 s are left)."""
    whole = math.floor if at_most else _half_up
    seconds = max(0, whole(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = whole(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{whole(hours / 24 + minutes / 1440)} d"


def _half_up(value: float) -> int:
    """Rounds half up, as people do: 150 s is "3 min" (Python's `round` gives 2, to the even)."""
    return math.floor(value + 0.5)


def clock_time(at: datetime, today: date) -> str:
    """Returns an aware time, already in the zone to show, as "about 20:05 UTC": to the nearest
    minute, named by its zone, and with the weekday ("about Sun 08:00 UTC") when not on `today`."""
    at = at + timedelta(seconds=30)
    return f"about {at:%H:%M %Z}" if at.date() == today else f"about {at:%a %H:%M %Z}"
