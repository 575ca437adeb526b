"""Invariants of the policy per GPU type, over random clusters of two or
three types (hypothesis; random_snapshots.typed_snapshot).

As in test_policy_properties.py, each check recomputes what it needs with
plain sums: a job's GPUs count against `gpu:<its type>`, CPU against `cpu`.
R1 (no node over capacity), R11 (only nodes of its type, a type it
accepts), R2 per type (borrowing limit, non-preemptible work within
nominal, no pool overdrawn), R6 per type (a job that reclaims leaves its
team within nominal of its type), R7/R8 (victims of the preemptor's type,
of a team above its nominal in what the preemptor needs, never shared).
"""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from scheduling.policy import plan
from tests.policy.random_snapshots import check_unschedulable_nodes, cordon_some, typed_snapshot
from tests.policy.test_policy_properties import PROFILE, TIERS


@st.composite
def typed_snapshots(draw):
    rng = random.Random(draw(st.integers(0, 2**32)))
    return typed_snapshot(rng, TIERS, draw(st.integers(2, 3)))


def _types(snapshot):
    return {n.name: n.gpu_type for n in snapshot.nodes}


def _held(snapshot, result):
    """Returns (job, nodes, type, is_new) for every job holding room once the plan applies."""
    of_node = _types(snapshot)
    pending = {p.id: p for p in snapshot.pending}
    victims = {v for a in result.admit for v in a.victims}
    held = []
    for job in snapshot.running:
        if job.id not in victims:
            held.append((job, list(job.nodes), job.gpu_type or of_node[job.nodes[0]], False))
    for a in result.admit:
        held.append((pending[a.id], [n for n, k in a.placement for _ in range(k)], a.gpu_type, True))
    return held


def _usage(snapshot, held):
    """Returns (usage, non-preemptible usage) per team and resource key."""
    tiers = {t.name: t for t in snapshot.tiers}
    used, steady = {}, {}
    for job, _, gpu_type, _ in held:
        if job.team is None:
            continue
        g = job.replicas[0]
        for key, v in ((f"gpu:{gpu_type}", g.count * g.gpu), ("cpu", g.count * g.cpu)):
            if not v:
                continue
            used[(job.team, key)] = used.get((job.team, key), 0) + v
            if not tiers[job.tier].preemptible:
                steady[(job.team, key)] = steady.get((job.team, key), 0) + v
    return used, steady


def _capacity(snapshot, key):
    if key == "cpu":
        return sum(n.cpu for n in snapshot.nodes)
    return sum(n.gpu for n in snapshot.nodes if f"gpu:{n.gpu_type}" == key)


def _typed_teams(snapshot):
    """Returns the teams' quota per resource key, 0 for a type a typed team does not name."""
    keys = [f"gpu:{name}" for name in {n.gpu_type for n in snapshot.nodes}] + ["cpu"]
    quota = {}
    for team in snapshot.teams:
        names_types = any(k.startswith("gpu:") for k in team.nominal)
        for key in keys:
            if key in team.nominal or (names_types and key.startswith("gpu:")):
                quota[(team.name, key)] = (team.nominal.get(key, 0), team.borrowing_limit.get(key),
                                           team.lending_limit.get(key))
    return quota


def _pool_ok(snapshot, quota, used, key):
    named = [(team, q) for (team, k), q in quota.items() if k == key]
    unassigned = max(0, _capacity(snapshot, key) - sum(q[0] for _, q in named))
    borrowed = sum(max(0, used.get((team, key), 0) - q[0]) for team, q in named)
    lendable = sum(min(q[0] if q[2] is None else q[2], max(0, q[0] - used.get((team, key), 0)))
                   for team, q in named)
    return borrowed <= unassigned + lendable


@PROFILE
@given(typed_snapshots())
def test_no_node_is_over_capacity_and_jobs_stay_on_their_type(snapshot):
    result = plan(snapshot, with_eta=False)
    of_node = _types(snapshot)
    load = {n.name: [0, 0] for n in snapshot.nodes}
    teams = {t.name: t for t in snapshot.teams}
    for job, nodes, gpu_type, new in _held(snapshot, result):
        g = job.replicas[0]
        for name in nodes:
            load[name][0] += g.gpu
            load[name][1] += g.cpu
        if new and g.gpu:
            assert {of_node[name] for name in nodes} == {gpu_type}
            accepted = job.gpu_type or tuple(
                k[4:] for k in teams[job.team].nominal if k.startswith("gpu:")) or tuple(
                of_node.values())
            assert gpu_type in accepted
        if new and not g.gpu:
            assert gpu_type is None
    for n in snapshot.nodes:
        assert load[n.name][0] <= n.gpu and load[n.name][1] <= n.cpu, (n, load)


@PROFILE
@given(typed_snapshots())
def test_quota_limits_hold_per_type_where_usage_grew(snapshot):
    result = plan(snapshot, with_eta=False)
    quota = _typed_teams(snapshot)
    before, steady_before = _usage(snapshot, _held(snapshot, type(result)()))
    after, steady_after = _usage(snapshot, _held(snapshot, result))
    for (team, key), (nominal, borrowing, _) in quota.items():
        grew = after.get((team, key), 0) > before.get((team, key), 0)
        if grew and borrowing is not None:
            assert after[(team, key)] <= nominal + borrowing, (team, key)
        if steady_after.get((team, key), 0) > steady_before.get((team, key), 0):
            assert steady_after[(team, key)] <= nominal, (team, key)
    for key in {k for _, k in quota}:
        grew = any(after.get(tk, 0) > before.get(tk, 0) for tk in quota if tk[1] == key)
        if grew and _pool_ok(snapshot, quota, before, key):
            assert _pool_ok(snapshot, quota, after, key), key


@PROFILE
@given(typed_snapshots())
def test_victims_are_of_the_preemptors_type_and_legal(snapshot):
    result = plan(snapshot, with_eta=False)
    of_node = _types(snapshot)
    tiers = {t.name: t for t in snapshot.tiers}
    running = {j.id: j for j in snapshot.running}
    pending = {p.id: p for p in snapshot.pending}
    quota = _typed_teams(snapshot)
    after, _ = _usage(snapshot, _held(snapshot, result))
    seen = set()
    for a in result.admit:
        job = pending[a.id]
        victims = [running[v] for v in a.victims]
        for victim in victims:
            assert victim.id not in seen
            seen.add(victim.id)
            assert (victim.gpu_type or of_node[victim.nodes[0]]) == a.gpu_type
            assert victim.team is not None and tiers[victim.tier].preemptible
            if victim.team == job.team:
                assert tiers[victim.tier].value < tiers[job.tier].value
                continue
            # R7 per type: its team was above nominal in a resource the preemptor needs.
            g, vg = job.replicas[0], victim.replicas[0]
            need = {f"gpu:{a.gpu_type}": g.count * g.gpu, "cpu": g.count * g.cpu}
            gone = {f"gpu:{a.gpu_type}": 0, "cpu": 0}
            for other in victims:
                if other.team == victim.team:
                    og = other.replicas[0]
                    gone[f"gpu:{a.gpu_type}"] += og.count * og.gpu
                    gone["cpu"] += og.count * og.cpu
            assert vg.gpu or vg.cpu
            assert any(
                need[key] > 0 and (victim.team, key) in quota and (job.team, key) in quota
                and after.get((victim.team, key), 0) + gone[key] > quota[(victim.team, key)][0]
                for key in need)


@PROFILE
@given(typed_snapshots())
def test_a_job_that_reclaims_leaves_its_team_within_nominal_of_its_type(snapshot):
    """R6 per type: once a job that took another team's jobs is admitted, its
    team is within its nominal of the type it got (and of CPU when named),
    counted at its turn in the plan: a later admission of its team may borrow."""
    result = plan(snapshot, with_eta=False)
    of_node = _types(snapshot)
    running = {j.id: j for j in snapshot.running}
    pending = {p.id: p for p in snapshot.pending}
    quota = _typed_teams(snapshot)
    used, _ = _usage(snapshot, _held(snapshot, type(result)()))

    def add(job, gpu_type, sign):
        g = job.replicas[0]
        for key, v in ((f"gpu:{gpu_type}", g.count * g.gpu), ("cpu", g.count * g.cpu)):
            if v and job.team is not None:
                used[(job.team, key)] = used.get((job.team, key), 0) + sign * v

    for a in result.admit:
        job = pending[a.id]
        for v in a.victims:
            victim = running[v]
            add(victim, victim.gpu_type or of_node[victim.nodes[0]], -1)
        add(job, a.gpu_type, 1)
        if all(running[v].team == job.team for v in a.victims):
            continue
        g = job.replicas[0]
        for key, need in ((f"gpu:{a.gpu_type}", g.gpu), ("cpu", g.cpu)):
            if need and (job.team, key) in quota:
                assert used.get((job.team, key), 0) <= quota[(job.team, key)][0], (a, key)


@PROFILE
@given(typed_snapshots())
def test_every_typed_job_gets_one_outcome_and_the_plan_is_deterministic(snapshot):
    first = plan(snapshot)
    ids = [a.id for a in first.admit] + [w.id for w in first.wait] + [r.id for r in first.reject]
    assert sorted(ids) == sorted(p.id for p in snapshot.pending)
    assert all(w.eta is None or w.eta > snapshot.now for w in first.wait)
    assert plan(snapshot) == first
    lean = plan(snapshot, with_eta=False, with_waits=False)
    assert (lean.admit, lean.reject) == (first.admit, first.reject)
    # A reservation is room of the job's type (none for a job without GPUs).
    of_node = _types(snapshot)
    pending = {p.id: p for p in snapshot.pending}
    for r in first.reservations:
        if pending[r.id].replicas[0].gpu:
            assert {of_node[name] for name, _ in r.placement} == {r.gpu_type}
        else:
            assert r.gpu_type is None


FIGURES = ("nominal", "used", "within", "borrowed", "lent", "idle", "waiting")


@PROFILE
@given(typed_snapshots())
def test_each_teams_figures_per_type_add_up_to_its_total_and_lend_only_within_the_type(snapshot):
    """Every team carries one figure set per type, in the cluster's order, whose sums are its
    totals; within each type, used is what jobs of that type hold, nobody lends beyond that
    type's unused nominal and lending limit, and what lenders lend of a type is what borrowers
    take of that type."""
    result = plan(snapshot, with_eta=False)
    used, _ = _usage(snapshot, _held(snapshot, result))
    quota = _typed_teams(snapshot)
    names = tuple(dict.fromkeys(n.gpu_type for n in snapshot.nodes))
    for total in result.teams:
        assert tuple(name for name, _ in total.by_type) == names
        for field in FIGURES:
            assert getattr(total, field) == sum(getattr(f, field) for _, f in total.by_type), field
        loans = {}
        for _, f in total.by_type:
            for lender, gpus in f.borrowed_from:
                loans[lender] = loans.get(lender, 0) + gpus
        assert dict(total.borrowed_from) == loans
    for k, name in enumerate(names):
        of_type = {t.team: t.by_type[k][1] for t in result.teams}
        taken: dict[str, int] = {}
        for team, f in of_type.items():
            assert f.used == used.get((team, f"gpu:{name}"), 0)
            assert f.within + f.borrowed == f.used and f.by_type == ()
            nominal, _, lending = quota.get((team, f"gpu:{name}"), (0, None, None))
            assert f.nominal == nominal
            assert f.lent <= min(nominal if lending is None else lending, max(0, nominal - f.used))
            for lender, gpus in f.borrowed_from:
                taken[lender] = taken.get(lender, 0) + gpus
        assert {team: f.lent for team, f in of_type.items() if f.lent} == taken


@PROFILE
@given(typed_snapshots(), st.randoms(use_true_random=False))
def test_nodes_that_take_no_pods_get_nothing_of_any_type_and_reject_nothing(snapshot, rng):
    snapshot = cordon_some(rng, snapshot)
    check_unschedulable_nodes(snapshot, plan(snapshot))
