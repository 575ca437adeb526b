"""The figures of the jobs a cycle leaves waiting: each one's reason as its owner reads it, its places in the
queue, its estimated start and its reservation (R4), written with the cycle's commit (`loop._commit`).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone as dt_timezone

from jobs.models import Job, JobEvent
from jobs.transitions import noted
from scheduling import records
from scheduling.policy.model import Plan
from scheduling.policy.reasons import Code
from scheduling.refusals import still_held
from scheduling.snapshot import World

ETA_DRIFT = timedelta(seconds=60)  # what an estimated start may move before it is written again
WAIT_FIELDS = ["reason", "reason_code", "position", "team_position", "eta", "reservation"]
PLACE_FIELDS = ("position", "team_position")  # written with every waiting row written: what moves most
# The waits on the team's quota usage (R2), which a job being preempted, or cancelled, that the cluster refuses,
# or fails, to stop still holds (`refusals.still_held`). Not NOMINAL_ONLY: that one counts the team's non-preemptible jobs,
# never a victim.
ON_QUOTA_HELD = frozenset({Code.BORROWING_LIMIT, Code.NOTHING_TO_BORROW})


def record_waits(world: World, plan: Plan, now: datetime) -> tuple[int, int]:
    """Store every waiting job's reason (as its owner reads it), positions, ETA and
    reservation (R4); an event when its reason changes. Returns how many wait, and
    how many of them were written. A job waiting for quota its team's UNSTOPPED job
    still holds is told so after the policy's sentence, its code the policy's.

    Only the rows whose figures changed are written, and only they are locked: a steady queue of
    thousands costs no writes, and a cancel never waits behind a cycle for a row it does not change.
    """
    teams_of = {job_id: job.team.slug for job_id, job in world.jobs.items()}
    reserved = {held.id: held for held in plan.reservations}
    unstopped = still_held(world, now)
    waits: list[tuple[Job, str, str, dict]] = []  # (job, event sentence or "", its code, new figures)
    for wait in plan.wait:
        job = world.jobs[wait.id]
        reason = records.readable_reason(wait.reason, team=job.team.slug, teams_of=teams_of, now=now)
        if wait.code in ON_QUOTA_HELD and job.team.slug in unstopped:
            reason = f"{reason} {unstopped[job.team.slug]}"
        held = reserved.get(wait.id)
        reservation = None if held is None else {
            "start": _moment(held.start).isoformat(), "placement": dict(held.placement), "nodes": list(held.nodes),
        }  # fmt: skip
        says = reason if wait.code != job.reason_code or _moved(job.reservation, reservation) else ""
        waits.append((job, says, wait.code, {
            "reason": reason, "reason_code": wait.code, "position": wait.position,
            "team_position": wait.team_position, "eta": _moment(wait.eta) if wait.eta is not None else None,
            "reservation": reservation,
        }))  # fmt: skip
    for job, held in world.held.values():  # not offered to the policy: tier, sweep cap, claims, object left running
        says = held.reason if held.starts_waiting(job.reason_code) else ""
        waits.append((job, says, held.code, {
            "reason": held.reason, "reason_code": held.code, "position": None, "team_position": None, "eta": None,
            "reservation": None,
        }))  # fmt: skip
    waits = [item for item in waits if item[1] or _changed(item[0], item[3])]
    # Only jobs still queued: one cancelled since the snapshot keeps no position. Their rows are
    # locked to the commit; one a cancel holds is left to the next cycle.
    queued = set(Job.objects.select_for_update(skip_locked=True).filter(
        pk__in=[job.pk for job, *_ in waits], state=Job.State.QUEUED).order_by("pk").values_list("pk", flat=True))
    events, by_fields = [], {}
    for job, says, code, figures in waits:
        if job.pk not in queued:
            continue
        if says:
            events.append(noted(job, JobEvent.Kind.WAITING, says, code=code))
        moved = PLACE_FIELDS + tuple(name for name in WAIT_FIELDS
                                     if name not in PLACE_FIELDS and getattr(job, name) != figures[name])  # fmt: skip
        for name, value in figures.items():
            setattr(job, name, value)
        by_fields.setdefault(moved, []).append(job)
    # One insert for every event, and each row written with its places and the figures that moved:
    # after a submission thousands of rows move one place, and writing all six figures of each, the
    # reason and reservation among them, cost the cycle seconds of building SQL.
    JobEvent.objects.bulk_create(events, batch_size=1000)
    for fields, jobs in by_fields.items():
        Job.objects.bulk_update(jobs, list(fields), batch_size=500)
    return len(plan.wait) + len(world.held), sum(len(jobs) for jobs in by_fields.values())


def _changed(job: Job, figures: dict) -> bool:
    """Whether a waiting job's stored figures differ from `figures`; an estimated start that moved
    by less than ETA_DRIFT is not a change (behind a job past its expected end, it moves with the clock)."""
    for name, value in figures.items():
        stored = getattr(job, name)
        if name == "eta" and stored is not None and value is not None:
            if abs(stored - value) >= ETA_DRIFT:
                return True
        elif stored != value:
            return True
    return False


def _moved(before: dict | None, after: dict | None) -> bool:
    """Whether a reservation kept from cycle to cycle moved to other nodes, which the job's timeline says;
    its start drifting as running jobs' expected ends change is not a move."""
    return bool(before and after) and before.get("placement") != after["placement"]


def _moment(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=dt_timezone.utc)
