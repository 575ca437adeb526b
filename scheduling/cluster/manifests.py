"""Pure builders of the Kubernetes objects Gangway owns: dicts in, dicts out.

Nothing here talks to a cluster, so every shape is tested against the
Training Operator SDK models without one. The Kubernetes adapter sends these
dicts as they are; `manage.py manifest` prints them. Jobs are built by their
kind's layout (`job_manifests`); this module builds the Training Operator's
and the objects every layout shares.

Field names follow `kubeflow.org/v1` (training-operator `tensorflow_types.go`,
`pytorch_types.go`, `common_types.go`) and `scheduling.volcano.sh/v1beta1`
(volcano-sh/apis `QueueSpec`).
"""

from __future__ import annotations

from core.quantities import format_memory, format_quantity
from jobs import kinds
from scheduling.cluster.base import ClusterJob, ReplicaSpec, TenantTeam, TenantTier

MANAGED_BY = {"app.kubernetes.io/managed-by": "gangway"}
JOB_ID_LABEL = "gangway.io/job-id"
# Written with every suspend Gangway sends (`job_manifests.suspend_patch`) and removed with every resume and
# admission: an adopted job found suspended without it while Gangway runs it was suspended by its owner
# (`reconcile._stopped_by_owner`), not by a suspend of Gangway's whose database write rolled back.
SUSPENDED_BY_ANNOTATION = "gangway.io/suspended-by"
TEAM_LABEL = "gangway.io/team"
# The GPU type a job's admission gave it, on the job and its pods (the node label that pins
# the type is the type's own, see `type_affinity`).
GPU_TYPE_LABEL = "gangway.io/gpu-type"
VOLCANO_GROUP = "scheduling.volcano.sh"
VOLCANO_VERSION = "v1beta1"
SCHEDULER_NAME = "volcano"
QUOTA_NAME = "gangway-quota"
LIMIT_RANGE_NAME = "gangway-limits"
CHECKPOINT_DIR = "/checkpoint"  # also reserved in `jobs.spec.RESERVED_PATHS`
SHM_DIR = "/dev/shm"
# What a pod may mount: the volume types of the restricted Pod Security Standard Gangway uses.
# Never hostPath, and Secrets only as a team's own objects (none are mounted today).
VOLUME_TYPES = ("persistentVolumeClaim", "configMap", "emptyDir")

# GPU node pools are commonly tainted nvidia.com/gpu:NoSchedule (GKE and AKS
# do it by default); every Gangway pod tolerates that, so the adapter counts
# such nodes as schedulable and the policy may place any replica there.
TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)

# Gangway resource names (the policy's) to Kubernetes resource names.
RESOURCE_NAMES = {"gpu": "nvidia.com/gpu", "cpu": "cpu", "memory": "memory"}


def resource_list(amounts: dict[str, int], prefix: str = "") -> dict[str, str]:
    """Returns a Kubernetes ResourceList for Gangway amounts, zero amounts left out."""
    return {
        prefix + RESOURCE_NAMES[resource]: format_quantity(resource, amount)
        for resource, amount in amounts.items()
        if amount and resource in RESOURCE_NAMES
    }


def job_labels(job: ClusterJob) -> dict[str, str]:
    """Returns the labels joining a cluster job, and every pod it owns, to its Gangway job (and the GPU
    type its admission gave it, when it has one)."""
    return {JOB_ID_LABEL: str(job.job_id), TEAM_LABEL: job.team, **type_labels(job), **MANAGED_BY}


def type_labels(job: ClusterJob) -> dict[str, str]:
    """Returns {gangway.io/gpu-type: the type} for a job admitted on a GPU type; {} without one."""
    return {GPU_TYPE_LABEL: job.gpu_type} if job.gpu_type else {}


def type_affinity(job: ClusterJob, terms: list[dict] | tuple[()] = ()) -> dict:
    """Returns the pod `affinity` that pins a replica to the nodes of the job's GPU type; {} without a type.

    A required node affinity: Kubernetes ORs the `nodeSelectorTerms` and ANDs the expressions within
    one, so each of the owner's `terms` (an adopted job's own) also asks for the type's label, in
    place of an expression on that label it had (a type given at an earlier admission, or the
    owner's choice, which its import already read into the job's types). No terms: one term, the type.
    """
    if not job.gpu_type_label:
        return {}
    key, value = job.gpu_type_label
    pin = {"key": key, "operator": "In", "values": [value]}
    pinned = [
        {**term, "matchExpressions": [*(e for e in term.get("matchExpressions") or () if e.get("key") != key), pin]}
        for term in terms or ({},)
    ]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": pinned}}}


def required_terms(pod_spec: dict) -> list[dict]:
    """Returns the required node affinity terms of a pod spec (what a node must match); [] when it has none."""
    node_affinity = ((pod_spec or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return list((node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or ())


def training_job(job: ClusterJob) -> dict:
    """Returns the Training Operator job (`kubeflow.org/v1`: TFJob, PyTorchJob...) for a Gangway job.

    Every replica pod is gang-scheduled by Volcano: `schedulerName: volcano`,
    and `runPolicy.schedulingPolicy` asks for all replicas at once in the
    team's queue at the tier's priority. The job is created running
    (`suspend: false`); preemption flips `suspend` and the pods get the tier's
    grace period to write a checkpoint.
    """
    kind = kinds.get(job.kind)
    labels = job_labels(job)
    run_policy: dict = {
        # Running pods of a finished job (a TFJob's parameter servers never
        # exit) are removed so they stop holding GPUs; finished pods stay for logs
        # until reconcile deletes the job, ENDED_JOB_RETENTION after it ended.
        "cleanPodPolicy": "Running",
        "suspend": False,
        "schedulingPolicy": {
            "minAvailable": sum(replica.count for replica in job.replicas),
            "queue": job.team,
            "priorityClass": job.tier,
        },
    }
    if job.max_runtime:
        run_policy["activeDeadlineSeconds"] = job.max_runtime
    return {
        "apiVersion": kind.api_version,
        "kind": kind.name,
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": labels},
        "spec": {
            "runPolicy": run_policy,
            kind.replica_specs: {
                replica.role: {
                    "replicas": replica.count,
                    # A crashed worker restarts in place on its node, keeping
                    # its GPU, instead of breaking up the gang.
                    "restartPolicy": "OnFailure",
                    "template": _pod_template(job, kind.container, replica, labels),
                }
                for replica in job.replicas
            },
        },
    }


def training_job_resume(job: ClusterJob) -> dict:
    """Returns the merge patch that resumes a suspended Training Operator job.

    The replica templates are sent again so the pods of the new attempt see
    GANGWAY_ATTEMPT + 1 (a merge patch replaces the lists) and are pinned to the
    GPU type this admission gave, which may differ from the last one's; the
    job's type label follows.
    """
    kind = kinds.get(job.kind)
    patch: dict = {"spec": {"runPolicy": {"suspend": False},
                            kind.replica_specs: training_job(job)["spec"][kind.replica_specs]}}  # fmt: skip
    if job.gpu_type:
        patch["metadata"] = {"labels": type_labels(job)}
    return patch


def training_job_replicas(manifest: dict) -> list[tuple[str, int, dict]]:
    """Returns (role, replicas, the container's resource limits) of each replica group of a built job."""
    kind = kinds.get(manifest["kind"])
    groups = (manifest.get("spec") or {}).get(kind.replica_specs) or {}
    return [
        (role, int(group.get("replicas", 1)),
         group["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {}))
        for role, group in groups.items()
    ]  # fmt: skip


def training_job_terms(manifest: dict) -> list[list[dict]]:
    """Returns the required node affinity terms of each replica group of a built job ([] for a group that may go
    on any node), in the order `training_job_replicas` gives the groups."""
    kind = kinds.get(manifest["kind"])
    groups = (manifest.get("spec") or {}).get(kind.replica_specs) or {}
    return [required_terms((group.get("template") or {}).get("spec") or {}) for group in groups.values()]


def _pod_template(job: ClusterJob, container_name: str, replica: ReplicaSpec, labels: dict) -> dict:
    """Returns the pod template of one replica group.

    On a job admitted on a GPU type every group is pinned to that type's nodes, those without
    GPUs too (a TFJob's parameter servers): the policy placed the whole gang on the type's nodes
    (R11) and counted each replica's CPU and memory there, so a replica let loose elsewhere would
    take room the policy counts as free for other jobs.
    """
    resources = resource_list({"gpu": replica.gpu, "cpu": replica.cpu, "memory": replica.memory})
    container: dict = {"name": container_name, "image": job.image}
    if job.command:
        container["command"] = list(job.command)
    if job.args:
        container["args"] = list(job.args)
    spec: dict = {
        "schedulerName": SCHEDULER_NAME,
        "priorityClassName": job.tier,
        "terminationGracePeriodSeconds": job.grace_period,
        "tolerations": [dict(toleration) for toleration in TOLERATIONS],
        "containers": [container],
    }
    if affinity := type_affinity(job):
        spec["affinity"] = affinity
    volumes, mounts = pod_volumes(job)
    if volumes:
        container["volumeMounts"] = mounts
        spec["volumes"] = volumes
    container["env"] = job_env(job)
    container["resources"] = {"requests": resources, "limits": dict(resources)}
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def job_env(job: ClusterJob) -> list[dict]:
    """Returns the environment of every replica's container: the job's own, then what Gangway adds.

    GANGWAY_JOB_ID and GANGWAY_ATTEMPT always; GANGWAY_URL and GANGWAY_JOB_TOKEN when the
    portal's address is known (checkpoint reports); CHECKPOINT_DIR when the team has a claim.
    """
    env = dict(job.env)
    env["GANGWAY_JOB_ID"] = str(job.job_id)
    env["GANGWAY_ATTEMPT"] = str(job.attempt)
    if job.gangway_url and job.job_token:
        env["GANGWAY_URL"] = job.gangway_url
        env["GANGWAY_JOB_TOKEN"] = job.job_token
    if job.checkpoint_claim:
        env["CHECKPOINT_DIR"] = CHECKPOINT_DIR
    return [{"name": name, "value": value} for name, value in env.items()]


def pod_volumes(job: ClusterJob) -> tuple[list[dict], list[dict]]:
    """Returns (the pod's volumes, the container's volumeMounts) of a job; empty lists when it mounts nothing.

    The team's checkpoint claim at /checkpoint, the job's claims and config
    maps at their paths, and /dev/shm as a memory-backed emptyDir whose
    sizeLimit is the job's shm (the replica's memory limit already covers it).
    """
    volumes: list[dict] = []
    mounts: list[dict] = []
    if job.checkpoint_claim:
        volumes.append({"name": "checkpoint", "persistentVolumeClaim": {"claimName": job.checkpoint_claim}})
        mounts.append({"name": "checkpoint", "mountPath": CHECKPOINT_DIR})
    for index, volume in enumerate(job.volumes):
        if volume.source == "claim":
            name = f"claim-{index}"
            source = {"persistentVolumeClaim": {"claimName": volume.name, "readOnly": volume.read_only}}
        else:
            name = f"config-{index}"
            source = {"configMap": {"name": volume.name}}
        volumes.append({"name": name, **source})
        mounts.append({"name": name, "mountPath": volume.path, "readOnly": volume.read_only})
    if job.shm:
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": format_memory(job.shm)}})
        mounts.append({"name": "shm", "mountPath": SHM_DIR})
    return volumes, mounts


def namespace(team: TenantTeam) -> dict:
    """Returns the Namespace of a team (named by its slug)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": team.slug, "labels": {TEAM_LABEL: team.slug, **MANAGED_BY}},
    }


def quota_ceiling(team: TenantTeam) -> dict[str, int]:
    """Returns nominal + borrowing limit for each resource the team's quota names.

    A resource with no borrowing limit has no ceiling and is left out; a
    resource the quota does not name is limited by node capacity alone.
    """
    return {
        resource: amount + team.borrowing_limit[resource]
        for resource, amount in team.nominal.items()
        if resource in team.borrowing_limit
    }


def resource_quota(team: TenantTeam) -> dict:
    """Returns the team's ResourceQuota: a backstop at nominal + borrowing limit on requests."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": QUOTA_NAME, "namespace": team.slug, "labels": dict(MANAGED_BY)},
        "spec": {"hard": resource_list(quota_ceiling(team), prefix="requests.")},
    }


def limit_range(team: TenantTeam) -> dict:
    """Returns the team's LimitRange: per-pod maximums and per-container defaults.

    Defaults are both `default` (limits) and `defaultRequest` (requests), as
    Gangway keeps requests equal to limits; a GPU default is never set.
    """
    limits = []
    maximum = resource_list(team.per_replica_max)
    if maximum:
        limits.append({"type": "Pod", "max": maximum})
    defaults = resource_list({r: v for r, v in team.default_request.items() if r != "gpu"})
    if defaults:
        limits.append({"type": "Container", "default": defaults, "defaultRequest": dict(defaults)})
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": LIMIT_RANGE_NAME, "namespace": team.slug, "labels": dict(MANAGED_BY)},
        "spec": {"limits": limits},
    }


def priority_class(tier: TenantTier) -> dict:
    """Returns the PriorityClass of a tier (same name, same value).

    `preemptionPolicy: Never` on every tier: Gangway is the only one that
    preempts, by suspending whole jobs after their grace period and
    requeueing them. A scheduler evicting single pods to make room would
    break gangs apart and bypass the reclaim and no-poaching rules.
    """
    kept = "may be preempted by Gangway" if tier.preemptible else "never preempted"
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": tier.name, "labels": dict(MANAGED_BY)},
        "value": tier.value,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": f"Gangway tier {tier.name}: {kept}.",
    }


def volcano_queue(team: TenantTeam) -> dict:
    """Returns the team's Volcano Queue: deserved = nominal, capability = the quota ceiling.

    Volcano weights are integers of at least 1, so the team's weight is
    rounded; Gangway's own fair sharing (R9) uses the exact weight.
    """
    spec: dict = {
        "weight": max(1, round(team.weight)),
        "reclaimable": True,
        "deserved": resource_list(team.nominal),
    }
    capability = resource_list(quota_ceiling(team))
    if capability:
        spec["capability"] = capability
    return {
        "apiVersion": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
        "kind": "Queue",
        "metadata": {"name": team.slug, "labels": {TEAM_LABEL: team.slug, **MANAGED_BY}},
        "spec": spec,
    }
