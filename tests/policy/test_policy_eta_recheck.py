"""The estimate replay's shortcut after a start in a settled cycle, against
what it stands for: the draw limits of R2's test of what is available
(hypothesis, against asking R2), and the ranges of heads passed over that
are asked again only once the pool's draw passes those limits (against the
straightforward replay of tests/policy/test_policy_eta.py)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.policy_bench import build
from tests.policy.test_policy_eta import reference_starts
from tests.policy.test_policy_placement import PROFILE
from scheduling.policy import Team, plan
from scheduling.policy.lines import Lines, Passed
from scheduling.policy.quota import Quota

NAMES = ("gpu", "cpu", "memory")


def _team(rng: random.Random, k: int) -> Team:
    """A team without borrowing limits: R2 refuses a preemptible job of it
    only for want of what is available."""
    named = [name for name in NAMES if rng.random() < 0.7] or ["gpu"]
    return Team(f"t{k}", {name: rng.randint(0, 16) for name in named}, {},
                {name: rng.randint(0, 8) for name in named if rng.random() < 0.4})


@PROFILE
@given(st.integers(0, 2**32))
def test_r2_admits_a_need_exactly_while_the_pool_is_drawn_within_its_limits(seed):
    rng = random.Random(seed)
    teams = tuple(_team(rng, k) for k in range(rng.randint(1, 4)))
    quota = Quota(teams, (rng.randint(0, 80), rng.randint(0, 80), rng.randint(0, 80)))
    for _ in range(rng.randint(0, 8)):
        quota.charge(rng.choice(teams).name,
                     (rng.randint(0, 12), rng.randint(0, 12), rng.randint(0, 12)), False)
    team = rng.choice(teams).name
    need = (rng.randint(0, 12), rng.randint(0, 12), rng.randint(0, 12))
    limits = quota.draw_limits(team, need)
    for _ in range(20):
        quota.above = [rng.randint(-10, 100) for _ in range(3)]
        admitted = all(quota.above[r] <= most for r, most in limits)
        assert (quota.refuse(team, need, False) is None) == admitted
        smaller = tuple(rng.randint(0, q) for q in need)
        if admitted:
            assert quota.refuse(team, smaller, False) is None


@pytest.mark.interpreted_policy
def test_ranges_passed_over_are_asked_again_only_past_their_draw_limits(monkeypatch):
    """On the policy benchmark's busy cluster (1,000 jobs queued up to two
    hours ago, most starving, seed 11), most starts after which teams wait
    with heads passed over leave those heads alone, their draw limits not
    passed, and some pass them and send a team back to a head R2 now
    refuses; every estimate is still the straightforward replay's."""
    asked, waiting = [], []
    due = Passed.due

    def counted_due(self, above):
        teams = due(self, above)
        asked.append(len(teams))
        waiting.append(len(self.ranges))
        return teams

    monkeypatch.setattr(Passed, "due", counted_due)
    sent_back = []
    recheck = Lines._recheck

    def counted_recheck(self, key, passed, cursor, expect, later, *rest):
        before = len(later)
        recheck(self, key, passed, cursor, expect, later, *rest)
        sent_back.append(len(later) - before)

    monkeypatch.setattr(Lines, "_recheck", counted_recheck)
    snapshot = build(1000, 11, queue_age=7200)
    estimates = {w.id: w.eta for w in plan(snapshot).wait}
    assert sum(waiting) > 2 * sum(asked) > 0
    assert sum(sent_back) > 0
    assert estimates == reference_starts(snapshot)
