"""Spans of time as people read them, the same in reasons, pages and the CLI."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """Returns `seconds` rounded to its largest useful unit: "45 s", "32 min", "2 h 5 min",
    "3 d". Seconds under a minute, minutes under an hour, hours and minutes under two
    days, days beyond; a negative span reads as "0 s"."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{round(hours / 24 + minutes / 1440)} d"
