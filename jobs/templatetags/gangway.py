"""Template helpers every page uses: team colours, units, relative times, state badges.

A team keeps its colour everywhere: the palette index is the team's rank in
slug order, read once per request and kept on the request.
"""

from __future__ import annotations

import shlex
from datetime import datetime

from django import template
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.utils import timezone
from django.utils.html import format_html

from core.durations import duration as span
from core.quantities import memory_text
from tenants.models import Team

register = template.Library()
PALETTE_SIZE = 10


def palette(request) -> dict[str, int]:
    """{team slug: palette index}, computed once per request (one query)."""
    cached = getattr(request, "_team_palette", None) if request is not None else None
    if cached is None:
        slugs = Team.objects.order_by("slug").values_list("slug", flat=True)
        cached = {slug: index % PALETTE_SIZE for index, slug in enumerate(slugs)}
        if request is not None:
            request._team_palette = cached
    return cached


@register.simple_tag(takes_context=True)
def team_class(context, slug: str | None) -> str:
    """The CSS class of a team's colour ("t3"), or "" for no team."""
    if not slug:
        return ""
    return f"t{palette(context.get('request')).get(slug, 0)}"


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


@register.simple_tag
def when(moment: datetime | None, empty: str = "—") -> str:
    """A relative time ("3 minutes ago", "in 40 minutes") with the absolute time on hover."""
    if moment is None:
        return format_html('<span class="muted">{}</span>', empty)
    local = timezone.localtime(moment)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        local.isoformat(), local.strftime("%Y-%m-%d %H:%M:%S %Z"), naturaltime(moment),
    )


@register.simple_tag
def eta(moment: datetime | None) -> str:
    """An estimated start: "about 40 min" from now, "any moment" when due, "unknown" when none."""
    if moment is None:
        return format_html('<span class="muted" title="{}">unknown</span>',
                           "Cannot be known yet: it depends on jobs that have no end in sight.")
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
                       local.strftime("%Y-%m-%d %H:%M:%S %Z"), naturaltime(moment))
