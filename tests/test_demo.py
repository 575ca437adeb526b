"""`make demo` starts: the web server answers with a login page (and the product's own 404 page), a worker
answers a ping, and the demo's people are told of their jobs.

Runs deploy/demo.sh as a newcomer would (SQLite, simulated cluster, embedded
broker), in a scratch folder and on a free port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def demo_env(var_dir: Path, port: int) -> dict:
    keep = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_", "CELERY_", "DJANGO_"))}
    return {**keep, "PORT": str(port), "GANGWAY_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "portal.settings",
            "ADMISSION_INTERVAL": "2", "RECONCILE_INTERVAL": "2"}  # fmt: skip


@pytest.mark.worker
def test_the_demo_serves_a_login_page_and_its_worker_answers(tmp_path):
    port = free_port()
    env = demo_env(tmp_path, port)
    demo = start_demo(env)
    try:
        page = ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and demo.poll() is None:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(1)
        assert "Log in" in page, f"no login page; demo said: {demo.stdout.read() if demo.poll() is not None else ''}"
        # An address that leads nowhere gets the product's own page, not Django's debug page.
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/no/such/page/", timeout=10)
        body = missing.value.read().decode()
        assert missing.value.code == 404 and "Nothing here" in body and "Using the URLconf" not in body
        ping = subprocess.run(
            [sys.executable, "-c", "import django; django.setup(); from scheduling.tasks import ping; "
             "print(ping.apply_async(ignore_result=False).get(timeout=60))"],
            cwd=ROOT, env={**env, "DJANGO_DEBUG": "1"}, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert ping.stdout.strip().endswith("pong"), ping.stderr
        # The seeded jobs progress by themselves: beat and the worker run admission cycles.
        check = "from jobs.models import Job; print(Job.objects.exclude(state='queued').count())"
        moved = 0
        for _ in range(30):
            result = subprocess.run([sys.executable, "manage.py", "shell", "-c", check], cwd=ROOT,
                                    env={**env, "DJANGO_DEBUG": "1"}, capture_output=True, text=True)  # fmt: skip
            moved = int(result.stdout.strip().splitlines()[-1] or 0)
            if moved > 3:  # more than the three seeded as finished
                break
            time.sleep(2)
        assert moved > 3, "no seeded job was admitted by the demo's own loop"
        # Their owners hear of it: the worker records the e-mails sent and writes them to its log, nowhere else.
        check = "from notifications.models import Delivery; print(Delivery.objects.filter(state='sent').count())"
        sent = 0
        for _ in range(30):
            result = subprocess.run([sys.executable, "manage.py", "shell", "-c", check], cwd=ROOT,
                                    env={**env, "DJANGO_DEBUG": "1"}, capture_output=True, text=True)  # fmt: skip
            sent = int(result.stdout.strip().splitlines()[-1] or 0)
            if sent:
                break
            time.sleep(2)
        assert sent, "the demo's worker sent no notification"
        assert "To: " in (tmp_path / "worker.log").read_text()
    finally:
        stop(demo, tmp_path)


def start_demo(env: dict, *, ignoring_ctrl_c: bool = False) -> subprocess.Popen:
    """The demo in its own process group, as a terminal runs it; `ignoring_ctrl_c` starts it the
    way a shell starts a command in the background, with SIGINT ignored (which the script then
    cannot trap)."""
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignoring_ctrl_c else None
    return subprocess.Popen(["bash", "deploy/demo.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=ignore)  # fmt: skip


def stop(demo: subprocess.Popen, logs: Path) -> str:
    """Stops a demo still running as `kill` would (SIGTERM to its process group) and returns what it printed.
    The worker first finishes the task it runs (a warm shutdown), which a loaded machine makes slow; a demo
    still up after a minute is killed, and the test fails naming the processes left and their logs' ends."""
    if demo.poll() is not None:
        return demo.communicate()[0]
    os.killpg(demo.pid, signal.SIGTERM)
    try:
        return demo.communicate(timeout=60)[0]  # read, not wait: a full pipe would stop the demo writing
    except subprocess.TimeoutExpired:
        left = subprocess.run(["ps", "-s", str(demo.pid), "-o", "pid,stat,etime,args"], capture_output=True,
                              text=True).stdout  # fmt: skip
        os.killpg(demo.pid, signal.SIGKILL)
        demo.communicate()
        ends = "\n".join(f"--- the end of {log.name}:\n{log.read_text(errors='replace')[-2000:]}"
                         for log in sorted(logs.glob("*.log")))  # fmt: skip
        pytest.fail(f"the demo was still up a minute after SIGTERM:\n{left}\n{ends}")


def wait_for_login_page(demo: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and demo.poll() is None:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=5).read()
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"the demo did not come up; it said: {demo.stdout.read() if demo.poll() is not None else ''}")


@pytest.mark.worker
@pytest.mark.parametrize("ignoring_ctrl_c", [False, True], ids=["from a terminal", "started in the background"])
def test_ctrl_c_stops_the_demo_without_reporting_a_failure(tmp_path, ignoring_ctrl_c):
    port = free_port()
    demo = start_demo(demo_env(tmp_path, port), ignoring_ctrl_c=ignoring_ctrl_c)
    try:
        wait_for_login_page(demo, port)
        time.sleep(5)  # the worker and beat have installed their own Ctrl-C handlers
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
        try:
            output, _ = demo.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the demo was still up a minute after Ctrl-C; it said: {stop(demo, tmp_path)}")
    finally:
        if demo.poll() is None:
            stop(demo, tmp_path)
    assert "Stopping the demo..." in output
    assert "stopped by itself" not in output and "A demo process stopped" not in output, output


@pytest.mark.worker
def test_a_process_that_fails_stops_the_demo_and_says_where_to_look(tmp_path):
    port = free_port()
    with socket.socket() as taken:  # the web server cannot listen, so it exits with status 1
        taken.bind(("127.0.0.1", port))
        taken.listen()
        demo = start_demo(demo_env(tmp_path, port))
        try:
            output, _ = demo.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the demo was still up two minutes after it started, its web server unable to listen; it said: "
                        f"{stop(demo, tmp_path)}")
        finally:
            if demo.poll() is None:
                stop(demo, tmp_path)
    assert f"A demo process stopped by itself (exit status 1); see the logs in {tmp_path}." in output, output
    assert output.index("stopped by itself") < output.index("Stopping the demo...")
    assert demo.returncode == 1
