"""A pod template's parts mapped onto the job spec: GPU types, literal env, resources, volumes and shm.

Shared by the readers of every layout (`replica_specs_import.py`, `trainjob_import.py`); the
node selection behind the GPU types is read in `node_selection.py`. What does not map is
listed back as unsupported, never dropped.
"""

from __future__ import annotations

from decimal import Decimal

from core.quantities import format_memory, memory_bytes, parse_quantity
from jobs.manifest_fields import as_mapping, as_name, list_unsupported
from jobs.node_selection import pod_gpu_types
from jobs.spec import SpecError
from tenants.selectors import checkpoint_claim_of

# Fields Gangway sets itself when it builds the manifest: read and replaced, not unsupported.
MANAGED = {"schedulerName", "priorityClassName", "restartPolicy", "terminationGracePeriodSeconds"}
SHM_PATH = "/dev/shm"
CHECKPOINT_PATH = "/checkpoint"  # where Gangway mounts the team's checkpoint claim: managed, not imported


def gpu_types_of(data: dict, pod: dict, where: str, unsupported: list[str]) -> None:
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


def literal_env(items: object, path: str, unsupported: list[str]) -> dict:
    """NAME: value of the literal entries of a container's env; the others (valueFrom...) are listed.
    A value left empty (`value:`, YAML's null) is "", as Kubernetes reads it."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise SpecError({path: ["Must be a list of {name, value}."]})
    env = {}
    for index, item in enumerate(items):
        if isinstance(item, dict) and "value" in item and set(item) <= {"name", "value"}:
            env[as_name(item.get("name"), f"{path}[{index}].name")] = "" if item["value"] is None else item["value"]
        else:
            unsupported.append(f"{path}[{index}] (only literal values)")
    return env


def amounts(resources: object, where: str, unsupported: list[str]) -> dict:
    """gpu, cpu and memory of a ResourceRequirements at `where` (limits over requests); other resources are listed."""
    resources = as_mapping(resources, where)
    requests = as_mapping(resources.get("requests"), f"{where}.requests")
    limits = as_mapping(resources.get("limits"), f"{where}.limits")
    merged = {**requests, **limits}  # Gangway sets requests = limits
    for key in sorted(set(requests) & set(limits) & {"nvidia.com/gpu", "cpu", "memory"}):
        if not _same_quantity(requests[key], limits[key]):
            unsupported.append(f"{where}.requests.{key} ({requests[key]}; Gangway requests the limit, {limits[key]})")
    out = {}
    for key, value in merged.items():
        if key == "nvidia.com/gpu":
            out["gpu"] = int(Decimal(str(value))) if str(value).isdigit() else value
        elif key in ("cpu", "memory"):
            out[key] = str(value)
        else:
            unsupported.append(f"{where}.{key}")
    return out


def _same_quantity(one: object, other: object) -> bool:
    """Whether two Kubernetes quantities are the same amount ("1" and "1000m" are); a quantity that does
    not parse is the same only as itself (the spec refuses it)."""
    try:
        return parse_quantity(one) == parse_quantity(other)
    except ValueError:
        return str(one) == str(other)


def volumes_of(pod: dict, container: dict, path: str, unsupported: list[str], *, container_index: int = 0,
               namespace: str = "") -> tuple[list[dict], str | None]:  # fmt: skip
    """(volumes in the spec's shape, shm size or None) from a pod's volumes and the mounts of its
    container at `container_index`.

    Claims and config maps of the namespace map onto `volumes`; a memory-backed
    emptyDir at /dev/shm onto `shm`; the checkpoint claim of the team of `namespace`
    at /checkpoint onto nothing, as Gangway mounts it there itself. Anything else
    (another claim at /checkpoint, hostPath, secrets, other emptyDirs, subPath...) is
    listed in `unsupported`.
    """
    where = f"{path}.template.spec"
    pod_volumes = pod.get("volumes") or []
    mounts = container.get("volumeMounts") or []
    if not isinstance(pod_volumes, list) or not isinstance(mounts, list):
        raise SpecError({f"{where}.volumes": ["Volumes and volumeMounts must be lists."]})
    by_name = {}
    for index, volume in enumerate(pod_volumes):
        volume = as_mapping(volume, f"{where}.volumes[{index}]")
        by_name[as_name(volume.get("name"), f"{where}.volumes[{index}].name")] = (index, volume)
    used, result, shm = set(), [], None
    for index, mount in enumerate(mounts):
        mount_path = f"{where}.containers[{container_index}].volumeMounts[{index}]"
        mount = as_mapping(mount, mount_path)
        list_unsupported(unsupported, mount_path, mount, {"name", "mountPath", "readOnly"})
        found = by_name.get(as_name(mount.get("name"), f"{mount_path}.name"))
        if found is None:
            unsupported.append(f"{mount_path} (no pod volume named {mount.get('name')!r})")
            continue
        volume_index, volume = found
        used.add(volume_index)
        target, read_only = mount.get("mountPath"), bool(mount.get("readOnly", False))
        volume_path = f"{where}.volumes[{volume_index}]"
        if "persistentVolumeClaim" in volume and set(volume) == {"name", "persistentVolumeClaim"}:
            claim = as_mapping(volume["persistentVolumeClaim"], f"{volume_path}.persistentVolumeClaim")
            list_unsupported(unsupported, f"{volume_path}.persistentVolumeClaim", claim, {"claimName", "readOnly"})
            read_only = read_only or bool(claim.get("readOnly", False))
            if target != CHECKPOINT_PATH:
                result.append({"claim": claim.get("claimName"), "path": target, "read_only": read_only})
            elif not namespace or claim.get("claimName") != checkpoint_claim_of(namespace):
                unsupported.append(f"{volume_path} (claim {claim.get('claimName')} at {CHECKPOINT_PATH}, where Gangway "
                                   f"mounts the team's checkpoint claim; mount it at another path)")  # fmt: skip
        elif "configMap" in volume and set(volume) == {"name", "configMap"}:
            config = as_mapping(volume["configMap"], f"{volume_path}.configMap")
            list_unsupported(unsupported, f"{volume_path}.configMap", config, {"name"})
            result.append({"config_map": config.get("name"), "path": target})
        elif "emptyDir" in volume and set(volume) == {"name", "emptyDir"} and target == SHM_PATH:
            empty = as_mapping(volume["emptyDir"], f"{volume_path}.emptyDir")
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


def without_shm(resources: dict, shm: str) -> dict:
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
