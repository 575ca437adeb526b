"""The dashboard: cluster GPUs, per-team bars, the queue and the node map, live through one polled fragment."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.vary import vary_on_headers

from jobs.models import Job
from jobs.selectors import queue_for
from jobs.templatetags.gangway import palette
from scheduling.selectors import cluster_summary, node_map
from tenants.selectors import teams_for

QUEUE_PAGE = 50
POLL_SECONDS = 5


@login_required
@vary_on_headers("HX-Request")
def dashboard(request):
    """The whole page, or (for htmx polling) its `live` fragment; ?page= pages the queue."""
    summary = cluster_summary()
    mine = set(teams_for(request.user).values_list("slug", flat=True))
    queue = Paginator(queue_for(request.user), QUEUE_PAGE).get_page(request.GET.get("page"))
    waiting_total = queue.paginator.count if request.user.is_staff else Job.objects.filter(state=Job.State.QUEUED).count()
    context = {
        "summary": summary,
        "bars": _team_bars(summary.teams),
        "queue": queue,
        "hidden_waiting": max(0, waiting_total - queue.paginator.count),
        "node_map": _node_map_html(request, mine),
        "poll_seconds": POLL_SECONDS,
        "my_teams": mine,
    }
    template = "scheduling/dashboard.html#live" if request.htmx else "scheduling/dashboard.html"
    return render(request, template, context)


def _team_bars(teams) -> list[dict]:
    """Each team's bar as widths in percent of the largest team's span (nominal or use, whichever is more)."""
    scale = max([max(t.nominal, t.used) for t in teams] + [1])
    bars = []
    for team in teams:
        segments = [("within", team.within, "used within nominal"), ("borrowed", team.borrowed, "borrowed above nominal"),
                    ("lent", team.lent, "unused nominal lent to other teams"), ("idle", team.idle, "unused nominal, idle")]  # fmt: skip
        bars.append({
            "team": team,
            "segments": [(kind, gpus, round(100 * gpus / scale, 2), words) for kind, gpus, words in segments if gpus],
        })  # fmt: skip
    return bars


def _node_map_html(request, mine: set[str]) -> str:
    """One cell per GPU, coloured by the team whose job holds it.

    Built as a string rather than template loops: 500 nodes of 8 GPUs are 4,000
    cells, which a template loop renders too slowly for a page polled every few seconds.
    Job names show only for the viewer's teams (staff see all).
    """
    colours = palette(request)
    staff = request.user.is_staff
    rows = []
    for node, cells in node_map():
        used = sum(1 for cell in cells if cell.team is not None)
        parts = []
        for cell in cells:
            if cell.team is None:
                parts.append('<i class="gpu free" title="free"></i>')
            elif cell.team == "":
                parts.append('<i class="gpu outside" title="used outside Gangway"></i>')
            else:
                label = cell.team
                if staff or cell.team in mine:
                    label = f"{cell.team}: {cell.job_name} (#{cell.job_id})"
                parts.append(f'<i class="gpu t{colours.get(cell.team, 0)}" title="{escape(label)}"></i>')
        rows.append(
            f'<div class="node" title="{escape(node.name)}: {used} of {node.gpu} GPUs in use">'
            f'<span class="node-name">{escape(node.name)}</span><span class="gpus">{"".join(parts)}</span></div>'
        )
    return mark_safe("".join(rows))
