"""401 with a challenge, bad tokens, CSRF for sessions, throttling with Retry-After, the schema pages."""

import pytest
from rest_framework.test import APIClient

from tenants.tokens import token_create, token_revoke
from tests.api.conftest import bearer
from tests.conftest import spec_data


def test_no_credentials_is_401_with_a_challenge(db):
    response = APIClient().get("/api/v1/jobs/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert "Authorization: Bearer" in response.json()["detail"]


@pytest.mark.parametrize(
    "header, message",
    [
        ("Bearer gw_not-a-real-token", "Unknown token"),
        ("Bearer two parts", "Malformed Authorization header"),
        ("Token gw_not-a-real-token", "Unknown token"),
    ],
    ids=["an unknown token", "a token with a space", "the Token keyword"],
)
def test_a_bad_token_is_401_saying_why(db, header, message):
    response = APIClient().get("/api/v1/jobs/", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401 and response["WWW-Authenticate"]
    assert message in response.json()["detail"]


def test_a_session_needs_csrf_for_writes(owner):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.get("/api/v1/jobs/").status_code == 200
    response = client.post("/api/v1/jobs/", spec_data(), format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]


def test_a_token_needs_no_csrf(tokens):
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens['maps_token']}")
    assert client.post("/api/v1/jobs/", spec_data(), format="json").status_code == 201


def test_a_spent_budget_is_429_with_retry_after_and_another_teams_tokens_go_on(tokens, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"token": "3/min"}}  # fmt: skip
    maps, vision = bearer(tokens["maps_token"]), bearer(tokens["vision_token"])
    assert [maps.get("/api/v1/jobs/").status_code for _ in range(3)] == [200, 200, 200]
    response = maps.get("/api/v1/jobs/")
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "retry in" in response.json()["detail"] and "team maps (at most 3/min" in response.json()["detail"]
    assert vision.get("/api/v1/jobs/").status_code == 200


def test_the_schema_and_its_pages_are_served_offline(db):
    client = APIClient()
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/v1/jobs/", "/api/v1/jobs/{id}/cancel/", "/api/v1/teams/{slug}/quota/", "/api/v1/queue/",
            "/api/v1/cluster/"} <= set(paths)  # fmt: skip
    for page, script in [("/api/schema/swagger/", "/static/drf_spectacular_sidecar/"),
                         ("/api/schema/redoc/", "/api/schema/redoc/redoc.standalone.js")]:
        html = client.get(page).content.decode()
        assert "cdn.jsdelivr.net" not in html and script in html


def test_the_redoc_bundle_fetches_nothing_from_elsewhere(db):
    """Redoc names Redocly's logo on their CDN; the bundle served here does not (portal/api_docs.py)."""
    response = APIClient().get("/api/schema/redoc/redoc.standalone.js")
    bundle = response.content.decode()
    assert response.status_code == 200 and response["Content-Type"].startswith("text/javascript")
    assert "cdn.redoc.ly" not in bundle and "API docs by Redocly" in bundle
    source_map = "/static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js.map"
    assert bundle.rstrip().endswith(f"sourceMappingURL={source_map}")  # where the static files serve it


def test_every_operation_has_a_summary_and_examples_where_it_returns_a_body(db):
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert operation.get("summary"), f"{method.upper()} {path} has no summary"


@pytest.mark.parametrize("personal, advice", [(True, "make a new one on your tokens page."),
                                              (False, "ask a team lead for a new one.")])  # fmt: skip
def test_a_revoked_token_says_where_to_get_a_new_one(owner, maps, personal, advice):
    token, value = token_create(name="ci", user=owner) if personal else token_create(name="ci", team=maps)
    token_revoke(token=token)
    response = bearer(value).get("/api/v1/jobs/")
    assert response.status_code == 401 and response.json()["detail"].endswith(advice)
