"""The estimated starts against a straightforward replay on random small
snapshots (hypothesis).

The policy's replay merges per-team lines of jobs and lets held teams sleep;
the reference below walks every waiting job in R3 order at every replayed
moment, as eta.py's docstring describes the replay. The two must agree on
every estimate.
"""

from __future__ import annotations

import heapq
import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.policy.random_snapshots import place_randomly
from scheduling.policy import (
    Node, PendingJob, ReplicaGroup, RunningJob, Settings, Snapshot, Team, Tier, plan,
)
from scheduling.policy.demand import demand_of
from scheduling.policy.eta import HORIZON
from scheduling.policy.placement import place
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
                                  rng.choice((None, started - 100))))
    pending = []
    for k in range(rng.randint(1, 25)):
        count, gpu, cpu = rng.choice(shapes)
        pending.append(PendingJob(
            f"p{k:02d}", rng.choice(teams).name, rng.choice([t.name for t in TIERS]),
            rng.choice((rng.randint(0, now), now - 100, now - 2000)),
            (ReplicaGroup(count, gpu, cpu),), rng.choice((None, 300, 1000, 5000))))
    return Snapshot(now, nodes, TIERS, tuple(teams), tuple(running), tuple(pending),
                    Settings(starvation_after=rng.choice((600, 1800, 100000)),
                             min_runtime_before_preemption=rng.choice((0, 600)),
                             default_runtime=rng.choice((3600, 86400))))


def reference_starts(snapshot: Snapshot, result) -> dict[str, int | None]:
    """Returns the estimates by the replay as eta.py describes it: at every
    moment a job ends, walk every job not yet started in R3 order."""
    now, config = snapshot.now, snapshot.settings
    tiers = {t.name: t for t in snapshot.tiers}
    pending = {p.id: p for p in snapshot.pending}
    victims = {v for a in result.admit for v in a.victims}
    holding = [j for j in snapshot.running if j.id not in victims]
    for a in result.admit:
        job = pending[a.id]
        holding.append(RunningJob(job.id, job.team, job.tier, now, job.replicas, a.nodes,
                                  job.max_runtime))
    waiting = [pending[w.id] for w in result.wait]
    queue = waiting + [
        PendingJob(j.id, j.team, j.tier, j.queued if j.queued is not None else j.started,
                   j.replicas, j.max_runtime)
        for j in snapshot.running if j.id in victims]
    queue.sort(key=lambda j: (-tiers[j.tier].value, j.queued, j.id))
    state = State(Snapshot(now, snapshot.nodes, snapshot.tiers, snapshot.teams,
                           tuple(holding)))
    events = []
    for j in holding:
        start = now if j.id in pending else j.started
        end = start + (j.max_runtime or config.default_runtime)
        events.append((max(end, now + 1), j.id))
    heapq.heapify(events)
    estimates = {j.id: None for j in waiting}
    left = list(queue)
    while left and events and events[0][0] <= now + HORIZON:
        t = events[0][0]
        while events and events[0][0] == t:
            state.remove(state.holders.pop(heapq.heappop(events)[1]))
        held, stay = set(), []
        for k, job in enumerate(left):
            if job.team in held:
                stay.append(job)
                continue
            demand, tier = demand_of(job.replicas), tiers[job.tier]
            refusal = state.quota.refuse(job.team, demand.total, not tier.preemptible)
            placement = place(state.room, demand) if refusal is None else None
            if placement is not None:
                state.admit(job.id, job.team, tier, demand, placement, t)
                if job.id in estimates:
                    estimates[job.id] = t
                heapq.heappush(events, (t + (job.max_runtime or config.default_runtime), job.id))
                continue
            stay.append(job)
            if t - job.queued > config.starvation_after:
                if refusal is None:
                    stay.extend(left[k + 1:])
                    break
                held.add(job.team)
        left = stay
    return estimates


@PROFILE
@given(snapshots())
def test_estimates_match_the_straightforward_replay(snapshot):
    result = plan(snapshot)
    assert {w.id: w.eta for w in result.wait} == reference_starts(snapshot, result)
