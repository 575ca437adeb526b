"""A Training Operator (v1) manifest read as the job spec: TFJob, PyTorchJob, every kind of that layout.

Each replica type becomes a replica group; the first container of its pod template gives
the image, command, args, literal env, resources and mounts (read in `pod_template.py`);
everything else is listed back as unsupported.
"""

from __future__ import annotations

from jobs import kinds
from jobs.manifest_fields import as_mapping, list_unsupported
from jobs.node_selection import NODE_SELECTION
from jobs.pod_template import MANAGED, amounts, gpu_types_of, literal_env, volumes_of, without_shm
from jobs.spec import SpecError


def spec_from_replica_specs(kind: kinds.JobKind, manifest: dict) -> tuple[dict, list[str]]:
    """(spec data, unsupported fields) from a Training Operator (v1) manifest: TFJob, PyTorchJob..."""
    unsupported: list[str] = []
    replica_key = kind.replica_specs
    list_unsupported(unsupported, "", manifest, {"apiVersion", "kind", "metadata", "spec"})
    metadata = as_mapping(manifest.get("metadata"), "metadata")
    spec = as_mapping(manifest.get("spec"), "spec")
    list_unsupported(unsupported, "metadata", metadata, {"name", "namespace"})
    list_unsupported(unsupported, "spec", spec, {replica_key, "runPolicy"})
    run_policy = as_mapping(spec.get("runPolicy"), "spec.runPolicy")
    list_unsupported(unsupported, "spec.runPolicy", run_policy, {"activeDeadlineSeconds", "schedulingPolicy", "suspend"})
    data: dict = {"name": metadata.get("name"), "kind": kind.name, "replicas": []}
    if metadata.get("namespace"):
        data["team"] = metadata["namespace"]
    if run_policy.get("activeDeadlineSeconds") is not None:
        data["max_runtime"] = run_policy["activeDeadlineSeconds"]
    tier = as_mapping(run_policy.get("schedulingPolicy"), "spec.runPolicy.schedulingPolicy").get("priorityClass")
    replica_specs = as_mapping(spec.get(replica_key), f"spec.{replica_key}")
    if not replica_specs:
        raise SpecError({f"spec.{replica_key}": [f"Required: at least one replica type, e.g. {kind.default_role}."]})
    for role, replica in replica_specs.items():
        path = f"spec.{replica_key}.{role}"
        replica = as_mapping(replica, path)
        list_unsupported(unsupported, path, replica, {"replicas", "template", "restartPolicy"})
        pod = as_mapping(as_mapping(replica.get("template"), f"{path}.template").get("spec"), f"{path}.template.spec")
        list_unsupported(unsupported, f"{path}.template.spec", pod, {"containers", "volumes"} | MANAGED | NODE_SELECTION)
        gpu_types_of(data, pod, f"{path}.template.spec", unsupported)
        tier = tier or pod.get("priorityClassName")
        containers = pod.get("containers") or []
        if not isinstance(containers, list) or not containers:
            raise SpecError({f"{path}.template.spec.containers": ["Required: one container."]})
        if len(containers) > 1:
            unsupported.append(f"{path}.template.spec.containers[1:] (only the first container is used)")
        container = as_mapping(containers[0], f"{path}.template.spec.containers[0]")
        list_unsupported(unsupported, f"{path}.template.spec.containers[0]", container,
                         {"name", "image", "command", "args", "env", "resources", "volumeMounts"})  # fmt: skip
        for key in ("image", "command", "args"):
            if key in container and key not in data:
                data[key] = container[key]
        # `or []`: an empty env of any type ("", {}) reads as none here, as it always has
        env = literal_env(container.get("env") or [], f"{path}.template.spec.containers[0].env", unsupported)
        if env:
            data.setdefault("env", {}).update(env)
        volumes, shm = volumes_of(pod, container, path, unsupported)
        for volume in volumes:
            if volume not in data.setdefault("volumes", []):
                data["volumes"].append(volume)
        resources = _resources(container, path, unsupported)
        if shm:
            data["shm"] = shm
            resources = without_shm(resources, shm)
        data["replicas"].append({"role": role, "count": replica.get("replicas", 1), **resources})
    if tier:
        data["tier"] = tier
    return data, unsupported


def _resources(container: dict, path: str, unsupported: list[str]) -> dict:
    return amounts(container.get("resources"), f"{path}.template.spec.containers[0].resources", unsupported)
