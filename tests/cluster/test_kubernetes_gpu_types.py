"""The Kubernetes adapter on a cluster with GPU types, over real HTTP against the fake API server: nodes come
back with their labels, the snapshot types them, and doctor checks them against the types."""

from __future__ import annotations

import dataclasses

from scheduling.cluster.base import NodeInfo, TypeLabel
from scheduling.snapshot import policy_nodes
from tests.cluster.test_kubernetes_adapter import CRDS, TENANTS, _namespace, _node, _pod

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
    fake.add(_pod("volcano-scheduler-7d9f", "volcano-system", labels={"app": "volcano-scheduler"}))
    fake.add({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "gangway-queue-required"}, "spec": {}})  # fmt: skip


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


def test_doctor_without_types_reads_no_labels(fake, cluster):
    _healthy_but_nodes(fake)
    fake.add(_labelled("n1", {PRODUCT: "Tesla-T4"}))
    fake.add(_node("n2"))

    assert cluster.doctor(TENANTS) == []
