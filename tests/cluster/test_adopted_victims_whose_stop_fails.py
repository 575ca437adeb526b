"""An adopted victim whose suspend the API server fails (a 500: a webhook that cannot be called) stays preempting.

A server failure is no refusal: it neither starts nor continues the clock after which a victim the cluster
refuses to stop runs on. The victim is asked to stop again at every reconcile, however long the 500s last; once
the webhook answers and denies the suspend, ADMISSION_TIMEOUT is counted from that first denial.

Over real HTTP to the fake API server, through the adapter and the loop.
"""

from __future__ import annotations

from datetime import timedelta

from jobs.codes import Because
from jobs.models import Job
from scheduling.reconcile import reconcile
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)
from tests.cluster.test_adopted_victims_that_run_on import preempted_behind
from tests.cluster.test_refused_victims import (  # noqa: F401 (victim: a fixture)
    DENIED, VICTIM_PATCHES, _created, _suspended, victim,
)

FAILING = 'Internal error occurred: failed calling webhook "protect.example.com": connection refused'


def test_a_victim_whose_suspend_the_server_fails_stays_preempting_until_the_cluster_really_refuses(
        world, fake, cluster, victim):  # fmt: skip
    _, later = preempted_behind(world, fake, cluster, victim, 500, FAILING)

    for seconds in (300, 601, 1200):
        reconcile(cluster=cluster, now=later + timedelta(seconds=seconds))
    victim.refresh_from_db()
    assert victim.state == Job.State.PREEMPTING and victim.not_before is None, "a 500 is no refusal"
    assert not victim.events.filter(code=Because.RUNS_ON).exists() and not _suspended(fake)
    assert victim.events.last().message.startswith("The cluster failed to stop it (a server error, no refusal)")

    fake.heal()
    fake.fail(403, method="PATCH", path=VICTIM_PATCHES, times=10**6, message=DENIED)
    denied = later + timedelta(seconds=1300)
    reconcile(cluster=cluster, now=denied)
    reconcile(cluster=cluster, now=denied + timedelta(seconds=599))
    victim.refresh_from_db()
    assert victim.state == Job.State.PREEMPTING and victim.not_before == denied

    reconcile(cluster=cluster, now=denied + timedelta(seconds=601))

    victim.refresh_from_db()
    assert victim.state == Job.State.RUNNING and not _suspended(fake)
    assert victim.events.last().message.startswith("Runs on: the cluster refused to stop it for 601 s (")
    assert _created(fake, "maps") == []
