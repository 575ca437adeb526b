from django.contrib import admin

from jobs.models import Job, JobEvent
from tenants.admin_display import LoopRecordAdmin


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    fields = ("at", "kind", "from_state", "to_state", "message", "actor")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Jobs are read here; their state moves only through transitions (the pages, the API, the loop)."""

    list_display = ("id", "name", "team", "owner", "tier", "state", "gpu_total", "position", "submitted_at")
    list_filter = ("state", "team", "tier", "kind")
    search_fields = ("name", "owner__username", "team__slug", "idempotency_key")
    date_hierarchy = "submitted_at"
    inlines = (JobEventInline,)
    readonly_fields = [field.name for field in Job._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(JobEvent)
class JobEventAdmin(LoopRecordAdmin):
    """A job's history, written with each transition: read here, never edited."""

    list_display = ("at", "job", "kind", "from_state", "to_state", "message")
    list_filter = ("kind",)
    search_fields = ("job__name", "message")
    list_select_related = ("job",)
