"""Snapshot validation names the field and the problem; plan JSON is stable."""

import copy
import json

import pytest

from scheduling.policy import SnapshotError, plan, plan_to_dict, snapshot_from_dict

GOOD = {
    "now": 1000,
    "nodes": [{"name": "n1", "gpu": 8, "cpu": 64000, "memory": 549755813888}],
    "tiers": [{"name": "production", "value": 1000, "preemptible": False},
              {"name": "standard", "value": 100, "preemptible": True}],
    "teams": [{"name": "finance", "nominal": {"gpu": 8}, "borrowing_limit": {"gpu": 4},
               "lending_limit": {}, "weight": 1}],
    "running": [{"id": "r1", "team": "finance", "tier": "standard", "started": 10,
                 "replicas": [{"count": 4, "gpu": 1, "cpu": 2000, "memory": 4294967296}],
                 "nodes": ["n1", "n1", "n1", "n1"]}],
    "pending": [{"id": "p1", "team": "finance", "tier": "production", "queued": 500,
                 "replicas": [{"count": 2, "gpu": 4}]}],
}


def _with(change):
    data = copy.deepcopy(GOOD)
    change(data)
    return data


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["pending"][0]["replicas"][0].update(gpu=-1),
     "pending[0].replicas[0].gpu: must be a non-negative integer, got -1"),
    (lambda d: d.pop("now"), "now: is required"),
    (lambda d: d["nodes"][0].update(gpu="8"), "nodes[0].gpu: must be a non-negative integer, got '8'"),
    (lambda d: d["pending"][0].update(team="nobody"),
     "pending[0].team: must name a team of the snapshot, got 'nobody'"),
    (lambda d: d["running"][0].update(nodes=["n1"]),
     "running[0].nodes: must name one node per replica (4), got 1"),
    (lambda d: d["teams"][0].update(weight=0), "teams[0].weight: must be a positive number, got 0"),
    (lambda d: d["teams"][0]["nominal"].update(gpus=8), "teams[0].nominal.gpus: is not a known field"),
    (lambda d: d.update(settings={"starvation_after": True}),
     "settings.starvation_after: must be a non-negative integer, got True"),
    (lambda d: d["pending"].append(dict(d["pending"][0])),
     "running+pending[2].id: duplicates 'p1'"),
    (lambda d: d["running"][0].update(team=None),
     "running[0].tier: must be null for outside usage (team null)"),
    (lambda d: d["running"][0].update(estimate=0),
     "running[0].estimate: must be an integer >= 1, got 0"),
    (lambda d: d["pending"][0].update(estimate="1h"),
     "pending[0].estimate: must be an integer >= 1, got '1h'"),
    (lambda d: d["running"][0].update(checkpointed=1.5),
     "running[0].checkpointed: must be an integer number of seconds, got 1.5"),
    (lambda d: d["pending"][0].update(checkpointed=900),
     "pending[0].checkpointed: is not a known field"),
    (lambda d: d.update(settings={"starvation_guard": "wait"}),
     "settings.starvation_guard: must be one of reserve, hold, got 'wait'"),
    (lambda d: d.update(settings={"max_reservations": -1}),
     "settings.max_reservations: must be a non-negative integer, got -1"),
    (lambda d: d.update(settings={"reservation_slack": "10m"}),
     "settings.reservation_slack: must be a non-negative integer, got '10m'"),
    (lambda d: d.update(reservations={"p1": 4000}),
     "reservations: must be a list, got dict"),
    (lambda d: d.update(reservations=[{"id": "p1", "placement": {"n1": 2}}]),
     "reservations[0].start: is required"),
    (lambda d: d.update(reservations=[{"id": "p1", "start": 4000, "placement": {"n1": 0}}]),
     "reservations[0].placement.n1: must be an integer >= 1, got 0"),
    (lambda d: d.update(reservations=[{"id": "p1", "start": 4000, "placement": ["n1"]}]),
     "reservations[0].placement: must be an object mapping nodes to replicas"),
    (lambda d: d.update(reservations=[{"id": "p1", "start": 4000, "placement": {"n1": 2},
                                       "eta": 4000}]),
     "reservations[0].eta: is not a known field"),
    (lambda d: d["nodes"][0].update(schedulable="no"),
     "nodes[0].schedulable: must be true or false, got 'no'"),
    (lambda d: d["nodes"][0].update(unschedulable="cordoned"),
     'nodes[0].unschedulable: says why a node takes no new pods: only with "schedulable": false'),
    (lambda d: d["nodes"][0].update(schedulable=False, unschedulable=""),
     "nodes[0].unschedulable: must be a non-empty string, got ''"),
])
def test_it_names_the_field_and_the_problem(change, message):
    with pytest.raises(SnapshotError) as caught:
        snapshot_from_dict(_with(change))
    assert str(caught.value) == message


def test_it_reads_the_fields_of_reservations_and_expected_runtimes():
    data = _with(lambda d: d.update(
        settings={"max_reservations": 2, "reservation_slack": 300, "starvation_guard": "hold"},
        reservations=[{"id": "p1", "start": 4000, "placement": {"n1": 2, "drained": 1}},
                      {"id": "gone", "start": 4000, "placement": {"n1": 1}}]))
    data["running"][0].update(estimate=3600, checkpointed=900)
    data["pending"][0].update(estimate=1200)
    snapshot = snapshot_from_dict(data)
    assert (snapshot.settings.max_reservations, snapshot.settings.reservation_slack,
            snapshot.settings.starvation_guard) == (2, 300, "hold")
    assert (snapshot.running[0].estimate, snapshot.running[0].checkpointed) == (3600, 900)
    assert snapshot.pending[0].estimate == 1200
    # A node gone from the snapshot and a job no longer pending drop out.
    assert [(r.id, r.start, r.placement) for r in snapshot.reservations] == [
        ("p1", 4000, (("n1", 2),))]


def test_it_reads_a_node_that_takes_no_new_pods_and_keeps_no_reservation_on_it():
    data = _with(lambda d: d.update(reservations=[{"id": "p1", "start": 4000, "placement": {"n1": 1, "n2": 1}}]))
    data["nodes"].append({"name": "n2", "gpu": 8, "schedulable": False, "unschedulable": "tainted maintenance"})
    data["nodes"].append({"name": "n3", "gpu": 8, "schedulable": False})
    snapshot = snapshot_from_dict(data)
    assert [(n.name, n.schedulable, n.unschedulable) for n in snapshot.nodes] == [
        ("n1", True, ""), ("n2", False, "tainted maintenance"), ("n3", False, "")]
    assert [(r.id, r.placement) for r in snapshot.reservations] == [("p1", (("n1", 1),))]


def test_a_snapshot_saying_every_node_takes_pods_plans_as_one_without_the_field():
    marked = _with(lambda d: d["nodes"][0].update(schedulable=True))
    assert plan(snapshot_from_dict(marked)) == plan(snapshot_from_dict(GOOD))


def test_it_rejects_a_snapshot_that_is_not_an_object():
    with pytest.raises(SnapshotError, match="must be an object"):
        snapshot_from_dict([])


def test_it_answers_designs_example():
    got = plan_to_dict(plan(snapshot_from_dict(GOOD)))
    assert got == {"admit": [{"id": "p1", "placement": {"n1": 2}, "victims": ["r1"]}],
                   "wait": [], "reject": [], "reservations": [],
                   "teams": [{"team": "finance", "nominal": 8, "used": 8, "within": 8, "borrowed": 0,
                   "lent": 0, "idle": 0, "waiting": 0, "borrowed_from": {}}]}


def test_it_gives_byte_identical_output_for_the_same_snapshot():
    data = _with(lambda d: d["pending"].extend([
        {"id": f"q{k}", "team": "finance", "tier": "standard", "queued": 600 + k,
         "replicas": [{"count": 1, "gpu": 1 + k % 8}]} for k in range(20)]))
    first = json.dumps(plan_to_dict(plan(snapshot_from_dict(data))))
    again = json.dumps(plan_to_dict(plan(snapshot_from_dict(copy.deepcopy(data)))))
    assert first == again
