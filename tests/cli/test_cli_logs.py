"""`gangway logs ID [-f]`: the replicas' lines, the failing replica, and following a job to its end."""

import pytest

from gangway_cli.logs import failure_line, new_lines
from jobs.models import Job
from tests.cli.fake_portal import DROP, Answer
from tests.cli.test_cli_e2e import write_job


@pytest.mark.parametrize(
    ("seen", "current", "new"),
    [
        ([], ["a", "b"], ["a", "b"]),
        (["a", "b", "c"], ["b", "c", "d", "e"], ["d", "e"]),
        (["a", "b"], ["a", "b"], []),
        (["a", "b"], ["x", "y"], ["x", "y"]),
        (["x", "x"], ["x", "x", "y"], ["y"]),
    ],
    ids=["nothing printed yet", "the tail moved on", "nothing new", "more was written than a tail holds",
         "repeated lines overlap as far as they can"],
)
def test_only_lines_not_yet_printed_are_new(seen, current, new):
    assert new_lines(seen, current) == new


def test_a_failure_reads_as_a_sentence():
    failure = {"replica": "worker-1", "exit_code": 137, "reason": "OOMKilled", "explanation": "it ran out", "message": ""}
    assert failure_line(failure) == "replica worker-1 failed with exit code 137 (OOMKilled): it ran out"


def test_logs_prints_each_replicas_lines_and_names_the_failing_one(gangway, loop, tmp_path):
    submitted = gangway("submit", write_job(tmp_path, "boom", fail=True), "--wait", "--interval", "1", "--timeout", "45")
    assert submitted.returncode == 1, submitted.stdout + submitted.stderr
    job = Job.objects.get(name="boom")
    result = gangway("logs", str(job.pk))
    assert result.returncode == 0, result.stderr
    assert "[worker-0] " in result.stdout and "[worker-1] " in result.stdout
    assert "Traceback (most recent call last):" in result.stdout
    assert "gangway: replica worker-" in result.stderr and "failed with exit code 1 (Error)" in result.stderr

    one = gangway("logs", str(job.pk), "--replica", "worker-1", "--tail", "1")
    assert len(one.stdout.splitlines()) == 1 and not one.stdout.startswith("[")


def test_logs_follow_exits_1_when_the_job_fails(gangway, loop, tmp_path):
    submitted = gangway("submit", write_job(tmp_path, "later", fail=True))
    job_id = submitted.stdout.strip().rstrip("/").rsplit("/", 1)[-1]
    result = gangway("logs", job_id, "-f", "--interval", "1", timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback (most recent call last):" in result.stdout
    assert result.stdout.count("started") == 2  # each line printed once, however often it was read


def test_logs_of_another_teams_job_is_not_found(gangway, loop, tmp_path, vision):
    from tenants.tokens import token_create

    submitted = gangway("submit", write_job(tmp_path, "mine"))
    job_id = submitted.stdout.strip().rstrip("/").rsplit("/", 1)[-1]
    result = gangway("logs", job_id, token=token_create(name="other", team=vision)[1])
    assert result.returncode == 5 and f"No job {job_id} among the jobs you can see" in result.stderr


def logs(state: str, *lines: str) -> Answer:
    return Answer(200, {"job": 7, "state": state, "failure": None,
                        "replicas": [{"replica": "worker-0", "lines": list(lines)}]})  # fmt: skip


def test_logs_follow_goes_on_through_an_outage_until_the_job_ends(cli, fake_portal):
    outage = [Answer(503, {"detail": "The cluster could not be read."})] * 5  # more than one read's retries
    fake_portal.on("GET", "/api/v1/jobs/7/logs/", logs("running", "a", "b"), *outage, DROP,
                   logs("running", "a", "b", "c"), logs("succeeded", "b", "c", "d"))  # fmt: skip
    result = cli("logs", "7", "-f", "--interval", "1")
    assert result.code == 0, result.err
    assert result.out == "a\nb\nc\nd\n"
    assert "server unavailable, still following job 7: The server is unavailable (HTTP 503" in result.err
    assert "reached the server again" in result.err


def test_logs_follow_stops_with_5_when_the_job_is_out_of_sight(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/7/logs/", logs("running", "a"),
                   Answer(404, {"detail": "No job 7 among the jobs you can see."}))  # fmt: skip
    result = cli("logs", "7", "-f", "--interval", "1")
    assert result.code == 5 and result.out == "a\n"
    assert result.err == "gangway: No job 7 among the jobs you can see. (HTTP 404 Not Found)\n"
