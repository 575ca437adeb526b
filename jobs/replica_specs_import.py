"""A Training Operator (v1) manifest read as the job spec: TFJob, PyTorchJob, every kind of that layout.

Each replica type becomes a replica group; the training container of its pod template (the
one named as the operator looks for it, else the only one) gives the image, command, args,
literal env, resources and mounts (read in `pod_template.py`);
everything else is listed back as unsupported, and so is a later replica type's image, command,
args, env value or /dev/shm that differs from the one taken (the job has one of each).
"""

from __future__ import annotations

from jobs import kinds
from jobs.manifest_fields import as_mapping, as_name, list_unsupported
from jobs.node_selection import NODE_SELECTION
from jobs.pod_template import MANAGED, amounts, gpu_types_of, literal_env, volumes_of, without_shm
from jobs.spec import SpecError

RESTART_POLICY = "OnFailure"  # what Gangway sets on every replica type (`scheduling.cluster.manifests`)


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
    if namespace := as_name(metadata.get("namespace"), "metadata.namespace"):
        data["team"] = namespace
    if run_policy.get("activeDeadlineSeconds") is not None:
        data["max_runtime"] = run_policy["activeDeadlineSeconds"]
    scheduling = as_mapping(run_policy.get("schedulingPolicy"), "spec.runPolicy.schedulingPolicy")
    list_unsupported(unsupported, "spec.runPolicy.schedulingPolicy", scheduling, {"priorityClass", "minAvailable", "queue"})
    tier = scheduling.get("priorityClass")
    replica_specs = as_mapping(spec.get(replica_key), f"spec.{replica_key}")
    given_by: dict[str, str] = {}  # the replica type each image, command, args and env value was taken from
    shm_of: dict[str, str | None] = {}  # each replica type's /dev/shm size, None for none
    set_by: dict[str, tuple[str, set, set]] = {}  # each type's container: its path, and what it sets itself
    if not replica_specs:
        raise SpecError({f"spec.{replica_key}": [f"Required: at least one replica type, e.g. {kind.default_role}."]})
    for role, replica in replica_specs.items():
        path = f"spec.{replica_key}.{role}"
        replica = as_mapping(replica, path)
        list_unsupported(unsupported, path, replica, {"replicas", "template", "restartPolicy"})
        if replica.get("restartPolicy", RESTART_POLICY) != RESTART_POLICY:
            unsupported.append(f"{path}.restartPolicy ({replica['restartPolicy']}; Gangway sets {RESTART_POLICY}, "
                               "restarting a failed replica in place)")  # fmt: skip
        template = as_mapping(replica.get("template"), f"{path}.template")
        list_unsupported(unsupported, f"{path}.template", template, {"spec"})  # its metadata: labels, annotations
        pod = as_mapping(template.get("spec"), f"{path}.template.spec")
        list_unsupported(unsupported, f"{path}.template.spec", pod, {"containers", "volumes"} | MANAGED | NODE_SELECTION)
        gpu_types_of(data, pod, f"{path}.template.spec", unsupported)
        tier = tier or pod.get("priorityClassName")
        number, container = _training_container(kind, pod, f"{path}.template.spec", unsupported)
        at = f"{path}.template.spec.containers[{number}]"
        list_unsupported(unsupported, at, container,
                         {"name", "image", "command", "args", "env", "resources", "volumeMounts"})  # fmt: skip
        # One image, command, args and env serve every replica group: the first replica type that sets one
        # gives it, and a later type's other value is listed back (a PS's CPU image must not hide a Worker's),
        # as is a type that sets none, which runs the one given all the same (`_unset`, after every type).
        for key in ("image", "command", "args"):
            if key in container and key not in data:
                data[key], given_by[key] = container[key], role
            elif key in container and container[key] != data[key]:
                unsupported.append(f"{at}.{key} (differs from {given_by[key]}'s; "
                                   f"one {key} serves every replica)")  # fmt: skip
        # `or []`: an empty env of any type ("", {}) reads as none here, as it always has
        env = literal_env(container.get("env") or [], f"{at}.env", unsupported)
        set_by[role] = (at, {key for key in ("command", "args") if key in container}, set(env))
        for name, value in env.items():
            job_env = data.setdefault("env", {})
            if name not in job_env:
                job_env[name], given_by[f"env.{name}"] = value, role
            elif job_env[name] != value:
                unsupported.append(f"{at}.env.{name} (differs from "
                                   f"{given_by[f'env.{name}']}'s; one value serves every replica)")  # fmt: skip
        volumes, shm = volumes_of(pod, container, path, unsupported, container_index=number,
                                 namespace=data.get("team", ""))  # fmt: skip
        for volume in volumes:
            if volume not in data.setdefault("volumes", []):
                data["volumes"].append(volume)
        resources = amounts(container.get("resources"), f"{at}.resources", unsupported)
        shm_of[role] = shm
        if shm:
            data.setdefault("shm", shm)
            resources = without_shm(resources, shm)
        data["replicas"].append({"role": role, "count": replica.get("replicas", 1), **resources})
    _unset(set_by, data, given_by, unsupported)
    # One /dev/shm serves every replica group, added to each one's memory: the first replica type's
    # is kept, and a type that mounts another size, or none, is listed back.
    given = next((role for role, shm in shm_of.items() if shm), None)
    for role, shm in shm_of.items():
        if given and shm != data["shm"]:
            mounted = f"a /dev/shm of {shm}" if shm else "no /dev/shm"
            unsupported.append(f"spec.{replica_key}.{role}.template.spec ({mounted}, differs from {given}'s "
                               f"{data['shm']}; one /dev/shm serves every replica, counted in its memory)")  # fmt: skip
    # Gangway asks Volcano for every replica at once, in the team's queue.
    replicas = sum(group["count"] for group in data["replicas"] if isinstance(group["count"], int))
    if scheduling.get("minAvailable", replicas) != replicas:
        unsupported.append(f"spec.runPolicy.schedulingPolicy.minAvailable ({scheduling['minAvailable']}; Gangway "
                           f"starts all {replicas} replicas at once)")  # fmt: skip
    if scheduling.get("queue", data.get("team")) != data.get("team"):
        unsupported.append(f"spec.runPolicy.schedulingPolicy.queue ({scheduling['queue']}; Gangway sets the team's queue)")
    if tier:
        data["tier"] = tier
    return data, unsupported


def _unset(set_by: dict[str, tuple[str, set, set]], data: dict, given_by: dict[str, str],
           unsupported: list[str]) -> None:
    """Lists each replica type's container that sets no command, args or env variable another type gives:
    it runs that one all the same (a PS without args gets the Worker's, a Worker the PS's variables)."""
    for role, (at, keys, names) in set_by.items():
        for key in ("command", "args"):
            if key in data and key not in keys:
                unsupported.append(f"{at}.{key} (not set; {given_by[key]}'s serves every replica)")
        for name in data.get("env", {}):
            if name not in names:
                unsupported.append(f"{at}.env.{name} (not set; {given_by[f'env.{name}']}'s value serves every "
                                   "replica)")  # fmt: skip


def _training_container(kind: kinds.JobKind, pod: dict, where: str, unsupported: list[str]) -> tuple[int, dict]:
    """(index, container) of the pod's training container: the one named as the operator looks for it
    (a sidecar may come first), else the only one; every other container is listed back."""
    containers = pod.get("containers") or []
    if not isinstance(containers, list) or not containers:
        raise SpecError({f"{where}.containers": ["Required: one container."]})
    containers = [as_mapping(item, f"{where}.containers[{number}]") for number, item in enumerate(containers)]
    named = [number for number, item in enumerate(containers) if item.get("name") == kind.container]
    if not named and len(containers) > 1:
        raise SpecError({f"{where}.containers": [f"Required: a container named {kind.container}, the one the "
                                                 f"{kind.name} runs in; got {len(containers)} containers."]})  # fmt: skip
    chosen = named[0] if named else 0
    for number in range(len(containers)):
        if number != chosen:
            unsupported.append(f"{where}.containers[{number}] (only the {kind.container} container)")
    return chosen, containers[chosen]
