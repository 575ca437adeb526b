"""The Kubernetes adapter on a cluster with GPU types, over real HTTP against the fake API server: nodes come
back with their labels, the snapshot types them, doctor checks them against the types, and the jobs the
loop creates are pinned to the type their admission gave."""

from __future__ import annotations

import dataclasses

from jobs.models import Job
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.cluster.base import NodeInfo, TypeLabel
from scheduling.cluster.kubernetes_outside import POLICY_VERSION, POLICY_VERSION_ANNOTATION
from scheduling.loop import admission_cycle
from scheduling.snapshot import policy_nodes
from scheduling.tenants import tenants_from_database
from tenants.models import GpuType, Quota
from tests.cluster.test_kubernetes_adapter import CRDS, JOB, TENANTS, _namespace, _node, _pod
from tests.conftest import spec_data

PRODUCT = "nvidia.com/gpu.product"
TYPES = (TypeLabel("l4", PRODUCT, "NVIDIA-L4"), TypeLabel("a100", PRODUCT, "NVIDIA-A100-SXM4-80GB"))
TYPED = dataclasses.replace(TENANTS, gpu_types=TYPES)


def _labelled(name, labels, gpu="8"):
    node = _node(name, gpu=gpu)
    node["metadata"]["labels"] = labels
    return node


def _healthy_but_nodes(fake):
    """Everything doctor asks for but the nodes."""
    for name in CRDS:
        fake.add({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                  "metadata": {"name": name}})  # fmt: skip
    fake.add(_namespace("volcano-system"))
    for team in TENANTS.teams:  # the tenant sync has run
        fake.add(_namespace(team.slug))
    fake.add(_pod("volcano-scheduler-7d9f", "volcano-system", labels={"app": "volcano-scheduler"}))
    fake.add({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "gangway-queue-required", "annotations": {POLICY_VERSION_ANNOTATION: POLICY_VERSION}},
              "spec": {}})  # fmt: skip
    fake.add({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
              "metadata": {"name": "gangway-queue-required"},
              "spec": {"policyName": "gangway-queue-required", "validationActions": ["Deny"]}})  # fmt: skip


def test_nodes_come_back_with_their_labels_sorted_by_key(fake, cluster):
    fake.add(_labelled("gpu-a", {PRODUCT: "NVIDIA-A100-SXM4-80GB", "kubernetes.io/hostname": "gpu-a"}))
    fake.add(_node("bare"))

    assert cluster.nodes() == [
        NodeInfo("bare", 8, 64000, 256 * 2**30),
        NodeInfo("gpu-a", 8, 64000, 256 * 2**30,
                 labels=(("kubernetes.io/hostname", "gpu-a"), (PRODUCT, "NVIDIA-A100-SXM4-80GB"))),
    ]  # fmt: skip


def test_the_snapshot_types_each_node_by_its_labels(fake, cluster):
    fake.add(_labelled("gpu-a", {PRODUCT: "NVIDIA-A100-SXM4-80GB"}))
    fake.add(_labelled("gpu-l", {PRODUCT: "NVIDIA-L4"}))
    fake.add(_labelled("gpu-t", {PRODUCT: "Tesla-T4"}))
    fake.add(_labelled("cpu-1", {PRODUCT: "NVIDIA-L4"}, gpu=None))  # a label without GPUs types nothing

    typed = {node.name: node.gpu_type for node in policy_nodes(cluster.nodes(), TYPES)}

    assert typed == {"cpu-1": None, "gpu-a": "a100", "gpu-l": "l4", "gpu-t": None}
    assert {node.name: node.gpu_type for node in policy_nodes(cluster.nodes(), ())} == dict.fromkeys(typed)


def test_doctor_finds_nothing_when_every_gpu_node_carries_a_type(fake, cluster):
    _healthy_but_nodes(fake)
    fake.add(_labelled("n1", {PRODUCT: "NVIDIA-L4"}))
    fake.add(_labelled("n2", {PRODUCT: "NVIDIA-A100-SXM4-80GB"}))

    assert cluster.doctor(TYPED) == []


def test_doctor_names_gpu_nodes_no_type_matches_and_notes_a_type_no_node_carries(fake, cluster):
    _healthy_but_nodes(fake)
    fake.add(_labelled("n1", {PRODUCT: "NVIDIA-L4"}))
    fake.add(_labelled("n2", {PRODUCT: "Tesla-T4"}))
    fake.add(_labelled("n3", {"zone": "eu-1"}))

    problem, note = cluster.doctor(TYPED)

    assert problem.blocking and problem.problem == (
        "2 GPU node(s) match no GPU type, so no job is ever placed on their 16 GPUs: "
        "n2 (nvidia.com/gpu.product=Tesla-T4); n3 (no nvidia.com/gpu.product label)."
    )
    assert "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB for a100" in problem.fix
    assert not note.blocking and "GPU type a100" in note.problem


def test_doctor_finds_a_types_nominals_above_its_nodes_though_the_total_fits(fake, cluster):
    _healthy_but_nodes(fake)
    fake.add(_labelled("n1", {PRODUCT: "NVIDIA-L4"}))
    fake.add(_labelled("n2", {PRODUCT: "NVIDIA-A100-SXM4-80GB"}))
    teams = tuple(dataclasses.replace(team, type_nominal={"a100": 6, "l4": 2}) for team in TYPED.teams)

    [finding] = cluster.doctor(dataclasses.replace(TYPED, teams=teams))

    assert finding.blocking and finding.problem == (
        "Nominal a100 GPU quotas add up to 12 but the schedulable a100 nodes have 8, so not every team "
        "can get its guaranteed share of a100."
    )
    assert finding.fix == ("Lower the nominal gpu:a100 quotas, or add or label a100 nodes "
                           "(nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB).")


def test_doctor_without_types_reads_no_labels(fake, cluster):
    _healthy_but_nodes(fake)
    fake.add(_labelled("n1", {PRODUCT: "Tesla-T4"}))
    fake.add(_node("n2"))

    assert cluster.doctor(TENANTS) == []


def _pins(template: dict) -> list[dict]:
    affinity = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [e for term in affinity["nodeSelectorTerms"] for e in term["matchExpressions"]]


def test_a_job_preempted_on_one_type_and_resumed_on_another_is_pinned_to_the_new_one(fake, cluster):
    fake.add(_namespace("maps"))
    on_a100 = dataclasses.replace(JOB, gpu_type="a100", gpu_type_label=(PRODUCT, "NVIDIA-A100-SXM4-80GB"))
    cluster.create_job(on_a100)
    cluster.suspend_job(on_a100)

    cluster.create_job(dataclasses.replace(JOB, attempt=2, gpu_type="l4", gpu_type_label=(PRODUCT, "NVIDIA-L4")))

    resumed = fake.get("TFJob", "resnet-g12", "maps")
    assert resumed["spec"]["runPolicy"]["suspend"] is False
    assert _pins(resumed["spec"]["tfReplicaSpecs"]["Worker"]["template"]) == [
        {"key": PRODUCT, "operator": "In", "values": ["NVIDIA-L4"]}]
    assert resumed["metadata"]["labels"]["gangway.io/gpu-type"] == "l4"


def test_the_loop_creates_a_job_pinned_to_its_type_and_the_sync_caps_all_types(fake, cluster, maps, owner):
    fake.add(_labelled("n1", {PRODUCT: "NVIDIA-A100-SXM4-80GB"}))
    fake.add(_labelled("n2", {PRODUCT: "NVIDIA-L4"}))
    fake.add(_namespace("maps"))
    for order, gpu_type in enumerate(TYPES):
        GpuType.objects.create(name=gpu_type.name, value=gpu_type.value, order=order)
    maps.quotas.all().delete()
    for name in ("l4", "a100"):
        Quota.objects.create(team=maps, resource=f"gpu:{name}", nominal=4, borrowing_limit=4)
    spec = parse_spec(spec_data(team="maps", replicas=[{"role": "Worker", "count": 2, "gpu": 2}]))
    job, _ = job_submit(team=maps, owner=owner, spec=spec)
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])

    admission_cycle(cluster=cluster)
    cluster.sync_tenants(tenants_from_database())

    (created,) = fake.list("TFJob")
    for group in created["spec"]["tfReplicaSpecs"].values():
        assert _pins(group["template"]) == [{"key": PRODUCT, "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]}]
    assert created["metadata"]["labels"]["gangway.io/gpu-type"] == "a100"
    quota = fake.get("ResourceQuota", "gangway-quota", "maps")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "16"
