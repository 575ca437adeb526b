"""Retries: a submission retried after a timeout, a 502/503, a dropped connection or an answer cut short
carries the same Idempotency-Key, so it never makes two jobs; waits honour Retry-After, are spread by
jitter and bounded; writes nobody marked safe to repeat are sent once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from gangway_cli.client import ApiError, Client
from tests.cli.fake_portal import CUT, DROP, Answer, job

UNAVAILABLE = Answer(503, {"detail": "Service temporarily unavailable, try again soon."})


@pytest.fixture
def spec(tmp_path) -> str:
    path = tmp_path / "job.yaml"
    path.write_text("team: maps\nname: x\n")
    return str(path)


def keys(fake_portal) -> list[str]:
    return [request.headers["Idempotency-Key"] for request in fake_portal.to("/api/v1/jobs/")]


def test_a_submission_retried_after_a_timeout_sends_the_same_key(cli, fake_portal, spec):
    # The first answer comes after the client gave up: the server made the job, the retry gets it back.
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7), delay=3), Answer(200, job(7)))
    result = cli("submit", spec)
    assert result.code == 0, result.err
    assert result.out == "http://127.0.0.1/jobs/7/\n"
    sent = keys(fake_portal)
    assert len(sent) == 2 and sent[0] == sent[1] and sent[0].startswith("gangway-cli-")


def test_a_submission_goes_through_502_503_a_dropped_connection_and_a_cut_answer_with_one_key(
    cli, fake_portal, spec
):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(502, b"<html>Bad Gateway</html>", {"Content-Type": "text/html"}),
                   Answer(503, {"detail": "Down for a deploy."}, {"Retry-After": "2"}), DROP, CUT,
                   Answer(200, job(7)))  # fmt: skip
    result = cli("submit", spec, "--idempotency-key", "pipeline-41-train")
    assert result.code == 0, result.err
    assert keys(fake_portal) == ["pipeline-41-train"] * 5
    assert len(result.waits) == 4 and result.waits[1] == 2  # the server's Retry-After, as asked


def test_two_submissions_get_two_keys(cli, fake_portal, spec):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7)))
    cli("submit", spec)
    cli("submit", spec)
    assert len(set(keys(fake_portal))) == 2


def test_a_submission_that_never_got_through_says_which_key_gets_the_job_back(cli, fake_portal, spec):
    fake_portal.on("POST", "/api/v1/jobs/", UNAVAILABLE)
    result = cli("submit", spec)
    assert result.code == 7
    key = keys(fake_portal)[0]
    assert len(result.err.splitlines()) == 1
    assert "5 attempts" in result.err and f"run the same command with --idempotency-key {key}" in result.err


def test_429_waits_as_long_as_retry_after_says(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(429, {"detail": "Request was throttled."}, {"Retry-After": "3"}),
                   Answer(200, job(7)))  # fmt: skip
    result = cli("status", "7")
    assert result.code == 0 and result.waits == [3]


def test_retry_after_as_an_http_date_is_honoured(cli, fake_portal):
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=5), usegmt=True)  # whole seconds
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(503, {"detail": "Back soon."}, {"Retry-After": later}),
                   Answer(200, job(7)))  # fmt: skip
    result = cli("status", "7")
    assert result.code == 0 and len(result.waits) == 1 and 2.5 < result.waits[0] <= 5


def test_a_retry_after_longer_than_a_minute_is_reported_not_slept(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/queue/", Answer(429, {"detail": "Request was throttled. Expected available in "
                                                     "3600 seconds."}, {"Retry-After": "3600"}))  # fmt: skip
    result = cli("queue")
    assert result.code == 7 and result.waits == [] and len(fake_portal.requests) == 1
    assert result.err == ("gangway: Request was throttled. Expected available in 3600 seconds. "
                          "(HTTP 429 Too Many Requests; it asks to wait 3600 s)\n")


def test_retries_are_bounded_and_spread_out(fake_portal):
    fake_portal.on("GET", "/api/v1/queue/", UNAVAILABLE)
    runs = []
    for _ in range(2):
        waits: list[float] = []
        with pytest.raises(ApiError) as error:
            Client(fake_portal.url, "gw_test", sleep=waits.append).get("api/v1/queue/")
        assert error.value.status == 503 and "5 attempts" in str(error.value)
        runs.append(waits)
    assert len(fake_portal.requests) == 10
    for waits in runs:
        assert [2**n / 2 <= wait <= 2**n for n, wait in enumerate(waits)] == [True] * 4
    assert runs[0] != runs[1]  # two clients that failed together do not come back in step


def test_a_write_not_marked_safe_is_sent_once(fake_portal):
    fake_portal.on("POST", "/api/v1/things/", UNAVAILABLE)
    with pytest.raises(ApiError):
        Client(fake_portal.url, "gw_test", sleep=lambda _: None).request("POST", "api/v1/things/", data=b"{}")
    assert len(fake_portal.requests) == 1


def test_cancel_is_retried_since_a_second_cancel_changes_nothing(cli, fake_portal):
    fake_portal.on("POST", "/api/v1/jobs/7/cancel/", UNAVAILABLE, Answer(200, job(7, state="cancelled")))
    result = cli("cancel", "7")
    assert result.code == 0 and result.out == "Job job-7 (#7): cancelled.\n"
    assert len(fake_portal.requests) == 2
