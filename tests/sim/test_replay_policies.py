"""Each policy on a small trace whose outcome is worked out by hand."""

from __future__ import annotations

from scheduling.sim import POLICIES, build_world, replay, summarize
from scheduling.sim.metrics import summarize_teams
from scheduling.sim.policies.planner import gangway

from .helpers import ends, trace, world


def run(name, tr, tiers=None, **kwargs):
    w = world(tr, tiers)
    return replay(tr.jobs, w, POLICIES[name](w), **kwargs)


def test_strict_fifo_stops_at_the_first_job_that_cannot_be_placed():
    # One team of 16 GPUs (2 nodes). j1 takes 12 (a node and 4 of the other);
    # j2 (8) cannot start until j1 ends at 100; j3 (1) waits behind it though
    # it would fit: no backfill.
    tr = trace([("a", 16)], (0, 100, 12, "a"), (1, 50, 8, "a"), (2, 10, 1, "a"))
    outcome = run("isolated-fifo", tr)
    assert ends(outcome) == {0: (100, 0), 1: (150, 99), 2: (110, 98)}


def test_isolated_teams_never_borrow_while_pooled_fifo_shares_everything():
    # Teams a and b of 8 GPUs each; a submits two 8-GPU jobs, b nothing.
    tr = trace([("a", 8), ("b", 8)], (0, 100, 8, "a"), (0, 100, 8, "a"))
    isolated = sorted(r.end for r in run("isolated-fifo", tr).records)
    pooled = sorted(r.end for r in run("pooled-fifo", tr).records)
    assert isolated == [100, 200]
    assert pooled == [100, 100]


def test_each_team_row_gives_its_mean_slowdown_and_its_offered_load():
    # Jobs arrive from 0 to 100. Team a (8 GPUs) offers three 8-GPU jobs of
    # 100 s: 2,400 GPU-s over 8 GPUs x 100 s, three times its quota. Alone
    # on its nodes, j1 runs 0-100, j3 (submitted 30) 100-200 and j4
    # (submitted 100) 200-300: slowdowns 1, 170/100 and 200/100. Team b
    # (8 GPUs) offers one 1-GPU job of 50 s, run as submitted: 50 / 800.
    tr = trace([("a", 8), ("b", 8)], (0, 100, 8, "a"), (20, 50, 1, "b"), (30, 100, 8, "a"),
               (100, 100, 8, "a"))
    rows = {row["team"]: row for row in summarize_teams(run("isolated-fifo", tr), 1.0)}
    assert rows["a"]["avg_slowdown"] == (1 + 1.7 + 2.0) / 3
    assert rows["a"]["offered_load"] == 3.0
    assert rows["b"]["avg_slowdown"] == 1.0
    assert rows["b"]["offered_load"] == 50 / 800


def test_isolated_sjf_starts_the_shortest_job_first():
    tr = trace([("a", 8)], (0, 100, 8, "a"), (1, 500, 8, "a"), (2, 10, 8, "a"))
    # j1 runs 0-100; then j3 (10 s) before j2 (500 s).
    assert ends(run("isolated-sjf", tr)) == {0: (100, 0), 2: (110, 98), 1: (610, 109)}


def test_isolated_policies_reject_a_job_larger_than_the_team():
    tr = trace([("a", 8), ("b", 8)], (0, 100, 16, "a"))
    outcome = run("isolated-fifo", tr)
    assert outcome.rejected == 1 and outcome.records == ()


def test_kube_default_partial_gangs_hold_gpus_until_the_last_pod_starts():
    # 2 nodes. j1 (4 GPUs, 0-100) sits on n0. j2 (16 GPUs = two whole-node
    # pods) places one pod on n1 and holds it; its second pod waits for n0 to
    # empty at 100. Held idle: 8 GPUs x 99 s.
    tr = trace([("a", 16)], (0, 100, 4, "a"), (1, 50, 16, "a"))
    outcome = run("kube-default", tr)
    assert ends(outcome) == {0: (100, 0), 1: (150, 99)}
    assert outcome.partial == 8 * 99
    assert summarize(outcome, 1)["partial_gang_gpu_hours"] == 8 * 99 / 3600


def test_kube_default_detects_a_deadlock():
    # 2 nodes; two 16-GPU jobs submitted in the same second: their first pods
    # take one node each, their second pods fit nowhere, nothing runs.
    tr = trace([("a", 16)], (0, 100, 16, "a"), (0, 100, 16, "a"), (5, 10, 1, "a"))
    outcome = run("kube-default", tr)
    assert outcome.stuck == 3 and outcome.records == ()
    assert outcome.partial == 16 * 5  # held from 0 until the last event


def test_gang_policies_start_the_same_jobs_one_after_the_other():
    tr = trace([("a", 16)], (0, 100, 16, "a"), (0, 100, 16, "a"))
    for name in ("pooled-fifo", "isolated-fifo", "gangway", "kueue-like"):
        assert sorted(r.end for r in run(name, tr).records) == [100, 200], name


def test_gangway_reclaims_borrowed_gpus_for_their_owner():
    # Teams a and b, one node each. b borrows: two 8-GPU jobs at 0. a's job at
    # 10 is within its nominal, so b's newest job is preempted (R6) and a
    # starts at 10. The victim had 10 s of work, no checkpoint: it restarts on
    # b's own node when b's other job ends at 100, and ends at 100 + 30 + 100.
    tr = trace([("a", 8), ("b", 8)], (0, 100, 8, "b"), (0, 100, 8, "b"), (10, 100, 8, "a"))
    outcome = run("gangway", tr)
    assert outcome.preemptions == 1
    assert outcome.lost == (10 + 30) * 8
    assert ends(outcome)[10] == (110, 0)
    assert sorted(r.end for r in outcome.records if r.team == "b") == [100, 230]


def test_gangway_preempts_its_own_lower_tier_once_the_thrash_guard_allows_it():
    # Teams a and b fill their one node each: j1 (a, experiment) from 0, j2
    # (b) from 1. j3 (a, standard) arrives at 100. Under the default guard
    # (600 s) j1 may be preempted from 600 on, and the replay plans again
    # when something happens: j4 arrives at 650, so j3 runs 650-750. With
    # the guard set to 0, j3 preempts j1 at once.
    tr = trace([("a", 8), ("b", 8)], (0, 1000, 8, "a"), (1, 2000, 8, "b"), (100, 100, 8, "a"),
               (650, 10, 1, "b"))
    tiers = {"j1": "experiment"}
    assert ends(run("gangway", tr, tiers))[100] == (750, 550)
    w = world(tr, tiers)
    unguarded = replay(tr.jobs, w, gangway(w, (("min_runtime_before_preemption", 0),)))
    assert unguarded.policy == "gangway[min_runtime_before_preemption=0]"
    assert ends(unguarded)[100] == (200, 0)


def test_perfect_checkpoints_lose_only_the_restart_overhead():
    tr = trace([("a", 8), ("b", 8)], (0, 100, 8, "b"), (0, 100, 8, "b"), (10, 100, 8, "a"))
    outcome = run("gangway", tr, checkpoint_interval=0)
    assert outcome.lost == 30 * 8
    assert sorted(r.end for r in outcome.records if r.team == "b") == [100, 100 + 30 + 90]


def test_gangway_never_preempts_production_work():
    tr = trace([("a", 8), ("b", 8)], (0, 100, 8, "b"), (0, 100, 8, "b"), (10, 100, 8, "a"))
    outcome = run("gangway", tr, tiers={"j1": "production", "j2": "production"})
    # Production work is non-preemptible and only ever within nominal: b's
    # second job waits for its first instead of borrowing a's node.
    assert outcome.preemptions == 0
    assert ends(outcome)[10] == (110, 0)


def test_kueue_like_has_no_starvation_guard_and_backfills():
    # One team of 8. A 6-GPU job runs 0-5000; an 8-GPU job waits from 1;
    # 2-GPU jobs keep arriving. kueue-like backfills them all; gangway's
    # guard (1800 s) holds the team for the big job from 1801 on.
    jobs = [(0, 5000, 6, "a"), (1, 100, 8, "a")]
    jobs += [(t, 1000, 2, "a") for t in range(2, 4000, 1000)]
    tr = trace([("a", 8)], *jobs)
    kueue = ends(run("kueue-like", tr))
    gang = ends(run("gangway", tr))
    assert kueue[2][1] == 0 and gang[2][1] == 0  # first small job backfills in both
    assert gang[2002][1] > 0  # held behind the starving big job
    assert kueue[2002][1] == 0


def test_partitioned_nodes_give_each_team_its_own_nodes_in_file_order():
    tr = trace([("a", 16), ("b", 8), ("c", 24)], (0, 10, 1, "a"))
    w = build_world(tr, seed=0, partition="nodes")
    assert w.owned == {"a": range(0, 2), "b": range(2, 3), "c": range(3, 6)}
    assert build_world(tr, seed=0).owned == {}


def test_isolated_fifo_places_a_team_only_on_its_own_nodes_when_partitioned():
    # Teams a and b of one node each. With nodes shared, b's 6-GPU job takes
    # n0 (all empty: node order), best fit puts a's first 2-GPU job beside it
    # and the second on n1. With nodes owned, b's job runs on b's node (n1)
    # and both of a's on a's (n0).
    tr = trace([("a", 8), ("b", 8)], (0, 100, 6, "b"), (1, 100, 2, "a"), (2, 100, 2, "a"))
    shared = world(tr)
    placed = {}

    def observe(cluster, now):
        for entry in cluster.running.values():
            placed.setdefault(entry.id, tuple(entry.nodes))

    replay(tr.jobs, shared, POLICIES["isolated-fifo"](shared), observe=observe)
    assert placed == {"j1": (0,), "j2": (0,), "j3": (1,)}  # best fit packs a beside b
    parted = type(shared)(shared.nodes, shared.teams, shared.tiers, shared.tier_of,
                          shared.nominal, build_world(tr, 0, partition="nodes").owned)
    placed.clear()
    replay(tr.jobs, parted, POLICIES["isolated-fifo"](parted), observe=observe)
    assert placed == {"j1": (1,), "j2": (0,), "j3": (0,)}
