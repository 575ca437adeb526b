"""The web process runs Django's system checks before it starts, as the worker, notifier, beat and migrate do: a
setting they refuse stops gunicorn with the checks' report, before it listens or starts a worker."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.deploy.ports import closed_port

ROOT = Path(__file__).resolve().parents[2]


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_web(env: dict, port: int, tmp_path: Path) -> tuple[bool, int | None, str]:
    """Starts gunicorn with the image's config and `env`, until it listens on `port` or stops; returns whether
    it started, its exit code (None if it started: it is stopped then) and what it printed."""
    gunicorn = Path(sys.executable).with_name("gunicorn")
    output = tmp_path / "output"
    with output.open("w") as written:
        server = subprocess.Popen([str(gunicorn), "--config", "deploy/gunicorn.conf.py", "portal.wsgi:application"],
                                  cwd=ROOT, env=env, stdout=written, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while server.poll() is None and not listening(port):
            assert time.monotonic() < deadline, "gunicorn neither stopped nor listened"
            time.sleep(0.2)
        started = server.poll() is None
        code = server.returncode
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)
    return started, code, output.read_text()


def test_the_web_refuses_to_start_when_a_system_check_fails_and_says_which(tmp_path):
    (tmp_path / "bad_deadline_settings.py").write_text(
        "from portal.settings import *  # noqa: F403\n\nWEBHOOK_DEADLINE = 0\n"
    )
    port = closed_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bad_deadline_settings", "DJANGO_DEBUG": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "PORT": str(port), "WEB_CONCURRENCY": "1",
           "GANGWAY_VAR_DIR": str(tmp_path)}  # fmt: skip
    started, code, said = start_web(env, port, tmp_path)

    assert not started, f"gunicorn started despite the failing check:\n{said}"
    assert code != 0
    assert ("(notifications.E001) WEBHOOK_DEADLINE must be a number of seconds above 0 and at most half of "
            "CELERY_TASK_SOFT_TIME_LIMIT (100 s), not 0.") in said  # fmt: skip
    assert "The web did not start: Django's system checks failed (above)." in said
    assert "Traceback" not in said
    assert "Booting worker" not in said
