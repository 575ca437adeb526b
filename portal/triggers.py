"""Asking the loop for work now, from any app, by the name of the Celery task.

The services that change what admission reads (a submission, a cancel, a quota
edit) and reconcile (a job ended) sit below the loop's tasks, so they never import
them: they send the task by name, once their transaction has committed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from celery import current_app
from django.core.cache import cache
from django.db import transaction
from kombu.exceptions import OperationalError

log = logging.getLogger("gangway.tasks")

# The loop's tasks (scheduling/tasks.py registers them under these names).
ADMISSION_CYCLE = "gangway.admission_cycle"
RECONCILE = "gangway.reconcile"
SYNC_TENANTS = "gangway.sync_tenants"


# After a publish the broker refused, this process sends nothing for this long: each try against a
# broker that is down costs a request (or a cycle's commit, one per notable event) its connect timeout.
BROKER_DOWN_SECONDS = 5.0
_broker_down_until = 0.0


def publish(send: Callable[[], object], what: str) -> bool:
    """Calls `send` (one publish to the broker); returns whether it went out. A refusal is logged,
    never raised, and for BROKER_DOWN_SECONDS after it nothing is tried (False at once)."""
    global _broker_down_until
    if time.monotonic() < _broker_down_until:
        log.warning("did not enqueue %s: the broker was unreachable less than %g s ago", what, BROKER_DOWN_SECONDS)
        return False
    try:
        send()
    except OperationalError as error:
        _broker_down_until = time.monotonic() + BROKER_DOWN_SECONDS
        log.warning("could not enqueue %s: %s", what, error)
        return False
    return True


def trigger(task_name: str) -> None:
    """Send the task now, at most once a second per task, so a burst of submissions asks
    for one cycle; beat runs each task periodically anyway, so a broker hiccup only delays
    it (the failure is logged, not raised: `publish`). Returns nothing either way."""
    if not cache.add(f"gangway:trigger:{task_name}", 1, timeout=1):
        return
    publish(lambda: current_app.send_task(task_name, retry=False), f"{task_name} (the periodic run will catch up)")


def trigger_on_commit(*task_names: str) -> None:
    """Send each task once the current transaction commits (at once outside one), so a
    worker reads what the transaction wrote."""
    for task_name in task_names:
        transaction.on_commit(lambda name=task_name: trigger(name))
