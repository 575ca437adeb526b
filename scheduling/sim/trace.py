"""Reading jobs for a replay: a trace CSV, the team sizes, or a synthetic trace.

A trace row is a job: submit time, service time, GPUs and team. Rows that
cannot be replayed (missing fields, unknown team, GPUs not positive, a job
larger than the cluster) are reported with their line number, counted and
skipped; they never stop the replay.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
FIELDS = ("timestamp", "duration", "num_gpus", "cluster")
GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job as submitted: `submit` in seconds from the window's start."""

    id: str
    line: int
    submit: int
    duration: int
    gpus: int
    team: str


@dataclass(frozen=True, slots=True)
class BadRow:
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class Trace:
    """Jobs sorted by submit time (file order on ties), the teams' sizes in
    GPUs, and the rows that were skipped."""

    jobs: tuple[TraceJob, ...]
    teams: tuple[tuple[str, int], ...]
    bad: tuple[BadRow, ...] = ()


class TraceError(ValueError):
    """The file itself cannot be read as a trace (not one bad row)."""


def read_teams(path: str) -> tuple[tuple[str, int], ...]:
    """Returns `(team, GPUs)` from a `vc,node num` CSV of 8-GPU node counts."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except OSError as error:
        raise TraceError(f"--vc: cannot read {path}: {error.strerror}") from error
    teams = []
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        try:
            teams.append((row[0].strip(), int(row[1]) * GPUS_PER_NODE))
        except (IndexError, ValueError) as error:
            raise TraceError(f"{path}:{line}: expected 'team,nodes', got {row!r}") from error
    if not teams:
        raise TraceError(f"{path}: no teams")
    return tuple(teams)


_EPOCH = datetime(2000, 1, 1)


def _parse_time(text: str) -> int:
    """Returns seconds since 2000-01-01 of a naive timestamp (no time zone, no DST)."""
    return int((datetime.strptime(text.strip(), TIME_FORMAT) - _EPOCH).total_seconds())


def read_trace(
    path: str,
    teams: tuple[tuple[str, int], ...],
    *,
    load: float = 1.0,
    start: str | None = None,
    until: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> Trace:
    """Returns the jobs of a trace CSV submitted in `[start, until]`.

    Submit times are measured from `start` (default: the earliest submit in the
    window), divided by `load` and rounded down. `columns` maps our field names
    (`timestamp`, `duration`, `num_gpus`, `cluster`) to the file's headers.
    """
    names = {field: (columns or {}).get(field, field) for field in FIELDS}
    first = _parse_time(start) if start else None
    last = _parse_time(until) if until else None
    sizes = dict(teams)
    capacity = sum(sizes.values())
    raw: list[tuple[int, int, int, int, str]] = []
    bad: list[BadRow] = []
    try:
        handle = open(path, newline="", encoding="utf-8")
    except OSError as error:
        raise TraceError(f"--trace: cannot read {path}: {error.strerror}") from error
    with handle:
        reader = csv.DictReader(handle)
        missing = [names[f] for f in FIELDS if names[f] not in (reader.fieldnames or ())]
        if missing:
            raise TraceError(f"{path}: missing columns {', '.join(missing)} "
                             f"(map them with --columns field=header)")
        for row in reader:
            line = reader.line_num
            if not any((value or "").strip() for value in row.values()):
                continue
            parsed = _parse_row(row, names, sizes, capacity)
            if isinstance(parsed, str):
                bad.append(BadRow(line, parsed))
                continue
            submit, duration, gpus, team = parsed
            if (first is not None and submit < first) or (last is not None and submit > last):
                continue
            raw.append((submit, line, duration, gpus, team))
    return Trace(_compress(raw, first, load), teams, tuple(bad))


def _parse_row(row, names, sizes, capacity) -> tuple[int, int, int, str] | str:
    """Returns `(submit, duration, gpus, team)`, or why the row is skipped."""
    values = {}
    for field in FIELDS:
        value = (row.get(names[field]) or "").strip()
        if not value:
            return f"missing {names[field]}"
        values[field] = value
    try:
        submit = _parse_time(values["timestamp"])
    except ValueError:
        return f"bad timestamp {values['timestamp']!r}"
    try:
        duration = round(float(values["duration"]))
        gpus = round(float(values["num_gpus"]))
    except ValueError:
        return "duration and num_gpus must be numbers"
    team = values["cluster"]
    if team not in sizes:
        return f"unknown team {team!r}"
    if gpus <= 0:
        return f"GPUs must be positive, got {gpus}"
    if gpus > capacity:
        return f"{gpus} GPUs is larger than the cluster ({capacity} GPUs)"
    if duration < 0:
        return f"negative duration {duration}"
    return submit, max(duration, 1), gpus, team


def _compress(raw, first, load) -> tuple[TraceJob, ...]:
    if not raw:
        return ()
    raw.sort(key=lambda r: (r[0], r[1]))
    origin = first if first is not None else raw[0][0]
    return tuple(
        TraceJob(f"L{line}", line, int((submit - origin) // load), duration, gpus, team)
        for submit, line, duration, gpus, team in raw
    )


def synthetic_teams(nodes: int, count: int) -> tuple[tuple[str, int], ...]:
    """Returns `count` teams sharing `nodes` nodes of 8 GPUs, sized as shared
    clusters' teams are, a few large and many small: team k (from 0) gets a
    share of the nodes in proportion to 1 / (k + 1), in whole nodes, at
    least one each (largest remainders take the nodes left). Sizes in GPUs."""
    if count < 1 or nodes < count:
        raise TraceError(f"{count} teams need at least as many nodes, got {nodes}")
    weights = [1 / (k + 1) for k in range(count)]
    spare = nodes - count  # one node each first
    exact = [spare * w / sum(weights) for w in weights]
    sizes = [1 + int(x) for x in exact]
    by_remainder = sorted(range(count), key=lambda k: (int(exact[k]) - exact[k], k))
    for k in by_remainder[:nodes - sum(sizes)]:
        sizes[k] += 1
    width = len(str(count - 1))
    return tuple((f"t{k:0{width}d}", size * GPUS_PER_NODE) for k, size in enumerate(sizes))


def synthetic(count: int, seed: int, teams: Iterable[tuple[str, int]] | None = None,
              *, load: float = 1.0, span: int = 86400) -> Trace:
    """Returns a Philly-like trace of `count` jobs over `span` seconds.

    Mostly 1-GPU jobs with a long tail of durations and a few multi-node
    gangs, so every policy has something to decide. Seeded: same seed, same
    trace.
    """
    teams = tuple(teams or (("a", 32), ("b", 16), ("c", 16)))
    rng = random.Random(seed)
    names = [t for t, _ in teams]
    weights = [size for _, size in teams]
    shapes = (1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 16)
    raw = []
    for k in range(count):
        submit = rng.randrange(span)
        duration = max(1, int(rng.lognormvariate(7.0, 1.5)))
        raw.append((submit, k + 2, duration, rng.choice(shapes), rng.choices(names, weights)[0]))
    capacity = sum(weights)
    raw = [r for r in raw if r[3] <= capacity]
    return Trace(_compress(raw, 0, load), teams)
