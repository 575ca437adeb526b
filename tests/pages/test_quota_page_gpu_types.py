"""The quota editor on a cluster with GPU types: a row of limits per type, saved per type, and a
what-if that reads each type's quota, limits and capacity."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tenants.models import AuditEntry, Quota
from tests.page_forms import opened

pytestmark = pytest.mark.django_db

EDITS = {"owner": 403, "member": 403, "lead": 403, "outsider": 403, "staff": 200}


def typed_post(**overrides) -> dict:
    """The quota form of maps in the gpu_types world, as the page fills it in (4 + 4 of each type)."""
    data = {"weight": "1", "cpu_nominal": "", "cpu_borrowing_limit": "", "cpu_lending_limit": "",
            "memory_nominal": "", "memory_borrowing_limit": "", "memory_lending_limit": ""}  # fmt: skip
    for kind in ("l4", "a100"):
        data |= {f"gpu-{kind}_nominal": "4", f"gpu-{kind}_borrowing_limit": "4", f"gpu-{kind}_lending_limit": ""}
    data.update(overrides)
    return data


def asking(job: Job, *types: str) -> Job:
    Job.objects.filter(pk=job.pk).update(gpu_type=list(types))
    return job


@pytest.mark.parametrize("persona, status", EDITS.items())
def test_access_to_the_typed_quota_editor(request, login, gpu_types, persona, status):
    client = login(request.getfixturevalue(persona))
    assert client.get("/teams/maps/quota/").status_code == status
    loaded = opened(client, "/teams/maps/quota/")["based_on"] if status == 200 else ""
    assert client.post("/teams/maps/quota/", typed_post(**{
        "gpu-a100_nominal": "8", "based_on": loaded})).status_code == (302 if status == 200 else 403)  # fmt: skip


def test_it_shows_a_row_per_gpu_type_instead_of_one_for_gpus(login, staff, gpu_types):
    body = login(staff).get("/teams/maps/quota/").content.decode()
    assert "l4 GPUs" in body and "a100 GPUs" in body and "80 GB, large training" in body
    assert 'name="gpu-a100_nominal" value="4"' in body and 'name="gpu-l4_borrowing_limit" value="4"' in body
    assert 'name="gpu_nominal"' not in body
    assert body.index("l4 GPUs") < body.index("a100 GPUs")  # the cluster's order, cheapest first


def test_saving_changes_only_the_type_edited_and_records_it(login, staff, maps, gpu_types):
    client = login(staff)
    page = opened(client, "/teams/maps/quota/")
    response = client.post("/teams/maps/quota/", page | typed_post(**{"gpu-a100_nominal": "6"}))
    assert response.status_code == 302
    assert Quota.objects.get(team=maps, resource="gpu:a100").nominal == 6
    assert Quota.objects.get(team=maps, resource="gpu:l4").nominal == 4
    assert "a100 GPUs nominal 4 GPUs -> 6 GPUs" in AuditEntry.objects.get(subject="quota").summary


def test_clearing_a_types_nominal_removes_that_types_quota(login, staff, maps, gpu_types):
    client = login(staff)
    client.post("/teams/maps/quota/", opened(client, "/teams/maps/quota/") | typed_post(**{
        "gpu-l4_nominal": "", "gpu-l4_borrowing_limit": ""}))  # fmt: skip
    assert set(maps.quotas.values_list("resource", flat=True)) == {"gpu:a100"}


def test_an_invalid_typed_amount_answers_422_by_its_field(login, staff, maps, gpu_types):
    response = login(staff).post("/teams/maps/quota/", typed_post(**{"gpu-a100_nominal": "1.5"}))
    body = response.content.decode()
    assert response.status_code == 422 and "Must be a whole, non-negative amount, got &#x27;1.5&#x27;." in body
    assert 'class="num has-error"><label class="visually-hidden" for="id_gpu-a100_nominal">' in body
    assert Quota.objects.get(team=maps, resource="gpu:a100").nominal == 4


def test_the_what_if_shows_each_types_limits_before_and_after(login, staff, htmx, gpu_types):
    body = login(staff).post("/teams/maps/quota/", typed_post(**{"gpu-a100_nominal": "6"}), **htmx).content.decode()
    assert '<td>a100 GPU</td><td>nominal</td><td class="num">4 GPUs</td><td class="num"><b>6 GPUs</b></td>' in body
    assert '<td>l4 GPU</td><td>nominal</td><td class="num">4 GPUs</td><td class="num">4 GPUs</td>' in body
    assert body.index("<td>l4 GPU</td>") < body.index("<td>a100 GPU</td>")


def test_the_what_if_warns_when_a_types_nominals_pass_its_capacity(login, staff, htmx, cycle, gpu_types):
    cycle()  # reads the nodes: 8 a100 on node-01, 8 l4 on node-02
    body = login(staff).post("/teams/maps/quota/", typed_post(**{"gpu-a100_nominal": "6"}), **htmx).content.decode()
    assert ("Nominal a100 GPU quotas would add up to 10 a100 GPUs, more than the cluster&#x27;s 8 a100 GPUs"
            in body)  # fmt: skip
    assert "Nominal l4 GPU" not in body


def test_the_what_if_warns_when_the_team_stays_above_a_types_new_limit(login, staff, htmx, submit, cycle, gpu_types):
    asking(submit(name="big", replicas=[{"role": "Worker", "count": 1, "gpu": 6}]), "a100")
    cycle()
    body = login(staff).post("/teams/maps/quota/", typed_post(**{"gpu-a100_borrowing_limit": "1"}),
                             **htmx).content.decode()  # fmt: skip
    assert ("Team maps uses 6 a100 GPUs now, above its new limit of 5 a100 GPUs (4 a100 GPUs nominal + "
            "1 a100 GPU borrowing)") in body  # fmt: skip


def test_the_what_if_lists_jobs_of_a_type_that_keep_waiting_and_starts_them_with_more(
        login, staff, htmx, submit, cycle, gpu_types):
    asking(submit(name="filler", replicas=[{"role": "Worker", "count": 1, "gpu": 8}]), "a100")
    cycle()
    still = asking(submit(name="still-waits", replicas=[{"role": "Worker", "count": 1, "gpu": 4}]), "a100", "l4")
    Job.objects.filter(pk=still.pk).update(gpu_type=["a100"])
    body = login(staff).post("/teams/maps/quota/", typed_post(**{"gpu-l4_nominal": "8"}), **htmx).content.decode()
    assert "Would keep waiting (1 of maps)" in body and f"#{still.pk}" in body and "a100" in body


def test_the_what_if_says_a_types_warning_once_naming_the_gpus_a_job_needs(login, staff, htmx, submit, cycle, gpu_types):
    asking(submit(name="big", replicas=[{"role": "Worker", "count": 1, "gpu": 7}]), "l4")
    cycle()
    body = login(staff).post("/teams/maps/quota/", typed_post(**{"gpu-l4_nominal": "2"}), **htmx).content.decode()
    warning = ("Team maps uses 7 l4 GPUs now, above its new limit of 6 l4 GPUs (2 l4 GPUs nominal + 4 l4 GPUs "
               "borrowing): its running jobs keep running, and it starts nothing more that needs l4 GPUs until it is "
               "back under.")  # fmt: skip
    assert body.count(warning) == 1, body


def test_the_saved_message_and_the_history_name_a_gpu_type_as_people_read_it(login, staff, maps, gpu_types):
    client = login(staff)
    page = opened(client, "/teams/maps/quota/")
    response = client.post("/teams/maps/quota/", page | typed_post(**{"gpu-l4_nominal": "2"}), follow=True)
    body = response.content.decode()
    assert body.count("l4 GPUs nominal 4 GPUs -&gt; 2 GPUs") == 2  # the message saved, and the history
    assert "gpu:l4 nominal" not in body
