"""The one validation every path into Gangway goes through."""

from __future__ import annotations

import pytest

from jobs.spec import SpecError, format_cpu, format_memory, parse_spec, spec_to_data
from tests.conftest import spec_data


def errors_of(data, **kwargs) -> dict:
    with pytest.raises(SpecError) as error:
        parse_spec(data, **kwargs)
    return error.value.errors


def test_it_accepts_the_design_example():
    spec = parse_spec({
        "team": "maps", "name": "resnet50-baseline", "kind": "TFJob", "image": "tensorflow/tensorflow:2.12.0-gpu",
        "command": ["python", "/app/train.py"], "args": ["--epochs", "90"], "env": {"DATASET": "imagenet"},
        "tier": "standard", "max_runtime": 7200,
        "replicas": [{"role": "Worker", "count": 4, "gpu": 1, "cpu": "2", "memory": "4Gi"}],
    })  # fmt: skip
    assert spec.gpu_total == 4
    assert spec.replicas[0].cpu == 2000 and spec.replicas[0].memory == 4 * 1024**3
    assert spec.env == (("DATASET", "imagenet"),)


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"name": "Bad_Name"}, "name", "lowercase"),
        ({"name": "x" * 51}, "name", "at most 50"),
        ({"image": "not a/valid image"}, "image", "Not a valid image"),
        ({"command": "python train.py"}, "command", "never run through a shell"),
        ({"env": {"1BAD": "x"}}, "env.1BAD", "Names are letters"),
        ({"env": {"OK": "x" * 5000}}, "env.OK", "at most 4096"),
        ({"kind": "MPIJob"}, "kind", "one of TFJob, PyTorchJob"),
        ({"max_runtime": -5}, "max_runtime", "1 to"),
        ({"replicas": []}, "replicas", "at least one"),
        ({"replicas": [{"role": "Worker", "count": 10**9}]}, "replicas[0].count", "1 to 1000"),
        ({"replicas": [{"role": "Worker", "gpu": -1}]}, "replicas[0].gpu", "0 to 64"),
        ({"replicas": [{"role": "Worker", "gpu": 1.5}]}, "replicas[0].gpu", "whole number"),
        ({"replicas": [{"role": "Worker", "cpu": "lots"}]}, "replicas[0].cpu", "Kubernetes quantity"),
        ({"replicas": [{"role": "Worker", "memory": "0.5"}]}, "replicas[0].memory", "whole bytes"),
        ({"replicas": [{"role": "Worker", "cpu": "1e999999"}]}, "replicas[0].cpu", "0 to 1024 CPUs, in whole millicores"),
        ({"replicas": [{"role": "Worker", "memory": "1e99999999999"}]}, "replicas[0].memory", "0 to 16 TiB, in whole bytes"),
        ({"replicas": [{"role": "Worker", "cpu": "٣"}]}, "replicas[0].cpu", "Kubernetes quantity"),
        ({"replicas": [{"role": "Launcher"}]}, "replicas[0].role", "one of"),
        ({"replicas": [{"role": "Chief", "count": 2}]}, "replicas[0].count", "exactly one Chief"),
        ({"surprise": 1}, "surprise", "Unknown field"),
    ],
)
def test_it_refuses_bad_fields_naming_them(overrides, field, fragment):
    errors = errors_of(spec_data(**overrides))
    assert field in errors, errors
    assert fragment in " ".join(errors[field])


def test_it_reports_every_problem_at_once():
    errors = errors_of(spec_data(name="", image="", replicas=[]))
    assert {"name", "image", "replicas"} <= set(errors)


def test_it_refuses_a_spec_for_another_team_than_the_request():
    assert "team" in errors_of(spec_data(team="vision"), team="maps")


def test_it_fills_the_team_from_the_request():
    data = spec_data()
    del data["team"]
    assert parse_spec(data, team="maps").team == "maps"


def test_it_refuses_what_is_not_a_mapping():
    assert "non_field_errors" in errors_of(["a", "list"])


def test_pytorch_roles_are_master_and_worker():
    spec = parse_spec(spec_data(kind="PyTorchJob", replicas=[{"role": "Master", "count": 1}, {"role": "Worker", "count": 3}]))
    assert [g.role for g in spec.replicas] == ["Master", "Worker"]
    assert "replicas[0].role" in errors_of(spec_data(kind="PyTorchJob", replicas=[{"role": "PS"}]))


def test_the_spec_round_trips_through_its_data():
    spec = parse_spec(spec_data(replicas=[{"role": "Worker", "count": 2, "gpu": 1, "cpu": "500m", "memory": "3Gi"}]))
    assert parse_spec(spec_to_data(spec)) == spec


def test_quantities_format_back():
    assert (format_cpu(2000), format_cpu(500), format_memory(4 * 1024**3), format_memory(1000)) == ("2", "500m", "4Gi", "1000")


# -- volumes and shm ----------------------------------------------------------------------------------------

VOLUMES = [{"claim": "datasets", "path": "/data", "read_only": True}, {"config_map": "train-config", "path": "/etc/train"}]


def test_it_accepts_claims_config_maps_and_shm():
    spec = parse_spec(spec_data(volumes=VOLUMES, shm="16Gi"))
    assert [(v.source, v.name, v.path, v.read_only) for v in spec.volumes] == [
        ("claim", "datasets", "/data", True), ("config_map", "train-config", "/etc/train", True),
    ]  # fmt: skip
    assert spec.shm == 16 * 1024**3
    assert spec_to_data(spec)["volumes"] == VOLUMES and spec_to_data(spec)["shm"] == "16Gi"


def test_a_claim_is_read_write_unless_asked_otherwise():
    spec = parse_spec(spec_data(volumes=[{"claim": "scratch", "path": "/scratch"}]))
    assert spec.volumes[0].read_only is False


def test_a_spec_without_volumes_keeps_its_json_shape():
    assert set(spec_to_data(parse_spec(spec_data()))) == {
        "team", "name", "kind", "image", "command", "args", "env", "tier", "max_runtime", "replicas",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("volumes", "field", "fragment"),
    [
        ("datasets", "volumes", "list of at most 16"),
        ([{"path": "/data"}], "volumes[0]", "exactly one of claim"),
        ([{"claim": "a", "config_map": "b", "path": "/data"}], "volumes[0]", "exactly one of claim"),
        ([{"claim": "Data_Sets", "path": "/data"}], "volumes[0].claim", "Kubernetes object name"),
        ([{"claim": "datasets"}], "volumes[0].path", "Required"),
        ([{"claim": "datasets", "path": "data"}], "volumes[0].path", "absolute path"),
        ([{"claim": "datasets", "path": "/data/../etc"}], "volumes[0].path", "absolute path"),
        ([{"claim": "datasets", "path": "/"}], "volumes[0].path", "absolute path"),
        ([{"claim": "datasets", "path": "/dev/shm"}], "volumes[0].path", "ask for its size with shm"),
        ([{"claim": "datasets", "path": "/checkpoint/x"}], "volumes[0].path", "checkpoint claim"),
        ([{"claim": "a", "path": "/data"}, {"claim": "b", "path": "/data"}], "volumes[1].path", "Two volumes"),
        ([{"config_map": "cfg", "path": "/etc/cfg", "read_only": False}], "volumes[0].read_only", "always mounted read-only"),
        ([{"claim": "datasets", "path": "/data", "read_only": "yes"}], "volumes[0].read_only", "true or false"),
        ([{"claim": "datasets", "path": "/data", "hostPath": "/"}], "volumes[0].hostPath", "Unknown field"),
    ],
    ids=[
        "volumes must be a list", "a volume names a source", "a volume names one source only",
        "a claim name is a Kubernetes name", "a volume needs a path", "a path is absolute",
        "a path has no dot-dot", "the root cannot be mounted over", "dev shm is the shm field's",
        "the checkpoint directory is the team's", "two volumes never share a path",
        "a config map is read-only", "read only is a boolean", "a host path is no volume field",
    ],
)
def test_it_refuses_bad_volumes(volumes, field, fragment):
    errors = errors_of(spec_data(volumes=volumes))
    assert any(fragment in message for message in errors[field]), errors


@pytest.mark.parametrize("shm", ["lots", "-1Gi", "17Ti", "0.5"])
def test_it_refuses_a_bad_shm(shm):
    assert "shm" in errors_of(spec_data(shm=shm))


def test_a_claim_name_with_a_trailing_newline_is_refused():
    assert "volumes[0].claim" in errors_of(spec_data(volumes=[{"claim": "datasets\n", "path": "/data"}]))
