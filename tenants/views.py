"""Team pages: the list, a team's usage against quota over 24 hours, and the staff quota editor with its what-if."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from jobs.selectors import jobs_of_team, open_jobs_by_tier, sweeps_for, with_waits
from portal.live import VARY, fingerprint, held_at, live, remember, unchanged
from scheduling.policy.types import typed_key
from scheduling.preview import quota_what_if
from scheduling.selectors import held_on_unschedulable, live_version, loans_now, team_usage, usage_series
from tenants.auth import rate_limited
from tenants.forms import QuotaForm, initial_for
from tenants.models import AuditEntry, Quota, Team
from tenants.permissions import can_edit_quota, can_manage_tokens, can_view
from tenants.quota_conflicts import QuotaAsRead, QuotaChanged, changes_since
from tenants.selectors import get_team_to_view, gpu_types, role_in, teams_for
from tenants.services import quota_update, quota_values
from tenants.tokens import expiring_tokens

CHART_WIDTH, CHART_HEIGHT, CHART_LEFT, CHART_BOTTOM = 960, 220, 36, 22
JOBS_PAGE = 25
SWEEPS_SHOWN = 10  # the team page's Katib sweeps: the open ones first, then the latest ended
REFUSED_SHOWN = 20  # the team page's jobs from elsewhere that Gangway refused: the latest refused
CHART_POINTS = 240  # one per 6 minutes over 24 hours
TYPE_CHART = (CHART_WIDTH // 2, CHART_HEIGHT * 3 // 4)  # the charts per GPU type, two abreast
QUOTA_SUBJECT = Quota._meta.model_name  # audit entries name what changed by its model (tenants.audit)
REVIEW = "the form now shows the current quota: review it and save again"
UNREAD = ("This form does not say which quota it was loaded with, so saving it could undo another admin's change; "
          f"nothing was saved — {REVIEW}.")  # fmt: skip


def _get_team(request, slug: str) -> Team:
    """The team if the user is in it (staff: any team); 404 otherwise, so other teams stay unseen."""
    team = teams_for(request.user).filter(slug=slug).prefetch_related("tiers", "quotas").first()
    if team is None:
        raise Http404("No such team.")
    return team


@login_required
def team_list(request):
    """Every team with its GPUs now; the viewer's own teams are marked (every team's page is open to read)."""
    teams = list(Team.objects.order_by("slug"))
    mine = set(teams_for(request.user).values_list("slug", flat=True))
    usages = {usage.slug: usage for usage in team_usage()}
    rows = [(team, usages.get(team.slug), team.slug in mine) for team in teams]
    return render(request, "tenants/list.html", {"rows": rows, "can_edit_quota": can_edit_quota(request.user)})


@login_required
@vary_on_headers(*VARY)
def team_detail(request, slug: str):
    """Any team's page. Members and staff read all its jobs with links to them; an outsider reads how many
    jobs and GPUs it runs and queues per tier, never which jobs (nobody sees another team's jobs), and the
    quota history without tokens or members' changes.

    Parts are polled, each answering 304 while unchanged: ?part=tiles (GPUs now), ?part=types
    (GPUs now and quota per GPU type, on a cluster with types) and the jobs (any other htmx
    request, ?page= pages them).
    """
    team = get_team_to_view(request.user, slug)
    insider = can_view(request.user, team)
    part = request.GET.get("part")
    if request.htmx and part in ("tiles", "types"):
        scope, version = f"team-{part}:{team.pk}", live_version()
        recalled = held_at(request, scope, version)
        if recalled.held is not None:
            return recalled.held
        tiles = _tiles(team)
        if part == "types" and not tiles["by_type"]:  # the cluster has no types (any more): the part goes
            return HttpResponseStopPolling("")
        etag = fingerprint(request, f"team-{part}", team.pk, _figures(tiles))
        remember(request, recalled, etag)
        return unchanged(request, etag) or live(render(request, f"tenants/detail.html#{part}", {
            "team": team, f"etag_{part}": etag, **tiles}), etag)  # fmt: skip
    if insider:
        page = Paginator(jobs_of_team(team).order_by("-submitted_at", "-id"), JOBS_PAGE).get_page(request.GET.get("page"))
        shown = [(job.pk, job.state, job.updated_at, job.position, job.reason, job.preemption_count)
                 for job in page.object_list]  # fmt: skip
        jobs = {"page": page}
        etag_jobs = fingerprint(request, "team-jobs", team.pk, page.number, page.paginator.count, shown, clock=True)
    else:
        by_tier = open_jobs_by_tier(team)
        jobs = {"by_tier": by_tier}
        etag_jobs = fingerprint(request, "team-jobs-counted", team.pk, [sorted(row.items()) for row in by_tier])
    if request.htmx:
        return unchanged(request, etag_jobs) or live(render(request, "tenants/detail.html#jobs", {
            "team": team, **jobs, "insider": insider, "etag_jobs": etag_jobs}), etag_jobs)  # fmt: skip
    now = timezone.now()
    audit = AuditEntry.objects.filter(team=team).select_related("actor")
    tiles = _tiles(team)
    total, per_type = usage_series(team, now - timedelta(hours=24), [name for name, *_ in tiles["by_type"]])
    manages_tokens = can_manage_tokens(request.user, team)
    context = {
        "team": team,
        "insider": insider,
        "role": role_in(request.user, team),
        **tiles,
        "etag_tiles": fingerprint(request, "team-tiles", team.pk, _figures(tiles)),
        "etag_types": fingerprint(request, "team-types", team.pk, _figures(tiles)),
        "etag_jobs": etag_jobs,
        "chart": usage_chart(total, now),
        # The same chart drawn as narrow as one per type, shown instead on a phone: the wide one,
        # scaled down to a phone's width, has axis figures a few pixels high.
        "chart_narrow": usage_chart(total, now, TYPE_CHART),
        "type_charts": [(name, usage_chart(samples, now, TYPE_CHART)) for name, samples in per_type.items()],
        **jobs,
        "members": team.memberships.select_related("user").order_by("-role", "user__username"),
        "audit": (audit if insider else audit.filter(subject=QUOTA_SUBJECT))[:20],
        "can_manage_tokens": manages_tokens,
        # Its tokens about to expire, for those who make new ones: CI using one stops at its expiry.
        "expiring": list(expiring_tokens(team)) if manages_tokens else [],
        "can_edit_quota": can_edit_quota(request.user),
        "sweeps": with_waits(list(sweeps_for(request.user, team=team, open_first=True)[:SWEEPS_SHOWN])),
        # Jobs from elsewhere Gangway refused to adopt, by name: for its members and staff only, as its jobs are.
        # One more than shown is read, to say whether there are more.
        "refused": list(team.refused_outside_jobs.all()[:REFUSED_SHOWN + 1]) if insider else [],
        "refused_shown": REFUSED_SHOWN,
    }
    return render(request, "tenants/detail.html", context)


def _figures(tiles: dict) -> tuple:
    """What the tiles show, as plain values (a Quota's own text leaves its limits out)."""
    quotas = sorted((q.resource, q.nominal, q.borrowing_limit, q.lending_limit) for q in tiles["quotas"].values())
    return (tiles["usage"], quotas, tiles["borrowing_from"], tiles["lending_to"], tiles["by_type"],
            tiles["on_unschedulable"])  # fmt: skip


def _tiles(team: Team) -> dict:
    """The team's GPUs now: its usage, its quotas and who it borrows from and lends to, and how many of
    the GPUs it uses are on nodes that take no new pods (`on_unschedulable`: its usage counts them, as
    its quota does); on a cluster with GPU types, one row per type (`by_type`) of its figures, quota
    and GPUs on such nodes of that type."""
    usages = team_usage()
    loans = [loan for loan in loans_now(usages) if team.slug in (loan.lender, loan.borrower)]
    usage = next((u for u in usages if u.slug == team.slug), None)
    quotas = {quota.resource: quota for quota in team.quotas.all()}
    described = {kind.name: kind.description for kind in gpu_types()} if usage and usage.by_type else {}
    # Where its GPUs are is asked only of a team that uses some: an idle team's page reads no node.
    on_nodes = held_on_unschedulable(team) if usage and usage.used else {}
    held = {gpu_type: gpus for (_, gpu_type), gpus in on_nodes.items()}
    return {
        "usage": usage,
        "quotas": quotas,
        "borrowing_from": [loan for loan in loans if loan.borrower == team.slug],
        "lending_to": [loan for loan in loans if loan.lender == team.slug],
        "on_unschedulable": min(usage.used, sum(held.values())) if usage else 0,
        "by_type": [(name, described.get(name, ""), of_type, quotas.get(typed_key(name)),
                     min(of_type.used, held.get(name, 0))) for name, of_type in (usage.by_type.items() if usage else ())],
    }  # fmt: skip


def usage_chart(samples: list, now, size: tuple[int, int] = (CHART_WIDTH, CHART_HEIGHT)) -> dict:
    """SVG geometry of GPUs used, borrowed, nominal and waiting over the 24 hours before `now`,
    in a view box of `size` (width, height): the charts per GPU type are drawn half as wide, so
    their axis text reads at the same size beside each other.

    Returns the polygon and polyline point strings and the axis ticks; `empty`
    is True when the loop has recorded no sample yet. The last sample holds
    until `now`, so even one sample draws a line.
    """
    chart_width, chart_height = size
    top_pad, width = 10, chart_width - CHART_LEFT
    bottom = chart_height - CHART_BOTTOM
    start = now - timedelta(hours=24)
    samples = _downsample(samples)
    if samples:
        samples = [*samples, (now, *samples[-1][1:])]
    top = _nice(max([max(used, nominal, used + waiting) for _, used, _, nominal, waiting in samples] + [4]))

    def x(at) -> float:
        return round(CHART_LEFT + width * max(0.0, (at - start).total_seconds()) / 86400, 1)

    def y(value) -> float:
        return round(bottom - (bottom - top_pad) * value / top, 1)

    def line(values) -> str:
        return " ".join(f"{x(at)},{y(v)}" for at, v in values)

    used = [(s[0], s[1]) for s in samples]
    nominal = [(s[0], s[3]) for s in samples]
    over = [(s[0], max(s[1], s[3])) for s in samples]
    waiting = [(s[0], s[1] + s[4]) for s in samples]
    first, last = (x(samples[0][0]), x(samples[-1][0])) if samples else (0, 0)
    return {
        "empty": not samples,
        "width": chart_width, "height": chart_height, "left": CHART_LEFT,
        "used_area": f"{first},{bottom} {line(used)} {last},{bottom}" if samples else "",
        "borrowed_area": f"{line(over)} {line(reversed(nominal))}" if samples else "",
        "nominal_line": line(nominal), "waiting_line": line(waiting),
        "y_ticks": [(y(value), value) for value in (0, top // 4, top // 2, 3 * top // 4, top)],
        "x_ticks": [(x(start + timedelta(hours=h)), "now" if h == 24 else f"−{24 - h} h") for h in (0, 6, 12, 18, 24)],
    }  # fmt: skip


def _downsample(samples: list, points: int = CHART_POINTS) -> list:
    """At most `points` samples: the busiest of each run of consecutive ones, so peaks stay visible."""
    if len(samples) <= points:
        return samples
    size = -(-len(samples) // points)
    return [max(samples[i:i + size], key=lambda s: (s[1] + s[4], s[1])) for i in range(0, len(samples), size)]


def _nice(value: int) -> int:
    """The smallest 'round' axis maximum at or above `value`, divisible by 4."""
    for step in (4, 8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 200, 256, 320, 400, 512):
        if step >= value:
            return step
    return -(-value // 100) * 100


@login_required
@rate_limited
def quota_edit(request, slug: str):
    """Staff edit a team's quotas; htmx posts preview the change (what-if), a plain post saves it.

    The form carries the figures it was loaded with; a save from a page opened before another admin's
    change is refused, with nothing saved, by a 409 that names the change and shows the form again with
    the current figures (a post that does not say what it was loaded with is refused the same way).
    """
    if not can_edit_quota(request.user):
        raise PermissionDenied("Only admins edit quotas.")
    team = _get_team(request, slug)
    form = QuotaForm(request.POST) if request.method == "POST" else QuotaForm(initial=_initial(team))
    if request.method == "POST" and request.htmx:
        return render(request, "tenants/quota.html#whatif", {
            "team": team, "form": form, "whatif": _what_if(team, form), "stale": _stale(team, form)})  # fmt: skip
    if request.method != "POST":
        return _editor(request, team, form)
    if not form.is_valid():
        return _editor(request, team, form, status=422)
    if form.cleaned_data["based_on"] is None:
        return _refused(request, slug, UNREAD)
    try:
        entry = quota_update(team=team, quotas=form.quotas(), weight=form.cleaned_data["weight"], actor=request.user,
                             based_on=form.cleaned_data["based_on"])  # fmt: skip
    except QuotaChanged as changed:
        return _refused(request, slug, changed.refusal("you opened this page", REVIEW))
    messages.success(request, entry.summary if entry else "Nothing changed.")
    return redirect("tenants:quota", slug=team.slug)


def _initial(team: Team) -> dict:
    values = quota_values(team)
    return initial_for(values, QuotaAsRead.now(team, values))


def _editor(request, team: Team, form: QuotaForm, *, conflict: str = "", status: int = 200):
    context = {"team": team, "form": form, "conflict": conflict,
               "audit": AuditEntry.objects.filter(team=team).select_related("actor")[:30]}  # fmt: skip
    return render(request, "tenants/quota.html", context, status=status)


def _refused(request, slug: str, why: str):
    """A save refused with nothing saved (409): `why` above the form, which now holds the figures stored now."""
    team = _get_team(request, slug)  # read again: the team read before the save holds the old figures
    return _editor(request, team, QuotaForm(initial=_initial(team)), conflict=why, status=409)


def _stale(team: Team, form: QuotaForm) -> str:
    """What changed since the page was loaded, for the preview to warn that saving would be refused;
    "" when nothing did (or the form cannot be read: its errors are shown instead)."""
    if not form.is_valid() or form.cleaned_data["based_on"] is None:
        return ""
    changes = changes_since(team, form.cleaned_data["based_on"], quota_values(team))
    return changes and (f"Since you opened this page, {changes}; saving this form would be refused — reload the "
                        "page to change the current quota.")  # fmt: skip


def _what_if(team: Team, form: QuotaForm):
    """What the change would do now, or None when the form has errors (they are shown instead)."""
    if not form.is_valid():
        return None
    return quota_what_if(team=team, quotas=form.quotas())
