"""`submit --wait --timeout N` ends within about N seconds however the portal answers: no submission, poll,
retry or sleep goes past the deadline. Run as CI runs it, in a process with the real clock and request
timeouts."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.cli.conftest import CLI_ENV
from tests.cli.fake_portal import DROP, Answer, job


def submit_and_wait(fake_portal, tmp_path) -> tuple[subprocess.CompletedProcess, float]:
    """Runs `gangway submit job.yaml --wait --timeout 2` against the fake portal; returns the process and
    how long it took."""
    (tmp_path / "job.yaml").write_text("name: x\n")
    env = {name: value for name, value in os.environ.items() if name not in CLI_ENV}
    env.update({"GANGWAY_URL": fake_portal.url, "GANGWAY_TOKEN": "gw_test"})
    started = time.monotonic()
    try:
        result = subprocess.run([sys.executable, "-m", "gangway_cli.main", "submit", str(tmp_path / "job.yaml"),
                                 "--wait", "--timeout", "2", "--interval", "1"],
                                capture_output=True, text=True, env=env, timeout=30)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("--timeout 2 was still waiting after 30 s")
    return result, time.monotonic() - started


@pytest.mark.parametrize("poll", [
    Answer(200, job(7), delay=120),
    Answer(503, {"detail": "Down for a deploy."}, {"Retry-After": "30"}),
    Answer(429, {"detail": "Request was throttled. Expected available in 50 seconds."}, {"Retry-After": "50"}),
    DROP,
], ids=["a poll the portal never answers", "a 503 asking to retry after 30 s", "a 429 asking to retry after 50 s",
        "connections dropped, retried with backoff"])  # fmt: skip
def test_waiting_ends_within_about_the_timeout(fake_portal, tmp_path, poll):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7)))
    fake_portal.on("GET", "/api/v1/jobs/7/", poll)
    result, took = submit_and_wait(fake_portal, tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Timed out after 2 s; job 7 is still queued." in result.stdout
    assert took < 8, f"--timeout 2 took {took:.1f} s"  # the old client: 12 s and more


def test_a_submission_the_portal_asks_to_retry_later_is_not_waited_for_past_the_timeout(fake_portal, tmp_path):
    # A portal in the middle of a deploy: the submission's own retries count against the timeout too.
    fake_portal.on("POST", "/api/v1/jobs/", Answer(503, {"detail": "Down for a deploy."}, {"Retry-After": "30"}),
                   Answer(201, job(7)))  # fmt: skip
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(200, job(7)))
    result, took = submit_and_wait(fake_portal, tmp_path)
    assert took < 8, f"--timeout 2 took {took:.1f} s"  # the old client: 12 s and more
    assert result.returncode == 7, result.stdout + result.stderr  # not reached: the job may exist, the key gets it
    key = fake_portal.requests[0].headers["Idempotency-Key"]
    assert "Down for a deploy." in result.stderr and f"--idempotency-key {key}" in result.stderr
