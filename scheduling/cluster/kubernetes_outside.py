"""The Kubernetes adapter's calls for jobs from elsewhere: list, label, admit, refuse; Katib's trials; doctor.

Every call goes through `kubernetes_api.Api.call`, each list through `Api.list_all`, which reads it in
pages; Katib's Trials are listed per team namespace, never across the cluster. Nothing here deletes: an
outside job is only ever patched (labels, the scheduling fields Gangway owns, `suspend`), annotated, or,
refused or cancelled in Gangway, marked Failed in its status.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from scheduling.cluster import outside
from scheduling.cluster.base import (
    ChangedOutside,
    ClusterError,
    ClusterJob,
    ClusterUnavailable,
    ExperimentResult,
    Finding,
    OutsideJob,
    OutsideJobs,
    Tenants,
    TrialResult,
)
from scheduling.cluster.kubernetes_api import CONFLICT, NOT_FOUND, Api, definition_installed
from scheduling.cluster.manifests import JOB_ID_LABEL

log = logging.getLogger("gangway.adoption")

# The ValidatingAdmissionPolicy and its binding deploy/kubernetes ships (admission-policy.yaml), of one name.
POLICY_NAME = "gangway-queue-required"
# The version of that policy this Gangway ships, which the manifest carries as the POLICY_VERSION_ANNOTATION:
# doctor tells an installed policy of another version (the image has no deploy/kubernetes to compare with).
# Raised with every change of the policy's spec (tests/deploy/test_admission_policy.py pins each version's
# spec). 1 required the queue label and suspend; 2 also denies changing what a running job asks; 3 also denies
# kubectl scale of a PyTorchJob. Versions 1 and 2 carried no annotation.
POLICY_VERSION = "3"
POLICY_VERSION_ANNOTATION = "gangway.io/policy-version"
POLICY_FILE = "deploy/kubernetes/admission-policy.yaml"
ADMISSION_GROUP, ADMISSION_VERSION = "admissionregistration.k8s.io", "v1"
# How many times a patch answered 409 Conflict (its owner's controller, Katib's or the Training Operator's,
# wrote the object at the same moment) is sent again, built from the object as it is then.
CONFLICT_ATTEMPTS = 3


def outside_jobs(api: Api, *, labelled: dict[str, list[dict] | None] | None = None) -> OutsideJobs:
    """Returns every job of the adopted kinds labelled `gangway.io/queue` that Gangway did not create, adopted
    or not, and the kinds whose list the cluster answered. Reads no Katib Trial (adoption does, when it needs one).

    With `labelled`, each kind's objects labelled `gangway.io/job-id` as `job_statuses` has just listed them
    (None for a kind whose list answered 404), the adopted jobs are taken from there and only those not
    adopted yet are listed (`gangway.io/queue,!gangway.io/job-id`): reconcile's pass reads each adopted
    object once, not once per list. An object in both (its label removed between the two lists) is kept once,
    as the later list has it.
    """
    found: dict[str, OutsideJob] = {}
    listed = set()
    selector = outside.QUEUE_LABEL if labelled is None else f"{outside.QUEUE_LABEL},!{JOB_ID_LABEL}"
    for kind in outside.outside_kinds():
        adopted = () if labelled is None else labelled.get(kind.kind)
        if adopted is None:
            continue  # its job-id list answered 404: the kind is not served, nothing of it is known
        # 404: the kind's operator is not installed (a cluster without Kubeflow Trainer v2 has no TrainJobs),
        # or the API server answered a custom resource's list with a spurious 404: either way its jobs are unknown.
        items = api.list_all(
            kind.kind, "*", api.custom.list_cluster_custom_object,
            kind.group, kind.version, kind.plural, label_selector=selector, tolerate=(NOT_FOUND,),
        )  # fmt: skip
        if items is None:
            continue
        listed.add(kind.kind)
        queued = [obj for obj in adopted if outside.QUEUE_LABEL in (obj["metadata"].get("labels") or {})]
        for obj in (*queued, *items):
            if not outside.created_by_gangway(obj):
                job = outside.read_outside(obj, kind)
                found[job.uid or f"{job.kind} {job.namespace}/{job.name}"] = job
    jobs = sorted(found.values(), key=lambda job: (job.namespace, job.name))
    return OutsideJobs(jobs=tuple(jobs), kinds=frozenset(listed))


def _read(api: Api, job: OutsideJob | ClusterJob) -> dict | None:
    return _read_named(api, job.kind, job.namespace, job.name)


def _read_named(api: Api, kind_name: str, namespace: str, name: str) -> dict | None:
    kind = outside.outside_kind(kind_name)
    return api.call(
        "read", kind.kind, f"{namespace}/{name}", api.custom.get_namespaced_custom_object,
        kind.group, kind.version, namespace, kind.plural, name, tolerate=(NOT_FOUND,), one_object=True,
    )  # fmt: skip


def here(api: Api, kind: str, namespace: str, name: str, uid: str) -> bool:
    """Whether the outside job of that kind and name is there in the queue, the object of that uid. Raises
    what `Api.call` raises."""
    return outside.queued_as(_read_named(api, kind, namespace, name), uid)


def _patch(api: Api, job: OutsideJob | ClusterJob, verb: str, body: dict, *, dry_run: bool = False) -> dict | None:
    """Sends one merge patch; returns the object as patched, or None when it is gone (404).

    Raises what `Api.call` raises: a 409 Conflict is a ClusterError whose cause has status CONFLICT."""
    kind = outside.outside_kind(job.kind)
    return api.call(
        verb, kind.kind, f"{job.namespace}/{job.name}", api.custom.patch_namespaced_custom_object,
        kind.group, kind.version, job.namespace, kind.plural, job.name, body, tolerate=(NOT_FOUND,),
        one_object=True, **({"dry_run": "All"} if dry_run else {}),
    )  # fmt: skip


def _conflict(error: ClusterError) -> bool:
    """Whether the server refused a write because another writer changed the object meanwhile (409 Conflict)."""
    return getattr(error.__cause__, "status", None) == CONFLICT


def _marked(api: Api, job: OutsideJob, verb: str, body: dict) -> bool:
    """Sends a label or annotation patch, again when it answers 409 Conflict (a merge patch of metadata does
    not depend on what else the object holds, so the same one is right after any other write), at most
    CONFLICT_ATTEMPTS times; returns False when the object is gone (404). Raises what `Api.call` raises."""
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return _patch(api, job, verb, body) is not None
        except ClusterError as error:
            if not _conflict(error) or attempt == CONFLICT_ATTEMPTS:
                raise
    return False  # not reached: the last attempt returns or raises


def mark(api: Api, job: OutsideJob, *, job_id: int | None, rejected: str, cancelled: str = "",
         released: str = "") -> bool:  # fmt: skip
    """Labels the job with the Gangway job that adopted it, or annotates why it was refused and says so
    in a Warning event on it (what `kubectl describe` shows) and, for a kind whose operator keeps it, in a
    Failed condition in its status (`fail`); `cancelled`, a person cancelled it in Gangway: only that
    condition, saying so; `released`, its owner suspended it while it ran: only a Normal event saying so, the
    object left as its owner left it. Returns whether it marked the job Failed; a job deleted meanwhile gets
    neither label nor event (its owner took it away: the next pass cancels what adopted it)."""
    if released:
        _event(api, job, released, reason=outside.RELEASED_REASON, kind="Normal")
        return False
    if job_id is not None and not _marked(api, job, "label", outside.adoption_labels(job_id)):
        return False
    keeps = outside.ends_when_failed(job)
    if cancelled:
        return keeps and fail(api, job, cancelled, outside.CANCELLED_REASON)
    if not rejected:
        return False
    # One annotated at an earlier pass has its annotation and event: only its status may be left to mark.
    if not job.rejected:
        if not _marked(api, job, "annotate", outside.rejection_patch(rejected, job.uid)):
            return False
        _event(api, job, rejected)
    return keeps and fail(api, job, rejected, outside.REFUSED_REASON)


def fail(api: Api, job: OutsideJob, message: str, reason: str) -> bool:
    """Marks a refused (or cancelled) job Failed in its status (`outside.failure_patch`), so that what waits
    on it sees it end: a Katib trial then fails and gives its experiment's parallel place to the next trial
    (one left suspended would hold it for ever), a Pipelines step fails its run. Returns whether it did; a
    job gone or finished meanwhile is left as it is, and so is a new object created under its name since
    the pass listed it (another uid).

    The patch carries the resourceVersion it was built on: a 409 Conflict (the operator wrote the status at
    the same moment) reads the object again, at most CONFLICT_ATTEMPTS times. The refusal is on the object
    already (its annotation and event), so a mark that does not go through (still conflicting, refused,
    or the server unavailable) is logged and stops nothing: the next pass finds the job refused and not
    finished, and marks it then."""
    kind = outside.outside_kind(job.kind)
    try:
        for _ in range(CONFLICT_ATTEMPTS):
            current = _read(api, job)
            if current is None or current["metadata"].get("uid") != job.uid:
                return False  # gone, or deleted and created anew under its name: not the job Gangway judged
            body = outside.failure_patch(current, message, datetime.now(timezone.utc), reason)
            if body is None:
                return False
            try:
                marked = api.call(
                    "mark failed", kind.kind, f"{job.namespace}/{job.name}",
                    api.custom.patch_namespaced_custom_object_status, kind.group, kind.version, job.namespace,
                    kind.plural, job.name, body, tolerate=(NOT_FOUND,), one_object=True,
                )  # fmt: skip
                return marked is not None
            except ClusterError as error:
                if not _conflict(error):
                    raise
        log.warning("%s %s/%s: its status still conflicting after %d attempts; the next pass marks it failed",
                    job.kind, job.namespace, job.name, CONFLICT_ATTEMPTS)  # fmt: skip
    except (ClusterError, ClusterUnavailable) as error:
        log.warning("%s %s/%s not marked failed: %s; the next pass tries again", job.kind, job.namespace, job.name,
                    error)  # fmt: skip
    return False


def _event(api: Api, job: OutsideJob, message: str, *, reason: str = outside.REFUSED_REASON,
           kind: str = "Warning") -> None:  # fmt: skip
    """An event on the job (`kubectl describe` shows it), one per job and reason."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    job_kind = outside.outside_kind(job.kind)
    suffix = "rejected" if reason == outside.REFUSED_REASON else reason.removeprefix("Gangway").lower()
    body = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{job.name[:200]}.gangway-{suffix}-{job.uid[:8]}", "namespace": job.namespace},
        "involvedObject": {"apiVersion": f"{job_kind.group}/{job_kind.version}", "kind": job_kind.kind,
                           "name": job.name, "namespace": job.namespace, "uid": job.uid},
        "reason": reason, "message": message[:1000], "type": kind,
        "source": {"component": "gangway"}, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }  # fmt: skip
    # 409: the event of an earlier pass, for the same job and reason, is there already.
    api.call("create", "Event", f"{job.namespace}/{job.name}", api.core.create_namespaced_event,
             job.namespace, body, tolerate=(409,))  # fmt: skip


def admit(api: Api, job: ClusterJob, *, dry_run: bool = False) -> None:
    """Patches the scheduling fields Gangway owns onto an adopted job and unsuspends it. Returns nothing.

    The patch is built from the job as the cluster has it now (a TrainJob's owner's runtime patches
    are sent back unchanged). A job deleted meanwhile is left deleted: reconcile then cancels it in Gangway.
    A 409 Conflict (its owner's controller wrote it at the same moment) is no verdict on the job: the
    object is read again and the patch built anew, at most CONFLICT_ATTEMPTS times; one still conflicting
    is left suspended, its admission kept, and reconcile admits it at its next pass (an admitted job whose
    object is suspended is resumed). Another object made under its name (another uid) is left as it is, as
    a deleted one; one its owner changed since its adoption to ask otherwise (`outside.demand_change`) is
    refused, left suspended (a ClusterError: the job is requeued, and reconcile rejects it). With `dry_run` the API server only tries the patch (`dryRun=All`)
    and keeps nothing.
    """
    verb = "try to admit" if dry_run else "admit"
    for _ in range(CONFLICT_ATTEMPTS):
        current = _read(api, job)
        if current is None or (job.uid and current["metadata"].get("uid") != job.uid):
            return  # gone, or another object made under its name since: reconcile cancels the job
        changed = outside.demand_change(job.replicas, current, dict(job.defaults))
        if changed:
            raise ChangedOutside(f"{job.kind} {job.namespace}/{job.name} was changed after Gangway adopted it: "
                                 f"{changed}; it stays suspended", changed=changed)  # fmt: skip
        try:
            _patch(api, job, verb, outside.admission_patch(job, current), dry_run=dry_run)
            return
        except ClusterError as error:
            if not _conflict(error):
                raise
            conflict = error
    log.warning("%s: still conflicting after %d attempts; its admission stands and reconcile sends it again at "
                "its next pass", conflict, CONFLICT_ATTEMPTS)  # fmt: skip


def trials(api: Api, namespace: str) -> list[TrialResult]:
    """Returns the Katib trials of one namespace with their objective's latest value; empty when Katib is
    not installed.

    Listed in that namespace only, never across the cluster: Gangway reads the trials of its teams'
    namespaces, and a cluster-wide list would read other tenants' too (and needs a cluster-wide grant).
    Raises ClusterUnavailable when the list answers 404 though Trials are installed."""
    answer = api.list_all(
        "Trial", namespace, api.custom.list_namespaced_custom_object,
        outside.KATIB_GROUP, outside.KATIB_VERSION, namespace, outside.KATIB_TRIALS,
        label_selector=outside.KATIB_EXPERIMENT_LABEL, tolerate=(NOT_FOUND,),
    )  # fmt: skip
    crd = f"{outside.KATIB_TRIALS}.{outside.KATIB_GROUP}"
    if answer is None and definition_installed(api, crd):
        # Read as "Katib is not installed", the job of a trial Katib removed once it succeeded would be cancelled.
        raise ClusterUnavailable(f"list Trial {namespace}: 404 Not Found, though its CustomResourceDefinition "
                                 f"{crd} is installed; read again at the next pass")  # fmt: skip
    result = []
    for trial in answer or ():
        meta = trial["metadata"]
        name, maximize, value = outside.objective_of(trial)
        result.append(TrialResult(
            namespace=meta.get("namespace", namespace), experiment=meta["labels"][outside.KATIB_EXPERIMENT_LABEL],
            trial=meta["name"], objective=name, maximize=maximize, value=value, outcome=outside.trial_outcome(trial),
        ))  # fmt: skip
    return result


def experiments(api: Api, namespace: str) -> list[ExperimentResult]:
    """Returns the Katib Experiments of one namespace that have ended, with their best trial
    (`outside.experiment_result`); empty when Katib is not installed (the list answers 404). Listed in that
    namespace only, as its Trials are."""
    answer = api.list_all(
        "Experiment", namespace, api.custom.list_namespaced_custom_object,
        outside.KATIB_GROUP, outside.KATIB_VERSION, namespace, outside.KATIB_EXPERIMENTS, tolerate=(NOT_FOUND,),
    )  # fmt: skip
    ended = (outside.experiment_result(experiment, namespace) for experiment in answer or ())
    return [result for result in ended if result is not None]


def doctor(api: Api, tenants: Tenants) -> list[Finding]:
    """Returns what lets jobs skip the queue: no admission policy enforced (or one of another version than this
    Gangway's, which may not deny what this one expects), and jobs running in team
    namespaces that Gangway does not know (created without the label, or not suspended); then a note per
    kind whose jobs from elsewhere Gangway may not mark Failed (`_status_grant_findings`), of the kinds the
    cluster has: a kind whose list answers 404 (its operator not installed, which the tenants' checks report)
    has no job to mark."""
    findings, enforced = _policy_findings(api)
    teams = {team.slug for team in tenants.teams}
    installed = set()
    for kind in outside.outside_kinds():
        items = api.list_all(
            kind.kind, "*", api.custom.list_cluster_custom_object,
            kind.group, kind.version, kind.plural, label_selector=f"!{JOB_ID_LABEL}", tolerate=(NOT_FOUND,),
        )  # fmt: skip
        if items is not None:
            installed.add(kind.kind)
        for obj in items or ():
            meta = obj["metadata"]
            job = outside.read_outside(obj, kind)
            if meta.get("namespace") not in teams or job.suspended or job.finished:
                continue
            why = ("it carries no gangway.io/queue label" if not job.queue
                   else "it was created running instead of suspended")  # fmt: skip
            # With the policy enforced, such a job predates it (or its namespace's gangway.io/team label).
            policy = "" if enforced else ", and install the admission policy so no job skips the queue"
            findings.append(Finding(
                f"{kind.kind} {meta['namespace']}/{meta['name']} runs in team namespace {meta['namespace']} "
                f"outside Gangway's queue ({why}); its GPUs count as outside usage.",
                f"Recreate it with the label gangway.io/queue: {meta['namespace']} and "
                f"{'.'.join(kind.suspend_path)}: true{policy}.",
            ))  # fmt: skip
    return findings + _status_grant_findings(api, installed)


def _status_grant_findings(api: Api, installed: set[str]) -> list[Finding]:
    """Returns a note per kind Gangway marks Failed (`keeps_written_failure`), of the `installed` ones, whose
    status it may not patch in every namespace, as the API server answers a SelfSubjectAccessReview: the mark
    is sent only for a job refused or cancelled, and its 403 then only logged. A note: admission and adoption
    work without it."""
    findings = []
    for kind in outside.outside_kinds():
        if not kind.keeps_written_failure or kind.kind not in installed:
            continue
        attributes = {"verb": "patch", "group": kind.group, "resource": kind.plural, "subresource": "status"}
        try:
            review = api.call(
                "create", "SelfSubjectAccessReview", f"patch {kind.plural}/status",
                api.authorization.create_self_subject_access_review,
                {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                 "spec": {"resourceAttributes": attributes}},
            )  # fmt: skip
        except ClusterError as error:  # a note's question refused: the other checks still count
            findings.append(Finding(
                f"Gangway could not ask whether it may patch {kind.plural}/status ({error}); without that grant a "
                f"{kind.kind} from elsewhere that Gangway refuses or cancels is not marked Failed.",
                "Grant create on selfsubjectaccessreviews (authorization.k8s.io) to Gangway's service account, as "
                "deploy/kubernetes/rbac.yaml does, and run doctor again.", blocking=False,
            ))  # fmt: skip
            continue
        if not (review.get("status") or {}).get("allowed"):
            findings.append(Finding(
                f"Gangway may not patch {kind.plural}/status: a {kind.kind} from elsewhere that Gangway refuses, or "
                "that a person cancels in Gangway, is not marked Failed, so its Katib trial holds its place in the "
                "experiment and its Pipelines step waits for ever (each reconcile pass logs the refused mark).",
                f"Grant patch on {kind.plural}/status in the API group {kind.group} to Gangway's service account, "
                "as deploy/kubernetes/rbac.yaml does (kubectl apply -k deploy/kubernetes).", blocking=False,
            ))  # fmt: skip
    return findings


def _policy_findings(api: Api) -> tuple[list[Finding], bool]:
    """Returns what is wrong with the admission policy, and whether it is enforced: the policy missing, or its
    binding (without which the API server never evaluates it) missing or not denying, keep it from denying; a
    policy of another version than this Gangway's (`_policy_version_findings`) denies what it says."""
    what = ("TFJobs, PyTorchJobs and TrainJobs created in team namespaces with kubectl, Katib or Pipelines can "
            "start without waiting in Gangway's queue")  # fmt: skip
    fix = "Apply deploy/kubernetes (kubectl apply -k deploy/kubernetes); it ships the policy and its binding."
    found = {
        kind: api.call(
            "read", kind, POLICY_NAME, api.custom.get_cluster_custom_object,
            ADMISSION_GROUP, ADMISSION_VERSION, plural, POLICY_NAME, tolerate=(NOT_FOUND,),
        )  # fmt: skip
        for kind, plural in (("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
                             ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"))
    }  # fmt: skip
    missing = [kind for kind, obj in found.items() if obj is None]
    findings = [Finding(f"The {kind} {POLICY_NAME} is not installed: {what}.", fix) for kind in missing]
    if found["ValidatingAdmissionPolicy"] is not None:
        findings += _policy_version_findings(found["ValidatingAdmissionPolicy"])
    if missing:
        return findings, False
    spec = found["ValidatingAdmissionPolicyBinding"].get("spec") or {}
    actions = spec.get("validationActions") or []
    if spec.get("policyName") != POLICY_NAME or "Deny" not in actions:
        return [Finding(
            f"The ValidatingAdmissionPolicyBinding {POLICY_NAME} does not deny (policyName "
            f"{spec.get('policyName') or 'unset'}, validationActions {', '.join(actions) or 'none'}): {what}.",
            f"Set its policyName to {POLICY_NAME} and its validationActions to [Deny], as deploy/kubernetes does.",
        ), *findings], False  # fmt: skip
    return findings, True


def _policy_version_findings(policy: dict) -> list[Finding]:
    """Returns a finding when the installed policy is not the version this Gangway ships (POLICY_VERSION, read
    from its POLICY_VERSION_ANNOTATION; one without it predates the annotation), empty when it is."""
    installed = ((policy.get("metadata") or {}).get("annotations") or {}).get(POLICY_VERSION_ANNOTATION, "")
    if installed == POLICY_VERSION:
        return []
    update = (f"Apply this release's policy: kubectl apply -f {POLICY_FILE} (or kubectl apply -k deploy/kubernetes), "
              "then run doctor again.")  # fmt: skip
    if installed.isdigit() and int(installed) > int(POLICY_VERSION):
        return [Finding(
            f"The ValidatingAdmissionPolicy {POLICY_NAME} installed is version {installed} "
            f"({POLICY_VERSION_ANNOTATION}), newer than the version {POLICY_VERSION} this Gangway ships: a later "
            "Gangway's, which may deny what this one does or expect what it does not.",
            f"{update} Or upgrade Gangway to the release that ships version {installed}.",
        )]  # fmt: skip
    which = (f"version {installed}" if installed else
             f"an earlier version, without the annotation {POLICY_VERSION_ANNOTATION}")  # fmt: skip
    return [Finding(
        f"The ValidatingAdmissionPolicy {POLICY_NAME} installed is {which}, not the version {POLICY_VERSION} this "
        "Gangway ships: it may let a running job's replicas or what they ask be changed (kubectl edit, apply or "
        "patch) or a PyTorchJob's Workers be scaled (kubectl scale), growing a job past what Gangway counts in its "
        "team's quota.",
        update,
    )]  # fmt: skip

