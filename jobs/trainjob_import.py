"""A Kubeflow Trainer v2 TrainJob read as the job spec: its trainer, runtime reference and runtime patches."""

from __future__ import annotations

from jobs import kinds
from jobs.manifest_fields import as_mapping, as_name, list_unsupported
from jobs.node_selection import NODE_SELECTION
from jobs.pod_template import MANAGED, amounts, gpu_types_of, literal_env, volumes_of, without_shm
from jobs.spec import SpecError

TRAINER_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"  # the default managedBy: the trainer itself
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"  # Gangway sets the team's queue itself


def spec_from_trainjob(kind: kinds.JobKind, manifest: dict) -> tuple[dict, list[str]]:
    """(spec data, unsupported fields) from a Kubeflow Trainer v2 TrainJob (`trainer.kubeflow.org/v1alpha1`).

    runtimeRef names the runtime; trainer gives the image, command, args, literal env, numNodes
    and resourcesPerNode; activeDeadlineSeconds the max runtime; a runtime patch's pod volumes
    and the node container's mounts the volumes and shm. suspend, the queue annotation, the
    tolerations and the grace period are Gangway's to set; everything else is listed.
    """
    unsupported: list[str] = []
    list_unsupported(unsupported, "", manifest, {"apiVersion", "kind", "metadata", "spec"})
    metadata = as_mapping(manifest.get("metadata"), "metadata")
    spec = as_mapping(manifest.get("spec"), "spec")
    list_unsupported(unsupported, "metadata", metadata, {"name", "namespace"})
    list_unsupported(unsupported, "spec", spec, {"runtimeRef", "trainer", "suspend", "activeDeadlineSeconds", "managedBy",
                                                 "runtimePatches"})  # fmt: skip
    if spec.get("managedBy") not in (None, TRAINER_CONTROLLER):
        unsupported.append("spec.managedBy (Gangway's jobs are run by the trainer itself)")
    ref = as_mapping(spec.get("runtimeRef"), "spec.runtimeRef")
    list_unsupported(unsupported, "spec.runtimeRef", ref, {"name", "kind", "apiGroup"})
    if ref.get("kind", kind.runtime_kind) != kind.runtime_kind or ref.get("apiGroup", kind.group) != kind.group:
        raise SpecError({"spec.runtimeRef": [f"Gangway runs a {kind.name} on a {kind.runtime_kind} ({kind.group}), "
                                             f"got {ref.get('kind')!r} of {ref.get('apiGroup')!r}."]})  # fmt: skip
    trainer = as_mapping(spec.get("trainer"), "spec.trainer")
    list_unsupported(unsupported, "spec.trainer", trainer,
                     {"image", "command", "args", "env", "numNodes", "resourcesPerNode"})  # fmt: skip
    data: dict = {"name": metadata.get("name"), "kind": kind.name, "runtime": ref.get("name")}
    if namespace := as_name(metadata.get("namespace"), "metadata.namespace"):
        data["team"] = namespace
    if spec.get("activeDeadlineSeconds") is not None:
        data["max_runtime"] = spec["activeDeadlineSeconds"]
    data.update({key: trainer[key] for key in ("image", "command", "args") if key in trainer})
    env = literal_env(trainer.get("env"), "spec.trainer.env", unsupported)
    if env:
        data["env"] = env
    pod, container, path = _node_patch(kind, spec.get("runtimePatches"), unsupported)
    volumes, shm = volumes_of(pod, container, path, unsupported, namespace=data.get("team", ""))
    if volumes:
        data["volumes"] = volumes
    gpu_types_of(data, pod, f"{path}.template.spec", unsupported)
    resources = amounts(trainer.get("resourcesPerNode"), "spec.trainer.resourcesPerNode", unsupported)
    if shm:
        data["shm"] = shm
        resources = without_shm(resources, shm)
    data["num_nodes"] = trainer.get("numNodes", 1)
    if resources:
        data["resources_per_node"] = resources
    return data, unsupported


def _node_patch(kind: kinds.JobKind, patches: object, unsupported: list[str]) -> tuple[dict, dict, str]:
    """(pod spec patch, node container patch, its replicated job's path) of a TrainJob's runtime patches.

    The volumes and mounts Gangway reads come from there; the queue annotation, tolerations and
    grace period are Gangway's own; anything else in a patch is listed in `unsupported`.
    """
    if patches is None:
        return {}, {}, ""
    if not isinstance(patches, list):
        raise SpecError({"spec.runtimePatches": ["Must be a list of patches."]})
    pod, container, path_of_pod = {}, {}, ""
    for index, patch in enumerate(patches):
        path = f"spec.runtimePatches[{index}]"
        patch = as_mapping(patch, path)
        list_unsupported(unsupported, path, patch, {"manager", "time", "trainingRuntimeSpec"})
        runtime_spec = as_mapping(patch.get("trainingRuntimeSpec"), f"{path}.trainingRuntimeSpec")
        list_unsupported(unsupported, f"{path}.trainingRuntimeSpec", runtime_spec, {"template"})
        path += ".trainingRuntimeSpec.template"
        template = as_mapping(runtime_spec.get("template"), path)
        list_unsupported(unsupported, path, template, {"metadata", "spec"})
        meta = as_mapping(template.get("metadata"), f"{path}.metadata")
        list_unsupported(unsupported, f"{path}.metadata", meta, {"annotations"})
        list_unsupported(unsupported, f"{path}.metadata.annotations", as_mapping(meta.get("annotations"), path),
                         {QUEUE_ANNOTATION})  # fmt: skip
        jobset = as_mapping(template.get("spec"), f"{path}.spec")
        list_unsupported(unsupported, f"{path}.spec", jobset, {"replicatedJobs"})
        replicated_jobs = jobset.get("replicatedJobs") or []
        if not isinstance(replicated_jobs, list):
            raise SpecError({f"{path}.spec.replicatedJobs": ["Must be a list of replicated jobs."]})
        for job_index, replicated in enumerate(replicated_jobs):
            job_path = f"{path}.spec.replicatedJobs[{job_index}]"
            replicated = as_mapping(replicated, job_path)
            if replicated.get("name") != kind.container:
                unsupported.append(f"{job_path} (only the {kind.container} replicated job)")
                continue
            job_template = as_mapping(as_mapping(replicated.get("template"), f"{job_path}.template").get("spec"),
                                      f"{job_path}.template.spec")  # fmt: skip
            list_unsupported(unsupported, f"{job_path}.template.spec", job_template, {"template"})
            path_of_pod = f"{job_path}.template.spec"  # as `volumes_of` names the pod's fields
            where = f"{path_of_pod}.template"
            pod_template = as_mapping(job_template.get("template"), where)
            list_unsupported(unsupported, where, pod_template, {"spec"})
            pod = as_mapping(pod_template.get("spec"), f"{where}.spec")
            list_unsupported(unsupported, f"{where}.spec", pod, {"volumes", "containers"} | MANAGED | NODE_SELECTION)
            for number, item in enumerate(pod.get("containers") or []):
                item = as_mapping(item, f"{where}.spec.containers[{number}]")
                if item.get("name") == kind.container:
                    container = item
                    list_unsupported(unsupported, f"{where}.spec.containers[{number}]", item, {"name", "volumeMounts"})
                else:
                    unsupported.append(f"{where}.spec.containers[{number}] (only the {kind.container} container)")
    return pod, container, (path_of_pod if pod else "")
