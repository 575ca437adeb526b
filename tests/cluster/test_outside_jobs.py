"""Jobs from elsewhere (kubectl, Katib, Pipelines) join the queue, over real HTTP to the fake API server.

Nothing of an adopted job is ever deleted: every test that runs reconcile or a cycle checks
that no DELETE reached the server.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job, Sweep
from jobs.services import job_cancel, job_submit
from jobs.spec import parse_spec
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.conftest import make_team, spec_data

REPLICA_KEYS = {"TFJob": "tfReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs"}
CONTAINERS = {"TFJob": "tensorflow", "PyTorchJob": "pytorch"}


def outside_job(kind="TFJob", name="bert-kubectl", namespace="maps", *, labels=None, suspend=True, gpu=4,
                replicas=2, priority_class=None, **meta):  # fmt: skip
    """A job as kubectl (or Katib, or a pipeline) creates it: Gangway's queue label, suspended."""
    pod = {"containers": [{"name": CONTAINERS[kind], "image": "busybox",
                           "resources": {"limits": {"nvidia.com/gpu": gpu}}}]}  # fmt: skip
    if priority_class:
        pod["priorityClassName"] = priority_class
    return {
        "apiVersion": "kubeflow.org/v1", "kind": kind,
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"gangway.io/queue": namespace, **(labels or {})},
                     "managedFields": [{"manager": "kubectl-create", "operation": "Update"}], **meta},
        "spec": {"runPolicy": {"suspend": suspend},
                 REPLICA_KEYS[kind]: {"Worker": {"replicas": replicas, "template": {"spec": pod}}}},
    }  # fmt: skip


def _node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}}}


@pytest.fixture
def world(fake, tiers):
    """One node of 8 GPUs; team maps may use 8 (nominal 8), team vision too; their namespaces exist."""
    fake.add(_node("n1"))
    teams = {slug: make_team(slug, tiers, gpu=8, borrowing_limit=0) for slug in ("maps", "vision")}
    for slug in teams:
        fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": slug}})
    return teams


def preempt_for_urgent_work(world, cluster):
    """Submits 8 GPUs of production work to team maps and runs a cycle an hour on (past the thrash guard),
    which preempts what maps runs at a lower tier; returns that hour."""
    later = timezone.now() + timedelta(hours=1)
    job_submit(team=world["maps"], spec=parse_spec(spec_data(team="maps", name="urgent", tier="production",
                                                            replicas=[{"role": "Worker", "count": 1, "gpu": 8}])))  # fmt: skip
    admission_cycle(cluster=cluster, now=later)
    return later


def _deletes(fake):
    return [path for method, path in fake.log if method == "DELETE"]


def _object(fake, kind="TFJob", name="bert-kubectl", namespace="maps"):
    return fake.get(kind, name, namespace)


@pytest.mark.parametrize("kind", ["TFJob", "PyTorchJob"])
def test_a_suspended_labelled_job_is_adopted_as_a_queued_gangway_job(world, fake, cluster, kind):
    fake.add(outside_job(kind, annotations={"gangway.io/created-by": "alice"}))

    result = reconcile(cluster=cluster)

    job = Job.objects.get()
    assert result.adopted == 1 and job.state == Job.State.QUEUED
    assert (job.kind, job.team.slug, job.gpu_total, job.replica_count) == (kind, "maps", 8, 2)
    assert job.submitted_via == "kubectl-create (alice)"
    assert job.cluster_name == "bert-kubectl" and job.cluster_uid == _object(fake, kind)["metadata"]["uid"]
    assert job.tier.name == "standard"  # the team's default: it names none
    assert _object(fake, kind)["metadata"]["labels"]["gangway.io/job-id"] == str(job.pk)
    assert _object(fake, kind)["spec"]["runPolicy"]["suspend"] is True  # waits for an admission


def test_adopting_twice_makes_one_gangway_job(world, fake, cluster):
    fake.add(outside_job())

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert Job.objects.count() == 1


def test_a_lost_adoption_label_is_put_back(world, fake, cluster):
    fake.add(outside_job())
    reconcile(cluster=cluster)
    obj = _object(fake)
    del obj["metadata"]["labels"]["gangway.io/job-id"]
    fake.add(obj)

    reconcile(cluster=cluster)

    assert _object(fake)["metadata"]["labels"]["gangway.io/job-id"] == str(Job.objects.get().pk)
    assert Job.objects.count() == 1


def test_the_tier_comes_from_the_label_or_else_the_priority_class(world, fake, cluster):
    fake.add(outside_job(name="labelled", labels={"gangway.io/tier": "experiment"}, priority_class="production"))
    fake.add(outside_job(name="classed", priority_class="production", gpu=1))

    reconcile(cluster=cluster)

    tiers = dict(Job.objects.values_list("cluster_name", "tier__name"))
    assert tiers == {"labelled": "experiment", "classed": "production"}


def test_a_tier_the_team_may_not_use_is_refused_and_written_back(world, fake, cluster, tiers):
    world["maps"].tiers.set([tiers["standard"]])
    fake.add(outside_job(labels={"gangway.io/tier": "production"}))

    result = reconcile(cluster=cluster)

    assert result.refused == 1 and not Job.objects.exists()
    reason = _object(fake)["metadata"]["annotations"]["gangway.io/rejected"]
    assert "Team maps may not use tier 'production'; it may use standard." in reason
    [event] = fake.list("Event")
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "bert-kubectl"
    assert event["reason"] == "GangwayRejected" and "production" in event["message"]
    reconcile(cluster=cluster)
    assert len(fake.list("Event")) == 1 and not Job.objects.exists()  # refused once, not on every pass


def test_a_job_that_can_never_fit_is_refused_by_the_same_validation(world, fake, cluster):
    admission_cycle(cluster=cluster)  # the cluster's nodes are known: submission checks R10
    fake.add(outside_job(gpu=8, replicas=2))  # 16 GPUs: above what team maps could ever hold

    reconcile(cluster=cluster)

    assert not Job.objects.exists()
    assert "Refused by Gangway" in _object(fake)["metadata"]["annotations"]["gangway.io/rejected"]


def test_a_job_a_cycle_rejects_gets_the_reason_written_back(world, fake, cluster):
    fake.add(outside_job(gpu=8, replicas=2))  # no cycle has read the nodes yet: the first one rejects
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)

    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.REJECTED
    assert _object(fake)["metadata"]["annotations"]["gangway.io/rejected"] == f"Refused by Gangway: {job.reason}"
    assert _deletes(fake) == []


def test_a_queue_label_naming_another_team_is_refused(world, fake, cluster):
    fake.add(outside_job(labels={"gangway.io/queue": "vision"}))

    reconcile(cluster=cluster)

    assert not Job.objects.exists()
    assert _object(fake)["metadata"]["annotations"]["gangway.io/rejected"].startswith(
        "Refused by Gangway: the label gangway.io/queue names 'vision', but the job is in namespace maps")


def test_admission_patches_the_scheduling_fields_and_unsuspends_instead_of_creating(world, fake, cluster):
    fake.add(outside_job())
    reconcile(cluster=cluster)

    result = admission_cycle(cluster=cluster)

    assert result.admitted == 1
    obj = _object(fake)
    job = Job.objects.get()
    assert obj["spec"]["runPolicy"]["suspend"] is False
    assert obj["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 2, "queue": "maps", "priorityClass": "standard"}
    template = obj["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    assert template["spec"]["schedulerName"] == "volcano" and template["spec"]["priorityClassName"] == "standard"
    assert template["metadata"]["labels"]["gangway.io/job-id"] == str(job.pk)  # its pods count as the job's
    assert template["spec"]["containers"][0]["image"] == "busybox"  # the owner's part is left as written
    assert [m for m, p in fake.log if p.endswith("/tfjobs") and m == "POST"] == []  # never created: it exists
    assert [s.job_id for s in cluster.job_statuses()] == [job.pk] and cluster.job_statuses()[0].adopted
    assert _deletes(fake) == []


def test_preemption_suspends_an_adopted_job_and_readmission_resumes_it(world, fake, cluster, tiers):
    fake.add(outside_job(labels={"gangway.io/tier": "experiment"}))
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    adopted = Job.objects.get()

    later = preempt_for_urgent_work(world, cluster)

    adopted.refresh_from_db()
    assert adopted.state == Job.State.PREEMPTING
    assert _object(fake)["spec"]["runPolicy"]["suspend"] is True
    reconcile(cluster=cluster, now=later)
    adopted.refresh_from_db()
    assert adopted.state == Job.State.QUEUED and _object(fake) is not None
    assert _deletes(fake) == []


def test_a_deletion_in_the_cluster_cancels_the_gangway_job(world, fake, cluster):
    fake.add(outside_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    fake.objects.pop(("apis/kubeflow.org/v1", "tfjobs", "maps", "bert-kubectl"))  # kubectl delete, by its owner

    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.CANCELLED
    assert job.events.filter(code="deleted_outside").exists()
    admission_cycle(cluster=cluster)
    assert [m for m, p in fake.log if p.endswith("/tfjobs") and m == "POST"] == []  # not created again


def test_cancelling_in_gangway_suspends_and_never_deletes(world, fake, cluster, staff):
    fake.add(outside_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)

    job_cancel(job=Job.objects.get(), actor=staff)
    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert Job.objects.get().state == Job.State.CANCELLED
    assert _object(fake)["spec"]["runPolicy"]["suspend"] is True
    assert _deletes(fake) == []


def test_a_job_without_the_label_or_not_suspended_is_never_touched_and_doctor_reports_it(world, fake, cluster):
    running = outside_job(name="skipped-line", suspend=False)
    unlabelled = outside_job(kind="PyTorchJob", name="no-label", suspend=False)
    unlabelled["metadata"]["labels"] = {}
    fake.add(running)
    fake.add(unlabelled)
    fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "skipped-line-worker-0", "namespace": "maps"},
              "spec": {"nodeName": "n1", "containers": [{"name": "tensorflow", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]},
              "status": {"phase": "Running"}})  # fmt: skip

    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)

    assert not Job.objects.exists()
    assert [m for m, _ in fake.log if m in ("PATCH", "POST", "PUT", "DELETE")] == []
    assert [pod.gpu for pod in cluster.outside_usage()] == [4]  # R12: it takes room, no team's quota
    problems = [finding.problem for finding in cluster.doctor(_tenants(world))]
    assert any("TFJob maps/skipped-line" in p and "created running instead of suspended" in p for p in problems)
    assert any("PyTorchJob maps/no-label" in p and "carries no gangway.io/queue label" in p for p in problems)
    assert any("ValidatingAdmissionPolicy gangway-queue-required is not installed" in p for p in problems)


def _tenants(world):
    from scheduling.cluster.base import TenantTeam, Tenants

    return Tenants(teams=tuple(TenantTeam(slug=slug, nominal={"gpu": 8}, borrowing_limit={}) for slug in world), tiers=())


def test_a_job_outside_team_namespaces_is_left_alone(world, fake, cluster):
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    fake.add(outside_job(namespace="research"))

    reconcile(cluster=cluster)

    assert not Job.objects.exists() and "annotations" not in _object(fake, namespace="research")["metadata"]


def test_a_katib_trial_is_adopted_into_its_experiments_sweep(world, fake, cluster, tiers):
    fake.add({"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "metadata": {
        "name": "tune-lr-x7k2", "namespace": "maps", "labels": {"katib.kubeflow.org/experiment": "tune-lr"}},
        "spec": {"objective": {"type": "maximize", "objectiveMetricName": "accuracy"}},
        "status": {"observation": {"metrics": [{"name": "accuracy", "latest": "0.91", "max": "0.93"}]}}})  # fmt: skip
    owner = [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "name": "tune-lr-x7k2", "controller": True}]
    fake.add(outside_job(name="tune-lr-x7k2", gpu=1, ownerReferences=owner))

    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.submitted_via == "katib experiment tune-lr, trial tune-lr-x7k2"
    sweep = Sweep.objects.get()
    assert (sweep.experiment, sweep.team.slug, sweep.gpu_cap) == ("tune-lr", "maps", 8)
    assert job.sweep == sweep and job.tier == tiers["experiment"]  # the team's lowest tier
    # Katib ranks a maximized objective by its highest value (the default strategy, max), not the latest.
    assert (sweep.objective, sweep.maximize, sweep.best_objective) == ("accuracy", True, 0.93)


def test_a_pipelines_step_says_which_run_it_came_from(world, fake, cluster):
    fake.add(outside_job(labels={"pipeline/runid": "5c1f0e"}, annotations={"pipelines.kubeflow.org/run_name": "nightly"}))

    reconcile(cluster=cluster)

    assert Job.objects.get().submitted_via == "pipelines run nightly"


def test_a_trial_job_katib_removed_after_it_succeeded_ends_as_succeeded(world, fake, cluster):
    trial = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "metadata": {
        "name": "tune-lr-x7k2", "namespace": "maps", "labels": {"katib.kubeflow.org/experiment": "tune-lr"}}}  # fmt: skip
    fake.add(trial)
    owner = [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "name": "tune-lr-x7k2", "controller": True}]
    fake.add(outside_job(name="tune-lr-x7k2", gpu=1, ownerReferences=owner))
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    fake.add({**trial, "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}})
    fake.objects.pop(("apis/kubeflow.org/v1", "tfjobs", "maps", "tune-lr-x7k2"))  # Katib cleans up the trial's job

    reconcile(cluster=cluster)

    assert Job.objects.get().state == Job.State.SUCCEEDED
    assert _deletes(fake) == []


def test_a_job_being_cancelled_whose_object_is_deleted_meanwhile_ends_cancelled(world, fake, cluster, staff):
    fake.add(outside_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    job_cancel(job=Job.objects.get(), actor=staff)
    fake.objects.pop(("apis/kubeflow.org/v1", "tfjobs", "maps", "bert-kubectl"))

    reconcile(cluster=cluster)

    assert Job.objects.get().state == Job.State.CANCELLED


TFJOB_KEY = ("apis/kubeflow.org/v1", "tfjobs", "maps", "bert-kubectl")


def test_an_adopted_job_resumed_after_its_cancel_is_suspended_again(world, fake, cluster, staff):
    """A cancel that crossed an admission, or an owner resuming what Gangway cancelled: it ran for no job."""
    fake.add(outside_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    job_cancel(job=Job.objects.get(), actor=staff)
    reconcile(cluster=cluster)
    fake.objects[TFJOB_KEY]["spec"]["runPolicy"]["suspend"] = False  # resumed after the cancel

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert _object(fake)["spec"]["runPolicy"]["suspend"] is True and _deletes(fake) == []
    assert Job.objects.get().events.filter(code="ended_here").count() == 1


def test_an_adopted_job_taken_out_of_the_queue_is_left_to_its_owner(world, fake, cluster):
    fake.add(outside_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    del fake.objects[TFJOB_KEY]["metadata"]["labels"]["gangway.io/queue"]  # its owner takes it out of the queue

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert Job.objects.get().state == Job.State.CANCELLED
    assert _object(fake)["spec"]["runPolicy"]["suspend"] is False and _deletes(fake) == []
