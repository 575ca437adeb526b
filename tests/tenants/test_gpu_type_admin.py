"""The admin's GPU types: listed with the nodes that carry each, and added, changed and deleted
through the GPU type services (quotas kept in step, refusals explained, every change audited)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from jobs.models import Job
from tenants.models import AuditEntry, GpuType, Quota
from tests.page_forms import opened

pytestmark = pytest.mark.django_db

FORM = {"name": "a100", "label": "nvidia.com/gpu.product", "value": "NVIDIA-A100-SXM4-80GB", "order": 2,
        "description": "80 GB"}  # fmt: skip


@pytest.fixture
def admin_client(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_it_lists_each_type_with_the_nodes_that_carry_it(admin_client, gpu_types, cycle):
    cycle()
    GpuType.objects.create(name="h100", value="NVIDIA-H100-80GB-HBM3", order=3)
    body = admin_client.get("/admin/tenants/gputype/").content.decode()
    assert "1 node, 8 GPUs" in body and "no node carries its label" in body
    assert "NVIDIA-L4" in body and "24 GB, inference and small runs" in body


def test_adding_the_first_type_turns_the_teams_gpu_quotas_into_it(admin_client, maps):
    response = admin_client.post("/admin/tenants/gputype/add/", FORM)
    assert response.status_code == 302
    assert list(maps.quotas.values_list("resource", flat=True)) == ["gpu:a100"]
    assert AuditEntry.objects.get(subject="gputype").summary == "GPU type a100 added."
    assert AuditEntry.objects.get(subject="quota", team=maps).actor.username == "root"


def test_an_invalid_name_is_shown_by_its_field(admin_client, maps):
    response = admin_client.post("/admin/tenants/gputype/add/", {**FORM, "name": "A100"})
    assert response.status_code == 200 and "Kubernetes DNS-1123 label" in response.content.decode()
    assert not GpuType.objects.exists()


def test_a_rename_renames_the_quotas(admin_client, gpu_types, maps):
    url = f"/admin/tenants/gputype/{gpu_types['a100'].pk}/change/"
    response = admin_client.post(url, opened(admin_client, url) | {"name": "a100-80gb"})
    assert response.status_code == 302
    assert set(maps.quotas.values_list("resource", flat=True)) == {"gpu:l4", "gpu:a100-80gb"}


def test_a_rename_while_jobs_name_the_type_is_refused_by_the_name_field(admin_client, gpu_types, submit):
    job = submit()
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    a100 = gpu_types["a100"]
    url = f"/admin/tenants/gputype/{a100.pk}/change/"
    response = admin_client.post(url, opened(admin_client, url) | {"name": "a100-80gb"})
    assert response.status_code == 200
    assert f"while 1 queued or running job (#{job.pk}) ask for it" in response.content.decode()
    assert GpuType.objects.get(pk=a100.pk).name == "a100"


def test_a_delete_that_quotas_stop_is_explained_and_refused(admin_client, gpu_types):
    a100 = gpu_types["a100"]
    page = admin_client.get(f"/admin/tenants/gputype/{a100.pk}/delete/").content.decode()
    assert "the gpu:a100 quota of teams maps and vision name it" in page
    admin_client.post(f"/admin/tenants/gputype/{a100.pk}/delete/", {"post": "yes"})
    assert GpuType.objects.filter(pk=a100.pk).exists()


def test_deleting_the_last_type_turns_its_quotas_back_into_gpu(admin_client, maps):
    admin_client.post("/admin/tenants/gputype/add/", FORM)
    a100 = GpuType.objects.get()
    response = admin_client.post(f"/admin/tenants/gputype/{a100.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not GpuType.objects.exists()
    assert list(maps.quotas.values_list("resource", flat=True)) == ["gpu"]
    assert AuditEntry.objects.filter(subject="gputype").first().summary == "GPU type a100 deleted."


def test_a_quota_row_offers_only_the_resources_the_cluster_has(admin_client, gpu_types, maps):
    quota = Quota.objects.get(team=maps, resource="gpu:a100")
    body = admin_client.get(f"/admin/tenants/quota/{quota.pk}/change/").content.decode()
    assert '<option value="gpu:l4"' in body and '<option value="gpu"' not in body
    response = admin_client.post(f"/admin/tenants/quota/{quota.pk}/change/", {
        "team": maps.pk, "resource": "gpu:h100", "nominal": 1, "borrowing_limit": "", "lending_limit": "",
        "max_per_replica": "", "default_per_replica": ""})  # fmt: skip
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert Quota.objects.get(pk=quota.pk).resource == "gpu:a100"


@pytest.mark.parametrize("persona", ["member", "outsider"])
def test_people_without_admin_access_are_sent_to_the_admin_login(client, gpu_types, persona, request):
    client.force_login(request.getfixturevalue(persona))
    for url in ("/admin/tenants/gputype/", "/admin/tenants/gputype/add/",
                f"/admin/tenants/gputype/{gpu_types['a100'].pk}/delete/"):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_staff_without_the_permission_cannot_change_types(client, gpu_types, staff):
    client.force_login(staff)
    assert client.get("/admin/tenants/gputype/").status_code == 403
    assert client.post("/admin/tenants/gputype/add/", {**FORM, "name": "h100", "value": "H"}).status_code == 403
    assert not GpuType.objects.filter(name="h100").exists()
