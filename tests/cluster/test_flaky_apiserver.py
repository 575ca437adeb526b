"""A flaky API server on a busy Monday: answers lost, kinds not served for a moment, slow lists.

Over real HTTP to the fake API server, through the adapter, the loop and reconcile.
"""

from __future__ import annotations

import time

import pytest

from jobs.codes import Because
from jobs.models import Job
from jobs.services import job_cancel
from scheduling.cluster.base import ClusterUnavailable
from scheduling.cluster.faulty import FaultyCluster
from scheduling.invariants import broken_promises, check
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_kubernetes_adapter import _replica_pod
from tests.cluster.test_loop_on_apiserver import four_teams, two_teams, world  # noqa: F401 (fixtures)
from tests.conftest import spec_data

# What the API server answers while it does not serve a kind (a CRD being re-established, an
# aggregated API restarting): the generic NotFound, naming no object, unlike "tfjobs "x" not found".
NOT_SERVED = "the server could not find the requested resource"


# -- a kind not served for a moment is not a missing object ------------------------------------------------

def test_a_victim_whose_suspend_meets_a_kind_not_served_is_not_taken_for_gone(fake, cluster, four_teams):
    """Read as "the job is gone, so it is stopped", the preemptor would start beside a victim still holding its GPUs."""
    four_teams("alpha", 8), four_teams("beta", 4)  # alpha fills a node, 4 of its GPUs borrowed
    admission_cycle(cluster=cluster)
    four_teams("gamma", 8)  # gamma reclaims alpha's node
    fake.fail(404, method="PATCH", path="/namespaces/alpha/tfjobs/", message=NOT_SERVED)

    admission_cycle(cluster=cluster)

    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == []
    reconcile(cluster=cluster)
    assert check(cluster, settled=True) == []


def test_a_cancel_whose_delete_meets_a_kind_not_served_is_not_recorded_as_done(fake, cluster, two_teams, owner):
    alpha, _ = two_teams
    admission_cycle(cluster=cluster)
    job_cancel(job=alpha, actor=owner)
    fake.fail(404, method="DELETE", path="/namespaces/alpha/tfjobs/", times=50, message=NOT_SERVED)

    result = reconcile(cluster=cluster)

    alpha.refresh_from_db()
    assert alpha.state == Job.State.CANCELLING, "its TFJob still runs: not cancelled yet"
    assert result.error.startswith("delete TFJob alpha/train-g")
    fake.heal()
    reconcile(cluster=cluster)
    alpha.refresh_from_db()
    assert alpha.state == Job.State.CANCELLED
    assert [o["metadata"]["namespace"] for o in fake.list("TFJob")] == ["gamma"]


def test_deleting_or_suspending_a_job_that_is_really_gone_is_still_success(fake, cluster, two_teams):
    alpha, _ = two_teams
    admission_cycle(cluster=cluster)
    [name] = [o["metadata"]["name"] for o in fake.list("TFJob") if o["metadata"]["namespace"] == "alpha"]
    cluster.delete_job("alpha", name, "TFJob")
    cluster.delete_job("alpha", name, "TFJob")  # 404 naming the object: already deleted
    fake.log.clear()
    from scheduling.snapshot import to_cluster_job

    cluster.suspend_job(to_cluster_job(alpha))
    assert len(fake.log) == 1  # one call, not retried


# -- a create whose answer was lost ---------------------------------------------------------------------------

def test_a_create_whose_answer_was_lost_stops_saying_the_cluster_cannot_be_reached(fake, cluster, world):
    """The create went through, its answer did not: once reconcile sees the object, the job no longer says
    it waits for the cluster to create it (the CLI and the API show that sentence)."""
    world(1)
    cluster.api.timeout = (1.0, 0.3)
    fake.stall(0.6, method="POST", path="/tfjobs$")  # the server acts, the answer comes after the client gave up
    assert not admission_cycle(cluster=cluster).error  # one object's answer lost, no outage: the server answers reads
    job = Job.objects.get()
    assert job.reason_code == Because.CREATE_PENDING
    time.sleep(0.5)
    assert len(fake.list("TFJob")) == 1

    reconcile(cluster=cluster)

    job.refresh_from_db()
    assert (job.state, job.reason_code, job.reason) == (Job.State.ADMITTED, "", "")
    assert len(fake.list("TFJob")) == 1


# -- a job's logs while the server is slow --------------------------------------------------------------------

def test_a_pod_list_that_comes_slowly_counts_against_the_logs_deadline(fake, cluster):
    """The page's read is bounded as a whole: a pod list taking the client's 30 s read timeout, then 20 s of
    logs and one more read, kept a web worker past gunicorn's 60 s."""
    fake.add(_replica_pod(0, {"running": {}}))
    fake.stall(2.0, method="GET", path="/namespaces/maps/pods$")
    cluster.logs_deadline = 0.5
    started = time.monotonic()
    with pytest.raises(ClusterUnavailable, match=r"the cluster took more than 0.5 s for this job's logs"):
        cluster.logs("maps", 12)
    assert time.monotonic() - started < 1.5


def test_the_last_pods_log_gets_only_the_time_left(fake, cluster):
    for index in range(2):
        fake.add(_replica_pod(index, {"running": {}}))
    fake.stall(0.6, path="-worker-0/log$")
    fake.stall(3.0, path="-worker-1/log$")  # started before the deadline, it would get its own 10 s
    cluster.logs_deadline = 1.0
    started = time.monotonic()
    with pytest.raises(ClusterUnavailable, match=r"the cluster took more than 1 s for this job's logs"):
        cluster.logs("maps", 12)
    assert time.monotonic() - started < 2.0


# -- the fault-injecting cluster ---------------------------------------------------------------------------

def test_the_faulty_cluster_runs_a_cycle_for_a_job_that_mounts_a_claim(fake, cluster, tiers, owner):
    from jobs.services import job_submit
    from jobs.spec import parse_spec
    from tests.cluster.test_loop_on_apiserver import _node
    from tests.conftest import make_team

    fake.add(_node("n1"))
    team = make_team("big", tiers, gpu=8, borrowing_limit=0)
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "big"}})
    spec = parse_spec(spec_data(team="big", name="reads", replicas=[{"role": "Worker", "count": 1, "gpu": 1}],
                                volumes=[{"claim": "datasets", "path": "/data"}]))  # fmt: skip
    job, _ = job_submit(team=team, owner=owner, spec=spec)

    result = admission_cycle(cluster=FaultyCluster(cluster))

    job.refresh_from_db()
    assert not result.error and job.state == Job.State.QUEUED
    assert "datasets" in job.reason
