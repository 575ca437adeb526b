"""Another team's page, as an outsider reads it: usage, quota and how much it runs and queues per tier, never which
jobs (nobody sees another team's jobs) nor its tokens."""

from __future__ import annotations

import re

import pytest

from tenants.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_maps(fill_and_wait):
    """maps runs `filler` (16 GPUs) and queues `waiting-0` (8 GPUs)."""
    return fill_and_wait(1)


def test_an_outsider_reads_how_much_the_team_runs_and_queues_per_tier_but_not_which_jobs(login, outsider, busy_maps):
    body = login(outsider).get("/teams/maps/").content.decode()
    jobs = body.split('id="team-jobs"')[1].split("</section>")[0]
    assert "Waiting and running jobs" in jobs
    # one row for the standard tier: filler runs on 16 GPUs, waiting-0 waits for 8
    assert re.search(r"<td>standard</td><td class=\"num\"[^>]*>1</td><td class=\"num\"[^>]*>16</td>"
                     r"<td class=\"num\"[^>]*>1</td><td class=\"num\"[^>]*>8</td>", jobs)  # labelled for a phone
    assert "filler" not in body and "waiting-0" not in body
    assert "read-only" in body and "you are not in this team" in body


def test_an_outsider_reads_that_a_quiet_team_has_no_job(login, outsider, maps):
    body = login(outsider).get("/teams/maps/").content.decode()
    assert "Team maps has no job waiting or running." in body


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


def test_the_outsiders_jobs_fragment_counts_without_names_or_links(login, outsider, htmx, busy_maps):
    body = login(outsider).get("/teams/maps/", **htmx).content.decode()
    assert "Waiting and running jobs" in body
    assert "waiting-0" not in body and "/jobs/" not in body


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
