"""/readyz: can this process do its work? Each check answers on its own, in JSON.

`/healthz` (portal.views) only says the process answers; an orchestrator
restarts a process that does not. `/readyz` says whether it can serve: the
database, its schema (every migration this code needs applied: during an
upgrade a new process stays out of the Service until the migrate Job is done,
`portal.upgrades`), the broker, the admission loop (neither failing cycle after
cycle nor stopped) and, with the Kubernetes backend, the API server. It
answers 200 when every check passes and 503 naming the failing ones, e.g.
`{"status": "not ready", "checks": {"broker": {"status": "failing", "error": "..."}}}`.

`?exclude=cluster` leaves a check out, as the Kubernetes API server's own
/readyz does: the web Deployment's readiness probe excludes the cluster, the
cycles and the broker, so an API-server outage, a stopped loop or a Redis outage
does not take the pages (which read the database and say so) out of the Service.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import JsonResponse
from django.utils import timezone
from kombu import Connection
from kombu.exceptions import OperationalError

from core.durations import duration
from portal.upgrades import missing_migrations
from scheduling.cluster.base import ClusterError, ClusterUnavailable
from scheduling.records import loop_trouble

TIMEOUT = 3.0  # seconds; below the probes' timeoutSeconds


def readyz(request):
    """Returns 200 with each check's status when all pass, else 503 naming the failing checks."""
    excluded = set(request.GET.getlist("exclude"))
    results = {}
    for name, check in _checks().items():
        if name in excluded:
            results[name] = {"status": "excluded"}
            continue
        try:
            results[name] = {"status": "ok", **check()}
        except (DatabaseError, OperationalError, ClusterUnavailable, ClusterError, CyclesFailing, SchemaBehind) as error:
            results[name] = {"status": "failing", "error": str(error)}
    failing = sorted(name for name, result in results.items() if result["status"] == "failing")
    body = {"status": "not ready" if failing else "ready", "checks": results}
    if failing:
        body["failing"] = failing
    return JsonResponse(body, status=503 if failing else 200)


class CyclesFailing(Exception):
    """The latest admission cycles all failed."""


class SchemaBehind(Exception):
    """The database lacks migrations this code needs."""


def _checks() -> dict[str, Callable[[], dict]]:
    checks = {"database": _database, "schema": _schema, "broker": _broker, "cycles": _cycles}
    if settings.CLUSTER_BACKEND == "kubernetes":
        checks["cluster"] = _cluster
    return checks


def _database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"vendor": connection.vendor}


def _schema() -> dict:
    """Fails while the database lacks migrations this code needs (`portal.upgrades`)."""
    missing = missing_migrations()
    if missing:
        raise SchemaBehind(f"The database lacks {len(missing)} migration(s) this code needs (the first: {missing[0]}); "
                           "the migrate Job applies them.")  # fmt: skip
    return {}


def _cycles() -> dict:
    """Fails once the last CYCLE_FAILURES_BEFORE_UNREADY admission cycles all raised, or once the loop
    has stopped running cycles (`records.loop_trouble`)."""
    trouble = loop_trouble(timezone.now())
    if trouble.failing_too_long:
        raise CyclesFailing(f"The last {trouble.failing} admission cycles failed; see the cycles in the admin and the "
                            "logs.")  # fmt: skip
    if trouble.stalled_for is not None:
        raise CyclesFailing(f"No admission cycle has run for {duration(trouble.stalled_for)}; check that beat and the "
                            "worker run, and the worker's logs.")  # fmt: skip
    return {"failing_in_a_row": trouble.failing}


def _broker() -> dict:
    """Opens a fresh connection to the broker the settings name now (not the one the Celery app cached).

    Its two tries together stay within TIMEOUT, even against a Redis that never answers (kombu would
    wait for the system's TCP timeout, about two minutes, holding a web worker for each probe).
    """
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {}
    if settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        options = {**options, "socket_connect_timeout": TIMEOUT / 2, "socket_timeout": TIMEOUT / 2}
    with Connection(settings.CELERY_BROKER_URL, transport_options=options, connect_timeout=TIMEOUT) as broker:
        broker.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=TIMEOUT)
        return {"transport": broker.transport_cls}


def _cluster() -> dict:
    """Asks the API server its version through the adapter's one wrapper; needs no RBAC rule."""
    # Only a kubernetes install asks, so the kubernetes client is loaded only then.
    from kubernetes.client import VersionApi

    from scheduling.cluster.kubernetes import KubernetesCluster

    cluster = KubernetesCluster.from_environment()
    version = cluster.api.call("read", "version", "of the API server", VersionApi(cluster.api.core.api_client).get_code)
    return {"version": (version or {}).get("gitVersion", "")}
