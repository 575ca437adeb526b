"""An R3 queue (order.py) against the plain path: the pending jobs a caller
keeps in R3 order from cycle to cycle, changed by arrivals, starts,
rejections, preempted jobs queued again and new estimates, give the plan
`plan` gives without it (hypothesis).

- The queue lists its jobs as R3 sorts them, ties of queue time broken by
  id as R3 breaks them ("99" before "100", digits before text), however it
  was filled.
- On random busy snapshots, with and without GPU types, a queue filled in a
  random order through churn plans as the snapshot does, in any order.
- Over random sequences of cycles, each applying the last plan (admissions
  leave, victims queue again, rejections leave), adding arrivals, giving
  some jobs a new estimate and moving the clock, the queue kept by those
  changes alone plans as a snapshot listing the same jobs does; with a
  standing for the running jobs too.
- The queue counts its jobs per shape as they come and go, which the
  cycle reads to judge R10 once per shape, not per job.
- A queue is not read for a tuple it did not return (even an equal one, or
  one shuffled), nor for other tiers.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.policy import PendingJob, Plan, RunningJob, Snapshot, Standing, Tier, plan
from scheduling.policy import cycle
from scheduling.policy.order import R3Queue, r3_sorted
from tests.policy.random_snapshots import typed_snapshot
from tests.policy.test_policy_eta import PROFILE, TIERS
from tests.policy.test_policy_shortcuts import snapshots

# Ids R3 orders in all its ways: digits by number, then text.
IDS = ("7", "42", "99", "100", "1000", "a", "b7", "job-3", "x")


def tied(snapshot: Snapshot, rng: random.Random) -> Snapshot:
    """Returns the snapshot with its pending jobs renamed among ids of digits
    and of text and queued at few distinct times, so that R3's ties of tier
    and queue time are broken by id."""
    times = [rng.randint(0, snapshot.now) for _ in range(3)]
    names = rng.sample([f"{rng.choice(IDS)}{k}" if rng.random() < 0.5 else str(k * rng.choice((1, 9, 99)))
                        for k in range(1, 200)], len(snapshot.pending))
    names = list(dict.fromkeys(names))
    pending = tuple(replace(job, id=name, queued=rng.choice(times))
                    for job, name in zip(snapshot.pending, names))
    return replace(snapshot, pending=pending)


def random_snapshot(draw_snapshot: Snapshot, seed: int) -> tuple[Snapshot, random.Random]:
    """Returns, from a seed, a snapshot with ties in R3: the drawn one, or
    one on a cluster with GPU types."""
    rng = random.Random(seed)
    snapshot = draw_snapshot if rng.random() < 0.7 else typed_snapshot(rng, TIERS, rng.choice((2, 3)))
    return tied(snapshot, rng), rng


def queue_of(snapshot: Snapshot, rng: random.Random) -> R3Queue:
    """Returns a queue holding the snapshot's pending jobs, filled through
    churn: jobs added in a random order, other jobs added and removed, jobs
    added with another estimate or queue time and then replaced by theirs."""
    queue = R3Queue(snapshot.tiers)
    passing = []
    for job in rng.sample(snapshot.pending, len(snapshot.pending)):
        draw = rng.random()
        if draw < 0.2:
            queue.add(replace(job, estimate=rng.choice((None, 60, 7200))))
            queue.replace(job)
        elif draw < 0.3:
            queue.add(replace(job, queued=job.queued + rng.randint(-50, 50)))
            queue.replace(job)
        else:
            queue.add(job)
        if rng.random() < 0.3:
            extra = replace(job, id=f"{job.id}-gone")
            queue.add(extra)
            passing.append(extra.id)
    for job_id in passing:
        queue.remove(job_id)
    return queue


def planned_both_ways(snapshot: Snapshot, queue: R3Queue, standing: Standing | None = None,
                      listed: Snapshot | None = None) -> tuple[Plan, Plan, bool]:
    """Returns the plans of the snapshot listing the queue's jobs (or of
    `listed`), with and without the queue, and whether the cycle took the
    queue's order instead of sorting."""
    if listed is None:
        listed = replace(snapshot, pending=queue.pending)
    sorts = []
    sort = cycle.r3_sorted

    def recording(jobs, tiers):
        sorts.append(len(jobs))
        return sort(jobs, tiers)

    cycle.r3_sorted = recording
    try:
        fast = plan(listed, standing=standing, queue=queue)
    finally:
        cycle.r3_sorted = sort
    return fast, plan(listed, standing=standing), not sorts


def in_r3_order(queue: R3Queue, tiers) -> bool:
    return list(queue.pending) == r3_sorted(list(queue.pending), {t.name: t for t in tiers})


def shapes_counted(queue: R3Queue) -> bool:
    """Whether the queue's count of jobs per shape (R10 judges each shape
    once) is that of its jobs, each with a job of that shape."""
    fresh = Counter((job.team, job.tier, job.demand, job.gpu_type) for job in queue.pending)
    return ({shape: count for shape, (count, _) in queue.shapes.items()} == fresh
            and all((job.team, job.tier, job.demand, job.gpu_type) == shape
                    for shape, (_, job) in queue.shapes.items()))


@PROFILE
@given(snapshots(), st.integers(0, 2**32))
def test_a_queue_filled_through_churn_lists_its_jobs_in_r3_order(snapshot, seed):
    snapshot, rng = random_snapshot(snapshot, seed)
    queue = queue_of(snapshot, rng)
    assert set(queue.pending) == set(snapshot.pending)
    assert list(queue.pending) == r3_sorted(list(snapshot.pending), {t.name: t for t in snapshot.tiers})
    assert queue.pending is queue.pending  # the same tuple until a job changes
    assert shapes_counted(queue)


@pytest.mark.interpreted_policy
@PROFILE
@given(snapshots(), st.integers(0, 2**32))
def test_a_queue_filled_through_churn_plans_as_the_snapshot(snapshot, seed):
    snapshot, rng = random_snapshot(snapshot, seed)
    queue = queue_of(snapshot, rng)
    fast, plain, read = planned_both_ways(snapshot, queue)
    assert read
    assert fast == plain
    assert plain == plan(snapshot)  # the order of the pending jobs changes no plan


@pytest.mark.interpreted_policy
@PROFILE
@given(snapshots(), st.integers(0, 2**32))
def test_a_queue_kept_over_cycles_by_their_changes_plans_as_their_snapshots(snapshot, seed):
    snapshot, rng = random_snapshot(snapshot, seed)
    queue = queue_of(snapshot, rng)
    standing = None
    if rng.random() < 0.5:
        standing = Standing(snapshot.nodes, snapshot.tiers, snapshot.settings)
        for job in snapshot.running:
            standing.add(job)
    running = {job.id: job for job in snapshot.running}
    now = snapshot.now
    reservations = snapshot.reservations
    arrivals = 0
    for _ in range(6):
        current = replace(snapshot, now=now, reservations=reservations,
                          running=standing.running if standing else tuple(running.values()))
        fast, plain, read = planned_both_ways(current, queue, standing)
        assert read
        assert fast == plain
        assert plain == plan(replace(current, pending=tuple(rng.sample(queue.pending, len(queue)))))
        # The plan takes effect: rejections leave, victims queue again with
        # their queue time, admissions start now.
        for rejection in fast.reject:
            queue.remove(rejection.id)
        for admission in fast.admit:
            for victim in admission.victims:
                gone = running.pop(victim)
                if standing is not None:
                    standing.remove(victim)
                if gone.team is not None:
                    queue.add(PendingJob(gone.id, gone.team, gone.tier, gone.queued or gone.started,
                                         gone.replicas, gone.max_runtime, gone.estimate))
            job = queue.remove(admission.id)
            started = RunningJob(job.id, job.team, job.tier, now, job.replicas, admission.nodes,
                                 job.max_runtime, job.queued, job.estimate, gpu_type=admission.gpu_type)
            running[job.id] = started
            if standing is not None:
                standing.add(started)
        # Jobs arrive, some at the queue time of a queued job; some get a new estimate.
        for job in rng.sample(queue.pending, min(len(queue), rng.randint(0, 3))):
            arrivals += 1
            name = str(arrivals * rng.choice((1, 10, 1000))) + "n" * rng.randint(0, 1)
            if name not in queue and name not in running:
                queue.add(replace(job, id=name, tier=rng.choice(snapshot.tiers).name))
        for job in rng.sample(queue.pending, min(len(queue), rng.randint(0, 3))):
            queue.replace(replace(job, estimate=rng.choice((None, 30, 3000, 40_000))))
        assert in_r3_order(queue, snapshot.tiers)
        assert shapes_counted(queue)
        reservations = fast.reservations
        now += rng.choice((1, 60, 900, 5000))


@pytest.mark.interpreted_policy
@PROFILE
@given(snapshots(), st.integers(0, 2**32))
def test_a_queue_is_not_read_for_another_tuple_or_other_tiers(snapshot, seed):
    snapshot, rng = random_snapshot(snapshot, seed)
    queue = queue_of(snapshot, rng)
    listed = queue.pending
    for pending in (tuple(list(listed)), tuple(rng.sample(listed, len(listed)))):  # equal, or shuffled
        assert pending is not listed
        fast, plain, read = planned_both_ways(snapshot, queue, listed=replace(snapshot, pending=pending))
        assert not read
        assert fast == plain
    # Tiers whose values order the jobs otherwise: the same tuple is sorted again.
    values = rng.sample(range(1, 2000), len(snapshot.tiers))
    tiers = tuple(Tier(t.name, value, t.preemptible) for t, value in zip(snapshot.tiers, values))
    fast, plain, read = planned_both_ways(snapshot, queue, listed=replace(snapshot, pending=listed, tiers=tiers))
    assert not read
    assert fast == plain
    # Once a job changes, the tuple listed before is not the queue's any more.
    if listed:
        queue.remove(listed[0].id)
        fast, plain, read = planned_both_ways(snapshot, queue, listed=replace(snapshot, pending=listed))
        assert not read
        assert fast == plain
