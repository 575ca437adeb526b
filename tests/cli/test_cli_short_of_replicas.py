"""A running job short of replicas (a drained or lost node, R13) says so in `status`, `jobs` and `submit --wait`,
as the API's reason does: it is to be evicted and requeued unless its waiting replicas start."""

from __future__ import annotations

import io
import json

from gangway_cli.follow import SHORT_OF_REPLICAS, Follower, describe
from jobs.codes import Because
from scheduling.evictions import running_of
from tests.cli.fake_portal import Answer, job

# The sentence the portal writes (`scheduling.evictions`), for a job of one replica whose node was drained.
SHORT = ("Its only replica is not running: worker-0 waits to start (its node was drained); evicted and requeued if "
         "it has not started by 14:05 UTC.")  # fmt: skip


def test_the_sentence_the_cli_is_shown_is_the_one_the_portal_writes():
    assert SHORT.startswith(running_of(0, 1).capitalize() + ": worker-0 waits to start")


def short_job(job_id: int = 7, **fields) -> dict:
    return job(job_id, state="running", placement=["node-02"], reason=SHORT, reason_code=SHORT_OF_REPLICAS, **fields)


def listed(*jobs: dict) -> Answer:
    rows = [{"submitted_at": "2025-01-06T09:00:00Z", "owner": "ana", **one} for one in jobs]
    return Answer(200, {"count": len(rows), "next": None, "previous": None, "results": rows})


def test_the_code_it_reads_is_the_portals():
    assert SHORT_OF_REPLICAS == Because.SHORT_OF_REPLICAS


def test_status_shows_why_a_running_job_is_short_of_replicas(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(200, short_job()))

    result = cli("status", "7")

    assert result.code == 0, result.err
    assert result.out.splitlines()[1] == f"running - on node-02 - {SHORT}"


def test_a_running_jobs_other_reasons_stay_unsaid():
    """What a running job's reason last said of its wait (or that it was adopted) is history."""
    assert describe(job(state="running", placement=["node-02"], reason="Admitted.", reason_code="admitted")) == (
        "running - on node-02")  # fmt: skip
    assert describe(job(state="queued", reason=SHORT, reason_code=SHORT_OF_REPLICAS)) == f"queued - {SHORT}"


def test_jobs_marks_a_short_job_and_says_what_the_mark_means(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/", listed(short_job(8), job(7, state="running", reason_code="")))

    result = cli("jobs")

    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert [line.split()[3] for line in lines[1:3]] == ["running*", "running"]
    assert lines[-1].startswith("* running short of replicas, to be evicted unless they start: `gangway status 8`")


def test_jobs_json_is_the_apis_jobs_unmarked(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/", listed(short_job(8)))

    result = cli("jobs", "--json")

    assert [one["state"] for one in json.loads(result.out)] == ["running"]


def test_submit_wait_says_when_its_job_runs_short_and_when_it_ends(cli, fake_portal, tmp_path):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7, state="running", reason_code="")))
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(200, short_job()), Answer(200, job(7, state="succeeded")))
    (tmp_path / "job.yaml").write_text("name: x\n")

    result = cli("submit", str(tmp_path / "job.yaml"), "--wait", "--interval", "1")

    assert result.code == 0, result.err
    assert f"running - on node-02 - {SHORT}" in result.out


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_on_a_terminal_says_the_job_is_short():
    class Ends:
        def get(self, path, deadline=None):
            return job(7, state="succeeded")

    out = Terminal()
    Follower(Ends(), short_job(), interval=0, timeout=None, out=out, sleep=lambda seconds: None).run()

    assert "\r\033[K  running, its only replica is not running, 0 s so far" in out.getvalue()
