"""The estimated starts against a straightforward replay on random small
snapshots (hypothesis).

The policy's replay merges per-team lines of jobs and lets held teams sleep;
the reference below walks every waiting job in R3 order at every replayed
moment, as eta.py's docstring describes the replay, from the same decisions
(admissions and reservations) of the cycle. The two must agree on every
estimate.
"""

from __future__ import annotations

import heapq
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.policy_bench import build
from tests.policy.random_snapshots import place_randomly
from scheduling.policy import (
    Node, PendingJob, ReplicaGroup, RunningJob, Settings, Snapshot, Team, Tier, plan,
)
from scheduling.policy.cycle import decide
from scheduling.policy.demand import demand_of
from scheduling.policy.eta import HORIZON
from scheduling.policy.lines import Lines, job_ends
from scheduling.policy.order import r3_key
from scheduling.policy.placement import place, usage_on_nodes
from scheduling.policy.reservation import Hold, Holds, earliest_hold
from scheduling.policy.runtime import expected_runtime
from scheduling.policy.state import State

TIERS = (Tier("production", 1000, False), Tier("standard", 100), Tier("experiment", 10))
PROFILE = settings(
    max_examples=int(os.environ.get("POLICY_EXAMPLES", "150")), deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def snapshots(draw):
    """A busy small cluster and a queue of a few shapes, so teams hold several
    jobs of one shape and quota (own limits and the pool) refuses often."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    nodes = tuple(Node(f"n{i}", rng.choice((4, 8)), rng.choice((8000, 16000)))
                  for i in range(rng.randint(1, 5)))
    capacity = sum(n.gpu for n in nodes)
    teams = []
    for k in range(rng.randint(1, 4)):
        nominal = {"gpu": rng.randint(0, capacity // 2)}
        if rng.random() < 0.2:
            nominal["cpu"] = rng.choice((4000, 8000))
        teams.append(Team(
            f"t{k}", nominal,
            {"gpu": rng.randint(0, 6)} if rng.random() < 0.4 else {},
            {"gpu": rng.randint(0, nominal["gpu"])} if rng.random() < 0.4 else {},
        ))
    shapes = [(rng.randint(1, 3), rng.randint(0, 4), rng.choice((0, 1000, 4000)))
              for _ in range(rng.randint(1, 4))]
    free = {n.name: [n.gpu, n.cpu] for n in nodes}
    now = 5000
    running = []
    for k in range(rng.randint(0, 10)):
        count, gpu, cpu = rng.choice(shapes)
        placed = place_randomly(rng, free, count, gpu, cpu)
        if placed is None:
            continue
        team, tier = rng.choice(teams).name, rng.choice([t.name for t in TIERS])
        if rng.random() < 0.1:
            team, tier = None, None
        started = rng.randint(0, now)
        running.append(RunningJob(f"r{k}", team, tier, started,
                                  (ReplicaGroup(count, gpu, cpu),), tuple(placed),
                                  rng.choice((None, 600, 3000, 8000)),
                                  rng.choice((None, started - 100)),
                                  rng.choice((None, None, 2000, 7000)),
                                  rng.choice((None, started + 50))))
    pending = []
    for k in range(rng.randint(1, 25)):
        count, gpu, cpu = rng.choice(shapes)
        pending.append(PendingJob(
            f"p{k:02d}", rng.choice(teams).name, rng.choice([t.name for t in TIERS]),
            rng.choice((rng.randint(0, now), now - 100, now - 2000)),
            (ReplicaGroup(count, gpu, cpu),), rng.choice((None, 300, 1000, 5000)),
            rng.choice((None, None, 1500, 4000))))
    return Snapshot(now, nodes, TIERS, tuple(teams), tuple(running), tuple(pending),
                    Settings(starvation_after=rng.choice((600, 1800, 100000)),
                             min_runtime_before_preemption=rng.choice((0, 600)),
                             default_runtime=rng.choice((3600, 86400)),
                             max_reservations=rng.choice((0, 1, 1, 2)),
                             starvation_guard=rng.choice(("reserve", "reserve", "hold"))))


def reference_starts(snapshot: Snapshot) -> dict[str, int | None]:
    """Returns the estimates by the replay as eta.py describes it: at every
    moment a job ends, walk every job not yet started in R3 order, except
    those behind a starving job of the same team, tier, shape and
    max_runtime that found no room (the replay's simplification)."""
    now, config = snapshot.now, snapshot.settings
    made = decide(snapshot)
    tiers = {t.name: t for t in snapshot.tiers}
    pending = {p.id: p for p in snapshot.pending}
    victims = {v for a in made.admitted for v in a.victims}
    state = State(Snapshot(now, snapshot.nodes, snapshot.tiers, snapshot.teams,
                           tuple(j for j in snapshot.running if j.id not in victims),
                           settings=config))
    for a in made.admitted:
        state.hold(made.state.holders[a.id])
    holds = Holds(state.room)
    events = [(h.end, 0, h.id) for h in state.holders.values() if h.end is not None]
    for h in made.holds:
        holds.add(Hold(h.id, h.start, h.placement, h.on_nodes,
                       {i: list(v) for i, v in h.headroom.items()}, h.ending, h.end))
        events.append((h.start, 1, h.id))
    heapq.heapify(events)
    waiting = [pending[job.id] for job in made.queue if job.id in made.waiting]
    requeued = [
        PendingJob(j.id, j.team, j.tier, j.queued if j.queued is not None else j.started,
                   j.replicas, j.max_runtime, j.estimate)
        for j in snapshot.running if j.id in victims]
    pending.update((j.id, j) for j in requeued)
    reserving = {h.id for h in made.holds}
    left = [j for j in waiting + requeued if j.id not in reserving]
    left.sort(key=lambda j: r3_key(j, tiers))
    estimates = {j.id: None for j in waiting}
    for h in made.holds:
        estimates[h.id] = h.start

    def runtime(job):
        return expected_runtime(job.max_runtime, job.estimate, config)

    while left and events and events[0][0] <= now + HORIZON:
        t = events[0][0]
        while events and events[0][0] == t:
            _, kind, job_id = heapq.heappop(events)
            if kind == 0:
                state.release(state.holders.pop(job_id))
                holds.refresh()
                continue
            at = next(k for k, h in enumerate(holds.holds) if h.id == job_id)
            hold, earlier = holds.holds[at], holds.holds[:at]
            holds.drop(hold)
            job = pending[job_id]
            placement = hold.placement
            if any(state.room.free(i)[r] < v[r] for i, v in hold.on_nodes.items()
                   for r in range(3)):
                placement = place(state.room, job.demand) or placement
            state.admit(job.id, job.team, tiers[job.tier], job.demand, placement, t,
                        t + runtime(job))
            holds.charge(usage_on_nodes(job.demand, placement), None, holds=earlier)
            holds.refresh()
            heapq.heappush(events, (t + runtime(job), 0, job.id))
        held, parked, stay = set(), set(), []
        for k, job in enumerate(left):
            line = (job.team, job.tier, demand_of(job.replicas), job.max_runtime)
            if job.team in held or line in parked:
                stay.append(job)
                continue
            demand, tier = demand_of(job.replicas), tiers[job.tier]
            refusal = state.quota.refuse(job.team, demand.total, not tier.preemptible)
            until = t + job.max_runtime if job.max_runtime else None
            placement = None
            if refusal is None:
                restore = holds.spared(until)
                placement = place(state.room, demand)
                if placement is not None:
                    state.admit(job.id, job.team, tier, demand, placement, t, t + runtime(job))
                    holds.charge(usage_on_nodes(demand, placement), until)
                restore()
            if placement is not None:
                if job.id in estimates:
                    estimates[job.id] = t
                heapq.heappush(events, (t + runtime(job), 0, job.id))
                continue
            if t - job.queued > config.starvation_after:
                if refusal is not None:
                    held.add(job.team)
                elif config.starvation_guard == "hold":
                    stay.extend(left[k:])
                    break
                else:
                    if len(holds) < config.max_reservations:
                        restore = holds.lifted()
                        hold = earliest_hold(state, job.id, demand, runtime(job), holds)
                        restore()
                        if hold is not None:
                            holds.add(hold)
                            if job.id in estimates:
                                estimates[job.id] = hold.start
                            heapq.heappush(events, (hold.start, 1, job.id))
                            continue
                    parked.add(line)
            stay.append(job)
        left = stay
    return estimates


@PROFILE
@given(snapshots())
def test_estimates_match_the_straightforward_replay(snapshot):
    result = plan(snapshot)
    assert {w.id: w.eta for w in result.wait} == reference_starts(snapshot)


@PROFILE
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1), st.text(max_size=2)), unique=True))
def test_the_ends_in_the_events_heap_are_read_in_order_and_the_heap_left_as_it_was(items):
    heap = list(items)
    heapq.heapify(heap)
    before = list(heap)
    assert list(job_ends(heap)) == [(t, name) for t, kind, name in sorted(items) if kind == 0]
    assert heap == before


@pytest.mark.interpreted_policy
def test_teams_held_behind_heads_without_room_sleep_with_the_same_estimates(monkeypatch):
    """On the policy benchmark's busy cluster (1,500 pending jobs), a team
    whose walk passes heads without room and is then held at a later head
    sleeps out of the replay's cycles, to wake on an end of its own, a pool
    drawn less or room for one of those shapes (Lines._sleep), and every
    estimate is still the straightforward replay's."""
    sleeps = []
    sleep = Lines._sleep

    def counted_sleep(self, team, refusals, shapes, quota):
        sleeps.append((bool(refusals), bool(shapes)))
        sleep(self, team, refusals, shapes, quota)

    monkeypatch.setattr(Lines, "_sleep", counted_sleep)
    snapshot = build(1500, 7)
    estimates = {w.id: w.eta for w in plan(snapshot).wait}
    assert sleeps.count((True, True)) > 20
    assert estimates == reference_starts(snapshot)


def test_estimates_on_a_starving_queue_match_the_straightforward_replay():
    """On the policy benchmark's busy cluster with 1,000 jobs queued up to
    two hours ago (most of them starving), jobs start that borrow from the
    pool and jobs that do not: after the first, a team's heads passed over
    may be refused by R2 now and hold it (Lines._recheck); after the second,
    no other team's answer changes. Every estimate is still the
    straightforward replay's."""
    snapshot = build(1000, 7, queue_age=7200)
    assert {w.id: w.eta for w in plan(snapshot).wait} == reference_starts(snapshot)


def _check_sleepers(lines):
    """Fails unless the replay's sleep bookkeeping is exact: only sleeping
    teams wait for shapes, every shape's sleepers wait for it, no sleeping
    team is walked, and each team's shapes kept are its heads' shapes."""
    for team, shapes in lines.waits_for.items():
        assert team in lines.asleep and shapes
        assert all(team in lines.dormant[k] for k in shapes)
    for k, teams in lines.dormant.items():
        assert teams and all(k in lines.waits_for.get(team, ()) for team in teams)
    assert not lines.asleep.keys() & {team for _, team in lines.order}
    for team, shapes in lines.shapes_of.items():
        assert shapes == {lines.shape[n] for _, n in lines.team_heads[team]}


@pytest.mark.interpreted_policy
@pytest.mark.parametrize("size, age", [(1500, 1700), (1500, 7200), (600, 7200)])
def test_the_replays_sleepers_and_kept_shapes_stay_exact_cycle_by_cycle(monkeypatch, size, age):
    """On the policy benchmark's busy cluster, after every replayed cycle and
    every end: teams asleep for room are exactly those waiting for shapes,
    and the shapes kept per team are those of its heads as they are now."""
    checked = {"cycles": 0, "kept": 0}
    cycle, ended = Lines.cycle, Lines.ended

    def checked_cycle(self, *args):
        found = cycle(self, *args)
        _check_sleepers(self)
        checked["cycles"] += 1
        checked["kept"] += len(self.shapes_of)
        return found

    def checked_ended(self, team):
        ended(self, team)
        _check_sleepers(self)

    monkeypatch.setattr(Lines, "cycle", checked_cycle)
    monkeypatch.setattr(Lines, "ended", checked_ended)
    plan(build(size, 7, age))
    assert checked["cycles"] > 100 and checked["kept"] > 0
