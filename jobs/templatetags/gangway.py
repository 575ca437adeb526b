"""Template helpers every page uses: team colours and marks, waiting reasons, units, relative times,
state badges.

A team keeps its colour and its mark everywhere: both follow from the team's rank in the order teams
were created (by primary key), read once per request and kept on the request. A team made later comes
last in that order, so it never takes the colour of a team that was there before it, whatever its slug.
"""

from __future__ import annotations

import shlex
from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from core.durations import duration as span
from core.quantities import memory_text
from jobs.codes import Because
from jobs.reason_lines import may_name_types, reason_lines
from scheduling.policy.reasons import Code
from tenants.limit_words import UNSET
from tenants.models import Team
from tenants.selectors import gpu_types

register = template.Library()
# The palette's colours and marks: .t0-.t9 and .m0-.m9 in static/css/gangway.css.
COLOURS = 10
MARKS = 10


def team_css(rank: int) -> str:
    """Returns the CSS classes of the team `rank`-th to be created: its colour and its mark ("t3 m3").

    The first COLOURS teams pair colour k with mark k; each time the colours come round again the
    marks move on one step more (team 10 is t0 m1, team 11 t1 m2), so no two of the first
    COLOURS x MARKS teams share both their colour and their mark."""
    colour = rank % COLOURS
    return f"t{colour} m{(colour + rank // COLOURS) % MARKS}"


def palette(request) -> dict[str, str]:
    """{team slug: its CSS classes (team_css)}, computed once per request (one query).

    Ranked by primary key, not by slug: a new team whose slug sorts first would otherwise move every
    other team on by one colour."""
    cached = getattr(request, "_team_palette", None) if request is not None else None
    if cached is None:
        slugs = Team.objects.order_by("pk").values_list("slug", flat=True)
        cached = {slug: team_css(rank) for rank, slug in enumerate(slugs)}
        if request is not None:
            request._team_palette = cached
    return cached


@register.simple_tag(takes_context=True)
def team_class(context, slug: str | None) -> str:
    """The CSS classes of a team's colour and mark ("t3 m3"), or "" for no team or one not known."""
    if not slug:
        return ""
    return palette(context.get("request")).get(slug, "")


def _gpu_type_names(request) -> list[str]:
    """The names of the cluster's GPU types, read once per request (one query)."""
    cached = getattr(request, "_gpu_type_names", None) if request is not None else None
    if cached is None:
        cached = [gpu_type.name for gpu_type in gpu_types()]
        if request is not None:
            request._gpu_type_names = cached
    return cached


@register.simple_tag(takes_context=True)
def reason(context, text: str) -> str:
    """A waiting reason laid out by GPU type (jobs/reason_lines.py): what every type's part begins with
    once, a line per type, and what every part ends with once; a reason about one type or none as it is.
    The GPU types are read only for a reason that may be about several (`may_name_types`)."""
    text = text or ""
    laid = reason_lines(text, _gpu_type_names(context.get("request"))) if may_name_types(text) else None
    if laid is None:
        return text
    lead = format_html('<span class="why-lead">{}</span> ', laid.lead) if laid.lead else ""
    lines = format_html_join(" ", '<span class="why-type"><b>{}:</b> {}</span>',
                             ((line.types, line.text) for line in laid.lines))  # fmt: skip
    tail = format_html(' <span class="why-tail">{}</span>', laid.tail) if laid.tail else ""
    return format_html('<span class="why-types">{}{}{}</span>', lead, lines, tail)


@register.simple_tag(takes_context=True)
def team_chip(context, team) -> str:
    """A team's name with its colour swatch."""
    css = team_class(context, team.slug)
    return format_html('<span class="chip"><i class="swatch {}"></i>{}</span>', css, team.slug)


@register.filter
def plural(count, word: str) -> str:
    """`8|plural:"GPU"` -> "8 GPUs"; `1|plural:"GPU"` -> "1 GPU"."""
    count = count or 0
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


@register.simple_tag
def unset_limit(field: str) -> str:
    """The words for a quota figure not set ("no limit" for a borrowing limit, "all unused" for a lending limit),
    from `tenants.limit_words`, which the admin, the what-if and the messages read too."""
    return UNSET[field]


@register.filter
def names_or(things) -> str:
    """The names of `things` as a list read aloud: "TFJob, PyTorchJob or TrainJob"."""
    names = [thing.name for thing in things]
    return " or ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} or {names[-1]}"


@register.filter
def shell_words(words) -> str:
    """A command or its arguments as one would type them: `["--x", "a b"]` -> `--x 'a b'`."""
    return shlex.join(str(word) for word in words or ())


@register.filter
def duration(seconds) -> str:
    """Seconds as a short human span: "45 s", "40 min", "2 h 5 min", "3 d"; "—" for none."""
    if seconds is None or seconds == "":
        return "—"
    return span(float(seconds))


@register.filter
def since(moment: datetime | None) -> str:
    """How long ago `moment` was, as a short span ("12 min")."""
    if moment is None:
        return "—"
    return duration(max(0, (timezone.now() - moment).total_seconds()))


def relative(moment: datetime) -> str:
    """How far `moment` is from now in the spans `duration` and `since` write, rounded as they round: "3 min
    ago", "in 40 min". Every relative time of the pages reads so, so that a row's "submitted 3 min ago" and
    its "running 3 min" of the same age agree (Django's naturaltime rounds down and says "2 minutes ago")."""
    seconds = (moment - timezone.now()).total_seconds()
    return f"in {span(seconds)}" if seconds >= 0.5 else f"{span(-seconds)} ago"


@register.simple_tag
def when(moment: datetime | None, empty: str = "—") -> str:
    """A relative time ("3 min ago", "in 40 min", `relative`) with the absolute time on hover."""
    if moment is None:
        return format_html('<span class="muted">{}</span>', empty)
    local = timezone.localtime(moment)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        local.isoformat(), local.strftime("%Y-%m-%d %H:%M:%S %Z"), relative(moment),
    )


@register.simple_tag
def short_of_replicas(job) -> str:
    """A running job short of replicas (`Job.short_reason`) in a row of jobs: the lead of its reason, as the job
    page says it ("Only 1 of 2 replicas running"), and how long it has been short, with since when and the
    whole reason (which replicas wait, why, and by when it is evicted) on hover; "" for any other job."""
    reason = job.short_reason
    if not reason:
        return ""
    lead = reason.split(": ", 1)[0]  # its clauses begin after the lead's colon; a clock time's has no space
    if job.short_since is None:
        return format_html('<span class="short-note" title="{}">{}</span>', reason, lead)
    local = timezone.localtime(job.short_since)
    return format_html('<span class="short-note" title="Short since {}. {}">{}, short for {}</span>',
                       local.strftime("%Y-%m-%d %H:%M:%S %Z"), reason, lead, since(job.short_since))


# Why a waiting job has no estimated start, by its reason code: the policy's waits lack one when they depend on
# jobs with no end in sight; a job not planned yet, or left out of the plan, has none at all.
NO_ETA = {
    Because.NEW: "Not planned yet: the next admission cycle places it, or says why it waits.",
    Because.CLUSTER_UNREACHABLE: "Not planned while the cluster cannot be read.",
}
NO_ETA_IN_PLAN = "Cannot be known yet: it depends on jobs that have no end in sight."
NO_ETA_HELD = "None while it is left out of the plan: its reason says until when."


@register.simple_tag
def eta(moment: datetime | None, code: str = "") -> str:
    """An estimated start: "about 40 min" from now, "any moment" when due, "unknown" when none, its title
    saying why by the job's reason `code`."""
    if moment is None:
        why = NO_ETA.get(code) or (NO_ETA_IN_PLAN if not code or code in Code._value2member_map_ else NO_ETA_HELD)
        return format_html('<span class="muted" title="{}">unknown</span>', why)
    seconds = (moment - timezone.now()).total_seconds()
    local = timezone.localtime(moment)
    text = "any moment" if seconds < 60 else f"about {duration(seconds)}"
    return format_html('<time datetime="{}" title="{}">{}</time>', local.isoformat(),
                       local.strftime("%Y-%m-%d %H:%M %Z"), text)


@register.simple_tag
def state_badge(state: str, label: str = "", preempted: int = 0) -> str:
    """A state as a small badge; a queued job that was preempted reads "Preempted, requeued"."""
    if state == "queued" and preempted:
        return format_html('<span class="badge s-preempting" title="Preempted {} time{}; it kept its place in '
                           'the queue">Preempted, requeued</span>', preempted, "" if preempted == 1 else "s")
    return format_html('<span class="badge s-{}">{}</span>', state, label or state)


@register.filter
def cores(millicores) -> str:
    """Millicores as cores: 2000 -> "2 cores", 500 -> "0.5 cores"."""
    if not millicores:
        return "default"
    value = millicores / 1000
    return f"{value:g} core" if value == 1 else f"{value:g} cores"


@register.filter
def gib(size) -> str:
    """Bytes in binary units: 4294967296 -> "4 GiB"."""
    return memory_text(size) if size else "default"


@register.simple_tag
def live_attrs(etag: str) -> str:
    """The attributes of a polled part: its version (sent back as If-None-Match by gangway.js) and the
    server's clock, so the page can tell how old what it shows is (portal.live)."""
    return format_html(' data-live data-etag="{}" data-server-now="{}"', etag, timezone.now().isoformat())


@register.simple_tag
def ticking(moment: datetime | None, empty: str = "—") -> str:
    """A past time that gangway.js keeps counting ("12 s ago") and marks stale while the server is out of reach."""
    if moment is None:
        return format_html('<span class="muted">{}</span>', empty)
    local = timezone.localtime(moment)
    return format_html('<time datetime="{}" title="{}" data-age>{}</time>', local.isoformat(),
                       local.strftime("%Y-%m-%d %H:%M:%S %Z"), relative(moment))
