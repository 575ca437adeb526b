"""GpuTypeAdmin against another person's change at the same moment (real PostgreSQL, two connections): what
its form checks holds until its save commits, so the service never refuses a save the form passed (which the
admin could only answer with a 500)."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client

from jobs.services import job_submit
from jobs.spec import SpecError, parse_spec
from tenants import admin as tenants_admin
from tenants.models import GpuType
from tests.conftest import spec_data
from tests.page_forms import opened

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root():
    client = Client(raise_request_exception=False)
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


def _meanwhile(work) -> tuple[threading.Thread, list]:
    """Runs `work` on a connection of its own; returns the thread and what it returned or raised."""
    outcome: list = []

    def run():
        try:
            outcome.append(work())
        except Exception as error:  # noqa: BLE001  (what it raised is the outcome)
            outcome.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_job_asking_for_a_type_being_renamed_waits_for_the_rename(root, gpu_types, maps, owner, monkeypatch):
    a100 = gpu_types["a100"]
    url = f"/admin/tenants/gputype/{a100.pk}/change/"
    page = opened(root, url)
    check = tenants_admin.gpu_type_rename_problem
    started = []

    def checked_while_a_job_comes(gpu_type, name):
        thread, outcome = _meanwhile(lambda: job_submit(team=maps, owner=owner,
                                                        spec=parse_spec(spec_data(gpu_type=["a100"]))))  # fmt: skip
        thread.join(timeout=1)
        started.append((thread, outcome))
        assert thread.is_alive()  # its insert waits for the team locks the rename holds
        return check(gpu_type, name)

    monkeypatch.setattr(tenants_admin, "gpu_type_rename_problem", checked_while_a_job_comes)
    response = root.post(url, page | {"name": "a100-80gb"})
    (thread, outcome), = started
    thread.join(timeout=10)
    assert response.status_code == 302
    assert GpuType.objects.get(pk=a100.pk).name == "a100-80gb"
    assert isinstance(outcome[0], SpecError)  # the job then asks for a type the cluster no longer has: refused


def test_a_type_another_admin_adds_at_the_same_moment_is_refused_on_their_form(root, maps, monkeypatch):
    form = {"name": "h100", "label": "nvidia.com/gpu.product", "value": "NVIDIA-H100-80GB-HBM3", "order": 3,
            "description": ""}  # fmt: skip
    check = tenants_admin.GpuTypeForm.validate_unique
    other = Client(raise_request_exception=False)
    other.force_login(get_user_model().objects.create_superuser("root2", "root2@example.com", "pw"))
    started = []

    def checked_while_another_admin_adds_it(self):
        check(self)  # no h100 yet
        if not started:  # the first admin's check: the second admin posts the same type meanwhile
            thread, outcome = _meanwhile(lambda: other.post("/admin/tenants/gputype/add/", form))
            thread.join(timeout=1)
            started.append((thread, outcome))
            assert thread.is_alive()  # its form waits for the locks this one holds until its save commits

    monkeypatch.setattr(tenants_admin.GpuTypeForm, "validate_unique", checked_while_another_admin_adds_it)
    response = root.post("/admin/tenants/gputype/add/", form)
    (thread, outcome), = started
    thread.join(timeout=10)
    assert response.status_code == 302
    assert outcome[0].status_code == 200 and "already exists" in outcome[0].content.decode()
    assert GpuType.objects.filter(name="h100").count() == 1
