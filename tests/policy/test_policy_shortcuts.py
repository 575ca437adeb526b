"""The cycle's shortcuts against the plain path, on random busy snapshots
with reservations (hypothesis).

- Victim searches remembered as hopeless (hopeless.py): the plan equals the
  plan of a cycle that forgets every answer and runs every search, also
  where teams borrowing beyond their nominal grow during the cycle.
- The replay (eta.py): the estimates equal the straightforward replay's on
  queues long enough for teams to hold many lines.
- The victim search (preemption.py), which walks a heap of each team's next
  candidate and counts candidates as gone without changing the state: its
  victims equal, in order, those of the walk as R8 writes it, run with
  plain sums (every candidate's eligibility worked out again at each step,
  R2 and room from the jobs still running).
"""

from __future__ import annotations

import random
from unittest.mock import patch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.policy.random_snapshots import place_randomly
from tests.policy.test_policy_properties import RES, _team_usage, _usage, _World
from tests.policy.test_policy_properties import snapshots as small_snapshots
from tests.policy.test_policy_eta import PROFILE, TIERS, reference_starts
from scheduling.policy import (
    Node, PendingJob, ReplicaGroup, RunningJob, Settings, Snapshot, Team, plan,
)
from scheduling.policy import cycle
from scheduling.policy.hopeless import Hopeless
from scheduling.policy.preemption import find_victims
from scheduling.policy.state import State

SHAPES = ((1, 1, 1000), (1, 2, 2000), (1, 4, 0), (2, 4, 1000), (1, 8, 0), (2, 8, 0), (3, 2, 0))


@st.composite
def snapshots(draw):
    """A full cluster shared by several teams, some borrowing, and a long
    queue of a few gang shapes, most of it starving: searches that find no
    victims repeat, preemptions and reservations happen."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    nodes = tuple(Node(f"n{i}", 8, rng.choice((16000, 32000))) for i in range(rng.randint(2, 6)))
    capacity = sum(n.gpu for n in nodes)
    cpu_capacity = sum(n.cpu for n in nodes)
    # Some teams' quota names CPU too: a gang asking for none counts fewer
    # reclaim candidates than one asking for some.
    teams = tuple(
        Team(f"t{k}", {"gpu": rng.randint(0, capacity // 2)}
             | ({"cpu": rng.randint(0, cpu_capacity // 2)} if rng.random() < 0.3 else {}),
             {"gpu": rng.randint(0, 8)} if rng.random() < 0.3 else {},
             {"gpu": rng.randint(0, 4)} if rng.random() < 0.2 else {})
        for k in range(rng.randint(2, 6)))
    free = {n.name: [n.gpu, n.cpu] for n in nodes}
    now = 10_000
    running = []
    for k in range(rng.randint(4, 30)):
        count, gpu, cpu = rng.choice(SHAPES[:4])
        placed = place_randomly(rng, free, count, gpu, cpu)
        if placed is None:
            continue
        team, tier = rng.choice(teams).name, rng.choice([t.name for t in TIERS])
        if rng.random() < 0.05:
            team, tier = None, None
        started = rng.randint(0, now)
        running.append(RunningJob(
            f"r{k:02d}", team, tier, started, (ReplicaGroup(count, gpu, cpu),), tuple(placed),
            rng.choice((None, now - started + rng.randint(1, 9000))),
            estimate=rng.choice((None, rng.randint(1, 20_000))),
            checkpointed=rng.choice((None, None, started + rng.randint(0, now - started)))))
    shapes = rng.sample(SHAPES, rng.randint(2, 4))
    pending = []
    for k in range(rng.randint(5, 40)):
        count, gpu, cpu = rng.choice(shapes)
        groups = (ReplicaGroup(count, gpu, cpu),)
        if rng.random() < 0.1:
            groups += (ReplicaGroup(1, 0, 1000),)
        pending.append(PendingJob(
            f"p{k:02d}", rng.choice(teams).name, rng.choice([t.name for t in TIERS]),
            rng.randint(0, now), groups, rng.choice((None, 300, 2000, 6000)),
            rng.choice((None, 1000))))
    return Snapshot(now, nodes, TIERS, teams, tuple(running), tuple(pending),
                    Settings(starvation_after=rng.choice((600, 1800, 5000)),
                             min_runtime_before_preemption=rng.choice((0, 600)),
                             max_reservations=rng.choice((0, 1, 1, 2))))


@st.composite
def borrowed_clusters(draw):
    """A cluster filled by small jobs of teams borrowing a little beyond
    their nominal, spread over the nodes, and a queue where whole-node gangs
    of teams within their nominal (reclaim, R6) alternate with small jobs of
    the borrowers: a borrower's admission lets reclaim reach further into its
    jobs, so a gang's search may find victims that an earlier one of the
    same shape did not."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    nodes = tuple(Node(f"n{i}", 8) for i in range(rng.randint(3, 6)))
    capacity = sum(n.gpu for n in nodes)
    borrowers = rng.randint(1, 2)
    count = rng.randint(borrowers + 1, 4)
    free = {n.name: [n.gpu, 0] for n in nodes}
    now = 10_000
    running = []
    used = [0] * borrowers
    for k in range(capacity):
        gpu = rng.choice((1, 2, 4, 4))
        placed = place_randomly(rng, free, 1, gpu, 0)
        if placed is None or rng.random() < 0.2:
            continue
        team = rng.randrange(borrowers)
        used[team] += gpu
        running.append(RunningJob(
            f"r{k:02d}", f"t{team}", rng.choice(("standard", "standard", "experiment")),
            rng.randint(0, now), (ReplicaGroup(1, gpu),), tuple(placed)))
    nominal = [max(0, u - rng.randint(1, 12)) for u in used]
    rest = max(0, capacity - sum(nominal))
    nominal += [rest // (count - borrowers)] * (count - borrowers)
    teams = tuple(Team(f"t{k}", {"gpu": nominal[k]}) for k in range(count))
    pending = []
    for k in range(rng.randint(4, 16)):
        if rng.random() < 0.5:
            team, groups = f"t{rng.randrange(borrowers, count)}", (ReplicaGroup(rng.choice((1, 1, 2)), 8),)
        else:
            team, groups = f"t{rng.randrange(borrowers)}", (ReplicaGroup(1, rng.choice((1, 2, 4))),)
        pending.append(PendingJob(f"p{k:02d}", team, rng.choice(("standard", "standard", "experiment")),
                                  now - rng.randint(0, 1000), groups))
    return Snapshot(now, nodes, TIERS, teams, tuple(running), tuple(pending),
                    Settings(min_runtime_before_preemption=rng.choice((0, 600))))


class Forgetful(Hopeless):
    """A memo that never answers: every search runs."""

    def known(self, key, lasting_key, team) -> bool:
        return False


def _plans_as_every_search_does(snapshot, **options) -> bool:
    """Returns whether `plan` with its memo of hopeless searches gives the
    plan of a cycle that runs every search."""
    remembered = plan(snapshot, **options)
    with patch.object(cycle, "Hopeless", Forgetful):
        searched = plan(snapshot, **options)
    return remembered == searched


@pytest.mark.interpreted_policy
@PROFILE
@given(snapshots())
def test_remembering_hopeless_searches_changes_no_decision(snapshot):
    assert _plans_as_every_search_does(snapshot)


@pytest.mark.interpreted_policy
@PROFILE
@given(borrowed_clusters())
def test_remembering_hopeless_searches_changes_no_decision_as_borrowers_grow(snapshot):
    assert _plans_as_every_search_does(snapshot, with_eta=False)


@PROFILE
@given(snapshots())
def test_estimates_match_the_straightforward_replay_on_long_queues(snapshot):
    result = plan(snapshot)
    assert {w.id: w.eta for w in result.wait} == reference_starts(snapshot)


def plain_victims(snapshot: Snapshot, job: PendingJob) -> list[str] | None:
    """Returns the victims of `job` (ids, in the order taken) as R5-R8 write
    the search, or None: take the first eligible job of the ordered list
    (other teams' jobs reclaim may take, then the own team's lower tiers),
    work out eligibility again, until the job fits; then put back, newest
    first, every victim without which it still fits and every victim left
    is still eligible. Plain sums only; jobs of one replica group."""
    world = _World(snapshot, [(j, list(j.nodes)) for j in snapshot.running])
    tiers, teams = world.tiers, world.teams
    mine, tier, need = job.team, tiers[job.tier], _usage(job)
    relevant = [r for r, name in enumerate(RES) if need[r] and name in teams[mine].nominal]
    since = snapshot.now - snapshot.settings.min_runtime_before_preemption

    def used(gone: set[str]) -> dict[str, list[int]]:
        return _team_usage(snapshot, [j for j in snapshot.running if j.id not in gone])[0]

    def above(team: str, usage: dict[str, list[int]]) -> bool:
        nominal = teams[team].nominal
        return any(RES[r] in nominal and usage[team][r] > nominal[RES[r]] for r in relevant)

    def may_reclaim(usage: dict[str, list[int]]) -> bool:
        nominal = teams[mine].nominal
        return bool(relevant) and all(usage[mine][r] + need[r] <= nominal[RES[r]] for r in relevant)

    def key(j: RunningJob) -> tuple:
        saved = j.started if j.checkpointed is None else j.checkpointed
        return (tiers[j.tier].value, -saved, j.id)

    def reclaimable(j: RunningJob, usage: dict[str, list[int]]) -> bool:
        return (j.team not in (None, mine) and j.team in teams and tiers[j.tier].preemptible
                and above(j.team, usage))

    def own(j: RunningJob) -> bool:
        victim = tiers[j.tier] if j.tier else None
        return (j.team == mine and victim is not None and victim.preemptible
                and victim.value < tier.value and j.started <= since)

    taken: list[RunningJob] = []
    while not taken or not world.fits(job, taken):
        gone = {v.id for v in taken}
        usage = used(gone)
        left = [j for j in snapshot.running if j.id not in gone]
        group = [j for j in left if reclaimable(j, usage)] if may_reclaim(usage) else []
        group = group or [j for j in left if own(j)]
        if not group:
            return None
        taken.append(min(group, key=key))

    def eligible(rest: list[RunningJob]) -> bool:
        others = [v for v in rest if v.team != mine]
        if not others:
            return True
        if not may_reclaim(used({v.id for v in rest})):
            return False
        # Each other team's victim was eligible at its turn: its team's
        # victims taken before it were gone, it and the later ones not.
        for k, v in enumerate(rest):
            if v.team != mine and not above(v.team, used({x.id for x in rest[:k]
                                                           if x.team == v.team})):
                return False
        return True

    victims = list(taken)
    for h in reversed(taken):
        rest = [v for v in victims if v is not h]
        if world.fits(job, rest) and eligible(rest):
            victims = rest
    return [v.id for v in victims]


def _victims_as_r8_writes_them(snapshot: Snapshot) -> None:
    """Checks each queued job of one replica group that does not fit now,
    each on the snapshot's state alone."""
    world = _World(snapshot, [(j, list(j.nodes)) for j in snapshot.running])
    tiers = {t.name: t for t in snapshot.tiers}
    for job in snapshot.pending:
        if len(job.replicas) != 1 or world.fits(job):
            continue
        state = State(snapshot)
        found = find_victims(state, job.team, tiers[job.tier], job.demand, snapshot.settings,
                             snapshot.now)
        searched = None if found is None else [v.id for v in found.victims]
        assert searched == plain_victims(snapshot, job), job.id


@PROFILE
@given(borrowed_clusters())
def test_the_victim_search_takes_the_victims_r8_writes_on_borrowed_clusters(snapshot):
    _victims_as_r8_writes_them(snapshot)


@PROFILE
@given(small_snapshots())
def test_the_victim_search_takes_the_victims_r8_writes_on_small_clusters(snapshot):
    _victims_as_r8_writes_them(snapshot)
