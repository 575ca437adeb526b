"""A live part asked for once the session has ended (signed out in another tab, expired) sends the whole page to
the sign-in form, coming back to that page: the sign-in page is never swapped into the part."""

import pytest


@pytest.mark.parametrize("part", ["/?part=queue", "/jobs/", "/teams/maps/?part=tiles"])
def test_a_part_asked_for_without_a_session_sends_the_page_to_sign_in(client, maps, part):
    response = client.get(part, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/jobs/?state=waiting")
    assert response.status_code == 200 and response.content == b""
    assert response["HX-Redirect"] == "/login/?next=%2Fjobs%2F%3Fstate%3Dwaiting"


def test_a_page_from_another_origin_comes_back_to_the_dashboard(client):
    response = client.get("/?part=queue", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="https://elsewhere.example/x")
    assert response["HX-Redirect"] == "/login/?next=%2F"


def test_a_page_asked_for_without_a_session_is_redirected_as_before(client):
    response = client.get("/jobs/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/jobs/"


def test_a_part_asked_for_with_a_session_is_answered(client, owner):
    client.force_login(owner)
    response = client.get("/?part=queue", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/")
    assert response.status_code == 200 and "HX-Redirect" not in response
