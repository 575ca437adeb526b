"""R9's admission order kept in a heap against the order worked out by
looking at every team at every step (hypothesis).

`admission_order` without GPU types keeps each team's rank (weighted
dominant share, head) until the team's usage changes or its head is
admitted; with a `quota_of` it looks at every team's head at every step.
Given one quota for every job, the two must yield the same jobs in the same
order while the caller admits some jobs, preempts others' usage and holds
teams between steps, as a cycle does.
"""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.policy import PendingJob, ReplicaGroup, Team, Tier
from scheduling.policy.order import admission_order, r3_sorted
from scheduling.policy.quota import Quota

TIERS = {t.name: t for t in (Tier("production", 1000, False), Tier("standard", 100),
                             Tier("experiment", 10))}
PROFILE = settings(
    max_examples=int(os.environ.get("POLICY_EXAMPLES", "150")) * 4, deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def walk(seed: int, teams: tuple[Team, ...], jobs: list[PendingJob], per_team_quota: bool):
    """Returns the order `admission_order` yields, acting between steps by
    `seed`: admit the job (charge its usage), hold its team or another, or
    take usage off a random team (a victim)."""
    rng = random.Random(seed)
    quota = Quota(teams, (64, 512_000, 0))
    for team in teams:
        quota.charge(team.name, (rng.randint(0, 24), rng.randint(0, 64_000), 0), False)
    held: set[str] = set()
    quota_of = (lambda job: quota) if per_team_quota else None
    order = []
    for job in admission_order(jobs, TIERS, quota, lambda team: team in held, quota_of):
        order.append(job.id)
        act = rng.random()
        if act < 0.5:
            quota.charge(job.team, job.demand.total, not TIERS[job.tier].preemptible)
        elif act < 0.65:
            held.add(job.team if rng.random() < 0.3 else rng.choice(teams).name)
        elif act < 0.8:
            victim = rng.choice(teams).name
            used = quota.usage[victim][0]
            quota.credit(victim, (min(used, rng.randint(1, 4)), 0, 0), False)
    return order


@PROFILE
@given(st.integers(0, 2**32))
def test_the_kept_ranks_give_the_order_of_looking_at_every_team(seed):
    rng = random.Random(seed)
    teams = tuple(
        Team(f"t{k}", {"gpu": rng.randint(0, 16), **({"cpu": 64_000} if rng.random() < 0.3 else {})},
             {"gpu": rng.randint(0, 8)} if rng.random() < 0.3 else {},
             {"gpu": rng.randint(0, 8)} if rng.random() < 0.3 else {},
             rng.choice((1.0, 1.0, 2.0)))
        for k in range(rng.randint(1, 6)))
    jobs = r3_sorted([
        PendingJob(f"j{k:03d}", rng.choice(teams).name, rng.choice(tuple(TIERS)),
                   rng.randint(0, 50), (ReplicaGroup(rng.randint(1, 2), rng.randint(0, 6),
                                                     rng.choice((0, 8000))),))
        for k in range(rng.randint(0, 40))], TIERS)
    assert walk(seed, teams, jobs, False) == walk(seed, teams, jobs, True)
