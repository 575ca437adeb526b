"""The reserving passes' groups of running jobs by expected end, kept from
pass to pass (ends.py), against a walk over every running job."""

from __future__ import annotations

from collections import Counter

import pytest

from scheduling.policy.runtime import expected_runtime
from scheduling.sim import POLICIES, build_world, replay, synthetic
from scheduling.sim.policies.ends import Ends
from scheduling.sim.policies.planner import Planner


def walked(planner, cluster, listed, now):
    """Returns the outside jobs of a pass as a walk over the running jobs
    gives them: (id, started) -> node name -> GPUs, every end at or before
    `now` keyed by now."""
    runtimes, names = planner.runtimes, planner.world.nodes
    by_end: dict[int, dict[str, int]] = {}
    for entry in cluster.running.values():
        if entry.id in listed:
            continue
        runtime = expected_runtime(runtimes.max_runtime(entry),
                                   runtimes.learned.get(runtimes.key(entry)), planner.settings)
        on_node = by_end.setdefault(max(entry.started + runtime, now), {})
        for k, i in enumerate(entry.nodes):
            on_node[names[i].name] = on_node.get(names[i].name, 0) + entry.pods[k]
    return {(f"~end-{end}", end - 1): on_node for end, on_node in by_end.items()}


def kept(jobs):
    """Returns outside jobs in the shape `walked` gives."""
    found = {}
    for job in jobs:
        assert (job.team, job.tier, job.estimate) == (None, None, 1)
        assert len(set(job.nodes)) == len(job.nodes)
        found[(job.id, job.started)] = {name: group.gpu for name, group in zip(job.nodes, job.replicas)}
    return found


@pytest.mark.parametrize("seed,load", [(0, 4), (2, 4), (5, 6)])
def test_the_groups_kept_by_expected_end_are_those_a_walk_over_the_running_jobs_gives(
        seed, load, monkeypatch):
    tr = synthetic(300, seed=seed, load=load)
    world = build_world(tr, seed=seed)
    seen = Counter()
    clusters = []
    admit, outside, relearn = Planner.admit, Ends.outside, Ends.relearn

    def keeping(self, cluster, now, news, act):
        clusters[:] = [cluster]
        admit(self, cluster, now, news, act)

    def checked(self, now, listed):
        seen["unlisted"] += bool(self.listed - listed)  # still running: ended jobs leave `listed`
        jobs = outside(self, now, listed)
        assert kept(jobs) == walked(planner, clusters[0], listed, now), f"at {now}"
        seen["passes"] += 1
        seen["past"] += bool(self.past)
        return jobs

    def counting(self, key):
        seen["moved"] += len(self.by_key.get(key, {}))
        relearn(self, key)

    monkeypatch.setattr(Planner, "admit", keeping)
    monkeypatch.setattr(Ends, "outside", checked)
    monkeypatch.setattr(Ends, "relearn", counting)
    planner = POLICIES["gangway"](world)
    outcome = replay(tr.jobs, world, planner)
    # Every change the groups follow happened: preemptions, new estimates
    # moving running jobs, jobs coming off the list of victims while still
    # running, and ends already past.
    assert outcome.preemptions > 0
    assert seen["passes"] > 0 and seen["moved"] > 0 and seen["unlisted"] > 0 and seen["past"] > 0
