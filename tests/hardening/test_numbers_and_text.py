"""One range per number and storable text everywhere: NaN, infinities, NUL, lone surrogates and numbers beyond
their columns are refused with a sentence at input, on every path, never a 500 from the database.
"""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from jobs.models import Job
from tenants.inputs import INT32_MAX, QUOTA_MAX, WEIGHT_MAX
from tenants.models import Quota, Team
from tests.conftest import spec_data
from tests.pages.test_submit_page import form_data

# "1e999999" parses, and its millicores are beyond what a Decimal holds.
NOT_NUMBERS = ["NaN", "nan", "Infinity", "-Infinity", "inf", "1e400", "1e999999", "1e1000000"]


@pytest.fixture
def api(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def admin(client, staff, maps):
    client.force_login(staff)
    return client


def post_spec(client, **overrides):
    return client.post("/api/v1/jobs/", data=json.dumps(spec_data(**overrides)), content_type="application/json")


# -- NaN and infinities --------------------------------------------------------------


@pytest.mark.parametrize("value", NOT_NUMBERS)
@pytest.mark.parametrize("field", ["cpu", "memory"])
def test_the_api_refuses_a_quantity_that_is_not_a_number(api, field, value):
    response = post_spec(api, replicas=[{"role": "Worker", "count": 1, field: value}])
    assert response.status_code == 400, response.content
    assert f"replicas[0].{field}" in response.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize("text", [".nan", ".inf", "-.inf", ".NaN"])
def test_yaml_nan_and_infinity_are_refused_as_cpu(api, text):
    body = f"team: maps\nname: x\nimage: busybox\nreplicas: [{{role: Worker, count: 1, cpu: {text}, memory: {text}}}]\n"
    response = api.post("/api/v1/jobs/", data=body, content_type="application/yaml")
    assert response.status_code == 400, response.content
    assert {"replicas[0].cpu", "replicas[0].memory"} <= set(response.json())


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_the_form_refuses_a_quantity_that_is_not_a_number(api, value):
    response = api.post("/jobs/new/", form_data(**{"replicas-0-cpu": value}))
    assert response.status_code == 422 and not Job.objects.exists()
    assert "1 problem stops this job" in response.content.decode()


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_the_fit_preview_names_the_field_instead(api, value):
    response = api.post("/jobs/new/preview/", form_data(**{"replicas-0-cpu": value}))
    assert response.status_code == 200 and "replicas[0].cpu" in response.content.decode()


@pytest.mark.parametrize("value", ["NaN", "inf", "-Infinity", "1e30", "1e308", "1e999999", "1e1000000"])
@pytest.mark.parametrize("resource", ["gpu", "cpu", "memory"])
def test_the_quota_page_refuses_what_is_not_an_amount_or_beyond_its_range(admin, resource, value):
    response = admin.post("/teams/maps/quota/", {"weight": "1", f"{resource}_nominal": value})
    assert response.status_code == 422
    assert Quota.objects.get(team__slug="maps", resource="gpu").nominal == 8


def test_the_quota_preview_refuses_it_too(admin):
    response = admin.post("/teams/maps/quota/", {"weight": "1", "cpu_nominal": "NaN"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "until these are fixed: CPU nominal: Must be an amount" in response.content.decode()


# -- Ranges: one per field, the same on every path -------------------------------------


@pytest.mark.parametrize("weight", ["1e308", "1000.5", "inf", "nan", "0", "-1"])
def test_the_quota_page_holds_the_weight_to_its_range(admin, weight):
    response = admin.post("/teams/maps/quota/", {"weight": weight, "gpu_nominal": "8"})
    assert response.status_code == 422
    assert Team.objects.get(slug="maps").weight == 1.0


@pytest.mark.parametrize("weight", [1e308, 1000.5, 0, -1, "nan", "inf", "1e400"])
def test_the_api_holds_the_weight_to_the_same_range(admin, weight):
    response = admin.patch("/api/v1/teams/maps/quota/", {"weight": weight}, content_type="application/json")
    assert response.status_code == 400 and "weight" in response.json()


def test_the_admin_holds_the_weight_and_quotas_to_the_same_ranges(maps):
    maps.weight = 1e308
    with pytest.raises(ValidationError) as error:
        maps.full_clean()
    assert "weight" in error.value.message_dict
    quota = Quota(team=maps, resource="gpu", nominal=INT32_MAX + 1)
    with pytest.raises(ValidationError) as error:
        quota.full_clean()
    assert "nominal" in error.value.message_dict


def test_the_admin_page_refuses_a_weight_out_of_range(admin, staff, maps):
    staff.is_superuser = True
    staff.save()
    page = admin.get(f"/admin/tenants/team/{maps.pk}/change/")
    assert page.status_code == 200
    data = {"slug": "maps", "name": "Maps", "weight": "1e308", "default_tier": maps.default_tier_id,
            "tiers": [t.pk for t in maps.tiers.all()], "checkpoint_claim": "",
            "quotas-TOTAL_FORMS": "0", "quotas-INITIAL_FORMS": "0", "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0"}  # fmt: skip
    response = admin.post(f"/admin/tenants/team/{maps.pk}/change/", data)
    assert response.status_code == 200 and "Must be a number from 0.01 to 1000" in response.content.decode()
    assert Team.objects.get(slug="maps").weight == 1.0


@pytest.mark.parametrize("resource, amount", [("gpu", INT32_MAX + 1), ("gpu", QUOTA_MAX["gpu"] + 1),
                                              ("cpu", QUOTA_MAX["cpu"] + 1), ("memory", 2**62)])  # fmt: skip
@pytest.mark.parametrize("limit", ["nominal", "borrowing_limit", "lending_limit"])
def test_the_api_refuses_a_quota_beyond_the_stated_maximum(admin, resource, amount, limit):
    body = {"quotas": {resource: {"nominal": 1, limit: amount}}}
    response = admin.patch("/api/v1/teams/maps/quota/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert limit in json.dumps(response.json()["quotas"])
    assert str(QUOTA_MAX[resource]) in json.dumps(response.json())


def test_the_largest_gpu_quota_accepted_fits_the_usage_columns():
    assert QUOTA_MAX["gpu"] * 100 < INT32_MAX  # a hundred teams at the maximum still sum within 32 bits
    assert WEIGHT_MAX == 1000


def test_every_largest_accepted_number_fits_its_column():
    """The largest value each input accepts, against the column that stores it (or a sum of them)."""
    from django.db import connection

    from jobs.models import Job
    from scheduling.models import UsageSample
    from tenants import inputs

    def column_max(model, field):
        return connection.ops.integer_field_range(model._meta.get_field(field).get_internal_type())[1]

    assert inputs.MAX_REPLICAS * inputs.MAX_GPU_PER_REPLICA <= column_max(Job, "gpu_total")
    assert inputs.MAX_RUNTIME <= column_max(Job, "max_runtime") and inputs.MAX_RUNTIME <= column_max(Job, "sim_duration")
    assert inputs.QUOTA_MAX["gpu"] <= column_max(UsageSample, "gpu_nominal")
    for resource, most in inputs.QUOTA_MAX.items():
        assert most * 1000 <= column_max(Quota, "nominal"), resource  # sums over a thousand teams fit too


def test_the_api_accepts_the_maximum_itself(admin):
    body = {"quotas": {"gpu": {"nominal": QUOTA_MAX["gpu"], "borrowing_limit": 0}}}
    assert admin.patch("/api/v1/teams/maps/quota/", body, content_type="application/json").status_code == 200
    assert Quota.objects.get(team__slug="maps", resource="gpu").nominal == QUOTA_MAX["gpu"]


# -- NUL and lone surrogates -------------------------------------------------------------


BAD_TEXT = {"NUL": "a\x00b", "a lone surrogate": "a\ud800b", "a lone low surrogate": "\udc00"}
PLACES = {
    "command": lambda bad: {"command": ["python", bad]},
    "args": lambda bad: {"args": [bad]},
    "an env value": lambda bad: {"env": {"A": bad}},
    "an env name": lambda bad: {"env": {bad: "x"}},
    "the name": lambda bad: {"name": bad},
    "the image": lambda bad: {"image": f"busybox{bad}"},
    "the tier": lambda bad: {"tier": bad},
}


@pytest.mark.parametrize("bad", BAD_TEXT.values(), ids=BAD_TEXT.keys())
@pytest.mark.parametrize("place", PLACES.values(), ids=PLACES.keys())
def test_the_api_refuses_text_postgresql_cannot_store(api, place, bad):
    response = post_spec(api, **place(bad))
    assert response.status_code == 400, response.content
    assert not Job.objects.exists()


def test_the_refusal_says_what_is_wrong(api):
    response = post_spec(api, command=["python", "a\x00b"])
    assert response.json()["command[1]"] == ["Contains a NUL character at position 1; text must be printable Unicode."]


def test_yaml_escapes_are_refused_the_same_way(api):
    body = 'team: maps\nname: x\nimage: busybox\ncommand: ["a\\0b", "\\uD800"]\nreplicas: [{role: Worker}]\n'
    response = api.post("/api/v1/jobs/", data=body, content_type="application/yaml")
    assert response.status_code == 400 and {"command[0]", "command[1]"} <= set(response.json())


@pytest.mark.parametrize("url, status", [
    ("/api/v1/teams/ma%00ps/", 400), ("/api/v1/teams/ma%00ps/quota/", 400), ("/api/v1/jobs/1%00/", 400),
    ("/api/v1/jobs/?team=ma%00ps", 400), ("/api/v1/jobs/?owner=%00", 400), ("/teams/ma%00ps/", 400),
    ("/jobs/?state=%00", 400), ("/api/v1/teams/MAPS/", 404), ("/api/v1/teams/" + "m" * 70 + "/", 404),
])  # fmt: skip
def test_nul_in_a_url_is_a_4xx_not_a_500(admin, url, status):
    response = admin.get(url)
    assert response.status_code == status


def test_nul_in_an_api_url_is_answered_in_drfs_shapes(admin):
    assert "detail" in admin.get("/api/v1/teams/ma%00ps/").json()
    assert admin.get("/api/v1/jobs/?team=ma%00ps").json()["team"][0].startswith("Contains a NUL character")


def test_nul_in_a_page_url_is_a_page_saying_so(admin):
    response = admin.get("/teams/ma%00ps/")
    assert "cannot be read" in response.content.decode() and "NUL" in response.content.decode()


@pytest.mark.parametrize("value", ["a\x00b"])
def test_the_form_refuses_nul_in_every_field(api, value):
    for field in ("name", "image", "command", "args", "env"):
        data = form_data(**{field: value if field != "env" else f"A={value}"})
        response = api.post("/jobs/new/", data)
        assert response.status_code == 422, field
    assert not Job.objects.exists()
