"""Reservations (R4) over random busy clusters (hypothesis).

With every expected end exact, the room a reservation names is free at its
start whatever the plan admitted around it: backfill never delays it. The
check recomputes the room at the start with plain sums: jobs running at the
snapshot that are expected to end by then are gone; every job admitted now
runs for its expected runtime (R14); an earlier reservation's job holds its
room from now until it is expected to end, as the policy assumes.
"""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.policy.random_snapshots import place_randomly
from scheduling.policy import (
    Node, PendingJob, ReplicaGroup, RunningJob, Settings, Snapshot, Team, Tier, plan,
)
from scheduling.policy.reservation import Holds, _earliest_hold, earliest_hold
from scheduling.policy.runtime import expected_end, expected_runtime
from scheduling.policy.state import State

TIERS = (Tier("production", 1000, False), Tier("standard", 100), Tier("experiment", 10))
PROFILE = settings(
    max_examples=int(os.environ.get("POLICY_EXAMPLES", "150")), deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def snapshots(draw):
    """A full cluster, a queue of gangs of several sizes, most of it starving."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    nodes = tuple(Node(f"n{i}", 8, rng.choice((16000, 32000))) for i in range(rng.randint(1, 5)))
    capacity = sum(n.gpu for n in nodes)
    teams = tuple(Team(f"t{k}", {"gpu": rng.randint(capacity // 4, capacity)},
                       {"gpu": rng.randint(0, 8)} if rng.random() < 0.3 else {})
                  for k in range(rng.randint(1, 3)))
    free = {n.name: [n.gpu, n.cpu] for n in nodes}
    now = 10_000
    running = []
    for k in range(rng.randint(0, 12)):
        count, gpu = rng.choice(((1, 1), (1, 2), (1, 4), (2, 4), (1, 8)))
        cpu = rng.choice((0, 2000))
        placed = place_randomly(rng, free, count, gpu, cpu)
        if placed is None:
            continue
        team, tier = rng.choice(teams).name, rng.choice(("standard", "experiment"))
        if rng.random() < 0.1:
            team, tier = None, None
        started = rng.randint(0, now)
        running.append(RunningJob(
            f"r{k}", team, tier, started, (ReplicaGroup(count, gpu, cpu),),
            tuple(placed), rng.choice((None, now - started + rng.randint(1, 9000))),
            estimate=rng.choice((None, rng.randint(1, 20_000)))))
    pending = tuple(
        PendingJob(f"p{k:02d}", rng.choice(teams).name, rng.choice(("standard", "experiment")),
                   rng.randint(0, now),
                   (ReplicaGroup(*rng.choice(((1, 1), (1, 2), (1, 4), (2, 4), (1, 8), (2, 8)))),),
                   rng.choice((None, 300, 2000, 6000)), rng.choice((None, 1000)))
        for k in range(rng.randint(1, 12)))
    return Snapshot(now, nodes, TIERS, teams, tuple(running), pending,
                    Settings(starvation_after=rng.choice((600, 1800, 5000)),
                             min_runtime_before_preemption=rng.choice((0, 600)),
                             max_reservations=rng.choice((1, 1, 2))))


def _room_at(snapshot, result, start):
    """Returns free (gpu, cpu) per node at `start`, with only the snapshot's
    running jobs and the plan's admissions counted."""
    free = {n.name: [n.gpu, n.cpu] for n in snapshot.nodes}
    victims = {v for a in result.admit for v in a.victims}
    pending = {p.id: p for p in snapshot.pending}
    for job in snapshot.running:
        end = expected_end(job, snapshot.now, snapshot.settings)
        if job.id in victims or (end is not None and end <= start):
            continue
        g = job.replicas[0]
        for name in job.nodes:
            if name in free:
                free[name][0] -= g.gpu
                free[name][1] -= g.cpu
    for a in result.admit:
        job = pending[a.id]
        runtime = expected_runtime(job.max_runtime, job.estimate, snapshot.settings)
        if snapshot.now + runtime <= start:
            continue
        g = job.replicas[0]
        for name, n in a.placement:
            free[name][0] -= n * g.gpu
            free[name][1] -= n * g.cpu
    return free


@PROFILE
@given(snapshots())
def test_backfill_never_delays_a_reservation(snapshot):
    result = plan(snapshot, with_eta=False)
    if any(pending.team != victim_team
           for a in result.admit
           for pending in [next(p for p in snapshot.pending if p.id == a.id)]
           for victim_team in [r.team for r in snapshot.running if r.id in a.victims]):
        return  # reclaim may take reserved room (R6)
    pending = {p.id: p for p in snapshot.pending}
    earlier = []
    for reservation in result.reservations:
        free = _room_at(snapshot, result, reservation.start)
        for other in earlier:  # held from now until its job ends
            job = pending[other.id]
            end = other.start + expected_runtime(job.max_runtime, job.estimate, snapshot.settings)
            if end > reservation.start:
                g = job.replicas[0]
                for name, n in other.placement:
                    free[name][0] -= n * g.gpu
                    free[name][1] -= n * g.cpu
        g = pending[reservation.id].replicas[0]
        for name, n in reservation.placement:
            assert free[name][0] >= n * g.gpu and free[name][1] >= n * g.cpu, (
                reservation, free)
        earlier.append(reservation)


@PROFILE
@given(snapshots())
def test_a_reserving_job_waits_with_its_start_as_estimate(snapshot):
    result = plan(snapshot)
    waits = {w.id: w for w in result.wait}
    assert len(result.reservations) <= snapshot.settings.max_reservations
    for reservation in result.reservations:
        wait = waits[reservation.id]
        assert (wait.code, wait.eta) == ("reserving", reservation.start)
        assert reservation.start > snapshot.now
        assert snapshot.now - pending_queued(snapshot, reservation.id) > (
            snapshot.settings.starvation_after)
    for w in result.wait:
        assert (w.code == "reserving") == (w.id in {r.id for r in result.reservations})


def pending_queued(snapshot, job_id):
    return next(p.queued for p in snapshot.pending if p.id == job_id)


@PROFILE
@given(snapshots())
def test_the_hold_guard_reserves_nothing(snapshot):
    hold = Snapshot(snapshot.now, snapshot.nodes, snapshot.tiers, snapshot.teams,
                    snapshot.running, snapshot.pending,
                    Settings(starvation_after=snapshot.settings.starvation_after,
                             starvation_guard="hold"))
    result = plan(hold)
    assert result.reservations == ()
    assert all(w.code not in ("reserving", "reserved_room", "no_reservation")
               for w in result.wait)


def test_a_job_kept_off_reserved_room_preempts_a_lower_tier_of_its_team():
    """Found by the victim-minimality property: n0 has 5 free GPUs, but they are reserved (R4) for p0
    from t=9703, and p1 (no max_runtime) may still run then, so it takes r1 (a lower tier of its own
    team, R5) to start on n1 instead of waiting."""
    snapshot = Snapshot(
        now=5000,
        nodes=(Node("n0", 8, 16000), Node("n1", 4, 16000), Node("n2", 8, 8000)),
        tiers=TIERS,
        teams=(Team("t0", {"gpu": 3, "cpu": 4000}, {}),),
        running=(RunningJob("r0", None, None, 1406, (ReplicaGroup(2, 3, 2000),), ("n2", "n2"), max_runtime=1000),
                 RunningJob("r1", "t0", "experiment", 1703, (ReplicaGroup(2, 3, 0),), ("n1", "n0"), max_runtime=8000)),
        pending=(PendingJob("p0", "t0", "standard", 2502, (ReplicaGroup(2, 6, 0),)),
                 PendingJob("p1", "t0", "standard", 4060, (ReplicaGroup(1, 4, 4000),), estimate=2000)),
        settings=Settings(starvation_after=600),
    )
    result = plan(snapshot, with_eta=False)
    assert [(r.id, r.start, dict(r.placement)) for r in result.reservations] == [("p0", 9703, {"n0": 1, "n2": 1})]
    assert [(a.id, dict(a.placement), a.victims) for a in result.admit] == [("p1", {"n1": 1}, ("r1",))]


def _room_image(room):
    """Everything a search could leave changed in a room, its buckets' sorted lists too."""
    return (list(room.gpu), list(room.cpu), list(room.memory), list(room.total),
            [set(m) for m in room.members], [None if s is None else list(s) for s in room.sorted])


@PROFILE
@given(snapshots())
def test_the_search_for_a_reservation_leaves_the_room_as_it_found_it(snapshot):
    """The search walks the ends on the state's own room, then undoes every
    change: free counts, buckets, their sorted lists and totals are as
    before, each sorted list still the bucket's nodes in order, and the hold
    is the one a search on a copy of the room finds. The queue's jobs search
    in turn, each found hold kept, so later searches walk earlier holds too."""
    state = State(snapshot)
    holds = Holds(state.room)
    for job in snapshot.pending:
        runtime = expected_runtime(job.max_runtime, job.estimate, snapshot.settings)
        restore = holds.lifted()
        room = state.room
        room.bucket(1)  # a sorted list kept from before the search
        before = _room_image(room)
        on_copy = _earliest_hold(state, room.copy(), job.id, job.demand, runtime, holds,
                                 None, None, None, None)
        hold = earliest_hold(state, job.id, job.demand, runtime, holds)
        assert _room_image(room) == before
        assert all(s is None or s == sorted(room.members[b]) for b, s in enumerate(room.sorted))
        assert hold == on_copy
        restore()
        if hold is not None:
            holds.add(hold)
