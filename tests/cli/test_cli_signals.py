"""SIGTERM, which CI sends to a step it cancels and Kubernetes to a pod it stops: one line on standard
error and exit 143 (as 130 for Ctrl-C), never a traceback; `gangway checkpoint` still never fails the
training."""

from __future__ import annotations

import signal

import pytest

from tests.cli.fake_portal import Answer, job
from tests.cli.test_cli_output import wait_for_line

RUNNING_LOGS = Answer(200, {"job": 7, "state": "running", "failure": None,
                            "replicas": [{"replica": "worker-0", "lines": ["epoch 1"]}]})  # fmt: skip


@pytest.fixture
def spec(tmp_path) -> str:
    path = tmp_path / "job.yaml"
    path.write_text("name: x\n")
    return str(path)


def wait_for_requests(process, fake_portal, count: int = 1) -> None:
    """Until the fake portal has seen `count` requests: the command is then inside one."""
    while len(fake_portal.requests) < count:
        assert process.poll() is None, process.stderr.read()
        fake_portal.stop.wait(0.05)


def terminated(process) -> tuple[int, str]:
    """SIGTERM to the process; its exit code and standard error."""
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=20)
    return code, process.stderr.read()


def test_sigterm_while_waiting_for_a_job_exits_143_in_one_line(gangway_process, fake_portal, spec):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7)))
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(200, job(7, position=3)))
    process = gangway_process("submit", spec, "--wait", "--interval", "1")
    assert wait_for_line(process.stdout) == "http://127.0.0.1/jobs/7/\n"
    assert "queued" in wait_for_line(process.stdout)
    code, err = terminated(process)
    assert code == 143
    assert err == "gangway: terminated; job 7 keeps going on the server: `gangway cancel 7` stops it.\n"


def test_sigterm_while_following_logs_exits_143_in_one_line(gangway_process, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/7/logs/", RUNNING_LOGS)
    process = gangway_process("logs", "7", "-f", "--interval", "1")
    assert wait_for_line(process.stdout) == "epoch 1\n"
    assert terminated(process) == (143, "gangway: terminated.\n")


def test_sigterm_inside_a_request_that_hangs_ends_it_at_once(gangway_process, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/7/logs/", Answer(200, {}, delay=60))
    process = gangway_process("logs", "7", "-f")
    wait_for_requests(process, fake_portal)
    assert terminated(process) == (143, "gangway: terminated.\n")


def test_sigterm_before_a_submission_is_answered_says_how_to_get_the_job_back(gangway_process, fake_portal, spec):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7), delay=60))
    process = gangway_process("submit", spec, "--wait")
    wait_for_requests(process, fake_portal)
    code, err = terminated(process)
    key = fake_portal.requests[0].headers["Idempotency-Key"]
    assert code == 143 and len(err.splitlines()) == 1
    assert err.startswith("gangway: terminated before the server answered") and f"--idempotency-key {key}" in err


@pytest.mark.parametrize("flags, code, said", [
    ((), 0, "gangway: warning: checkpoint not recorded, training goes on: terminated while reporting.\n"),
    (("--strict",), 143, "gangway: terminated while reporting.\n"),
], ids=["never fails the training", "with --strict, exit 143"])  # fmt: skip
def test_sigterm_during_a_checkpoint_report(gangway_process, fake_portal, flags, code, said):
    fake_portal.on("POST", "/api/v1/jobs/7/checkpoint/", Answer(200, {"job": 7}, delay=60))
    process = gangway_process("checkpoint", *flags, env={"GANGWAY_JOB_ID": "7", "GANGWAY_JOB_TOKEN": "gjt_x"})
    wait_for_requests(process, fake_portal)
    assert terminated(process) == (code, said)
