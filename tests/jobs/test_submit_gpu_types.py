"""Submitting a job that asks for GPU types: the cluster's types are checked at submission, R10
names each type's limit, and the fit preview says which type the job would get."""

from __future__ import annotations

import pytest

from jobs.models import Job
from jobs.services import IdempotencyConflict, NeverFits, job_submit
from jobs.spec import SpecError, parse_spec
from scheduling.preview import fit_preview
from tenants.models import GpuType, Quota
from tests.conftest import spec_data

pytestmark = pytest.mark.django_db


def spec(**overrides):
    return parse_spec(spec_data(**overrides))


def test_it_stores_the_types_in_the_order_asked(gpu_types, maps, owner, cycle):
    job, created = job_submit(team=maps, spec=spec(gpu_type=["a100", "l4"]), owner=owner)
    assert created and Job.objects.get(pk=job.pk).gpu_type == ["a100", "l4"]


def test_it_refuses_an_unknown_type_naming_the_clusters_types(gpu_types, maps, owner):
    with pytest.raises(SpecError) as error:
        job_submit(team=maps, spec=spec(gpu_type=["a100", "h100"]), owner=owner)
    assert error.value.errors == {"gpu_type": ["No GPU type h100 on this cluster; its types are l4, a100."]}
    assert not Job.objects.exists()


def test_it_names_every_unknown_type(gpu_types, maps, owner):
    with pytest.raises(SpecError) as error:
        job_submit(team=maps, spec=spec(gpu_type=["t4", "h100"]), owner=owner)
    assert error.value.errors["gpu_type"] == ["No GPU types t4, h100 on this cluster; its types are l4, a100."]


def test_it_refuses_a_type_on_a_cluster_without_types(nodes, maps, owner):
    with pytest.raises(SpecError) as error:
        job_submit(team=maps, spec=spec(gpu_type="a100"), owner=owner)
    assert error.value.errors["gpu_type"] == [
        "This cluster has no GPU types (its GPUs are all of one kind), so it cannot honour a100; leave gpu_type out."
    ]
    assert not Job.objects.exists()


def test_a_retry_with_the_same_key_and_other_types_is_a_conflict(gpu_types, maps, owner):
    job_submit(team=maps, spec=spec(gpu_type="a100"), owner=owner, idempotency_key="ci-1")
    assert job_submit(team=maps, spec=spec(gpu_type="a100"), owner=owner, idempotency_key="ci-1")[1] is False
    with pytest.raises(IdempotencyConflict):
        job_submit(team=maps, spec=spec(gpu_type="l4"), owner=owner, idempotency_key="ci-1")


def test_a_job_too_large_for_every_type_it_accepts_is_rejected_naming_each_types_limit(gpu_types, maps, owner, cycle):
    cycle()  # the node mirror R10 reads
    too_big = spec(gpu_type=["a100", "l4"], replicas=[{"role": "Worker", "count": 2, "gpu": 8}])
    with pytest.raises(NeverFits) as error:
        job_submit(team=maps, spec=too_big, owner=owner)
    reason = error.value.reason
    # The same limit on both types: said once, naming both in the job's order.
    assert reason == "a100, l4: Requested 16 GPUs; team maps may use at most 8 (4 nominal + 4 borrowable)."
    assert not Job.objects.exists()


def test_a_job_of_a_type_no_node_carries_yet_waits_for_its_nodes(gpu_types, maps, owner, cycle):
    # An admin defines the type and gives quota before any node is labelled with it (or drains them all).
    h100 = GpuType.objects.create(name="h100", value="NVIDIA-H100-80GB-HBM3", order=3)
    Quota.objects.create(team=maps, resource=h100.resource, nominal=8, max_per_replica=8)
    cycle()
    job, created = job_submit(team=maps, spec=spec(gpu_type="h100"), owner=owner)
    assert created
    cycle()
    job = Job.objects.get(pk=job.pk)
    assert (job.state, job.reason_code) == (Job.State.QUEUED, "no_room")


def test_a_job_that_fits_one_of_its_types_is_accepted(gpu_types, maps, owner, cycle):
    cycle()
    job, created = job_submit(team=maps, spec=spec(gpu_type=["a100", "l4"],
                                                   replicas=[{"role": "Worker", "count": 1, "gpu": 8}]), owner=owner)  # fmt: skip
    assert created and job.state == "queued"


def test_the_fit_preview_says_which_type_the_job_would_get(gpu_types, maps, cycle, tiers):
    cycle()
    preview = fit_preview(team=maps, spec=spec(gpu_type=["a100", "l4"]), tier=tiers["standard"])
    assert (preview.outcome, preview.message) == ("starts_now", "Starts now on a100 GPUs (node-01).")


def test_the_fit_preview_of_a_job_naming_no_type_says_the_cheapest_it_would_get(gpu_types, maps, cycle, tiers):
    cycle()
    preview = fit_preview(team=maps, spec=spec(), tier=tiers["standard"])
    assert preview.message == "Starts now on l4 GPUs (node-02)."


def test_without_types_the_fit_preview_names_only_nodes(nodes, maps, cycle, tiers):
    cycle()
    assert fit_preview(team=maps, spec=spec(), tier=tiers["standard"]).message == "Starts now on node-01."
