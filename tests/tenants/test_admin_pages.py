"""The admin site: amounts read as quantities, and records only the loop writes offer no add, change or delete."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.models import Job, JobEvent
from notifications.models import Delivery, TokenNotice
from scheduling.models import ClusterNode, Cycle, CycleTotals, UsageSample
from tenants.models import Quota
from tenants.tokens import token_create

pytestmark = pytest.mark.django_db

LOOP_RECORDS = {
    "scheduling/clusternode": lambda team, job: ClusterNode.objects.create(name="n9", gpu=8, cpu=2000, memory=512 * 1024**3, seen_at=timezone.now()),
    "scheduling/cycle": lambda team, job: Cycle.objects.create(started_at=timezone.now(), duration=0.1),
    "scheduling/cycletotals": lambda team, job: CycleTotals.objects.create(cycles=3),
    "scheduling/usagesample": lambda team, job: UsageSample.objects.create(team=team, at=timezone.now(), gpu_used=2),
    "jobs/jobevent": lambda team, job: JobEvent.objects.create(job=job, kind=JobEvent.Kind.SUBMITTED, message="Submitted."),
    "notifications/delivery": lambda team, job: Delivery.objects.create(
        job=job, event=JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed."),
        channel=Delivery.Channel.EMAIL, target="a@example.com"),
    "notifications/tokennotice": lambda team, job: TokenNotice.objects.create(
        token=token_create(name="ci-main", team=team, days=30)[0], kind=TokenNotice.Kind.SOON, user=job.owner),
}  # fmt: skip


@pytest.fixture
def admin_client(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.mark.parametrize("model", LOOP_RECORDS)
def test_it_offers_no_add_change_or_delete_for_loop_records(admin_client, submit, maps, model):
    record = LOOP_RECORDS[model](maps, submit(name="one"))
    changelist = admin_client.get(f"/admin/{model}/")
    assert changelist.status_code == 200
    assert f'href="/admin/{model}/add/"' not in changelist.content.decode()
    assert admin_client.get(f"/admin/{model}/add/").status_code == 403
    page = admin_client.get(f"/admin/{model}/{record.pk}/change/")
    assert page.status_code == 200  # shown read-only
    assert 'name="_save"' not in page.content.decode()
    assert admin_client.post(f"/admin/{model}/{record.pk}/delete/", {"post": "yes"}).status_code == 403
    assert type(record).objects.filter(pk=record.pk).exists()


def test_it_shows_node_cpu_and_memory_as_quantities(admin_client, db):
    ClusterNode.objects.create(name="n9", gpu=8, cpu=64000, memory=512 * 1024**3, outside_cpu=500, seen_at=timezone.now())
    body = admin_client.get("/admin/scheduling/clusternode/").content.decode()
    assert "512 GiB" in body and "64 CPUs" in body and "500m CPU" in body
    assert "549755813888" not in body and "64000" not in body


def test_it_shows_memory_no_binary_unit_holds_whole_in_bytes(admin_client, db):
    ClusterNode.objects.create(name="n9", gpu=8, cpu=64000, memory=10**9, outside_memory=1536, seen_at=timezone.now())
    body = admin_client.get("/admin/scheduling/clusternode/").content.decode()
    assert ">1000000000 B<" in body and ">1536 B<" in body


def test_it_shows_quotas_in_their_resource_units(admin_client, maps):
    Quota.objects.create(team=maps, resource="memory", nominal=256 * 1024**3, max_per_replica=64 * 1024**3)
    Quota.objects.create(team=maps, resource="cpu", nominal=2000, borrowing_limit=0)
    body = admin_client.get("/admin/tenants/quota/").content.decode()
    assert "256 GiB" in body and "64 GiB" in body and "2 CPUs" in body and "0 CPUs" in body
    assert "8 GPUs" in body  # the gpu quota of maps
    assert f">{256 * 1024**3}<" not in body  # no cell shows raw bytes


def test_it_still_lets_admins_edit_what_they_own(admin_client, maps):
    quota = Quota.objects.get(team=maps, resource="gpu")
    assert 'name="_save"' in admin_client.get(f"/admin/tenants/quota/{quota.pk}/change/").content.decode()
    assert admin_client.get("/admin/scheduling/simnode/add/").status_code == 200
    assert Job.objects.count() == 0


@pytest.mark.parametrize("model", LOOP_RECORDS)
def test_an_outsider_is_sent_to_the_admin_login(client, outsider, model):
    client.force_login(outsider)
    response = client.get(f"/admin/{model}/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_it_lists_token_notices_with_their_token_kind_person_and_state(admin_client, maps, owner):
    token, _ = token_create(name="ci-main", team=maps, days=30)
    TokenNotice.objects.create(token=token, kind=TokenNotice.Kind.LAST_DAY, user=owner, state=TokenNotice.State.FAILED)
    body = admin_client.get("/admin/notifications/tokennotice/").content.decode()
    assert f"ci-main ({token.prefix}..., team maps)" in body and "Expires within a day" in body and "owner" in body
    for state, listed in (("failed", True), ("sent", False)):
        page = admin_client.get(f"/admin/notifications/tokennotice/?state__exact={state}").content.decode()
        assert ("ci-main" in page.split('id="changelist"')[1]) == listed
