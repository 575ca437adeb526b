"""The JSON snapshot in, the JSON plan out: what `manage.py plan` reads and prints.

`snapshot_from_dict` checks every field and raises `SnapshotError` naming the
field path and what was wrong; `plan_to_dict` gives the output JSON, sorted so
the same snapshot always prints the same bytes.

A node that takes no new pods now (cordoned for a drain, or tainted against
Gangway's pods) carries `"schedulable": false` (absent: true), and may say
why in `"unschedulable"` ("cordoned", "tainted maintenance"). It counts only
for R10: a job that fits only with such nodes waits, naming them, instead
of being rejected; nothing is placed or reserved on it, and its capacity is
neither free room nor R2's unassigned capacity.

A running job may carry `"stopping": true` (absent: false): it is being
preempted already and the cluster refuses, or fails, to stop it, or it is
being cancelled and has not stopped yet, so it holds its room and counts in
its team's quota but is never a victim.

GPU types (types.py), all optional; a snapshot without them reads as ever:
- `"gpu_types": [{"name": "l4"}, {"name": "a100"}]`: the cluster's order,
  cheapest first (types only nodes or quotas name come after, in the order
  they first appear);
- a node's `"gpu_type": "a100"`: once any node or quota names a type, every
  node with GPUs must name one;
- `"gpu:a100"` in a team's `nominal`, `borrowing_limit` and `lending_limit`:
  that type's quota, read as `gpu` is on a cluster without types (the plain
  `gpu` key is then refused: quota is per type);
- a pending job's `"gpu_type"`: a name or a list in order of preference
  (absent: its team's types in the cluster's order);
- a running job's `"gpu_type"`: the type it got (absent: the type of the
  first node holding its GPUs);
- a reservation's `"gpu_type"`, as the plan gives it.
The plan names the type in each admission and reservation (`"gpu_type"`),
only on a cluster with types. Names are DNS-1123 labels ("a100", "h100-80gb").
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from .model import (
    GUARDS, RESOURCES, Node, PendingJob, Plan, ReplicaGroup, Reservation, RunningJob, Settings,
    Snapshot, Team, TeamGpus, Tier,
)
from .types import cluster_types, type_of_key

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class SnapshotError(ValueError):
    """A snapshot field is missing or wrong; the message names its path."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def _shown(value: Any) -> str:
    return "null" if value is None else repr(value) if isinstance(value, str) else str(value)


def _int(data: Any, path: str, *, minimum: int = 0) -> int:
    if isinstance(data, bool) or not isinstance(data, int) or data < minimum:
        kind = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        raise SnapshotError(path, f"must be {kind}, got {_shown(data)}")
    return data


def _time(data: Any, path: str) -> int:
    if isinstance(data, bool) or not isinstance(data, int):
        raise SnapshotError(path, f"must be an integer number of seconds, got {_shown(data)}")
    return data


def _str(data: Any, path: str) -> str:
    if not isinstance(data, str) or not data:
        raise SnapshotError(path, f"must be a non-empty string, got {_shown(data)}")
    return data


def _obj(data: Any, path: str, allowed: set[str], required: Collection[str] = frozenset()) -> dict:
    if not isinstance(data, dict):
        raise SnapshotError(path, f"must be an object, got {type(data).__name__}")
    for key in sorted(required):
        if key not in data:
            raise SnapshotError(f"{path}.{key}" if path else key, "is required")
    for key in data:
        if key not in allowed:
            raise SnapshotError(f"{path}.{key}" if path else key, "is not a known field")
    return data


def _list(data: Any, path: str) -> list:
    if not isinstance(data, list):
        raise SnapshotError(path, f"must be a list, got {type(data).__name__}")
    return data


def _resources(data: Any, path: str, typed: bool = False) -> dict[str, int]:
    """Returns a resource map; `typed` also takes `gpu:<type>` keys (quota)."""
    if typed and isinstance(data, dict):
        for key in data:
            name = type_of_key(key) if isinstance(key, str) else None
            if name is not None:
                _type_name(name, f"{path}.{key}")
        data = _obj(data, path, set(RESOURCES) | {k for k in data if type_of_key(k)})
    else:
        data = _obj(data, path, set(RESOURCES))
    return {key: _int(value, f"{path}.{key}") for key, value in data.items()}


def _type_name(data: Any, path: str) -> str:
    if not isinstance(data, str) or not _LABEL.fullmatch(data):
        raise SnapshotError(path, f"must be a GPU type name (a DNS-1123 label), got {_shown(data)}")
    return data


def _gpu_types(data: Any) -> tuple[str, ...]:
    names = []
    for k, item in enumerate(_list(data, "gpu_types")):
        item = _obj(item, f"gpu_types[{k}]", {"name"}, {"name"})
        names.append(_type_name(item["name"], f"gpu_types[{k}].name"))
    _unique(names, "gpu_types", "name")
    return tuple(names)


def _job_types(data: Any, path: str) -> tuple[str, ...]:
    """Returns a pending job's GPU types: one name, or a list in order of preference."""
    if data is None:
        return ()
    if isinstance(data, str):
        return (_type_name(data, path),)
    items = _list(data, path)
    if not items:
        raise SnapshotError(path, "must name at least one GPU type")
    names = [_type_name(item, f"{path}[{k}]") for k, item in enumerate(items)]
    seen = set()
    for k, name in enumerate(names):
        if name in seen:
            raise SnapshotError(f"{path}[{k}]", f"duplicates {name!r}")
        seen.add(name)
    return tuple(names)


def _check_types(snapshot: Snapshot) -> None:
    """Raises SnapshotError where a snapshot mixes typed and untyped GPUs."""
    types = cluster_types(snapshot)
    if not types:
        return
    for k, node in enumerate(snapshot.nodes):
        if node.gpu and node.gpu_type is None:
            raise SnapshotError(f"nodes[{k}].gpu_type",
                                "is required on a node with GPUs once GPU types are named")
    for k, team in enumerate(snapshot.teams):
        for field in ("nominal", "borrowing_limit", "lending_limit"):
            if "gpu" in getattr(team, field):
                raise SnapshotError(f"teams[{k}].{field}.gpu",
                                    "GPU quota is per type on a cluster with GPU types: "
                                    "use gpu:<type> keys")
    for k, job in enumerate(snapshot.running):
        if job.gpu_type is not None and job.gpu_type not in types:
            raise SnapshotError(f"running[{k}].gpu_type",
                                f"must name a GPU type of the snapshot, got {job.gpu_type!r}")


def _replicas(data: Any, path: str) -> tuple[ReplicaGroup, ...]:
    groups = []
    for k, item in enumerate(_list(data, path)):
        where = f"{path}[{k}]"
        item = _obj(item, where, {"count", *RESOURCES, "role"}, {"count"})
        groups.append(ReplicaGroup(
            _int(item["count"], f"{where}.count"),
            *(_int(item.get(r, 0), f"{where}.{r}") for r in RESOURCES),
        ))
    if not any(g.count for g in groups):
        raise SnapshotError(path, "must hold at least one replica")
    return tuple(groups)


def _unique(items: list, path: str, what: str) -> None:
    seen = set()
    for k, name in enumerate(items):
        if name in seen:
            raise SnapshotError(f"{path}[{k}].{what}", f"duplicates {name!r}")
        seen.add(name)


def snapshot_from_dict(data: Any) -> Snapshot:
    """Returns the snapshot in `data` (parsed JSON), or raises SnapshotError."""
    data = _obj(data, "", {"now", "nodes", "tiers", "teams", "running", "pending", "settings",
                           "reservations", "gpu_types"},
                {"now", "nodes", "tiers", "teams"})
    now = _time(data["now"], "now")
    nodes = []
    for k, item in enumerate(_list(data["nodes"], "nodes")):
        where = f"nodes[{k}]"
        item = _obj(item, where, {"name", *RESOURCES, "gpu_type", "schedulable", "unschedulable"},
                    {"name"})
        gpu_type = item.get("gpu_type")
        name = _str(item["name"], f"{where}.name")
        gpu, cpu, memory = (_int(item.get(r, 0), f"{where}.{r}") for r in RESOURCES)
        schedulable, why = _schedulable(item, where)
        nodes.append(Node(name, gpu, cpu, memory,
                          None if gpu_type is None else _type_name(gpu_type, f"{where}.gpu_type"),
                          schedulable, why))
    _unique([n.name for n in nodes], "nodes", "name")
    tiers = []
    for k, item in enumerate(_list(data["tiers"], "tiers")):
        where = f"tiers[{k}]"
        item = _obj(item, where, {"name", "value", "preemptible", "grace_period"},
                    {"name", "value"})
        preemptible = item.get("preemptible", True)
        if not isinstance(preemptible, bool):
            raise SnapshotError(f"{where}.preemptible", f"must be true or false, got {_shown(preemptible)}")
        tiers.append(Tier(_str(item["name"], f"{where}.name"),
                          _time(item["value"], f"{where}.value"), preemptible))
    _unique([t.name for t in tiers], "tiers", "name")
    teams = []
    for k, item in enumerate(_list(data["teams"], "teams")):
        where = f"teams[{k}]"
        item = _obj(item, where, {"name", "nominal", "borrowing_limit", "lending_limit",
                                  "weight", "per_replica_max"}, {"name"})
        weight = item.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
            raise SnapshotError(f"{where}.weight", f"must be a positive number, got {_shown(weight)}")
        teams.append(Team(
            _str(item["name"], f"{where}.name"),
            _resources(item.get("nominal", {}), f"{where}.nominal", typed=True),
            _resources(item.get("borrowing_limit", {}), f"{where}.borrowing_limit", typed=True),
            _resources(item.get("lending_limit", {}), f"{where}.lending_limit", typed=True),
            float(weight),
            _resources(item.get("per_replica_max", {}), f"{where}.per_replica_max"),
        ))
    _unique([t.name for t in teams], "teams", "name")
    team_names = {t.name for t in teams}
    tier_names = {t.name for t in tiers}

    def team_and_tier(item: dict, where: str, outside_ok: bool) -> tuple[str | None, str | None]:
        team = item.get("team")
        if team is None and outside_ok:
            if item.get("tier") is not None:
                raise SnapshotError(f"{where}.tier", "must be null for outside usage (team null)")
            return None, None
        if team not in team_names:
            raise SnapshotError(f"{where}.team", f"must name a team of the snapshot, got {_shown(team)}")
        tier = item.get("tier")
        if tier not in tier_names:
            raise SnapshotError(f"{where}.tier", f"must name a tier of the snapshot, got {_shown(tier)}")
        return team, tier

    running = []
    for k, item in enumerate(_list(data.get("running", []), "running")):
        where = f"running[{k}]"
        item = _obj(item, where, {"id", "team", "tier", "started", "replicas", "nodes",
                                  "max_runtime", "queued", "estimate", "checkpointed",
                                  "gpu_type", "stopping"},
                    {"id", "team", "started", "replicas", "nodes"})
        team, tier = team_and_tier(item, where, outside_ok=True)
        replicas = _replicas(item["replicas"], f"{where}.replicas")
        placed = tuple(_str(n, f"{where}.nodes[{j}]")
                       for j, n in enumerate(_list(item["nodes"], f"{where}.nodes")))
        # A node the snapshot does not list is allowed: it was drained or
        # tainted while the job ran there (see model.RunningJob).
        count = sum(g.count for g in replicas)
        if len(placed) != count:
            raise SnapshotError(f"{where}.nodes", f"must name one node per replica ({count}), got {len(placed)}")
        running.append(RunningJob(
            _str(item["id"], f"{where}.id"), team, tier, _time(item["started"], f"{where}.started"),
            replicas, placed, _optional_runtime(item, where),
            None if item.get("queued") is None else _time(item["queued"], f"{where}.queued"),
            _optional_runtime(item, where, "estimate"),
            None if item.get("checkpointed") is None
            else _time(item["checkpointed"], f"{where}.checkpointed"),
            None if item.get("gpu_type") is None
            else _type_name(item["gpu_type"], f"{where}.gpu_type"),
            _flag(item, "stopping", where),
        ))
    pending = []
    for k, item in enumerate(_list(data.get("pending", []), "pending")):
        where = f"pending[{k}]"
        item = _obj(item, where, {"id", "team", "tier", "queued", "replicas", "max_runtime",
                                  "estimate", "name", "owner", "gpu_type"},
                    {"id", "team", "tier", "queued", "replicas"})
        team, tier = team_and_tier(item, where, outside_ok=False)
        assert team is not None and tier is not None  # only outside usage has neither
        pending.append(PendingJob(
            _str(item["id"], f"{where}.id"), team, tier, _time(item["queued"], f"{where}.queued"),
            _replicas(item["replicas"], f"{where}.replicas"), _optional_runtime(item, where),
            _optional_runtime(item, where, "estimate"),
            _job_types(item.get("gpu_type"), f"{where}.gpu_type"),
        ))
    _unique([j.id for j in running] + [j.id for j in pending], "running+pending", "id")
    snapshot = Snapshot(
        now, tuple(nodes), tuple(tiers), tuple(teams), tuple(running), tuple(pending),
        _settings(data.get("settings", {})),
        _reservations(data.get("reservations", []),
                      {n.name: i for i, n in enumerate(nodes) if n.schedulable},
                      {j.id for j in pending}),
        _gpu_types(data.get("gpu_types", [])),
    )
    _check_types(snapshot)
    return snapshot


_TIMES = ("starvation_after", "min_runtime_before_preemption", "default_runtime",
          "max_reservations", "reservation_slack")


def _settings(data: Any) -> Settings:
    data = _obj(data, "settings", {*_TIMES, "starvation_guard"})
    defaults = Settings()
    guard = data.get("starvation_guard", defaults.starvation_guard)
    if guard not in GUARDS:
        raise SnapshotError("settings.starvation_guard",
                            f"must be one of {', '.join(GUARDS)}, got {_shown(guard)}")
    return Settings(
        **{name: _int(data.get(name, getattr(defaults, name)), f"settings.{name}")
           for name in _TIMES},
        starvation_guard=guard,
    )


def _reservations(data: Any, nodes: dict[str, int], pending: set[str]) -> tuple[Reservation, ...]:
    """Returns the previous plan's reservations. One naming a job no longer
    pending (it started, or was cancelled) is dropped: nothing holds it."""
    kept = []
    for k, item in enumerate(_list(data, "reservations")):
        where = f"reservations[{k}]"
        item = _obj(item, where, {"id", "start", "placement", "gpu_type"},
                    {"id", "start", "placement"})
        job = _str(item["id"], f"{where}.id")
        start = _time(item["start"], f"{where}.start")
        placement = item["placement"]
        if not isinstance(placement, dict) or not placement:
            raise SnapshotError(f"{where}.placement",
                                "must be an object mapping nodes to replicas")
        for name, count in placement.items():
            _int(count, f"{where}.placement.{name}", minimum=1)
        # A node gone from the snapshot (drained), or taking no new pods, no
        # longer keeps the job's room.
        counts = tuple((name, placement[name]) for name in sorted(
            (name for name in placement if name in nodes), key=nodes.__getitem__))
        gpu_type = item.get("gpu_type")
        if gpu_type is not None:
            gpu_type = _type_name(gpu_type, f"{where}.gpu_type")
        if job in pending and counts:
            kept.append(Reservation(job, start, counts, gpu_type=gpu_type))
    _unique([r.id for r in kept], "reservations", "id")
    return tuple(kept)


def _flag(item: dict, name: str, where: str) -> bool:
    """Returns an optional true-or-false field of `item` (absent: false)."""
    value = item.get(name, False)
    if not isinstance(value, bool):
        raise SnapshotError(f"{where}.{name}", f"must be true or false, got {_shown(value)}")
    return value


def _schedulable(item: dict, where: str) -> tuple[bool, str]:
    """Returns whether a node takes new pods (`"schedulable"`, true when
    absent) and, for one that does not, why (`"unschedulable"`, optional:
    "cordoned", "tainted maintenance")."""
    schedulable = item.get("schedulable", True)
    if not isinstance(schedulable, bool):
        raise SnapshotError(f"{where}.schedulable", f"must be true or false, got {_shown(schedulable)}")
    if "unschedulable" not in item:
        return schedulable, ""
    why = _str(item["unschedulable"], f"{where}.unschedulable")
    if schedulable:
        raise SnapshotError(f"{where}.unschedulable",
                            'says why a node takes no new pods: only with "schedulable": false')
    return schedulable, why


def _optional_runtime(item: dict, where: str, name: str = "max_runtime") -> int | None:
    value = item.get(name)
    return None if value is None else _int(value, f"{where}.{name}", minimum=1)


def plan_to_dict(plan: Plan) -> dict:
    """Returns the plan as `manage.py plan` prints it: admitted jobs by id, waiting jobs by
    position, rejections by id, the reservations the next snapshot takes back, and each team's
    GPU figures in snapshot order."""
    return {
        "admit": [
            _typed({"id": a.id, "placement": dict(a.placement), "victims": list(a.victims)},
                   a.gpu_type)
            for a in sorted(plan.admit, key=lambda a: a.id)
        ],
        "wait": [
            {"id": w.id, "position": w.position, "team_position": w.team_position,
             "code": w.code, "reason": w.reason, "eta": w.eta}
            for w in sorted(plan.wait, key=lambda w: (w.position, w.id))
        ],
        "reject": [
            {"id": r.id, "code": r.code, "reason": r.reason}
            for r in sorted(plan.reject, key=lambda r: r.id)
        ],
        "reservations": [
            _typed({"id": r.id, "start": r.start, "placement": dict(r.placement)}, r.gpu_type)
            for r in sorted(plan.reservations, key=lambda r: r.id)
        ],
        "teams": [team_gpus_to_dict(t) for t in plan.teams],
    }


def _typed(entry: dict, gpu_type: str | None) -> dict:
    """Returns a plan entry with its GPU type, named only on a cluster with types."""
    if gpu_type is not None:
        entry["gpu_type"] = gpu_type
    return entry


def team_gpus_to_dict(t: TeamGpus) -> dict:
    """Returns a team's GPU figures as the plan JSON gives them (and the loop stores them);
    on a cluster with GPU types, with `by_type`: a list, in the cluster's order, of each
    type's figures named by `gpu_type` (a list, not an object, so a store that sorts keys
    keeps the order)."""
    figures = {"team": t.team, **_gpu_figures(t)}
    if t.by_type:
        figures["by_type"] = [{"gpu_type": name, **_gpu_figures(f)} for name, f in t.by_type]
    return figures


def _gpu_figures(t: TeamGpus) -> dict:
    return {"nominal": t.nominal, "used": t.used, "within": t.within, "borrowed": t.borrowed,
            "lent": t.lent, "idle": t.idle, "waiting": t.waiting, "borrowed_from": dict(t.borrowed_from)}
