"""R2's answers with some usage counted as gone, worked out apart without
changing the quota, against crediting that usage and asking (hypothesis):
all at once (a victim search's upper bound), and counted as gone and back
one job at a time (a victim search's walk), both through `Without`."""

from __future__ import annotations

import copy
import random

from hypothesis import given
from hypothesis import strategies as st

from tests.policy.test_policy_placement import PROFILE
from scheduling.policy import Team
from scheduling.policy.quota import Quota, Without

NAMES = ("gpu", "cpu", "memory")


def _team(rng: random.Random, k: int) -> Team:
    named = [name for name in NAMES if rng.random() < 0.7] or ["gpu"]
    return Team(
        f"t{k}",
        {name: rng.randint(0, 16) for name in named},
        {name: rng.randint(0, 8) for name in named if rng.random() < 0.4},
        {name: rng.randint(0, 8) for name in named if rng.random() < 0.4},
    )


def _state(quota: Quota) -> tuple:
    return (quota.usage, quota.steady, quota.above, quota.over, quota.pool)


@PROFILE
@given(st.integers(0, 2**32))
def test_refusing_with_usage_gone_answers_as_crediting_it_first(seed):
    rng = random.Random(seed)
    teams = tuple(_team(rng, k) for k in range(rng.randint(1, 5)))
    quota = Quota(teams, (rng.randint(0, 80), rng.randint(0, 80), rng.randint(0, 80)))
    used: dict[str, list[int]] = {}  # preemptible usage per team
    for team in teams:
        for steady in (False, True):
            v = (rng.randint(0, 24), rng.randint(0, 24), rng.randint(0, 24))
            quota.charge(team.name, v, steady)
            if not steady:
                used[team.name] = list(v)
    asking = rng.choice(teams).name
    gone = []  # preemptible usage: what a search's upper bound counts
    for team in rng.sample([t.name for t in teams], rng.randint(0, len(teams))):
        gone.append((team, tuple(rng.randint(0, x) for x in used[team])))
    need = (rng.randint(0, 12), rng.randint(0, 12), rng.randint(0, 12))
    steady = rng.random() < 0.3
    before = copy.deepcopy(_state(quota))

    without = Without(quota)
    for team, v in gone:
        without.count(team, v, 1)
    answer = without.refuse(asking, need, steady)
    assert _state(quota) == before

    for team, v in gone:
        quota.credit(team, v, False)
    assert answer == quota.refuse(asking, need, steady)


@PROFILE
@given(st.integers(0, 2**32))
def test_counting_usage_as_gone_and_back_answers_as_crediting_it(seed):
    rng = random.Random(seed)
    teams = tuple(_team(rng, k) for k in range(rng.randint(1, 5)))
    capacity = (rng.randint(0, 80), rng.randint(0, 80), rng.randint(0, 80))
    quota, credited = Quota(teams, capacity), Quota(teams, capacity)
    jobs = []  # (team, preemptible usage) of running jobs
    for team in teams:
        for _ in range(rng.randint(0, 4)):
            v = (rng.randint(0, 12), rng.randint(0, 12), rng.randint(0, 12))
            steady = rng.random() < 0.2
            quota.charge(team.name, v, steady)
            credited.charge(team.name, v, steady)
            if not steady:
                jobs.append((team.name, v))
    before = copy.deepcopy(_state(quota))
    without = Without(quota)
    gone = set()
    for _ in range(rng.randint(1, 12)):
        if not jobs:
            break
        k = rng.randrange(len(jobs))
        team, v = jobs[k]
        if k in gone:  # back again
            gone.discard(k)
            without.count(team, v, -1)
            credited.charge(team, v, False)
        else:
            gone.add(k)
            without.count(team, v, 1)
            credited.credit(team, v, False)
        asking = rng.choice(teams).name
        need = (rng.randint(0, 12), rng.randint(0, 12), rng.randint(0, 12))
        steady = rng.random() < 0.3
        assert without.refuse(asking, need, steady) == credited.refuse(asking, need, steady)
        for t in teams:
            assert list(without.used(t.name)) == credited.usage[t.name]
            for resources in ((0,), (1, 2), (0, 1, 2)):
                assert (without.above_nominal(t.name, resources)
                        == credited.above_nominal(t.name, resources))
    assert _state(quota) == before
