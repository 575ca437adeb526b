"""Another team's page, as an outsider reads it: usage, quota and queue, never its jobs' details or tokens."""

from __future__ import annotations

import re

import pytest

from tenants.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_maps(fill_and_wait):
    """maps runs `filler` (16 GPUs) and queues `waiting-0` (8 GPUs)."""
    return fill_and_wait(1)


def test_an_outsider_reads_the_names_and_sizes_of_waiting_and_running_jobs(login, outsider, busy_maps):
    body = login(outsider).get("/teams/maps/").content.decode()
    assert "Waiting and running jobs" in body
    assert "filler" in body and "waiting-0" in body
    assert "16" in body and "8" in body
    assert "read-only" in body and "you are not in this team" in body


def test_an_outsider_gets_no_link_to_the_jobs_nor_their_reasons_or_owners(login, outsider, busy_maps):
    (job,) = busy_maps
    body = login(outsider).get("/teams/maps/").content.decode()
    assert "/jobs/" not in body.split('id="team-jobs"')[1].split("</section>")[0]
    assert job.reason not in body
    assert "owner" not in body.split('id="team-jobs"')[1].split("</section>")[0]
    assert login(outsider).get(f"/jobs/{job.pk}/").status_code == 404


def test_an_outsider_gets_no_submit_or_token_action(login, outsider, busy_maps):
    body = login(outsider).get("/teams/maps/").content.decode()
    assert "/jobs/new/?team=maps" not in body
    assert "/teams/maps/tokens/" not in body
    assert login(outsider).get("/teams/maps/tokens/").status_code == 404


def test_an_outsider_reads_the_quota_history_without_token_changes(login, outsider, maps, staff):
    AuditEntry.objects.create(actor=staff, team=maps, subject="quota", summary="gpu nominal 8 -> 10")
    AuditEntry.objects.create(actor=staff, team=maps, subject="apitoken", summary="token ci-secret added")
    body = login(outsider).get("/teams/maps/").content.decode()
    assert "gpu nominal 8 -&gt; 10" in body and "ci-secret" not in body


def test_members_still_read_every_job_with_its_link(login, member, busy_maps):
    (job,) = busy_maps
    body = login(member).get("/teams/maps/").content.decode()
    assert f'href="/jobs/{job.pk}/"' in body and job.reason in body


def test_the_outsiders_jobs_fragment_pages_without_links(login, outsider, htmx, busy_maps):
    body = login(outsider).get("/teams/maps/?page=1", **htmx).content.decode()
    assert "waiting-0" in body and "/jobs/" not in body


LINK = re.compile(r'href="(/[^"#]*)"')


@pytest.mark.parametrize("persona", ["owner", "member", "outsider", "staff"])
def test_no_link_on_the_pages_leads_to_a_404(request, login, persona, busy_maps, vision):
    """Dashboard bars, loans, crumbs and job rows link only where the viewer may go."""
    client = login(request.getfixturevalue(persona))
    (job,) = busy_maps
    pages = ["/", "/teams/", "/teams/maps/", "/teams/vision/", "/jobs/"]
    if persona != "outsider":
        pages.append(f"/jobs/{job.pk}/")
    links = set()
    for path in pages:
        response = client.get(path)
        assert response.status_code == 200, path
        links |= {link.replace("&amp;", "&") for link in LINK.findall(response.content.decode())}
    links = {link for link in links if not link.startswith(("/static/", "/logout/")) and not link.endswith(".log")}
    assert "/teams/maps/" in links
    broken = [link for link in sorted(links) if client.get(link).status_code == 404]
    assert broken == []
