"""The notification settings: a person's e-mail choices, and a team's webhook (its leads')."""

from __future__ import annotations

from urllib.parse import urlsplit

from django import forms
from django.conf import settings

from notifications import outbound
from notifications.models import MOMENTS, Subscription, TeamWebhook

FLAGS = [moment.flag for moment in MOMENTS.values()]


def scope_key(team) -> str:
    """The field prefix of one row: "own" for the person's own jobs, "team-<slug>" for a team's."""
    return "own" if team is None else f"team-{team.slug}"


class SubscriptionsForm(forms.Form):
    """One row of checkboxes (starts, is preempted, fails, succeeds) per scope: own jobs, then each team."""

    def __init__(self, *args, teams, subscriptions, **kwargs):
        super().__init__(*args, **kwargs)
        self.scopes = [None, *teams]
        current = {sub.team_id: sub for sub in subscriptions}
        for team in self.scopes:
            existing = current.get(team.pk if team else None)
            for flag in FLAGS:
                self.fields[f"{scope_key(team)}-{flag}"] = forms.BooleanField(
                    required=False, label=Subscription._meta.get_field(flag).verbose_name.lower(),
                    initial=bool(existing and getattr(existing, flag)),
                )  # fmt: skip

    def rows(self) -> list[tuple[object, list]]:
        """(team or None, its bound fields in MOMENTS order), for the template."""
        return [(team, [self[f"{scope_key(team)}-{flag}"] for flag in FLAGS]) for team in self.scopes]

    def choices(self) -> dict:
        """{team or None: {flag: bool}} from the cleaned data."""
        return {team: {flag: self.cleaned_data[f"{scope_key(team)}-{flag}"] for flag in FLAGS} for team in self.scopes}


class WebhookForm(forms.ModelForm):
    url = forms.URLField(required=False, max_length=500, label="Webhook URL",
                         help_text="A Slack-compatible incoming webhook; empty turns the team's webhook off.",
                         assume_scheme="https")  # fmt: skip

    class Meta:
        model = TeamWebhook
        fields = ["url", *FLAGS]

    def clean_url(self):
        url = self.cleaned_data["url"]
        scheme = urlsplit(url).scheme if url else ""
        if url and scheme != "https" and not (scheme == "http" and settings.WEBHOOK_ALLOW_HTTP):
            raise forms.ValidationError("Use an https:// URL: the message names the team's jobs.")
        if url and (problem := outbound.url_problem(url)):
            raise forms.ValidationError(problem + ".")
        if url and (problem := outbound.host_problem(url)):
            raise forms.ValidationError(problem)
        return url
