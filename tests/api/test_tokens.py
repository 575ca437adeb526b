"""Team tokens (leads and staff create and revoke them), user tokens, storage and the create_token command."""

import hashlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tenants.models import ApiToken, AuditEntry
from tests.api.conftest import PERSONAS, bearer
from tests.conftest import spec_data

MANAGE_STATUS = {
    "owner": 403, "member": 403, "lead": 201, "outsider": 404, "staff": 201,
    "maps_token": 403, "vision_token": 404, "revoked_token": 401, "anonymous": 401,
}  # fmt: skip


@pytest.mark.parametrize("persona", PERSONAS)
def test_only_leads_and_staff_create_team_tokens(as_persona, persona):
    response = as_persona(persona).post("/api/v1/teams/maps/tokens/", {"name": "ci-new"}, format="json")
    assert response.status_code == MANAGE_STATUS[persona]


def test_a_new_token_is_shown_once_and_stored_hashed(as_persona, lead):
    body = as_persona("lead").post("/api/v1/teams/maps/tokens/", {"name": "ci-new", "max_tier": "standard"},
                                   format="json").json()  # fmt: skip
    value = body["token"]
    assert value.startswith("gw_") and len(value) > 40
    token = ApiToken.objects.get(name="ci-new")
    assert token.digest == hashlib.sha256(value.encode()).hexdigest() and value not in str(token.__dict__)
    assert token.max_tier.name == "standard" and token.created_by == lead
    listed = as_persona("lead").get("/api/v1/teams/maps/tokens/").json()
    assert all("token" not in row for row in listed) and {row["name"] for row in listed} >= {"ci-new"}
    assert AuditEntry.objects.filter(subject="token", team__slug="maps").exists()


def test_a_token_cannot_have_a_tier_its_team_may_not_use(as_persona, maps, tiers):
    maps.tiers.remove(tiers["production"])
    response = as_persona("lead").post("/api/v1/teams/maps/tokens/", {"name": "x", "max_tier": "production"},
                                       format="json")  # fmt: skip
    assert response.status_code == 400 and "max_tier" in response.json()


@pytest.mark.parametrize("url", ["/api/v1/teams/maps/tokens/", "/api/v1/tokens/"])
@pytest.mark.parametrize("tier, what", [("stan\x00dard", "a NUL character"),
                                        ("\ud8f7x", "a lone surrogate")])
def test_a_tier_name_no_database_can_hold_is_refused_with_a_sentence(as_persona, url, tier, what):
    body = json.dumps({"name": "ci-new", "max_tier": tier})  # escaped, as a client sends it
    response = as_persona("lead").post(url, body, content_type="application/json")
    assert response.status_code == 400
    assert what in response.json()["max_tier"][0]
    assert not ApiToken.objects.filter(name="ci-new").exists()


def test_a_revoked_token_stops_working_at_once(as_persona):
    created = as_persona("lead").post("/api/v1/teams/maps/tokens/", {"name": "ci-new"}, format="json").json()
    client = bearer(created["token"])
    assert client.get("/api/v1/jobs/").status_code == 200
    revoked = as_persona("lead").delete(f"/api/v1/teams/maps/tokens/{created['id']}/")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 401 and "revoked" in response.json()["detail"]


def test_another_teams_token_id_is_not_found(as_persona, vision):
    from tenants.tokens import token_create

    foreign, _ = token_create(name="v", team=vision)
    assert as_persona("lead").delete(f"/api/v1/teams/maps/tokens/{foreign.pk}/").status_code == 404


def test_the_last_use_is_recorded(tokens):
    bearer(tokens["maps_token"]).get("/api/v1/jobs/")
    assert ApiToken.objects.get(name="ci-maps").last_used_at is not None


def test_a_user_token_acts_as_its_user(as_persona, owner):
    created = as_persona("owner").post("/api/v1/tokens/", {"name": "laptop"}, format="json")
    assert created.status_code == 201
    client = bearer(created.json()["token"])
    body = client.post("/api/v1/jobs/", spec_data(), format="json").json()
    assert body["owner"] == "owner"
    assert client.post("/api/v1/jobs/", spec_data(team="vision"), format="json").status_code == 403
    assert [row["name"] for row in client.get("/api/v1/tokens/").json()] == ["laptop"]
    assert client.delete(f"/api/v1/tokens/{created.json()['id']}/").status_code == 200
    assert client.get("/api/v1/jobs/").status_code == 401


def test_a_team_token_manages_no_tokens(as_persona):
    response = as_persona("maps_token").get("/api/v1/tokens/")
    assert response.status_code == 403 and "team token cannot" in response.json()["detail"]


def test_the_command_prints_a_working_token(maps, tiers):
    out, err = StringIO(), StringIO()
    call_command("create_token", "--team", "maps", "--name", "ci-boot", "--max-tier", "standard", stdout=out, stderr=err)
    value = out.getvalue().strip()
    assert value.startswith("gw_") and "shown this once" in err.getvalue()
    assert bearer(value).get("/api/v1/teams/maps/").status_code == 200
    assert ApiToken.objects.get(name="ci-boot").max_tier == tiers["standard"]


def test_the_command_names_the_teams_when_one_is_unknown(maps):
    with pytest.raises(CommandError, match="No team 'nope'; the teams are maps"):
        call_command("create_token", "--team", "nope", "--name", "x", stdout=StringIO())


def test_a_person_holds_at_most_user_token_limit_active_tokens(as_persona, owner, settings):
    settings.USER_TOKEN_LIMIT = 2
    client = as_persona("owner")
    created = [client.post("/api/v1/tokens/", {"name": f"script-{n}"}, format="json") for n in range(2)]
    assert [response.status_code for response in created] == [201, 201]
    refused = client.post("/api/v1/tokens/", {"name": "script-2"}, format="json")
    assert refused.status_code == 400
    assert refused.json() == {"detail": "User owner already holds 2 active tokens; one person may hold at most 2 "
                                        "(USER_TOKEN_LIMIT): revoke one no longer in use first."}  # fmt: skip
    assert not ApiToken.objects.filter(name="script-2").exists()
    assert client.delete(f"/api/v1/tokens/{created[0].json()['id']}/").status_code == 200
    again = client.post("/api/v1/tokens/", {"name": "script-2"}, format="json")
    assert again.status_code == 201  # a revoked token no longer counts


def test_the_command_refuses_a_user_token_over_the_limit(owner, settings):
    settings.USER_TOKEN_LIMIT = 1
    call_command("create_token", "--user", "owner", "--name", "one", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match=r"at most 1 \(USER_TOKEN_LIMIT\)"):
        call_command("create_token", "--user", "owner", "--name", "two", stdout=StringIO(), stderr=StringIO())
