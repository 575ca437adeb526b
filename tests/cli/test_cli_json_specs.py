"""`gangway submit` sends a JSON file as JSON: YAML 1.1, which the server's YAML parser reads, is no superset of
JSON (a tab before a key is an error, 36e2 a string)."""

from __future__ import annotations

import json

import pytest

from jobs.models import Job
from tests.cli.fake_portal import Answer, job
from tests.conftest import spec_data


@pytest.mark.parametrize("name, text, sent", [
    ("job.json", json.dumps(spec_data(), indent="\t"), "application/json"),
    ("job.yaml", json.dumps(spec_data(), indent="\t"), "application/json"),
    ("job.JSON", "team: maps\n", "application/json"),
    ("job.yaml", "team: maps\nname: resnet\n", "application/yaml"),
    ("job.yaml", '{"team": "maps", "max_runtime": NaN}', "application/yaml"),
], ids=["a .json file", "JSON in a file named otherwise", "a .json file that is not JSON", "a YAML file",
        "NaN, which is not JSON"])  # fmt: skip
def test_it_sends_a_json_file_as_json_and_the_rest_as_yaml(cli, fake_portal, tmp_path, name, text, sent):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job()))
    (tmp_path / name).write_text(text)
    result = cli("submit", str(tmp_path / name))
    assert result.code == 0, result.err
    [request] = fake_portal.to("/api/v1/jobs/")
    assert request.headers["Content-Type"] == sent
    assert request.body == text.encode()


def test_submit_takes_a_json_spec_indented_with_tabs(gangway, tmp_path, transactional_db, nodes):
    # As `jq --tab`, Go's json.MarshalIndent(v, "", "\t") and json.dump(v, indent="\t") write it.
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec_data(name="from-json"), indent="\t"))
    result = gangway("submit", str(path))
    assert result.returncode == 0, result.stderr
    assert Job.objects.filter(name="from-json").exists()


def test_a_json_number_with_an_exponent_reaches_the_server_as_a_number(gangway, tmp_path, transactional_db):
    # Python's json.dumps(1e16) writes 1e+16; read as YAML 1.1 it was the string '1e+16'.
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec_data(name="from-json")).replace('"kind"', '"max_runtime": 1e+16, "kind"'))
    result = gangway("submit", str(path))
    assert result.returncode == 6
    assert "max_runtime: Must be whole seconds from 1 to 2592000 (30 days), got 1e+16." in result.stderr
