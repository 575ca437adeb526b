"""GPU types: a cluster of one type plans as a cluster without types (its
estimated starts, from the typed replay, included), the JSON reads and
refuses typed fields, and typed usage is charged per type.
The behaviour of mixed types is in scenarios/gpu_types.json."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from scheduling.policy import SnapshotError, plan, plan_to_dict, snapshot_from_dict

SCENARIOS = Path(__file__).parent / "scenarios"
QUOTAS = ("nominal", "borrowing_limit", "lending_limit")


def _untyped_cases():
    for path in sorted(SCENARIOS.glob("*.json")):
        table = json.loads(path.read_text())
        if table["rule"] == "GPU types":
            continue
        for case in table["scenarios"]:
            yield pytest.param({**table.get("defaults", {}), **case["snapshot"]}, id=case["id"])


def _one_type(snapshot: dict) -> dict:
    """Returns the snapshot with every node of type a100 and GPU quota keyed gpu:a100."""
    typed = copy.deepcopy(snapshot)
    for node in typed["nodes"]:
        node["gpu_type"] = "a100"
    for team in typed["teams"]:
        for field in QUOTAS:
            limits = team.get(field, {})
            if "gpu" in limits:
                limits["gpu:a100"] = limits.pop("gpu")
    for reservation in typed.get("reservations", []):
        reservation["gpu_type"] = "a100"
    return typed


def _decisions(got: dict, typed: bool) -> dict:
    """Returns what a plan decided, the type's name taken off its sentences."""
    def said(text: str) -> str:
        return text.replace("a100: ", "") if typed else text

    return {
        "admit": [(a["id"], a["placement"], a["victims"], a.get("gpu_type")) for a in got["admit"]],
        "wait": [(w["id"], w["position"], w["code"], said(w["reason"]), w["eta"])
                 for w in got["wait"]],
        "reject": [(r["id"], r["code"], said(r["reason"])) for r in got["reject"]],
        "reservations": [(r["id"], r["start"], r["placement"]) for r in got["reservations"]],
        "teams": [{key: value for key, value in t.items() if key != "by_type"} for t in got["teams"]],
    }


@pytest.mark.parametrize("snapshot", list(_untyped_cases()))
def test_a_cluster_of_one_type_decides_as_a_cluster_without_types(snapshot):
    plain = _decisions(plan_to_dict(plan(snapshot_from_dict(snapshot))), typed=False)
    typed_plan = plan_to_dict(plan(snapshot_from_dict(_one_type(snapshot))))
    typed = _decisions(typed_plan, typed=True)
    for entry in typed["admit"]:
        assert entry[3] == ("a100" if any(_gpus(snapshot, entry[0])) else None)
    # The one type's figures are the team's totals.
    for team in typed_plan["teams"]:
        (only,) = team.pop("by_type")
        assert only == {"gpu_type": "a100", **{key: value for key, value in team.items() if key != "team"}}
    plain["admit"] = [entry[:3] for entry in plain["admit"]]
    typed["admit"] = [entry[:3] for entry in typed["admit"]]
    assert typed == plain


def _gpus(snapshot: dict, job_id: str):
    job = next(j for j in snapshot["pending"] if j["id"] == job_id)
    return [group.get("gpu", 0) for group in job["replicas"]]


def test_a_plan_without_types_names_no_type():
    plans = [plan_to_dict(plan(snapshot_from_dict(case.values[0]))) for case in _untyped_cases()]
    admitted = [a for got in plans for a in got["admit"]]
    reserved = [r for got in plans for r in got["reservations"]]
    assert admitted and reserved
    assert not any("gpu_type" in entry for entry in admitted + reserved)
    assert not any("by_type" in team for got in plans for team in got["teams"])


TYPED = {
    "now": 1000,
    "gpu_types": [{"name": "l4"}, {"name": "a100"}],
    "nodes": [{"name": "a1", "gpu": 8, "gpu_type": "a100"}, {"name": "l1", "gpu": 8, "gpu_type": "l4"},
              {"name": "c1", "cpu": 8000}],
    "tiers": [{"name": "standard", "value": 100}],
    "teams": [{"name": "maps", "nominal": {"gpu:a100": 8, "cpu": 8000},
               "borrowing_limit": {"gpu:a100": 0}, "lending_limit": {"gpu:l4": 0}}],
    "running": [{"id": "r1", "team": "maps", "tier": "standard", "started": 10,
                 "replicas": [{"count": 1, "gpu": 4}], "nodes": ["a1"]}],
    "pending": [{"id": "p1", "team": "maps", "tier": "standard", "queued": 500,
                 "gpu_type": ["a100", "l4"], "replicas": [{"count": 1, "gpu": 4}]}],
    "reservations": [{"id": "p1", "start": 2000, "placement": {"a1": 1}, "gpu_type": "a100"}],
}


def test_typed_fields_are_read():
    snapshot = snapshot_from_dict(TYPED)
    assert snapshot.gpu_types == ("l4", "a100")
    assert [n.gpu_type for n in snapshot.nodes] == ["a100", "l4", None]
    assert snapshot.teams[0].nominal == {"gpu:a100": 8, "cpu": 8000}
    assert snapshot.pending[0].gpu_type == ("a100", "l4")
    assert snapshot.reservations[0].gpu_type == "a100"


def test_a_running_job_without_a_type_counts_against_its_nodes_type():
    # r1 holds 4 a100 GPUs of maps' 8 with no borrowing: 4 more fit, 8 do not.
    data = copy.deepcopy(TYPED)
    data["pending"][0].update(gpu_type="a100", replicas=[{"count": 1, "gpu": 8}])
    data.pop("reservations")
    got = plan_to_dict(plan(snapshot_from_dict(data)))
    assert [w["code"] for w in got["wait"]] == ["borrowing_limit"]
    data["running"][0]["gpu_type"] = "a100"
    assert plan_to_dict(plan(snapshot_from_dict(data)))["wait"] == got["wait"]


def _with(change):
    data = copy.deepcopy(TYPED)
    change(data)
    return data


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["nodes"][1].pop("gpu_type"),
     "nodes[1].gpu_type: is required on a node with GPUs once GPU types are named"),
    (lambda d: d["teams"][0]["nominal"].update(gpu=4),
     "teams[0].nominal.gpu: GPU quota is per type on a cluster with GPU types: use gpu:<type> keys"),
    (lambda d: d["nodes"][0].update(gpu_type="A100"),
     "nodes[0].gpu_type: must be a GPU type name (a DNS-1123 label), got 'A100'"),
    (lambda d: d["teams"][0]["nominal"].update({"gpu:": 4}),
     "teams[0].nominal.gpu:: must be a GPU type name (a DNS-1123 label), got ''"),
    (lambda d: d["teams"][0].update(per_replica_max={"gpu:a100": 4}),
     "teams[0].per_replica_max.gpu:a100: is not a known field"),
    (lambda d: d["pending"][0].update(gpu_type=["a100", "a100"]),
     "pending[0].gpu_type[1]: duplicates 'a100'"),
    (lambda d: d["pending"][0].update(gpu_type=[]),
     "pending[0].gpu_type: must name at least one GPU type"),
    (lambda d: d["running"][0].update(gpu_type="h100"),
     "running[0].gpu_type: must name a GPU type of the snapshot, got 'h100'"),
    (lambda d: d["gpu_types"].append({"name": "l4"}), "gpu_types[2].name: duplicates 'l4'"),
])
def test_bad_typed_fields_name_the_field(change, message):
    with pytest.raises(SnapshotError) as raised:
        snapshot_from_dict(_with(change))
    assert str(raised.value) == message


def test_a_job_asking_for_a_type_on_a_cluster_without_types_is_rejected():
    data = copy.deepcopy(TYPED)
    for node in data["nodes"]:
        node.pop("gpu_type", None)
    data.pop("gpu_types")
    data.pop("reservations")
    data["teams"][0] = {"name": "maps", "nominal": {"gpu": 16}}
    got = plan_to_dict(plan(snapshot_from_dict(data)))
    assert got["reject"] == [{"id": "p1", "code": "unknown_gpu_type",
                              "reason": "a100: the cluster has no GPUs of this type; "
                                        "l4: the cluster has no GPUs of this type."}]
