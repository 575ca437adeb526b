"""The estimated starts on clusters with GPU types against a straightforward
replay on random small snapshots (hypothesis).

The policy's typed replay merges per-team lists of jobs, lets teams leave a
cycle's walk and jumps over jobs that could change nothing
(scheduling/policy/typed_queue.py); the reference below walks every waiting
job in R3 order at every replayed moment, as eta_typed.py's docstring
describes the replay, with no shortcut, from the same decisions of the
cycle. The two must agree on every estimate, under both starvation guards.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.policy_bench import build
from scheduling.policy import PendingJob, ReplicaGroup, plan
from scheduling.policy.cycle import decide
from scheduling.policy.eta import HORIZON
from scheduling.policy.eta_typed import _start_reserved
from scheduling.policy.order import r3_key
from scheduling.policy.placement import place, usage_on_nodes
from scheduling.policy.reservation import Hold, Holds, earliest_hold
from scheduling.policy.runtime import expected_runtime
from scheduling.policy.state import State
from scheduling.policy.typed_sleep import Sleepers
from tests.policy.random_snapshots import typed_snapshot
from tests.policy.test_policy_properties import PROFILE, TIERS


@st.composite
def busy_typed_snapshots(draw):
    """Returns a random typed snapshot with up to 30 more pending jobs than
    typed_snapshot gives, so teams hold types and leave the walk, under
    either starvation guard."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    snapshot = typed_snapshot(rng, TIERS, draw(st.integers(2, 3)))
    names = sorted({n.gpu_type for n in snapshot.nodes})
    pending = list(snapshot.pending)
    for k in range(rng.randint(0, 30)):
        asked = rng.choice(((), (rng.choice(names),), tuple(rng.sample(names, len(names)))))
        pending.append(PendingJob(
            f"q{k}", rng.choice(snapshot.teams).name, rng.choice([t.name for t in TIERS]),
            rng.randint(0, snapshot.now),
            (ReplicaGroup(rng.randint(1, 2), rng.randint(1, 4), rng.choice((0, 1000))),),
            rng.choice((None, 500, 4000)), gpu_type=asked))
    guard = rng.choice(("reserve", "hold"))
    return replace(snapshot, pending=tuple(pending),
                   settings=replace(snapshot.settings, starvation_guard=guard))


def reference_starts(snapshot) -> dict[str, int | None]:
    """Returns each waiting job's estimated start by the straightforward
    replay: at each moment a job ends, every job not yet started is visited
    in R3 order."""
    made = decide(snapshot)
    waiting = [job for job in made.queue if job.id in made.waiting]
    if not waiting:
        return {}
    settings, tiers = snapshot.settings, {t.name: t for t in snapshot.tiers}
    victims = {v for a in made.admitted for v in a.victims}
    state = State(replace(snapshot, running=tuple(j for j in snapshot.running
                                                  if j.id not in victims),
                          pending=(), reservations=()))
    kinds = dict(made.kinds)
    requeued = []
    for job in snapshot.running:
        if job.id in victims:
            requeued.append(PendingJob(job.id, job.team, job.tier,
                                       job.queued if job.queued is not None else job.started,
                                       job.replicas, job.max_runtime, job.estimate))
            kinds[job.id] = (made.state.holders[job.id].kind,)
    for a in made.admitted:
        state.hold(made.state.holders[a.id])
    reserving = {h.id for h in made.holds}
    queue = sorted((job for job in waiting + requeued if job.id not in reserving),
                   key=lambda job: r3_key(job, tiers))
    pending = {job.id: job for job in [*waiting, *requeued]}
    events = [(h.end, 0, h.id) for h in state.holders.values() if h.end is not None]
    heapq.heapify(events)
    kept = Holds(state.room)
    for h in made.holds:
        kept.add(Hold(h.id, h.start, h.placement, h.on_nodes,
                      {i: list(v) for i, v in h.headroom.items()}, h.ending, h.end, h.gpu_type))
        heapq.heappush(events, (h.start, 1, h.id))
    estimates = {job.id: None for job in waiting}
    estimates.update((h.id, h.start) for h in made.holds if h.id in estimates)
    while queue and events and events[0][0] <= snapshot.now + HORIZON:
        t = events[0][0]
        while events and events[0][0] == t:
            _, what, job_id = heapq.heappop(events)
            if what == 1:
                _start_reserved(state, kept, pending[job_id], tiers, settings, events)
                continue
            state.release(state.holders.pop(job_id))
            kept.refresh()
        started, reserved = _walk(state, kept, queue, kinds, tiers, settings, t)
        for job_id in started:
            estimates[job_id] = t
            heapq.heappush(events, (state.holders[job_id].end, 0, job_id))
        for hold in reserved:
            estimates[hold.id] = hold.start
            heapq.heappush(events, (hold.start, 1, hold.id))
        gone = set(started) | {hold.id for hold in reserved}
        queue = [job for job in queue if job.id not in gone]
    return {job.id: estimates[job.id] for job in waiting}


def _walk(state, holds, queue, kinds, tiers, settings, t) -> tuple[list[str], list[Hold]]:
    """Visits every job of `queue` in order at `t`; returns the ids of the
    jobs started and the reservations made."""
    reserve = settings.starvation_guard == "reserve"
    started: list[str] = []
    reserved: list[Hold] = []
    held: set[str] = set()
    held_types: set[tuple] = set()
    for job in queue:
        if job.team in held:
            continue
        open_kinds = tuple(k for k in kinds[job.id]
                           if (job.team, k) not in held_types and (None, k) not in held_types)
        if not open_kinds:
            continue
        tier = tiers[job.tier]
        quota_ok, admits, placed, gpus_refused = None, [], False, True
        for kind in open_kinds:
            refusal = state.quotas[0 if kind is None else kind].refuse(
                job.team, job.demand.total, not tier.preemptible)
            if refusal is not None:
                gpus_refused = gpus_refused and refusal.resource == 0
                continue
            admits.append(kind)
            quota_ok = kind if quota_ok is None else quota_ok
            state.select(kind)
            placement = place(state.room, job.demand)
            if placement is not None:
                end = t + expected_runtime(job.max_runtime, job.estimate, settings)
                state.admit(job.id, job.team, tier, job.demand, placement, t, end)
                if holds:
                    holds.charge(usage_on_nodes(job.demand, placement), None)
                started.append(job.id)
                placed = True
            state.select(None)
            if placed:
                break
        if placed or job.queued >= t - settings.starvation_after:
            continue
        if quota_ok is None:
            if None not in open_kinds and gpus_refused:
                held_types.update((job.team, k) for k in open_kinds)
            else:
                held.add(job.team)
        elif not reserve and None not in open_kinds:
            held_types.update((None, k) for k in admits)
        elif not reserve:
            break
        elif len(holds) < settings.max_reservations:
            state.select(quota_ok)
            restore = holds.lifted()
            hold = earliest_hold(state, job.id, job.demand,
                                 expected_runtime(job.max_runtime, job.estimate, settings), holds)
            restore()
            state.select(None)
            if hold is not None:
                hold.gpu_type = state.types.names[quota_ok]
                holds.add(hold)
                reserved.append(hold)
    return started, reserved


@PROFILE
@given(busy_typed_snapshots())
def test_typed_estimates_match_the_straightforward_replay(snapshot):
    result = plan(snapshot)
    assert {w.id: w.eta for w in result.wait} == reference_starts(snapshot)


@pytest.mark.interpreted_policy
@pytest.mark.parametrize("seed", [7, 11])
def test_teams_sleep_and_wake_on_a_busy_typed_cluster_with_the_same_estimates(seed, monkeypatch):
    """On the policy benchmark's busy cluster split over 4 GPU types (600
    pending jobs), teams whose walk has no effect sleep out of the replay's
    cycles and wake again on an end, a pool drawn less or room
    (typed_sleep.py), and every estimate is still the straightforward
    replay's."""
    slept, woken = [], []
    sleep, wake, ended = Sleepers.sleep, Sleepers.wake, Sleepers.ended

    def counted_sleep(self, team, *args):
        slept.append(team)
        sleep(self, team, *args)

    def counted_wake(self, *args):
        before = set(self.asleep)
        wake(self, *args)
        woken.extend(before - set(self.asleep))

    def counted_ended(self, team):
        woken.extend([team] if team in self.asleep else [])
        ended(self, team)

    monkeypatch.setattr(Sleepers, "sleep", counted_sleep)
    monkeypatch.setattr(Sleepers, "wake", counted_wake)
    monkeypatch.setattr(Sleepers, "ended", counted_ended)
    snapshot = build(600, seed, types=4)
    estimates = {w.id: w.eta for w in plan(snapshot).wait}
    assert len(slept) > 50 and len(woken) > 50
    assert estimates == reference_starts(snapshot)
