"""Calls run at the same moment in threads of their own, each on a database connection of its own (real
PostgreSQL), for tests of what two sessions doing things at once must not break: lost updates, deadlocks."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connections


def run_together(*calls: Callable[[], object], timeout: float = 60) -> list[BaseException]:
    """Runs each call in its own thread, named after the call, all started at once; waits for them (at
    most `timeout` seconds each) and returns what they raised, in the order they raised it. Each thread
    closes its database connections when its call ends."""
    raised: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - returned to the test, which reports it
            raised.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(call,), name=getattr(call, "__name__", None)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return raised
