"""`gangway` end to end: a real server, the simulated cluster, and the exit codes CI relies on."""

import time

import pytest

from jobs.models import Job
from scheduling.models import ClusterNode

JOB = """
team: maps
name: {name}
image: tensorflow/tensorflow:2.12.0-gpu
command: [python, train.py]
replicas:
  - {{role: Worker, count: 2, gpu: 1}}
simulate: {{duration: 2, fail: {fail}}}
"""


def write_job(tmp_path, name: str, *, fail: bool = False):
    path = tmp_path / f"{name}.yaml"
    path.write_text(JOB.format(name=name, fail="true" if fail else "false"))
    return str(path)


def test_submit_wait_exits_0_when_the_job_succeeds(gangway, loop, tmp_path):
    result = gangway("submit", write_job(tmp_path, "ok"), "--team", "maps", "--wait", "--interval", "1", "--timeout", "45")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    job = Job.objects.get(name="ok")
    assert lines[0].endswith(f"/jobs/{job.pk}/")
    assert any(" queued" in line for line in lines) and "succeeded" in lines[-1]
    assert "\r" not in result.stdout  # no progress line when stdout is not a terminal
    assert job.state == "succeeded"


def test_submit_wait_exits_1_when_the_job_fails(gangway, loop, tmp_path):
    result = gangway("submit", write_job(tmp_path, "boom", fail=True), "--wait", "--interval", "1", "--timeout", "45")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "failed" in result.stdout.splitlines()[-1]
    assert Job.objects.get(name="boom").state == "failed"


def test_submit_wait_exits_3_on_timeout(gangway, tmp_path, transactional_db):
    result = gangway("submit", write_job(tmp_path, "slow"), "--wait", "--interval", "1", "--timeout", "2s")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Timed out after 2 s" in result.stdout and "gangway cancel" in result.stdout


def test_an_invalid_job_exits_6_with_the_field_errors_on_one_line(gangway, tmp_path, transactional_db):
    path = tmp_path / "bad.yaml"
    path.write_text("team: maps\nname: Bad_Name\nimage: x\nreplicas: []\n")
    result = gangway("submit", str(path))
    assert result.returncode == 6
    assert len(result.stderr.splitlines()) == 1
    assert "name: Must be at most 50 lowercase letters" in result.stderr and "replicas: Required" in result.stderr


def test_a_job_that_can_never_fit_exits_1(gangway, loop, tmp_path):
    deadline = time.monotonic() + 30
    while not ClusterNode.objects.exists():  # a cycle of the loop records the nodes R10 checks against
        assert time.monotonic() < deadline, "no admission cycle recorded the nodes"
        time.sleep(0.05)
    path = tmp_path / "huge.yaml"
    path.write_text(JOB.format(name="huge", fail="false").replace("count: 2, gpu: 1", "count: 4, gpu: 8"))
    result = gangway("submit", str(path))
    assert result.returncode == 1 and "Rejected: Can never run" in result.stderr


def test_a_retry_with_the_same_key_returns_the_same_job(gangway, tmp_path, transactional_db):
    path = write_job(tmp_path, "same")
    first = gangway("submit", path, "--idempotency-key", "run-9")
    again = gangway("submit", path, "--idempotency-key", "run-9")
    assert first.returncode == again.returncode == 0
    assert first.stdout == again.stdout and "already submitted" in again.stderr
    assert Job.objects.filter(name="same").count() == 1


def test_status_cancel_and_queue(gangway, tmp_path, transactional_db):
    gangway("submit", write_job(tmp_path, "waiting"))
    job = Job.objects.get(name="waiting")
    queue = gangway("queue")
    assert queue.returncode == 0 and "waiting" in queue.stdout
    status = gangway("status", str(job.pk))
    assert status.returncode == 0 and "queued" in status.stdout
    cancel = gangway("cancel", str(job.pk))
    assert cancel.returncode == 0 and "cancelled" in cancel.stdout
    assert gangway("status", "999999").returncode == 5


@pytest.mark.parametrize(
    "args, message",
    [
        (("submit", "/nonexistent.yaml"), "Cannot read /nonexistent.yaml"),
        (("submit", "job.yaml", "--timeout", "soon"), "not a duration"),
    ],
    ids=["a missing file", "a bad timeout"],
)
def test_usage_errors_exit_2(gangway, transactional_db, args, message):
    result = gangway(*args)
    assert result.returncode == 2 and message in result.stderr


def test_a_wrong_token_exits_4(gangway, transactional_db):
    result = gangway("queue", token="gw_wrong")
    assert result.returncode == 4 and "Unknown token" in result.stderr and "gw_wrong" not in result.stderr


def test_checkpoint_from_inside_a_job_reports_with_the_pods_token(gangway, submit, transactional_db):
    from jobs import job_tokens
    from jobs.models import Job

    job = submit()
    Job.objects.filter(pk=job.pk).update(state="running")
    done = gangway("checkpoint", "--job", str(job.pk), "--job-token", job_tokens.issue(job.pk))
    assert done.returncode == 0, done.stderr
    assert "recorded" in done.stdout
    assert Job.objects.get(pk=job.pk).checkpointed_at is not None
    refused = gangway("checkpoint", "--job", str(job.pk), "--job-token", job_tokens.issue(job.pk + 1), "--strict")
    assert refused.returncode == 4 and "not for reporting" in refused.stderr  # refused by the portal
