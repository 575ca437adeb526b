"""PATCH/PUT /teams/{slug}/quota/ with `based_on`: a change made from quotas read before another admin's
change answers 409 naming it, with nothing saved; without `based_on` a change is saved as before."""

import pytest

from tenants.models import AuditEntry, Quota

pytestmark = pytest.mark.django_db

READ = {"weight": 1.0, "quotas": {"gpu": {"nominal": 8, "borrowing_limit": 8, "lending_limit": None}}}
NO_BORROWING = {"quotas": {"gpu": {"nominal": 8, "borrowing_limit": 0, "lending_limit": None}}}


def gpu_quota() -> tuple[int, int | None]:
    quota = Quota.objects.get(team__slug="maps", resource="gpu")
    return quota.nominal, quota.borrowing_limit


def someone_halves_the_nominal(as_persona) -> None:
    halved = {"quotas": {"gpu": {"nominal": 4, "borrowing_limit": 8, "lending_limit": None}}}
    assert as_persona("staff").patch("/api/v1/teams/maps/quota/", halved, format="json").status_code == 200


@pytest.mark.parametrize("method", ["patch", "put"])
def test_a_change_based_on_quotas_changed_since_answers_409(as_persona, method):
    someone_halves_the_nominal(as_persona)
    response = getattr(as_persona("staff"), method)("/api/v1/teams/maps/quota/", NO_BORROWING | {"based_on": READ},
                                                    format="json")  # fmt: skip
    assert response.status_code == 409
    assert response.json()["detail"].startswith(
        "Since you read it, gpu nominal was changed from 8 GPUs to 4 GPUs by staff at ")
    assert "your change (gpu nominal 8 GPUs -> 8 GPUs" not in response.json()["detail"]
    assert "your change (gpu borrowing limit 8 GPUs -> 0 GPUs) was not saved" in response.json()["detail"]
    assert gpu_quota() == (4, 8) and AuditEntry.objects.filter(subject="quota").count() == 1


def test_a_dry_run_based_on_changed_quotas_answers_the_same_409(as_persona):
    someone_halves_the_nominal(as_persona)
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/?dry_run=1", NO_BORROWING | {"based_on": READ},
                                         format="json")  # fmt: skip
    assert response.status_code == 409 and "gpu nominal was changed from 8 GPUs to 4 GPUs" in response.json()["detail"]


def test_a_change_based_on_the_current_quotas_is_saved(as_persona):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", NO_BORROWING | {"based_on": READ}, format="json")
    assert response.status_code == 200
    assert gpu_quota() == (8, 0)


def test_a_quota_added_since_counts_as_a_change(as_persona, maps):
    Quota.objects.create(team=maps, resource="cpu", nominal=64000)
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", NO_BORROWING | {"based_on": READ}, format="json")
    assert response.status_code == 409
    assert "cpu nominal was changed from no quota to 64 CPUs" in response.json()["detail"]


def test_based_on_names_every_quota(as_persona):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", NO_BORROWING | {"based_on": {"weight": 1}},
                                         format="json")  # fmt: skip
    assert response.status_code == 400 and "quotas" in response.json()["based_on"]
