"""`gangway logs --follow` against a live portal that reads a Kubernetes API (the fake API server): each line
printed once however often its text repeats, and a notice where a read left lines out; against an older
portal, today's reading with a warning."""

from __future__ import annotations

import functools

from datetime import datetime, timedelta, timezone

import pytest
from django.core.cache import caches
from kubernetes.client import Configuration

from jobs.models import Job
from scheduling.cluster.kubernetes import KubernetesCluster
from scheduling.cluster.kubernetes_api import client_for
from scheduling.logs import LOGS_CACHE
from tests.cli.fake_portal import Answer
from tests.cluster.fake_apiserver import FakeApiServer
from tests.cluster.test_kubernetes_adapter import _replica_pod

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def apiserver():
    server = FakeApiServer().start()
    yield server
    server.stop()


@pytest.fixture
def running(submit, apiserver, monkeypatch):
    """A job of two replicas running on the fake API server, which the live portal reads (its logs page and API
    through `scheduling.logs`, its downloads through `scheduling.log_download`)."""
    from scheduling import log_download, logs

    job = submit(name="chatty", replicas=[{"role": "Worker", "count": 2, "gpu": 1}])
    Job.objects.filter(pk=job.pk).update(state="running", admitted_at=T0, started_at=T0)
    for index in (0, 1):
        pod = _replica_pod(index, {"running": {}}, job_id=job.pk)
        apiserver.add(pod)
    api = Configuration(host=apiserver.url)
    for module in (logs, log_download):
        monkeypatch.setattr(module, "get_cluster", lambda: KubernetesCluster(client_for(api), retry_budget=0.5))
    job.refresh_from_db()
    return job


@pytest.fixture
def follow(live_server, maps_token, monkeypatch, capsys):
    """Run `gangway logs ID -f ARGS...` in this process against the live portal; between two reads, instead of
    sleeping, the next of `steps` runs (the job writes), and once they are done the job ends."""
    from gangway_cli import logs as cli_logs, main

    def _follow(job, steps, *args: str):
        pending = list(steps)

        def between(seconds):
            if pending:
                pending.pop(0)()
            else:
                Job.objects.filter(pk=job.pk).update(state="succeeded")
            caches[LOGS_CACHE].clear()  # a few seconds have passed: no viewer's read is still fresh

        monkeypatch.setattr(main, "LogPrinter", functools.partial(cli_logs.LogPrinter, sleep=between))
        monkeypatch.setenv("GANGWAY_URL", live_server.url)
        monkeypatch.setenv("GANGWAY_TOKEN", maps_token)
        capsys.readouterr()
        code = main.main(["logs", str(job.pk), "-f", "--interval", "1", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return _follow


def _pod(job, index: int) -> str:
    return f"resnet-g{job.pk}-worker-{index}"


def test_following_prints_each_line_once_even_when_the_text_repeats(running, apiserver, follow, transactional_db):
    def write(index, text, at):
        return lambda: apiserver.append_log("maps", _pod(running, index), text, at=at)

    apiserver.write_log("maps", _pod(running, 0), "epoch 1\nloss=0.1\n", at=T0)
    apiserver.write_log("maps", _pod(running, 1), "A\nB\n", at=T0)
    steps = [
        write(0, "loss=0.1\n", T0 + timedelta(seconds=10)),  # an epoch line like the one before
        write(0, "progress 50%\nprogress 50%\n", T0 + timedelta(seconds=20)),  # the same line twice, one time
        write(1, "A\nB\n", T0 + timedelta(seconds=20)),  # A, B, then A, B again
    ]

    code, out, err = follow(running, steps)

    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("[worker-0]")] == [
        "[worker-0] epoch 1", "[worker-0] loss=0.1", "[worker-0] loss=0.1", "[worker-0] progress 50%",
        "[worker-0] progress 50%",
    ]  # fmt: skip
    assert [line for line in out.splitlines() if line.startswith("[worker-1]")] == [
        "[worker-1] A", "[worker-1] B", "[worker-1] A", "[worker-1] B",
    ]  # fmt: skip
    assert "skipped" not in out and "may be missing" not in out


def test_following_says_how_many_lines_a_chatty_job_wrote_past_one_read(running, apiserver, follow, live_server,
                                                                        capsys, transactional_db):  # fmt: skip
    pod = _pod(running, 1)
    apiserver.write_log("maps", pod, "".join(f"step {n}\n" for n in range(10)), at=T0)
    burst = "".join(f"step {n}\n" for n in range(10, 10 + 6234))
    steps = [lambda: apiserver.write_log("maps", pod, "".join(f"step {n}\n" for n in range(10)) + burst, at=T0)]

    code, out, err = follow(running, steps, "--replica", "worker-1", "--tail", "5")

    assert code == 0, err
    lines = out.splitlines()
    assert lines[:5] == [f"step {n}" for n in range(5, 10)]
    command = f"gangway logs {running.pk} --replica worker-1 --all"
    assert lines[5] == ("... 1,234 lines skipped: the job wrote faster than the read returns; the full log: "
                        f"{command} (in a browser: {live_server.url}/jobs/{running.pk}/logs/worker-1.log)")  # fmt: skip
    assert lines[6:] == [f"step {n}" for n in range(1244, 6244)]

    # The command the notice names writes every line, with the token that followed.
    from gangway_cli import main

    capsys.readouterr()
    assert main.main(command.split()[1:]) == 0
    assert capsys.readouterr().out.splitlines() == [f"step {n}" for n in range(6244)]


def test_following_from_a_tail_of_one_burst_gives_none_of_its_lines_again(running, apiserver, follow,
                                                                         transactional_db):  # fmt: skip
    pod = _pod(running, 0)
    apiserver.write_log("maps", pod, "".join(f"burst {n}\n" for n in range(6)), at=T0, step=timedelta(0))
    steps = [lambda: apiserver.append_log("maps", pod, "after\n", at=T0 + timedelta(seconds=10))]

    code, out, err = follow(running, steps, "--replica", "worker-0", "--tail", "2")

    assert code == 0, err
    assert out.splitlines() == ["burst 4", "burst 5", "after"]


def test_against_an_older_portal_it_follows_as_before_and_says_what_that_risks(cli, fake_portal):
    def answer(state, *lines):  # no cursor: a portal older than following by position
        return Answer(200, {"job": 7, "state": state, "failure": None,
                            "replicas": [{"replica": "worker-0", "lines": list(lines)}]})  # fmt: skip

    fake_portal.on("GET", "/api/v1/jobs/7/logs/", answer("running", "a", "b"), answer("succeeded", "b", "c"))
    result = cli("logs", "7", "-f", "--interval", "1")
    assert result.code == 0 and result.out == "a\nb\nc\n"
    assert "cannot read on from a position" in result.err and "without notice" in result.err
    assert all("cursor" not in request.query for request in fake_portal.requests)


def test_it_passes_each_answers_cursor_back_and_prints_a_gap_it_cannot_count(cli, fake_portal):
    def answer(state, cursor, *lines, **replica):
        return Answer(200, {"job": 7, "state": state, "failure": None, "cursor": cursor,
                            "replicas": [{"replica": "worker-0", "lines": list(lines), **replica}]})  # fmt: skip

    fake_portal.on("GET", "/api/v1/jobs/7/logs/", answer("running", "c1", "a"),
                   answer("running", "c2", "a", skipped=0, skipped_exact=False),
                   answer("succeeded", "c3", "a", skipped=12, skipped_exact=False))  # fmt: skip
    result = cli("logs", "7", "-f", "--interval", "1")
    assert result.code == 0, result.err
    out = result.out.splitlines()
    assert out[0] == "a" and out[1].startswith("... lines may be missing here: ") and out[2] == "a"
    assert out[3].startswith("... at least 12 lines skipped: ") and out[4] == "a"
    assert [request.query.get("cursor") for request in fake_portal.requests] == [None, "c1", "c2"]
