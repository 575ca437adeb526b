"""An elastic PyTorchJob (its elasticPolicy's minReplicas, torchrun's --nnodes=min:max) trains on with fewer Workers
than it asks for: it is short of replicas (R13) only when fewer Workers than its minReplicas run, or its Master
does not. Such a job reaches the cluster only by adoption (the submission builds no elasticPolicy and lists it back
on import), so the end-to-end tests adopt one, over real HTTP to the fake API server."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings

from jobs import kinds
from jobs.codes import Because
from jobs.models import Job, JobEvent
from scheduling.cluster.base import WaitingPod
from scheduling.cluster.kubernetes_pods import waiting_pods
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_outside_jobs import outside_job
from tests.cluster.test_running_jobs_short_of_replicas import (  # noqa: F401 (maps_on_three_nodes: a fixture)
    NO_ROOM, maps_on_three_nodes, replica_pod, running,
)

NOT_MADE = "its pod has not been created"
NOT_SCHEDULED = f"not scheduled: {NO_ROOM[:-1]}"


def elastic(policy: dict | None = None, *, workers: int = 4, master: bool = False, kind: str = "PyTorchJob") -> dict:
    """An adopted job object of `workers` Workers (and a Master) of 1 GPU each, with `policy` as its elasticPolicy."""
    obj = outside_job(kind, name="elastic-kubectl", gpu=1, replicas=workers, uid="u-1")
    specs = obj["spec"][next(key for key in obj["spec"] if key.endswith("ReplicaSpecs"))]
    if master:
        specs["Master"] = {"replicas": 1, "template": specs["Worker"]["template"]}
    if policy is not None:
        obj["spec"]["elasticPolicy"] = {"rdzvBackend": "c10d", **policy}
    obj["metadata"]["labels"]["gangway.io/job-id"] = "7"
    return obj


def worker_pods(obj: dict, phases: list[str | None], *, master: str | None = None) -> list[dict]:
    """Worker `i`'s pod in phase `phases[i]` (Pending: no node takes it), none for None; a Master in `master`."""
    pods = [] if master is None else [_pod(obj, "Master", 0, master)]
    return pods + [_pod(obj, "Worker", index, phase) for index, phase in enumerate(phases) if phase is not None]


def _pod(obj: dict, role: str, index: int, phase: str) -> dict:
    if phase == "Pending":
        return replica_pod(obj, role, index, "Pending", node_name=None, unschedulable=NO_ROOM)
    return replica_pod(obj, role, index, phase)


# -- what the adapter reads ----------------------------------------------------------------------------------

R, P, S = "Running", "Pending", "Succeeded"


@pytest.mark.parametrize(("policy", "phases", "master", "waiting"), [
    ({"minReplicas": 2, "maxReplicas": 4}, [R, R, R, P], None, ()),
    ({"minReplicas": 2, "maxReplicas": 4}, [R, R, P, None], None, ()),
    ({"minReplicas": 2, "maxReplicas": 4}, [R, S, P, P], None, ()),
    ({"minReplicas": 2, "maxReplicas": 4}, [R, P, P, None], None,
     (WaitingPod("worker-1", NOT_SCHEDULED), WaitingPod("worker-2", NOT_SCHEDULED), WaitingPod("worker-3", NOT_MADE))),
    ({"minReplicas": 2, "maxReplicas": 4}, [R, R, R, R], P, (WaitingPod("master-0", NOT_SCHEDULED),)),
    ({"minReplicas": 2, "maxReplicas": 4}, [R, R, P, P], R, ()),
    ({"maxReplicas": 3}, [R, R, R, P], None, ()),
    ({"maxReplicas": 3}, [R, R, P, P], None,
     (WaitingPod("worker-2", NOT_SCHEDULED), WaitingPod("worker-3", NOT_SCHEDULED))),
    ({"minReplicas": 6, "maxReplicas": 8}, [R, R, R, P], None, (WaitingPod("worker-3", NOT_SCHEDULED),)),
    ({"rdzvBackend": "c10d"}, [R, R, R, P], None, (WaitingPod("worker-3", NOT_SCHEDULED),)),
    ({"minReplicas": "two"}, [R, R, R, P], None, (WaitingPod("worker-3", NOT_SCHEDULED),)),
    (None, [R, R, R, P], None, (WaitingPod("worker-3", NOT_SCHEDULED),)),
], ids=[
    "3 of 4 workers running, at least 2: not short",
    "2 of 4 running, one pending, one not made: not short",
    "one running and one completed of 4, at least 2: not short",
    "1 of 4 running, at least 2: short of every worker waiting",
    "its master pending, every worker running: short of the master",
    "its master and 2 of 4 workers running, at least 2: not short",
    "maxReplicas alone is the least too: 3 of 4 running, at most 3, not short",
    "maxReplicas alone: 2 of 4 running, at most 3, short",
    "a least above its workers: every worker needed",
    "a policy naming no least: every worker needed",
    "a least that is no number: every worker needed",
    "no elastic policy: every worker needed",
])  # fmt: skip
def test_an_elastic_job_waits_only_for_the_replicas_it_needs_to_train(policy, phases, master, waiting):
    obj = elastic(policy, master=master is not None)
    assert waiting_pods(kinds.get("PyTorchJob"), obj, worker_pods(obj, phases, master=master)) == waiting


def test_an_elastic_policy_on_a_kind_never_elastic_changes_nothing():
    obj = elastic({"minReplicas": 1}, kind="TFJob")
    assert waiting_pods(kinds.get("TFJob"), obj, worker_pods(obj, [R, R, R, P])) == (
        WaitingPod("worker-3", NOT_SCHEDULED),)


def test_a_replica_no_pod_names_is_never_taken_for_a_worker():
    obj = elastic({"minReplicas": 1}, master=True)
    pods = worker_pods(obj, [R, R, R, R])
    for pod in pods:  # an operator whose labels the registry does not know
        pod["metadata"]["labels"] = {"gangway.io/job-id": "7"}
    assert waiting_pods(kinds.get("PyTorchJob"), obj, pods) == (WaitingPod("a replica", NOT_MADE),)


# -- what reconcile does with it -----------------------------------------------------------------------------


def _adopted_running(fake, cluster) -> tuple[Job, dict]:
    """An elastic PyTorchJob of 4 Workers of 1 GPU, at least 2, adopted, admitted and seen running by reconcile."""
    obj = elastic({"minReplicas": 2, "maxReplicas": 4})
    del obj["metadata"]["labels"]["gangway.io/job-id"], obj["metadata"]["uid"]
    fake.add(obj)
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    job = Job.objects.get()
    obj = fake.get("PyTorchJob", "elastic-kubectl", "maps")
    running(fake, obj)
    for index in range(4):
        fake.add(replica_pod(obj, "Worker", index))
    reconcile(cluster=cluster)
    job.refresh_from_db()
    assert job.adopted and job.state == Job.State.RUNNING and job.replica_count == 4
    assert "spec.elasticPolicy" in job.events.get(code=Because.FIELDS_KEPT).message  # kept on its object
    return job, obj


def test_an_adopted_elastic_job_running_at_least_its_fewest_workers_is_never_evicted(
        fake, cluster, maps_on_three_nodes):  # fmt: skip
    job, obj = _adopted_running(fake, cluster)
    fake.add(_pod(obj, "Worker", 3, "Pending"))  # its node failed; made again, it fits nowhere
    fake.add(_pod(obj, "Worker", 2, "Pending"))
    reconcile(cluster=cluster, now=job.started_at)

    reconcile(cluster=cluster, now=job.started_at + timedelta(seconds=settings.ADMISSION_TIMEOUT + 1))

    job.refresh_from_db()
    assert (job.state, job.short_since, job.reason_code, job.attempt) == (Job.State.RUNNING, None, "", 1)
    assert not job.events.filter(code=Because.SHORT_OF_REPLICAS).exists()
    assert fake.get("PyTorchJob", "elastic-kubectl", "maps")["spec"]["runPolicy"]["suspend"] is False


def test_an_adopted_elastic_job_below_its_fewest_workers_is_short_and_evicted_after_the_admission_timeout(
        fake, cluster, maps_on_three_nodes):  # fmt: skip
    job, obj = _adopted_running(fake, cluster)
    for index in (1, 2, 3):
        fake.add(_pod(obj, "Worker", index, "Pending"))
    reconcile(cluster=cluster, now=job.started_at)
    job.refresh_from_db()
    assert job.short_since == job.started_at
    assert job.reason.startswith("Only 1 of 4 replicas running: worker-1, worker-2 and worker-3 wait to start")

    fake.add(replica_pod(obj, "Worker", 1))  # back to 2 of 4: as few as it trains with
    reconcile(cluster=cluster, now=job.started_at + timedelta(seconds=60))
    job.refresh_from_db()
    assert (job.state, job.short_since, job.reason_code) == (Job.State.RUNNING, None, "")
    assert job.events.filter(code=Because.SHORT_OF_REPLICAS).order_by("pk").last().message == (
        "No replica it needs waits to start any more (2 of 4 running), after 60 s short of some; it is no longer "
        "to be evicted.")  # fmt: skip

    fake.add(_pod(obj, "Worker", 1, "Pending"))  # 1 of 4 again, for good
    short = job.started_at + timedelta(seconds=120)
    reconcile(cluster=cluster, now=short)
    reconcile(cluster=cluster, now=short + timedelta(seconds=settings.ADMISSION_TIMEOUT + 1))

    job.refresh_from_db()
    assert job.state == Job.State.QUEUED
    assert job.events.get(kind=JobEvent.Kind.EVICTED).code == Because.SHORT_OF_REPLICAS
    assert fake.get("PyTorchJob", "elastic-kubectl", "maps")["spec"]["runPolicy"]["suspend"] is True
