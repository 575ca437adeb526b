"""A victim's pods still bound while its stop is on its way (their grace period, or a suspend the API server
does not answer in time) overcommit the node the preemptor took. They take room on that node only: a job that
fits another node is admitted there, over real HTTP to the fake API server."""

from __future__ import annotations

import time

from jobs.models import Job
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tenants.models import Quota
from tests.cluster.busy_cluster import run_admitted
from tests.cluster.fake_apiserver import FakeApiServer, status


def preempted_on_n1(fake, cluster, submit) -> Job:
    """alpha's 8 GPUs run on n1 (4 of them borrowed), delta's 4 on n2, beta's 4 on n3: n2 has 4 free. gamma's
    8 reclaim n1; alpha's pods stay bound there. Returns delta's next job of 4 GPUs, its quota raised to 8."""
    big = submit("alpha", 8, "big")
    submit("beta", 4)
    submit("delta", 4)
    admission_cycle(cluster=cluster)
    run_admitted(fake, cluster)
    big.refresh_from_db()
    assert big.placement == ["n1"]
    submit("gamma", 8)
    admission_cycle(cluster=cluster)
    big.refresh_from_db()
    assert big.state == Job.State.PREEMPTING
    Quota.objects.filter(team__slug="delta").update(nominal=8)
    return submit("delta", 4, "other")


def test_a_job_that_fits_another_node_starts_during_a_victims_grace_period(fake, cluster, four_teams):
    other = preempted_on_n1(fake, cluster, four_teams)
    admission_cycle(cluster=cluster)
    other.refresh_from_db()
    assert other.state == Job.State.ADMITTED and other.placement == ["n2"], other.reason


def test_a_job_that_fits_nowhere_is_told_the_free_gpus_of_the_other_nodes(fake, cluster, four_teams):
    other = preempted_on_n1(fake, cluster, four_teams)
    Job.objects.filter(pk=other.pk).update(replicas=[{"role": "Worker", "count": 1, "gpu": 8}], gpu_total=8)
    Quota.objects.filter(team__slug="delta").update(nominal=12)
    admission_cycle(cluster=cluster)
    other.refresh_from_db()
    assert other.state == Job.State.QUEUED
    assert "only 4 GPUs free in the cluster" in other.reason, other.reason


def test_so_does_it_while_the_victims_suspend_is_not_answered_in_time(fake, cluster, four_teams):
    cluster.api.timeout = (1.0, 0.3)
    served = FakeApiServer.answer.__get__(fake)

    def answer(method, raw_path, headers, body):
        # A slow admission webhook: the suspend is answered after the client gave up, and not applied.
        if method == "PATCH" and "/namespaces/alpha/tfjobs/" in raw_path and "dryRun" not in raw_path:
            time.sleep(0.6)
            return 500, status(500, "failed calling webhook: context deadline exceeded"), {}
        return served(method, raw_path, headers, body)
    fake.answer = answer
    other = preempted_on_n1(fake, cluster, four_teams)
    for _ in range(2):
        reconcile(cluster=cluster)
        admission_cycle(cluster=cluster)
    other.refresh_from_db()
    assert other.state == Job.State.ADMITTED and other.placement == ["n2"], other.reason
