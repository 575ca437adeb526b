"""doctor on a cluster with GPU types (the simulated one: node-01 a100, node-02 l4): GPU nodes no type matches
are a problem naming what they carry, a type no node carries is a note; without types labels mean nothing."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from scheduling.models import SimNode
from scheduling.tenants import tenants_from_database
from tenants.models import GpuType
from tests.conftest import A100_LABEL


def test_doctor_names_a_gpu_node_no_type_matches_with_the_labels_expected_and_seen(gpu_types, cluster):
    SimNode.objects.create(name="node-03", gpu=4, labels={A100_LABEL[0]: "Tesla-T4"})
    SimNode.objects.create(name="node-04", gpu=8)
    SimNode.objects.create(name="cpu-01", gpu=0)  # no GPUs: no type expected

    problems = [f for f in cluster.doctor(tenants_from_database()) if f.blocking]

    assert [f.problem for f in problems] == [
        "2 GPU node(s) match no GPU type, so no job is ever placed on their 12 GPUs: "
        "node-03 (nvidia.com/gpu.product=Tesla-T4); node-04 (no nvidia.com/gpu.product label)."
    ]
    assert problems[0].fix == (
        "Label each with its type (nvidia.com/gpu.product=NVIDIA-L4 for l4, "
        "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB for a100), or add a GPU type for the value it carries."
    )


def test_doctor_notes_a_gpu_type_no_node_carries(gpu_types, cluster):
    GpuType.objects.create(name="h100", value="NVIDIA-H100-80GB-HBM3", order=3)

    (note,) = cluster.doctor(tenants_from_database())

    assert not note.blocking
    assert note.problem == ("No schedulable GPU node carries nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, "
                            "so jobs that accept only GPU type h100 wait until one does.")  # fmt: skip


def test_doctor_finds_a_types_nominals_above_its_nodes_and_the_command_fails(gpu_types, maps):
    maps.quotas.filter(resource=gpu_types["a100"].resource).update(nominal=6)  # 6 + vision's 4 > 8 a100
    maps.quotas.filter(resource=gpu_types["l4"].resource).update(nominal=2)  # in all 16, the GPUs the nodes have
    out = io.StringIO()

    with pytest.raises(SystemExit) as stopped:
        call_command("doctor", stdout=out)

    assert stopped.value.code == 1
    assert ("- Nominal a100 GPU quotas add up to 10 but the schedulable a100 nodes have 8, so not every team "
            "can get its guaranteed share of a100. Fix: Lower the nominal gpu:a100 quotas, or add or label "
            "a100 nodes (nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB).") in out.getvalue()
    assert "l4 GPU quotas" not in out.getvalue()


def test_doctor_without_types_ignores_labels(maps, cluster):
    SimNode.objects.create(name="node-03", gpu=8, labels={A100_LABEL[0]: "Tesla-T4"})

    assert cluster.doctor(tenants_from_database()) == []


def test_the_doctor_command_fails_naming_the_node_and_passes_once_it_is_labelled(gpu_types):
    node = SimNode.objects.create(name="node-03", gpu=8)
    out = io.StringIO()

    with pytest.raises(SystemExit) as stopped:
        call_command("doctor", stdout=out)

    assert stopped.value.code == 1
    assert "node-03 (no nvidia.com/gpu.product label)" in out.getvalue()
    node.labels = dict([A100_LABEL])
    node.save()
    out = io.StringIO()
    call_command("doctor", stdout=out)
    assert out.getvalue().rstrip().endswith("All checks passed.")
