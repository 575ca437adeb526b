"""Invariants of the policy over random clusters and queues (hypothesis).

Each check recomputes what it needs from the snapshot and the plan with plain
sums, not with the policy's own bookkeeping. Jobs have one replica group so
that "does it fit" has an exact answer (enough replica slots on the nodes).
"""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.policy.random_snapshots import check_unschedulable_nodes, cordon_some, place_randomly, random_owner
from scheduling.policy import (
    Node, PendingJob, ReplicaGroup, RunningJob, Settings, Snapshot, Team, Tier, plan,
)

RES = ("gpu", "cpu")
TIERS = (Tier("production", 1000, False), Tier("standard", 100), Tier("experiment", 10))
PROFILE = settings(
    max_examples=int(os.environ.get("POLICY_EXAMPLES", "150")), deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def snapshots(draw):
    return small_snapshot(random.Random(draw(st.integers(0, 2**32))))


def small_snapshot(rng: random.Random) -> Snapshot:
    """Returns a random snapshot of a few nodes, teams and jobs, drawn from `rng`."""
    nodes = tuple(Node(f"n{i}", rng.choice((4, 8)), rng.choice((8000, 16000)))
                  for i in range(rng.randint(1, 4)))
    teams = []
    for k in range(rng.randint(1, 3)):
        nominal = {"gpu": rng.randint(0, 8)}
        if rng.random() < 0.3:
            nominal["cpu"] = rng.choice((4000, 8000))
        teams.append(Team(
            f"t{k}", nominal,
            {"gpu": rng.randint(0, 6)} if rng.random() < 0.4 else {},
            {"gpu": rng.randint(0, nominal["gpu"])} if rng.random() < 0.3 else {},
            rng.choice((1.0, 2.0)),
        ))
    free = {n.name: [n.gpu, n.cpu] for n in nodes}
    now = 5000
    running = []
    for k in range(rng.randint(0, 8)):
        count, gpu, cpu = rng.randint(1, 2), rng.randint(0, 4), rng.choice((0, 1000, 2000))
        placed = place_randomly(rng, free, count, gpu, cpu)
        if placed is None:
            continue
        team, tier = random_owner(rng, teams)
        started = rng.randint(0, now)
        running.append(RunningJob(f"r{k}", team, tier, started,
                                  (ReplicaGroup(count, gpu, cpu),), tuple(placed),
                                  rng.choice((None, 1000, 8000)), None,
                                  rng.choice((None, 3000)),
                                  rng.choice((None, None, started + rng.randint(0, now - started)))))
    pending = tuple(
        PendingJob(f"p{k}", rng.choice(teams).name, rng.choice([t.name for t in TIERS]),
                   rng.randint(0, now), (ReplicaGroup(rng.randint(1, 3), rng.randint(0, 8),
                                                      rng.choice((0, 1000, 4000))),),
                   rng.choice((None, 500, 4000)), rng.choice((None, 2000)))
        for k in range(rng.randint(1, 7))
    )
    return Snapshot(now, nodes, TIERS, tuple(teams), tuple(running), pending,
                    Settings(starvation_after=rng.choice((600, 1800, 100000)),
                             max_reservations=rng.choice((0, 1, 2)),
                             starvation_guard=rng.choice(("reserve", "reserve", "hold"))))


def _usage(job) -> tuple[int, int]:
    g = job.replicas[0]
    return (g.count * g.gpu, g.count * g.cpu)


def _team_usage(snapshot, jobs):
    """Returns (usage, non-preemptible usage) per team over `jobs`."""
    tiers = {t.name: t for t in snapshot.tiers}
    used = {t.name: [0, 0] for t in snapshot.teams}
    steady = {t.name: [0, 0] for t in snapshot.teams}
    for job in jobs:
        if job.team is None:
            continue
        for r, v in enumerate(_usage(job)):
            used[job.team][r] += v
            if not tiers[job.tier].preemptible:
                steady[job.team][r] += v
    return used, steady


def _after(snapshot, result):
    """Returns the jobs holding room once the plan is applied, with their nodes."""
    pending = {p.id: p for p in snapshot.pending}
    victims = {v for a in result.admit for v in a.victims}
    held = [(j, list(j.nodes)) for j in snapshot.running if j.id not in victims]
    for a in result.admit:
        held.append((pending[a.id], [name for name, n in a.placement for _ in range(n)]))
    return held


def _lent_ok(snapshot, used, r):
    """Returns whether borrowers together hold no more than lenders may lend."""
    name = RES[r]
    capacity = sum(getattr(n, name) for n in snapshot.nodes)
    named = [t for t in snapshot.teams if name in t.nominal]
    unassigned = max(0, capacity - sum(t.nominal[name] for t in named))
    borrowed = sum(max(0, used[t.name][r] - t.nominal[name]) for t in named)
    lendable = sum(
        min(t.lending_limit.get(name, t.nominal[name]), max(0, t.nominal[name] - used[t.name][r]))
        for t in named)
    return borrowed <= unassigned + lendable


@PROFILE
@given(snapshots())
def test_no_node_is_over_capacity(snapshot):
    result = plan(snapshot, with_eta=False)
    load = {n.name: [0, 0] for n in snapshot.nodes}
    for job, nodes in _after(snapshot, result):
        g = job.replicas[0]
        for name in nodes:
            load[name][0] += g.gpu
            load[name][1] += g.cpu
    for n in snapshot.nodes:
        assert load[n.name][0] <= n.gpu and load[n.name][1] <= n.cpu, (n, load)


@PROFILE
@given(snapshots())
def test_quota_limits_hold_where_usage_grew(snapshot):
    """No team above nominal + borrowing_limit, no non-preemptible work above
    nominal, no lender below what it is owed, wherever the plan added usage."""
    result = plan(snapshot, with_eta=False)
    before, steady_before = _team_usage(snapshot, snapshot.running)
    after, steady_after = _team_usage(snapshot, [job for job, _ in _after(snapshot, result)])
    for team in snapshot.teams:
        for r, name in enumerate(RES):
            if name not in team.nominal:
                continue
            if after[team.name][r] > before[team.name][r] and name in team.borrowing_limit:
                assert after[team.name][r] <= team.nominal[name] + team.borrowing_limit[name]
            if steady_after[team.name][r] > steady_before[team.name][r]:
                assert steady_after[team.name][r] <= team.nominal[name]
    for r in range(2):
        grew = any(after[t][r] > before[t][r] for t in after)
        if grew and _lent_ok(snapshot, before, r):
            assert _lent_ok(snapshot, after, r)


@PROFILE
@given(snapshots())
def test_victims_are_legal_and_never_shared(snapshot):
    result = plan(snapshot, with_eta=False)
    tiers = {t.name: t for t in snapshot.tiers}
    running = {j.id: j for j in snapshot.running}
    pending = {p.id: p for p in snapshot.pending}
    teams = {t.name: t for t in snapshot.teams}
    seen = set()
    _, _ = _team_usage(snapshot, snapshot.running)
    after, _ = _team_usage(snapshot, [job for job, _ in _after(snapshot, result)])
    all_victims = [running[v] for a in result.admit for v in a.victims]
    for a in result.admit:
        job = pending[a.id]
        for v in a.victims:
            assert v not in seen
            seen.add(v)
            victim = running[v]
            assert victim.team is not None and tiers[victim.tier].preemptible
            if victim.team == job.team:
                # R5: strictly lower tier, past the thrash guard.
                assert tiers[victim.tier].value < tiers[job.tier].value
                assert snapshot.now - victim.started >= snapshot.settings.min_runtime_before_preemption
            else:
                # R7: the victim's team was above nominal in a resource the preemptor needs.
                team = teams[victim.team]
                gone = [0, 0]
                for other in all_victims:
                    if other.team == victim.team:
                        gone = [x + y for x, y in zip(gone, _usage(other))]
                need = _usage(job)
                assert any(
                    need[r] > 0 and name in team.nominal and name in teams[job.team].nominal
                    and after[victim.team][r] + gone[r] > team.nominal[name]
                    for r, name in enumerate(RES))


class _World:
    """The state right before one admission: usage and free slots, plain sums."""

    def __init__(self, snapshot, holding):
        self.snapshot = snapshot
        self.tiers = {t.name: t for t in snapshot.tiers}
        self.teams = {t.name: t for t in snapshot.teams}
        self.holding = holding  # job -> node names

    def fits(self, job, without=()) -> bool:
        gone = {j.id for j in without}
        jobs = [(j, nodes) for j, nodes in self.holding if j.id not in gone]
        used, steady = _team_usage(self.snapshot, [j for j, _ in jobs])
        team = self.teams[job.team]
        need = _usage(job)
        preemptible = self.tiers[job.tier].preemptible
        for r, name in enumerate(RES):
            if name not in team.nominal or need[r] == 0:
                continue
            if not preemptible and steady[job.team][r] + need[r] > team.nominal[name]:
                return False
            if name in team.borrowing_limit and (
                    used[job.team][r] + need[r] > team.nominal[name] + team.borrowing_limit[name]):
                return False
            capacity = sum(getattr(n, name) for n in self.snapshot.nodes)
            named = [t for t in self.snapshot.teams if name in t.nominal]
            pool = max(0, capacity - sum(t.nominal[name] for t in named)) + sum(
                min(t.lending_limit.get(name, t.nominal[name]), t.nominal[name]) for t in named)

            def drawn():
                return sum(max(0, used[t.name][r] - (t.nominal[name] - min(
                    t.lending_limit.get(name, t.nominal[name]), t.nominal[name]))) for t in named)

            before = drawn()
            used[job.team][r] += need[r]
            after = drawn()
            used[job.team][r] -= need[r]
            # Borrowing draws on the pool: it may not overdraw it any further.
            if after > before and after > pool:
                return False
        load = {n.name: [0, 0] for n in self.snapshot.nodes}
        for j, nodes in jobs:
            g = j.replicas[0]
            for name in nodes:
                if name in load:
                    load[name][0] += g.gpu
                    load[name][1] += g.cpu
        g = job.replicas[0]
        slots = 0
        for n in self.snapshot.nodes:
            free = (n.gpu - load[n.name][0], n.cpu - load[n.name][1])
            caps = [free[0] // g.gpu if g.gpu else 99, free[1] // g.cpu if g.cpu else 99]
            slots += max(0, min(caps))
        return slots >= g.count

    def reclaim_allowed(self, job, victims) -> bool:
        """R6 for the preemptor's side: within nominal once admitted, own victims gone."""
        own = [v for v in victims if v.team == job.team]
        gone = {v.id for v in own}
        used, _ = _team_usage(self.snapshot, [j for j, _ in self.holding if j.id not in gone])
        team = self.teams[job.team]
        need = _usage(job)
        return all(used[job.team][r] + need[r] <= team.nominal[name]
                   for r, name in enumerate(RES) if need[r] and name in team.nominal)


@PROFILE
@given(snapshots())
def test_the_first_victim_set_makes_room_and_is_minimal(snapshot):
    """A job with victims fits once they are gone; putting any one victim back
    makes it not fit, or leaves another team's victim no longer reclaimable.

    The reference world here knows no reservations (R4): room a starving job
    reserves is not free for a job that may still run at its start, so while
    the plan holds reservations, a victim can be needed although the plain sums
    show room elsewhere (test_policy_reservations has such a case). Then only
    "fits once they are gone" is checked here.
    """
    result = plan(snapshot, with_eta=False)
    judge_minimal = not result.reservations
    pending = {p.id: p for p in snapshot.pending}
    running = {j.id: j for j in snapshot.running}
    holding = [(j, list(j.nodes)) for j in snapshot.running]
    for a in result.admit:
        job = pending[a.id]
        if not a.victims:
            holding.append((job, [name for name, n in a.placement for _ in range(n)]))
            continue
        world = _World(snapshot, holding)
        victims = [running[v] for v in a.victims]
        assert world.fits(job, victims), (a, snapshot)
        if any(v.team != job.team for v in victims):
            assert world.reclaim_allowed(job, victims)
        for v in victims if judge_minimal else ():
            rest = [x for x in victims if x is not v]
            still_reclaim = not any(x.team != job.team for x in rest) or world.reclaim_allowed(job, rest)
            assert not (world.fits(job, rest) and still_reclaim), (a, v.id)
        break


@PROFILE
@given(snapshots(), st.randoms(use_true_random=False))
def test_the_plan_is_deterministic(snapshot, rng):
    first = plan(snapshot)
    shuffled = list(snapshot.pending)
    rng.shuffle(shuffled)
    again = plan(Snapshot(snapshot.now, snapshot.nodes, snapshot.tiers, snapshot.teams,
                          snapshot.running, tuple(shuffled), snapshot.settings))
    assert first == again
    # Taking back its own reservations, the next identical cycle keeps them.
    carried = plan(Snapshot(snapshot.now, snapshot.nodes, snapshot.tiers, snapshot.teams,
                            snapshot.running, snapshot.pending, snapshot.settings,
                            first.reservations))
    assert carried == first


@PROFILE
@given(snapshots())
def test_every_pending_job_gets_exactly_one_outcome(snapshot):
    result = plan(snapshot)
    ids = [a.id for a in result.admit] + [w.id for w in result.wait] + [r.id for r in result.reject]
    assert sorted(ids) == sorted(p.id for p in snapshot.pending)
    assert [w.position for w in result.wait] == list(range(1, len(result.wait) + 1))
    for w in result.wait:
        assert w.eta is None or w.eta > snapshot.now
    pending = {p.id: p for p in snapshot.pending}
    for a in result.admit:
        # One node per replica, agreeing with the per-node counts.
        assert len(a.nodes) == sum(g.count for g in pending[a.id].replicas)
        assert sorted(a.nodes) == sorted(name for name, n in a.placement for _ in range(n))


@PROFILE
@given(snapshots())
def test_leaving_out_the_waiting_jobs_changes_no_decision(snapshot):
    full = plan(snapshot)
    lean = plan(snapshot, with_eta=False, with_waits=False)
    assert lean.wait == ()
    assert (lean.admit, lean.reject) == (full.admit, full.reject)


@PROFILE
@given(snapshots())
def test_team_figures_add_up_and_lend_only_what_lending_limits_allow(snapshot):
    """Used is what the plan leaves running plus what it admits; nobody lends
    beyond its unused nominal and lending_limit; what lenders lend is what
    borrowers take from them."""
    result = plan(snapshot, with_eta=False)
    used, _ = _team_usage(snapshot, [job for job, _ in _after(snapshot, result)])
    figures = {f.team: f for f in result.teams}
    assert list(figures) == [t.name for t in snapshot.teams]
    taken: dict[str, int] = {}
    for team in snapshot.teams:
        f = figures[team.name]
        nominal = team.nominal.get("gpu", 0)
        assert (f.used, f.nominal) == (used[team.name][0], nominal)
        assert (f.within + f.borrowed, f.within + f.lent + f.idle) == (f.used, max(nominal, f.within))
        assert f.lent <= min(team.lending_limit.get("gpu", nominal), max(0, nominal - f.used))
        for lender, gpus in f.borrowed_from:
            taken[lender] = taken.get(lender, 0) + gpus
        assert sum(gpus for _, gpus in f.borrowed_from) <= f.borrowed
    assert {name: f.lent for name, f in figures.items() if f.lent} == taken


@PROFILE
@given(snapshots(), st.randoms(use_true_random=False))
def test_nodes_that_take_no_pods_get_nothing_and_reject_nothing(snapshot, rng):
    snapshot = cordon_some(rng, snapshot)
    check_unschedulable_nodes(snapshot, plan(snapshot))
