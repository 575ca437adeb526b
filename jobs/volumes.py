"""Volumes of a job spec: the team's claims and config maps, mounted at a path in every replica.

`parse_volumes` is part of `jobs.spec.parse_spec`, the one validation every path into
Gangway goes through; it knows nothing of the cluster (whether a claim exists is the
cluster adapter's check, when the job is created).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VOLUME_SOURCES = ("claim", "config_map")  # a PersistentVolumeClaim or a ConfigMap of the team's namespace
VOLUME_FIELDS = {*VOLUME_SOURCES, "path", "read_only"}
MAX_VOLUMES = 16
MAX_PATH = 255
# Mount paths Gangway fills itself: the memory-backed /dev/shm (the spec's `shm`) and the team's
# checkpoint claim (`scheduling.cluster.manifests.CHECKPOINT_DIR`).
RESERVED_PATHS = {
    "/dev/shm": "it is the memory-backed /dev/shm; ask for its size with shm",
    "/checkpoint": "the team's checkpoint claim is mounted there",
}
# A Kubernetes object name (DNS-1123 subdomain): what PersistentVolumeClaims and ConfigMaps are called.
OBJECT_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True)
class Volume:
    """A claim or config map of the team's namespace, mounted at `path` in every replica."""

    source: str  # one of VOLUME_SOURCES
    name: str
    path: str
    read_only: bool  # always True for a config map (Kubernetes mounts them read-only)

    def as_data(self) -> dict:
        """The volume in the spec's JSON shape."""
        if self.source == "config_map":
            return {"config_map": self.name, "path": self.path}
        return {"claim": self.name, "path": self.path, "read_only": self.read_only}


def parse_volumes(errors, value: object) -> tuple[Volume, ...]:
    """The spec's `volumes` as Volumes; each problem is added to `errors` (`jobs.spec`'s, by field path)."""
    if not isinstance(value, list) or len(value) > MAX_VOLUMES:
        errors.add("volumes", f"Must be a list of at most {MAX_VOLUMES} volumes, e.g. "
                              "[{\"claim\": \"datasets\", \"path\": \"/data\", \"read_only\": true}].")  # fmt: skip
        return ()
    volumes, paths = [], set()
    for index, item in enumerate(value):
        path = f"volumes[{index}]"
        if not isinstance(item, dict):
            errors.add(path, "Must be a mapping: {\"claim\": name, \"path\": ...} or {\"config_map\": name, \"path\": ...}.")
            continue
        for unknown in sorted(set(item) - VOLUME_FIELDS, key=str):
            errors.add(f"{path}.{unknown}", f"Unknown field; the fields are {', '.join(sorted(VOLUME_FIELDS))}.")
        sources = [source for source in VOLUME_SOURCES if source in item]
        if len(sources) != 1:
            errors.add(path, "Name exactly one of claim (a PersistentVolumeClaim) or config_map (a ConfigMap) "
                             "of the team's namespace.")  # fmt: skip
            continue
        source = sources[0]
        name = item[source]
        if not isinstance(name, str) or len(name) > 253 or not OBJECT_NAME_RE.fullmatch(name):
            errors.add(f"{path}.{source}", f"Must be a Kubernetes object name (lowercase letters, digits, '-' "
                                           f"and '.'), got {str(name)[:80]!r}.")  # fmt: skip
        mount = _mount_path(errors, f"{path}.path", item.get("path"))
        if mount and mount in paths:
            errors.add(f"{path}.path", f"Two volumes are mounted at {mount}; give each its own path.")
        paths.add(mount)
        read_only = item.get("read_only", source == "config_map")
        if not isinstance(read_only, bool):
            errors.add(f"{path}.read_only", f"Must be true or false, got {read_only!r}.")
        elif source == "config_map" and not read_only:
            errors.add(f"{path}.read_only", "A config map is always mounted read-only.")
        volumes.append(Volume(source=source, name=str(name), path=mount, read_only=read_only is True))
    return tuple(volumes)


def _mount_path(errors, path: str, value: object) -> str:
    """`value` as an absolute, normalised mount path, or "" with an error."""
    if not isinstance(value, str) or not value:
        errors.add(path, "Required: an absolute path inside the container, e.g. /data.")
        return ""
    parts = value.split("/")
    if (
        not value.startswith("/") or value == "/" or len(value) > MAX_PATH or value.endswith("/")
        or any(part in ("", ".", "..") for part in parts[1:]) or not value.isprintable() or ":" in value
    ):  # fmt: skip
        errors.add(path, f"Must be an absolute path of at most {MAX_PATH} characters, without '.', '..', '//', "
                         f"':' or a trailing '/', other than /, got {value[:80]!r}.")  # fmt: skip
        return ""
    for reserved, why in RESERVED_PATHS.items():
        if value == reserved or value.startswith(reserved + "/"):
            errors.add(path, f"{reserved} cannot be mounted over: {why}.")
            return ""
    return value
