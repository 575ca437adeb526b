"""Reading a job from YAML: Gangway's own spec, or a manifest of a registered job kind.

A manifest is turned into the job spec, and every field Gangway does not carry
over is listed back (never silently dropped). Parsing is safe: no custom tags,
no aliases (the "billion laughs" expansion), a size limit, and a nesting limit
checked on the text before parsing (PyYAML recurses once per level and slows
down with the square of flow nesting).
"""

from __future__ import annotations

from decimal import Decimal

import yaml


from core.quantities import format_memory, memory_bytes
from jobs import kinds
from jobs.node_selection import NODE_SELECTION, pod_gpu_types
from jobs.spec import SpecError
from tenants.inputs import MAX_DEPTH, MAX_YAML_BYTES, yaml_depth_problem

# Fields Gangway sets itself when it builds the manifest: read and replaced, not unsupported.
MANAGED = {"schedulerName", "priorityClassName", "restartPolicy", "terminationGracePeriodSeconds"}
SHM_PATH = "/dev/shm"
CHECKPOINT_PATH = "/checkpoint"  # where Gangway mounts the team's checkpoint claim: managed, not imported


class _TooDeep(yaml.YAMLError):
    pass


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader without aliases, and with the nesting limit counted as it composes.

    The check on the text (yaml_depth_problem) catches a deep document in
    milliseconds but may be misled by quotes in plain scalars; this count is
    exact, and events are read lazily, so composing stops at the limit.
    """

    depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "YAML aliases are not accepted", event.start_mark)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 1:  # the document's root is a node too
                raise _TooDeep(f"The YAML nests deeper than {MAX_DEPTH} levels; a job spec or manifest needs about fifteen.")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml(text: str) -> object:
    """The parsed document; raises SpecError for oversized or malformed YAML."""
    if len(text.encode()) > MAX_YAML_BYTES:
        raise SpecError({"yaml": [f"The YAML is larger than {MAX_YAML_BYTES // 1024} KiB."]})
    problem = yaml_depth_problem(text)
    if problem:
        raise SpecError({"yaml": [problem]})
    try:
        documents = [doc for doc in yaml.load_all(text, Loader=_NoAliasLoader) if doc is not None]
    except _TooDeep as error:
        raise SpecError({"yaml": [str(error)]}) from None
    except yaml.YAMLError as error:
        raise SpecError({"yaml": [_yaml_problem(error)]}) from None
    if len(documents) != 1:
        raise SpecError({"yaml": [f"Expected one YAML document, got {len(documents)}."]})
    return documents[0]


def is_manifest(data: object) -> bool:
    """Whether `data` is a manifest of a registered kind (an apiVersion and a kind), rather than Gangway's spec."""
    return isinstance(data, dict) and kinds.find(data.get("kind")) is not None and "apiVersion" in data


def _yaml_problem(error: yaml.YAMLError) -> str:
    """The parser's complaint with where it is: "Not valid YAML at line 3, column 7: mapping values are not allowed here"."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    if mark is None:
        return f"Not valid YAML: {problem}"
    return f"Not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"


def spec_from_yaml(text: str) -> tuple[dict, list[str]]:
    """(spec data, unsupported fields) from Gangway's spec or a manifest of a registered kind."""
    data = load_yaml(text)
    if is_manifest(data):
        return spec_from_manifest(data)
    return data, []


def spec_from_manifest(manifest: dict) -> tuple[dict, list[str]]:
    """(spec data, unsupported fields) from a manifest of a registered kind, read as its layout is shaped."""
    kind = kinds.get(manifest["kind"])
    api_version = manifest.get("apiVersion")
    if api_version != kind.api_version:
        raise SpecError({"apiVersion": [f"A {kind.name} is {kind.api_version}, got {api_version!r}."]})
    return READERS[kind.layout](kind, manifest)


def spec_from_replica_specs(kind: kinds.JobKind, manifest: dict) -> tuple[dict, list[str]]:
    """(spec data, unsupported fields) from a Training Operator (v1) manifest: TFJob, PyTorchJob..."""
    unsupported: list[str] = []
    replica_key = kind.replica_specs
    _unsupported(unsupported, "", manifest, {"apiVersion", "kind", "metadata", "spec"})
    metadata = _mapping(manifest.get("metadata"), "metadata")
    spec = _mapping(manifest.get("spec"), "spec")
    _unsupported(unsupported, "metadata", metadata, {"name", "namespace"})
    _unsupported(unsupported, "spec", spec, {replica_key, "runPolicy"})
    run_policy = _mapping(spec.get("runPolicy"), "spec.runPolicy")
    _unsupported(unsupported, "spec.runPolicy", run_policy, {"activeDeadlineSeconds", "schedulingPolicy", "suspend"})
    data: dict = {"name": metadata.get("name"), "kind": kind.name, "replicas": []}
    if metadata.get("namespace"):
        data["team"] = metadata["namespace"]
    if run_policy.get("activeDeadlineSeconds") is not None:
        data["max_runtime"] = run_policy["activeDeadlineSeconds"]
    tier = _mapping(run_policy.get("schedulingPolicy"), "spec.runPolicy.schedulingPolicy").get("priorityClass")
    replica_specs = _mapping(spec.get(replica_key), f"spec.{replica_key}")
    if not replica_specs:
        raise SpecError({f"spec.{replica_key}": [f"Required: at least one replica type, e.g. {kind.default_role}."]})
    for role, replica in replica_specs.items():
        path = f"spec.{replica_key}.{role}"
        replica = _mapping(replica, path)
        _unsupported(unsupported, path, replica, {"replicas", "template", "restartPolicy"})
        pod = _mapping(_mapping(replica.get("template"), f"{path}.template").get("spec"), f"{path}.template.spec")
        _unsupported(unsupported, f"{path}.template.spec", pod, {"containers", "volumes"} | MANAGED | NODE_SELECTION)
        _gpu_types_of(data, pod, f"{path}.template.spec", unsupported)
        tier = tier or pod.get("priorityClassName")
        containers = pod.get("containers") or []
        if not isinstance(containers, list) or not containers:
            raise SpecError({f"{path}.template.spec.containers": ["Required: one container."]})
        if len(containers) > 1:
            unsupported.append(f"{path}.template.spec.containers[1:] (only the first container is used)")
        container = _mapping(containers[0], f"{path}.template.spec.containers[0]")
        _unsupported(unsupported, f"{path}.template.spec.containers[0]", container,
                     {"name", "image", "command", "args", "env", "resources", "volumeMounts"})  # fmt: skip
        for key in ("image", "command", "args"):
            if key in container and key not in data:
                data[key] = container[key]
        env = {}
        env_items = container.get("env") or []
        if not isinstance(env_items, list):
            raise SpecError({f"{path}.template.spec.containers[0].env": ["Must be a list of {name, value}."]})
        for index, item in enumerate(env_items):
            if isinstance(item, dict) and "value" in item and set(item) <= {"name", "value"}:
                env[item.get("name")] = item["value"]
            else:
                unsupported.append(f"{path}.template.spec.containers[0].env[{index}] (only literal values)")
        if env:
            data.setdefault("env", {}).update(env)
        volumes, shm = _volumes(pod, container, path, unsupported)
        for volume in volumes:
            if volume not in data.setdefault("volumes", []):
                data["volumes"].append(volume)
        resources = _resources(container, path, unsupported)
        if shm:
            data["shm"] = shm
            resources = _without_shm(resources, shm)
        data["replicas"].append({"role": role, "count": replica.get("replicas", 1), **resources})
    if tier:
        data["tier"] = tier
    return data, unsupported


def _gpu_types_of(data: dict, pod: dict, where: str, unsupported: list[str]) -> None:
    """Puts the GPU types the pod spec at `where` selects into `data` as its gpu_type. All replicas of
    a job get one type, so a second pod selecting other types is listed, and the first one's kept."""
    names = pod_gpu_types(pod, where, unsupported)
    if not names:
        return
    if "gpu_type" not in data:
        data["gpu_type"] = names
    elif data["gpu_type"] != names:
        unsupported.append(f"{where} (selects GPU types {', '.join(names)}, but another replica selects "
                           f"{', '.join(data['gpu_type'])}; all replicas of a job get one type)")  # fmt: skip


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
    _unsupported(unsupported, "", manifest, {"apiVersion", "kind", "metadata", "spec"})
    metadata = _mapping(manifest.get("metadata"), "metadata")
    spec = _mapping(manifest.get("spec"), "spec")
    _unsupported(unsupported, "metadata", metadata, {"name", "namespace"})
    _unsupported(unsupported, "spec", spec, {"runtimeRef", "trainer", "suspend", "activeDeadlineSeconds", "managedBy",
                                             "runtimePatches"})  # fmt: skip
    if spec.get("managedBy") not in (None, TRAINER_CONTROLLER):
        unsupported.append("spec.managedBy (Gangway's jobs are run by the trainer itself)")
    ref = _mapping(spec.get("runtimeRef"), "spec.runtimeRef")
    _unsupported(unsupported, "spec.runtimeRef", ref, {"name", "kind", "apiGroup"})
    if ref.get("kind", kind.runtime_kind) != kind.runtime_kind or ref.get("apiGroup", kind.group) != kind.group:
        raise SpecError({"spec.runtimeRef": [f"Gangway runs a {kind.name} on a {kind.runtime_kind} ({kind.group}), "
                                             f"got {ref.get('kind')!r} of {ref.get('apiGroup')!r}."]})  # fmt: skip
    trainer = _mapping(spec.get("trainer"), "spec.trainer")
    _unsupported(unsupported, "spec.trainer", trainer,
                 {"image", "command", "args", "env", "numNodes", "resourcesPerNode"})  # fmt: skip
    data: dict = {"name": metadata.get("name"), "kind": kind.name, "runtime": ref.get("name")}
    if metadata.get("namespace"):
        data["team"] = metadata["namespace"]
    if spec.get("activeDeadlineSeconds") is not None:
        data["max_runtime"] = spec["activeDeadlineSeconds"]
    data.update({key: trainer[key] for key in ("image", "command", "args") if key in trainer})
    env = _literal_env(trainer.get("env"), "spec.trainer.env", unsupported)
    if env:
        data["env"] = env
    pod, container, path = _node_patch(kind, spec.get("runtimePatches"), unsupported)
    volumes, shm = _volumes(pod, container, path, unsupported)
    if volumes:
        data["volumes"] = volumes
    _gpu_types_of(data, pod, f"{path}.template.spec", unsupported)
    resources = _amounts(trainer.get("resourcesPerNode"), "spec.trainer.resourcesPerNode", unsupported)
    if shm:
        data["shm"] = shm
        resources = _without_shm(resources, shm)
    data["num_nodes"] = trainer.get("numNodes", 1)
    if resources:
        data["resources_per_node"] = resources
    return data, unsupported


def _literal_env(items: object, path: str, unsupported: list[str]) -> dict:
    """NAME: value of the literal entries of a container's env; the others (valueFrom...) are listed."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise SpecError({path: ["Must be a list of {name, value}."]})
    env = {}
    for index, item in enumerate(items):
        if isinstance(item, dict) and "value" in item and set(item) <= {"name", "value"}:
            env[item.get("name")] = item["value"]
        else:
            unsupported.append(f"{path}[{index}] (only literal values)")
    return env


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
        patch = _mapping(patch, path)
        _unsupported(unsupported, path, patch, {"manager", "time", "trainingRuntimeSpec"})
        runtime_spec = _mapping(patch.get("trainingRuntimeSpec"), f"{path}.trainingRuntimeSpec")
        _unsupported(unsupported, f"{path}.trainingRuntimeSpec", runtime_spec, {"template"})
        path += ".trainingRuntimeSpec.template"
        template = _mapping(runtime_spec.get("template"), path)
        _unsupported(unsupported, path, template, {"metadata", "spec"})
        meta = _mapping(template.get("metadata"), f"{path}.metadata")
        _unsupported(unsupported, f"{path}.metadata", meta, {"annotations"})
        _unsupported(unsupported, f"{path}.metadata.annotations", _mapping(meta.get("annotations"), path),
                     {QUEUE_ANNOTATION})  # fmt: skip
        jobset = _mapping(template.get("spec"), f"{path}.spec")
        _unsupported(unsupported, f"{path}.spec", jobset, {"replicatedJobs"})
        for job_index, replicated in enumerate(jobset.get("replicatedJobs") or []):
            job_path = f"{path}.spec.replicatedJobs[{job_index}]"
            replicated = _mapping(replicated, job_path)
            if replicated.get("name") != kind.container:
                unsupported.append(f"{job_path} (only the {kind.container} replicated job)")
                continue
            job_template = _mapping(_mapping(replicated.get("template"), f"{job_path}.template").get("spec"),
                                    f"{job_path}.template.spec")  # fmt: skip
            _unsupported(unsupported, f"{job_path}.template.spec", job_template, {"template"})
            path_of_pod = f"{job_path}.template.spec"  # as `_volumes` names the pod's fields
            where = f"{path_of_pod}.template"
            pod_template = _mapping(job_template.get("template"), where)
            _unsupported(unsupported, where, pod_template, {"spec"})
            pod = _mapping(pod_template.get("spec"), f"{where}.spec")
            _unsupported(unsupported, f"{where}.spec", pod, {"volumes", "containers"} | MANAGED | NODE_SELECTION)
            for number, item in enumerate(pod.get("containers") or []):
                item = _mapping(item, f"{where}.spec.containers[{number}]")
                if item.get("name") == kind.container:
                    container = item
                    _unsupported(unsupported, f"{where}.spec.containers[{number}]", item, {"name", "volumeMounts"})
                else:
                    unsupported.append(f"{where}.spec.containers[{number}] (only the {kind.container} container)")
    return pod, container, (path_of_pod if pod else "")


# How each layout's manifests are read; a kind of a layout listed here needs nothing more than its registry entry.
READERS = {
    kinds.Layout.REPLICA_SPECS: spec_from_replica_specs,
    kinds.Layout.TRAINER: spec_from_trainjob,
}


def _resources(container: dict, path: str, unsupported: list[str]) -> dict:
    return _amounts(container.get("resources"), f"{path}.template.spec.containers[0].resources", unsupported)


def _amounts(resources: object, where: str, unsupported: list[str]) -> dict:
    """gpu, cpu and memory of a ResourceRequirements at `where` (limits over requests); other resources are listed."""
    resources = _mapping(resources, where)
    requests = _mapping(resources.get("requests"), f"{where}.requests")
    limits = _mapping(resources.get("limits"), f"{where}.limits")
    merged = {**requests, **limits}  # Gangway sets requests = limits
    out = {}
    for key, value in merged.items():
        if key == "nvidia.com/gpu":
            out["gpu"] = int(Decimal(str(value))) if str(value).isdigit() else value
        elif key in ("cpu", "memory"):
            out[key] = str(value)
        else:
            unsupported.append(f"{where}.{key}")
    return out


def _volumes(pod: dict, container: dict, path: str, unsupported: list[str]) -> tuple[list[dict], str | None]:
    """(volumes in the spec's shape, shm size or None) from a pod's volumes and its container's mounts.

    Claims and config maps of the namespace map onto `volumes`; a memory-backed
    emptyDir at /dev/shm onto `shm`. Anything else (hostPath, secrets, other
    emptyDirs, subPath...) is listed in `unsupported`.
    """
    where = f"{path}.template.spec"
    pod_volumes = pod.get("volumes") or []
    mounts = container.get("volumeMounts") or []
    if not isinstance(pod_volumes, list) or not isinstance(mounts, list):
        raise SpecError({f"{where}.volumes": ["Volumes and volumeMounts must be lists."]})
    by_name = {}
    for index, volume in enumerate(pod_volumes):
        volume = _mapping(volume, f"{where}.volumes[{index}]")
        by_name[volume.get("name")] = (index, volume)
    used, result, shm = set(), [], None
    for index, mount in enumerate(mounts):
        mount_path = f"{where}.containers[0].volumeMounts[{index}]"
        mount = _mapping(mount, mount_path)
        _unsupported(unsupported, mount_path, mount, {"name", "mountPath", "readOnly"})
        found = by_name.get(mount.get("name"))
        if found is None:
            unsupported.append(f"{mount_path} (no pod volume named {mount.get('name')!r})")
            continue
        volume_index, volume = found
        used.add(volume_index)
        target, read_only = mount.get("mountPath"), bool(mount.get("readOnly", False))
        volume_path = f"{where}.volumes[{volume_index}]"
        if target == CHECKPOINT_PATH and "persistentVolumeClaim" in volume:
            continue  # Gangway mounts the team's checkpoint claim there itself
        if "persistentVolumeClaim" in volume and set(volume) == {"name", "persistentVolumeClaim"}:
            claim = _mapping(volume["persistentVolumeClaim"], f"{volume_path}.persistentVolumeClaim")
            _unsupported(unsupported, f"{volume_path}.persistentVolumeClaim", claim, {"claimName", "readOnly"})
            read_only = read_only or bool(claim.get("readOnly", False))
            result.append({"claim": claim.get("claimName"), "path": target, "read_only": read_only})
        elif "configMap" in volume and set(volume) == {"name", "configMap"}:
            config = _mapping(volume["configMap"], f"{volume_path}.configMap")
            _unsupported(unsupported, f"{volume_path}.configMap", config, {"name"})
            result.append({"config_map": config.get("name"), "path": target})
        elif "emptyDir" in volume and set(volume) == {"name", "emptyDir"} and target == SHM_PATH:
            empty = _mapping(volume["emptyDir"], f"{volume_path}.emptyDir")
            if empty.get("medium") == "Memory" and empty.get("sizeLimit") and set(empty) == {"medium", "sizeLimit"}:
                shm = str(empty["sizeLimit"])
            else:
                unsupported.append(f"{volume_path} (only a memory-backed emptyDir with a sizeLimit, at /dev/shm)")
        else:
            kinds = ", ".join(sorted(set(volume) - {"name"})) or "no source"
            unsupported.append(f"{volume_path} ({kinds}: only persistentVolumeClaim, configMap, and a "
                               f"memory-backed emptyDir at /dev/shm)")  # fmt: skip
    for index in sorted(set(range(len(pod_volumes))) - used):
        unsupported.append(f"{where}.volumes[{index}] (not mounted)")
    return result, shm


def _without_shm(resources: dict, shm: str) -> dict:
    """`resources` with the shm taken out of the memory limit, which in a pod covers both.

    Gangway adds the shm back to each replica's memory, so a manifest keeps its size; a
    limit no larger than the shm (or one that does not parse) is left as it is.
    """
    if "memory" not in resources:
        return resources
    try:
        memory, size = memory_bytes(resources["memory"]), memory_bytes(shm)
    except ValueError:
        return resources
    if memory <= size or memory != memory.to_integral_value():
        return resources
    return {**resources, "memory": format_memory(int(memory - size))}


def _mapping(value: object, path: str) -> dict:
    """`value` as a mapping ({} when absent); raises SpecError naming `path` when it is something else."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError({path: [f"Must be a mapping, got {type(value).__name__}."]})
    return value


def _unsupported(found: list[str], path: str, data: object, known: set[str]) -> None:
    """Adds to `found` the path of every key of `data` not in `known` ("" is the top level)."""
    if isinstance(data, dict):
        found.extend(f"{path}.{key}" if path else str(key) for key in data if key not in known)
