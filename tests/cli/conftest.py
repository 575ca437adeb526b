"""The CLI against a live server, with the admission loop and reconcile running in a background thread."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass

import pytest
from django.db import connection

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tenants.tokens import token_create
from tests.cli.fake_portal import FakePortal


@pytest.fixture(autouse=True)
def fresh_throttle(throttle_cache):
    """Every CLI test starts with no throttle counts (the root conftest's `throttle_cache`)."""
    return throttle_cache


@pytest.fixture
def loop(transactional_db, nodes):
    """Cycles and reconciles every 0.2 s on the simulated cluster until the test ends."""
    stop = threading.Event()

    def run():
        try:
            cluster = SimulatedCluster()
            while not stop.wait(0.2):
                reconcile(cluster=cluster)
                admission_cycle(cluster=cluster)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)


@pytest.fixture
def maps_token(maps):
    return token_create(name="ci", team=maps)[1]


@pytest.fixture
def gangway(live_server, maps_token):
    """Run `gangway ARGS...` in a subprocess against the live server; returns the CompletedProcess."""

    def _run(*args: str, stdin: str | None = None, token: str | None = None, timeout: float = 60):
        env = {**os.environ, "GANGWAY_URL": live_server.url, "GANGWAY_TOKEN": token or maps_token}
        return subprocess.run(
            [sys.executable, "-m", "gangway_cli.main", *args], input=stdin, capture_output=True, text=True,
            env=env, timeout=timeout,
        )  # fmt: skip

    return _run


@pytest.fixture
def fake_portal():
    """A scripted stand-in for the portal on 127.0.0.1 (see fake_portal.py)."""
    portal = FakePortal().start()
    yield portal
    portal.close()


@dataclass
class Run:
    code: int
    out: str
    err: str
    waits: list[float]  # the client's waits between attempts, recorded instead of slept


CLI_ENV = ("GANGWAY_URL", "GANGWAY_TOKEN", "GANGWAY_TOKEN_FILE", "GANGWAY_ALLOW_HTTP", "GANGWAY_JOB_ID",
           "GANGWAY_JOB_TOKEN", "GANGWAY_JOB_TOKEN_FILE")  # fmt: skip


@pytest.fixture
def cli(fake_portal, monkeypatch, capsys):
    """Run `gangway ARGS...` in this process against the fake portal (token gw_test), each request timing
    out after 1 s; `env` adds to or (with None) removes from the environment. Returns a Run."""
    from gangway_cli import client, main

    def _run(*args: str, env: dict | None = None) -> Run:
        waits: list[float] = []
        monkeypatch.setattr(client, "pause", waits.append, raising=False)
        monkeypatch.setattr(client, "TIMEOUT", 1.0, raising=False)
        for name in CLI_ENV:
            monkeypatch.delenv(name, raising=False)
        for name, value in {"GANGWAY_URL": fake_portal.url, "GANGWAY_TOKEN": "gw_test", **(env or {})}.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        capsys.readouterr()
        code = main.main(list(args))
        out, err = capsys.readouterr()
        return Run(code, out, err, waits)

    return _run


@pytest.fixture
def gangway_process(fake_portal):
    """Start `gangway ARGS...` as a process against the fake portal; returns the Popen (text, pipes)."""
    started = []

    def _start(*args: str, env: dict | None = None) -> subprocess.Popen:
        environment = {name: value for name, value in os.environ.items() if name not in CLI_ENV}
        environment.update({"GANGWAY_URL": fake_portal.url, "GANGWAY_TOKEN": "gw_test", **(env or {})})
        # Ctrl-C as at a terminal, whichever way the tests were started: a runner started in the background
        # of a shell without job control ignores SIGINT, and a process inherits that.
        process = subprocess.Popen([sys.executable, "-m", "gangway_cli.main", *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=environment,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
        started.append(process)
        return process

    yield _start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            stream.close()


def closed_port_url() -> str:
    """http://127.0.0.1:PORT where nothing listens: connections are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
