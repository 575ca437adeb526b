"""`?team=` on the job list and the queue names teams the caller can see, one or several separated by commas (as
`?state=` takes states): any other is a 400 naming the parameter and the teams the caller can see, never an empty
list a CI script takes for "no jobs". `?owner=` stays as it was: a username no one has lists no jobs, as a 400
would tell anyone which usernames have accounts."""

import pytest

from tenants.models import Team

LISTS = ("/api/v1/jobs/", "/api/v1/queue/")


@pytest.fixture
def jobs_of_both(submit, vision, outsider):
    return submit(name="maps-a"), submit(team=vision, user=outsider, name="vision-a")


def names(response) -> list[str]:
    assert response.status_code == 200, response.json()
    return sorted(job["name"] for job in response.json()["results"])


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("persona, sees", [
    ("maps_token", "maps"), ("member", "maps"), ("staff", "maps, vision"),
], ids=["a team token sees its team", "a person sees their teams", "staff see every team"])  # fmt: skip
def test_a_team_it_cannot_see_is_a_400_naming_the_teams_it_can(as_persona, jobs_of_both, path, persona, sees):
    response = as_persona(persona).get(f"{path}?team=nosuch")
    assert response.status_code == 400
    assert response.json() == {"team": [f"No team 'nosuch' among the teams you can see: {sees}."]}


@pytest.mark.parametrize("path", LISTS)
def test_another_teams_slug_reads_as_a_team_that_does_not_exist(as_persona, jobs_of_both, path):
    response = as_persona("maps_token").get(f"{path}?team=maps,vision")
    assert response.status_code == 400
    assert response.json() == {"team": ["No team 'vision' among the teams you can see: maps."]}


@pytest.mark.parametrize("path", LISTS)
def test_several_teams_are_taken_separated_by_commas(as_persona, jobs_of_both, path):
    assert names(as_persona("staff").get(f"{path}?team=maps,vision")) == ["maps-a", "vision-a"]
    assert names(as_persona("staff").get(f"{path}?team=vision")) == ["vision-a"]


@pytest.mark.parametrize("path", LISTS)
def test_a_team_it_can_see_with_no_jobs_is_an_empty_list(as_persona, jobs_of_both, path):
    Team.objects.create(slug="research", name="Research")
    assert names(as_persona("staff").get(f"{path}?team=research")) == []


def test_an_owner_no_one_is_lists_no_jobs(as_persona, jobs_of_both):
    assert names(as_persona("staff").get("/api/v1/jobs/?owner=nosuchuser")) == []
