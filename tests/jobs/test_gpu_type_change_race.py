"""A submission naming a GPU type while an admin renames or deletes that type (real PostgreSQL, two
connections): the type service refuses while open jobs name the type, so either the job is queued and
the change refused, or the change is made and the submission refused by its gpu_type field; never a
queued job naming a type the cluster no longer has."""

from __future__ import annotations

import threading

import pytest

from jobs import services
from jobs.models import Job, JobEvent
from jobs.services import job_submit
from jobs.spec import SpecError, parse_spec
from tenants.models import GpuType
from tenants.services import GpuTypeRefused, gpu_type_delete, gpu_type_update
from tests.conftest import spec_data
from tests.together import run_together

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def checked_then_changed(monkeypatch):
    """The submission checks its types, then waits (at most a few seconds) for the admin's change to commit."""
    changed = threading.Event()
    check = services.gpu_type_problem
    calls = []

    def check_then_wait(spec):
        problem = check(spec)
        calls.append(problem)
        if len(calls) == 1:
            changed.wait(timeout=5)
        return problem

    monkeypatch.setattr(services, "gpu_type_problem", check_then_wait)
    return changed


@pytest.mark.parametrize("change", ["rename", "delete"])
def test_a_type_changed_while_a_job_naming_it_is_submitted_leaves_no_job_naming_a_missing_type(
        change, gpu_types, maps, vision, owner, staff, checked_then_changed):
    if change == "delete":  # only a type no quota names may go
        maps.quotas.filter(resource="gpu:a100").delete()
        vision.quotas.filter(resource="gpu:a100").delete()
    outcomes: dict[str, str] = {}

    def submit() -> None:
        try:
            job_submit(team=maps, spec=parse_spec(spec_data(gpu_type=["a100"])), owner=owner)
            outcomes["submit"] = "queued"
        except SpecError as error:
            outcomes["submit"] = error.errors["gpu_type"][0]

    def change_type() -> None:
        try:
            if change == "rename":
                gpu_type_update(gpu_type=gpu_types["a100"], actor=staff, name="a100x")
            else:
                gpu_type_delete(gpu_type=gpu_types["a100"], actor=staff)
            outcomes["change"] = "made"
        except GpuTypeRefused:
            outcomes["change"] = "refused"
        finally:
            checked_then_changed.set()

    assert run_together(submit, change_type, timeout=30) == []
    names = set(GpuType.objects.values_list("name", flat=True))
    named = {name for job in Job.objects.all() for name in job.gpu_type}
    assert named <= names, f"a queued job names {named - names}, which the cluster no longer has ({outcomes})"
    # The fixture holds the submission between its first check and its transaction until the change
    # commits: the change is made, and the submission, reading the types again, is refused.
    assert outcomes["change"] == "made"
    assert outcomes["submit"] == "No GPU type a100 on this cluster; its types are " + ", ".join(
        GpuType.objects.order_by("order", "name").values_list("name", flat=True)) + "."
    assert not Job.objects.exists() and not JobEvent.objects.exists()
