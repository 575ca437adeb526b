"""The JSON snapshot in, the JSON plan out: what `manage.py plan` reads and prints.

`snapshot_from_dict` checks every field and raises `SnapshotError` naming the
field path and what was wrong; `plan_to_dict` gives the output JSON, sorted so
the same snapshot always prints the same bytes.
"""

from __future__ import annotations

from typing import Any

from .model import (
    GUARDS, RESOURCES, Node, PendingJob, Plan, ReplicaGroup, Reservation, RunningJob, Settings,
    Snapshot, Team, TeamGpus, Tier,
)


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


def _obj(data: Any, path: str, allowed: set[str], required: set[str] = frozenset()) -> dict:
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


def _resources(data: Any, path: str) -> dict[str, int]:
    data = _obj(data, path, set(RESOURCES))
    return {key: _int(value, f"{path}.{key}") for key, value in data.items()}


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
                           "reservations"},
                {"now", "nodes", "tiers", "teams"})
    now = _time(data["now"], "now")
    nodes = []
    for k, item in enumerate(_list(data["nodes"], "nodes")):
        where = f"nodes[{k}]"
        item = _obj(item, where, {"name", *RESOURCES}, {"name"})
        nodes.append(Node(_str(item["name"], f"{where}.name"),
                          *(_int(item.get(r, 0), f"{where}.{r}") for r in RESOURCES)))
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
            _resources(item.get("nominal", {}), f"{where}.nominal"),
            _resources(item.get("borrowing_limit", {}), f"{where}.borrowing_limit"),
            _resources(item.get("lending_limit", {}), f"{where}.lending_limit"),
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
                                  "max_runtime", "queued", "estimate", "checkpointed"},
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
        ))
    pending = []
    for k, item in enumerate(_list(data.get("pending", []), "pending")):
        where = f"pending[{k}]"
        item = _obj(item, where, {"id", "team", "tier", "queued", "replicas", "max_runtime",
                                  "estimate", "name", "owner"},
                    {"id", "team", "tier", "queued", "replicas"})
        team, tier = team_and_tier(item, where, outside_ok=False)
        pending.append(PendingJob(
            _str(item["id"], f"{where}.id"), team, tier, _time(item["queued"], f"{where}.queued"),
            _replicas(item["replicas"], f"{where}.replicas"), _optional_runtime(item, where),
            _optional_runtime(item, where, "estimate"),
        ))
    _unique([j.id for j in running] + [j.id for j in pending], "running+pending", "id")
    return Snapshot(
        now, tuple(nodes), tuple(tiers), tuple(teams), tuple(running), tuple(pending),
        _settings(data.get("settings", {})),
        _reservations(data.get("reservations", []), {n.name: i for i, n in enumerate(nodes)},
                      {j.id for j in pending}),
    )


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
        item = _obj(item, where, {"id", "start", "placement"}, {"id", "start", "placement"})
        job = _str(item["id"], f"{where}.id")
        start = _time(item["start"], f"{where}.start")
        placement = item["placement"]
        if not isinstance(placement, dict) or not placement:
            raise SnapshotError(f"{where}.placement",
                                "must be an object mapping nodes to replicas")
        for name, count in placement.items():
            _int(count, f"{where}.placement.{name}", minimum=1)
        # A node gone from the snapshot (drained) no longer keeps the job's room.
        counts = tuple((name, placement[name]) for name in sorted(
            (name for name in placement if name in nodes), key=nodes.__getitem__))
        if job in pending and counts:
            kept.append(Reservation(job, start, counts))
    _unique([r.id for r in kept], "reservations", "id")
    return tuple(kept)


def _optional_runtime(item: dict, where: str, name: str = "max_runtime") -> int | None:
    value = item.get(name)
    return None if value is None else _int(value, f"{where}.{name}", minimum=1)


def plan_to_dict(plan: Plan) -> dict:
    """Returns the plan as `manage.py plan` prints it: admitted jobs by id, waiting jobs by
    position, rejections by id, the reservations the next snapshot takes back, and each team's
    GPU figures in snapshot order."""
    return {
        "admit": [
            {"id": a.id, "placement": dict(a.placement), "victims": list(a.victims)}
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
            {"id": r.id, "start": r.start, "placement": dict(r.placement)}
            for r in sorted(plan.reservations, key=lambda r: r.id)
        ],
        "teams": [team_gpus_to_dict(t) for t in plan.teams],
    }


def team_gpus_to_dict(t: TeamGpus) -> dict:
    """Returns a team's GPU figures as the plan JSON gives them (and the loop stores them)."""
    return {"team": t.team, "nominal": t.nominal, "used": t.used, "within": t.within,
            "borrowed": t.borrowed, "lent": t.lent, "idle": t.idle, "waiting": t.waiting,
            "borrowed_from": dict(t.borrowed_from)}
