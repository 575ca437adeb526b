from django.contrib import admin

from notifications.models import Delivery, Subscription, TeamWebhook, TokenNotice
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


@admin.register(TokenNotice)
class TokenNoticeAdmin(LoopRecordAdmin):
    """Every notice that an API token expires, as the worker recorded it; written only by the notification tasks
    (`token_notices.py`), and a row deleted by hand would have its notice made and sent again."""

    list_display = ["created_at", "token", "kind", "user", "state", "attempts", "sent_at"]
    list_filter = ["state", "kind"]
    search_fields = ["token__name", "token__prefix", "user__username"]
    list_select_related = ["token__team", "token__user", "user"]
