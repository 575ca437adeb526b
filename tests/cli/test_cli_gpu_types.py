"""`gangway submit --gpu-type`: the types a job accepts, in order, beside a spec or a manifest file."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from gangway_cli.main import build_parser
from jobs.models import Job
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle

JOB = """
team: maps
name: {name}
image: tensorflow/tensorflow:2.12.0-gpu
replicas:
  - {{role: Worker, count: 1, gpu: 2}}
"""


@pytest.fixture
def typed(gpu_types, transactional_db):
    admission_cycle(cluster=SimulatedCluster())  # the node mirror R10 reads
    return gpu_types


def write_job(tmp_path, name: str, extra: str = "") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(JOB.format(name=name) + extra)
    return str(path)


@pytest.mark.parametrize("flags, names", [
    (["--gpu-type", "a100"], [["a100"]]),
    (["--gpu-type", "h100,a100", "--gpu-type", "l4"], [["h100", "a100"], ["l4"]]),
])  # fmt: skip
def test_the_flag_is_repeated_or_comma_separated(flags, names):
    assert build_parser().parse_args(["submit", "job.yaml", *flags]).gpu_type == names


def test_an_empty_name_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["submit", "job.yaml", "--gpu-type", "a100,"])
    assert exit_.value.code == 2 and "not a list of GPU type names" in capsys.readouterr().err


def test_it_submits_with_the_types_in_order(gangway, typed, tmp_path):
    result = gangway("submit", write_job(tmp_path, "typed"), "--gpu-type", "a100", "--gpu-type", "l4")
    assert result.returncode == 0, result.stderr
    assert Job.objects.get(name="typed").gpu_type == ["a100", "l4"]


def test_the_files_own_gpu_type_goes_through_the_spec(gangway, typed, tmp_path):
    result = gangway("submit", write_job(tmp_path, "in-file", "gpu_type: [l4, a100]\n"))
    assert result.returncode == 0, result.stderr
    assert Job.objects.get(name="in-file").gpu_type == ["l4", "a100"]


def test_an_unknown_type_exits_6_naming_the_clusters_types(gangway, typed, tmp_path):
    result = gangway("submit", write_job(tmp_path, "unknown"), "--gpu-type", "h100")
    assert result.returncode == 6
    assert "No GPU type h100 on this cluster; its types are l4, a100." in result.stderr
    assert not Job.objects.exists()


def test_status_names_the_type_given(gangway, typed, tmp_path):
    gangway("submit", write_job(tmp_path, "shown"), "--gpu-type", "a100")
    admission_cycle(cluster=SimulatedCluster())
    result = gangway("status", str(Job.objects.get(name="shown").pk))
    assert "2 GPUs (a100)" in result.stdout.splitlines()[0]


def test_manage_py_submit_takes_gpu_type_through_the_spec(typed, tmp_path):
    call_command("submit", team="maps", file=write_job(tmp_path, "admin-typed", "gpu_type: a100\n"), stdout=StringIO())
    assert Job.objects.get(name="admin-typed").gpu_type == ["a100"]
    with pytest.raises(CommandError, match="gpu_type: No GPU type t4 on this cluster; its types are l4, a100."):
        call_command("submit", team="maps", file=write_job(tmp_path, "bad", "gpu_type: t4\n"))
