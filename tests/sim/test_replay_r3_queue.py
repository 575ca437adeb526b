"""The planner's queue kept in R3 order (queue.py, the policy's `R3Queue`):
in every pass the snapshot lists the queue in the order R3 sorts the
cluster's queued jobs, as the planner describes them then, and `plan` takes
that order instead of sorting; the replay's outcome is that of a planner
whose snapshots list the queue afresh (test_replay_invariants.py)."""

from __future__ import annotations

import pytest

from scheduling.policy.order import r3_sorted
from scheduling.sim import POLICIES, build_world, replay, synthetic
from scheduling.sim.policies import planner as planner_module
from tests.sim.test_replay_invariants import full_twin


@pytest.mark.parametrize("name,estimates", [
    ("gangway", "history"), ("gangway", "oracle"), ("gangway-hold", "history"),
    ("kueue-like", "history")])
@pytest.mark.parametrize("seed,load", [(0, 4), (3, 6)])
def test_every_pass_lists_the_queue_in_r3_order_and_plans_as_a_fresh_one(
        name, estimates, seed, load, monkeypatch):
    tr = synthetic(300, seed=seed, load=load)
    world = build_world(tr, seed=seed, estimates=estimates)
    fast = POLICIES[name](world)
    planned = planner_module.plan
    passes = [0]

    def checking_plan(snapshot, **kwargs):
        queue = kwargs["queue"]
        if queue is fast.queue.jobs:  # not the fresh twin's
            passes[0] += 1
            assert snapshot.pending is queue.pending
            tiers = {t.name: t for t in snapshot.tiers}
            assert queue.orders(snapshot.pending, tiers)
            assert list(snapshot.pending) == r3_sorted(list(snapshot.pending), tiers)
            assert {job.id for job in snapshot.pending} == set(queue.marks)
        return planned(snapshot, **kwargs)

    monkeypatch.setattr(planner_module, "plan", checking_plan)
    a = replay(tr.jobs, world, fast)
    b = replay(tr.jobs, world, full_twin(fast, world))
    assert passes[0] > 0
    assert a.records == b.records
    assert (a.preemptions, a.lost, a.rejected) == (b.preemptions, b.lost, b.rejected)
    assert a.reserved_idle == b.reserved_idle
