"""Errors: one line on standard error, with the server's own words, and an exit code CI can branch on
(2 usage, 4 token, 5 not found, 6 refused, 7 unavailable; 1 stays "the job failed")."""

from __future__ import annotations

import pytest

from gangway_cli.client import describe
from tests.cli.conftest import closed_port_url
from tests.cli.fake_portal import Answer, job

HTML = {"Content-Type": "text/html"}


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gangway: "), err
    assert "Traceback" not in err and "<" not in err
    return lines[0]


@pytest.mark.parametrize("answer, code, said", [
    (Answer(401, {"detail": "Unknown token."}, {"WWW-Authenticate": "Bearer"}), 4, "Unknown token. (HTTP 401"),
    (Answer(403, {"detail": "You do not have permission to perform this action."}), 4, "do not have permission"),
    (Answer(404, {"detail": "No job 7 among the jobs you can see."}), 5, "No job 7 among the jobs you can see."),
    (Answer(400, {"tail": ["Lines per replica, a whole number from 1 to 5000."]}), 6, "tail: Lines per replica"),
    (Answer(503, {"detail": "The cluster could not be read."}), 7, "The cluster could not be read."),
    (Answer(502, b"<html>\n<body><h1>502 Bad Gateway</h1></body>\n</html>\n", HTML), 7, "HTTP 502"),
    (Answer(500, b"<h1>Server Error (500)</h1>", HTML), 7, "HTTP 500"),
], ids=["a token the server does not know", "a token not allowed to", "a job it cannot see",
        "a request it refuses", "a server that cannot read the cluster", "a proxy's 502 page",
        "a server error"])  # fmt: skip
def test_each_kind_of_error_has_its_exit_code_and_one_line(cli, fake_portal, answer, code, said):
    fake_portal.on("GET", "/api/v1/jobs/7/", answer)
    result = cli("status", "7")
    assert result.code == code
    assert said in one_error_line(result.err)


def test_a_server_out_of_reach_exits_7(cli):
    result = cli("queue", env={"GANGWAY_URL": closed_port_url()})
    assert result.code == 7
    assert "Cannot reach http://127.0.0.1:" in one_error_line(result.err) and "(5 attempts)" in result.err


def test_an_invalid_spec_exits_6_listing_every_field_error_on_one_line(cli, fake_portal, tmp_path):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(400, {
        "name": ["Must be at most 50 lowercase letters, digits and dashes."], "replicas": ["Required."]}))
    (tmp_path / "job.yaml").write_text("name: Bad_Name\n")
    result = cli("submit", str(tmp_path / "job.yaml"))
    assert result.code == 6
    line = one_error_line(result.err)
    assert "name: Must be at most 50 lowercase letters, digits and dashes; replicas: Required. (HTTP 400" in line


def test_field_errors_join_as_one_sentence():
    assert describe({"name": ["Must be a DNS label, got 'Bad_Name'.", "At most 50 characters."],
                     "image": ["Required."], "replicas": [{"gpu": ["Not a number"]}]}) == (
        "name: Must be a DNS label, got 'Bad_Name'; name: At most 50 characters; image: Required; "
        "replicas.0.gpu: Not a number")  # fmt: skip


@pytest.mark.parametrize("answer, code, said", [
    (Answer(409, {"detail": "Team maps already has 1000 jobs queued, its limit.", "code": "queue_full"}), 6,
     "already has 1000 jobs queued"),
    (Answer(409, {"detail": "Idempotency key 'run-9' was already used for job x (#3) with a different spec.",
                  "job": 3}), 6, "Idempotency key 'run-9' was already used"),
    (Answer(400, {"detail": "Can never run: needs 32 GPUs; the largest node has 8.", "code": "never_fits"}), 1,
     "Rejected: Can never run"),
    (Answer(403, {"detail": "This token may submit up to tier standard; the job asks for tier production."}), 4,
     "up to tier standard"),
], ids=["a full queue", "a key used for another spec", "a job that can never fit", "a tier above the token's"])
def test_a_refused_submission_shows_the_servers_reason(cli, fake_portal, tmp_path, answer, code, said):
    fake_portal.on("POST", "/api/v1/jobs/", answer)
    (tmp_path / "job.yaml").write_text("name: x\n")
    result = cli("submit", str(tmp_path / "job.yaml"))
    assert result.code == code
    assert said in one_error_line(result.err)


def test_cancelling_a_job_that_ended_exits_6(cli, fake_portal):
    fake_portal.on("POST", "/api/v1/jobs/7/cancel/",
                   Answer(409, {"detail": "Job job-7 (#7) already ended (failed); nothing to cancel."}))
    result = cli("cancel", "7")
    assert result.code == 6 and "already ended (failed)" in one_error_line(result.err)


def test_a_file_that_is_not_utf8_is_a_usage_error(cli, fake_portal, tmp_path):
    (tmp_path / "job.yaml").write_bytes(b"name: caf\xe9\n")
    result = cli("submit", str(tmp_path / "job.yaml"))
    assert result.code == 2 and "is not UTF-8 text" in one_error_line(result.err)
    assert not fake_portal.requests


@pytest.mark.parametrize("key", ["pipeline-41\ntrain", "pipeline-41-\u00e9t\u00e9", "pipeline-41-\u20ac", "  "],
                         ids=["a line break", "accents", "a euro sign", "only spaces"])  # fmt: skip
def test_an_idempotency_key_no_header_carries_is_a_usage_error(cli, fake_portal, tmp_path, capsys, key):
    # A blank key would be read by the server as none at all: retries could then make two jobs.
    (tmp_path / "job.yaml").write_text("name: x\n")
    with pytest.raises(SystemExit) as exit_:
        cli("submit", str(tmp_path / "job.yaml"), "--idempotency-key", key)
    assert exit_.value.code == 2 and not fake_portal.requests
    assert "not an idempotency key" in capsys.readouterr().err


def test_an_answer_that_is_not_json_names_the_url(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(200, b"<html>Sign in</html>", HTML))
    result = cli("status", "7")
    assert result.code == 2 and "is that the portal's address?" in one_error_line(result.err)


def test_losing_sight_of_the_job_while_waiting_is_not_a_job_failure(cli, fake_portal, tmp_path):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7)))
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(404, {"detail": "No job 7 among the jobs you can see."}))
    (tmp_path / "job.yaml").write_text("name: x\n")
    result = cli("submit", str(tmp_path / "job.yaml"), "--wait", "--interval", "1")
    assert result.code == 5
    assert "cannot follow job 7 any more: No job 7" in one_error_line(result.err)
