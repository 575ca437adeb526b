"""A partial drain through the loop, over real HTTP to the fake API server: nodes that take no new pods.

The largest node is cordoned (or tainted) for, say, a driver upgrade. A job only it could hold is
neither refused at submission nor rejected by a cycle (R10: it could fit later): it waits, its reason
naming the node, and starts there once the node takes pods again. Nothing is placed there meanwhile.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from jobs.models import Job
from jobs.services import NeverFits, job_submit
from jobs.spec import parse_spec
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.models import ClusterNode, SimNode
from scheduling.tenants import tenants_from_database
from tests.conftest import make_team, spec_data


def _node(name, gpu, **spec):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec,
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpu)}}}


CORDONED = {"unschedulable": True, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}


@pytest.fixture
def drained(fake, tiers, owner):
    """Two nodes of 4 GPUs and one of 8, cordoned; team big may use 64 GPUs, so only the nodes limit it.
    One cycle has read the nodes, as before any submission the fit preview and R10 read."""
    fake.add(_node("small-1", 4))
    fake.add(_node("small-2", 4))
    fake.add(_node("large", 8, **CORDONED))
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "big"}})
    team = make_team("big", tiers, gpu=64)

    def submit(name: str, replicas: list[dict]) -> Job:
        job, _ = job_submit(team=team, owner=owner, spec=parse_spec(spec_data(team="big", name=name, replicas=replicas)))
        return job

    return submit


def test_a_job_only_a_cordoned_node_could_hold_waits_naming_it_and_starts_once_uncordoned(drained, cluster, fake):
    admission_cycle(cluster=cluster)

    large = drained("whole-node", [{"role": "Worker", "count": 1, "gpu": 8}])  # not refused: it could fit later
    small = drained("half-node", [{"role": "Worker", "count": 1, "gpu": 4}])
    admission_cycle(cluster=cluster)

    large.refresh_from_db()
    small.refresh_from_db()
    assert (large.state, large.reason_code) == (Job.State.QUEUED, "unschedulable")
    assert large.reason == "Waiting for nodes that take no new pods: only large (cordoned) could hold a replica of 8 GPUs."
    assert (small.state, small.placement) == (Job.State.ADMITTED, ["small-1"])  # never on the cordoned node
    assert dict(ClusterNode.objects.values_list("name", "unschedulable")) == {
        "large": "cordoned", "small-1": "", "small-2": ""}

    fake.add(_node("large", 8))  # kubectl uncordon
    admission_cycle(cluster=cluster)

    large.refresh_from_db()
    assert (large.state, large.placement) == (Job.State.ADMITTED, ["large"])
    assert ClusterNode.objects.get(name="large").unschedulable == ""


def test_a_tainted_node_is_named_with_its_taint(drained, cluster, fake):
    fake.add(_node("large", 8, taints=[{"key": "nvidia.com/gpu.upgrade", "effect": "NoExecute"}]))
    admission_cycle(cluster=cluster)
    job = drained("whole-node", [{"role": "Worker", "count": 1, "gpu": 8}])

    admission_cycle(cluster=cluster)

    job.refresh_from_db()
    assert (job.state, job.reason) == (Job.State.QUEUED, "Waiting for nodes that take no new pods: only large "
                                                         "(tainted nvidia.com/gpu.upgrade) could hold a replica of 8 GPUs.")


def test_a_job_too_large_even_for_the_cordoned_node_is_still_refused(drained, cluster):
    admission_cycle(cluster=cluster)

    with pytest.raises(NeverFits) as refused:
        drained("two-nodes-at-once", [{"role": "Worker", "count": 3, "gpu": 8}])

    assert refused.value.code == "never_placeable"


# -- the simulated cluster: `manage.py cordon` ------------------------------------

def _run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def simulated(tiers, owner):
    SimNode.objects.create(name="small", gpu=4)
    SimNode.objects.create(name="large", gpu=8)
    team = make_team("big", tiers, gpu=64)

    def submit(name: str, gpu: int) -> Job:
        spec = spec_data(team="big", name=name, replicas=[{"role": "Worker", "count": 1, "gpu": gpu}])
        job, _ = job_submit(team=team, owner=owner, spec=parse_spec(spec))
        return job

    return submit


def test_a_cordoned_simulated_node_is_reported_so_and_takes_no_new_job_until_uncordoned(simulated):
    cluster = SimulatedCluster()
    assert "Cordoned node large" in _run("cordon", "large")
    assert [(node.name, node.unschedulable) for node in cluster.nodes()] == [("large", "cordoned"), ("small", "")]
    admission_cycle(cluster=cluster)

    job = simulated("whole-node", 8)
    admission_cycle(cluster=cluster)
    job.refresh_from_db()
    assert (job.state, job.reason_code) == (Job.State.QUEUED, "unschedulable")

    assert "Uncordoned node large" in _run("cordon", "large", "--uncordon")
    admission_cycle(cluster=cluster)
    job.refresh_from_db()
    assert (job.state, job.placement) == (Job.State.ADMITTED, ["large"])


def test_cordon_names_the_nodes_when_it_does_not_know_one_and_changes_nothing(simulated):
    with pytest.raises(CommandError, match="No node 'huge' in the simulated cluster; its nodes are large, small."):
        _run("cordon", "huge")
    assert list(SimNode.objects.filter(schedulable=False)) == []
    assert "was already uncordoned; nothing changed" in _run("cordon", "small", "--uncordon")


def test_cordon_acts_on_the_simulated_cluster_only(simulated, settings):
    settings.CLUSTER_BACKEND = "kubernetes"
    with pytest.raises(CommandError, match="run kubectl cordon, drain or uncordon"):
        _run("cordon", "large")
    with pytest.raises(CommandError, match="run kubectl cordon, drain or uncordon"):
        _run("cordon", "large", "--drain")
    assert SimNode.objects.get(name="large").schedulable


def test_doctor_of_the_simulated_cluster_says_when_every_node_is_cordoned(simulated):
    _run("cordon", "large")
    _run("cordon", "small")

    findings = SimulatedCluster().doctor(tenants_from_database())

    assert [(f.problem, f.fix) for f in findings][0] == (
        "None of the 2 nodes of the simulated cluster accepts jobs: all are cordoned.",
        "Uncordon them (`manage.py cordon --uncordon NODE`).")
    # and its quota check counts the GPUs of the nodes that take jobs, as on Kubernetes
    assert "Teams' nominal GPU quotas sum to 72, above the 0 GPUs of the cluster." in [f.problem for f in findings]
