"""/metrics in the Prometheus text format, read from the database at scrape time.

Nothing is counted in process memory: web processes, workers and beat are
separate, so the collector derives every number from what the loop already
records. Counters come from JobEvent rows (admissions, preemptions and
rejections), gauges from jobs, quotas and the last Cycle, and the cycle
duration histogram from every Cycle row's duration. Every web process
therefore answers the same numbers; scrape one of them (the Service), or
aggregate with `max` when each pod is scraped.

Failed Celery tasks are the one thing no table records: a `task_failure`
receiver (imported by the worker through CELERY_IMPORTS) counts them in the
`metrics` cache, Redis in production, shared by every process.
"""

from __future__ import annotations

import hmac
import logging

from celery.signals import task_failure
from django.conf import settings
from django.core.cache import caches
from django.db.models import Count, Min
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from redis.exceptions import ConnectionError as RedisUnreachable, TimeoutError as RedisTimeout

import scheduling.tasks  # noqa: F401  registers the gangway tasks with the app, so each has a series
from jobs.models import Job, JobEvent
from portal.celery import app
from scheduling.models import Cycle
from scheduling.records import CYCLE_BUCKETS, cycle_counts, cycle_failures
from scheduling.selectors import cluster_summary, reserved_by_node

log = logging.getLogger("gangway.metrics")
# Admission cycles take milliseconds on a small cluster and seconds on a large one.
FAILED_KEY = "tasks_failed:{}"


def metrics(request):
    """Returns every metric in the Prometheus text format; 401 without the bearer token when METRICS_TOKEN is set,
    403 when no token is set and METRICS_PUBLIC does not open them (the figures of every team, for anyone who
    reaches the web otherwise)."""
    token = settings.METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(sent.encode(), token.encode()):
            response = HttpResponse("A bearer token is required for /metrics.\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    elif not settings.METRICS_PUBLIC:
        return HttpResponse("/metrics is closed: set METRICS_TOKEN and scrape with Authorization: Bearer <token>, "
                            "or METRICS_PUBLIC=1 to serve it to whoever reaches the web.\n",
                            status=403, content_type="text/plain")  # fmt: skip
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)


class GangwayCollector:
    """A prometheus_client collector: each scrape reads the database once per metric family."""

    def collect(self):
        yield from _queue()
        yield from _decisions()
        yield from _gpus()
        yield from _cycles()
        yield _tasks_failed()


def _queue():
    jobs = GaugeMetricFamily("gangway_jobs", "Jobs by state.", labels=["state"])
    counts = dict(Job.objects.values_list("state").annotate(count=Count("*")))  # from the state index alone
    for state in Job.State.values:
        jobs.add_metric([state], counts.get(state, 0))
    yield jobs

    length = GaugeMetricFamily("gangway_queue_length", "Queued jobs per team and tier.", labels=["team", "tier"])
    oldest = GaugeMetricFamily(
        "gangway_queue_oldest_wait_seconds", "How long the oldest queued job of a team and tier has waited.",
        labels=["team", "tier"],
    )  # fmt: skip
    now = timezone.now()
    rows = (
        Job.objects.filter(state=Job.State.QUEUED)
        .values_list("team__slug", "tier__name")
        .annotate(count=Count("id"), first=Min("queued_at"))
        .order_by("team__slug", "tier__name")
    )
    for team, tier, count, first in rows:
        length.add_metric([team, tier], count)
        oldest.add_metric([team, tier], max(0.0, (now - first).total_seconds()))
    yield length
    yield oldest


def _decisions():
    """Counters derived from the events the loop records; a deleted job's events leave them (a counter reset).

    Each is read from the index of decision events (`jobevent_decisions`) alone, counting rows with
    `*`: a scrape never reads the events' rows, which grow with every job ever run.
    """
    Kind = JobEvent.Kind
    counters = (
        ("gangway_admissions", "Jobs admitted, per team.", (Kind.ADMITTED,), False),
        ("gangway_preemptions", "Jobs preempted or evicted, per team and reason code.",
         (Kind.PREEMPTED, Kind.EVICTED), True),
        ("gangway_rejections", "Jobs rejected, per team and reason code.", (Kind.REJECTED,), True),
    )  # fmt: skip
    for name, documentation, kinds, by_reason in counters:
        family = CounterMetricFamily(name, documentation, labels=["team", "reason"] if by_reason else ["team"])
        rows = (
            JobEvent.objects.filter(kind__in=kinds)
            .values_list("job__team__slug", "code")
            .annotate(count=Count("*"))
            .order_by("job__team__slug", "code")
        )
        totals: dict[tuple[str, ...], int] = {}
        for team, code, count in rows:
            key = (team, code or "unspecified") if by_reason else (team,)
            totals[key] = totals.get(key, 0) + count
        for labels, count in totals.items():
            family.add_metric(list(labels), count)
        yield family


def _gpus():
    names = ("used", "nominal", "borrowed", "lent")
    families = {
        name: GaugeMetricFamily(f"gangway_team_gpus_{name}", f"GPUs {name} per team.", labels=["team"])
        for name in names
    }
    summary = cluster_summary()
    usages = summary.teams
    for usage in usages:
        for name in names:
            families[name].add_metric([usage.slug], getattr(usage, name))
    yield from families.values()
    yield from _gpus_by_type(summary, names)

    reserved = GaugeMetricFamily("gangway_reserved_gpus", "GPUs reserved for starving jobs (R4), per team.",
                                 labels=["team"])  # fmt: skip
    per_team: dict[str, int] = {}
    for held in (held for node in reserved_by_node().values() for held in node):
        per_team[held.team] = per_team.get(held.team, 0) + held.gpus
    for team, gpus in sorted(per_team.items()):
        reserved.add_metric([team], gpus)
    yield reserved
    # In use of the capacity: the GPUs jobs hold on the schedulable nodes, as the dashboard's tile counts them; the
    # teams' `used` also counts their jobs still running on nodes that take no new pods, told apart below.
    cluster = GaugeMetricFamily("gangway_cluster_gpus", "GPUs of the schedulable nodes, as the last cycle saw them: "
                                "capacity, used by Gangway jobs, outside Gangway.", labels=["kind"])  # fmt: skip
    cluster.add_metric(["capacity"], summary.capacity)
    cluster.add_metric(["used"], summary.in_use)
    cluster.add_metric(["outside"], summary.outside)
    yield cluster
    apart = GaugeMetricFamily("gangway_unschedulable_gpus", "GPUs of the nodes that take no new pods (cordoned, "
                              "tainted), and of them those Gangway jobs still hold.", labels=["kind"])  # fmt: skip
    apart.add_metric(["capacity"], summary.unschedulable)
    apart.add_metric(["used"], summary.unschedulable_used)
    yield apart


def _gpus_by_type(summary, names):
    """On a cluster with GPU types, the team gauges per type and each type's capacity, used and
    outside, with its GPUs on nodes that take no new pods apart; nothing without types. Their own
    metric names, not a `gpu_type` label on the totals, so a sum over any metric's series stays
    meaningful (it never counts a team's GPUs twice)."""
    usages = summary.teams
    if not any(usage.by_type for usage in usages):
        return
    families = {
        name: GaugeMetricFamily(f"gangway_team_type_gpus_{name}", f"GPUs {name} per team and GPU type.",
                                labels=["team", "gpu_type"])
        for name in names
    }  # fmt: skip
    for usage in usages:
        for gpu_type, of_type in usage.by_type.items():
            for name in names:
                families[name].add_metric([usage.slug, gpu_type], getattr(of_type, name))
    yield from families.values()
    cluster = GaugeMetricFamily("gangway_cluster_type_gpus", "GPUs of the schedulable nodes of each GPU type, "
                                "as the last cycle saw them: capacity, used by Gangway jobs, outside Gangway.",
                                labels=["gpu_type", "kind"])  # fmt: skip
    apart = GaugeMetricFamily("gangway_unschedulable_type_gpus", "GPUs of each GPU type on the nodes that take no "
                              "new pods, and of them those Gangway jobs still hold.",
                              labels=["gpu_type", "kind"])  # fmt: skip
    for kind in summary.by_type:
        cluster.add_metric([kind.name, "capacity"], kind.capacity)
        cluster.add_metric([kind.name, "used"], kind.in_use)
        cluster.add_metric([kind.name, "outside"], kind.outside)
        apart.add_metric([kind.name, "capacity"], kind.unschedulable)
        apart.add_metric([kind.name, "used"], kind.unschedulable_used)
    yield cluster
    yield apart


def _cycles():
    """The cycle duration histogram over every cycle (pruned rows included), and the last cycle's reachability and time."""
    total, seconds, counts = cycle_counts()
    buckets = [(_bound(bound), n) for bound, n in zip(CYCLE_BUCKETS, counts)]
    histogram = HistogramMetricFamily(
        "gangway_admission_cycle_duration_seconds", "How long admission cycles took.", labels=[]
    )
    histogram.add_metric([], buckets + [("+Inf", total)], sum_value=seconds)
    yield histogram
    failures = CounterMetricFamily("gangway_cycle_failures", "Admission cycles that raised (their work rolled back).")
    failures.add_metric([], cycle_failures())
    yield failures

    last = Cycle.objects.order_by("-started_at").values_list("started_at", "cluster_reachable").first()
    reachable = GaugeMetricFamily("gangway_cluster_reachable", "1 when the last admission cycle reached the cluster.")
    at = GaugeMetricFamily("gangway_last_cycle_timestamp_seconds", "When the last admission cycle started (Unix time).")
    if last:
        reachable.add_metric([], 1 if last[1] else 0)
        at.add_metric([], last[0].timestamp())
    yield reachable
    yield at


def _bound(value: float) -> str:
    return repr(float(value))


def _tasks_failed():
    family = CounterMetricFamily("gangway_tasks_failed", "Celery tasks that raised, per task.", labels=["task"])
    # Gangway's own tasks: the loop's (gangway.*) and the notifier's (notifications.*), each from 0.
    names = sorted(name for name in app.tasks if name.startswith(("gangway.", "notifications.")))
    try:
        counts = caches["metrics"].get_many([FAILED_KEY.format(name) for name in names])
    except (RedisUnreachable, RedisTimeout) as error:
        # Unknown, not zero: a counter read as 0 and then as its count again looks like a burst of failures.
        log.warning("The metrics cache cannot be reached (%s); gangway_tasks_failed is left out.", error)
        return family
    for name in names:
        family.add_metric([name], counts.get(FAILED_KEY.format(name), 0))
    return family


@task_failure.connect
def count_task_failure(sender=None, **kwargs) -> None:
    """Counts a failed task in the shared metrics cache (add, then an atomic incr in Redis)."""
    key = FAILED_KEY.format(getattr(sender, "name", "unknown"))
    cache = caches["metrics"]
    cache.add(key, 0, timeout=None)
    cache.incr(key)


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(GangwayCollector())
