"""Single sign-on end to end against a real local OpenID Connect provider."""

from __future__ import annotations

import urllib.request
from urllib.parse import urlparse

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from tenants.group_map import Grant, parse_group_map
from tenants.models import AuditEntry, Membership
from tests.identity.oidc_provider import Provider

GROUP_MAP = "ml-maps=maps:member,ml-maps-leads=maps:lead,ml-vision=vision:member,platform=staff"
BACKENDS = ["tenants.identity.GangwayOIDCBackend", "django.contrib.auth.backends.ModelBackend"]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture
def provider():
    with Provider() as running:
        yield running


@pytest.fixture
def sso(provider, settings):
    for key, value in provider.settings().items():
        setattr(settings, key, value)
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    settings.OIDC_GROUP_MAP = GROUP_MAP
    settings.OIDC_GROUPS_CLAIM = "groups"
    return provider


def log_in(client, provider, **user) -> object:
    """Walk the code flow: Gangway -> provider's /authorize -> Gangway's callback. Returns the callback response."""
    provider.next_user = {"sub": "u-1", "email": "ada@example.com", "preferred_username": "ada", **user}
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302 and start["Location"].startswith(provider.url)
    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(start["Location"])
    except urllib.error.HTTPError as redirect:  # the provider's 302 back to Gangway
        back = urlparse(redirect.headers["Location"])
    return client.get(f"{back.path}?{back.query}")


def test_a_first_login_creates_the_user_with_teams_from_groups(client, sso, maps, vision):
    response = log_in(client, sso, groups=["ml-maps-leads", "ml-vision", "unrelated"])
    assert response.status_code == 302
    user = get_user_model().objects.get(username="ada")
    assert dict(Membership.objects.filter(user=user).values_list("team__slug", "role")) == {"maps": "lead", "vision": "member"}
    assert not user.is_staff
    assert client.get("/").status_code == 200  # signed in
    assert AuditEntry.objects.filter(subject="membership", summary__contains="ada").exists()


def test_groups_are_applied_again_at_each_login(client, sso, maps, vision):
    log_in(client, sso, groups=["ml-maps", "ml-vision"])
    client.logout()
    log_in(client, sso, groups=["ml-maps-leads", "platform"])
    user = get_user_model().objects.get(username="ada")
    assert dict(Membership.objects.filter(user=user).values_list("team__slug", "role")) == {"maps": "lead"}
    assert user.is_staff


def test_memberships_of_teams_the_map_does_not_name_are_kept(client, sso, maps, tiers):
    from tests.conftest import make_team

    other = make_team("speech", tiers, gpu=4)
    log_in(client, sso, groups=["ml-maps"])
    user = get_user_model().objects.get(username="ada")
    Membership.objects.create(user=user, team=other)
    client.logout()
    log_in(client, sso, groups=["ml-maps"])
    assert set(Membership.objects.filter(user=user).values_list("team__slug", flat=True)) == {"maps", "speech"}


def test_a_forged_state_is_refused(client, sso, maps):
    client.get("/oidc/authenticate/")
    response = client.get("/oidc/callback/?code=x&state=forged")
    assert response.status_code in (302, 400)
    assert not get_user_model().objects.filter(username="ada").exists()


def test_local_accounts_keep_working_beside_sso(client, sso, owner):
    assert client.login(username="owner", password="pw")


@override_settings(OIDC_RP_CLIENT_ID="")
def test_without_sso_configured_its_urls_answer_404(client, db):
    assert client.get("/oidc/authenticate/").status_code == 404


def test_the_group_map_parses_and_names_a_bad_entry():
    assert parse_group_map("a=maps:lead, b=staff") == {"a": Grant("maps", "lead"), "b": Grant("", "staff")}
    with pytest.raises(ImproperlyConfigured, match="'a=maps:owner'"):
        parse_group_map("a=maps:owner")


def test_a_login_whose_username_another_account_holds_is_refused_saying_so(client, sso, maps):
    # A local account made before single sign-on, with another e-mail address, holds the name.
    get_user_model().objects.create_user("ada", email="ada@old.example.com", password="pw")
    response = log_in(client, sso, groups=["ml-maps"])
    assert response.status_code == 302  # back to the login page, never a 500
    page = client.get(response["Location"], follow=True)
    assert ("Single sign-on could not log you in: the username ada belongs to another account "
            "(another e-mail address)") in page.content.decode()
    assert not Membership.objects.filter(user__username="ada").exists()  # nothing joined to the other account
    assert get_user_model().objects.filter(username="ada").count() == 1
