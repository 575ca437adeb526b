"""Gangway's reservations (R4), runtimes (R14) and checkpoints (R8) in the
replay, on small traces worked out by hand; and the old hold unchanged."""

from __future__ import annotations

import pytest

from scheduling.sim import POLICIES, build_world, replay, summarize, synthetic
from scheduling.sim.engine import Cluster, Entry
from scheduling.sim.policies import planner as planner_module
from scheduling.sim.runtimes import Runtimes
from scheduling.sim.world import STANDARD, pods_of

from .helpers import ends, trace, world

HOUR = 3600


def big_gang_trace():
    # Teams a and b of 4 nodes each. b runs five 5-GPU jobs until 5000, one
    # per node (n0-n4, 3 GPUs free on each), within its nominal: never
    # victims (R7). a's j6 needs 4 whole nodes from 1 and finds 3 empty; j7
    # (1 GPU, 10 s) arrives at 2000, when j6 has waited past
    # starvation_after (1800 s).
    jobs = [(0, 5000, 5, "b")] * 5 + [(1, 100, 32, "a"), (2000, 10, 1, "a")]
    return trace([("a", 32), ("b", 32)], *jobs)


def run(name, tr, estimates="history", **kwargs):
    w = world(tr)
    w = type(w)(w.nodes, w.teams, w.tiers, w.tier_of, w.nominal, w.owned, estimates)
    return replay(tr.jobs, w, POLICIES[name](w), **kwargs)


def test_a_starving_big_gang_reserves_room_and_later_jobs_backfill_around_it():
    # Nothing is learned yet, so b's jobs are expected to run default_runtime:
    # j6 reserves n0-n3 (all empty then; node order), whose 12 free GPUs stay
    # idle from 2000 to 5000. j7, not sure to end before the reservation
    # starts, backfills on n4 at once.
    outcome = run("gangway", big_gang_trace())
    assert ends(outcome)[1] == (5100, 4999)
    assert ends(outcome)[2000] == (2010, 0)
    assert outcome.reserved_idle == 12 * 3000
    row = summarize(outcome, 1)
    assert row["reserved_idle_gpu_hours"] == 12 * 3000 / HOUR
    assert row["p99_queue_big"] == 4999 and row["max_queue_big"] == 4999


def test_a_job_whose_max_runtime_ends_it_before_the_reservation_may_use_reserved_room():
    # Under the oracle every max_runtime is the true duration: j6's room is
    # due at 5000, and j7 (10 s from 2000) ends by then, so best fit puts it
    # on reserved room (n0), leaving 11 of the 12 reserved GPUs idle for 10 s.
    outcome = run("gangway", big_gang_trace(), estimates="oracle")
    assert ends(outcome)[1] == (5100, 4999)
    assert ends(outcome)[2000] == (2010, 0)
    assert outcome.reserved_idle == 11 * 10 + 12 * 2990


def test_the_hold_reserves_nothing_and_holds_the_whole_cluster():
    outcome = run("gangway-hold", big_gang_trace())
    assert ends(outcome)[1] == (5100, 4999)
    assert ends(outcome)[2000] == (5010, 3000)  # held behind j6
    assert outcome.reserved_idle == 0
    assert summarize(outcome, 1)["reserved_idle_gpu_hours"] == 0


def test_jobs_below_the_big_gang_size_leave_the_big_columns_at_zero():
    tr = trace([("a", 16)], (0, 100, 16, "a"), (0, 100, 16, "a"))
    row = summarize(run("pooled-fifo", tr), 1)
    assert (row["p99_queue_big"], row["max_queue_big"]) == (0.0, 0.0)
    assert row["p99_queue"] == 100


@pytest.mark.parametrize("seed,load,figures", [
    # (preemptions, lost GPU-seconds, sum of ends, sum of queues), as gangway
    # replayed these traces with the whole-cluster hold before reservations.
    (3, 6, (36, 138080, 5201409, 2253006)),
    (5, 4, (24, 179150, 7807489, 3925998)),
])
def test_gangway_hold_replays_as_gangway_did_before_reservations(seed, load, figures):
    tr = synthetic(300, seed=seed, load=load)
    w = build_world(tr, seed=seed)
    outcome = replay(tr.jobs, w, POLICIES["gangway-hold"](w))
    assert len(outcome.records) == 300
    assert (outcome.preemptions, outcome.lost, sum(r.end for r in outcome.records),
            sum(r.queue for r in outcome.records)) == figures


def snapshots_of(name, tr, estimates, monkeypatch):
    """Returns every snapshot the planner built while replaying `tr`."""
    seen = []
    planned = planner_module.plan

    def recording(snapshot, **kwargs):
        seen.append(snapshot)
        return planned(snapshot, **kwargs)

    monkeypatch.setattr(planner_module, "plan", recording)
    run(name, tr, estimates)
    return seen


def test_the_oracle_states_every_job_s_true_duration_as_its_max_runtime(monkeypatch):
    tr = synthetic(120, seed=7, load=4)
    durations = {job.id: job.duration for job in tr.jobs}
    snapshots = snapshots_of("gangway", tr, "oracle", monkeypatch)
    pending = [j for s in snapshots for j in s.pending]
    running = [j for s in snapshots for j in s.running if j.id in durations]
    assert pending and running
    assert all(j.max_runtime == durations[j.id] and j.estimate is None for j in pending)
    assert all(j.max_runtime == durations[j.id] for j in running)


def test_without_estimates_no_job_states_a_runtime(monkeypatch):
    tr = synthetic(120, seed=7, load=4)
    snapshots = snapshots_of("gangway", tr, "none", monkeypatch)
    jobs = [j for s in snapshots for j in s.pending + s.running]
    assert jobs and all(j.max_runtime is None and j.estimate is None for j in jobs)


def test_history_learns_the_median_of_the_last_five_successes_capped():
    runtimes = Runtimes("history", default_runtime=1000)
    job = Entry(trace([("a", 8)], (0, 1, 2, "a")).jobs[0], STANDARD, pods_of(2), 0, 1, 0)
    assert runtimes.learn(job, 100) is None  # one success is not enough
    assert runtimes.estimate(job) is None
    assert runtimes.learn(job, 300) == ("a", 2)
    assert runtimes.estimate(job) == 200
    for runtime in (900, 900, 900, 900):  # the 100 and 300 fall out of the last 5
        runtimes.learn(job, runtime)
    assert runtimes.estimate(job) == 900
    runtimes.learn(job, 5000)
    runtimes.learn(job, 5000)
    runtimes.learn(job, 5000)
    assert runtimes.estimate(job) == 1000  # capped at default_runtime
    assert runtimes.max_runtime(job) is None


def test_history_estimates_reach_the_snapshot_by_team_and_gpus(monkeypatch):
    # Two 1-GPU jobs of a succeed (100 s, then 300 s); at 400 a third waits
    # behind a full node and is listed with their median, 200 s; at 1301 it
    # is listed beside an 8-GPU job, of no history (one 8-GPU success).
    tr = trace([("a", 8)], (0, 100, 1, "a"), (0, 300, 1, "a"), (301, 1000, 8, "a"),
               (400, 50, 1, "a"), (1301, 50, 8, "a"))
    snapshots = snapshots_of("gangway", tr, "history", monkeypatch)
    at = {s.now: s for s in snapshots}
    assert [(j.id, j.estimate) for j in at[400].pending] == [("j4", 200)]
    assert [(j.id, j.estimate) for j in at[1301].pending] == [("j4", 200), ("j5", None)]


def test_running_jobs_report_the_engine_s_checkpoints():
    tr = trace([("a", 8)], (0, 10_000, 8, "a"))
    cluster = Cluster(world(tr), checkpoint_interval=1800)
    entry = Entry(tr.jobs[0], STANDARD, pods_of(8), 0, 10_000, 0, started=0)
    assert cluster.checkpointed(entry, 1799) is None
    assert cluster.checkpointed(entry, 1800) == 1800
    assert cluster.checkpointed(entry, 5000) == 3600
    # Started again at 6000 after a preemption that kept 3600 s, with 30 s of
    # restart overhead: the next checkpoint falls at 5400 s of progress.
    entry.remaining, entry.started, entry.overhead = 10_000 - 3600, 6000, 30
    assert cluster.checkpointed(entry, 7000) is None
    assert cluster.checkpointed(entry, 6000 + 30 + 1800) == 6000 + 30 + 1800


def test_each_plan_s_reservations_are_carried_into_the_next_snapshot(monkeypatch):
    seen = []
    planned = planner_module.plan

    def recording(snapshot, **kwargs):
        result = planned(snapshot, **kwargs)
        seen.append((snapshot, result))
        return result

    monkeypatch.setattr(planner_module, "plan", recording)
    run("gangway", big_gang_trace())
    made = [k for k, (_, result) in enumerate(seen) if result.reservations]
    assert made
    for k in made:
        if k + 1 < len(seen):
            assert seen[k + 1][0].reservations == seen[k][1].reservations
    assert any(r.id == "j6" for _, result in seen for r in result.reservations)
