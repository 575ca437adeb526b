"""What a notification says: one sentence per job event, alone or gathered into a digest.

A delivery sent alone reads as it always has. A digest (several deliveries to one receiver, sent
as one message) opens with a headline that counts them ("12 jobs of team maps started", or
"12 job updates" when moments, teams or jobs differ), then gives one line per event, oldest
first, each with its job's link; past DIGEST_LINES it counts the rest ("and 8 more") and links
where they can be read: the team's page for a webhook, the person's notifications page for an
e-mail. Links need PUBLIC_URL; without it the text is the same, without links.
"""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from jobs.models import JobEvent
from notifications.models import MOMENTS

DIGEST_LINES = 20  # lines a digest lists; past them it counts the rest, so a burst of 300 stays readable


def sentence(event: JobEvent) -> str:
    """ "Job resnet (#12) of team maps failed: Replica worker-0 exited with code 1 (Error): ..." """
    job = event.job
    return f"Job {job.name} (#{job.pk}) of team {job.team.slug} {MOMENTS[event.kind].happened}: {event.message}"


def job_link(event: JobEvent) -> str:
    """The job page's address, or "" when PUBLIC_URL is not set."""
    return _public(event.job.get_absolute_url())


def headline(events: list[JobEvent]) -> str:
    """ "12 jobs of team maps started" when every event is the same moment of a different job of one
    team; "12 job updates" otherwise."""
    kinds = {event.kind for event in events}
    teams = {event.job.team.slug for event in events}
    jobs = {event.job_id for event in events}
    if len(kinds) == 1 and len(teams) == 1 and len(jobs) == len(events):
        return f"{len(events)} jobs of team {teams.pop()} {MOMENTS[kinds.pop()].happened_to_several}"
    return f"{len(events)} job updates"


def email(events: list[JobEvent]) -> tuple[str, str]:
    """The subject and plain-text body of an e-mail telling `events` (one or more, oldest first)."""
    if len(events) == 1:
        (event,) = events
        job, link = event.job, job_link(event)
        subject = f"[Gangway] {job.name} (#{job.pk}) {MOMENTS[event.kind].happened}"
        return subject, sentence(event) + (f"\n\n{link}\n" if link else "\n")
    title = headline(events)
    paragraphs = [f"{title}:"]
    for event in events[:DIGEST_LINES]:
        link = job_link(event)
        paragraphs.append(sentence(event) + (f"\n{link}" if link else ""))
    if (more := len(events) - DIGEST_LINES) > 0:
        rest = _public(reverse("notifications:settings"))
        paragraphs.append(f"and {more} more" + (f": {rest}" if rest else "."))
    return f"[Gangway] {title}", "\n\n".join(paragraphs) + "\n"


def webhook_text(events: list[JobEvent]) -> str:
    """Slack's incoming-webhook text telling `events` (one or more, oldest first), links in its <url|label> form."""
    if len(events) == 1:
        return _line(events[0])
    lines = [f"{headline(events)}:", *(f"• {_line(event)}" for event in events[:DIGEST_LINES])]
    if (more := len(events) - DIGEST_LINES) > 0:
        teams = {event.job.team.slug for event in events}
        team = teams.pop() if len(teams) == 1 else None  # a webhook shared by two teams has no one page
        rest = _public(reverse("tenants:detail", args=[team])) if team else ""
        lines.append(f"and {more} more" + (f": <{rest}|jobs of team {team}>" if rest else "."))
    return "\n".join(lines)


def _line(event: JobEvent) -> str:
    text, link = sentence(event), job_link(event)
    return f"{text} <{link}|Open the job>" if link else text


def _public(path: str) -> str:
    """`path` on the portal's public address, or "" when PUBLIC_URL is not set."""
    return f"{settings.PUBLIC_URL}{path}" if settings.PUBLIC_URL else ""
