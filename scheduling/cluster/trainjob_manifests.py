"""The builder of Kubeflow Trainer v2 jobs: a TrainJob (`trainer.kubeflow.org/v1alpha1`) for a Gangway job.

Field names follow trainer `pkg/apis/trainer/v1alpha1/trainjob_types.go` (v2.2 and later:
`runtimeRef`, `trainer`, `runtimePatches`, `suspend`, `activeDeadlineSeconds`).

What the TrainJob API lets a job set, and what it leaves to its runtime:
- Gang scheduling is the runtime's: a ClusterTrainingRuntime with `podGroupPolicy.volcano`
  makes the trainer create a Volcano PodGroup of all nodes at once (minMember = numNodes),
  and its pod templates name `schedulerName: volcano`. `doctor` reports runtimes without it.
- The queue is the annotation `scheduling.volcano.sh/queue-name`, which the trainer's Volcano
  plugin reads from the runtime template's metadata, where a runtime patch may set it.
- The priority class is not settable: the PodGroup takes the `priorityClassName` of the
  runtime's pod template, and a patch's pod spec has no such field. Gangway admits and
  preempts by tier itself (every PriorityClass it makes is `preemptionPolicy: Never`); the
  tier is written in the label `gangway.io/tier` on the job and its pods.
- `trainer` is immutable, so a resumed TrainJob keeps the GANGWAY_ATTEMPT of its first start.
- A patch's pod `affinity` may change (its `volumes` and `containers` may not): the GPU type is
  pinned there, and a TrainJob resumed on another type gets Gangway's patch again with the new one.
"""

from __future__ import annotations

from jobs import kinds
from scheduling.cluster.base import ClusterJob
from scheduling.cluster.manifests import (
    TOLERATIONS, job_env, job_labels, pod_volumes, required_terms, resource_list, type_affinity, type_labels,
)

# Who owns the runtime patch Gangway writes (a patch's `manager`, at most 253 characters).
PATCH_MANAGER = "gangway.io/scheduler"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
TIER_LABEL = "gangway.io/tier"


def train_job(job: ClusterJob) -> dict:
    """Returns the TrainJob for a Gangway job: its runtime, `numNodes` nodes of the one replica group, running.

    The runtime patch puts the team's Volcano queue on the JobSet, Gangway's labels (the job id
    the adapter finds the pods by) on every pod, and the tolerations, grace period, the GPU type's
    node affinity and volumes on every node; the job is created running (`suspend: false`) and
    preemption flips `suspend`.
    """
    kind = kinds.get(job.kind)
    (node,) = job.replicas
    labels = {**job_labels(job), TIER_LABEL: job.tier}
    resources = resource_list({"gpu": node.gpu, "cpu": node.cpu, "memory": node.memory})
    trainer: dict = {"image": job.image}
    if job.command:
        trainer["command"] = list(job.command)
    if job.args:
        trainer["args"] = list(job.args)
    trainer.update({
        "env": job_env(job), "numNodes": node.count,
        "resourcesPerNode": {"requests": resources, "limits": dict(resources)},
    })  # fmt: skip
    pod_spec = node_pod_spec(job)
    volumes, mounts = pod_volumes(job)
    if volumes:
        pod_spec["volumes"] = volumes
        pod_spec["containers"] = [{"name": kind.container, "volumeMounts": mounts}]
    patch = runtime_patch(job, labels=labels, pod_spec=pod_spec)
    spec: dict = {
        "runtimeRef": {"name": job.runtime, "apiGroup": kind.group, "kind": kind.runtime_kind},
        "suspend": False,
        "trainer": trainer,
        "runtimePatches": [patch],
    }
    if job.max_runtime:
        spec["activeDeadlineSeconds"] = job.max_runtime
    return {
        "apiVersion": kind.api_version,
        "kind": kind.name,
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": labels},
        "spec": spec,
    }


def node_pod_spec(job: ClusterJob, terms: list[dict] | tuple[()] = ()) -> dict:
    """Returns the pod fields Gangway owns on every node of a TrainJob: the GPU tolerations, the grace period
    and, on a job admitted on a GPU type, the node affinity that pins it there (each of the owner's
    required `terms` of an adopted job also asks for the type; see `manifests.type_affinity`)."""
    spec: dict = {
        "tolerations": [dict(toleration) for toleration in TOLERATIONS],
        "terminationGracePeriodSeconds": job.grace_period,
    }
    if affinity := type_affinity(job, terms):
        spec["affinity"] = affinity
    return spec


def runtime_patch(job: ClusterJob, *, labels: dict, pod_spec: dict) -> dict:
    """Returns Gangway's runtime patch (its `manager` is PATCH_MANAGER): the team's Volcano queue on the JobSet,
    `labels` on it and on every node's pod, and `pod_spec` on every node's pod.

    Gangway's own TrainJobs and the TrainJobs it adopts carry the same patch; an adopted one's
    volumes stay in its owner's patches.
    """
    kind = kinds.get(job.kind)
    return {
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {
            "metadata": {"labels": dict(labels), "annotations": {QUEUE_ANNOTATION: job.team}},
            "spec": {"replicatedJobs": [{
                # The trainer names its nodes' replicated job and their container alike ("node").
                "name": kind.container,
                "template": {"spec": {"template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}}},
            }]},
        }},
    }  # fmt: skip


def train_job_resume(job: ClusterJob) -> dict:
    """Returns the merge patch that resumes a suspended TrainJob: `suspend`, as `trainer` cannot change; on a job
    admitted on a GPU type, also Gangway's runtime patch (as built, so its volumes stay as they are) pinning it
    to this admission's type, and the job's type label."""
    if not job.gpu_type:
        return {"spec": {"suspend": False}}
    return {"metadata": {"labels": type_labels(job)},
            "spec": {"suspend": False, "runtimePatches": train_job(job)["spec"]["runtimePatches"]}}  # fmt: skip


def train_job_replicas(manifest: dict) -> list[tuple[str, int, dict]]:
    """Returns the one group of a built TrainJob: (its role, numNodes, resourcesPerNode limits)."""
    kind = kinds.get(manifest["kind"])
    trainer = (manifest.get("spec") or {}).get("trainer") or {}
    limits = (trainer.get("resourcesPerNode") or {}).get("limits") or {}
    return [(kind.roles[0].name, int(trainer.get("numNodes", 1)), limits)]


def train_job_terms(manifest: dict) -> list[list[dict]]:
    """Returns the required node affinity terms of the one group of a built TrainJob ([] when it may go on any
    node): those of the last runtime patch that sets its nodes' affinity, as a later patch overrides an earlier."""
    kind = kinds.get(manifest["kind"])
    terms: list[dict] = []
    for patch in (manifest.get("spec") or {}).get("runtimePatches") or ():
        template = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for replicated in template.get("replicatedJobs") or ():
            pod = (((replicated.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            if replicated.get("name") == kind.container and "affinity" in pod:
                terms = required_terms(pod)
    return [terms]
