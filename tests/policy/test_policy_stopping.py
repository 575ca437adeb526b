"""A running job being stopped already (`"stopping": true`: preempted by an earlier cycle, and the cluster
refuses to stop it) still holds its room and counts in its team's quota, but is never a victim again: choosing
it would free nothing, and its preemptor would wait behind it for good. R5's and R6's searches take the next
job in R8's order instead, or find none.

Also from the same review: on a cluster of GPU types, a job naming no type that runs on a cordoned node counts
in its node's type; and a standing is read only for the very nodes it was made for, their sizes too."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.policy import (
    Node, PendingJob, ReplicaGroup, RunningJob, Settings, Snapshot, SnapshotError, Standing, Team, Tier, plan,
    plan_to_dict, snapshot_from_dict,
)

NOW = 100_000
TIERS = [{"name": "production", "value": 1000, "preemptible": False},
         {"name": "experiment", "value": 10, "preemptible": True}]  # fmt: skip


def _running(job_id, team, node, *, started, stopping=None, gpu=8, tier="experiment"):
    job = {"id": job_id, "team": team, "tier": tier, "started": started, "max_runtime": 200_000,
           "replicas": [{"count": 1, "gpu": gpu}], "nodes": [node]}  # fmt: skip
    if stopping is not None:
        job["stopping"] = stopping
    return job


def _planned(nodes, teams, running, pending):
    snapshot = {"now": NOW, "nodes": [{"name": n, "gpu": 8} for n in nodes], "tiers": TIERS, "teams": teams,
                "running": running, "pending": pending}  # fmt: skip
    return plan_to_dict(plan(snapshot_from_dict(snapshot)))


URGENT = {"id": "urgent", "team": "a", "tier": "production", "queued": NOW - 60, "max_runtime": 3600,
          "replicas": [{"count": 1, "gpu": 8}]}  # fmt: skip


@pytest.mark.parametrize("stopping, victim", [(None, "newer"), (False, "newer"), (True, "older")])
def test_r5_takes_the_next_job_in_r8_order_when_the_first_is_being_stopped(stopping, victim):
    # `newer` has the least unsaved work, so R8 takes it first, unless it is being stopped already.
    running = [_running("newer", "a", "n1", started=NOW - 4000, stopping=stopping),
               _running("older", "a", "n2", started=NOW - 9000)]
    teams = [{"name": "a", "nominal": {"gpu": 16}, "borrowing_limit": {"gpu": 0}}]
    (admitted,) = _planned(["n1", "n2"], teams, running, [URGENT])["admit"]
    assert admitted["victims"] == [victim]


def test_a_preemptor_whose_only_candidate_is_being_stopped_waits_and_nobody_is_preempted():
    running = [_running("stuck", "a", "n1", started=NOW - 4000, stopping=True)]
    teams = [{"name": "a", "nominal": {"gpu": 8}, "borrowing_limit": {"gpu": 0}}]
    got = _planned(["n1"], teams, running, [URGENT])
    assert got["admit"] == []
    assert [w["id"] for w in got["wait"]] == ["urgent"]


@pytest.mark.parametrize("stopping, victim", [(False, "borrowed-newer"), (True, "borrowed-older")])
def test_reclaim_takes_the_lenders_quota_back_from_the_next_job_when_the_first_is_being_stopped(stopping, victim):
    teams = [{"name": "a", "nominal": {"gpu": 8}, "borrowing_limit": {"gpu": 0}},
             {"name": "b", "nominal": {"gpu": 8}, "borrowing_limit": {"gpu": 16}}]  # fmt: skip
    running = [_running("own", "b", "n1", started=NOW - 9000),
               _running("borrowed-older", "b", "n2", started=NOW - 8000),
               _running("borrowed-newer", "b", "n3", started=NOW - 4000, stopping=stopping)]
    wanted = dict(URGENT, tier="experiment")
    (admitted,) = _planned(["n1", "n2", "n3"], teams, running, [wanted])["admit"]
    assert admitted["victims"] == [victim]


def test_a_job_being_stopped_still_counts_in_its_teams_quota_and_holds_its_room():
    running = [_running("stuck", "a", "n1", started=NOW - 4000, stopping=True)]
    teams = [{"name": "a", "nominal": {"gpu": 8}, "borrowing_limit": {"gpu": 0}},
             {"name": "b", "nominal": {"gpu": 8}, "borrowing_limit": {"gpu": 0}}]  # fmt: skip
    more = dict(URGENT, id="more", tier="experiment")
    got = _planned(["n1", "n2"], teams, running, [more])
    assert got["admit"] == []  # n2 is free, but team a's 8 GPUs are all held by the job being stopped
    assert {t["team"]: t["used"] for t in got["teams"]}["a"] == 8


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_stopping_must_be_true_or_false(value):
    snapshot = {"now": NOW, "nodes": [{"name": "n1", "gpu": 8}], "tiers": TIERS,
                "teams": [{"name": "a", "nominal": {"gpu": 8}}],
                "running": [dict(_running("stuck", "a", "n1", started=0), stopping=value)]}  # fmt: skip
    with pytest.raises(SnapshotError) as error:
        snapshot_from_dict(snapshot)
    assert "running[0].stopping" in str(error.value) and "true or false" in str(error.value)


@pytest.mark.parametrize("gpu_type", [None, "a100"])
def test_a_job_naming_no_type_on_a_cordoned_node_counts_in_that_nodes_type(gpu_type):
    running = _running("r1", "a", "n1", started=NOW - 4000, tier="production")
    if gpu_type:
        running["gpu_type"] = gpu_type
    snapshot = {
        "now": NOW, "tiers": TIERS,
        "nodes": [{"name": "n1", "gpu": 8, "gpu_type": "a100", "schedulable": False, "unschedulable": "cordoned"},
                  {"name": "n2", "gpu": 8, "gpu_type": "a100"}],
        "teams": [{"name": "a", "nominal": {"gpu:a100": 8}, "borrowing_limit": {"gpu:a100": 0}}],
        "running": [running], "pending": [dict(URGENT, id="p1")],
    }  # fmt: skip
    got = plan_to_dict(plan(snapshot_from_dict(snapshot)))
    assert got["admit"] == []  # n2 is free, but team a's 8 a100 GPUs are all held on the cordoned node
    assert {t["team"]: t["used"] for t in got["teams"]}["a"] == 8


def test_a_standing_is_not_read_for_nodes_of_other_sizes():
    tiers, teams = (Tier("standard", 100),), (Team("a", nominal={"gpu": 64}),)
    small, big = (Node("n1", gpu=8, cpu=64000, memory=2**40),), (Node("n1", gpu=16, cpu=64000, memory=2**40),)
    standing = Standing(small, tiers, Settings())
    standing.add(RunningJob("r1", "a", "standard", 0, (ReplicaGroup(1, 4),), ("n1",), max_runtime=10_000))
    pending = (PendingJob("p1", "a", "standard", 10, (ReplicaGroup(1, 8),), max_runtime=100),)
    first = Snapshot(100, small, tiers, teams, standing.running, pending)
    assert plan(first, standing=standing) == plan(first)
    grown = replace(first, nodes=big)
    assert [a.id for a in plan(grown, standing=standing).admit] == [a.id for a in plan(grown).admit] == ["p1"]
