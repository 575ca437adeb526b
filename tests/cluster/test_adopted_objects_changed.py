"""An adopted job's object its owner changes in the cluster after its adoption, over HTTP on the fake API
server: edited while suspended (`kubectl edit`, which the admission policy allows), replaced under its name
(`kubectl replace --force`), or labelled by an admission between reconcile's two lists. Gangway never
unsuspends an object asking more than it counted, and never takes an object that is there for deleted."""

from __future__ import annotations

import pytest

from jobs.models import Job
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.cluster import outside
from scheduling.cluster.base import ReplicaSpec
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_outside_jobs import outside_job, world  # noqa: F401 (fixture)
from tests.cluster.test_refused_victims import victim  # noqa: F401 (fixture)
from tests.conftest import spec_data

pytestmark = pytest.mark.django_db

KEY = ("apis/kubeflow.org/v1", "tfjobs", "maps", "bert-kubectl")


def _edit_gpus(fake, gpu: int) -> None:
    """Its owner edits the suspended object to ask `gpu` GPUs a Worker (the same object: its uid kept)."""
    edited = fake.get("TFJob", "bert-kubectl", "maps")
    edited["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"] = gpu
    fake.add(edited)


def _suspended(fake) -> bool:
    return fake.get("TFJob", "bert-kubectl", "maps")["spec"]["runPolicy"]["suspend"] is True


def test_a_queued_job_its_owner_edits_is_rejected_saying_what_changed(world, fake, cluster):
    fake.add(outside_job(gpu=1, replicas=1))
    reconcile(cluster=cluster)
    job = Job.objects.get()
    _edit_gpus(fake, 8)
    reconcile(cluster=cluster)
    job.refresh_from_db()
    assert job.state == Job.State.REJECTED and job.reason_code == "changed_outside"
    assert ("Its TFJob maps/bert-kubectl was changed after Gangway adopted it: it asks 1 Worker of 8 GPUs now, "
            "where Gangway adopted it asking 1 Worker of 1 GPU") in job.reason  # fmt: skip
    admission_cycle(cluster=cluster)
    obj = fake.get("TFJob", "bert-kubectl", "maps")
    assert _suspended(fake)
    assert "was changed after Gangway adopted it" in obj["metadata"]["annotations"]["gangway.io/rejected"]


def test_an_edit_a_cycle_meets_before_reconcile_is_refused_and_the_object_stays_suspended(world, fake, cluster):
    fake.add(outside_job(gpu=1, replicas=1))
    reconcile(cluster=cluster)
    job = Job.objects.get()
    _edit_gpus(fake, 8)
    admission_cycle(cluster=cluster)  # a cycle before the next reconcile pass: it admits the job as adopted
    job.refresh_from_db()
    assert _suspended(fake)
    assert job.state == Job.State.QUEUED and "was changed after Gangway adopted it" in job.reason
    reconcile(cluster=cluster)
    job.refresh_from_db()
    assert job.state == Job.State.REJECTED and _suspended(fake)


def test_an_edit_that_leaves_what_it_asks_is_no_change(world, fake, cluster):
    fake.add(outside_job(gpu=1, replicas=1))
    reconcile(cluster=cluster)
    job = Job.objects.get()
    edited = fake.get("TFJob", "bert-kubectl", "maps")
    edited["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    fake.add(edited)
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    job.refresh_from_db()
    assert job.state == Job.State.ADMITTED and not _suspended(fake)


def test_an_edited_job_never_lets_a_cycle_overfill_its_node(world, fake, cluster):
    fake.add(outside_job(gpu=1, replicas=1))
    reconcile(cluster=cluster)
    _edit_gpus(fake, 8)
    admission_cycle(cluster=cluster)
    reconcile(cluster=cluster)
    other, _ = job_submit(team=world["vision"], spec=parse_spec(spec_data(
        team="vision", name="other", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])))  # fmt: skip
    admission_cycle(cluster=cluster)
    other.refresh_from_db()
    assert other.state == Job.State.ADMITTED  # the edited job never ran: its node's room is the other job's
    assert _suspended(fake)


def test_an_object_replaced_under_the_adopted_name_is_not_unsuspended_for_the_old_job(world, fake, cluster):
    fake.add(outside_job(gpu=1, replicas=1))
    reconcile(cluster=cluster)
    adopted = Job.objects.get()
    fake.objects.pop(KEY)
    fake.add(outside_job(gpu=8, replicas=1))  # kubectl replace --force: same name, a new uid
    admission_cycle(cluster=cluster)
    assert _suspended(fake)
    reconcile(cluster=cluster)
    reconcile(cluster=cluster)
    adopted.refresh_from_db()
    assert adopted.state == Job.State.CANCELLED  # its own object is gone
    new_uid = fake.get("TFJob", "bert-kubectl", "maps")["metadata"]["uid"]
    assert Job.objects.get(cluster_uid=new_uid).gpu_total == 8  # the new object waits as a job of its own
    assert _suspended(fake)


def test_a_job_labelled_between_reconciles_two_lists_is_not_taken_for_deleted(world, fake, cluster):
    fake.add(outside_job(gpu=1, replicas=1))
    fake.fail(500, path="/bert-kubectl$", method="PATCH", times=50)  # its adoption's label does not go through
    reconcile(cluster=cluster)
    fake.heal()
    job = Job.objects.get()
    before = fake.get("TFJob", "bert-kubectl", "maps")
    assert "gangway.io/job-id" not in before["metadata"]["labels"]
    admission_cycle(cluster=cluster)  # labels and unsuspends it...
    admitted = fake.get("TFJob", "bert-kubectl", "maps")
    fake.add(before)  # ...landing, in this test, only once reconcile has read the job-id list
    lists = []

    def admission_lands():
        lists.append(1)
        if len(lists) == 2:  # the first TFJob list is by the job-id label, the second by the queue label
            fake.add(admitted)

    fake.before(admission_lands, path=r"/apis/kubeflow.org/v1/tfjobs$", method="GET", times=2)
    reconcile(cluster=cluster)
    job.refresh_from_db()
    assert len(lists) == 2
    assert job.state == Job.State.ADMITTED, [e.message for e in job.events.order_by("pk")][-2:]


WORKER = (ReplicaSpec("Worker", 2, 4, 8000, 32 * 2**30),)
DEFAULTS = {"cpu": 8000, "memory": 32 * 2**30}  # its team's: what a replica naming none gets


@pytest.mark.parametrize(("limits", "says"), [
    ({"nvidia.com/gpu": 4}, ""),
    ({"nvidia.com/gpu": 4, "cpu": "8", "memory": "32Gi"}, ""),
    ({"nvidia.com/gpu": 8}, "it asks 2 Worker of 8 GPUs now, where Gangway adopted it asking 2 Worker of 4 GPUs, 8 CPU, "
                            "32 GiB memory"),
    ({"nvidia.com/gpu": 4, "cpu": "16"}, "it asks 2 Worker of 4 GPUs, 16 CPU now"),
    ({"nvidia.com/gpu": 4, "memory": "64Gi"}, "2 Worker of 4 GPUs, 64 GiB memory now"),
    ({"nvidia.com/gpu": "many"}, "it can no longer be read as a job"),
], ids=["same", "same, named", "more GPUs", "more CPU", "more memory", "unreadable"])
def test_what_an_adopted_object_asks_against_what_was_counted(limits, says):
    obj = outside_job(gpu=4, replicas=2)
    obj["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"] = limits
    changed = outside.demand_change(WORKER, obj, DEFAULTS)
    assert (changed == "") if not says else (says in changed)


def test_an_edit_dropping_a_named_cpu_for_a_larger_team_default_is_a_change():
    counted = (ReplicaSpec("Worker", 2, 4, 1000, 32 * 2**30),)  # adopted naming 1 CPU a replica
    obj = outside_job(gpu=4, replicas=2)  # edited to name none: its pods get the team's 8
    assert outside.demand_change(counted, obj, DEFAULTS) == (
        "it asks 2 Worker of 4 GPUs now, where Gangway adopted it asking 2 Worker of 4 GPUs, 1 CPU, 32 GiB memory")


PRODUCT = "nvidia.com/gpu.product"
A100 = "NVIDIA-A100-SXM4-80GB"


@pytest.fixture
def typed_world(fake, tiers):
    """One a100 node of 8 GPUs; team maps has 8 a100 GPUs; its namespace exists."""
    from tenants.models import GpuType, Quota
    from tests.conftest import make_team

    fake.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {PRODUCT: A100}}, "spec": {},
              "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}}})
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "maps"}})
    GpuType.objects.create(name="a100", value=A100, order=0)
    maps = make_team("maps", tiers, gpu=8, borrowing_limit=0)
    maps.quotas.all().delete()
    Quota.objects.create(team=maps, resource="gpu:a100", nominal=8, borrowing_limit=0, max_per_replica=8)


@pytest.mark.parametrize(("selected", "adopted"), [(A100, True), ("NVIDIA-B200", False)], ids=["a100", "no such type"])
def test_an_adopted_job_selecting_a_gpu_model_no_type_has_is_refused(typed_world, fake, cluster, selected, adopted):
    admission_cycle(cluster=cluster)  # the nodes known
    trial = outside_job(name="tune-x7k2", gpu=1, replicas=1)
    trial["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {PRODUCT: selected}
    fake.add(trial)
    reconcile(cluster=cluster)
    assert Job.objects.filter(cluster_name="tune-x7k2").exists() is adopted
    if not adopted:  # its own nodeSelector and Gangway's pin to the type it got could never both hold
        refusal = fake.get("TFJob", "tune-x7k2", "maps")["metadata"]["annotations"]["gangway.io/rejected"]
        assert refusal.startswith("Refused by Gangway: spec.tfReplicaSpecs.Worker.template.spec.nodeSelector."
                                  "nvidia.com/gpu.product (no GPU type has the value 'NVIDIA-B200').")  # fmt: skip
        assert "no node of the cluster's GPU types (a100) could run it" in refusal


def _trainjob_with_shm(memory: str, shm: str) -> dict:
    """A TrainJob as its owner writes it, its node pod given a /dev/shm of `shm` by the owner's runtime patch."""
    import copy

    from tests.cluster.test_outside_trainjobs import OWNER_PATCH, outside_trainjob

    obj = outside_trainjob(gpu=4, nodes=1)
    patch = copy.deepcopy(OWNER_PATCH)
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}})
    pod["containers"][0]["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
    obj["spec"]["runtimePatches"] = [patch]
    obj["spec"]["trainer"]["resourcesPerNode"]["limits"]["memory"] = memory
    return obj


def test_an_admitted_trainjob_reads_as_its_owner_wrote_it_not_as_gangways_patch_has_it(world, fake, cluster):
    from scheduling.snapshot import replica_defaults, replica_specs
    from tests.cluster.test_outside_jobs import preempt_for_urgent_work

    fake.add(_trainjob_with_shm("16Gi", "16Gi"))  # counted as 32 GiB a node: its memory and its /dev/shm
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    job = Job.objects.get(cluster_name="llama-kubectl")
    assert job.state == Job.State.ADMITTED
    admitted = fake.get("TrainJob", "llama-kubectl", "maps")  # Gangway's runtime patch now comes last
    defaults = replica_defaults(job.team)
    assert outside.demand_change(replica_specs(job, defaults), admitted, defaults) == ""
    preempt_for_urgent_work(world, cluster)  # suspended, and waiting again
    for _ in range(2):
        reconcile(cluster=cluster)
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED, job.reason  # not rejected as changed: nobody changed it


def _owner_suspends_and_edits(fake, gpu: int) -> None:
    """Its owner suspends the running object and, in the same update, asks `gpu` GPUs a Worker (the admission
    policy allows it: the object is suspended after the update); the operator deletes its pods."""
    obj = fake.get("TFJob", "bert-kubectl", "maps")
    obj["spec"]["runPolicy"]["suspend"] = True
    obj["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"] = gpu
    obj["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    fake.add(obj)
    for key in [key for key in fake.objects if key[1] == "pods"]:
        fake.objects.pop(key)


def test_a_running_job_its_owner_suspends_and_changes_gives_back_its_quota_and_is_rejected(world, fake, cluster,
                                                                                          victim):  # fmt: skip
    job = victim  # adopted, running 2 Workers of 4 GPUs on n1
    _owner_suspends_and_edits(fake, 8)

    reconcile(cluster=cluster)

    job.refresh_from_db()
    assert job.state != Job.State.RUNNING and _suspended(fake)  # not resumed, and no longer in its team's quota
    other, _ = job_submit(team=world["maps"], spec=parse_spec(spec_data(
        team="maps", name="other", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])))  # fmt: skip
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    job.refresh_from_db(), other.refresh_from_db()
    assert job.state == Job.State.REJECTED and job.reason_code == "changed_outside"
    assert "it asks 2 Worker of 8 GPUs now, where Gangway adopted it asking 2 Worker of 4 GPUs" in job.reason
    assert other.state == Job.State.ADMITTED  # the node and the quota the stopped job held are free
    said = [event.message for event in job.events.order_by("pk")]
    assert any(message.startswith("Stopped by its owner: its TFJob was suspended and changed in the cluster (it asks")
               for message in said), said
    kinds = [event.kind for event in job.events.order_by("pk")]
    assert "preempted" not in kinds and "evicted" not in kinds and kinds.count("rejected") == 1  # nobody preempted it
    assert _suspended(fake)
    rejected = fake.get("TFJob", "bert-kubectl", "maps")["metadata"]["annotations"]["gangway.io/rejected"]
    assert "was changed after Gangway adopted it" in rejected
