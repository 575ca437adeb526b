"""Asking the loop for work now, from any app, by the name of the Celery task.

The services that change what admission reads (a submission, a cancel, a quota
edit) and reconcile (a job ended) sit below the loop's tasks, so they never import
them: they send the task by name, once their transaction has committed.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.core.cache import cache
from django.db import transaction
from kombu.exceptions import OperationalError

log = logging.getLogger("gangway.tasks")

# The loop's tasks (scheduling/tasks.py registers them under these names).
ADMISSION_CYCLE = "gangway.admission_cycle"
RECONCILE = "gangway.reconcile"
SYNC_TENANTS = "gangway.sync_tenants"


def trigger(task_name: str) -> None:
    """Send the task now, at most once a second per task, so a burst of submissions asks
    for one cycle; beat runs each task periodically anyway, so a broker hiccup only delays
    it (the failure is logged, not raised). Returns nothing either way."""
    if not cache.add(f"gangway:trigger:{task_name}", 1, timeout=1):
        return
    try:
        current_app.send_task(task_name, retry=False)
    except OperationalError as error:
        log.warning("could not enqueue %s (the periodic run will catch up): %s", task_name, error)


def trigger_on_commit(*task_names: str) -> None:
    """Send each task once the current transaction commits (at once outside one), so a
    worker reads what the transaction wrote."""
    for task_name in task_names:
        transaction.on_commit(lambda name=task_name: trigger(name))
