"""The dashboard: cluster GPUs, per-team bars, the queue and the node map, live through one polled fragment."""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db.models import Count, Max, Sum
from django.core.paginator import Paginator
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.vary import vary_on_headers

from jobs.models import Job
from jobs.selectors import queue_for, sweeps_for
from jobs.templatetags.gangway import palette, plural
from scheduling.models import ClusterNode
from scheduling.selectors import cluster_summary, node_rows, reserved_by_node
from tenants.permissions import is_admin
from tenants.selectors import teams_for

QUEUE_PAGE = 50
POLL_SECONDS = 5


@login_required
@vary_on_headers("HX-Request")
def dashboard(request):
    """The whole page, or (for htmx polling) its `live` fragment; ?page= pages the queue."""
    summary = cluster_summary()
    mine = set(teams_for(request.user).values_list("slug", flat=True))
    # A Katib sweep's trials are one row of their own (`sweeps`), not one row each.
    queue = Paginator(queue_for(request.user).filter(sweep__isnull=True), QUEUE_PAGE).get_page(request.GET.get("page"))
    waiting_total = (queue.paginator.count if is_admin(request.user)
                     else Job.objects.filter(state=Job.State.QUEUED, sweep__isnull=True).count())  # fmt: skip
    sweeps = list(sweeps_for(request.user, open_only=True))
    context = {
        "summary": summary,
        "bars": _team_bars(summary.teams, palette(request)),
        "queue": queue,
        "sweeps": sweeps,
        "sweep_waiting": sum(sweep.waiting for sweep in sweeps),
        "hidden_waiting": max(0, waiting_total - queue.paginator.count),
        "node_map": _node_map_html(request, mine),
        "poll_seconds": POLL_SECONDS,
        "my_teams": mine,
    }
    template = "scheduling/dashboard.html#live" if request.htmx else "scheduling/dashboard.html"
    return render(request, template, context)


def _team_bars(teams, colours: dict[str, int]) -> list[dict]:
    """Each team's bar as widths in percent of the largest team's span (nominal or use, whichever is more).

    Everything a bar shows is prepared here, not by template tags: the
    dashboard draws one bar per team and is polled every few seconds.
    """
    scale = max([max(t.nominal, t.used) for t in teams] + [1])
    bars = []
    for team in teams:
        segments = [("within", team.within, "used within nominal"), ("borrowed", team.borrowed, "borrowed above nominal"),
                    ("lent", team.lent, "unused nominal lent to other teams"), ("idle", team.idle, "unused nominal, idle")]  # fmt: skip
        bars.append({
            "team": team,
            "css": f"t{colours.get(team.slug, 0)}",
            "url": reverse("tenants:detail", args=[team.slug]),
            "label": f"{team.slug}: {team.used} of {team.nominal} nominal GPUs in use, {team.borrowed} borrowed, "
                     f"{team.lent} lent, {team.idle} idle",
            "segments": [(kind, round(100 * gpus / scale, 2), f"{plural(gpus, 'GPU')} {words}")
                         for kind, gpus, words in segments if gpus],
        })  # fmt: skip
    return bars


def _node_map_html(request, mine: set[str]) -> str:
    """One cell per GPU, coloured by the team whose job holds it; a job's cells on a node share one tooltip.

    Built as a string rather than template loops: 500 nodes of 8 GPUs are 4,000
    cells, which a template loop renders too slowly for a page polled every few seconds.
    Job names show only for the viewer's teams (staff see all).
    """
    colours = palette(request)
    staff = is_admin(request.user)
    reserved = reserved_by_node()
    html = []
    for node in _node_rows():
        cells, left = [], node.gpu
        for slug, job_id, name, count in node.runs:
            count = min(count, left)
            left -= count
            label = f"{slug}: {name} (#{job_id})" if staff or slug in mine else slug
            cells.append(f'<span class="t{colours.get(slug, 0)}" title="{escape(label)} · {count} GPU{"s" if count != 1 else ""}">'
                         f'{"<i></i>" * count}</span>')
        outside = min(node.outside, left)
        if outside:
            cells.append(f'<span class="outside" title="used outside Gangway">{"<i></i>" * outside}</span>')
        free = left - outside
        for held in reserved.get(node.name, ()):
            count = min(held.gpus, free)
            free -= count
            whose = f"{held.job_name} (#{held.job_id})" if staff or held.team in mine else f"a job of team {held.team}"
            start = timezone.localtime(datetime.fromisoformat(held.start)).strftime("%H:%M") if held.start else "?"
            cells.append(f'<span class="reserved" title="{escape(f"Reserved for {whose} from {start}")}">'
                         f'{"<i></i>" * count}</span>')
        cells.append('<i class="free"></i>' * free)
        html.append(f'<div class="node" title="{escape(node.name)}: {node.used} of {node.gpu} GPUs in use">'
                    f'<span class="node-name">{escape(node.name)}</span><span class="gpus">{"".join(cells)}</span></div>')
    return mark_safe("".join(html))


def _node_rows():
    """node_rows(), reused while neither the active jobs nor the nodes have changed.

    The map only changes when a job is admitted or stops holding GPUs, or a
    node changes; two small aggregates tell, where reading every active job's
    placement costs far more on a full cluster polled by every open dashboard.
    """
    jobs = Job.objects.filter(state__in=Job.ACTIVE_STATES).aggregate(n=Count("id"), ids=Sum("id"), last=Max("admitted_at"))
    nodes = ClusterNode.objects.aggregate(n=Count("id"), gpu=Sum("gpu"), outside=Sum("outside_gpu"), seen=Max("seen_at"))
    state = ":".join(str(value) for value in (*jobs.values(), *nodes.values()))
    key = "gangway:node-rows:" + hashlib.sha1(state.encode()).hexdigest()
    rows = cache.get(key)
    if rows is None:
        rows = node_rows()
        cache.set(key, rows, 300)
    return rows
