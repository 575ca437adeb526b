"""The running jobs a reserving pass lists, kept from pass to pass in the
policy's standing (running.py), against the cluster's running jobs as
the planner describes them at that pass; and a replay that reads the
standing against one that plans every pass from the listed jobs alone."""

from __future__ import annotations

from collections import Counter

import pytest

from scheduling.policy import cycle
from scheduling.sim import POLICIES, build_world, replay, summarize, synthetic
from scheduling.sim.policies.planner import Planner
from scheduling.sim.policies.running import Running


@pytest.mark.parametrize("seed,load,estimates", [(0, 4, "history"), (2, 4, "history"),
                                                 (5, 6, "history"), (1, 6, "oracle")])
def test_the_kept_running_jobs_are_the_cluster_s_as_each_reserving_pass_describes_them(
        seed, load, estimates, monkeypatch):
    tr = synthetic(300, seed=seed, load=load)
    world = build_world(tr, seed=seed, estimates=estimates)
    seen = Counter()
    snapshot, refresh, relearn = Planner._snapshot, Running._refresh, Running.relearn

    def checked(self, cluster, now):
        made = snapshot(self, cluster, now)
        standing = self.running.standing
        if made.running is standing.running:
            described = self.running_jobs(cluster, list(cluster.running.values()), now)
            assert standing.jobs == {job.id: job for job in described}, f"at {now}"
            seen["passes"] += 1
        return made

    def refreshing(self, cluster, entry, now):
        before = self.standing.jobs[entry.id]
        refresh(self, cluster, entry, now)
        changed = self.standing.jobs[entry.id]
        seen["checkpoints"] += changed.checkpointed != before.checkpointed
        seen["estimates"] += changed.estimate != before.estimate

    def counting(self, key):
        seen["relearned"] += len(self.by_key.get(key, {}))
        relearn(self, key)

    monkeypatch.setattr(Planner, "_snapshot", checked)
    monkeypatch.setattr(Running, "_refresh", refreshing)
    monkeypatch.setattr(Running, "relearn", counting)
    outcome = replay(tr.jobs, world, POLICIES["gangway"](world))
    # Every change the standing follows happened: preemptions, reported
    # checkpoints and, learning from history, new estimates of running jobs.
    assert outcome.preemptions > 0
    assert seen["passes"] > 0 and seen["checkpoints"] > 0
    if estimates == "history":
        assert seen["relearned"] > 0 and seen["estimates"] > 0


@pytest.mark.parametrize("seed,load", [(0, 4), (3, 8)])
def test_a_replay_reading_the_standing_gives_the_outcome_of_one_that_does_not(seed, load, monkeypatch):
    tr = synthetic(400, seed=seed, load=load)
    world = build_world(tr, seed=seed)
    fast = replay(tr.jobs, world, POLICIES["gangway"](world))
    planned = cycle.plan
    read = Counter()

    def plain(snapshot, **kwargs):
        read["standing"] += kwargs.pop("standing", None) is not None
        return planned(snapshot, **kwargs)

    monkeypatch.setattr("scheduling.sim.policies.planner.plan", plain)
    slow = replay(tr.jobs, world, POLICIES["gangway"](world))
    assert read["standing"] > 0
    assert fast.records == slow.records
    assert summarize(fast, load) == summarize(slow, load)
