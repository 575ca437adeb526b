"""Error pages in the site's style."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from portal import views

pytestmark = pytest.mark.django_db


def test_404_is_styled_and_keeps_the_navigation(login, owner):
    response = login(owner).get("/no/such/page/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "Nothing here" in body and 'class="topbar"' in body and "My jobs" in body
    assert "Resolver404" not in body and "tried" not in body


def test_403_is_styled_and_says_why(login, owner, maps):
    response = login(owner).get("/teams/maps/quota/")
    assert response.status_code == 403
    assert "Only admins edit quotas." in response.content.decode()


def test_500_renders_without_a_request_context():
    response = views.server_error(RequestFactory().get("/"))
    assert response.status_code == 500
    assert "Something broke on our side" in response.content.decode()


def test_login_page_is_styled(client):
    body = client.get("/login/").content.decode()
    assert "Log in to Gangway" in body and 'name="csrfmiddlewaretoken"' in body
