"""Jobs from elsewhere join the queue: reconcile's first step, level-triggered.

A TFJob or PyTorchJob created with kubectl, by a Katib trial or a Pipelines step, suspended,
in a team namespace, with the label `gangway.io/queue: <team>`, becomes a Gangway job through
the same submission as every other path (the manifest import, then `job_submit`'s validation);
what that refuses is written back onto the object, and listed on its team's page while the object is there
(`record_refused`). Its Katib experiment's trials form a sweep.
Gangway never deletes an adopted object: admission unsuspends it, preemption and cancelling
suspend it, and its deletion in the cluster cancels the Gangway job.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from jobs import origins
from jobs.codes import Because
from jobs.models import Job, JobEvent, Sweep
from jobs.node_selection import NO_TYPE
from jobs.services import NeverFits, job_submit
from jobs.spec import NAME_MAX, SpecError, parse_spec
from jobs.transitions import StaleJob, can_move, note, transition
from jobs.yaml_import import spec_from_manifest
from scheduling.cluster import outside
from scheduling.cluster.base import (Cluster, ClusterError, ExperimentResult, OutsideJob, OutsideJobs,
                                     TrialResult, on_one_object)
from scheduling.handed_back import left_the_queue
from scheduling.models import RefusedOutsideJob
from scheduling.snapshot import replica_defaults, replica_specs
from tenants.models import Team
from tenants.selectors import gpu_types, sweep_tier

log = logging.getLogger("gangway.adoption")

# Katib reports a trial's last objective value around the time its job ends: a sweep whose last
# trial ended this recently is still read, so its best objective counts that trial.
OBJECTIVE_GRACE = timedelta(minutes=10)
# How long a trial's job gone from the cluster waits for its namespace's Trials to be read, to end as its trial
# did: past this (a list refused for good, its experiment deleted with its Trials) it is cancelled as deleted,
# so that neither its sweep stays open nor its GPUs count for ever.
TRIAL_UNREAD_MOST = timedelta(minutes=30)

# How a trial's job that Katib removed once its Trial completed ends in Gangway, by the Trial's
# outcome (`outside.TRIAL_OUTCOMES`): the state, and what its timeline says.
KATIB_ENDINGS: dict[str, tuple[str, str]] = {
    "Succeeded": (Job.State.SUCCEEDED, "Succeeded, as its Katib trial reports"),
    "EarlyStopped": (Job.State.SUCCEEDED, "Early-stopped by Katib: its trial met the experiment's early stopping rules"),
    "MetricsUnavailable": (Job.State.SUCCEEDED, "Succeeded, but the metrics were unavailable: Katib found no "
                                                "objective value for its trial"),
    "Failed": (Job.State.FAILED, "Failed, as its Katib trial reports"),
    "Killed": (Job.State.CANCELLED, "Killed by Katib, which stopped its trial"),
}  # fmt: skip


@dataclass
class Adopted:
    adopted: int = 0
    refused: int = 0
    cancelled: int = 0


def adopt_outside_jobs(*, cluster: Cluster, now: datetime, found: OutsideJobs | None = None) -> Adopted:
    """Adopt, refuse or cancel what the cluster's labelled jobs call for; returns how many of each.

    1. Read every labelled job Gangway did not create, and which kinds the cluster listed: `found`, what
       reconcile's read of this pass found (`JobStatuses.outside`), else read now (ClusterUnavailable goes
       to the caller).
    2. A Gangway job of a listed kind whose adopted object is not among them was deleted by its
       owner: cancel it (a Katib trial's job that Katib removed once the trial completed ends as
       its Trial reports). A kind whose list failed says nothing of its jobs: none is judged gone.
    3. A labelled job already adopted gets its `gangway.io/job-id` label again if it lost it
       (the label joins its pods to the job), and the reason written back if a cycle rejected it.
    4. A new one, suspended, in a team namespace, not refused before and not finished: adopt it,
       or refuse it with the reason written back. One not suspended skipped the queue: it is
       never touched (its pods count as outside usage, R12, and `doctor` reports it).
       A refused job of a kind whose operator keeps it is also marked Failed in its status, at a later
       pass if that mark did not go through, so that its Katib trial or Pipelines step fails instead of
       waiting for ever (`JobKind.keeps_written_failure`); so is one a person cancelled here (3).
    5. The refused ones still in the cluster are what its teams' pages list (`record_refused`).
    6. Sweeps with open trials (or one ended within OBJECTIVE_GRACE) learn their best objective, and, once
       their Katib Experiment has ended, how and when, and its best trial with that trial's metrics.

    Katib's Trials are listed in a team's namespace only, at most once a pass, and only when a step needs
    them there: a trial's job gone (2), a new trial whose labels do not name its experiment (4), a sweep of
    the team to learn of (6). A list the cluster refuses (a missing permission in that namespace) says
    nothing of its trials: a trial's job gone there waits to be judged (TRIAL_UNREAD_MOST at most, then it is
    cancelled as deleted), a new trial's experiment is read from its name, its sweeps learn no objective this
    pass; the other namespaces go on.
    """
    found = found if found is not None else cluster.outside_jobs()
    result = Adopted()
    listed = {job.uid for job in found.jobs}
    # With each, whether it was cancelled because its object left the queue or the cluster (DELETED_OUTSIDE):
    # its owner's again (`given_back`), and never marked as cancelled here.
    known = {uid: (pk, state, reason, left) for uid, pk, state, reason, left in
             Job.objects.filter(cluster_uid__in=listed).annotate(left_queue=left_the_queue())
             .values_list("cluster_uid", "pk", "state", "reason", "left_queue")}  # fmt: skip
    gone = list(Job.objects.filter(state__in=Job.OPEN_STATES, kind__in=found.kinds).exclude(cluster_uid="")
                .exclude(cluster_uid__in=listed).select_related("team"))  # fmt: skip
    trials = cache(lambda namespace: _katib_trials(cluster, namespace))  # one list a pass per namespace

    @cache
    def experiments(namespace: str) -> dict[tuple[str, str], str]:
        return {(trial.namespace, trial.trial): trial.experiment for trial in trials(namespace) or ()}

    @cache
    def outcomes(namespace: str) -> dict[str, str] | None:
        reported = trials(namespace)
        return None if reported is None else {trial.trial: trial.outcome for trial in reported}

    for job in gone:
        if _still_here(cluster, job):
            continue
        # Katib deletes a trial's job once the trial completes: the Trial says how it ended.
        ended = outcomes(job.team.slug) if job.sweep_id else {}
        if ended is None and not _unread_too_long(job, now):
            continue  # how its trial ended is unknown: judged at a pass that reads its namespace's Trials
        result.cancelled += _end_deleted(job, "" if ended is None else ended.get(job.cluster_name, ""), now,
                                         unread=ended is None)  # fmt: skip
    # Tiers read with them: an adoption reads its team's tiers twice (a trial's default, the submission's check).
    teams = {team.slug: team for team in Team.objects.prefetch_related("tiers")}
    refused: dict[str, tuple[OutsideJob, str]] = {}  # uid -> the job refused at this pass, and why
    _reject_changed(found, known, now)
    for item in found.jobs:
        try:
            with on_one_object(cluster):
                _adopt_or_refuse(item, known, teams, cluster, result, experiments, refused)
        except ClusterError as error:
            # The cluster refused a label or an annotation on this one job, or kept failing on it (a webhook of
            # its namespace) while it answered a read: the next pass tries again.
            log.warning("the cluster refused to mark %s %s/%s: %s", item.kind, item.namespace, item.name, error)
    record_refused(found, known, teams, refused, now)
    namespaces = _sweep_namespaces(now)
    reported = [trials(namespace) for namespace in namespaces]
    _learn_objectives([trial for listed_trials in reported if listed_trials is not None for trial in listed_trials])
    _learn_endings([experiment for namespace in namespaces for experiment in _katib_experiments(cluster, namespace)])
    return result


def _still_here(cluster: Cluster, job: Job) -> bool:
    """Whether a job the pass's lists did not show is there all the same, read on its own (true, too, when that
    read fails: judged at a later pass). The lists are two, by the job-id label and by the queue label without
    it: an admission that labels an object between the two (its adoption's label had not gone through) hides
    it from both, and the job would be judged deleted by its owner, its object given back running."""
    try:
        with on_one_object(cluster):
            return cluster.outside_job_here(job.kind, job.team.slug, job.cluster_name, job.cluster_uid)
    except ClusterError as error:
        log.warning("could not read %s %s/%s, missing from this pass's lists: %s", job.kind, job.team.slug,
                    job.cluster_name, error)  # fmt: skip
        return True


def changed_reason(job: Job, changed: str) -> str:
    """Why an adopted job whose object its owner changed since its adoption (`changed`, as
    `outside.demand_change` says it) is rejected."""
    return (f"Its {job.kind} {job.team.slug}/{job.cluster_name} was changed after Gangway adopted it: {changed}. "
            "Gangway admits a job as it adopted it; to queue the changed job, delete it and create it again.")


def _reject_changed(found: OutsideJobs, known: dict[str, tuple], now: datetime) -> None:
    """Rejects each queued adopted job whose object its owner changed to ask otherwise since its adoption
    (`outside.demand_change`), and notes it in `known`, so that this pass writes the refusal back on the
    object (3). Gangway admits a job as it adopted it: to queue the changed job, its owner creates it again."""
    queued = {uid for uid, (_, state, _, _) in known.items() if state == Job.State.QUEUED}
    if not queued:
        return
    jobs = {job.cluster_uid: job for job in Job.objects.filter(cluster_uid__in=queued, state=Job.State.QUEUED)
            .select_related("team")}  # fmt: skip
    defaults: dict[int, dict[str, int]] = {}
    for item in found.jobs:
        job = jobs.get(item.uid)
        if job is None:
            continue
        team_defaults = defaults.setdefault(job.team_id, replica_defaults(job.team))
        changed = outside.demand_change(replica_specs(job, team_defaults), item.manifest, team_defaults)
        if not changed:
            continue
        reason = changed_reason(job, changed)
        try:
            transition(job, Job.State.REJECTED, message=f"Rejected: {reason}", code=Because.CHANGED_OUTSIDE,
                       reason=reason, reason_code=Because.CHANGED_OUTSIDE, finished_at=now, position=None,
                       team_position=None, eta=None, reservation=None)  # fmt: skip
        except StaleJob:
            continue  # a cycle admitted it meanwhile: its admission refuses the changed object
        known[item.uid] = (job.pk, Job.State.REJECTED, reason, False)


def _unread_too_long(job: Job, now: datetime) -> bool:
    """Whether a trial's job gone from the cluster has waited TRIAL_UNREAD_MOST for its namespace's Trials to be
    read. Its first such pass says on its timeline that it waits, and until when; the wait is counted from it."""
    since = job.events.filter(code=Because.TRIAL_UNREAD).order_by("at").values_list("at", flat=True).first()
    if since is None:
        note(job, JobEvent.Kind.NOTE, f"Its {job.kind} {job.cluster_name} is gone from the cluster, and Katib's "
             f"trials in namespace {job.team.slug} could not be read to tell how its trial ended; Gangway reads them "
             f"at every reconcile, and cancels it as deleted if they still cannot be read "
             f"{int(TRIAL_UNREAD_MOST.total_seconds() // 60)} min from now.", code=Because.TRIAL_UNREAD)  # fmt: skip
        return False
    return now - since >= TRIAL_UNREAD_MOST


def _katib_trials(cluster: Cluster, namespace: str) -> list[TrialResult] | None:
    """Katib's trials in `namespace`, or None when the cluster refused to list them (logged; ClusterUnavailable
    goes to the caller). They only add to what a pass knows, so a refusal must not stop reconcile."""
    try:
        return cluster.trials(namespace)
    except ClusterError as error:
        log.warning("the cluster refused to list Katib's trials in namespace %s: %s", namespace, error)
        return None


def _katib_experiments(cluster: Cluster, namespace: str) -> list[ExperimentResult]:
    """Katib's ended Experiments in `namespace`; none when the cluster refused to list them (logged: a sweep
    learns its end at a later pass, while its last trial is within OBJECTIVE_GRACE)."""
    try:
        return cluster.experiments(namespace)
    except ClusterError as error:
        log.warning("the cluster refused to list Katib's experiments in namespace %s: %s", namespace, error)
        return []


def _sweep_namespaces(now: datetime) -> list[str]:
    """The namespaces (team slugs) of the sweeps with a trial open, or one that ended within OBJECTIVE_GRACE."""
    recent = Q(state__in=Job.OPEN_STATES) | Q(finished_at__gte=now - OBJECTIVE_GRACE)
    # order_by() first: DISTINCT counts the columns of Job's own ordering too, which named a team once per job.
    slugs = Job.objects.filter(recent, sweep__isnull=False).order_by().values_list("team__slug", flat=True).distinct()
    return sorted(slugs)


def _adopt_or_refuse(item: OutsideJob, known: dict[str, tuple], teams: dict[str, Team], cluster: Cluster,
                     result: Adopted, experiments: Callable[[str], dict[tuple[str, str], str]],
                     refused: dict[str, tuple[OutsideJob, str]]) -> None:  # fmt: skip
    if item.uid in known:
        pk, state, reason, left_queue = known[item.uid]
        if item.job_id != pk:
            cluster.mark_outside(item, job_id=pk)
        marked = False
        if state == Job.State.REJECTED and _left_to_mark(item):
            # The first cycle found it can never fit (R10): its owner reads why on the object.
            marked = cluster.mark_outside(item, rejected=item.rejected or f"Refused by Gangway: {reason}")
        elif state == Job.State.CANCELLED and not left_queue and outside.ends_when_failed(item):
            # A person cancelled it here: it ends there too. One cancelled as it left the queue (and put back
            # since) is its owner's again.
            marked = cluster.mark_outside(item, cancelled=f"Cancelled in Gangway (job #{pk}).")
        if marked:
            _note_marked(pk, item)
        return
    team = teams.get(item.namespace)
    if team is None or not item.suspended or item.finished:
        return
    if item.rejected:
        if _left_to_mark(item):  # refused at an earlier pass whose mark of its status did not go through
            cluster.mark_outside(item, rejected=item.rejected)
        return
    if item.trial and not item.experiment:
        item = outside.with_experiment(item, experiments(item.namespace))  # Katib labels the Trial, not its job
    job, reason = _adopt(item, team)
    if job is None:
        refused[item.uid] = (item, reason)  # recorded even if the mark below fails: it was refused
        cluster.mark_outside(item, rejected=reason)
        log.info("refused %s %s/%s: %s", item.kind, item.namespace, item.name, reason)
        result.refused += 1
        return
    known[item.uid] = (job.pk, job.state, "", False)
    cluster.mark_outside(item, job_id=job.pk)
    log.info("adopted %s %s/%s as job %s (%s)", item.kind, item.namespace, item.name, job.pk, item.origin)
    result.adopted += 1


def record_refused(found: OutsideJobs, known: dict[str, tuple], teams: dict[str, Team],
                   refused: dict[str, tuple[OutsideJob, str]], now: datetime) -> None:
    """Keeps `RefusedOutsideJob` as the cluster is, level-triggered: one row per job from elsewhere in a
    team namespace that Gangway refused (at this pass, `refused`, or before, its refusal written on it) and
    that no Gangway job adopted since. A row keeps when it was first found refused and where the job came
    from as first found (a Katib trial's experiment is read from its Trial only when needed). A row whose
    object is gone (or lost its queue label), or was adopted after all, goes, unless its kind's list failed
    this pass (`found.kinds`): that list says nothing of its jobs. Writes only what changed, in one
    transaction; reconcile's lease keeps passes apart. A database error is logged and leaves the rows as they
    were for the next pass: reconcile's other work goes on."""
    now_refused: dict[str, tuple[OutsideJob, str]] = {}
    for item in found.jobs:
        if item.uid in known or item.namespace not in teams:
            continue
        item, reason = refused.get(item.uid, (item, item.rejected))
        if reason:
            now_refused[item.uid] = (item, outside.written_refusal(reason))
    try:
        rows = {row.uid: row for row in RefusedOutsideJob.objects.only("uid", "kind", "team_id", "name", "reason")}
        stale = [row.pk for uid, row in rows.items() if uid not in now_refused and row.kind in found.kinds]
        new = [RefusedOutsideJob(uid=uid, team=teams[item.namespace], kind=item.kind, name=item.name,
                                 origin=item.origin, reason=reason, refused_at=now)
               for uid, (item, reason) in now_refused.items() if uid not in rows]  # fmt: skip
        changed = [(rows[uid].pk, {"team": teams[item.namespace], "name": item.name, "reason": reason})
                   for uid, (item, reason) in now_refused.items()
                   if uid in rows and (rows[uid].team_id, rows[uid].name, rows[uid].reason)
                   != (teams[item.namespace].pk, item.name, reason)]  # fmt: skip
        if not (stale or new or changed):
            return
        with transaction.atomic():
            RefusedOutsideJob.objects.filter(pk__in=stale).delete()
            RefusedOutsideJob.objects.bulk_create(new, ignore_conflicts=True)
            for pk, fields in changed:
                RefusedOutsideJob.objects.filter(pk=pk).update(**fields)
    except DatabaseError:
        log.exception("could not record the jobs from elsewhere refused at this pass; the next pass tries again")


def _left_to_mark(item: OutsideJob) -> bool:
    """Whether a refused job from elsewhere still lacks part of its refusal: the annotation saying why, or
    the Failed condition in its status that its kind's operator keeps (`outside.ends_when_failed`)."""
    return not item.rejected or outside.ends_when_failed(item)


def _note_marked(pk: int, item: OutsideJob) -> None:
    """Tells on the job's timeline that its object was marked Failed in the cluster, and what that ends."""
    if item.trial:
        ends = "its Katib trial fails and Katib goes on with the experiment's next trial"
    elif item.origin.startswith(origins.PIPELINES_RUN):
        ends = "its Pipelines step fails its run"
    else:
        ends = "whatever waits on it sees it end"
    job = Job.objects.get(pk=pk)
    note(job, JobEvent.Kind.NOTE, f"Its {item.kind} {item.name} was marked Failed in the cluster, so that {ends} "
         "instead of waiting for it for ever.", code=Because.MARKED_FAILED)  # fmt: skip


def _end_deleted(job: Job, outcome: str, now: datetime, *, unread: bool = False) -> int:
    """Ends a job whose adopted object is gone; returns 1, or 0 when someone moved it first.

    A Katib trial's job that Katib removed once its Trial completed ends as KATIB_ENDINGS says
    for the Trial's outcome (one being cancelled too, as any job that ended before its cancel landed,
    saying so); a trial that completed before it was admitted, and any job its owner deleted, is
    cancelled, as is a trial's job whose Trials stayed `unread` TRIAL_UNREAD_MOST.
    """
    state, says = KATIB_ENDINGS.get(outcome, (None, ""))
    removed = f"Katib removed its {job.kind} {job.cluster_name}."
    try:
        with transaction.atomic():
            if state in (Job.State.SUCCEEDED, Job.State.FAILED) and can_move(job, state):
                if job.state == Job.State.CANCELLING:
                    note(job, JobEvent.Kind.NOTE, f"Its cancel came after its Katib trial had completed ({outcome}); "
                         "nothing was stopped.", code=Because.ENDED_BEFORE_CANCEL)  # fmt: skip
                transition(job, state, message=f"{says}; {removed}", finished_at=now, placement=[],
                           held_until_stopped=False, stop_failed_at=None)  # fmt: skip
                return 1
            if state == Job.State.CANCELLED:
                why, done = f"{says}; {removed}", "Cancelled by Katib: its trial was killed."
            elif state is not None and job.state == Job.State.QUEUED:
                why = f"Its Katib trial completed ({outcome}) before Gangway admitted it; {removed}"
                done = "Cancelled: its trial completed without it."
            elif unread:
                why = (f"Its {job.kind} {job.cluster_name} was deleted in the cluster, and how its trial ended could not "
                       f"be read in {int(TRIAL_UNREAD_MOST.total_seconds() // 60)} min (Katib's trials in namespace "
                       f"{job.team.slug} stayed unreadable); cancelled in Gangway.")  # fmt: skip
                done = "Cancelled: its cluster object is gone."
            else:
                why = f"Its {job.kind} {job.cluster_name} was deleted in the cluster; cancelled in Gangway."
                done = "Cancelled: its cluster object is gone."
            if job.state != Job.State.CANCELLING:
                transition(job, Job.State.CANCELLING, message=why, code=Because.DELETED_OUTSIDE)
            transition(job, Job.State.CANCELLED, message=done, finished_at=now, placement=[], position=None,
                       team_position=None, eta=None, reservation=None)  # fmt: skip
    except StaleJob:
        return 0
    return 1


def gangway_name(name: str) -> str:
    """The Gangway name of an adopted object: a DNS label of at most NAME_MAX characters.

    Only for people to read: the object keeps its own name (Job.cluster_name).
    """
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower())[:NAME_MAX].strip("-")
    return label or "job"


def _sweep(item: OutsideJob, team: Team) -> Sweep | None:
    """The sweep of a Katib trial's job (created with its first trial), or None for a job of no trial. A new
    trial of a sweep whose experiment had ended means it runs again (created again under its name, or resumed
    by Katib): the old ending, best trial and metrics are forgotten until Katib reports the new ones."""
    if not item.trial:
        return None
    sweep, created = Sweep.objects.get_or_create(team=team, experiment=item.experiment)
    if not created and (sweep.ended or sweep.best_trial):
        # updated_at by hand, as `_learn_endings` does: the sweep's polled parts move with it (live_version).
        Sweep.objects.filter(pk=sweep.pk).update(ended="", ended_at=None, best_trial="", best_metrics=[],
                                                 updated_at=timezone.now())  # fmt: skip
        sweep.refresh_from_db()
    return sweep


def _adopt(item: OutsideJob, team: Team) -> tuple[Job | None, str]:
    """Returns (the new Gangway job, "") or (None, why the submission refuses it)."""
    if item.queue != team.slug:
        return None, (f"Refused by Gangway: the label {outside.QUEUE_LABEL} names {item.queue!r}, but the job is in "
                      f"namespace {team.slug}; a job joins the queue of its own namespace's team ({team.slug}).")  # fmt: skip
    try:
        data, unsupported = spec_from_manifest(outside.import_manifest(item.manifest))
        unmet = [entry for entry in unsupported if ".nodeSelector." in entry and NO_TYPE in entry]
        if unmet:
            types = ", ".join(t.name for t in gpu_types())
            return None, (f"Refused by Gangway: {'; '.join(unmet)[:600]}. Its own nodeSelector stays on its pods, so "
                          f"no node of the cluster's GPU types ({types}) could run it: select one of them, or "
                          "none.")  # fmt: skip
        data["name"] = gangway_name(item.name)
        with transaction.atomic():
            sweep = _sweep(item, team)
            tier = outside.asked_tier(item.manifest) or data.get("tier")
            if sweep is not None and not tier:
                default = sweep_tier(team)  # the team's as it is now; none: the submission refuses the trial
                tier = default.name if default else ""
            data["tier"] = tier
            spec = parse_spec(data, team=team.slug)
            # Not capped by MAX_QUEUED_PER_TEAM: the job is in the cluster already, and refusing it here
            # would not take it off the cluster.
            job, _ = job_submit(team=team, spec=spec, via=item.origin, queue_cap=False)
            Job.objects.filter(pk=job.pk).update(cluster_name=item.name, cluster_uid=item.uid, sweep=sweep)
            if unsupported:
                job.events.create(kind=JobEvent.Kind.NOTE, code=Because.FIELDS_KEPT, message=(
                    f"Adopted from {item.kind} {item.namespace}/{item.name}; fields Gangway does not read "
                    f"stay as written: {', '.join(unsupported)[:900]}."))  # fmt: skip
    except SpecError as error:
        return None, "Refused by Gangway: " + "; ".join(
            f"{path}: {' '.join(messages)}" for path, messages in error.errors.items()
        )  # fmt: skip
    except NeverFits as error:
        return None, f"Refused by Gangway: {error.reason}"
    return job, ""


def _learn_objectives(trials: list[TrialResult]) -> None:
    """Stores each sweep's best objective value, as Katib's trials report it."""
    reported: dict[tuple[str, str], list] = {}
    for trial in trials:
        reported.setdefault((trial.namespace, trial.experiment), []).append(trial)
    experiments = {experiment for _, experiment in reported}
    for sweep in Sweep.objects.select_related("team").filter(experiment__in=experiments):
        trials = reported.get((sweep.team.slug, sweep.experiment))
        if not trials:
            continue
        values = [trial.value for trial in trials if trial.value is not None]
        maximize = trials[0].maximize
        best = (max(values) if maximize else min(values)) if values else None
        if (sweep.objective, sweep.maximize, sweep.best_objective) != (trials[0].objective, maximize, best):
            # updated_at by hand (update() leaves auto_now alone): the dashboard's queue shows the
            # objective, and its polls answer 304 until the row's time moves (live_version).
            Sweep.objects.filter(pk=sweep.pk).update(objective=trials[0].objective, maximize=maximize,
                                                     best_objective=best, updated_at=timezone.now())  # fmt: skip


def _learn_endings(experiments: list[ExperimentResult]) -> None:
    """Stores how and when each sweep's Katib Experiment ended, and its best trial with that trial's metrics."""
    by_name = {(result.namespace, result.experiment): result for result in experiments}
    names = {experiment for _, experiment in by_name}
    for sweep in Sweep.objects.select_related("team").filter(experiment__in=names):
        result = by_name.get((sweep.team.slug, sweep.experiment))
        if result is None:
            continue
        ending = {"ended": Sweep.Ending(result.outcome.lower()), "ended_at": result.ended_at,
                  "best_trial": result.best_trial, "best_metrics": [list(pair) for pair in result.metrics]}  # fmt: skip
        if {field: getattr(sweep, field) for field in ending} != ending:
            # updated_at by hand, as for the objective: the sweep's polled parts move with it (live_version).
            Sweep.objects.filter(pk=sweep.pk).update(**ending, updated_at=timezone.now())
