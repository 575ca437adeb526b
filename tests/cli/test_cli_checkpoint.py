"""`gangway checkpoint` from inside a job: exit 0 when recorded, 1 when the portal refused or was out
of reach (a training script may ignore it), 2 only for a usage error on the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.core import signing

from jobs import job_tokens
from jobs.models import Job


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


def checkpoint(gangway, job: Job, token: str):
    return gangway("checkpoint", "--job", str(job.pk), "--job-token", token)


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
def test_it_exits_1_when_the_portal_refuses_the_token(gangway, running, monkeypatch, token, message):
    refused = checkpoint(gangway, running, token(running, monkeypatch))
    assert refused.returncode == 1, refused.stderr
    assert message in refused.stderr
    assert Job.objects.get(pk=running.pk).checkpointed_at is None


def test_it_exits_1_when_the_job_does_not_report_checkpoints(gangway, submit, transactional_db):
    queued = submit()
    refused = checkpoint(gangway, queued, job_tokens.issue(queued.pk))
    assert refused.returncode == 1 and "is queued" in refused.stderr


def test_it_exits_2_when_the_command_line_names_no_job(gangway, transactional_db):
    result = gangway("checkpoint")
    assert result.returncode == 2 and "no job" in result.stderr


def test_its_help_says_a_refusal_exits_1():
    result = subprocess.run([sys.executable, "-m", "gangway_cli.main", "checkpoint", "--help"],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "1 when the portal refused or could not be reached" in " ".join(result.stdout.split())
