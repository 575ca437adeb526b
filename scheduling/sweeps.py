"""Katib sweeps within their cap: which pending trials the policy is offered, and why the others wait.

A sweep's trials may hold at most its team's sweep GPU cap at once (`Team.sweep_gpu_cap`, read as
the snapshot is built, so a change applies at the next cycle), so an experiment that starts
twenty trials cannot take the cluster. The cap is kept where the loop builds the snapshot: in
R3 order (tier value, high first; queue time; id), a pending trial is offered to the policy only
while the GPUs its sweep holds (trials admitted, running or still stopping) plus those of the
trials already offered stay within the cap. The policy may admit fewer of them, never more, so
the cap holds whatever it decides. The others wait, with a reason of their own.

A trial held by the cap stays in one wait while the numbers in its reason change: its sweep at
the cap, or its trials ahead filling it, alternate as the sweep's trials end and start. Its
timeline says so once (`CAP_WAITS`), not at every turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from jobs.models import Job
from scheduling.held import Held

# The states whose trials count against their sweep's cap: they hold GPUs, or will until they stop (so do trials
# left running, `snapshot._left_running`, whatever their state).
HOLDING = Job.ACTIVE_STATES + Job.STOPPING_STATES


class SweepCode(StrEnum):
    """Reason codes of trials held back by their sweep's cap (the policy's codes are in `policy.reasons`)."""

    SWEEP_CAP = "sweep_cap"  # the sweep holds its cap: the trial starts when one of its trials ends
    SWEEP_CAP_AHEAD = "sweep_cap_ahead"  # what it holds and its trials ahead in the queue ask fill the cap
    SWEEP_CAP_TOO_SMALL = "sweep_cap_too_small"  # the trial alone asks more than the cap

    def say(self, **numbers: object) -> str:
        """Returns the sentence of this code with `numbers` filled in."""
        return TEMPLATES[self].format(**numbers)


TEMPLATES: dict[SweepCode, str] = {
    SweepCode.SWEEP_CAP: (
        "Sweep {sweep} holds {held} of its {cap} GPUs; this trial starts when one of its trials ends."
    ),
    SweepCode.SWEEP_CAP_AHEAD: (
        "Sweep {sweep} holds {held} of its {cap} GPUs and its trials ahead of this one ask {ahead} more; "
        "this trial waits until its sweep has {need} GPUs to spare."
    ),
    SweepCode.SWEEP_CAP_TOO_SMALL: (
        "This trial asks {need} GPUs, more than the {cap} GPUs sweep {sweep} may hold at once "
        "(team {team}'s sweep GPU cap); staff can raise it on the team's page in the admin."
    ),
}


# The codes of one wait on the cap: a trial moving between them gets no new waiting event (`Held.alike`).
CAP_WAITS = frozenset({SweepCode.SWEEP_CAP, SweepCode.SWEEP_CAP_AHEAD})


def r3_key(job: Job) -> tuple:
    """R3's order of pending jobs: tier value (high first), queue time (old first), id."""
    return (-job.tier.value, job.queued_at, job.pk)


def within_caps(pending: Iterable[Job], holding: Iterable[Job]) -> dict[int, Held]:
    """Returns the pending trials held back by their sweep's cap, by job id; every other job is offered.

    `holding` are the jobs in HOLDING states (trials among them count against their sweep). Jobs of
    no sweep are never held. A sweep's cap is its team's sweep GPU cap, read from each pending
    trial's team (a sweep's trials are its team's jobs). Within a sweep, trials are offered in R3
    order until the next would take the sweep past its cap; that one and every later one wait, so
    a large trial is not overtaken by the small ones behind it.
    """
    held_gpus: dict[int, int] = {}
    for job in holding:
        if job.sweep_id is not None:
            held_gpus[job.sweep_id] = held_gpus.get(job.sweep_id, 0) + job.gpu_total
    offered: dict[int, int] = {}  # sweep id -> GPUs of its trials offered so far this cycle
    result: dict[int, Held] = {}
    full: set[int] = set()
    for job in sorted((job for job in pending if job.sweep_id is not None), key=r3_key):
        sweep, cap = job.sweep, job.team.sweep_gpu_cap
        held, ahead = held_gpus.get(sweep.pk, 0), offered.get(sweep.pk, 0)
        if job.gpu_total > cap:
            reason = SweepCode.SWEEP_CAP_TOO_SMALL.say(need=job.gpu_total, cap=cap, sweep=sweep.experiment,
                                                       team=job.team.slug)  # fmt: skip
            result[job.pk] = Held(reason, SweepCode.SWEEP_CAP_TOO_SMALL)
        elif sweep.pk in full or held + ahead + job.gpu_total > cap:
            full.add(sweep.pk)
            result[job.pk] = _held(sweep.experiment, cap=cap, held=held, ahead=ahead, need=job.gpu_total)
        else:
            offered[sweep.pk] = ahead + job.gpu_total
    return result


def _held(sweep: str, *, cap: int, held: int, ahead: int, need: int) -> Held:
    """Why a trial waits for its sweep's cap: what the sweep holds, and what its trials ahead ask."""
    if not ahead:
        return Held(SweepCode.SWEEP_CAP.say(sweep=sweep, held=held, cap=cap), SweepCode.SWEEP_CAP, alike=CAP_WAITS)
    return Held(SweepCode.SWEEP_CAP_AHEAD.say(sweep=sweep, held=held, cap=cap, ahead=ahead, need=need),
                SweepCode.SWEEP_CAP_AHEAD, alike=CAP_WAITS)  # fmt: skip
