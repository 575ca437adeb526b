"""R14: how long a job is expected to run, and so when it is expected to end.

Expected runtimes drive estimated starts (eta.py) and reservations (R4),
never stop a job: only `max_runtime` does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from statistics import median

from .model import Settings

# How many of a group's latest successes make an estimate, and the fewest that do.
ESTIMATE_FROM, ESTIMATE_AT_LEAST = 5, 2


def learned_estimate(latest: Collection[float], default_runtime: int) -> int | None:
    """Returns R14's estimate from the runtimes of a group's latest successes (at most
    ESTIMATE_FROM of them, one group being a team, kind and GPU count): their median,
    capped at `default_runtime`; None when fewer than ESTIMATE_AT_LEAST succeeded."""
    if len(latest) < ESTIMATE_AT_LEAST:
        return None
    return min(default_runtime, int(median(latest)))


def expected_runtime(max_runtime: int | None, estimate: int | None, settings: Settings) -> int:
    """Returns the job's `max_runtime`, else its learned `estimate`, else
    `default_runtime`."""
    return max_runtime or estimate or settings.default_runtime


def expected_end(job, now: int, settings: Settings) -> int | None:
    """Returns when a running job is expected to end: its start plus its
    expected runtime, or `reservation_slack` from now once that is past.

    Returns None for outside usage (R12) that names neither a `max_runtime`
    nor an `estimate`: nothing says it will ever end.
    """
    if job.team is None and not job.max_runtime and not job.estimate:
        return None
    end = job.started + expected_runtime(job.max_runtime, job.estimate, settings)
    return end if end > now else now + settings.reservation_slack


def merge_ends(first: Iterator[tuple], second: list[tuple]) -> Iterator[tuple]:
    """Yields the expected ends of `first` and of `second`, both soonest
    first, merged as `heapq.merge(first, second)` would (on a tie, `first`'s
    before `second`'s), reading `first` only as far as the caller goes.
    Its own generator function: the policy compiled (native.py) runs it
    natively, where `heapq.merge` is interpreted Python."""
    k, size = 0, len(second)
    for item in first:
        while k < size and second[k] < item:
            yield second[k]
            k += 1
        yield item
    while k < size:
        yield second[k]
        k += 1
