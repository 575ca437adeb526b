"""TrainJobs from elsewhere (Kubeflow Trainer v2) join the queue as TFJobs and PyTorchJobs do, over real HTTP.

Gangway only patches what it owns on them (the queue, its pods' labels, tolerations and grace
period, `spec.suspend`); `trainer` and the owner's runtime patches stay as written, and nothing
is ever created or deleted.
"""

from __future__ import annotations

from jobs.models import Job
from jobs.services import job_cancel
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from scheduling.snapshot import to_cluster_job
from tests.cluster.test_outside_jobs import _deletes, _tenants, outside_job, preempt_for_urgent_work
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)

UNMARKED = {"gangway.io/suspended-by": None}  # an admission or resume removes the mark of Gangway's suspend

PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/maps/trainjobs"
OWNER_PATCH = {
    "manager": "example.com/notebook",
    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {
        "template": {"spec": {"volumes": [{"name": "cfg", "configMap": {"name": "train-config"}}],
                              "containers": [{"name": "node", "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}]}},
    }}}]}}},
}  # fmt: skip


def outside_trainjob(name="llama-kubectl", namespace="maps", *, suspend=True, gpu=4, nodes=2, labels=None):
    """A TrainJob as kubectl creates it: Gangway's queue label, suspended, with a runtime patch of its owner's."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"gangway.io/queue": namespace, **(labels or {})},
                     "managedFields": [{"manager": "kubectl-create", "operation": "Update"}]},
        "spec": {
            "runtimeRef": {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org",
                           "kind": "ClusterTrainingRuntime"},
            "suspend": suspend,
            "trainer": {"image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", "command": ["torchrun", "train.py"],
                        "numNodes": nodes, "resourcesPerNode": {"limits": {"nvidia.com/gpu": gpu}}},
            "runtimePatches": [OWNER_PATCH],
        },
    }  # fmt: skip


def _object(fake, name="llama-kubectl"):
    return fake.get("TrainJob", name, "maps")


def _writes(fake):
    return [(method, path) for method, path in fake.log if method in ("POST", "PUT", "DELETE") and "trainjobs" in path]


def _admitted(fake, cluster):
    fake.add(outside_trainjob())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    return Job.objects.get()


def test_a_suspended_labelled_trainjob_is_adopted_with_its_runtime_nodes_and_gpus(world, fake, cluster):
    fake.add(outside_trainjob())

    result = reconcile(cluster=cluster)

    job = Job.objects.get()
    assert result.adopted == 1 and job.state == Job.State.QUEUED
    assert (job.kind, job.team.slug, job.runtime, job.replica_count, job.gpu_total) == (
        "TrainJob", "maps", "torch-distributed", 2, 8)
    assert job.submitted_via == "kubectl-create"
    assert job.cluster_name == "llama-kubectl" and job.cluster_uid == _object(fake)["metadata"]["uid"]
    assert _object(fake)["metadata"]["labels"]["gangway.io/job-id"] == str(job.pk)
    assert _object(fake)["spec"]["suspend"] is True  # waits for an admission


def test_admission_patches_what_gangway_owns_and_unsuspends_it_without_creating_or_deleting(world, fake, cluster):
    job = _admitted(fake, cluster)

    assert job.state == Job.State.ADMITTED
    [(path, body)] = [(p, b) for p, b in fake.patches if "spec" in b]
    labels = {"gangway.io/job-id": str(job.pk), "gangway.io/team": "maps", "gangway.io/tier": "standard"}
    pod = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
           "terminationGracePeriodSeconds": to_cluster_job(job).grace_period}  # fmt: skip
    assert path == f"{PATH}/llama-kubectl"
    assert body == {"metadata": {"labels": {"gangway.io/job-id": str(job.pk)}, "annotations": UNMARKED},
                    "spec": {"suspend": False, "runtimePatches": [
        OWNER_PATCH,
        {"manager": "gangway.io/scheduler", "trainingRuntimeSpec": {"template": {
            "metadata": {"labels": labels, "annotations": {"scheduling.volcano.sh/queue-name": "maps"}},
            "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
                "metadata": {"labels": labels}, "spec": pod}}}}]},
        }}},
    ]}}  # fmt: skip
    obj = _object(fake)
    assert obj["spec"]["suspend"] is False
    assert obj["spec"]["trainer"] == outside_trainjob()["spec"]["trainer"]  # the trainer refuses changes to it
    assert _writes(fake) == []  # never created: it exists; never deleted
    assert [s.job_id for s in cluster.job_statuses()] == [job.pk] and cluster.job_statuses()[0].adopted


def test_a_second_admission_replaces_gangways_runtime_patch_instead_of_adding_one(world, fake, cluster):
    job = _admitted(fake, cluster)
    cluster.suspend_job(to_cluster_job(job))

    cluster.create_job(to_cluster_job(job))

    managers = [patch["manager"] for patch in _object(fake)["spec"]["runtimePatches"]]
    assert managers == ["example.com/notebook", "gangway.io/scheduler"]
    assert _object(fake)["spec"]["suspend"] is False


def test_preemption_suspends_an_adopted_trainjob(world, fake, cluster):
    adopted = _admitted(fake, cluster)

    preempt_for_urgent_work(world, cluster)

    adopted.refresh_from_db()
    assert adopted.state == Job.State.PREEMPTING
    assert _object(fake)["spec"]["suspend"] is True
    assert _writes(fake) == []


def test_cancelling_an_adopted_trainjob_suspends_it_and_never_deletes(world, fake, cluster, staff):
    _admitted(fake, cluster)

    job_cancel(job=Job.objects.get(), actor=staff)
    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert Job.objects.get().state == Job.State.CANCELLED
    assert _object(fake)["spec"]["suspend"] is True
    assert _deletes(fake) == []


def test_a_trainjob_deleted_in_the_cluster_cancels_the_gangway_job(world, fake, cluster):
    _admitted(fake, cluster)
    fake.objects.pop(("apis/trainer.kubeflow.org/v1alpha1", "trainjobs", "maps", "llama-kubectl"))

    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.CANCELLED
    assert job.events.filter(code="deleted_outside").exists()
    admission_cycle(cluster=cluster)
    assert _writes(fake) == []  # not created again


def test_an_unsuspended_labelled_trainjob_is_never_touched(world, fake, cluster):
    fake.add(outside_trainjob(suspend=False))

    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)

    assert not Job.objects.exists()
    assert [m for m, _ in fake.log if m in ("PATCH", "POST", "PUT", "DELETE")] == []
    [fix] = [f.fix for f in cluster.doctor(_tenants(world)) if "TrainJob maps/llama-kubectl" in f.problem]
    assert "spec.suspend: true" in fix  # where a TrainJob's flag is, not a TFJob's runPolicy


def test_a_cluster_without_kubeflow_trainer_still_lists_its_outside_tfjobs(world, fake, cluster):
    fake.add(outside_job())
    fake.fail(404, method="GET", path="/trainjobs$")  # no TrainJob CRD: its list is not found

    found = cluster.outside_jobs()
    assert [(job.kind, job.name) for job in found.jobs] == [("TFJob", "bert-kubectl")]
    assert "TrainJob" not in found.kinds and "TFJob" in found.kinds
