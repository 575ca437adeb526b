"""`gangway logs ID --all`: one replica's whole log on standard output, with a team token, as it comes; against
the live portal, and against a scripted one for what the live one cannot be made to do on cue."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import SimJob
from scheduling.reconcile import reconcile
from tests.cli.fake_portal import Answer

LOG = "/api/v1/jobs/7/logs/download/"


@pytest.fixture
def failed_job(submit, cycle, transactional_db):
    """A job of two replicas that ran on the simulated cluster and failed, which the live portal reads."""
    job = submit(name="probe", replicas=[{"role": "Worker", "count": 2, "gpu": 1}],
                 simulate={"duration": 30, "fail": True})  # fmt: skip
    cycle()
    sim = SimJob.objects.get(job_id=job.pk)
    SimJob.objects.filter(pk=sim.pk).update(started_at=sim.started_at - timedelta(seconds=120))
    reconcile(cluster=SimulatedCluster())
    return job


def test_all_writes_a_replicas_whole_log_with_a_team_token(gangway, failed_job):
    result = gangway("logs", str(failed_job.pk), "--replica", "worker-1", "--all")

    assert result.returncode == 0, result.stderr
    (replica,) = SimulatedCluster().logs("maps", failed_job.pk, replica="worker-1", tail=None)
    assert result.stdout == "".join(line + "\n" for line in replica.lines) and result.stderr == ""
    assert "Traceback (most recent call last):" in result.stdout or "stopping: replica" in result.stdout


def test_all_of_a_job_of_several_replicas_asks_for_one_by_name(gangway, failed_job):
    result = gangway("logs", str(failed_job.pk), "--all")
    assert result.returncode == 6 and result.stdout == ""
    assert "has 2 replicas (worker-0, worker-1); name the one" in result.stderr


def test_all_of_another_teams_job_is_not_found(gangway, failed_job, vision):
    from tenants.tokens import token_create

    result = gangway("logs", str(failed_job.pk), "--replica", "worker-0", "--all",
                     token=token_create(name="other", team=vision)[1])  # fmt: skip
    assert result.returncode == 5 and result.stdout == ""
    assert f"No job {failed_job.pk} among the jobs you can see" in result.stderr


def text(body: str, **headers) -> Answer:
    return Answer(200, body.encode(), {"Content-Type": "text/plain; charset=utf-8", **headers})


def test_it_asks_for_text_and_copies_it_as_it_comes(cli, fake_portal):
    fake_portal.on("GET", LOG, text("a\nb\n"))
    result = cli("logs", "7", "--replica", "worker-0", "--all")
    assert result.code == 0 and result.out == "a\nb\n" and result.err == ""
    (request,) = fake_portal.to(LOG)
    assert request.query == {"replica": "worker-0"} and request.headers["Accept"].startswith("text/plain")


def test_a_log_the_portal_could_not_send_whole_is_said_on_standard_error(cli, fake_portal):
    stopped = "... the download stopped here after 40 s, the longest one download may take; the log goes on.\n"
    fake_portal.on("GET", LOG, text("a\nb\n" + stopped))
    result = cli("logs", "7", "--all")
    assert result.code == 0 and result.out.endswith(stopped)
    assert result.err == f"gangway: the log of job 7 is cut short; its last line: {stopped.strip()}\n"


def test_an_outage_before_the_first_byte_is_retried(cli, fake_portal):
    fake_portal.on("GET", LOG, Answer(503, {"detail": "The cluster could not be read."}), text("a\n"))
    result = cli("logs", "7", "--all")
    assert result.code == 0 and result.out == "a\n" and len(fake_portal.to(LOG)) == 2


def test_an_answer_cut_short_midway_is_never_written_twice(cli, fake_portal):
    fake_portal.on("GET", LOG, Answer(200, b"x" * 200_000 + b"\n", {"Content-Type": "text/plain"}, cut_after=100_000))
    result = cli("logs", "7", "--all")
    assert result.code == 7 and result.out == ""  # the line it was cut within is held back: never written in part
    assert "The server stopped sending after 100,000 bytes (the answer was cut short)" in result.err and len(fake_portal.to(LOG)) == 1


def test_an_answer_that_is_not_a_log_is_refused(cli, fake_portal):
    fake_portal.on("GET", LOG, Answer(200, {"id": 7}))
    result = cli("logs", "7", "--all")
    assert result.code == 2 and result.out == ""
    assert "answered HTTP 200 with application/json, not a log; is that the portal's address?" in result.err


@pytest.mark.parametrize(("args", "said"), [(["--tail", "5"], "leave out --tail"), (["-f"], "not allowed with")])
def test_all_goes_with_neither_a_tail_nor_following(cli, fake_portal, capsys, args, said):
    try:
        result = cli("logs", "7", "--all", *args)
        code, err = result.code, result.err
    except SystemExit as stop:  # argparse refuses the pair itself
        code, err = stop.code, capsys.readouterr().err
    assert code == 2 and said in err and fake_portal.requests == []


def test_a_reader_that_stops_reading_ends_it_quietly(gangway_process, fake_portal):
    fake_portal.on("GET", LOG, text("line\n" * 500_000))
    process = gangway_process("logs", "7", "--all")
    assert process.stdout.read(5) == "line\n"
    process.stdout.close()  # `| head -1`
    assert process.wait(timeout=30) == 141 and process.stderr.read() == ""
    assert len(fake_portal.to(LOG)) == 1  # the closed pipe is not the server's: nothing asked again
