"""Jobs from elsewhere, in pure functions: reading a TFJob, PyTorchJob or TrainJob Gangway did not
create, and the patches that carry Gangway's decisions onto it. Dicts in, dicts out; no cluster.

A job created with kubectl, by a Katib trial or a Pipelines step joins the queue when it is
created suspended in a team namespace with the label `gangway.io/queue: <team>`. Gangway adopts
it (the label `gangway.io/job-id` then joins it, and the pods it starts, to the Gangway job),
admits it by patching the scheduling fields it owns and unsuspending it, preempts it by
suspending it, and never deletes it.

Labels and fields as their projects spell them: Katib's trial controller sets a controller
owner reference to its Trial (`kubeflow.org/v1beta1`) on the job it creates, and Trials carry
`katib.kubeflow.org/experiment`; Kubeflow Pipelines labels what a run creates `pipeline/runid`;
`metadata.managedFields[].manager` names the client that wrote an object ("kubectl-create",
"kubectl-client-side-apply").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from core.quantities import format_cpu, memory_text
from jobs import kinds, origins
from jobs.spec import ReplicaGroup, SpecError, parse_spec
from jobs.yaml_import import spec_from_manifest
from scheduling.cluster import trainjob_manifests
from scheduling.cluster.base import ClusterJob, ExperimentResult, OutsideJob, ReplicaSpec
from scheduling.cluster.manifests import (
    JOB_ID_LABEL, MANAGED_BY, SCHEDULER_NAME, SUSPENDED_BY_ANNOTATION, TEAM_LABEL, required_terms, type_affinity,
    type_labels,
)

QUEUE_LABEL = "gangway.io/queue"
TIER_LABEL = "gangway.io/tier"
REJECTED_ANNOTATION = "gangway.io/rejected"
# The uid of the object the refusal was written on: a copy of it (`kubectl get -o yaml`, then create) carries the
# annotations but is another object, judged anew. An annotation without it was written before it existed.
REJECTED_UID_ANNOTATION = "gangway.io/rejected-uid"
# The reason of the Warning event on a refused outside job, and of the Failed condition written in its status;
# that of the Failed condition of one a person cancelled in Gangway.
REFUSED_REASON = "GangwayRejected"
CANCELLED_REASON = "GangwayCancelled"
# The reason of the Normal event on a running job its owner suspended, which Gangway no longer counts.
RELEASED_REASON = "GangwayReleased"
# Who created it, when the cluster stamps it (a mutating admission policy) or the person writes it.
CREATOR_ANNOTATION = "gangway.io/created-by"
KATIB_EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"
KATIB_TRIAL_LABEL = "katib.kubeflow.org/trial"
KATIB_GROUP, KATIB_VERSION, KATIB_TRIALS = "kubeflow.org", "v1beta1", "trials"
KATIB_EXPERIMENTS = "experiments"
PIPELINE_RUN_LABEL = "pipeline/runid"
PIPELINE_RUN_NAME_ANNOTATION = "pipelines.kubeflow.org/run_name"
VIA_MAX = 100  # Job.submitted_via


@dataclass(frozen=True, slots=True)
class OutsideKind:
    """Where one job kind lives in the API and where its scheduling fields are."""

    kind: str
    group: str
    version: str
    plural: str
    layout: kinds.Layout
    replica_specs: str = ""  # REPLICA_SPECS: the spec field holding role -> replica spec
    suspend_path: tuple[str, ...] = ("spec", "runPolicy", "suspend")
    keeps_written_failure: bool = False  # `kinds.JobKind.keeps_written_failure`


def outside_kinds() -> tuple[OutsideKind, ...]:
    """Returns every kind Gangway adopts, read from the kind registry when called: each kind of a layout
    `ADMISSIONS` knows how to admit (TFJob and PyTorchJob, Kubeflow Trainer's TrainJob)."""
    return tuple(
        OutsideKind(kind=kind.name, group=kind.group, version=kind.version, plural=kind.plural, layout=kind.layout,
                    replica_specs=kind.replica_specs, suspend_path=kind.suspend,
                    keeps_written_failure=kind.keeps_written_failure)  # fmt: skip
        for kind in kinds.all_kinds() if kind.layout in ADMISSIONS
    )


def outside_kind(kind: str) -> OutsideKind:
    return next(candidate for candidate in outside_kinds() if candidate.kind == kind)


def _at(obj: dict, path: tuple[str, ...]):
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def created_by_gangway(obj: dict) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in MANAGED_BY.items())


def trial_owner(obj: dict) -> str:
    """Returns the name of the Katib Trial that owns the job, or "" when none does."""
    for owner in obj.get("metadata", {}).get("ownerReferences") or ():
        if owner.get("kind") == "Trial" and str(owner.get("apiVersion", "")).startswith(f"{KATIB_GROUP}/"):
            return owner.get("name", "")
    return ""


def origin(obj: dict, *, experiment: str = "") -> str:
    """Returns where an outside job came from, as `submitted_via` reads it.

    "katib experiment tune-lr, trial tune-lr-x7k2", "pipelines run 5c1f...", "kubectl (alice)"
    (the creator annotation), "kubectl-create" (the first field manager), else "kubernetes".
    """
    meta = obj.get("metadata", {})
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    trial = labels.get(KATIB_TRIAL_LABEL) or trial_owner(obj)
    if trial:
        experiment = labels.get(KATIB_EXPERIMENT_LABEL) or experiment
        return (f"katib experiment {experiment}, trial {trial}" if experiment else f"katib trial {trial}")[:VIA_MAX]
    if PIPELINE_RUN_LABEL in labels:
        run = annotations.get(PIPELINE_RUN_NAME_ANNOTATION) or labels[PIPELINE_RUN_LABEL]
        return f"{origins.PIPELINES_RUN} {run}"[:VIA_MAX]
    creator = annotations.get(CREATOR_ANNOTATION, "")
    managers = [entry.get("manager", "") for entry in meta.get("managedFields") or () if entry.get("manager")]
    if creator:
        return f"{managers[0] if managers else 'kubectl'} ({creator})"[:VIA_MAX]
    return (managers[0] if managers else "kubernetes")[:VIA_MAX]


def read_outside(obj: dict, kind: OutsideKind) -> OutsideJob:
    """Returns the port's view of a labelled job. A Katib trial's experiment is its label's, else ""
    (Katib's trial controller labels only its Trial: `with_experiment` reads it there)."""
    meta = obj["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    conditions = {c.get("type") for c in _at(obj, ("status", "conditions")) or () if c.get("status") == "True"}
    trial = labels.get(KATIB_TRIAL_LABEL) or trial_owner(obj)
    experiment = labels.get(KATIB_EXPERIMENT_LABEL, "") if trial else ""
    job_id = labels.get(JOB_ID_LABEL, "")
    return OutsideJob(
        kind=kind.kind, namespace=meta.get("namespace", ""), name=meta["name"], uid=meta.get("uid", ""),
        queue=labels.get(QUEUE_LABEL, ""), suspended=bool(_at(obj, kind.suspend_path)),
        finished=bool(conditions & {"Succeeded", "Failed"}), manifest=obj,
        job_id=int(job_id) if job_id.isdigit() else None, rejected=_refusal(annotations, meta.get("uid", "")),
        origin=origin(obj, experiment=experiment), trial=trial, experiment=experiment,
        suspended_by_gangway=annotations.get(SUSPENDED_BY_ANNOTATION) == "gangway",
    )  # fmt: skip


def _refusal(annotations: dict, uid: str) -> str:
    """Returns why Gangway refused this object, "" when it did not: a refusal copied from another object
    (its uid annotation names another) is that object's."""
    refused_uid = annotations.get(REJECTED_UID_ANNOTATION)
    if refused_uid is not None and refused_uid != uid:
        return ""
    return annotations.get(REJECTED_ANNOTATION, "")


def with_experiment(job: OutsideJob, experiments: dict[tuple[str, str], str]) -> OutsideJob:
    """Returns a Katib trial's job with its experiment named: the job's label, else its Trial's
    (`experiments`: (namespace, trial) -> experiment), else read from the trial's name, as Katib
    names a trial `<experiment>-<suffix>`. A job of no trial, or one whose experiment is known, is returned as it is."""
    if not job.trial or job.experiment:
        return job
    experiment = experiments.get((job.namespace, job.trial)) or job.trial.rsplit("-", 1)[0]
    return replace(job, experiment=experiment, origin=origin(job.manifest, experiment=experiment))


def asked_tier(obj: dict) -> str:
    """Returns the tier the job asks for by label ("" when it names none: its priority class then counts)."""
    return (obj.get("metadata", {}).get("labels") or {}).get(TIER_LABEL, "")


def import_manifest(obj: dict) -> dict:
    """Returns the parts of an outside job the submission's manifest import reads.

    Its name and namespace, and its spec as its owner wrote it (Gangway's own runtime patch left out: read
    last, it would stand for the owner's pod, its /dev/shm among it); what the cluster keeps (status, uid,
    managedFields, labels, annotations, owner references) is Kubernetes' bookkeeping, not the job's request.
    """
    spec = obj.get("spec") or {}
    if isinstance(spec.get("runtimePatches"), list):  # a TrainJob admitted before carries Gangway's own patch
        spec = {**spec, "runtimePatches": _owners_patches(spec)}
    return {
        "apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
        "metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"].get("namespace", "")},
        "spec": spec,
    }  # fmt: skip


def _owners_patches(spec: dict) -> list:
    """A TrainJob's runtime patches but Gangway's own (its `manager` is trainjob_manifests.PATCH_MANAGER)."""
    return [patch for patch in spec.get("runtimePatches") or ()
            if not (isinstance(patch, dict) and patch.get("manager") == trainjob_manifests.PATCH_MANAGER)]  # fmt: skip


def queued_as(obj: dict | None, uid: str) -> bool:
    """Whether `obj` (None: not there) is the object of that uid, in the queue (labelled `gangway.io/queue`)."""
    if obj is None:
        return False
    return obj["metadata"].get("uid") == uid and QUEUE_LABEL in (obj["metadata"].get("labels") or {})


def demand_change(asked: tuple[ReplicaSpec, ...], obj: dict, defaults: dict[str, int]) -> str:
    """Returns "" when an adopted object asks what Gangway counted for its job (`asked`: each replica group's
    role, count, GPUs, CPU and memory, a group naming no CPU or memory given its team's `defaults`, as its pods
    are by the namespace's LimitRange), else what it asks now, for people.

    Its owner may change an adopted job while it is suspended (`kubectl edit`; the admission policy forbids
    unsuspending it, and changing what it asks only while it runs): unsuspended as it is then, its pods would
    take more than its admission made room for, on nodes the snapshot counts as free."""
    try:
        data, _ = spec_from_manifest(import_manifest(obj))
        spec = parse_spec({**data, "name": "adopted", "tier": ""})  # only its replicas are compared
    except SpecError as error:
        return f"it can no longer be read as a job ({error})"
    now = spec.replicas
    cpu, memory = defaults.get("cpu", 0), defaults.get("memory", 0)
    same = len(now) == len(asked) and all(
        (group.role, group.count, group.gpu, group.cpu or cpu, (group.memory or memory) + spec.shm)
        == (was.role, was.count, was.gpu, was.cpu, was.memory)
        for group, was in zip(now, asked)
    )  # fmt: skip
    if same:
        return ""
    return f"it asks {_groups(now, spec.shm)} now, where Gangway adopted it asking {_groups(asked, 0)}"


def _groups(groups: tuple[ReplicaGroup, ...] | tuple[ReplicaSpec, ...], shm: int) -> str:
    """Replica groups for people: "2 Worker of 8 GPUs, 16 CPU, 64 GiB memory"."""
    said = []
    for group in groups:
        parts = [f"{group.gpu} GPU{'' if group.gpu == 1 else 's'}"]
        if group.cpu:
            parts.append(f"{format_cpu(group.cpu)} CPU")
        if group.memory:
            parts.append(f"{memory_text(group.memory + shm)} memory")
        said.append(f"{group.count} {group.role} of {', '.join(parts)}")
    return "; ".join(said)


def adoption_labels(job_id: int) -> dict:
    """Returns the merge patch that joins an outside job to the Gangway job that adopted it."""
    return {"metadata": {"labels": {JOB_ID_LABEL: str(job_id)}}}


def written_refusal(reason: str) -> str:
    """Returns a refusal as the object carries it (and the team page shows it): its first 1,000 characters."""
    return reason[:1000]


def rejection_patch(reason: str, uid: str) -> dict:
    """Returns the merge patch that writes back why Gangway refused an outside job, and which object it
    refused (its uid)."""
    return {"metadata": {"annotations": {REJECTED_ANNOTATION: written_refusal(reason), REJECTED_UID_ANNOTATION: uid}}}


def ends_when_failed(job: OutsideJob) -> bool:
    """Whether marking the job Failed in its status would end it: it has not finished, and its kind's
    operator keeps a Failed condition Gangway writes (`kinds.JobKind.keeps_written_failure`)."""
    return outside_kind(job.kind).keeps_written_failure and not job.finished


def failure_patch(current: dict, message: str, now: datetime, reason: str = REFUSED_REASON) -> dict | None:
    """Returns the status patch that marks an outside job Gangway refused (or a person cancelled in Gangway:
    `reason` CANCELLED_REASON) Failed, as its operator marks a job that failed: a true `Failed` condition
    (`reason`, `message`) after the conditions it has, any earlier `Failed` one replaced, and the time it
    ended (`completionTime`, which the Training Operator needs to apply `ttlSecondsAfterFinished`). None
    when the job has finished already.

    A merge patch replaces the whole list, so it is built from the object as read (`current`) and carries
    that object's resourceVersion: should the operator write the status meanwhile, the API server answers
    409 Conflict instead of losing what it wrote."""
    conditions = list(_at(current, ("status", "conditions")) or ())
    if any(c.get("type") in ("Failed", "Succeeded") and c.get("status") == "True" for c in conditions):
        return None
    stamp = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    failed = {"type": "Failed", "status": "True", "reason": reason, "message": message[:1000],
              "lastUpdateTime": stamp, "lastTransitionTime": stamp}  # fmt: skip
    kept = [condition for condition in conditions if condition.get("type") != "Failed"]
    patch: dict = {"status": {"conditions": [*kept, failed]}}
    if not _at(current, ("status", "completionTime")):
        patch["status"]["completionTime"] = stamp
    version = current.get("metadata", {}).get("resourceVersion")
    if version:
        patch["metadata"] = {"resourceVersion": version}
    return patch


def _replica_specs_admission(job: ClusterJob, kind: OutsideKind, current: dict) -> dict:
    """A TFJob's or PyTorchJob's: `runPolicy` (unsuspended, the Volcano gang in the team's queue at the tier's
    priority) and each replica group's pod template (Volcano, the tier's priority class, the job's labels and,
    on a GPU type, the node affinity that pins it there, each of the owner's required terms kept and also
    asking for the type; the owner's preferred and pod affinities are left as they are)."""
    labels = {JOB_ID_LABEL: str(job.job_id), TEAM_LABEL: job.team, **type_labels(job)}
    groups = (current.get("spec") or {}).get(kind.replica_specs) or {}
    run_policy = {
        "suspend": False,
        "schedulingPolicy": {
            "minAvailable": sum(replica.count for replica in job.replicas),
            "queue": job.team,
            "priorityClass": job.tier,
        },
    }
    replicas = {
        replica.role: {"template": {
            "metadata": {"labels": dict(labels)},
            "spec": {"schedulerName": SCHEDULER_NAME, "priorityClassName": job.tier,
                     **_pinned(job, ((groups.get(replica.role) or {}).get("template") or {}).get("spec") or {})},
        }}
        for replica in job.replicas
    }  # fmt: skip
    return {"metadata": {"labels": {JOB_ID_LABEL: str(job.job_id), **type_labels(job)},
                         "annotations": {SUSPENDED_BY_ANNOTATION: None}},  # Gangway's suspend no longer
            "spec": {"runPolicy": run_policy, kind.replica_specs: replicas}}  # fmt: skip


def _pinned(job: ClusterJob, pod_spec: dict) -> dict:
    """{"affinity": ...} pinning a pod spec as the owner wrote it to the job's GPU type; {} without a type."""
    affinity = type_affinity(job, required_terms(pod_spec))
    return {"affinity": affinity} if affinity else {}


def _trainer_admission(job: ClusterJob, kind: OutsideKind, current: dict) -> dict:
    """A TrainJob's: unsuspended, with Gangway's runtime patch (the team's Volcano queue, the job's labels and
    tier on its pods, the GPU tolerations and grace period, the GPU type's node affinity) after the owner's
    patches, which stay as written.

    `trainer` and `runtimeRef` are never in the patch: the trainer refuses changes to them after creation.
    A merge patch replaces a whole list, so the owner's runtime patches are sent back as `current` has them.
    """
    labels = {JOB_ID_LABEL: str(job.job_id), TEAM_LABEL: job.team, trainjob_manifests.TIER_LABEL: job.tier,
              **type_labels(job)}  # fmt: skip
    owners = _owners_patches(current.get("spec") or {})
    # Gangway's patch comes last and its affinity replaces theirs: their required node terms are carried into it.
    (terms,) = trainjob_manifests.train_job_terms({"kind": job.kind, "spec": {"runtimePatches": owners}})
    pod_spec = trainjob_manifests.node_pod_spec(job, terms)
    gangway = trainjob_manifests.runtime_patch(job, labels=labels, pod_spec=pod_spec)
    return {"metadata": {"labels": {JOB_ID_LABEL: str(job.job_id), **type_labels(job)},
                         "annotations": {SUSPENDED_BY_ANNOTATION: None}},  # Gangway's suspend no longer
            "spec": {"suspend": False, "runtimePatches": [*owners, gangway]}}  # fmt: skip


# How an adopted job of each layout is admitted: the merge patch of the fields Gangway owns, unsuspended.
# A kind of a layout listed here is adopted; every other difference between layouts is the kind's registry data.
ADMISSIONS: dict[kinds.Layout, Callable[[ClusterJob, OutsideKind, dict], dict]] = {
    kinds.Layout.REPLICA_SPECS: _replica_specs_admission,
    kinds.Layout.TRAINER: _trainer_admission,
}


def admission_patch(job: ClusterJob, current: dict) -> dict:
    """Returns the merge patch that admits an adopted job: the scheduling fields Gangway owns, unsuspended.

    `current` is the job's object as the cluster has it. Its pods are gang-scheduled by Volcano
    in the team's queue, as Gangway's own jobs are, and carry the Gangway job's labels so their
    usage counts as the job's (not as outside usage). Everything else of the job stays its owner's.
    """
    kind = outside_kind(job.kind)
    return ADMISSIONS[kind.layout](job, kind, current)


def suspend_patch(kind: OutsideKind, suspended: bool = True) -> dict:
    """Returns the merge patch that suspends (or resumes) a job of `kind`, marked as Gangway's suspend (or the mark
    removed: `manifests.SUSPENDED_BY_ANNOTATION`)."""
    patch: dict = {"metadata": {"annotations": {SUSPENDED_BY_ANNOTATION: "gangway" if suspended else None}}}
    node = patch
    for key in kind.suspend_path[:-1]:
        node = node.setdefault(key, {})
    node[kind.suspend_path[-1]] = suspended
    return patch


# Katib's conditions of a completed Trial (`Trial.IsCompleted` in kubeflow/katib), the first true one
# winning. MetricsUnavailable: its job succeeded but the objective metric was never reported; Katib before
# v0.16 said so with the condition Succeeded set to False.
TRIAL_OUTCOMES = ("Failed", "Killed", "MetricsUnavailable", "EarlyStopped", "Succeeded")


def trial_outcome(trial: dict) -> str:
    """Returns how a Katib Trial completed (one of TRIAL_OUTCOMES), or "" while it has not."""
    conditions = _at(trial, ("status", "conditions")) or ()
    true = {c.get("type") for c in conditions if c.get("status") == "True"}
    if any(c.get("type") == "Succeeded" and c.get("status") == "False" for c in conditions):
        true.add("MetricsUnavailable")
    return next((outcome for outcome in TRIAL_OUTCOMES if outcome in true), "")


# How Katib reads a trial's objective value from its metric (`metricStrategies`): the experiment's strategy for
# the objective metric, else the one Katib's defaulting gives it by the objective's type (`setDefaultObjective`).
STRATEGY_BY_TYPE = {"maximize": "max", "minimize": "min"}
UNAVAILABLE = "unavailable"  # Katib's value of a metric not reported yet


def objective_of(trial: dict) -> tuple[str, bool, float | None]:
    """Returns (objective metric, maximize, its value) of a Katib Trial object.

    Katib reports `status.observation.metrics[]` as {name, min, max, latest} strings and ranks a
    trial by the one its objective's strategy names (by default max when maximizing, min when
    minimizing), the latest when that one is unavailable (`getObjectiveMetricValue`). The value is
    None until the objective metric is reported (or when it is not a number).
    """
    objective = _at(trial, ("spec", "objective")) or {}
    name = objective.get("objectiveMetricName", "")
    maximize = objective.get("type") == "maximize"
    strategy = next((item.get("value") for item in objective.get("metricStrategies") or ()
                     if isinstance(item, dict) and item.get("name") == name),
                    STRATEGY_BY_TYPE.get(objective.get("type"), "latest"))  # fmt: skip
    for metric in _at(trial, ("status", "observation", "metrics")) or ():
        if metric.get("name") == name:
            return name, maximize, _metric_value(metric, strategy)
    return name, maximize, None


def _metric_value(metric: dict, strategy: str) -> float | None:
    """The value of one reported metric ({name, min, max, latest} strings) by its strategy, the latest when
    that one is unavailable (Katib's `getObjectiveMetricValue`); None when it is not a finite number (a training
    script that reports a loss of NaN or inf: JSON, and so the sweep's row, cannot hold it, and no best is one)."""
    value = metric.get(strategy) if strategy in ("min", "max") else None
    if value in (None, UNAVAILABLE):
        value = metric.get("latest")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


# The conditions of an Experiment that has ended (`Experiment.IsCompleted` in kubeflow/katib).
EXPERIMENT_OUTCOMES = ("Failed", "Succeeded")


def experiment_result(experiment: dict, namespace: str) -> ExperimentResult | None:
    """Returns how a Katib Experiment ended, when, and its best trial (`status.currentOptimalTrial`:
    `bestTrialName`, and `observation.metrics` each read by its strategy, the objective first), or None while
    it has not ended. A metric whose strategy the experiment does not give is read as Katib defaults it: the
    objective by its type, any other metric by its latest value."""
    conditions = _at(experiment, ("status", "conditions")) or ()
    true = {c.get("type") for c in conditions if isinstance(c, dict) and c.get("status") == "True"}
    outcome = next((outcome for outcome in EXPERIMENT_OUTCOMES if outcome in true), "")
    if not outcome:
        return None
    objective = _at(experiment, ("spec", "objective")) or {}
    name = objective.get("objectiveMetricName", "")
    strategies = {item.get("name"): item.get("value") for item in objective.get("metricStrategies") or ()
                  if isinstance(item, dict)}  # fmt: skip
    strategies.setdefault(name, STRATEGY_BY_TYPE.get(objective.get("type"), "latest"))
    best = _at(experiment, ("status", "currentOptimalTrial")) or {}
    metrics = []
    for metric in _at(best, ("observation", "metrics")) or ():
        if not isinstance(metric, dict):
            continue
        value = _metric_value(metric, strategies.get(metric.get("name"), "latest"))
        if value is not None:
            metrics.append((str(metric.get("name", "")), value))
    metrics.sort(key=lambda pair: pair[0] != name)  # the objective first, the others as Katib lists them
    return ExperimentResult(
        namespace=_at(experiment, ("metadata", "namespace")) or namespace, experiment=experiment["metadata"]["name"],
        outcome=outcome, ended_at=_time(_at(experiment, ("status", "completionTime"))),
        best_trial=best.get("bestTrialName") or "", metrics=tuple(metrics),
    )  # fmt: skip


def _time(value) -> datetime | None:
    """A Kubernetes time ("2026-01-01T00:00:00Z") as an aware datetime; None for none or one not readable."""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) and value else None
    except ValueError:
        return None
