from django.contrib import admin

from notifications.models import Delivery, Subscription, TeamWebhook
from tenants.admin_display import LoopRecordAdmin


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "on_start", "on_preempt", "on_fail", "on_success"]
    list_select_related = ["user", "team"]


@admin.register(TeamWebhook)
class TeamWebhookAdmin(admin.ModelAdmin):
    list_display = ["team", "url", "on_start", "on_preempt", "on_fail", "on_success", "updated_by", "updated_at"]


@admin.register(Delivery)
class DeliveryAdmin(LoopRecordAdmin):
    """Every message sent, as the worker recorded it; written only by the notification tasks."""

    list_display = ["created_at", "job", "channel", "target", "state", "attempts", "digest_size", "sent_at"]
    list_filter = ["state", "channel"]
