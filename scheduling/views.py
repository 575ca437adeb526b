"""The dashboard: cluster GPUs, per-team bars, the queue and the node map, each a part polled on its own."""

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
from django.utils.cache import patch_vary_headers

from core.durations import clock_time
from jobs.models import Job
from jobs.selectors import queue_for, sweeps_for, with_waits
from jobs.templatetags.gangway import palette, plural
from portal.live import VARY, fingerprint, held_at, live, remember, unchanged
from scheduling.models import ClusterNode
from scheduling.selectors import (cluster_summary, holding_jobs, live_version, node_rows, reserved_by_node, room_of,
                                  type_names)
from tenants.permissions import is_admin
from tenants.selectors import teams_for

QUEUE_PAGE = 25  # the head of the queue; the pager and each team's page show the rest
POLL_SECONDS = 5
QUEUE_COLUMNS = ("name", "team__slug", "tier__name", "tier__value", "gpu_total", "position", "reason", "reason_code",
                 "eta", "queued_at", "preemption_count", "state", "owner__username")  # fmt: skip


@login_required
def dashboard(request):
    """The whole page; for htmx, one polled part (?part=tiles|teams|nodes|queue), else the `live` block.

    Each part is polled on its own and answers 304 while what it shows is
    unchanged, so a poll sends only the parts that changed (portal.live).
    ?page= pages the queue.
    """
    part = request.GET.get("part", "")
    if request.htmx and part in PARTS:
        version = live_version(every_cycle=part in SHOWS_THE_CYCLE)
        recalled = held_at(request, _scope(request, part), version)
        if recalled.held is not None:
            return recalled.held
        etag, build = PARTS[part](request)
        remember(request, recalled, etag)
        held = unchanged(request, etag)
        if held is not None:
            return held
        context = {"poll_seconds": POLL_SECONDS, "etags": {part: etag}, **build()}
        return live(render(request, f"scheduling/dashboard.html#{part}", context), etag)
    context = {"poll_seconds": POLL_SECONDS, "etags": {}}
    for name, read in PARTS.items():
        context["etags"][name], build = read(request)
        context.update(build())
    template = "scheduling/dashboard.html#live" if request.htmx else "scheduling/dashboard.html"
    response = render(request, template, context)
    patch_vary_headers(response, VARY)
    return response


# Each part: (request) -> (its ETag, a function building the rest of its context). The
# ETag is read from what the part shows; the build runs only when it must be rendered.

def _tiles(request):
    summary = _summary(request)
    waiting = _waiting(request)
    cycle = summary.last_cycle
    seen = (cycle.pk, cycle.started_at, cycle.cluster_reachable, cycle.failed) if cycle else None
    kept = _reserved_free(request)
    figures = (summary.capacity, summary.used, summary.outside, summary.reserved_idle, waiting, seen, kept,
               summary.unschedulable, summary.unschedulable_used, summary.in_use)
    return fingerprint(request, "tiles", figures), lambda: {"summary": summary, "waiting_total": waiting,
                                                            "reserved_free": kept}  # fmt: skip


def _reserved_free(request) -> int:
    """Free GPUs that reservations keep for starving jobs (R4), as the node map hatches them."""
    reserved = _reserved(request)
    if not reserved:
        return 0
    _, rows = _rows(request)
    return sum(min(sum(held.gpus for held in reserved.get(node.name, ())), node.gpu - node.used)
               for node in rows if not node.unschedulable)  # fmt: skip


def _teams(request):
    """The teams' bars; on a cluster with GPU types, one group of bars per type (its capacity, and
    each team's figures of that type), else one bar per team as before types."""
    summary = _summary(request)
    colours = palette(request)
    kinds = [(t.name, t.description, t.capacity, t.outside, t.in_use, t.unschedulable, t.unschedulable_nodes,
              t.unschedulable_used) for t in summary.by_type]  # fmt: skip
    return fingerprint(request, "teams", summary.teams, kinds, colours), lambda: {
        "bars": _team_bars(summary.teams, colours),
        "type_groups": [{"type": t, "note": _type_note(t),
                         "bars": _team_bars([u for u in t.teams if _has_any(u)], colours, t.name)}
                        for t in summary.by_type],
    }  # fmt: skip


def _type_note(kind) -> str:
    """What a GPU type's heading over its bars counts: its `room` in the words of the node map's heading of the
    type (`room_words`), with its nodes named first when none of them takes new jobs."""
    room = kind.room
    if room.unschedulable and not room.capacity:
        return f"{plural(room.unschedulable_nodes, 'node')}, {room_words(room)}"
    return room_words(room)


def room_words(room) -> str:
    """A `GpuRoom` in words, the same over a GPU type's team bars and over its group of the node map: the GPUs
    Gangway's jobs hold on its nodes that take new pods, of their capacity, and apart what pods Gangway did
    not create hold there (none of those is free either), then the GPUs of its nodes that take none with what
    jobs still hold there ("3 of 8 GPUs in use, 2 more used outside Gangway; 8 GPUs more on 1 node that takes
    no new jobs, 6 of them in use"). Jobs on a drained node are their team's use, never use of a capacity
    they are not in."""
    if room.unschedulable and not room.capacity:
        return f"none taking new jobs: {plural(room.unschedulable, 'GPU')}{_held(room.unschedulable_used)}"
    words = _in_use(room.in_use, room.capacity, room.outside)
    if not room.unschedulable:
        return words
    return f"{words}; {_more_on_no_new_jobs(room.unschedulable, room.unschedulable_nodes, room.unschedulable_used)}"


def _in_use(in_use: int, capacity: int, outside: int) -> str:
    """"3 of 8 GPUs in use" by Gangway's jobs, then ", 2 more used outside Gangway" when pods it did not create
    hold some: the figure of a type, a group of the map and a node alike."""
    words = f"{in_use} of {plural(capacity, 'GPU')} in use"
    return f"{words}, {outside} more used outside Gangway" if outside else words


def _more_on_no_new_jobs(gpus: int, nodes: int, used: int) -> str:
    """The GPUs of `nodes` nodes that take no new pods, beside the capacity of the others, and how many of them
    are in use: "8 GPUs more on 1 node that takes no new jobs, 6 of them in use" (`room_words`)."""
    takes = "takes" if nodes == 1 else "take"
    return f"{plural(gpus, 'GPU')} more on {plural(nodes, 'node')} that {takes} no new jobs{_held(used)}"


def _held(used: int) -> str:
    """", 6 of them in use" of the GPUs just named; "" when none is."""
    return f", {used} of them in use" if used else ""


def _has_any(usage) -> bool:
    """Whether a team has anything of a GPU type to show: quota, use or waiting jobs."""
    return bool(usage.nominal or usage.used or usage.waiting)


def _nodes(request):
    mine = _my_teams(request)
    state, rows = _rows(request)
    reserved = _reserved(request)
    kinds = _kinds(request)
    # A type's heading on the map is its summary's room, as over its bars: read only on a cluster with types.
    rooms = {kind.name: kind.room for kind in _summary(request).by_type} if kinds else {}
    etag = fingerprint(request, "nodes", state, kinds, sorted(rooms.items()), sorted(reserved.items()), sorted(mine),
                       palette(request))  # fmt: skip
    return etag, lambda: {"node_map": _node_map_html(request, mine, rows, reserved, kinds, rooms),
                          "map_teams": _map_teams(rows)}


def _map_teams(rows) -> list[str]:
    """The slug of each team holding GPUs on the map, in slug order: the map's legend, whose swatches
    carry each team's colour and mark as its cells do."""
    return sorted({run[0] for node in rows for run in node.runs})


def _queue(request):
    """A page of the waiting jobs the viewer may see, and how many more of other teams wait."""
    # A Katib sweep's trials are one row of their own (`sweeps`), not one row each.
    shown = queue_for(request.user).filter(sweep__isnull=True).only(*QUEUE_COLUMNS)  # not the specs' JSON: a page of it costs more than the rest
    queue = Paginator(shown, QUEUE_PAGE).get_page(request.GET.get("page"))
    sweeps = with_waits(list(sweeps_for(request.user, open_only=True)))
    trials = sum(sweep.waiting for sweep in sweeps)
    hidden = 0 if is_admin(request.user) else max(0, _waiting(request) - queue.paginator.count - trials)
    rows = [(job.pk, job.name, job.team_id, job.tier_id, job.gpu_total, job.position, job.reason, job.eta,
             job.queued_at, job.preemption_count) for job in queue.object_list]  # fmt: skip
    sweep_rows = [(sweep.pk, sweep.running, sweep.waiting, sweep.done, sweep.gpus, sweep.gpu_cap, sweep.best_objective,
                   sweep.waits) for sweep in sweeps]  # fmt: skip
    etag = fingerprint(request, "queue", queue.number, queue.paginator.count, hidden, rows, sweep_rows, clock=True)
    return etag, lambda: {"queue": queue, "sweeps": sweeps, "hidden_waiting": hidden}


PARTS = {"tiles": _tiles, "teams": _teams, "nodes": _nodes, "queue": _queue}
# Parts that show the last cycle itself (the tiles: when it ran, whether it reached the cluster):
# every cycle changes them, where the others change only with a cycle that changed something.
SHOWS_THE_CYCLE = {"tiles"}


def _scope(request, part: str) -> str:
    """What a part's remembered ETag is kept under: the part, and the queue's page."""
    return f"dashboard:{part}:{request.GET.get('page', '1') if part == 'queue' else ''}"


def _summary(request):
    """The cluster summary, read once per request whichever parts need it."""
    if not hasattr(request, "_cluster_summary"):
        request._cluster_summary = cluster_summary(types=_kinds(request))
    return request._cluster_summary


def _reserved(request) -> dict:
    """Each node's reservations (`reserved_by_node`), read once per request for the map and the tiles."""
    if not hasattr(request, "_reserved_by_node"):
        request._reserved_by_node = reserved_by_node()
    return request._reserved_by_node


def _rows(request) -> tuple[str, list]:
    """The node map's rows (`_node_rows`), read once per request for the map and the tiles."""
    if not hasattr(request, "_node_rows"):
        request._node_rows = _node_rows()
    return request._node_rows


def _kinds(request) -> list[str]:
    """The cluster's GPU type names, read once per request for the bars and the map alike."""
    if not hasattr(request, "_gpu_types"):
        request._gpu_types = type_names()
    return request._gpu_types


def _waiting(request) -> int:
    """How many jobs wait, in every team."""
    if not hasattr(request, "_waiting"):
        request._waiting = Job.objects.filter(state=Job.State.QUEUED).count()
    return request._waiting


def _my_teams(request) -> set[str]:
    if not hasattr(request, "_my_teams"):
        request._my_teams = set(teams_for(request.user).values_list("slug", flat=True))
    return request._my_teams


def _team_bars(teams, colours: dict[str, str], gpu_type: str = "") -> list[dict]:
    """Each team's bar as widths in percent of the largest team's span (nominal or use, whichever is more);
    `gpu_type` names the type the figures are of, for the bars of one type.

    Everything a bar shows is prepared here, not by template tags: the
    dashboard draws one bar per team and is polled every few seconds.
    """
    scale = max([max(t.nominal, t.used) for t in teams] + [1])
    gpus = f"{gpu_type} GPUs" if gpu_type else "GPUs"
    bars = []
    for team in teams:
        segments = [("within", team.within, "used within nominal"), ("borrowed", team.borrowed, "borrowed above nominal"),
                    ("lent", team.lent, "unused nominal lent to other teams"), ("idle", team.idle, "unused nominal, idle")]  # fmt: skip
        bars.append({
            "team": team,
            "css": colours.get(team.slug, ""),
            "url": reverse("tenants:detail", args=[team.slug]),
            "label": f"{team.slug}: {team.used} of {team.nominal} nominal {gpus} in use, {team.borrowed} borrowed, "
                     f"{team.lent} lent, {team.idle} idle",
            "segments": [(kind, round(100 * gpus / scale, 2), f"{plural(gpus, 'GPU')} {words}")
                         for kind, gpus, words in segments if gpus],
        })  # fmt: skip
    return bars


def _node_map_html(request, mine: set[str], rows, reserved, kinds: list[str], rooms: dict) -> str:
    """One cell per GPU, coloured by the team whose job holds it; a job's cells on a node share one tooltip.
    On a cluster with GPU types (`kinds`, in its order), the nodes come in groups under a heading per
    type (its `rooms` entry: the type summary's, the figures over its bars), then the GPU nodes no type
    matches, then the nodes without GPUs.

    Built as a string rather than template loops: 500 nodes of 8 GPUs are 4,000
    cells, which a template loop renders too slowly for a page polled every few seconds.
    Job names show only for the viewer's teams (staff see all).
    """
    if not kinds:
        return mark_safe("".join(_node_cells(request, mine, rows, reserved)))
    html = []
    for heading, members in _node_groups(rows, kinds):
        note = _group_note(members, rooms.get(heading) or room_of(members))
        html.append(f'<h3 class="node-group">{escape(heading)} <span class="muted">· {note}</span></h3>')
        html.extend(_node_cells(request, mine, members, reserved))
    return mark_safe("".join(html))


def _group_note(members, room) -> str:
    """What a group heading of the map counts: its nodes, then its `room` in the words over the type bars
    (`room_words`): "2 nodes, 3 of 8 GPUs in use, 2 more used outside Gangway; 8 GPUs more on 1 node that
    takes no new jobs, 6 of them in use". Just the nodes for a group without GPUs."""
    nodes = plural(len(members), "node")
    return f"{nodes}, {room_words(room)}" if room.capacity or room.unschedulable else nodes


UNTYPED = "untyped — no job can use their GPUs (their labels match no GPU type)"


def _node_groups(rows, kinds: list[str]) -> list[tuple[str, list]]:
    """The nodes in groups, each (heading, nodes): one per GPU type in `kinds` order (a type
    only a node names comes after them), then GPU nodes of no type, then nodes without GPUs;
    groups without nodes are left out."""
    groups: dict[str, list] = {kind: [] for kind in kinds}
    untyped, cpu_only = [], []
    for node in rows:
        if not node.gpu:
            cpu_only.append(node)
        elif node.gpu_type:
            groups.setdefault(node.gpu_type, []).append(node)
        else:
            untyped.append(node)
    named = [(kind, members) for kind, members in groups.items() if members]
    return [*named, *([(UNTYPED, untyped)] if untyped else []), *([("without GPUs", cpu_only)] if cpu_only else [])]


def _node_cells(request, mine: set[str], rows, reserved) -> list[str]:
    """Each node of `rows` as its map cell's HTML."""
    colours = palette(request)
    staff = is_admin(request.user)
    html = []
    for node in rows:
        cells, left = [], node.gpu
        for slug, job_id, name, count in node.runs:
            count = min(count, left)
            left -= count
            label = f"{slug}: {name} (#{job_id})" if staff or slug in mine else slug
            cells.append(f'<span class="{colours.get(slug, "")}" title="{escape(label)} · {count} GPU{"s" if count != 1 else ""}">'
                         f'{"<i></i>" * count}</span>')
        outside = min(node.outside, left)
        if outside:
            cells.append(f'<span class="outside" title="used outside Gangway">{"<i></i>" * outside}</span>')
        free = left - outside
        for held in reserved.get(node.name, ()):
            count = min(held.gpus, free)
            free -= count
            whose = f"{held.job_name} (#{held.job_id})" if staff or held.team in mine else f"a job of team {held.team}"
            start = clock_time(timezone.localtime(datetime.fromisoformat(held.start)), timezone.localdate()) if held.start else "?"
            cells.append(f'<span class="reserved" title="{escape(f"Reserved for {whose} from {start}")}">'
                         f'{"<i></i>" * count}</span>')
        if node.unschedulable:  # takes no new pods: its idle GPUs are not free
            if free:
                cells.append(f'<span class="unschedulable" title="not free: the node takes no new jobs">{"<i></i>" * free}</span>')
            html.append(f'<div class="node unschedulable" title="{escape(node.name)} ({escape(node.unschedulable)}, takes no new jobs): '
                        f'{_in_use(node.held, node.gpu, node.outside_used)}"><span class="node-name">{escape(node.name)} · '
                        f'{escape(node.unschedulable)}</span><span class="gpus">{"".join(cells)}</span></div>')
            continue
        cells.append('<i class="free"></i>' * free)
        html.append(f'<div class="node" title="{escape(node.name)}: {_in_use(node.held, node.gpu, node.outside_used)}">'
                    f'<span class="node-name">{escape(node.name)}</span><span class="gpus">{"".join(cells)}</span></div>')
    return html


def _node_rows() -> tuple[str, list]:
    """(the state the map depends on, node_rows()), the rows reused while that state is the same.

    The map only changes when a job is admitted or stops holding GPUs, or a
    node changes; two small aggregates tell, where reading every active job's
    placement costs far more on a full cluster polled by every open dashboard.
    """
    jobs = holding_jobs().aggregate(n=Count("id"), ids=Sum("id"), last=Max("admitted_at"))
    nodes = ClusterNode.objects.aggregate(n=Count("id"), gpu=Sum("gpu"), outside=Sum("outside_gpu"), seen=Max("seen_at"))
    state = ":".join(str(value) for value in (*jobs.values(), *nodes.values()))
    # 3: rows carry the node's GPU type, and why it takes no new pods
    key = "gangway:node-rows:3:" + hashlib.sha1(state.encode()).hexdigest()
    rows = cache.get(key)
    if rows is None:
        rows = node_rows()
        cache.set(key, rows, 300)
    return state, rows
