"""The CLI against a live server, with the admission loop and reconcile running in a background thread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from django.db import connection

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tenants.tokens import token_create


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
