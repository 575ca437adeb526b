"""Team pages: the list, a team's page with its usage chart, and the staff quota editor with its what-if."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from scheduling.models import RefusedOutsideJob, UsageSample
from tenants.models import AuditEntry, Quota
from tests.page_forms import opened

pytestmark = pytest.mark.django_db

SEES = {"owner": 200, "member": 200, "lead": 200, "outsider": 200, "staff": 200}  # read-only for the outsider
EDITS = {"owner": 403, "member": 403, "lead": 403, "outsider": 403, "staff": 200}


@pytest.fixture(autouse=True)
def teams(maps, vision):
    return maps, vision


@pytest.mark.parametrize("persona, status", SEES.items())
def test_access_to_the_team_page(request, login, persona, status):
    assert login(request.getfixturevalue(persona)).get("/teams/maps/").status_code == status


@pytest.mark.parametrize("persona, status", SEES.items())
def test_access_to_the_jobs_fragment(request, login, htmx, persona, status):
    assert login(request.getfixturevalue(persona)).get("/teams/maps/?page=1", **htmx).status_code == status


@pytest.mark.parametrize("persona, status", EDITS.items())
def test_access_to_the_quota_editor(request, login, persona, status):
    assert login(request.getfixturevalue(persona)).get("/teams/maps/quota/").status_code == status


def test_pages_require_login(client, maps):
    for path in ("/teams/", "/teams/maps/", "/teams/maps/quota/"):
        assert client.get(path).status_code == 302


def test_the_list_shows_every_team_marking_mine(login, outsider, maps):
    body = login(outsider).get("/teams/").content.decode()
    assert "/teams/vision/" in body and "/teams/maps/" in body
    assert body.count("your team") == 1 and "/quota/" not in body


def test_a_team_that_does_not_exist_answers_404(login, outsider):
    assert login(outsider).get("/teams/nobody/").status_code == 404


def test_staff_see_every_team_with_a_quota_link(login, staff, maps, vision):
    body = login(staff).get("/teams/").content.decode()
    assert "/teams/maps/quota/" in body and "/teams/vision/quota/" in body


def test_the_team_page_charts_usage_against_quota(login, owner, maps):
    now = timezone.now()
    for minutes, used in ((600, 4), (300, 12), (10, 6)):
        UsageSample.objects.create(team=maps, at=now - timedelta(minutes=minutes), gpu_used=used,
                                   gpu_borrowed=max(0, used - 8), gpu_nominal=8)  # fmt: skip
    UsageSample.objects.create(team=maps, at=now - timedelta(hours=30), gpu_used=99, gpu_nominal=8)  # too old
    body = login(owner).get("/teams/maps/").content.decode()
    assert '<svg class="chart"' in body
    assert body.count('class="nominal" points="') == 2  # the chart, and the same drawn narrow for a phone
    assert body.count('<svg class="chart on-phone"') == 1
    assert ">12</text>" in body and ">99</text>" not in body  # the axis fits 12 GPUs, not the old 99
    assert "No samples yet" not in body


def test_the_team_page_says_when_there_is_no_sample(login, owner):
    assert "No samples yet" in login(owner).get("/teams/maps/").content.decode()


def test_a_team_without_jobs_says_what_to_do_and_counts_nothing(login, owner):
    body = login(owner).get("/teams/maps/").content.decode()
    assert "No jobs yet — <a" in body
    assert "0 jobs" not in body and "newest first" not in body  # no order told of a list that is not there


def test_the_team_page_shows_jobs_members_and_lending(login, lead, owner, submit, cycle, vision):
    submit(name="big-one", replicas=[{"role": "Worker", "count": 3, "gpu": 4}])  # 12: borrows 4 from vision
    cycle()
    body = login(lead).get("/teams/maps/").content.decode()
    assert "big-one" in body
    assert "owner" in body and "lead" in body
    assert '4 from <a href="/teams/vision/">vision</a>' in body


def test_queries_do_not_grow_with_jobs_or_samples(login, owner, submit, maps, django_assert_max_num_queries):
    client = login(owner)
    submit(name="first")
    # With the header's one query of whether the user is in a team (its "+ Submit job").
    with django_assert_max_num_queries(20):  # the refused jobs from elsewhere: one query, however many
        client.get("/teams/maps/")
    now = timezone.now()
    UsageSample.objects.bulk_create(UsageSample(team=maps, at=now - timedelta(minutes=m), gpu_used=m % 9, gpu_nominal=8)
                                    for m in range(1, 300))  # fmt: skip
    for index in range(30):
        submit(name=f"more-{index}")
    RefusedOutsideJob.objects.bulk_create(
        RefusedOutsideJob(team=maps, uid=f"uid-{n}", kind="TFJob", name=f"refused-{n}", reason="Refused.", refused_at=now)
        for n in range(30))  # fmt: skip
    with django_assert_max_num_queries(20):
        client.get("/teams/maps/")


def quota_post(**overrides) -> dict:
    data = {"weight": "1", "gpu_nominal": "8", "gpu_borrowing_limit": "8", "gpu_lending_limit": "",
            "cpu_nominal": "", "cpu_borrowing_limit": "", "cpu_lending_limit": "",
            "memory_nominal": "", "memory_borrowing_limit": "", "memory_lending_limit": ""}  # fmt: skip
    data.update(overrides)
    return data


def test_a_borrowing_limit_not_set_reads_no_limit_on_the_team_s_tile_as_in_the_list_of_teams(login, member, maps):
    Quota.objects.filter(team=maps, resource="gpu").update(borrowing_limit=None)
    client = login(member)
    body = client.get("/teams/maps/").content.decode()
    assert "may borrow: no limit" in body and "without limit" not in body
    assert '<span class="muted">no limit</span>' in client.get("/teams/").content.decode()


def test_the_quota_editor_previews_a_change_before_saving(login, staff, owner, submit, cycle, htmx, vision):
    job = submit(name="borrower", replicas=[{"role": "Worker", "count": 3, "gpu": 4}])  # maps borrows 4
    cycle()
    # vision asks 12 > its nominal 8: it may not reclaim, so it waits; with nominal 12 it would.
    pending = submit(name="vision-wants", team=vision, user=staff, replicas=[{"role": "Worker", "count": 3, "gpu": 4}])
    response = login(staff).post("/teams/vision/quota/", quota_post(gpu_nominal="12", gpu_borrowing_limit="0"), **htmx)
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<div id="whatif"')
    assert "Would be preempted" in body and f"#{job.pk}" in body
    assert "Would start" in body and f"#{pending.pk}" in body
    assert Quota.objects.get(team=vision, resource="gpu").nominal == 8  # nothing saved


def test_the_quota_editor_says_when_nothing_would_change(login, staff, htmx, maps):
    body = login(staff).post("/teams/maps/quota/", quota_post(gpu_nominal="9"), **htmx).content.decode()
    assert "No job would change" in body


def test_saving_a_quota_records_who_changed_what(login, staff, maps):
    client = login(staff)
    loaded = opened(client, "/teams/maps/quota/")["based_on"]
    response = client.post("/teams/maps/quota/", quota_post(gpu_nominal="10", cpu_nominal="64", weight="2",
                                                            based_on=loaded))  # fmt: skip
    assert response.status_code == 302
    quota = Quota.objects.get(team=maps, resource="gpu")
    assert (quota.nominal, quota.borrowing_limit) == (10, 8)
    assert Quota.objects.get(team=maps, resource="cpu").nominal == 64000
    entry = AuditEntry.objects.get()
    assert entry.actor == staff and "gpu nominal 8 GPUs -> 10 GPUs" in entry.summary
    body = login(staff).get("/teams/maps/quota/").content.decode()
    assert "gpu nominal 8 GPUs -&gt; 10 GPUs" in body and "<b>staff</b>" in body


def test_an_invalid_quota_answers_422_by_the_field(login, staff, maps):
    response = login(staff).post("/teams/maps/quota/", quota_post(gpu_nominal="1.5", memory_borrowing_limit="4Gi"))
    body = response.content.decode()
    assert response.status_code == 422
    assert "GPUs are whole cards" in body or "Must be a whole" in body
    assert "Set a nominal quota before borrowing or lending limits." in body
    assert Quota.objects.get(team=maps, resource="gpu").nominal == 8


def test_a_nominal_refused_is_not_also_called_missing(login, staff, maps):
    response = login(staff).post("/teams/maps/quota/", quota_post(gpu_nominal="-3", weight="0"))
    body = response.content.decode()
    assert response.status_code == 422 and "Must be a whole, non-negative amount, got &#x27;-3&#x27;." in body
    assert "Set a nominal quota" not in body


def test_the_preview_names_the_field_of_each_error(login, staff, htmx, maps):
    response = login(staff).post("/teams/maps/quota/", quota_post(gpu_nominal="-3", weight="0"), **htmx)
    body = response.content.decode()
    assert response.status_code == 200
    assert ("No preview until these are fixed: Weight: Ensure this value is greater than or equal to 0.01; "
            "GPUs nominal: Must be a whole, non-negative amount, got &#x27;-3&#x27;.</p>") in body
    assert "Set a nominal quota" not in body


def test_non_staff_cannot_save_a_quota(login, lead, maps):
    assert login(lead).post("/teams/maps/quota/", quota_post(gpu_nominal="80")).status_code == 403
    assert Quota.objects.get(team=maps, resource="gpu").nominal == 8


def test_the_what_if_lists_the_jobs_that_keep_waiting(login, staff, submit, cycle, htmx, maps):
    submit(name="filler", replicas=[{"role": "Worker", "count": 2, "gpu": 8}])
    cycle()
    still = submit(name="still-waits", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    body = login(staff).post("/teams/maps/quota/", quota_post(gpu_nominal="10"), **htmx).content.decode()
    assert "Would keep waiting (1 of maps)" in body and f"#{still.pk}" in body
    assert "No job would change" in body


def test_the_what_if_reads_its_reasons_as_the_job_page_does(login, staff, submit, cycle, htmx, maps):
    submit(name="filler", replicas=[{"role": "Worker", "count": 2, "gpu": 8}])
    cycle()
    starving = submit(name="starving", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    Job.objects.filter(pk=starving.pk).update(queued_at=timezone.now() - timedelta(hours=2))
    submit(name="behind", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    body = login(staff).post("/teams/maps/quota/", quota_post(gpu_nominal="10"), **htmx).content.decode()
    assert f"Held for job #{starving.pk}, which has waited" in body  # R4 holds the team; "#12" as on job pages


def test_the_what_if_shows_each_limit_before_and_after(login, staff, htmx, maps):
    body = login(staff).post("/teams/maps/quota/", quota_post(gpu_nominal="12", gpu_borrowing_limit=""), **htmx).content.decode()
    assert "Limits, now → after the change" in body
    assert '<td>GPU</td><td>nominal</td><td class="num">8 GPUs</td><td class="num"><b>12 GPUs</b></td>' in body
    assert '<td>GPU</td><td>borrowing limit</td><td class="num">8 GPUs</td><td class="num"><b>no limit</b></td>' in body
    assert '<td>GPU</td><td>lending limit</td><td class="num">all unused</td><td class="num">all unused</td>' in body


def test_the_what_if_warns_when_nominals_pass_the_cluster(login, staff, htmx, cycle, maps, vision):
    cycle()  # reads the two nodes: 16 GPUs; vision holds 8 nominal
    body = login(staff).post("/teams/maps/quota/", quota_post(gpu_nominal="12"), **htmx).content.decode()
    assert "Nominal GPU quotas would add up to 20 GPUs, more than the cluster&#x27;s 16 GPUs" in body
    quiet = login(staff).post("/teams/maps/quota/", quota_post(gpu_nominal="8"), **htmx).content.decode()
    assert "would add up to" not in quiet


def test_the_what_if_warns_when_the_team_stays_above_a_new_borrowing_limit(login, staff, submit, cycle, htmx, maps):
    submit(name="borrower", replicas=[{"role": "Worker", "count": 3, "gpu": 4}])  # 12: 4 above nominal
    cycle()
    body = login(staff).post("/teams/maps/quota/", quota_post(gpu_borrowing_limit="2"), **htmx).content.decode()
    assert "Team maps uses 12 GPUs now, above its new limit of 10 GPUs (8 GPUs nominal + 2 GPUs borrowing)" in body
    fine = login(staff).post("/teams/maps/quota/", quota_post(gpu_borrowing_limit="4"), **htmx).content.decode()
    assert "above its new limit" not in fine
