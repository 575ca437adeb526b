"""A JSON spec sent as YAML is read as JSON: YAML 1.1 (PyYAML) refuses a tab before a key and reads 36e2
as a string, and scripts send `Content-Type: application/yaml` for whatever file they hold."""

import json

import pytest

from jobs.models import Job
from tenants.inputs import MAX_DEPTH, MAX_YAML_BYTES
from tests.conftest import spec_data

URL = "/api/v1/jobs/"


def test_a_json_spec_indented_with_tabs_is_taken_as_yaml(as_persona):
    # As `jq --tab` and Go's json.MarshalIndent(v, "", "\t") write it.
    body = json.dumps(spec_data(name="tabbed"), indent="\t")
    response = as_persona("maps_token").post(URL, body, content_type="application/yaml")
    assert response.status_code == 201, response.json()
    assert Job.objects.filter(name="tabbed").exists()


@pytest.mark.parametrize("written", ["36e2", "1e+16"])
def test_a_json_number_with_an_exponent_reads_as_the_same_number_sent_as_yaml_or_json(as_persona, written):
    # Python's json.dumps(1e16) writes 1e+16, JavaScript 1e21; YAML 1.1 read either as a string.
    body = json.dumps(spec_data(name="exp")).replace('"kind"', f'"max_runtime": {written}, "kind"')
    as_yaml = as_persona("maps_token").post(URL, body, content_type="application/yaml")
    as_json = as_persona("maps_token").post(URL, body, content_type="application/json")
    assert as_yaml.status_code == as_json.status_code == 400
    assert as_yaml.json() == as_json.json(), as_yaml.json()


def test_yaml_that_is_not_json_is_still_read_as_yaml(as_persona):
    # A flow mapping is YAML, not JSON (its keys are not quoted).
    body = "{team: maps, name: flow, image: 'tensorflow/tensorflow:2.12.0-gpu', replicas: [{role: Worker, gpu: 1}]}"
    response = as_persona("maps_token").post(URL, body, content_type="application/yaml")
    assert response.status_code == 201, response.json()


def test_nan_is_not_json_and_is_refused_by_the_field(as_persona):
    body = json.dumps(spec_data(name="nan")).replace('"kind"', '"max_runtime": NaN, "kind"')
    response = as_persona("maps_token").post(URL, body, content_type="application/yaml")
    assert response.status_code == 400 and "max_runtime" in response.json(), response.json()


def test_json_sent_as_yaml_keeps_the_yaml_nesting_limit(as_persona):
    body = '{"a": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1)
    response = as_persona("maps_token").post(URL, body, content_type="application/yaml")
    assert response.status_code == 400
    assert f"deeper than {MAX_DEPTH} levels" in response.json()["detail"]


def test_json_sent_as_yaml_keeps_the_yaml_size_limit(as_persona):
    body = json.dumps(spec_data(name="big", command=["x" * MAX_YAML_BYTES]))
    response = as_persona("maps_token").post(URL, body, content_type="application/yaml")
    assert response.status_code == 400
    assert f"larger than {MAX_YAML_BYTES // 1024} KiB" in response.json()["detail"]
