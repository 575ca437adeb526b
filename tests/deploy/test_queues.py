"""Celery queues: notifications go to their own queue and worker, so the loop never waits behind a delivery.

A webhook that never answers holds a worker for its timeout per message; were notifications on
the loop's queue, a reclaim that preempts forty jobs of one team would hold up every team's
admission cycles for minutes. Each task is checked against what is deployed: its queue is one a
worker of the Kubernetes base, of docker-compose and of the demo consumes, and the worker that runs
the loop consumes no queue a notification goes to.
"""

from __future__ import annotations

import re
import stat
import subprocess
from pathlib import Path
from unittest import mock

import pytest
import yaml
from django.conf import settings

from portal.celery import app
from tests.deploy.manifests import by_kind, source_objects

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"
LOOP_TASKS = ("gangway.admission_cycle", "gangway.reconcile", "gangway.sync_tenants", "gangway.ping")


def task_names() -> list[str]:
    """Returns the name of every task the workers register (the apps' tasks modules imported)."""
    app.loader.import_default_modules()
    return sorted(app.tasks)


def queue_of(name: str, options: dict | None = None) -> str:
    """Returns the queue a task sent under `name` (with `options`, as beat sends them) goes to."""
    return app.amqp.router.route(dict(options or {}), name)["queue"].name


def notification_queues() -> set[str]:
    return {queue_of(name) for name in task_names() if name.startswith("notifications.")}


@pytest.fixture(scope="module")
def consumed(tmp_path_factory):
    """Returns a function: the queues the Celery worker an entrypoint command starts consumes (none for others)."""
    fake_bin = tmp_path_factory.mktemp("bin")
    for program in ("gunicorn", "celery", "python"):
        script = fake_bin / program
        script.write_text(f'#!/bin/sh\necho {program} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)

    def _consumed(command: str) -> set[str]:
        result = subprocess.run(["sh", str(ENTRYPOINT), command], env={"PATH": f"{fake_bin}:/usr/bin:/bin"},
                                capture_output=True, text=True, check=True)  # fmt: skip
        return worker_queues(result.stdout.strip().splitlines()[-1])  # what it runs last (a wait comes first)

    return _consumed


def worker_queues(command_line: str) -> set[str]:
    """Returns the queues a `celery ... worker` command line consumes; none for another command.

    Without --queues (-Q) a worker consumes Celery's default queue only.
    """
    words = command_line.split()
    if words[:1] != ["celery"] or "worker" not in words:
        return set()
    for index, word in enumerate(words):
        if word.startswith("--queues="):
            return set(word.removeprefix("--queues=").split(","))
        if word in ("-Q", "--queues"):
            return set(words[index + 1].split(","))
    return {app.conf.task_default_queue}


def kubernetes_commands() -> dict[str, str]:
    """Returns each Deployment's entrypoint command by Deployment name."""
    deployments = by_kind(source_objects(), "Deployment")
    return {name: d["spec"]["template"]["spec"]["containers"][0]["args"][0] for name, d in deployments.items()}


def compose_commands() -> dict[str, str]:
    """Returns each docker-compose service's entrypoint command by service name (the image's services only)."""
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    return {name: service["command"][0] for name, service in services.items() if "build" in service}


def demo_worker_queues() -> set[str]:
    """Returns the queues of the worker deploy/demo.sh starts (its command may run over several lines)."""
    text = (ROOT / "deploy" / "demo.sh").read_text().replace("\\\n", " ")
    (line,) = [line for line in text.splitlines() if re.search(r"celery -A portal worker\b", line)]
    return worker_queues(line[line.index("celery") :])


def test_notifications_go_to_their_own_queue_and_the_loops_tasks_to_the_default():
    for name in task_names():
        expected = "notifications" if name.startswith("notifications.") else app.conf.task_default_queue
        assert queue_of(name) == expected, name
    assert {"notifications.notify", "notifications.deliver"} <= set(task_names())
    assert set(LOOP_TASKS) <= set(task_names())


@pytest.mark.parametrize(("name", "queue"), [("notifications.notify", "notifications"),
                                             ("gangway.admission_cycle", "celery")])  # fmt: skip
def test_a_task_sent_is_published_to_its_queue(name, queue):
    with mock.patch.object(app.amqp, "send_task_message") as send, mock.patch.object(app, "producer_or_acquire"):
        app.tasks[name].apply_async((1,) if name.startswith("notifications.") else ())
    assert send.call_args.kwargs["queue"].name == queue


def test_beat_sends_each_scheduled_task_to_the_loops_queue_or_the_notifications_queue():
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        expected = notification_queues() if entry["task"].startswith("notifications.") else {"celery"}
        assert queue_of(entry["task"], entry.get("options")) in expected, entry["task"]


@pytest.mark.parametrize("deployment", [kubernetes_commands, compose_commands], ids=["kubernetes", "docker-compose"])
def test_every_task_goes_to_a_queue_a_deployed_worker_consumes(deployment, consumed):
    queues = set().union(*(consumed(command) for command in deployment().values()))
    assert {name: queue_of(name) for name in task_names() if queue_of(name) not in queues} == {}


@pytest.mark.parametrize("deployment", [kubernetes_commands, compose_commands], ids=["kubernetes", "docker-compose"])
def test_the_worker_running_the_loop_consumes_no_queue_a_notification_goes_to(deployment, consumed):
    loop_queues = {queue_of(name) for name in LOOP_TASKS}
    workers = {name: queues for name, command in deployment().items() if (queues := consumed(command))}
    loop_workers = {name: queues for name, queues in workers.items() if queues & loop_queues}
    assert loop_workers, "no worker runs the loop"
    for name, queues in loop_workers.items():
        assert not queues & notification_queues(), f"{name} also consumes {queues & notification_queues()}"
    assert any(queues & notification_queues() for queues in workers.values()), "no worker sends notifications"


def test_the_demos_single_worker_consumes_every_queue():
    assert {queue_of(name) for name in task_names()} <= demo_worker_queues()
