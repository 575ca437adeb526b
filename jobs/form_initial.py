"""The submit form's initial values from spec data: a YAML import or a resubmission of a job.

The inverse of what the form's fields clean to: words joined back into a command line,
volumes written as the form's lines, quantities formatted, a kind of nodes' one group
shown as a replica row.
"""

from __future__ import annotations

import itertools
import shlex

from core.quantities import format_cpu, format_memory
from jobs import kinds
from jobs.forms import new_submission
from jobs.gpu_type_field import names_of
from jobs.models import Job


def initial_from_data(data: dict) -> tuple[dict, list[dict]]:
    """Initial values of the form and its replica rows from spec data (an import or a resubmission)."""
    seconds = data.get("max_runtime")
    initial = {
        "team": data.get("team") or "",
        "kind": data.get("kind") or kinds.default().name,
        "name": data.get("name") or "",
        "image": data.get("image") or "",
        "command": _join(data.get("command")),
        "args": _join(data.get("args")),
        "tier": data.get("tier") or "",
        "max_runtime": _runtime_text(seconds),
        "env": "\n".join(_env_line(k, v) for k, v in data["env"].items()) if isinstance(data.get("env"), dict) else "",
        "volumes": "\n".join(_volume_line(v) for v in data.get("volumes") or [] if isinstance(v, dict))
        if isinstance(data.get("volumes"), list) else "",
        "shm": str(data.get("shm") or ""),
        "runtime": data.get("runtime") or "",
        "gpu_type": names_of(data.get("gpu_type")),
    }
    rows = []
    for group in _groups(data):
        if isinstance(group, dict):
            rows.append({"role": group.get("role", "Worker"), "count": group.get("count", 1), "gpu": group.get("gpu", 0),
                         "cpu": _quantity(group.get("cpu"), format_cpu), "memory": _quantity(group.get("memory"), format_memory)})
    return initial, rows or [{"role": "Worker", "count": 1, "gpu": 1}]


def _groups(data: dict) -> list:
    """The replica groups of spec data: its replicas, or one group of a kind of nodes' num_nodes and resources_per_node."""
    kind = kinds.find(data.get("kind"))
    if kind is None or not kind.nodes or ("num_nodes" not in data and "resources_per_node" not in data):
        return data.get("replicas") or []
    resources = data.get("resources_per_node") if isinstance(data.get("resources_per_node"), dict) else {}
    return [{**resources, "role": kind.roles[0].name, "count": data.get("num_nodes", 1)}]


def bound_data(initial: dict, rows: list[dict]) -> dict:
    """What a post of the form filled with `initial` and `rows` would send (to check an import as a submission),
    with a new submission key, so that a second post of the filled form makes no second job."""
    data = {key: value if isinstance(value, list) else "" if value is None else str(value)
            for key, value in initial.items()}  # fmt: skip
    data["submission"] = new_submission()
    data.update({"replicas-TOTAL_FORMS": str(len(rows)), "replicas-INITIAL_FORMS": str(len(rows))})
    for index, row in enumerate(rows):
        data.update({f"replicas-{index}-{key}": "" if value is None else str(value) for key, value in row.items()})
    return data


def initial_from_job(job: Job) -> tuple[dict, list[dict]]:
    """A resubmission's initial values: the job's spec, with the same team and tier.

    A replica's stored memory includes the /dev/shm; the form asks for the rest, as the submitter did.
    """
    replicas = [
        {**group, "memory": group["memory"] - job.shm} if job.shm and group.get("memory", 0) > job.shm else group
        for group in job.replicas
    ]
    data = {
        "team": job.team.slug, "kind": job.kind, "name": job.name, "image": job.image, "command": job.command,
        "args": job.args, "env": job.env, "tier": job.tier.name, "max_runtime": job.max_runtime,
        "replicas": replicas, "volumes": job.volumes, "shm": format_memory(job.shm) if job.shm else "",
        "runtime": job.runtime, "gpu_type": job.gpu_type,
    }  # fmt: skip
    return initial_from_data(data)


def _volume_line(volume: dict) -> str:
    """A volume as the form writes it: "claim datasets /data ro" or "configmap train-config /etc/train"."""
    if "config_map" in volume:
        return f"configmap {volume['config_map']} {volume.get('path', '')}"
    return f"claim {volume.get('claim', '')} {volume.get('path', '')}" + (" ro" if volume.get("read_only") else "")


def _runtime_text(seconds) -> str:
    """The max runtime field's text of `seconds`: whole minutes as their number, as the field reads one,
    else minutes and seconds ("1 min 30 s"); a value that is no number of seconds as it came (a text
    quoted, never read as minutes), for the form to refuse by the field."""
    if seconds is None:
        return ""
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return repr(seconds)
    minutes, rest = divmod(seconds, 60)
    if not rest and minutes > 0:
        return str(minutes)
    return f"{minutes} min {rest} s" if minutes > 0 else f"{seconds} s"


def _env_line(name, value) -> str:
    """NAME=value, or for a value the form's line would change (line breaks, spaces at either end)
    NAME<<END, its lines, then END, with an END that is none of its lines."""
    value = str(value)
    if value == value.strip() and value == " ".join(value.splitlines()):
        return f"{name}={value}"
    lines = value.split("\n")
    taken = {line.strip() for line in lines}
    end = next(word for word in itertools.chain(["END"], (f"END{n}" for n in itertools.count(2))) if word not in taken)
    return "\n".join([f"{name}<<{end}", *lines, end])


def _join(words) -> str:
    if isinstance(words, list):
        return shlex.join(str(word) for word in words)
    return str(words or "")


def _quantity(value, formatter) -> str:
    if isinstance(value, int):
        return formatter(value) if value else ""
    return str(value or "")
