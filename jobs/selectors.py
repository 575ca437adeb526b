"""Reads on jobs, scoped to what a user may see. Pages and the API both use these."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connections
from django.db.models import Case, Count, Exists, F, OuterRef, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Coalesce
from django.http import Http404

from jobs.models import Job, JobEvent, Sweep
from tenants.models import Team
from tenants.permissions import is_admin


def jobs_for(user) -> QuerySet[Job]:
    """The jobs a user may see: every job for staff, else their teams' jobs."""
    jobs = Job.objects.select_related("team", "tier", "owner")
    if is_admin(user):
        return jobs
    return jobs.filter(team__memberships__user=user)


def jobs_of_team(team) -> QuerySet[Job]:
    """Every job of one team: what a team's API token sees."""
    return Job.objects.select_related("team", "tier", "owner").filter(team=team)


def ids_of(teams: QuerySet[Team]) -> list[int]:
    """The ids of `teams`, read now (one small query), to keep a person's jobs to them.

    Who may see which jobs stays with the reader the jobs came from (`jobs_for`). Named by id, one
    team lets PostgreSQL page its jobs newest first from its index (`job_team_newest`), where
    through a join to the memberships it reads and sorts every job of the team; several teams are
    paged by `NewestOfTeams`.
    """
    return list(teams.values_list("pk", flat=True))


NEWEST_FIRST = ("-submitted_at", "-id")
MERGED_MOST = 20_000  # rows a merged page may read (teams x the page's end); past it, one sort of them all


class NewestOfTeams:
    """Jobs of several teams newest first, as a paginator reads them: `count()` and a page by slice.

    A page ending at row n is found among each team's n newest jobs, each team's read from its
    index (`job_team_newest`) by their times and ids alone: PostgreSQL merges them as they come
    (Merge Append) and stops at the page's end. Then the page's jobs are read whole by id. Where
    `team_id IN (...)` reads and sorts every job of the teams: staff's list of 100,000 jobs in 100
    teams took 350 ms in the database, the merge 12 ms (`bench.pages_bench --jobs 100000`). Pages
    so deep that the teams' n newest jobs would pass `MERGED_MOST` rows are read the plain way.
    """

    ordered = True  # for the paginator: the order is NEWEST_FIRST

    def __init__(self, jobs: QuerySet[Job], team_ids: list[int]):
        self.jobs, self.team_ids = jobs.filter(team_id__in=team_ids), team_ids
        self.of_team = jobs.order_by(*NEWEST_FIRST).values_list("submitted_at", "id")  # a branch: one team's, by time

    def count(self) -> int:
        return self.jobs.count()

    def __getitem__(self, page: slice) -> QuerySet[Job]:
        # SQLite (the demo's) takes no LIMIT in a UNION's parts: it sorts them all, as it would anyway.
        merges = connections[self.jobs.db].features.supports_slicing_ordering_in_compound
        if not merges or not page.stop or page.stop * len(self.team_ids) > MERGED_MOST:  # 0: the empty first page
            return self.jobs.order_by(*NEWEST_FIRST)[page]
        first, *others = (self.of_team.filter(team_id=team)[: page.stop] for team in self.team_ids)
        ids = [pk for _, pk in first.union(*others, all=True).order_by(*NEWEST_FIRST)[page]]
        return self.jobs.filter(pk__in=ids).order_by(*NEWEST_FIRST)


def get_job_for_user(user, job_id: int) -> Job:
    """The job, or Http404 when it does not exist or belongs to a team the user is not in.

    Another team's job answers 404, never 403: its existence is not revealed.
    """
    job = jobs_for(user).filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    return job


TIMELINE_LATEST = 50  # the events a job page shows unless asked for the whole timeline


@dataclass(frozen=True)
class Timeline:
    """The events a job page shows, oldest first, and how many of the job's events it leaves out."""

    events: list[JobEvent]
    earlier: int  # events older than the first shown, not shown

    @property
    def total(self) -> int:
        return len(self.events) + self.earlier


def timeline_of(job: Job, *, whole: bool = False) -> Timeline:
    """The job's latest `TIMELINE_LATEST` events (or all when `whole`): a job preempted and requeued for
    weeks gathers thousands, and each poll of its page would render them all."""
    events = job.events.select_related("actor")
    if whole:
        return Timeline(list(events), 0)
    latest = list(events.order_by("-at", "-id")[:TIMELINE_LATEST])[::-1]
    earlier = job.events.count() - len(latest) if len(latest) == TIMELINE_LATEST else 0
    return Timeline(latest, earlier)


def ending_event(job: Job) -> JobEvent | None:
    """The event that ended a failed or rejected job, if any."""
    kinds = (JobEvent.Kind.FAILED, JobEvent.Kind.REJECTED)
    return job.events.filter(kind__in=kinds).order_by("-at", "-id").first()


def queue_for(user) -> QuerySet[Job]:
    """Waiting jobs the user may see, in queue order (global position, then R3 order for unranked ones)."""
    return in_queue_order(jobs_for(user))


def in_queue_order(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """The waiting jobs among `jobs`, in queue order."""
    # Jobs not placed by a cycle yet (no position) come last, on SQLite as on PostgreSQL.
    return jobs.filter(state=Job.State.QUEUED).order_by(F("position").asc(nulls_last=True), "-tier__value",
                                                        "queued_at", "id")  # fmt: skip


# Trials of a sweep, by where they stand: holding GPUs (or about to, or still stopping), waiting, ended.
SWEEP_HOLDING = (Job.State.ADMITTED, Job.State.RUNNING, Job.State.PREEMPTING, Job.State.CANCELLING)
SWEEP_OPEN = (*SWEEP_HOLDING, Job.State.QUEUED)  # a sweep with a trial in one of these is open


def sweeps_for(user, *, team=None, open_only: bool = False, open_first: bool = False) -> QuerySet[Sweep]:
    """Katib sweeps the user may see (staff every one, else their teams'), newest first, each with
    `running`, `waiting` and `done` trial counts and `gpus` (GPUs its trials hold, against `gpu_cap`,
    its team's cap; the team's tiers are read with it, for `tier`).

    `open_only` keeps the sweeps with a trial running or waiting (the queue shows only those);
    `open_first` puts those before the ended ones, each newest first (the team page shows a few).
    """
    sweeps = Sweep.objects.all()
    if open_only:
        # Before the counts: those of every trial ever run were worked out, then all but a few thrown away.
        sweeps = sweeps.filter(Exists(Job.objects.filter(sweep=OuterRef("pk"), state__in=SWEEP_OPEN)))
    sweeps = sweeps.select_related("team").prefetch_related("team__tiers").annotate(
        running=Count("trials", filter=Q(trials__state__in=SWEEP_HOLDING)),
        waiting=Count("trials", filter=Q(trials__state=Job.State.QUEUED)),
        done=Count("trials", filter=Q(trials__state__in=Job.TERMINAL_STATES)),
        gpus=Coalesce(Sum("trials__gpu_total", filter=Q(trials__state__in=SWEEP_HOLDING)), 0),
    ).order_by("-created_at", "-id")  # fmt: skip
    if not is_admin(user):
        sweeps = sweeps.filter(team__in=user.teams.all())
    if team is not None:
        sweeps = sweeps.filter(team=team)
    if open_first:
        ended = Case(When(Q(running__gt=0) | Q(waiting__gt=0), then=Value(False)), default=Value(True))
        sweeps = sweeps.order_by(ended, "-created_at", "-id")
    return sweeps


def get_sweep_for_user(user, sweep_id: int) -> Sweep:
    """The sweep with its counts (`sweeps_for`), or Http404 when it does not exist or belongs to a team the
    user is not in (another team's sweep answers 404, never 403, as its jobs do)."""
    sweep = sweeps_for(user).filter(pk=sweep_id).first()
    if sweep is None:
        raise Http404("No such sweep.")
    return sweep


def trials_of(user, sweep: Sweep) -> QuerySet[Job]:
    """The trials of `sweep` the user may see: those holding GPUs first, then the waiting ones in queue
    order, then the ended ones, the latest to end first."""
    where = Case(When(state__in=SWEEP_HOLDING, then=Value(0)), When(state=Job.State.QUEUED, then=Value(1)),
                 default=Value(2))  # fmt: skip
    return jobs_for(user).filter(sweep=sweep).order_by(
        where, F("position").asc(nulls_last=True), "-tier__value", F("finished_at").desc(nulls_last=True),
        "queued_at", "id",
    )  # fmt: skip


def best_trial_of(user, sweep: Sweep) -> Job | None:
    """The job of the sweep's best trial as Katib names it (`Sweep.best_trial`, its job's name in the cluster), if
    the user may see it; None when Katib names none, or no job of the sweep has that name."""
    if not sweep.best_trial:
        return None
    return jobs_for(user).filter(sweep=sweep, cluster_name=sweep.best_trial).order_by("-pk").first()


@dataclass(frozen=True)
class SweepWait:
    """Waiting trials of a sweep that wait for one reason: how many, and the first of them in queue order,
    with the sentence the last admission cycle gave it (`Job.reason`, its numbers as that trial saw them)."""

    code: str
    trials: int
    first: int  # the job id of the first of them in queue order
    reason: str


def with_waits(sweeps: list[Sweep]) -> list[Sweep]:
    """Returns `sweeps`, each given `waits`: why its waiting trials wait, one SweepWait per reason code, in
    the queue order of each code's first trial (the first is why its next trial has not started: held by
    the sweep's cap, or offered and waiting for quota or room); empty for a sweep with none waiting.

    Read from the reasons each cycle stores on its jobs, never worked out again here. One query for all
    of `sweeps`, over their waiting trials' ids and reasons.
    """
    waiting = in_queue_order(Job.objects.filter(sweep__in=[sweep.pk for sweep in sweeps]))
    groups: dict[int, dict[str, list]] = {sweep.pk: {} for sweep in sweeps}
    for sweep_id, pk, code, reason in waiting.values_list("sweep_id", "pk", "reason_code", "reason").iterator():
        group = groups[sweep_id].setdefault(code, [0, pk, reason])
        group[0] += 1
    for sweep in sweeps:
        sweep.waits = [SweepWait(code, trials, first, reason)
                       for code, (trials, first, reason) in groups[sweep.pk].items()]  # fmt: skip
    return sweeps


def open_jobs_by_tier(team) -> list[dict]:
    """The team's jobs that have not ended, counted per tier, highest tier first: for each, `tier_name`,
    `tier_value`, `running` and `running_gpus` (admitted, running or stopping), `waiting` and `waiting_gpus` (queued).

    What an outsider reads on the team's page: how much it runs and queues, never which jobs. The open
    states are named, not the ended ones excluded, so the read comes from the (team, state) index and
    costs the team's open jobs, not every job it ever ran.
    """
    queued = Q(state=Job.State.QUEUED)
    return list(
        Job.objects.filter(team=team, state__in=Job.OPEN_STATES)
        .values(tier_name=F("tier__name"), tier_value=F("tier__value"))
        .annotate(running=Count("id", filter=~queued), running_gpus=Coalesce(Sum("gpu_total", filter=~queued), 0),
                  waiting=Count("id", filter=queued), waiting_gpus=Coalesce(Sum("gpu_total", filter=queued), 0))
        .order_by("-tier_value", "tier_name")
    )  # fmt: skip


def open_jobs_naming_gpu_type(name: str) -> list[int]:
    """Returns the ids of the queued or running jobs (any not-yet-ended state) that ask for GPU type
    `name` or were given it; empty when none does. Read in Python over the open jobs, which are
    few, because a JSON list's `contains` lookup is not portable to the demo's SQLite."""
    rows = Job.objects.filter(state__in=Job.OPEN_STATES).values_list("pk", "gpu_type", "assigned_gpu_type")
    return [pk for pk, asked, given in rows.iterator() if given == name or name in (asked or [])]
