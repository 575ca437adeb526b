from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction

from scheduling.selectors import gpu_type_capacity
from tenants.admin_display import quantity_text
from tenants.admin_members import MembershipForm, MembershipFormSet
from tenants.admin_rows import LoadedField, LoadedRowForm
from tenants.audit import record, snapshot
from tenants.limit_words import limit_text
from tenants.models import ApiToken, AuditEntry, GpuType, Membership, PriorityTier, Quota, Team
from tenants.quota_conflicts import FIELDS, QuotaAsRead, QuotaChanged, changes_since
from tenants.selectors import quota_resources
from tenants.services import (
    admission_inputs_changed, gpu_type_create, gpu_type_delete, gpu_type_delete_problem, gpu_type_rename_problem,
    gpu_type_update, lock_teams,
)
from tenants.tokens import active_tokens


class AuditedAdmin(admin.ModelAdmin):
    """Every save or delete in the admin, and every inline row, becomes an audit entry with before and after.

    `admission_input`: the model is something admission reads (teams, quotas, tiers), so a change
    asks for a cycle once it commits, as the quota page and API do.
    """

    admission_input = False

    def _changed(self) -> None:
        if self.admission_input:
            transaction.on_commit(admission_inputs_changed)

    def save_model(self, request, obj, form, change):
        before = snapshot(type(obj).objects.filter(pk=obj.pk).first()) if change else {}
        super().save_model(request, obj, form, change)
        record(actor=request.user, obj=obj, before=before, after=snapshot(obj), verb="changed" if change else "added")
        self._changed()

    def delete_model(self, request, obj):
        before = snapshot(obj)
        record(actor=request.user, obj=obj, before=before, after={}, verb="deleted")
        super().delete_model(request, obj)
        self._changed()

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            record(actor=request.user, obj=obj, before=snapshot(obj), after={}, verb="deleted")
        super().delete_queryset(request, queryset)
        self._changed()

    def save_related(self, request, form, formsets, change):
        before = snapshot(form.instance)  # many-to-many fields (a team's tiers) are saved here
        super().save_related(request, form, formsets, change)
        form.instance.refresh_from_db()
        record(actor=request.user, obj=form.instance, before=before, after=snapshot(form.instance), verb="changed")
        self._changed()

    def save_formset(self, request, form, formset, change):
        befores = {obj.pk: snapshot(type(obj).objects.filter(pk=obj.pk).first()) for obj in formset.queryset}
        instances = formset.save(commit=False)
        for obj in formset.deleted_objects:
            record(actor=request.user, obj=obj, before=befores.get(obj.pk, snapshot(obj)), after={}, verb="deleted")
            obj.delete()
        for obj in instances:
            existed = obj.pk is not None
            obj.save()
            record(actor=request.user, obj=obj, before=befores.get(obj.pk, {}) if existed else {},
                   after=snapshot(obj), verb="changed" if existed else "added")  # fmt: skip
        formset.save_m2m()


class LoadedFiguresForm(forms.ModelForm):
    """An admin form over a row holding quota figures (a quota, a team's weight) that carries the figures
    it was loaded with and, on save, compares them with the stored ones under the team's row lock (the
    lock every quota write takes; the admin saves in the same transaction), refusing when they differ."""

    loaded = LoadedField()  # the quota figures as loaded (`QuotaAsRead.token`)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            self.initial["loaded"] = QuotaAsRead.now(self._team(), self.figures(self.instance)).token()

    def figures(self, row) -> dict:
        """The row's quota figures, in `quota_values`' shape."""
        raise NotImplementedError

    def _team(self) -> Team:
        raise NotImplementedError

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk:
            read = QuotaAsRead.parse(cleaned.get("loaded"))
            if read is None:
                raise ValidationError("This form does not say which quota it was loaded with, so saving it could "
                                      "undo another admin's change; reload the page and make your change again.")
            # FOR NO KEY UPDATE: it still orders this save after any quota write (each locks the team FOR
            # UPDATE), but holds up no row that merely references the team, such as a membership a single
            # sign-on login adds while a team page waits for that person's lock (`admin_members`).
            team = Team.objects.select_for_update(no_key=True).get(pk=self._team().pk)
            stored = type(self.instance).objects.filter(pk=self.instance.pk).first()
            changes = changes_since(team, read, self.figures(stored) if stored else {})
            if changes:
                raise ValidationError(QuotaChanged(changes).refusal(
                    "you opened this page", "reload the page to see the current quota and make your change again"))
        return cleaned


class QuotaForm(LoadedFiguresForm):
    """A quota row whose resource is one the cluster has now (gpu or one row per GPU type, cpu,
    memory); a row left from before keeps its resource so it can still be changed or deleted."""

    resource = forms.ChoiceField(choices=())

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        known = quota_resources()
        current = self.instance.resource if self.instance.pk else None
        self.fields["resource"].choices = [(r, r) for r in known + ([current] if current and current not in known else [])]

    def figures(self, row: Quota) -> dict:
        return {row.resource: {field: getattr(row, field) for field in FIELDS}}

    def _team(self) -> Team:
        return self.instance.team


class TeamForm(LoadedFiguresForm, LoadedRowForm):
    """A team, whose weight is one of its quota figures (the quota page edits it too); its other fields
    (its tiers among them) are compared as any row's are (`LoadedRowForm`)."""

    checked_elsewhere = ("weight",)  # the figures' check names its change and who made it

    def figures(self, row: Team) -> dict:
        return {"weight": row.weight}

    def _team(self) -> Team:
        return self.instance


class QuotaInline(admin.TabularInline):
    model = Quota
    form = QuotaForm
    extra = 0
    fields = ("resource", "nominal", "borrowing_limit", "lending_limit", "max_per_replica", "default_per_replica",
              "loaded")


class MembershipInline(admin.TabularInline):
    model = Membership
    form = MembershipForm
    formset = MembershipFormSet
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(Team)
class TeamAdmin(AuditedAdmin):
    admission_input = True
    form = TeamForm
    list_display = ("slug", "name", "weight", "default_tier", "member_count")
    search_fields = ("slug", "name")
    filter_horizontal = ("tiers",)
    inlines = (QuotaInline, MembershipInline)

    def get_readonly_fields(self, request, obj=None):
        """A team's slug is fixed once it exists: it names the namespace its jobs' objects run in, and the loop
        finds each job's object there. A new slug would create every open job again in a new namespace while
        the old objects ran on, counted only as outside usage."""
        return ("slug",) if obj is not None else ()

    @admin.display(description="Members")
    def member_count(self, team: Team) -> int:
        return team.memberships.count()


@admin.register(PriorityTier)
class PriorityTierAdmin(AuditedAdmin):
    admission_input = True
    form = LoadedRowForm
    list_display = ("name", "value", "preemptible", "grace_period", "description")
    list_filter = ("preemptible",)
    search_fields = ("name",)
    ordering = ("-value",)

    def get_deleted_objects(self, objs, request):
        """A tier that caps a token in use is protected, the delete page naming the tokens: deleted, it would
        leave them with no cap (`max_tier` empty), free to submit at any tier."""
        deleted, counts, perms, protected = super().get_deleted_objects(objs, request)
        capped = active_tokens(ApiToken.objects.filter(max_tier__in=list(objs))).select_related("team", "max_tier")
        protected = [*protected, *(f"API token {t.name} of team {t.team} (max tier {t.max_tier})" for t in capped)]
        return deleted, counts, perms, protected


@admin.register(Membership)
class MembershipAdmin(AuditedAdmin):
    form = MembershipForm
    list_display = ("user", "team", "role")
    list_filter = ("role", "team")
    search_fields = ("user__username", "team__slug")
    autocomplete_fields = ("user", "team")


@admin.register(Quota)
class QuotaAdmin(AuditedAdmin):
    admission_input = True
    form = QuotaForm
    list_display = ("team", "resource", "nominal_shown", "borrowing_shown", "lending_shown", "per_replica_shown")
    list_filter = ("resource", "team")
    search_fields = ("team__slug",)
    list_select_related = ("team",)

    @admin.display(description="nominal", ordering="nominal")
    def nominal_shown(self, quota: Quota) -> str:
        return quantity_text(quota.resource, quota.nominal)

    @admin.display(description="borrowing limit", ordering="borrowing_limit")
    def borrowing_shown(self, quota: Quota) -> str:
        return _limit_shown(quota, "borrowing_limit")

    @admin.display(description="lending limit", ordering="lending_limit")
    def lending_shown(self, quota: Quota) -> str:
        return _limit_shown(quota, "lending_limit")

    @admin.display(description="max per replica", ordering="max_per_replica")
    def per_replica_shown(self, quota: Quota) -> str:
        return _limit_shown(quota, "max_per_replica")


def _limit_shown(quota: Quota, field: str) -> str:
    """One limit of a quota row as the pages say it: "8 GPUs", or its words for unset ("no limit", "all unused")."""
    return limit_text(field, getattr(quota, field), lambda amount: quantity_text(quota.resource, amount))


GPU_TYPE_FIELDS = ("name", "label", "value", "order", "description")


class GpuTypeForm(LoadedRowForm):
    """A GPU type; a save from a page opened before another admin's change of it is refused (`LoadedRowForm`)."""

    class Meta:
        model = GpuType
        fields = GPU_TYPE_FIELDS

    def clean(self):
        # The first lock of every GPU type change (`gpu_type_create`, `gpu_type_update`, `gpu_type_delete`),
        # before the row's: taken the other way round, this save and another admin's delete of the type could
        # deadlock. Whatever is checked after it (a rename no open job's type names, a name no other type has,
        # in `validate_unique` after this) holds until the save commits: a job submitted, or a type added,
        # between a check and the save would make the service refuse it where the admin shows no form.
        lock_teams()
        cleaned = super().clean()
        name = cleaned.get("name")
        if self.instance.pk and name is not None:
            problem = gpu_type_rename_problem(GpuType.objects.get(pk=self.instance.pk), name)
            if problem:
                self.add_error("name", problem)
        return cleaned


@admin.register(GpuType)
class GpuTypeAdmin(admin.ModelAdmin):
    """GPU types, written through their services (tenants.services): those keep the teams' quotas in
    step, refuse what would strand a quota or a job, record each change and ask for a cycle."""

    form = GpuTypeForm
    list_display = ("name", "label", "value", "order", "description", "nodes_shown")
    search_fields = ("name", "value")
    ordering = ("order", "name")

    def changelist_view(self, request, extra_context=None):
        self._capacity = gpu_type_capacity()  # one read for the whole list
        return super().changelist_view(request, extra_context)

    @admin.display(description="nodes now")
    def nodes_shown(self, gpu_type: GpuType) -> str:
        nodes, gpus = getattr(self, "_capacity", {}).get(gpu_type.name, (0, 0))
        if not nodes:
            return "no node carries its label"
        return f"{nodes} node{'' if nodes == 1 else 's'}, {quantity_text('gpu', gpus)}"

    def save_model(self, request, obj, form, change):
        fields = {name: getattr(obj, name) for name in GPU_TYPE_FIELDS}
        if change:
            gpu_type_update(gpu_type=GpuType.objects.get(pk=obj.pk), actor=request.user, **fields)
        else:
            obj.pk = gpu_type_create(actor=request.user, **fields).pk

    def get_deleted_objects(self, objs, request):
        """Django's list of what a delete takes with it; a type quotas or open jobs still name is
        listed as protected, so the delete page explains why and refuses."""
        deleted, counts, perms, protected = super().get_deleted_objects(objs, request)
        refusals = [problem for obj in objs if (problem := gpu_type_delete_problem(obj))]
        return deleted, counts, perms, [*protected, *refusals]

    def delete_model(self, request, obj):
        gpu_type_delete(gpu_type=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for obj in queryset.order_by("order", "name"):
            gpu_type_delete(gpu_type=obj, actor=request.user)


@admin.register(ApiToken)
class ApiTokenAdmin(AuditedAdmin):
    """Tokens are created by leads (page, API) or `create_token`; here staff can see and revoke them."""

    form = LoadedRowForm  # a page opened before a lead revoked the token never makes it work again

    list_display = ("name", "prefix", "team", "user", "max_tier", "created_at", "last_used_at", "expires_at",
                    "revoked_at")  # fmt: skip
    list_filter = ("team",)
    search_fields = ("name", "prefix", "team__slug", "user__username")
    readonly_fields = ("digest", "prefix", "created_by", "created_at", "last_used_at")

    def has_add_permission(self, request) -> bool:
        return False  # a token made here could never be shown to anyone


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("at", "actor", "team", "subject", "summary")
    list_filter = ("subject", "team")
    search_fields = ("summary", "actor__username", "team__slug")
    date_hierarchy = "at"
    readonly_fields = [field.name for field in AuditEntry._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
