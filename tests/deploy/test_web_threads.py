"""The web answers beside a slow request: gunicorn's threaded worker (deploy/gunicorn.conf.py) serves WEB_THREADS
requests at once in each of its WEB_CONCURRENCY processes, so a download streaming for 40 s or a slow read holds
one thread, not the process, and /healthz and the pages' polls go on being answered. A bad WEB_THREADS (or
WEB_CONCURRENCY) stops the web before it listens, naming the variable."""

import os
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.deploy.ports import closed_port
from tests.deploy.test_web_checks import start_web

ROOT = Path(__file__).resolve().parents[2]
SLOW_SECONDS = 3.0
QUICK = 1.0  # seconds /healthz may take beside a slow request


def urls(here: Path) -> str:
    """The portal's URLs and one view that takes SLOW_SECONDS, saying when it began with a file in `here`."""
    return f'''import time
from pathlib import Path

from django.http import HttpResponse
from django.urls import include, path


def slow(request, name):
    (Path({str(here)!r}) / name).touch()
    time.sleep({SLOW_SECONDS})
    return HttpResponse("slow")


urlpatterns = [path("slow/<slug:name>/", slow), path("", include("portal.urls"))]
'''


@contextmanager
def serving(tmp_path, **variables):
    """Runs gunicorn as the image does, one process, with the slow view; yields its port once /healthz answers."""
    (tmp_path / "threads_urls.py").write_text(urls(tmp_path))
    (tmp_path / "threads_settings.py").write_text(
        "from portal.settings import *  # noqa: F403\n\nROOT_URLCONF = \"threads_urls\"\n"
    )
    port = closed_port()
    env = {key: value for key, value in os.environ.items() if key != "WEB_THREADS"}
    env |= {"DJANGO_SETTINGS_MODULE": "threads_settings", "DJANGO_DEBUG": "1", "PORT": str(port),
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "WEB_CONCURRENCY": "1",
            "GANGWAY_VAR_DIR": str(tmp_path), **variables}  # fmt: skip
    gunicorn = Path(sys.executable).with_name("gunicorn")
    with (tmp_path / "output").open("w") as written:
        server = subprocess.Popen([str(gunicorn), "--config", "deploy/gunicorn.conf.py", "portal.wsgi:application"],
                                  cwd=ROOT, env=env, stdout=written, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(port, "/healthz")
                break
            except OSError:
                assert server.poll() is None, f"gunicorn stopped:\n{(tmp_path / 'output').read_text()}"
                assert time.monotonic() < deadline, "gunicorn did not answer"
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def get(port: int, path: str) -> float:
    """Returns how long GET `path` took to answer 200, in seconds."""
    began = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
        assert answer.status == 200
        answer.read()
    return time.monotonic() - began


def slow_requests(tmp_path, port: int, count: int) -> list[threading.Thread]:
    """Sends `count` slow requests, each from a thread of its own; returns the threads once every view has begun."""
    names = [f"slow-{index}" for index in range(count)]
    sent = [threading.Thread(target=get, args=(port, f"/slow/{name}/"), daemon=True) for name in names]
    for thread in sent:
        thread.start()
    deadline = time.monotonic() + SLOW_SECONDS
    while not all((tmp_path / name).exists() for name in names):
        assert time.monotonic() < deadline, "the slow views did not begin"
        time.sleep(0.02)
    return sent


def test_it_answers_healthz_while_a_slow_request_runs(tmp_path):
    with serving(tmp_path) as port:
        slow = slow_requests(tmp_path, port, 1)
        took = get(port, "/healthz")
        still_running = slow[0].is_alive()
        slow[0].join(timeout=30)

    assert took < QUICK, f"/healthz waited {took:.2f} s behind the slow request"
    assert still_running


def test_it_answers_beside_as_many_slow_requests_as_web_threads_leaves_room_for(tmp_path):
    with serving(tmp_path, WEB_THREADS="3") as port:
        slow = slow_requests(tmp_path, port, 2)
        took = get(port, "/healthz")
        still_running = all(thread.is_alive() for thread in slow)
        for thread in slow:
            thread.join(timeout=30)

    assert took < QUICK
    assert still_running


@pytest.mark.parametrize(("threads", "slow"), [("1", 1), ("2", 2)], ids=["one thread, one slow request",
                                                                          "two threads, two slow requests"])
def test_healthz_waits_when_every_thread_web_threads_gives_is_busy(tmp_path, threads, slow):
    with serving(tmp_path, WEB_THREADS=threads) as port:
        sent = slow_requests(tmp_path, port, slow)
        took = get(port, "/healthz")
        for thread in sent:
            thread.join(timeout=30)

    assert took > SLOW_SECONDS - 1, f"/healthz answered in {took:.2f} s beside {slow} slow requests"


@pytest.mark.parametrize(("name", "value", "said"), [
    ("WEB_THREADS", "0", "WEB_THREADS must be at least 1, got 0."),
    ("WEB_THREADS", "x", "WEB_THREADS must be a whole number, got 'x'."),
    ("WEB_THREADS", "", "WEB_THREADS must be a whole number, got ''."),
    ("WEB_CONCURRENCY", "0", "WEB_CONCURRENCY must be at least 1, got 0."),
])  # fmt: skip
def test_the_web_refuses_to_start_with_a_bad_count_and_says_which(tmp_path, name, value, said):
    port = closed_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1", "PORT": str(port),
           "WEB_CONCURRENCY": "1", "WEB_THREADS": "8", "GANGWAY_VAR_DIR": str(tmp_path), name: value}  # fmt: skip
    started, code, printed = start_web(env, port, tmp_path)

    assert not started, f"gunicorn started despite {name}={value!r}:\n{printed}"
    assert code != 0
    assert f"The web did not start: {said}" in printed
    assert "Traceback" not in printed
    assert "Booting worker" not in printed
