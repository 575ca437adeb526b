"""A job admitted on a GPU type is pinned to that type's nodes: the manifests of every layout, their resume
patches and the admission patches of adopted jobs, checked against the SDK models where they exist."""

from __future__ import annotations

import dataclasses
import json

import pytest
from kubeflow.training.api_client import ApiClient

from scheduling.cluster import job_manifests, manifests, outside, trainjob_manifests
from scheduling.cluster.base import ClusterJob, ReplicaSpec
from scheduling.cluster.simulated_outside import merge

UNMARKED = {"gangway.io/suspended-by": None}  # an admission or resume removes the mark of Gangway's suspend

GiB = 2**30
A100 = ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB")
L4 = ("nvidia.com/gpu.product", "NVIDIA-L4")
PIN_A100 = {"key": A100[0], "operator": "In", "values": [A100[1]]}
PIN_L4 = {"key": L4[0], "operator": "In", "values": [L4[1]]}
SDK_MODELS = {"TFJob": "KubeflowOrgV1TFJob", "PyTorchJob": "KubeflowOrgV1PyTorchJob"}
ROLES = {"TFJob": ("Chief", "PS", "Worker"), "PyTorchJob": ("Master", "Worker")}


def _job(kind="TFJob", **overrides) -> ClusterJob:
    replicas = tuple(ReplicaSpec(role=role, count=2, gpu=0 if role == "PS" else 1, cpu=1000, memory=GiB)
                     for role in ROLES.get(kind, ("Node",)))  # fmt: skip
    fields = dict(job_id=12, name="resnet-g12", namespace="maps", team="maps", kind=kind, image="busybox",
                  command=(), args=(), env=(), replicas=replicas, tier="standard", grace_period=60, max_runtime=None,
                  runtime="torch-distributed" if kind == "TrainJob" else "")  # fmt: skip
    fields.update(overrides)
    return ClusterJob(**fields)


def _a100(job: ClusterJob) -> ClusterJob:
    return dataclasses.replace(job, gpu_type="a100", gpu_type_label=A100)


class _Response:
    def __init__(self, obj: dict):
        self.data = json.dumps(obj)


def _sdk_round_trip(manifest: dict) -> None:
    client = ApiClient()
    parsed = client.deserialize(_Response(manifest), SDK_MODELS[manifest["kind"]])
    assert client.sanitize_for_serialization(parsed) == manifest


def _templates(manifest: dict) -> dict:
    key = {"TFJob": "tfReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs"}[manifest["kind"]]
    return {role: group["template"] for role, group in manifest["spec"][key].items()}


def _terms(pod_spec: dict) -> list[dict]:
    return pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def _gangway_pod(manifest: dict) -> dict:
    (patch,) = [p for p in manifest["spec"]["runtimePatches"] if p["manager"] == trainjob_manifests.PATCH_MANAGER]
    (replicated,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]["template"]


# -- Gangway's own jobs ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["TFJob", "PyTorchJob"])
def test_every_replica_group_is_pinned_to_the_types_nodes_and_the_sdk_reads_it(kind):
    manifest = job_manifests.job_manifest(_a100(_job(kind)))

    _sdk_round_trip(manifest)
    assert manifest["metadata"]["labels"]["gangway.io/gpu-type"] == "a100"
    for role, template in _templates(manifest).items():
        # A TFJob's parameter servers have no GPU and are pinned too: the policy placed the gang on a100 nodes.
        assert _terms(template["spec"]) == [{"matchExpressions": [PIN_A100]}], role
        assert template["metadata"]["labels"]["gangway.io/gpu-type"] == "a100"
    assert job_manifests.replica_terms(manifest) == [[{"matchExpressions": [PIN_A100]}]] * len(ROLES[kind])


@pytest.mark.parametrize("kind", ["TFJob", "PyTorchJob", "TrainJob"])
def test_a_job_without_a_type_has_no_affinity_and_no_type_label(kind):
    manifest = job_manifests.job_manifest(_job(kind))

    assert "affinity" not in json.dumps(manifest)
    assert "gangway.io/gpu-type" not in json.dumps(manifest)
    assert all(terms == [] for terms in job_manifests.replica_terms(manifest))


def test_a_resumed_training_job_is_pinned_to_the_type_of_its_new_admission():
    patch = job_manifests.resume_patch(dataclasses.replace(_job(), gpu_type="l4", gpu_type_label=L4))

    assert patch["metadata"] == {"labels": {"gangway.io/gpu-type": "l4"}, "annotations": UNMARKED}
    for group in patch["spec"]["tfReplicaSpecs"].values():
        assert _terms(group["template"]["spec"]) == [{"matchExpressions": [PIN_L4]}]
    assert job_manifests.resume_patch(_job())["metadata"] == {"annotations": UNMARKED}


def test_a_trainjob_pins_its_nodes_through_gangways_runtime_patch():
    manifest = job_manifests.job_manifest(_a100(_job("TrainJob")))
    pod = _gangway_pod(manifest)

    assert _terms(pod["spec"]) == [{"matchExpressions": [PIN_A100]}]
    assert pod["metadata"]["labels"]["gangway.io/gpu-type"] == "a100"
    assert manifest["metadata"]["labels"]["gangway.io/gpu-type"] == "a100"
    assert job_manifests.replica_terms(manifest) == [[{"matchExpressions": [PIN_A100]}]]


def test_a_resumed_trainjob_sends_its_runtime_patch_again_with_the_new_type_and_the_same_volumes():
    first = job_manifests.job_manifest(_a100(_job("TrainJob", checkpoint_claim="ckpt")))
    on_l4 = dataclasses.replace(_job("TrainJob", checkpoint_claim="ckpt"), gpu_type="l4", gpu_type_label=L4)

    patch = job_manifests.resume_patch(on_l4)

    assert patch["spec"]["suspend"] is False and "trainer" not in patch["spec"]  # trainer is immutable
    resumed = merge(first, patch)
    assert _terms(_gangway_pod(resumed)["spec"]) == [{"matchExpressions": [PIN_L4]}]
    # The patch's volumes may not change once created: they are sent back as they were.
    assert _gangway_pod(resumed)["spec"]["volumes"] == _gangway_pod(first)["spec"]["volumes"]
    assert resumed["metadata"]["labels"]["gangway.io/gpu-type"] == "l4"


def test_the_types_expression_joins_each_of_the_owners_terms_and_replaces_one_on_the_same_label():
    owner_terms = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["eu-1"]},
                              {"key": A100[0], "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-7"]}]},
    ]  # fmt: skip

    affinity = manifests.type_affinity(_a100(_job()), owner_terms)

    assert _terms({"affinity": affinity}) == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["eu-1"]}, PIN_A100]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-7"]}], "matchExpressions": [PIN_A100]},
    ]
    assert manifests.type_affinity(_job(), owner_terms) == {}


# -- adopted jobs ----------------------------------------------------------------------------------------------

def _kubectl_tfjob(affinity: dict | None = None) -> dict:
    pod: dict = {"containers": [{"name": "tensorflow", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    if affinity:
        pod["affinity"] = affinity
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": {"name": "resnet-g12", "namespace": "maps", "labels": {"gangway.io/queue": "maps"}},
            "spec": {"runPolicy": {"suspend": True}, "tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": pod}}}}}  # fmt: skip


def _worker_job(**overrides) -> ClusterJob:
    return _job(replicas=(ReplicaSpec("Worker", 2, 1, 1000, GiB),), adopted=True, **overrides)


def test_admitting_an_adopted_job_pins_it_and_keeps_the_owners_other_affinities():
    zone = {"key": "zone", "operator": "In", "values": ["eu-1"]}
    spread = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}}  # fmt: skip
    current = _kubectl_tfjob({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [zone]}]}}, **spread})  # fmt: skip
    job = _worker_job(gpu_type="a100", gpu_type_label=A100)

    admitted = merge(current, outside.admission_patch(job, current))

    _sdk_round_trip(admitted)
    pod = admitted["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    assert _terms(pod["spec"]) == [{"matchExpressions": [zone, PIN_A100]}]
    assert pod["spec"]["affinity"]["podAntiAffinity"] == spread["podAntiAffinity"]
    assert pod["metadata"]["labels"]["gangway.io/gpu-type"] == "a100"
    assert admitted["metadata"]["labels"]["gangway.io/gpu-type"] == "a100"


def test_readmitting_an_adopted_job_on_another_type_moves_its_pin():
    job = _worker_job(gpu_type="a100", gpu_type_label=A100)
    first = merge(_kubectl_tfjob(), outside.admission_patch(job, _kubectl_tfjob()))
    again = dataclasses.replace(job, gpu_type="l4", gpu_type_label=L4)

    moved = merge(first, outside.admission_patch(again, first))

    assert _terms(moved["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]) == [{"matchExpressions": [PIN_L4]}]
    assert moved["metadata"]["labels"]["gangway.io/gpu-type"] == "l4"


def test_an_adopted_job_without_a_type_is_admitted_as_before():
    patch = outside.admission_patch(_worker_job(), _kubectl_tfjob())

    assert patch["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"] == {
        "schedulerName": "volcano", "priorityClassName": "standard"}
    assert patch["metadata"] == {"labels": {"gangway.io/job-id": "12"}, "annotations": UNMARKED}


def test_an_adopted_trainjobs_owner_node_terms_are_carried_into_gangways_pinning_patch():
    zone = {"key": "zone", "operator": "In", "values": ["eu-1"]}
    owner = {"manager": "example.com/notebook", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}}}}}}}},
    ]}}}}  # fmt: skip
    current = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
               "metadata": {"name": "llama", "namespace": "maps"}, "spec": {"suspend": True, "runtimePatches": [owner]}}
    job = _job("TrainJob", replicas=(ReplicaSpec("Node", 2, 1, 1000, GiB),), adopted=True,
               gpu_type="a100", gpu_type_label=A100)  # fmt: skip

    patch = outside.admission_patch(job, current)

    assert patch["spec"]["runtimePatches"][0] == owner
    assert _terms(_gangway_pod(patch)["spec"]) == [{"matchExpressions": [zone, PIN_A100]}]
    assert job_manifests.replica_terms(merge(current, patch)) == [[{"matchExpressions": [zone, PIN_A100]}]]
