"""The job spec: one shape for a job wherever a person or a program writes one.

`parse_spec` turns untrusted input (a form, a REST body, a CLI file, an imported
manifest) into a validated `JobSpec`, or raises `SpecError` carrying every
problem keyed by field path ("replicas[0].gpu"). It knows nothing of teams'
quotas or the cluster: those checks live in the submission service and in the
policy (R10).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

from core.quantities import NotFinite, TooLarge, cpu_millicores, format_cpu, format_memory, memory_bytes, memory_text
from jobs import kinds
from jobs.volumes import OBJECT_NAME_RE, Volume, parse_volumes
from tenants.inputs import (
    MAX_CPU_PER_REPLICA,
    MAX_GPU_PER_REPLICA,
    MAX_MEMORY_PER_REPLICA,
    MAX_REPLICAS,
    MAX_RUNTIME,
    flag,
    text_problem,
)
from tenants.models import DNS_LABEL

FIELDS = {"team", "name", "kind", "image", "command", "args", "env", "tier", "max_runtime", "replicas", "simulate",
          "volumes", "shm", "runtime", "num_nodes", "resources_per_node", "gpu_type"}
REPLICA_FIELDS = {"role", "count", "gpu", "cpu", "memory"}
NODE_RESOURCES = {"gpu", "cpu", "memory"}

MAX_GPU_TYPES = 8  # a preference list longer than any cluster's models is a mistake
NAME_MAX = 50  # leaves room for the "-g<id>" suffix within a 63-character object name
MAX_LIST = 100
MAX_STRING = 4096
# An OCI reference: [registry[:port]/]path[:tag][@digest], lowercase path components.
IMAGE_RE = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ReplicaGroup:
    role: str
    count: int
    gpu: int
    cpu: int  # millicores; 0 = the team's default
    memory: int  # bytes; 0 = the team's default


@dataclass(frozen=True)
class JobSpec:
    team: str
    name: str
    kind: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    tier: str  # "" = the team's default tier
    max_runtime: int | None
    replicas: tuple[ReplicaGroup, ...]
    sim_duration: int | None = None
    sim_fail: bool = False
    volumes: tuple[Volume, ...] = ()
    shm: int = 0  # bytes of a memory-backed /dev/shm in every replica; 0 = the runtime's default
    runtime: str = ""  # what it runs on, for a kind that takes a runtime (e.g. a ClusterTrainingRuntime); "" otherwise
    gpu_type: tuple[str, ...] = ()  # GPU types it accepts, in order of preference; () = its team's types

    @property
    def gpu_total(self) -> int:
        return sum(group.count * group.gpu for group in self.replicas)

    def replicas_as_data(self) -> list[dict]:
        return [asdict(group) for group in self.replicas]


class SpecError(Exception):
    """Every problem with a spec, as {field path: [messages]} (DRF's field-dict shape)."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        first = next(iter(errors.items()))
        super().__init__(f"{first[0]}: {first[1][0]}")


class _Errors(dict):
    def add(self, path: str, message: str) -> None:
        self.setdefault(path, []).append(message)


def parse_spec(data: object, *, team: str | None = None) -> JobSpec:
    """A validated JobSpec from `data`; raises SpecError listing every problem.

    `team`, when given (a URL or a token names it), fills a missing "team" and
    must agree with a present one.
    """
    errors = _Errors()
    if not isinstance(data, dict):
        raise SpecError({"non_field_errors": [f"A job spec is a mapping of fields, got {type(data).__name__}."]})
    for unknown in sorted(set(data) - FIELDS, key=str):
        errors.add(str(unknown), f"Unknown field; the fields are {', '.join(sorted(FIELDS))}.")

    team_value = data.get("team", team)
    if team and team_value != team:
        errors.add("team", f"This request is for team {team}, but the spec names {team_value!r}.")
    team_value = _label(errors, "team", team_value, 63)
    name = _label(errors, "name", data.get("name"), NAME_MAX)
    kind = kinds.find(data.get("kind", kinds.default().name))
    if kind is None:
        errors.add("kind", f"Must be one of {', '.join(kinds.names())}, got {data.get('kind')!r}.")
        kind = kinds.default()
    image = data.get("image")
    if not isinstance(image, str) or not image:
        errors.add("image", "Required: a container image such as tensorflow/tensorflow:2.12.0-gpu.")
    elif len(image) > 500 or not IMAGE_RE.fullmatch(image):
        errors.add("image", f"Not a valid image reference: {image[:100]!r}.")
    command = _strings(errors, "command", data.get("command", []))
    args = _strings(errors, "args", data.get("args", []))
    env = _env(errors, data.get("env", {}))
    tier = data.get("tier") or ""
    if not isinstance(tier, str) or (tier and not re.fullmatch(DNS_LABEL, tier)):
        errors.add("tier", f"Must be a tier name, got {tier!r}.")
        tier = ""
    max_runtime = data.get("max_runtime")
    if max_runtime is not None and not _int_in(max_runtime, 1, MAX_RUNTIME):
        errors.add("max_runtime", f"Must be whole seconds from 1 to {MAX_RUNTIME} (30 days), got {max_runtime!r}.")
        max_runtime = None
    if name and kind.letter_first and not name[0].isalpha():
        errors.add("name", f"A {kind.name} name starts with a letter, got {name[:80]!r}.")
    runtime = _runtime(errors, kind, data.get("runtime"))
    replicas = _nodes_or_replicas(errors, kind, data)
    sim_duration, sim_fail = _simulate(errors, data.get("simulate"))
    volumes = parse_volumes(errors, data.get("volumes", []))
    shm = _quantity(errors, "shm", data.get("shm"), read=memory_bytes, limit=MAX_MEMORY_PER_REPLICA, unit="bytes")
    gpu_type = _gpu_types(errors, data.get("gpu_type"), replicas)
    if errors:
        raise SpecError(dict(errors))
    return JobSpec(
        team=team_value, name=name, kind=kind.name, image=image, command=command, args=args, env=env, tier=tier,
        max_runtime=max_runtime, replicas=replicas, sim_duration=sim_duration, sim_fail=sim_fail,
        volumes=volumes, shm=shm, runtime=runtime, gpu_type=gpu_type,
    )  # fmt: skip


def _gpu_types(errors: _Errors, value: object, replicas: tuple[ReplicaGroup, ...]) -> tuple[str, ...]:
    """The GPU types the job accepts, in order of preference: one name or a list of distinct names;
    () when absent (None, "" or []), meaning its team's types. Whether the cluster has them is the
    submission service's check, which reads the database.

    A job without GPUs that names a type is refused rather than silently placed anywhere: the policy
    types only GPUs, so the name would change nothing and mislead whoever reads the spec.
    """
    if value in (None, "", []):
        return ()
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or len(names) > MAX_GPU_TYPES:
        errors.add("gpu_type", f"Must be a GPU type name or a list of at most {MAX_GPU_TYPES} names in order of "
                               f"preference, e.g. [\"h100\", \"a100\"].")  # fmt: skip
        return ()
    seen: set[str] = set()
    for index, name in enumerate(names):
        path = "gpu_type" if isinstance(value, str) else f"gpu_type[{index}]"
        if not isinstance(name, str) or len(name) > 63 or not re.fullmatch(DNS_LABEL, name):
            shown = repr(name[:80]) if isinstance(name, str) else repr(name)[:80]
            errors.add(path, f"Must be a GPU type name (lowercase letters, digits and '-'), got {shown}.")
        elif name in seen:
            errors.add(path, f"GPU type {name} is named twice; list each type once, in order of preference.")
        else:
            seen.add(name)
    if seen and replicas and not any(group.gpu for group in replicas):
        errors.add("gpu_type", "This job asks for no GPUs, so it runs on any node; name a GPU type only when a "
                               "replica asks for GPUs.")  # fmt: skip
    return tuple(name for name in names if isinstance(name, str))


def _runtime(errors: _Errors, kind: kinds.JobKind, value: object) -> str:
    """The runtime a kind that runs on one names (a Kubernetes object name), else "" (and an error if one is given)."""
    if not kind.runtime_kind:
        if value not in (None, ""):
            takers = ", ".join(k.name for k in kinds.all_kinds() if k.runtime_kind) or "none"
            errors.add("runtime", f"A {kind.name} runs on no runtime; the kinds that do: {takers}.")
        return ""
    if not isinstance(value, str) or not value:
        errors.add("runtime", f"Required: the {kind.runtime_kind} a {kind.name} runs on, e.g. torch-distributed.")
        return ""
    if len(value) > 253 or not OBJECT_NAME_RE.fullmatch(value):
        errors.add("runtime", f"Must be a {kind.runtime_kind} name (lowercase letters, digits, '-' and '.'), "
                              f"got {value[:80]!r}.")  # fmt: skip
    return value


def _nodes_or_replicas(errors: _Errors, kind: kinds.JobKind, data: dict) -> tuple[ReplicaGroup, ...]:
    """The replica groups, from `replicas` or, for a kind of identical nodes, from num_nodes and resources_per_node.

    A node count and per-node resources are one group of the kind's role; their problems are
    named by those fields, not by the group they became.
    """
    if "num_nodes" not in data and "resources_per_node" not in data:
        return _replicas(errors, kind, data.get("replicas"))
    if not kind.nodes:
        errors.add("num_nodes", f"A {kind.name} has replica groups, not nodes: give replicas.")
        return ()
    if data.get("replicas") is not None:
        errors.add("replicas", "Give num_nodes (and resources_per_node) or replicas, not both.")
        return ()
    resources = data.get("resources_per_node") or {}
    if not isinstance(resources, dict) or set(resources) - NODE_RESOURCES:
        errors.add("resources_per_node", f"Must be a mapping of {', '.join(sorted(NODE_RESOURCES))}.")
        return ()
    group = {"role": kind.roles[0].name, "count": data.get("num_nodes", 1), **resources}
    found = _Errors()
    groups = _replicas(found, kind, [group])
    for path, messages in found.items():
        field = "num_nodes" if path == "replicas[0].count" else path.replace("replicas[0].", "resources_per_node.")
        for message in messages:
            errors.add(field, message)
    return groups


def _int_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _label(errors: _Errors, path: str, value: object, limit: int) -> str:
    if not isinstance(value, str) or not value:
        errors.add(path, "Required.")
        return ""
    if len(value) > limit or not re.fullmatch(DNS_LABEL, value):
        errors.add(
            path,
            f"Must be at most {limit} lowercase letters, digits or '-', starting and ending with a letter "
            f"or digit, got {value[:80]!r}.",
        )
    return value


def _strings(errors: _Errors, path: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        errors.add(path, "Must be a list of strings (never run through a shell), e.g. [\"python\", \"train.py\"].")
        return ()
    if not isinstance(value, list) or len(value) > MAX_LIST:
        errors.add(path, f"Must be a list of at most {MAX_LIST} strings.")
        return ()
    for index, item in enumerate(value):
        if not isinstance(item, str) or len(item) > MAX_STRING:
            errors.add(f"{path}[{index}]", f"Must be a string of at most {MAX_STRING} characters.")
        elif problem := text_problem(item):
            errors.add(f"{path}[{index}]", problem)
    return tuple(str(item) for item in value)


def _env(errors: _Errors, value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or len(value) > MAX_LIST:
        errors.add("env", f"Must be a mapping of at most {MAX_LIST} NAME: value pairs.")
        return ()
    for name, item in value.items():
        shown = name.encode("unicode_escape").decode()[:80] if isinstance(name, str) else name
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name) or name.startswith("GANGWAY_"):
            errors.add(f"env.{shown}", "Names are letters, digits and '_', not starting with a digit or GANGWAY_.")
        if not isinstance(item, (str, int, float)) or isinstance(item, bool) or len(str(item)) > MAX_STRING:
            errors.add(f"env.{shown}", f"Values are strings of at most {MAX_STRING} characters.")
        elif isinstance(item, str) and (problem := text_problem(item)):
            errors.add(f"env.{shown}", problem)
    return tuple(sorted((str(name), str(item)) for name, item in value.items()))


# The most a quantity may be, as people read it: "16 TiB" (where it said 17592186044416 bytes), "1024 CPUs".
LIMIT_TEXT = {"bytes": memory_text, "millicores": lambda millicores: f"{format_cpu(millicores)} CPUs"}


def _quantity(errors: _Errors, path: str, value: object, *, read, limit: int, unit: str) -> int:
    """A Kubernetes quantity as an integer count of `unit`s, as `read` (millicores or bytes) gives it; 0 when
    it is not one, with the error added."""
    if value in (None, "", 0):
        return 0
    try:
        amount = read(value)
    except NotFinite:
        errors.add(path, f"Must be a number of {unit}, not {value!r} (e.g. \"2\", \"500m\", \"4Gi\").")
        return 0
    except TooLarge:
        amount = None
    except ValueError:
        errors.add(path, f"Not a Kubernetes quantity: {value!r} (e.g. \"2\", \"500m\", \"4Gi\").")
        return 0
    if amount is None or amount < 0 or amount > limit or amount != amount.to_integral_value():
        errors.add(path, f"Must be from 0 to {LIMIT_TEXT[unit](limit)}, in whole {unit}, got {value!r}.")
        return 0
    return int(amount)


def _replicas(errors: _Errors, kind: kinds.JobKind, value: object) -> tuple[ReplicaGroup, ...]:
    if not isinstance(value, list) or not value:
        errors.add("replicas", f"Required: at least one replica group, e.g. [{{\"role\": \"{kind.default_role}\", "
                               "\"count\": 2}].")
        return ()
    if len(value) > len(kind.roles):
        errors.add("replicas", f"A {kind.name} has at most {len(kind.roles)} replica groups.")
        return ()
    groups, seen, total = [], set(), 0
    for index, item in enumerate(value):
        path = f"replicas[{index}]"
        if not isinstance(item, dict):
            errors.add(path, "Must be a mapping with role, count, gpu, cpu and memory.")
            continue
        for unknown in sorted(set(item) - REPLICA_FIELDS, key=str):
            errors.add(f"{path}.{unknown}", f"Unknown field; the fields are {', '.join(sorted(REPLICA_FIELDS))}.")
        role = item.get("role", kind.default_role)
        if not isinstance(role, str) or role not in kind.role_names:
            errors.add(f"{path}.role", f"A {kind.name} role is one of {', '.join(kind.role_names)}, got {role!r}.")
            role = ""  # a list or mapping would not hash in the checks below
        elif role in seen:
            errors.add(f"{path}.role", f"Role {role} appears twice; give it one group with a count.")
        seen.add(role)
        count = item.get("count", 1)
        if not _int_in(count, 1, MAX_REPLICAS):
            errors.add(f"{path}.count", f"Must be a whole number from 1 to {MAX_REPLICAS}, got {count!r}.")
            count = 1
        elif role in kind.singleton_roles and count != 1:
            errors.add(f"{path}.count", f"A {kind.name} has exactly one {role}, got {count}.")
        total += count
        gpu = item.get("gpu", 0)
        if not _int_in(gpu, 0, MAX_GPU_PER_REPLICA):
            errors.add(f"{path}.gpu", f"Must be a whole number of GPUs from 0 to {MAX_GPU_PER_REPLICA}, got {gpu!r}.")
            gpu = 0
        cpu = _quantity(errors, f"{path}.cpu", item.get("cpu"), read=cpu_millicores, limit=MAX_CPU_PER_REPLICA, unit="millicores")
        memory = _quantity(errors, f"{path}.memory", item.get("memory"), read=memory_bytes, limit=MAX_MEMORY_PER_REPLICA, unit="bytes")
        groups.append(ReplicaGroup(role=str(role), count=count, gpu=gpu, cpu=cpu, memory=memory))
    if total > MAX_REPLICAS:
        errors.add("replicas", f"At most {MAX_REPLICAS} replicas in all, got {total}.")
    return tuple(groups)


def counted_replicas(spec: JobSpec, default_memory: int) -> tuple[ReplicaGroup, ...]:
    """The replica groups as quota and placement count them: /dev/shm added to each replica's memory.

    A memory-backed volume is charged to the pod's memory, so a replica asking for 4Gi with a
    16Gi shm gets a 20Gi limit. A replica that names no memory gets `default_memory` (its team's
    default) first. Returns the groups unchanged when the spec asks for no shm.
    """
    if not spec.shm:
        return spec.replicas
    return tuple(replace(group, memory=(group.memory or default_memory) + spec.shm) for group in spec.replicas)


def _simulate(errors: _Errors, value: object) -> tuple[int | None, bool]:
    if value is None:
        return None, False
    if not isinstance(value, dict) or set(value) - {"duration", "fail"}:
        errors.add("simulate", "Must be a mapping with duration (seconds) and fail (true/false).")
        return None, False
    duration = value.get("duration")
    if duration is not None and not _int_in(duration, 1, MAX_RUNTIME):
        errors.add("simulate.duration", f"Must be whole seconds from 1 to {MAX_RUNTIME}, got {duration!r}.")
        duration = None
    try:
        fail = flag(value.get("fail", False))
    except ValueError as error:
        errors.add("simulate.fail", str(error))
        fail = False
    return duration, fail


def spec_to_data(spec: JobSpec) -> dict:
    """The spec back in its JSON shape (what a person would have written)."""
    data = {
        "team": spec.team, "name": spec.name, "kind": spec.kind, "image": spec.image,
        "command": list(spec.command), "args": list(spec.args), "env": dict(spec.env),
        "tier": spec.tier, "max_runtime": spec.max_runtime,
        "replicas": [
            {"role": g.role, "count": g.count, "gpu": g.gpu, "cpu": format_cpu(g.cpu), "memory": format_memory(g.memory)}
            for g in spec.replicas
        ],
    }  # fmt: skip
    # Left out when absent, so a spec written before volumes existed keeps its digest (idempotency keys).
    if spec.volumes:
        data["volumes"] = [volume.as_data() for volume in spec.volumes]
    if spec.shm:
        data["shm"] = format_memory(spec.shm)
    if spec.runtime:
        data["runtime"] = spec.runtime
    if spec.gpu_type:
        data["gpu_type"] = list(spec.gpu_type)
    if spec.sim_duration is not None or spec.sim_fail:
        data["simulate"] = {"duration": spec.sim_duration, "fail": spec.sim_fail}
    return data


