"""Single sign-on and an account that changes: deactivated by an admin, or its groups changed at login."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from jobs.services import job_submit
from jobs.spec import parse_spec
from tenants.group_map import parse_group_map
from tenants.identity import apply_groups
from tenants.models import AuditEntry, Membership
from tests.conftest import spec_data
from tests.identity.test_oidc_login import log_in, provider, sso  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def test_a_deactivated_sso_user_is_signed_out_of_their_open_session(client, sso, maps, vision, owner):
    assert log_in(client, sso, groups=["ml-maps"]).status_code == 302
    job, _ = job_submit(team=maps, owner=owner, spec=parse_spec(spec_data(name="resnet")))
    assert client.get(f"/jobs/{job.pk}/").status_code == 200  # a member reads the team's jobs
    get_user_model().objects.filter(username="ada").update(is_active=False)  # an admin deactivates ada
    assert client.get("/jobs/").status_code == 302  # to sign in, as a local account's session is
    assert client.get(f"/jobs/{job.pk}/").status_code == 302


def test_a_membership_a_login_changes_is_in_the_teams_history(maps, vision, lead, member):
    grants = parse_group_map("maps-eng=maps:member,maps-leads=maps:lead,vision-eng=vision:member,admins=staff")
    assert apply_groups(member, ["vision-eng", "admins"], grants) == ["left maps", "joined vision as member",
                                                                       "granted staff"]  # fmt: skip
    assert not Membership.objects.filter(user=member, team=maps).exists()
    said = {entry.team.slug if entry.team else None: entry.summary for entry in AuditEntry.objects.all()}
    assert said == {
        "maps": "Single sign-on for member: left maps.",
        "vision": "Single sign-on for member: joined vision as member.",
        None: "Single sign-on for member: granted staff.",
    }
