"""`?ordering=` and `?page_size=` are as strict as the other parameters: a typo is a 400 naming the parameter and
what it takes, never a 200 in the default order or page size that a script takes for what it asked."""

import pytest

from jobs.api import ORDERING_FIELDS
from jobs.models import JobEvent

PAGED = ("/api/v1/jobs/", "/api/v1/queue/", "/api/v1/jobs/{job}/events/")


@pytest.mark.parametrize("ordering", ["-submited_at", "name", "reason", "id,-nope", "submitted_at,"])
def test_an_ordering_it_cannot_order_by_is_a_400_naming_it(as_persona, submit, ordering):
    submit(name="a")
    response = as_persona("maps_token").get(f"/api/v1/jobs/?ordering={ordering}")
    assert response.status_code == 400, response.json()
    [message] = response.json()["ordering"]
    assert message.startswith("Cannot order by '") and ", ".join(ORDERING_FIELDS) in message


def test_an_ordering_it_takes_still_orders(as_persona, submit):
    first, second = submit(name="a"), submit(name="b")
    response = as_persona("maps_token").get("/api/v1/jobs/?ordering=gpu_total,-id")
    assert [job["id"] for job in response.json()["results"]] == [second.pk, first.pk]


@pytest.mark.parametrize("path", PAGED)
@pytest.mark.parametrize("page_size", ["abc", "0", "-5", "1.5", "00"])
def test_a_page_size_that_is_not_a_whole_number_from_1_is_a_400_naming_it(as_persona, submit, path, page_size):
    job = submit(name="a")
    response = as_persona("maps_token").get(f"{path.format(job=job.pk)}?page_size={page_size}")
    assert response.status_code == 400, response.json()
    assert response.json() == {"page_size": [f"A whole number from 1 to 500 (a larger one reads as 500), got {page_size!r}."]}


@pytest.mark.parametrize("path", PAGED)
@pytest.mark.parametrize("page_size, shown", [("1", 1), ("007", 3), ("", 3), ("501", 3), ("9" * 5000, 3)])
def test_a_page_size_from_1_is_taken_and_a_large_one_read_as_500(as_persona, submit, path, page_size, shown):
    jobs = [submit(name=name) for name in "abc"]  # three jobs waiting; the first with three events
    for _ in range(2):
        jobs[0].events.create(kind=JobEvent.Kind.NOTE, message="A note.")
    response = as_persona("maps_token").get(f"{path.format(job=jobs[0].pk)}?page_size={page_size}")
    assert response.status_code == 200, response.json()
    assert len(response.json()["results"]) == shown


def test_the_schema_says_what_page_size_takes(client):
    schema = client.get("/api/schema/?format=json").json()
    for path in ("/api/v1/jobs/", "/api/v1/queue/", "/api/v1/jobs/{id}/events/"):
        [page_size] = [p for p in schema["paths"][path]["get"]["parameters"] if p["name"] == "page_size"]
        assert page_size["schema"] == {"type": "integer", "minimum": 1}
        assert "from 1 to 500" in page_size["description"]
        assert "400" in schema["paths"][path]["get"]["responses"]
    [ordering] = [p for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"] if p["name"] == "ordering"]
    assert ordering["schema"]["pattern"].startswith("^-?(submitted_at|")
