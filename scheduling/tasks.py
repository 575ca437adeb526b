"""Celery tasks of the admission loop, and the triggers the web side calls after a change."""

from __future__ import annotations

import logging

from celery import shared_task
from django.core.cache import cache
from kombu.exceptions import OperationalError

log = logging.getLogger("gangway.tasks")


@shared_task(name="gangway.admission_cycle", ignore_result=True)
def admission_cycle() -> str:
    """One admission cycle; single-flight, so a cycle triggered while one runs is skipped."""
    from scheduling.cluster import get_cluster
    from scheduling.loop import admission_cycle as run

    return run(cluster=get_cluster()).summary


@shared_task(name="gangway.reconcile", ignore_result=True)
def reconcile() -> str:
    """Correct job states from the cluster (level-triggered)."""
    from scheduling.cluster import get_cluster
    from scheduling.reconcile import reconcile as run

    return run(cluster=get_cluster()).summary


@shared_task(name="gangway.sync_tenants", ignore_result=True)
def sync_tenants() -> str:
    """Make namespaces, quotas, priority classes and queues match the teams and tiers."""
    from scheduling.cluster import get_cluster
    from scheduling.tenants import tenants_from_database

    changes = get_cluster().sync_tenants(tenants_from_database())
    return "; ".join(changes) or "Tenants already in line."


@shared_task(name="gangway.ping")
def ping() -> str:
    """Answers 'pong': lets a smoke test see a worker take a task from the broker."""
    return "pong"


def _debounced(key: str) -> bool:
    """True at most once a second per key: a burst of submissions triggers one cycle."""
    return cache.add(f"gangway:trigger:{key}", 1, timeout=1)


def trigger_admission() -> None:
    """Ask for a cycle soon; beat runs one every ADMISSION_INTERVAL anyway, so a broker hiccup only delays."""
    if _debounced("admission"):
        _send(admission_cycle)


def trigger_reconcile() -> None:
    if _debounced("reconcile"):
        _send(reconcile)


def trigger_tenant_sync() -> None:
    if _debounced("tenants"):
        _send(sync_tenants)


def _send(task) -> None:
    try:
        task.apply_async(retry=False)
    except OperationalError as error:
        log.warning("could not enqueue %s (the periodic run will catch up): %s", task.name, error)

