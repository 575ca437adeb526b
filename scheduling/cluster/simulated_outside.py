"""Jobs from elsewhere on the simulated cluster: objects kept as written (SimOutsideJob), patched as
the Kubernetes adapter patches them, Katib's objective reported when a trial's job succeeds, and an experiment
reported ended, with its best trial, once every trial of it has.

The SimulatedCluster delegates its outside calls here; an adopted job that is admitted runs as
any SimJob does (created under its own name), and its object says it is unsuspended.
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from scheduling.cluster import outside
from scheduling.cluster.base import ClusterJob, ExperimentResult, OutsideJob, OutsideJobs, TrialResult
from scheduling.models import SimJob, SimOutsideJob

OBJECTIVE = "accuracy"  # the metric the simulated Katib trials report, maximized


def merge(target: object, patch: object) -> object:
    """Returns `target` with an RFC 7386 merge patch applied (null deletes a key), as the API server does."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


def add(manifest: dict, *, now: datetime) -> SimOutsideJob:
    """Stores an outside job as a create would (a uid assigned); returns it."""
    meta = manifest["metadata"]
    uid = str(uuid.uuid4())
    stored = merge(manifest, {"metadata": {"uid": uid}})
    return SimOutsideJob.objects.create(namespace=meta["namespace"], name=meta["name"], uid=uid,
                                        kind=manifest["kind"], manifest=stored, created_at=now)  # fmt: skip


def remove(namespace: str, name: str) -> bool:
    """Deletes an outside job as `kubectl delete` would, its pods with it; returns whether it existed."""
    with transaction.atomic():
        # Its row first, then its job's: the order of an admission's or a suspend's patch (`patch`, then the
        # simulated cluster's jobs), so that a delete beside one of them waits rather than deadlocks.
        row = SimOutsideJob.objects.select_for_update().filter(namespace=namespace, name=name).first()
        if row is None:
            return False
        SimJob.objects.filter(namespace=namespace, name=name).delete()
        row.delete()
    return True


def _kind(row: SimOutsideJob) -> outside.OutsideKind:
    return outside.outside_kind(row.kind)


def outside_jobs() -> OutsideJobs:
    """Every labelled outside job, as the Kubernetes adapter reads them; every kind is listed."""
    finished = _ended()
    result = []
    for row in SimOutsideJob.objects.all():
        manifest = row.manifest
        succeeded = finished.get((row.namespace, row.name))
        if succeeded is not None:
            kind = "Succeeded" if succeeded else "Failed"
            manifest = merge(manifest, {"status": {"conditions": [{"type": kind, "status": "True"}]}})
        if outside.QUEUE_LABEL in (manifest["metadata"].get("labels") or {}):
            result.append(outside.read_outside(manifest, _kind(row)))
    return OutsideJobs(jobs=tuple(result), kinds=frozenset(kind.kind for kind in outside.outside_kinds()))


def _ended() -> dict[tuple[str, str], bool]:
    """Whether each ended simulated job succeeded, by (namespace, name): their outcomes alone, not their
    manifests, as the cluster keeps every ended job until reconcile deletes it (ENDED_JOB_RETENTION)."""
    ended = SimJob.objects.filter(finished_at__isnull=False).values_list("namespace", "name", "succeeded")
    return {(namespace, name): bool(succeeded) for namespace, name, succeeded in ended}


def patch(namespace: str, name: str, body: dict) -> None:
    """Applies a merge patch to an outside job; a job deleted meanwhile is success."""
    with transaction.atomic():
        row = SimOutsideJob.objects.select_for_update().filter(namespace=namespace, name=name).first()
        if row is not None:
            row.manifest = merge(row.manifest, body)
            row.save(update_fields=["manifest"])


def mark(job: OutsideJob, *, job_id: int | None, rejected: str, cancelled: str = "") -> bool:
    """Labels, refuses or ends a job as the Kubernetes adapter does (`kubernetes_outside.mark`): refused, it
    is annotated and, of a kind whose operator keeps it, marked Failed in its status; cancelled, only that.
    Returns whether it marked the job Failed."""
    if job_id is not None:
        patch(job.namespace, job.name, outside.adoption_labels(job_id))
    keeps = outside.ends_when_failed(job)
    if cancelled:
        return keeps and _fail(job, cancelled, outside.CANCELLED_REASON)
    if not rejected:
        return False
    if not job.rejected:
        patch(job.namespace, job.name, outside.rejection_patch(rejected, job.uid))
    return keeps and _fail(job, rejected, outside.REFUSED_REASON)


def _fail(job: OutsideJob, message: str, reason: str) -> bool:
    with transaction.atomic():
        row = SimOutsideJob.objects.select_for_update().filter(namespace=job.namespace, name=job.name,
                                                               uid=job.uid).first()  # fmt: skip
        body = None if row is None else outside.failure_patch(row.manifest, message, timezone.now(), reason)
        if body is None:
            return False
        row.manifest = merge(row.manifest, body)
        row.save(update_fields=["manifest"])
        return True


def here(kind: str, namespace: str, name: str, uid: str) -> bool:
    row = SimOutsideJob.objects.filter(kind=kind, namespace=namespace, name=name).first()
    return row is not None and outside.queued_as(row.manifest, uid)


def exists(job: ClusterJob) -> bool:
    return SimOutsideJob.objects.filter(namespace=job.namespace, name=job.name).exists()


def admitted(job: ClusterJob) -> None:
    row = SimOutsideJob.objects.filter(namespace=job.namespace, name=job.name).first()
    if row is not None:  # deleted meanwhile: reconcile cancels it
        patch(job.namespace, job.name, outside.admission_patch(job, row.manifest))


def suspended(job: ClusterJob) -> None:
    patch(job.namespace, job.name, outside.suspend_patch(outside.outside_kind(job.kind)))


def adopted_ids() -> set[int]:
    """The Gangway job ids that adopted an outside job (their SimJobs must never be deleted)."""
    ids = set()
    for manifest in SimOutsideJob.objects.values_list("manifest", flat=True):
        label = (manifest["metadata"].get("labels") or {}).get(outside.JOB_ID_LABEL, "")
        if label.isdigit():
            ids.add(int(label))
    return ids


def trials(seed: int, namespace: str) -> list[TrialResult]:
    """Every simulated Katib trial of `namespace`; one whose job succeeded reports an accuracy drawn from the seed,
    one whose job Gangway refused and marked Failed fails, as Katib's default failure condition reads it."""
    done = _ended()
    result = []
    for row in SimOutsideJob.objects.filter(namespace=namespace):
        labels = row.manifest["metadata"].get("labels") or {}
        trial = labels.get(outside.KATIB_TRIAL_LABEL)
        if not trial:
            continue
        value, ended = None, done.get((row.namespace, row.name))
        if ended:
            value = round(random.Random(f"{seed}:{row.namespace}/{trial}").uniform(0.70, 0.95), 4)
        outcome = "" if ended is None else ("Succeeded" if ended else "Failed")
        if not outcome and outside.read_outside(row.manifest, _kind(row)).finished:
            outcome = "Failed"  # marked Failed when refused: it never ran
        result.append(TrialResult(namespace=row.namespace, experiment=labels.get(outside.KATIB_EXPERIMENT_LABEL, ""),
                                  trial=trial, objective=OBJECTIVE, maximize=True, value=value, outcome=outcome))  # fmt: skip
    return result


def experiments(seed: int, namespace: str) -> list[ExperimentResult]:
    """The simulated Katib experiments of `namespace` that have ended, as Katib reports one: an experiment's
    trials are all made at once (`simulate_outside`), so it ends once every trial has, Succeeded when one of them
    did, when its last trial's job ended; its best trial is the one whose accuracy is highest (ties: the first
    by name), with that accuracy as its metric."""
    finished = dict(((namespace_, name), at) for namespace_, name, at in SimJob.objects.filter(
        namespace=namespace, finished_at__isnull=False).values_list("namespace", "name", "finished_at"))  # fmt: skip
    ended_at = {}
    for row in SimOutsideJob.objects.filter(namespace=namespace).only("namespace", "name", "manifest"):
        trial = (row.manifest["metadata"].get("labels") or {}).get(outside.KATIB_TRIAL_LABEL)
        if trial:
            ended_at[trial] = finished.get((row.namespace, row.name))
    by_experiment: dict[str, list[TrialResult]] = {}
    for result in trials(seed, namespace):
        by_experiment.setdefault(result.experiment, []).append(result)
    ended = []
    for experiment, results in sorted(by_experiment.items()):
        if not experiment or any(not result.outcome for result in results):
            continue
        scored = sorted((result for result in results if result.value is not None),
                        key=lambda result: (-result.value, result.trial))  # fmt: skip
        times = [at for at in (ended_at.get(result.trial) for result in results) if at is not None]
        ended.append(ExperimentResult(
            namespace=namespace, experiment=experiment, outcome="Succeeded" if scored else "Failed",
            ended_at=max(times, default=None), best_trial=scored[0].trial if scored else "",
            metrics=((OBJECTIVE, scored[0].value),) if scored else (),
        ))  # fmt: skip
    return ended
