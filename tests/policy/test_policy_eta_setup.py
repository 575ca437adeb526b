"""The setup of the replay of estimates against the straightforward code
it replaces (hypothesis): merging the victims that wait again into a queue
already in R3 order must give the order a stable sort of the whole queue
gives.
"""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.policy import PendingJob, ReplicaGroup, Tier
from scheduling.policy.eta import merged
from scheduling.policy.order import r3_key

TIERS = {t.name: t for t in (Tier("production", 1000, False), Tier("standard", 100),
                             Tier("experiment", 10))}
PROFILE = settings(
    max_examples=int(os.environ.get("POLICY_EXAMPLES", "150")) * 4, deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow],
)


def _job(rng: random.Random, name: str) -> PendingJob:
    """Returns a job of a random tier queued at one of a few times, so many
    jobs share a tier and a queue time and R3 orders them by id."""
    return PendingJob(name, "t", rng.choice(list(TIERS)), rng.choice((0, 10, 20)),
                      (ReplicaGroup(1, 1),))


@PROFILE
@given(st.integers(0, 2**32))
def test_victims_merged_into_the_queue_take_the_places_a_sort_gives_them(seed):
    rng = random.Random(seed)
    ids = [str(k) for k in range(rng.randint(0, 30))] + ["a", "b", "10a"]
    rng.shuffle(ids)
    waiting = sorted((_job(rng, name) for name in ids[:rng.randint(0, len(ids))]),
                     key=lambda job: r3_key(job, TIERS))
    requeued = [_job(rng, name) for name in ids[len(waiting):]]
    # A victim may share its id with a waiting job: the sort keeps the
    # waiting job first when their keys tie, and so must the merge.
    requeued += [_job(rng, job.id) for job in waiting if rng.random() < 0.2]
    rng.shuffle(requeued)
    expected = sorted(waiting + requeued, key=lambda job: r3_key(job, TIERS))
    assert [id(job) for job in merged(waiting, requeued, TIERS)] == [id(job) for job in expected]
