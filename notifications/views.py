"""The notification settings page: what the signed-in person is told, and the webhooks of the teams they lead."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from notifications import selectors, services
from notifications.forms import FLAGS, SubscriptionsForm, WebhookForm
from notifications.models import TeamWebhook
from tenants.selectors import teams_for


def _context(request, *, form=None, webhook_forms=None) -> dict:
    teams = list(teams_for(request.user).order_by("slug"))
    led = list(selectors.led_teams(request.user))
    hooks = {hook.team_id: hook for hook in TeamWebhook.objects.filter(team__in=led)}
    forms = webhook_forms or {}
    return {
        "form": form or SubscriptionsForm(teams=teams, subscriptions=selectors.subscriptions_of(request.user)),
        "webhooks": [(team, forms.get(team.pk) or WebhookForm(instance=hooks.get(team.pk), prefix=team.slug)) for team in led],
        "deliveries": selectors.recent_deliveries(request.user),
        "token_notices": selectors.recent_token_notices(request.user),
        # A message about a job of a team the person has since left links nowhere: its page would answer 404.
        "open_teams": None if request.user.is_staff else {team.pk for team in teams},
    }


@login_required
def settings_page(request):
    """GET: the choices. POST: store the person's e-mail choices, or 422 with the bound form."""
    if request.method == "POST":
        teams = list(teams_for(request.user).order_by("slug"))
        form = SubscriptionsForm(request.POST, teams=teams, subscriptions=selectors.subscriptions_of(request.user))
        if form.is_valid():
            services.subscriptions_set(user=request.user, choices=form.choices())
            messages.success(request, "Saved what you are told about.")
            return redirect("notifications:settings")
        return render(request, "notifications/settings.html", _context(request, form=form), status=422)
    return render(request, "notifications/settings.html", _context(request))


@login_required
@require_POST
def webhook(request, slug: str):
    """Set or remove a team's webhook: its leads and staff only; 404 for a team the person is not in."""
    team = teams_for(request.user).filter(slug=slug).first()
    if team is None:
        raise Http404("No such team.")
    if not selectors.led_teams(request.user).filter(pk=team.pk).exists():
        raise PermissionDenied(f"Only a lead of team {team.slug} or an admin may set its webhook.")
    form = WebhookForm(request.POST, instance=TeamWebhook.objects.filter(team=team).first(), prefix=team.slug)
    if not form.is_valid():
        return render(request, "notifications/settings.html", _context(request, webhook_forms={team.pk: form}), status=422)
    flags = {flag: form.cleaned_data[flag] for flag in FLAGS}
    hook = services.webhook_set(team=team, url=form.cleaned_data["url"], flags=flags, actor=request.user)
    messages.success(request, f"Webhook of team {team.slug} {'saved' if hook else 'removed'}.")
    return redirect("notifications:settings")
