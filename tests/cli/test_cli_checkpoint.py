"""`gangway checkpoint` from inside a job: exit 0 when recorded, and also, with a warning, whenever it
could not be (the portal down or slow, the token refused, no job in the environment), so that it never
fails a training script; --strict gives the usual exit codes instead. It takes at most about 12 s."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from django.core import signing

from jobs import job_tokens
from jobs.models import Job
from tests.cli.conftest import closed_port_url
from tests.cli.fake_portal import Answer

WARNING = "gangway: warning: checkpoint not recorded, training goes on: "


@pytest.fixture
def running(submit, transactional_db):
    job = submit()
    Job.objects.filter(pk=job.pk).update(state="running")
    return job


def tampered(job: Job) -> str:
    token = job_tokens.issue(job.pk)
    return token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")


def expired(job: Job, monkeypatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(signing.time, "time", lambda: 1_000_000_000.0)  # 2001: far older than JOB_TOKEN_MAX_AGE
        return job_tokens.issue(job.pk)


def checkpoint(gangway, job: Job, token: str, *flags: str):
    return gangway("checkpoint", "--job", str(job.pk), "--job-token", token, *flags)


def test_it_exits_0_when_the_checkpoint_is_recorded(gangway, running):
    done = checkpoint(gangway, running, job_tokens.issue(running.pk))
    assert done.returncode == 0, done.stderr
    assert f"Checkpoint of job {running.pk} recorded" in done.stdout
    assert Job.objects.get(pk=running.pk).checkpointed_at is not None


@pytest.mark.parametrize(
    "token, message",
    [
        (lambda job, _: job_tokens.issue(job.pk + 1), "not for reporting a checkpoint"),
        (lambda job, _: tampered(job), "not issued by Gangway, or was changed"),
        (expired, "has expired"),
    ],
    ids=["another job's token", "a tampered token", "an expired token"],
)
def test_a_refused_token_is_a_warning_or_with_strict_exit_4(gangway, running, monkeypatch, token, message):
    job_token = token(running, monkeypatch)
    refused = checkpoint(gangway, running, job_token)
    assert refused.returncode == 0 and refused.stderr.startswith(WARNING) and message in refused.stderr
    strict = checkpoint(gangway, running, job_token, "--strict")
    assert strict.returncode == 4 and strict.stderr.startswith("gangway: ") and message in strict.stderr
    assert Job.objects.get(pk=running.pk).checkpointed_at is None


def test_a_job_that_does_not_report_checkpoints_exits_6_with_strict(gangway, submit, transactional_db):
    queued = submit()
    assert checkpoint(gangway, queued, job_tokens.issue(queued.pk)).returncode == 0
    refused = checkpoint(gangway, queued, job_tokens.issue(queued.pk), "--strict")
    assert refused.returncode == 6 and "is queued" in refused.stderr


def run_checkpoint(*flags: str, url: str | None, job_id: str | None = "7", token: str | None = "gjt_x"):
    """`gangway checkpoint` as a training script runs it, in a pod's environment (a variable set to None is
    left out); returns the CompletedProcess and the seconds it took."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GANGWAY_")}
    pod = {"GANGWAY_URL": url, "GANGWAY_JOB_ID": job_id, "GANGWAY_JOB_TOKEN": token}
    env.update({name: value for name, value in pod.items() if value is not None})
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "gangway_cli.main", "checkpoint", *flags], capture_output=True,
                            text=True, timeout=60, env=env)  # fmt: skip
    return result, time.monotonic() - started


def test_a_portal_that_is_down_never_fails_the_training():
    result, took = run_checkpoint(url=closed_port_url())
    assert result.returncode == 0 and result.stderr.startswith(WARNING) and "Cannot reach" in result.stderr
    assert took < 15
    strict, _ = run_checkpoint("--strict", url=closed_port_url())
    assert strict.returncode == 7


def test_a_portal_that_does_not_answer_is_given_up_on_within_15_seconds(fake_portal):
    fake_portal.on("POST", "/api/v1/jobs/7/checkpoint/", Answer(200, {"job": 7}, delay=120))
    result, took = run_checkpoint(url=fake_portal.url)
    assert result.returncode == 0 and "timed out (2 attempts)" in result.stderr
    assert took < 15 and len(fake_portal.requests) == 2


@pytest.mark.parametrize("missing", ["url", "job_id", "token"], ids=["no GANGWAY_URL (no PUBLIC_URL)",
                         "no GANGWAY_JOB_ID", "no GANGWAY_JOB_TOKEN"])  # fmt: skip
def test_a_pod_without_gangways_environment_goes_on_training(fake_portal, missing):
    result, _ = run_checkpoint(**{"url": fake_portal.url, missing: None})
    assert result.returncode == 0 and result.stderr.startswith(WARNING)
    strict, _ = run_checkpoint("--strict", **{"url": fake_portal.url, missing: None})
    assert strict.returncode == 2 and not fake_portal.requests


def test_its_help_says_it_never_fails_the_training():
    result = subprocess.run([sys.executable, "-m", "gangway_cli.main", "checkpoint", "--help"],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "It never fails the training" in " ".join(result.stdout.split())
