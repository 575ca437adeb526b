"""Small worlds and hand-written traces for replay tests (no database)."""

from __future__ import annotations

from scheduling.sim import Trace, TraceJob, build_world
from scheduling.sim.world import EXPERIMENT, PRODUCTION, STANDARD

TIERS = {"production": PRODUCTION, "standard": STANDARD, "experiment": EXPERIMENT}


def trace(teams, *jobs) -> Trace:
    """Returns a trace of `(submit, duration, gpus, team)` jobs, ids j1, j2, ..."""
    return Trace(tuple(TraceJob(f"j{k}", k, submit, duration, gpus, team)
                       for k, (submit, duration, gpus, team) in enumerate(jobs, start=1)),
                 tuple(teams))


def world(tr: Trace, tiers: dict[str, str] | None = None, default: str = "standard"):
    """Returns the world of `tr` with tiers chosen by job id (default: standard)."""
    built = build_world(tr, seed=0)
    chosen = {job.id: TIERS[(tiers or {}).get(job.id, default)] for job in tr.jobs}
    return type(built)(built.nodes, built.teams, built.tiers, chosen, built.nominal)


def ends(outcome) -> dict[int, tuple[int, int]]:
    """Returns `{submit: (end, queue)}` of the finished jobs (submits are unique in tests)."""
    return {r.submit: (r.end, r.queue) for r in outcome.records}
