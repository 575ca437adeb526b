"""`gangway jobs`: the jobs a token sees, newest first, narrowed by team, state and owner, against a real server."""

import json

import pytest

from gangway_cli.arguments import JOBS_MAX, STATES
from jobs.models import Job, JobState
from tests.cli.test_cli_e2e import write_job

pytestmark = pytest.mark.usefixtures("transactional_db")


def rows(stdout: str) -> list[list[str]]:
    """The table's rows under its header, split on blanks."""
    lines = stdout.splitlines()
    assert lines[0].split()[:4] == ["ID", "TEAM", "NAME", "STATE"]
    return [line.split() for line in lines[1:] if not line.startswith("...")]


@pytest.fixture
def three_jobs(gangway, tmp_path):
    for name in ("first", "second", "third"):
        assert gangway("submit", write_job(tmp_path, name)).returncode == 0
    assert gangway("cancel", str(Job.objects.get(name="second").pk)).returncode == 0


def test_it_lists_the_jobs_newest_first_with_team_state_gpus_and_age(gangway, three_jobs):
    listed = gangway("jobs")

    assert listed.returncode == 0, listed.stderr
    assert [(row[2], row[3], row[4]) for row in rows(listed.stdout)] == [
        ("third", "queued", "2"), ("second", "cancelled", "2"), ("first", "queued", "2")]  # fmt: skip
    assert all(row[1] == "maps" and row[-1] == "ago" for row in rows(listed.stdout))
    assert "..." not in listed.stdout


def test_it_narrows_to_states_and_says_how_many_more_there_are(gangway, three_jobs):
    cancelled = gangway("jobs", "--state", "cancelled")
    assert [row[2] for row in rows(cancelled.stdout)] == ["second"]

    newest = gangway("jobs", "--limit", "1")
    assert [row[2] for row in rows(newest.stdout)] == ["third"]
    assert newest.stdout.splitlines()[-1].startswith("... and 2 older jobs: --limit")

    nothing = gangway("jobs", "--state", "running,succeeded")
    assert (nothing.returncode, nothing.stdout) == (0, "No jobs match.\n")


def test_json_prints_the_jobs_as_the_api_returns_them(gangway, three_jobs):
    listed = gangway("jobs", "--json", "--state", "queued")

    jobs = json.loads(listed.stdout)
    assert [job["name"] for job in jobs] == ["third", "first"]
    assert {"id", "url", "state", "position", "reason"} <= jobs[0].keys()


@pytest.mark.parametrize("command", ["jobs", "queue"])
@pytest.mark.parametrize("team", ["vision", "nosuch"], ids=["another team", "no team"])
def test_a_team_it_cannot_see_exits_6_naming_the_teams_it_can(gangway, three_jobs, vision, command, team):
    """A misspelt team fails the CI step that asked, where it listed no jobs."""
    refused = gangway(command, "--team", team)

    assert (refused.returncode, refused.stdout) == (6, "")
    assert refused.stderr == (f"gangway: team: No team {team!r} among the teams you can see: maps. "
                              "(HTTP 400 Bad Request)\n")  # fmt: skip


@pytest.mark.parametrize("args, message", [
    (("--state", "runing"), "not a job state: 'runing'"),
    (("--limit", "0"), f"not a number of jobs from 1 to {JOBS_MAX}"),
    (("--limit", "many"), f"not a number of jobs from 1 to {JOBS_MAX}"),
], ids=["a misspelt state", "no jobs", "not a number"])  # fmt: skip
def test_a_bad_option_is_a_usage_error_naming_it(gangway, args, message):
    bad = gangway("jobs", *args)

    assert bad.returncode == 2 and message in bad.stderr


def test_the_states_it_offers_are_the_portals():
    assert STATES == tuple(JobState.values)
