"""What the CLI prints: help that says what each command does and how it exits, --json for machines,
the whole queue when asked, and a clean end on Ctrl-C or a closed pipe."""

from __future__ import annotations

import ast
import json
import re
import signal
import sys
from pathlib import Path

import pytest

from gangway_cli import exits
from gangway_cli.main import COMMANDS, build_parser
from tests.cli.fake_portal import Answer, job

CLI = Path(__file__).resolve().parents[2] / "gangway_cli"


@pytest.mark.parametrize("command", [*COMMANDS, "checkpoint"])
def test_each_commands_help_says_what_it_does_and_its_exit_codes(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([command, "--help"])
    shown = capsys.readouterr().out
    assert exit_.value.code == 0
    description = shown.split("\n\n")[1]  # after the usage
    assert not description.startswith(("options:", "positional")) and description.rstrip().endswith(".")
    assert re.search(r"\nExit codes:\n +0  success\n", shown)
    assert "130  interrupted" in shown and "143  terminated" in shown  # any command can be stopped


def test_the_top_level_help_lists_every_exit_code(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    shown = capsys.readouterr().out
    for code in ("0  success", "2  a usage error", "4  the server refused the token", "5  no such job", "6  the server refused",
                 "7  the server could not be reached", "130  interrupted", "143  terminated"):  # fmt: skip
        assert code in shown


def test_the_readme_lists_every_exit_code():
    readme = (CLI.parent / "README.md").read_text()
    assert [code for code in exits.MEANINGS if f"\n| {code} | " not in readme] == []


def test_status_submit_cancel_print_the_apis_job_with_json(cli, fake_portal, tmp_path):
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(200, job(7)))
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7)))
    fake_portal.on("POST", "/api/v1/jobs/7/cancel/", Answer(200, job(7, state="cancelled")))
    (tmp_path / "job.yaml").write_text("name: x\n")
    for args, expected in [(("status", "7"), job(7)), (("submit", str(tmp_path / "job.yaml")), job(7)),
                           (("cancel", "7"), job(7, state="cancelled"))]:  # fmt: skip
        result = cli(*args, "--json")
        assert result.code == 0, result.err
        assert json.loads(result.out) == expected


def test_submit_wait_json_prints_the_ended_job_and_keeps_progress_off_stdout(cli, fake_portal, tmp_path):
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7)))
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(200, job(7, state="succeeded")))
    (tmp_path / "job.yaml").write_text("name: x\n")
    result = cli("submit", str(tmp_path / "job.yaml"), "--wait", "--interval", "1", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["state"] == "succeeded"
    assert "http://127.0.0.1/jobs/7/" in result.err and "succeeded; followed for" in result.err


def queue_pages(request):
    """900 waiting jobs of vision, then one of maps: the API's pages of `page_size` (at most 500)."""
    everyone = [job(n, team="vision", position=n) for n in range(1, 901)] + [job(901, team="maps", position=901)]
    size, number = min(int(request.query.get("page_size", 100)), 500), int(request.query.get("page", 1))
    results = everyone[(number - 1) * size : number * size]
    more = number * size < len(everyone)
    return Answer(200, {"count": len(everyone), "next": "http://127.0.0.1/api/v1/queue/?page=x" if more else None,
                        "previous": None, "results": results})  # fmt: skip


def test_queue_team_reads_past_the_first_page(cli, fake_portal):
    """A portal older than the queue's `?team=` sends every team's jobs: the CLI keeps the team's."""
    fake_portal.on("GET", "/api/v1/queue/", queue_pages)
    result = cli("queue", "--team", "maps")
    assert result.code == 0
    assert "job-901" in result.out and "No waiting jobs" not in result.out


def test_queue_team_asks_the_portal_for_that_teams_jobs_alone(cli, fake_portal):
    def by_team(request):  # the 901 jobs of `queue_pages`, of the team asked for: one page
        results = [job(901, team="maps", position=901)] if request.query.get("team") == "maps" else []
        return Answer(200, {"count": len(results), "next": None, "previous": None, "results": results})

    fake_portal.on("GET", "/api/v1/queue/", by_team)
    result = cli("queue", "--team", "maps")
    assert result.code == 0 and "job-901" in result.out
    assert [request.query.get("team") for request in fake_portal.requests] == ["maps"]  # one page, not 900 jobs


def test_queue_of_several_teams_keeps_each_team_named_with_spaces_after_the_commas(cli, fake_portal):
    def two_teams(request):  # the server strips each slug, as the API does
        results = [job(1, team="maps", position=1), job(2, team="vision", position=2)]
        return Answer(200, {"count": 2, "next": None, "previous": None, "results": results})

    fake_portal.on("GET", "/api/v1/queue/", two_teams)
    result = cli("queue", "--team", "maps, vision", "--json")
    assert [waiting["team"] for waiting in json.loads(result.out)] == ["maps", "vision"]


def test_queue_json_is_every_waiting_job_in_order(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/queue/", queue_pages)
    result = cli("queue", "--json")
    assert [waiting["id"] for waiting in json.loads(result.out)] == list(range(1, 902))


def test_queue_json_reads_each_page_after_the_last_job_of_the_one_before(cli, fake_portal):
    # The portal's queue moves between the reads: jobs 2 and 3 leave it. By page number, jobs 11 to 12 would
    # have moved onto the first page and never come; after job 10, wherever it stands, they come.
    def pages(request):
        if "after" not in request.query:
            first = [job(n, position=n) for n in range(1, 11)]
            return Answer(200, {"count": 20, "next": "http://127.0.0.1/api/v1/queue/?after=10&at=9&page_size=10",
                                "previous": None, "results": first})
        assert (request.query["after"], request.query["at"]) == ("10", "9")
        rest = [job(n, position=n - 2) for n in range(11, 21)]
        return Answer(200, {"count": 18, "next": None, "previous": None, "results": rest})

    fake_portal.on("GET", "/api/v1/queue/", pages)
    result = cli("queue", "--json")
    assert [waiting["id"] for waiting in json.loads(result.out)] == list(range(1, 21))


def test_queue_json_lists_a_job_once_when_one_queued_ahead_pushes_it_onto_the_next_page(cli, fake_portal):
    first = [job(n, position=n) for n in range(1, 501)]
    # Read after job 1000 was queued at the head: job 500, last of the first page, now opens the second.
    second = [job(n, position=n + 1) for n in range(500, 601)]
    fake_portal.on("GET", "/api/v1/queue/",
                   Answer(200, {"count": 600, "next": "http://127.0.0.1/api/v1/queue/?page=2", "results": first}),
                   Answer(200, {"count": 601, "next": None, "results": second}))  # fmt: skip
    result = cli("queue", "--json")
    assert [waiting["id"] for waiting in json.loads(result.out)] == list(range(1, 601))


def test_queue_without_a_team_shows_the_first_page_and_how_many_more(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/queue/", queue_pages)
    result = cli("queue")
    assert result.out.splitlines()[-1] == "... and 701 more." and len(fake_portal.requests) == 1


def wait_for_line(stream) -> str:
    line = stream.readline()
    assert line, "the command printed nothing"
    return line


def test_ctrl_c_while_following_exits_130_in_one_line(gangway_process, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/7/logs/", Answer(200, {"job": 7, "state": "running", "failure": None,
                   "replicas": [{"replica": "worker-0", "lines": ["epoch 1"]}]}))  # fmt: skip
    process = gangway_process("logs", "7", "-f", "--interval", "1")
    assert wait_for_line(process.stdout) == "epoch 1\n"
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=20) == 130
    assert process.stderr.read() == "gangway: interrupted.\n"


def test_ctrl_c_before_a_submission_is_answered_says_how_to_get_the_job_back(gangway_process, fake_portal,
                                                                              tmp_path):  # fmt: skip
    fake_portal.on("POST", "/api/v1/jobs/", Answer(201, job(7), delay=30))
    (tmp_path / "job.yaml").write_text("name: x\n")
    process = gangway_process("submit", str(tmp_path / "job.yaml"))
    while not fake_portal.requests:
        assert process.poll() is None
        fake_portal.stop.wait(0.05)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=20) == 130
    key = fake_portal.requests[0].headers["Idempotency-Key"]
    err = process.stderr.read()
    assert len(err.splitlines()) == 1 and f"--idempotency-key {key} to get it back" in err


def test_a_reader_that_stops_reading_ends_it_quietly(gangway_process, fake_portal):
    lines = [f"step {n}: " + "x" * 80 for n in range(4000)]  # far more than a pipe holds
    fake_portal.on("GET", "/api/v1/jobs/7/logs/", Answer(200, {"job": 7, "state": "running", "failure": None,
                   "replicas": [{"replica": "worker-0", "lines": lines}]}))  # fmt: skip
    process = gangway_process("logs", "7", "--tail", "4000")
    assert wait_for_line(process.stdout).startswith("step 0: ")
    process.stdout.close()  # as `| head -1` does
    assert process.wait(timeout=20) == 141
    assert process.stderr.read() == ""


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return names


def test_the_cli_needs_only_the_standard_library():
    """It runs inside training images (`gangway checkpoint`), where nothing else may be installed;
    `core.durations` is standard library only too."""
    for path in [*CLI.glob("*.py"), CLI.parent / "core" / "durations.py"]:
        for name in imported_modules(path):
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top == "gangway_cli" or name == "core.durations", (path, name)


@pytest.mark.parametrize("gpus, said", [(1, "1 GPU (l4)"), (2, "2 GPUs (l4)")], ids=["one", "two"])
def test_status_says_one_gpu_in_the_singular(cli, fake_portal, gpus, said):
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(200, job(7, gpu_total=gpus, gpu_type=["l4"])))
    result = cli("status", "7")
    assert result.code == 0, result.err
    assert result.out.splitlines()[0] == f"job-7 (#7) team maps, tier standard, {said}"


LONG = "resnet-imagenet-sweep-lr-0003-warmup-cosine-bs-512"  # 50 characters, the most a name may have


def listed(*jobs: dict) -> Answer:
    rows = [{"submitted_at": "2025-01-06T09:00:00Z", "owner": "ana", **one} for one in jobs]
    return Answer(200, {"count": len(rows), "next": None, "previous": None, "results": rows})


@pytest.mark.parametrize("command, path, column", [
    ("jobs", "/api/v1/jobs/", "STATE"), ("queue", "/api/v1/queue/", "TIER")])  # fmt: skip
def test_long_names_keep_the_columns_in_line(cli, fake_portal, command, path, column):
    fake_portal.on("GET", path, listed(job(7, name="short", position=1),
                                       job(8, name=LONG[:30], team="a" * 30, position=2),
                                       job(9, name=LONG, position=3)))  # fmt: skip
    result = cli(command)

    assert result.code == 0, result.err
    header, *lines = result.out.splitlines()
    at = header.index(column)
    assert all(line[at - 1] == " " and line[at] != " " for line in lines), result.out
    assert f" {LONG[:30]} " in lines[1] and f" {LONG[:39]}… " in lines[2]  # at most 40 wide, the rest cut
    assert f" {'a' * 19}… " in lines[1]


def test_names_that_fit_take_no_more_room_than_the_longest(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/", listed(job(7, name="first"), job(8, name="second")))
    header = cli("jobs").out.splitlines()[0]
    assert "TEAM NAME   STATE" in header
