"""A request refused before any view runs (a Host header this server does not answer to): under /api/ a 400 in
DRF's JSON shape, as every other answer of the API; elsewhere the pages' HTML 400."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def refused(client):
    client.raise_request_exception = False
    return lambda path: client.get(path, HTTP_HOST="gangway.attacker.example")


def test_a_bad_host_under_the_api_is_a_400_in_json(refused):
    response = refused("/api/v1/jobs/")

    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "The request's Host header names an address this server does not answer "
                                         "to; use the portal's address."}  # fmt: skip


def test_a_bad_host_says_nothing_of_the_settings(refused):
    assert "ALLOWED_HOSTS" not in refused("/api/v1/jobs/").content.decode()


def test_a_bad_host_elsewhere_is_the_pages_html_400(refused):
    response = refused("/jobs/")

    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    assert "This address cannot be read" in response.content.decode()
