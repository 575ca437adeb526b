"""Every route the portal serves, asked by nobody and by a person of another team.

`ROUTES` gives, for each route (the admin's aside, which Django keeps to staff, and the sign-in flows),
the requests to make against maps' objects and what an anonymous caller and vision's `outsider` get.
Unsafe requests carry a body that would change something if the access check were missing. Then:
- a route of the portal that the table does not name fails `test_every_route_is_in_the_table`, so a new
  page or endpoint cannot ship without its access answer;
- nothing of maps changed (its job, tokens, quota, webhook), and no job or token was made for maps;
- nothing the outsider read names maps' job (DESIGN: nobody sees another team's jobs).
"""

from __future__ import annotations

import pytest
from django.urls import URLResolver, get_resolver
from rest_framework.test import APIClient

from jobs.models import Job, Sweep
from notifications.models import TeamWebhook
from notifications.services import webhook_set
from tenants.forms import field_name
from tenants.models import ApiToken, Quota
from tenants.tokens import token_create
from tests.conftest import spec_data
from tests.pages.test_submit_page import form_data

pytestmark = pytest.mark.django_db

LOGIN = 302  # a page sends nobody to the sign-in page
NOBODY = 401  # the API asks for credentials

# route name -> [(method, path, body, anonymous gets, outsider gets)]; `{job}`, `{sweep}` (maps' Katib
# sweep, the job its trial), `{token}` (maps' team token) and `{mine}` (owner's own token) are filled in
# from the world below.
ROUTES: dict[str, list[tuple[str, str, dict | None, int, int]]] = {
    "scheduling:dashboard": [("get", "/", None, LOGIN, 200)],
    "jobs:list": [("get", "/jobs/", None, LOGIN, 200)],
    "jobs:submit": [("get", "/jobs/new/", None, LOGIN, 200), ("post", "/jobs/new/", form_data(), LOGIN, 422)],
    "jobs:preview": [("post", "/jobs/new/preview/", form_data(), LOGIN, 200)],
    "jobs:import": [("post", "/jobs/new/import/", {"team": "maps", "yaml": "kind: TFJob"}, LOGIN, 422)],
    "jobs:detail": [("get", "/jobs/{job}/", None, LOGIN, 404)],
    "jobs:cancel": [("post", "/jobs/{job}/cancel/", {}, LOGIN, 404)],
    "jobs:logs": [("get", "/jobs/{job}/logs/", None, LOGIN, 404)],
    "jobs:log-download": [("get", "/jobs/{job}/logs/worker-0.log", None, LOGIN, 404)],
    "jobs:sweep": [("get", "/jobs/sweeps/{sweep}/", None, LOGIN, 404)],
    "tenants:list": [("get", "/teams/", None, LOGIN, 200)],
    "tenants:detail": [("get", "/teams/maps/", None, LOGIN, 200)],
    "tenants:quota": [
        ("get", "/teams/maps/quota/", None, LOGIN, 403),
        ("post", "/teams/maps/quota/", {"weight": "5", field_name("gpu", "nominal"): "99"}, LOGIN, 403),
    ],
    "tenants:tokens": [
        ("get", "/teams/maps/tokens/", None, LOGIN, 404),
        ("post", "/teams/maps/tokens/", {"name": "stolen"}, LOGIN, 404),
    ],
    "tenants:token-revoke": [("post", "/teams/maps/tokens/{token}/revoke/", {}, LOGIN, 404)],
    "tokens:mine": [("get", "/tokens/", None, LOGIN, 200)],
    "tokens:revoke": [("post", "/tokens/{mine}/revoke/", {}, LOGIN, 404)],
    "notifications:settings": [("get", "/notifications/", None, LOGIN, 200)],
    "notifications:webhook": [
        ("post", "/notifications/webhooks/maps/", {"maps-url": "https://hooks.example.com/stolen"}, LOGIN, 404),
    ],
    "login": [("get", "/login/", None, 200, 302)],  # a signed-in person is sent on
    "logout": [("get", "/logout/", None, 405, 405)],  # POST only: a link cannot sign anyone out
    "healthz": [("get", "/healthz", None, 200, 200)],
    "readyz": [("get", "/readyz", None, 200, 200)],
    "metrics": [("get", "/metrics", None, 200, 200)],
    "favicon": [("get", "/favicon.ico", None, 302, 302)],  # METRICS_TOKEN, when set, guards it (its own tests)
    "api:job-list": [
        ("get", "/api/v1/jobs/", None, NOBODY, 200),
        ("post", "/api/v1/jobs/", spec_data(), NOBODY, 403),
    ],
    "api:job-detail": [("get", "/api/v1/jobs/{job}/", None, NOBODY, 404)],
    "api:job-cancel": [("post", "/api/v1/jobs/{job}/cancel/", {}, NOBODY, 404)],
    "api:job-events": [("get", "/api/v1/jobs/{job}/events/", None, NOBODY, 404)],
    "api:job-logs": [("get", "/api/v1/jobs/{job}/logs/", None, NOBODY, 404)],
    "api:job-logs-download": [("get", "/api/v1/jobs/{job}/logs/download/?replica=worker-0", None, NOBODY, 404)],
    "api:job-checkpoint": [("post", "/api/v1/jobs/{job}/checkpoint/", {}, NOBODY, NOBODY)],  # its job's token only
    "api:team-list": [("get", "/api/v1/teams/", None, NOBODY, 200)],
    "api:team-detail": [("get", "/api/v1/teams/maps/", None, NOBODY, 404)],
    "api:team-quota": [("patch", "/api/v1/teams/maps/quota/", {"weight": 5}, NOBODY, 404)],
    "api:team-tokens": [
        ("get", "/api/v1/teams/maps/tokens/", None, NOBODY, 404),
        ("post", "/api/v1/teams/maps/tokens/", {"name": "stolen"}, NOBODY, 404),
    ],
    "api:team-revoke-token": [("delete", "/api/v1/teams/maps/tokens/{token}/", None, NOBODY, 404)],
    "api:token-list": [("get", "/api/v1/tokens/", None, NOBODY, 200)],
    "api:token-detail": [("delete", "/api/v1/tokens/{mine}/", None, NOBODY, 404)],
    "api:queue": [("get", "/api/v1/queue/", None, NOBODY, 200)],
    "api:cluster": [("get", "/api/v1/cluster/", None, NOBODY, 200)],
    "api:schema": [("get", "/api/schema/", None, 200, 200)],
    "api:swagger": [("get", "/api/schema/swagger/", None, 200, 200)],
    "api:redoc": [("get", "/api/schema/redoc/", None, 200, 200)],
    "api:redoc-bundle": [("get", "/api/schema/redoc/redoc.standalone.js", None, 200, 200)],
    "api:None": [("get", "/api/v1/nope", None, 404, 404)],  # the API's JSON 404 for any other path
}
# Served by libraries behind their own access rules: Django's admin (staff only; one request below
# checks an outsider is sent to its sign-in) and the OpenID Connect sign-in flow.
ELSEWHERE = ("admin:", "oidc_authentication_")


def route_names(patterns, namespace: str = ""):
    """Yields the qualified name of every route under `patterns`."""
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from route_names(entry.url_patterns, f"{namespace}{entry.namespace}:" if entry.namespace else namespace)
        else:
            yield f"{namespace}{entry.name}"


def test_every_route_is_in_the_table():
    served = {name for name in route_names(get_resolver().url_patterns) if not name.startswith(ELSEWHERE)}
    assert served - ROUTES.keys() == set(), "a route without its access answer: add it to ROUTES"
    assert ROUTES.keys() - served == set(), "ROUTES names a route the portal no longer serves"


@pytest.fixture
def world(submit, cycle, maps, owner):
    """maps runs one job of owner's and a trial of a sweep, has a team token, a webhook, and owner has a
    token of their own. The job routes ask for the plain job: a trial refuses a cancel of its own, which
    would hide whether an outsider's cancel reached it."""
    job = submit(name="maps-private-run")
    trial = submit(name="maps-private-trial")
    cycle()
    sweep = Sweep.objects.create(team=maps, experiment="maps-private-sweep")
    Job.objects.filter(pk=trial.pk).update(sweep=sweep)
    token, _ = token_create(name="ci-maps", team=maps)
    mine, _ = token_create(name="laptop", user=owner)
    webhook_set(team=maps, url="https://hooks.example.com/maps", flags={}, actor=owner)
    return {"job": job.pk, "sweep": sweep.pk, "token": token.pk, "mine": mine.pk}


def maps_as_it_stands(maps) -> tuple:
    """What an outsider must not be able to change: maps' jobs, tokens, quota, weight and webhook."""
    maps.refresh_from_db()
    return (
        sorted(Job.objects.filter(team=maps).values_list("pk", "state")),
        sorted(ApiToken.objects.values_list("pk", "name", "revoked_at")),
        sorted(Quota.objects.filter(team=maps).values_list("resource", "nominal", "borrowing_limit", "lending_limit")),
        maps.weight,
        list(TeamWebhook.objects.filter(team=maps).values_list("url", flat=True)),
    )


def requests(world):
    for name, asks in ROUTES.items():
        for method, path, body, anonymous, outsider in asks:
            yield name, method, path.format(**world), body, {"anonymous": anonymous, "outsider": outsider}


@pytest.mark.parametrize("persona", ["anonymous", "outsider"])
def test_nobody_and_an_outsider_get_their_answer_and_change_nothing(world, maps, outsider, persona):
    client = APIClient()
    if persona == "outsider":
        client.force_login(outsider)
    before = maps_as_it_stands(maps)
    wrong, named = [], []
    for name, method, path, body, expected in requests(world):
        response = getattr(client, method)(path, body, format="json" if path.startswith("/api/") else None)
        if response.status_code != expected[persona]:
            wrong.append(f"{method.upper()} {path} ({name}): {response.status_code}, expected {expected[persona]}")
        if b"maps-private-run" in response.content:
            named.append(f"{method.upper()} {path}")
    assert wrong == []
    assert named == [], "another team's job is named"
    assert maps_as_it_stands(maps) == before


def test_an_outsider_is_sent_to_the_admins_sign_in(client, outsider):
    client.force_login(outsider)
    response = client.get("/admin/jobs/job/")
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
