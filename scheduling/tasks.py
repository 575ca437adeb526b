"""Celery tasks of the admission loop; the web side asks for them by name (portal/triggers.py)."""

from __future__ import annotations

import logging

from celery import shared_task

from portal.triggers import ADMISSION_CYCLE, RECONCILE, SYNC_TENANTS
from scheduling.cluster import cluster_or_unbuilt, get_cluster
from scheduling.cluster.base import SyncIncomplete
from scheduling.demo_traffic import look as run_demo_traffic
from scheduling.loop import admission_cycle as run_cycle
from scheduling.reconcile import reconcile as run_reconcile
from scheduling.tenants import tenants_from_database

log = logging.getLogger("gangway.tenants")


@shared_task(name=ADMISSION_CYCLE, ignore_result=True)
def admission_cycle() -> str:
    """One admission cycle; single-flight, so a cycle triggered while one runs is skipped."""
    return run_cycle(cluster=cluster_or_unbuilt()).summary


@shared_task(name=RECONCILE, ignore_result=True)
def reconcile() -> str:
    """Correct job states from the cluster (level-triggered)."""
    return run_reconcile(cluster=cluster_or_unbuilt()).summary


@shared_task(name=SYNC_TENANTS, ignore_result=True)
def sync_tenants() -> str:
    """Make namespaces, quotas, priority classes and queues match the teams and tiers."""
    try:
        changes = get_cluster().sync_tenants(tenants_from_database())
    except SyncIncomplete as error:  # the rest went through: say both, and fail so that it shows
        log.error("tenant sync: %s", "; ".join(error.changes) or "nothing changed")
        raise
    return "; ".join(changes) or "Tenants already in line."


@shared_task(name="gangway.demo_traffic", ignore_result=True)
def demo_traffic() -> str:
    """The demo's traffic: a job now and then while few wait (beat runs it with DEMO_TRAFFIC set)."""
    return run_demo_traffic()


@shared_task(name="gangway.ping")
def ping() -> str:
    """Answers 'pong': lets a smoke test see a worker take a task from the broker."""
    return "pong"
