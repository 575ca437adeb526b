"""A standing (standing.py) against the plain path: the running jobs a
caller keeps indexed from cycle to cycle, changed by starts, ends and new
descriptions, give the plan `plan` gives without it (hypothesis).

- On random busy snapshots with reservations, victims, outside usage,
  checkpoints and estimates, a standing filled in a random order, through
  jobs that come and go and jobs described anew, plans as the snapshot does.
- Over random sequences of cycles, each applying the last plan (its
  admissions start, its victims stop), ending some jobs, describing others
  anew (a checkpoint, an estimate, or an estimate alone as the replay gives
  it, `reestimate`) and moving the clock, the standing kept
  by those changes alone plans as a snapshot listing the same jobs does.
- On clusters with GPU types, the same; a standing that cannot say a job's
  type (a job naming none) is not read, and neither is one of another snapshot.
- The ends in order: what the standing yields is what R14 gives each job.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.policy import PendingJob, Plan, ReplicaGroup, RunningJob, Settings, Snapshot, Standing, plan
from scheduling.policy import cycle
from scheduling.policy.runtime import expected_end
from scheduling.policy.state import State
from tests.policy.random_snapshots import typed_snapshot
from tests.policy.test_policy_eta import PROFILE, TIERS
from tests.policy.test_policy_shortcuts import snapshots


def standing_of(snapshot: Snapshot, rng: random.Random, order: list[RunningJob]) -> Standing:
    """Returns a standing holding `order`, filled through churn: jobs added
    in a random order, other jobs added and removed, jobs added with another
    description and then replaced by theirs."""
    standing = Standing(snapshot.nodes, snapshot.tiers, snapshot.settings)
    passing = []
    for job in rng.sample(order, len(order)):
        if rng.random() < 0.3:
            standing.add(replace(job, checkpointed=rng.choice((None, job.started)),
                                 estimate=rng.choice((None, 60, 7200))))
            standing.replace(job)
        else:
            standing.add(job)
        if rng.random() < 0.3:
            extra = replace(job, id=f"{job.id}-gone", started=job.started - 1)
            standing.add(extra)
            passing.append(extra.id)
    for job_id in passing:
        standing.remove(job_id)
    return standing


def planned_both_ways(snapshot: Snapshot, standing: Standing) -> tuple[Plan, Plan, bool]:
    """Returns the plans of the snapshot listing the standing's jobs, with and
    without the standing, and whether the cycle read the standing."""
    listed = replace(snapshot, running=standing.running)
    read = []
    made = cycle.State

    def recording(snap, kept=None):
        state = made(snap, kept)
        read.append(state._standing is not None)
        return state

    cycle.State = recording
    try:
        fast = plan(listed, standing=standing)
    finally:
        cycle.State = made
    return fast, plan(listed), any(read)


@pytest.mark.interpreted_policy
@PROFILE
@given(snapshots(), st.integers(0, 2**32))
def test_a_standing_filled_through_churn_plans_as_the_snapshot(snapshot, seed):
    rng = random.Random(seed)
    standing = standing_of(snapshot, rng, list(snapshot.running))
    fast, plain, read = planned_both_ways(snapshot, standing)
    assert read
    assert fast == plain
    assert plain == plan(snapshot)  # the order of the running jobs changes no plan


@pytest.mark.interpreted_policy
@PROFILE
@given(snapshots(), st.integers(0, 2**32))
def test_a_standing_kept_over_cycles_by_their_changes_plans_as_their_snapshots(snapshot, seed):
    rng = random.Random(seed)
    standing = standing_of(snapshot, rng, list(snapshot.running))
    now = snapshot.now
    reservations = snapshot.reservations
    for _ in range(6):
        current = replace(snapshot, now=now, reservations=reservations)
        fast, plain, read = planned_both_ways(current, standing)
        assert read
        assert fast == plain
        # The plan takes effect: victims stop, admissions start now.
        pending = {job.id: job for job in current.pending}
        for admission in fast.admit:
            for victim in admission.victims:
                gone = standing.remove(victim)  # queued again, with its queue time
                if gone.team is not None:
                    pending[gone.id] = PendingJob(gone.id, gone.team, gone.tier, gone.queued or gone.started,
                                                  gone.replicas, gone.max_runtime, gone.estimate)
            job = pending.pop(admission.id)
            standing.add(RunningJob(job.id, job.team, job.tier, now, job.replicas,
                                    admission.nodes, job.max_runtime, job.queued, job.estimate))
        rejected = {r.id for r in fast.reject}
        # Some jobs end, some report a checkpoint or get a new estimate.
        for job in list(standing.jobs.values()):
            draw = rng.random()
            if draw < 0.15:
                standing.remove(job.id)
            elif draw < 0.25:
                standing.replace(replace(job, checkpointed=now))
            elif draw < 0.3:
                standing.replace(replace(job, estimate=rng.choice((None, 30, 3000, 40_000))))
            elif draw < 0.35:  # the replay's way for an estimate alone
                standing.reestimate(replace(job, estimate=rng.choice((None, 30, 3000, 40_000))))
        snapshot = replace(current, pending=tuple(j for j in pending.values() if j.id not in rejected))
        reservations = fast.reservations
        now += rng.choice((1, 60, 900, 5000))


@pytest.mark.interpreted_policy
@PROFILE
@given(st.integers(0, 2**32))
def test_on_gpu_types_a_standing_plans_as_the_snapshot_and_one_without_types_is_not_read(seed):
    rng = random.Random(seed)
    snapshot = typed_snapshot(rng, TIERS, rng.choice((2, 3)))
    named = []
    for job in snapshot.running:
        kind = next(n.gpu_type for n in snapshot.nodes if n.name == job.nodes[0])
        named.append(replace(job, gpu_type=kind) if job.gpu_type is None else job)
    snapshot = replace(snapshot, running=tuple(named))
    standing = standing_of(snapshot, rng, named)
    fast, plain, read = planned_both_ways(snapshot, standing)
    assert read or not named
    assert fast == plain
    if named:
        # A job holding GPUs without its type: its type is its node's, which
        # the cycle reads from the job itself.
        standing.replace(replace(named[0], gpu_type=None))
        fast, plain, read = planned_both_ways(snapshot, standing)
        assert not read
        assert fast == plain


@PROFILE
@given(snapshots(), st.integers(0, 2**32))
def test_a_standing_of_another_snapshot_is_not_read(snapshot, seed):
    rng = random.Random(seed)
    standing = standing_of(snapshot, rng, list(snapshot.running))
    other = replace(snapshot, running=tuple(standing.running))  # equal, not the same tuple
    assert plan(other, standing=standing) == plan(other)
    settings = replace(snapshot.settings, reservation_slack=snapshot.settings.reservation_slack + 60)
    moved = replace(snapshot, running=standing.running, settings=settings)
    state = State(moved, standing)
    assert state._standing is None
    assert plan(moved, standing=standing) == plan(moved)


@PROFILE
@given(snapshots(), st.integers(-5000, 30_000), st.integers(0, 2000))
def test_the_ends_come_in_order_as_r14_expects_them(snapshot, now, slack):
    settings = Settings(reservation_slack=slack)
    standing = Standing(snapshot.nodes, snapshot.tiers, settings)
    for job in snapshot.running:
        standing.add(job)
    outside = RunningJob("outside-forever", None, None, 0, (ReplicaGroup(1, 1),), (snapshot.nodes[0].name,))
    standing.add(outside)
    expected = sorted((end, job.id) for job in standing.jobs.values()
                      if (end := expected_end(job, now, settings)) is not None)
    assert list(standing.ends_from(now, slack)) == expected
