"""The replay on a cluster of GPU types (`--types`): every job runs on nodes of one type it
accepts, quotas hold per type, and the figures come per type."""

from __future__ import annotations

import csv

import pytest

from scheduling.sim import POLICIES, build_world, replay, synthetic
from scheduling.sim.engine import Cluster, Entry
from scheduling.sim.run import config_from, run
from scheduling.sim.trace import TraceError
from scheduling.sim.world import parse_types, pods_of

TYPES = (("l4", 3), ("a100", 2))  # 24 l4 and 16 a100 GPUs, l4 first (cheapest)


def typed(count=200, seed=4, load=4, **kwargs):
    tr = synthetic(count, seed=seed, load=load)
    return tr, build_world(tr, seed=seed, types=TYPES, **kwargs)


def typed_checker(name, world):
    """Returns the observer asserting, after every cycle, that each job's pods sit on nodes of
    one type it accepts, that usage per type adds up, and that quota per type holds."""
    seen = [0]

    def observe(cluster, now):
        seen[0] += 1
        per_type = dict.fromkeys(world.gpu_types, 0)
        per_team = {}
        steady = {}
        for entry in [*cluster.running.values(), *cluster.pending.values()]:
            kinds = {world.nodes[i].gpu_type for i in entry.nodes}
            assert len(kinds) <= 1, f"{entry.id} spans types {kinds} under {name}"
            if kinds:
                (kind,) = kinds
                assert kind == entry.gpu_type and kind in world.type_of[entry.id], (
                    f"{entry.id} accepts {world.type_of[entry.id]} but holds {kind} under {name}")
        for entry in cluster.running.values():
            per_type[entry.gpu_type] += entry.gpus
            key = (entry.team, entry.gpu_type)
            per_team[key] = per_team.get(key, 0) + entry.gpus
            if not entry.tier.preemptible:
                steady[key] = steady.get(key, 0) + entry.gpus
        assert per_type == cluster.type_used
        for kind, gpus in per_type.items():
            assert gpus <= len(world.nodes_of(kind)) * 8
        for (team, kind), gpus in per_team.items():
            assert cluster.team_type_used[(team, kind)] == gpus
            assert sum(cluster.type_tier_gpus[(team, kind)].values()) == gpus
            assert sum(e.gpus for group in cluster.type_by_tier[(team, kind)].values()
                       for e in group.values()) == gpus
            if name.startswith("isolated"):
                assert gpus <= world.type_nominal(team, kind), f"{team} above its {kind} nominal"
        if name.startswith("gangway"):
            for (team, kind), gpus in steady.items():
                # R2: what a team borrows stays reclaimable, per type.
                assert gpus <= world.type_nominal(team, kind), f"non-preemptible {kind} above nominal in {team}"

    return observe, seen


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_typed_replay_never_places_a_job_on_a_node_of_another_type(name):
    tr, world = typed()
    observe, seen = typed_checker(name, world)
    outcome = replay(tr.jobs, world, POLICIES[name](world), observe=observe)
    assert seen[0] > 0
    assert len(outcome.records) + outcome.rejected + outcome.stuck == len(tr.jobs)
    assert {kind for kind, _, busy in outcome.type_busy if busy} == {"l4", "a100"}


def test_the_engine_refuses_a_placement_on_a_type_the_job_does_not_accept():
    tr, world = typed()
    job = next(j for j in tr.jobs if world.type_of[j.id] == ("a100",) and j.gpus <= 8)
    cluster = Cluster(world)
    entry = Entry(job, world.tier_of[job.id], pods_of(job.gpus), job.submit, job.duration, job.submit)
    l4_node = world.nodes_of("l4")[0]
    with pytest.raises(ValueError, match=f"job {job.id} accepts a100 GPUs; node l4-0 is of type l4"):
        cluster.place(entry, (l4_node,))
    assert cluster.free.total == world.capacity and entry.nodes == [] and entry.gpu_type is None
    assert cluster.place(entry, (world.nodes_of("a100")[0],)) and cluster.type_used == {"l4": 0, "a100": job.gpus}


def test_each_types_gpus_are_split_over_the_teams_by_their_size():
    tr, world = typed()
    assert [n.gpu_type for n in world.nodes] == ["l4"] * 3 + ["a100"] * 2
    assert {t.name: t.nominal for t in world.teams} == {
        "a": {"gpu:l4": 12, "gpu:a100": 8}, "b": {"gpu:l4": 6, "gpu:a100": 4}, "c": {"gpu:l4": 6, "gpu:a100": 4}}
    assert world.nominal == {"a": 20, "b": 10, "c": 10}


def test_a_seeded_share_of_jobs_accepts_every_type_and_the_rest_one_that_can_hold_them():
    tr, world = typed(count=1000, any_type=0.3)
    accepts_all = sum(kinds == ("l4", "a100") for kinds in world.type_of.values())
    assert 0.25 < accepts_all / len(tr.jobs) < 0.35
    for job in tr.jobs:
        kinds = world.type_of[job.id]
        assert kinds == ("l4", "a100") or (len(kinds) == 1 and len(world.nodes_of(kinds[0])) * 8 >= job.gpus)
    assert typed(count=1000)[1].type_of == world.type_of
    assert typed(count=1000, seed=5)[1].type_of != world.type_of


def test_types_draw_nothing_from_the_tiers_random():
    tr, world = typed()
    assert world.tier_of == build_world(tr, seed=4).tier_of


def test_types_take_no_partition_of_nodes():
    tr = synthetic(10, seed=1)
    with pytest.raises(TraceError, match="--types takes the shared partition"):
        build_world(tr, seed=1, partition="nodes", types=TYPES)


@pytest.mark.parametrize("text,problem", [
    ("a100", "expected type:nodes"), ("a100:0", "expected type:nodes"), (":4", "expected type:nodes"),
    ("a100:x", "expected type:nodes"), ("a100:2,a100:3", "a100 is named twice")])
def test_it_names_a_malformed_types_flag(text, problem):
    with pytest.raises(TraceError, match=problem):
        parse_types(text)


def test_it_reads_types_in_the_order_written():
    assert parse_types("l4:256, a100:96") == (("l4", 256), ("a100", 96))
    assert parse_types("") == ()


def test_a_typed_run_prints_and_writes_figures_per_type(tmp_path):
    config = config_from({"synthetic": 120, "seed": 2, "policy": ["gangway", "pooled-fifo"], "load": [2.0],
                          "out": str(tmp_path), "quiet": True, "types": "l4:3,a100:2", "any_type": 0.5})
    assert (config.types, config.any_type) == ((("l4", 3), ("a100", 2)), 0.5)
    result = run(config)
    assert "- per GPU type, gangway x2: l4 (24 GPUs) " in result.table
    assert "; a100 (16 GPUs) " in result.table
    with open(tmp_path / "types.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["policy"], r["gpu_type"]) for r in rows] == [
        ("gangway", "l4"), ("gangway", "a100"), ("pooled-fifo", "l4"), ("pooled-fifo", "a100")]
    assert all(0 < float(r["utilization"]) <= 1 for r in rows)


def test_an_untyped_run_writes_no_type_figures(tmp_path):
    result = run(config_from({"synthetic": 60, "seed": 2, "policy": ["gangway"], "out": str(tmp_path),
                              "quiet": True}))
    assert "per GPU type" not in result.table and not (tmp_path / "types.csv").exists()
