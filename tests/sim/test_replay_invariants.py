"""Invariants after every virtual cycle, determinism, and the exactness of
the replay's reduced snapshots against the full ones."""

from __future__ import annotations

import pytest

from scheduling.policy import PendingJob, RunningJob, Snapshot
from scheduling.sim import POLICIES, build_world, replay, summarize, synthetic
from scheduling.sim.policies.planner import BEYOND, Planner
from scheduling.sim.world import replicas_of

GANG = ("isolated-fifo", "isolated-sjf", "pooled-fifo", "kueue-like", "gangway")
ISOLATED = ("isolated-fifo", "isolated-sjf")


def checker(name, world):
    """Returns the observer asserting the invariants, and the count of cycles it saw."""
    seen = [0]

    def observe(cluster, now):
        seen[0] += 1
        used = [0] * len(world.nodes)
        steady = dict.fromkeys(world.nominal, 0)
        team_used = dict.fromkeys(world.nominal, 0)
        for entry in cluster.running.values():
            assert len(entry.nodes) == len(entry.pods)
            for k, i in enumerate(entry.nodes):
                used[i] += entry.pods[k]
            team_used[entry.team] += entry.gpus
            if not entry.tier.preemptible:
                steady[entry.team] += entry.gpus
        for entry in cluster.pending.values():
            if name != "kube-default":
                assert entry.nodes == [], f"partial gang {entry.id} under {name}"
            for k, i in enumerate(entry.nodes):
                used[i] += entry.pods[k]
        for i, node in enumerate(world.nodes):
            assert used[i] <= node.gpu, f"node {node.name} over capacity at {now}"
            assert cluster.free.gpu[i] == node.gpu - used[i]
        for team, nominal in world.nominal.items():
            assert team_used[team] == cluster.used[team]
            if name in ISOLATED:
                assert team_used[team] <= nominal  # borrowing limit 0
            if name == "gangway":
                assert steady[team] <= nominal, f"non-preemptible work above nominal in {team}"
        # No borrowing limit is set: nominal + limit is the cluster.
        assert sum(team_used.values()) <= world.capacity

    return observe, seen


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("load", [1, 6])
def test_invariants_hold_after_every_cycle(name, load):
    tr = synthetic(250, seed=3, load=load)
    world = build_world(tr, seed=3)
    observe, seen = checker(name, world)
    outcome = replay(tr.jobs, world, POLICIES[name](world), observe=observe)
    assert seen[0] > 0
    assert len(outcome.records) + outcome.rejected + outcome.stuck == len(tr.jobs)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_same_seed_same_summary(name):
    rows = []
    for _ in range(2):
        tr = synthetic(200, seed=11, load=4)
        world = build_world(tr, seed=11)
        rows.append(summarize(replay(tr.jobs, world, POLICIES[name](world)), 4))
    assert rows[0] == rows[1]


def test_another_seed_draws_other_tiers():
    tr = synthetic(200, seed=11)
    assert build_world(tr, 1).tier_of != build_world(tr, 2).tier_of


class FullSnapshots(Planner):
    """The planner without its shortcuts: every running job, every node, the
    queue read afresh from the cluster, a pass at every second something happens."""

    def _unchanged(self, cluster, now, news):
        return False

    def _snapshot(self, cluster, now):
        names = [n.name for n in self.world.nodes]
        running = tuple(
            RunningJob(e.id, e.team, e.tier.name, e.started, replicas_of(e.gpus),
                       tuple(names[i] for i in e.nodes), queued=e.queued)
            for e in cluster.running.values())
        pending = tuple(PendingJob(e.id, e.team, e.tier.name, e.queued, replicas_of(e.gpus))
                        for e in cluster.pending.values())
        return Snapshot(now, self.world.nodes, tuple(self.tiers.values()), self.world.teams,
                        running, pending, self.settings)


@pytest.mark.parametrize("name", ["gangway", "kueue-like"])
@pytest.mark.parametrize("seed,load", [(0, 4), (2, 4), (4, 1)])
def test_reduced_snapshots_plan_as_the_full_ones(name, seed, load, monkeypatch):
    bounded = [0]  # passes that folded jobs past the reclaim bound
    reduced = Planner._reduced

    def counting(self, cluster, now, asked):
        nodes, running = reduced(self, cluster, now, asked)
        bounded[0] += any(job.tier == BEYOND.name for job in running)
        return nodes, running

    monkeypatch.setattr(Planner, "_reduced", counting)
    tr = synthetic(300, seed=seed, load=load)
    world = build_world(tr, seed=seed)
    fast = POLICIES[name](world)
    full = FullSnapshots(fast.name, world, fast.settings, fast.tiers)
    a = replay(tr.jobs, world, fast)
    b = replay(tr.jobs, world, full)
    assert a.records == b.records
    assert (a.preemptions, a.lost, a.rejected) == (b.preemptions, b.lost, b.rejected)
    assert a.preemptions > 0 or load == 1
    assert bounded[0] > 0 or load == 1
