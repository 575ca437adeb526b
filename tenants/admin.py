from django.contrib import admin

from tenants.models import Membership, PriorityTier, Quota, Team


class QuotaInline(admin.TabularInline):
    model = Quota
    extra = 0
    fields = ("resource", "nominal", "borrowing_limit", "lending_limit", "max_per_replica", "default_per_replica")


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "weight", "default_tier", "member_count")
    search_fields = ("slug", "name")
    filter_horizontal = ("tiers",)
    inlines = (QuotaInline, MembershipInline)

    @admin.display(description="Members")
    def member_count(self, team: Team) -> int:
        return team.memberships.count()


@admin.register(PriorityTier)
class PriorityTierAdmin(admin.ModelAdmin):
    list_display = ("name", "value", "preemptible", "grace_period", "description")
    list_filter = ("preemptible",)
    search_fields = ("name",)
    ordering = ("-value",)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "team", "role")
    list_filter = ("role", "team")
    search_fields = ("user__username", "team__slug")
    autocomplete_fields = ("user", "team")


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ("team", "resource", "nominal", "borrowing_limit", "lending_limit", "max_per_replica")
    list_filter = ("resource", "team")
    search_fields = ("team__slug",)
