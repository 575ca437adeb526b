from django.contrib import admin

from scheduling.models import ClusterNode, Cycle, CycleTotals, SimJob, SimNode, UsageSample
from tenants.admin_display import LoopRecordAdmin, amount_column
from tenants.models import Resource

CPU = amount_column("cpu", Resource.CPU, "CPU")
MEMORY = amount_column("memory", Resource.MEMORY, "Memory")


@admin.register(SimNode)
class SimNodeAdmin(admin.ModelAdmin):
    """The simulated cluster's nodes: what an admin sets up for the demo, so they stay editable."""

    list_display = ("name", "gpu", CPU, MEMORY, "schedulable")
    list_filter = ("schedulable",)
    search_fields = ("name",)


@admin.register(SimJob)
class SimJobAdmin(LoopRecordAdmin):
    """What the simulated cluster runs: created by admission, advanced by the simulated clock."""

    list_display = ("job_id", "namespace", "name", "started_at", "duration", "suspended", "finished_at", "succeeded")
    list_filter = ("suspended", "succeeded", "namespace")
    search_fields = ("name", "namespace")


@admin.register(ClusterNode)
class ClusterNodeAdmin(LoopRecordAdmin):
    """The loop's mirror of the cluster's nodes, rewritten on every cycle."""

    list_display = ("name", "gpu", CPU, MEMORY, "outside_gpu", amount_column("outside_cpu", Resource.CPU, "Outside CPU"),
                    amount_column("outside_memory", Resource.MEMORY, "Outside memory"), "unschedulable", "seen_at")
    search_fields = ("name",)


@admin.register(Cycle)
class CycleAdmin(LoopRecordAdmin):
    list_display = ("started_at", "duration", "admitted", "preempted", "rejected", "waiting", "cluster_reachable", "failed")
    list_filter = ("cluster_reachable", "failed")


@admin.register(CycleTotals)
class CycleTotalsAdmin(LoopRecordAdmin):
    list_display = ("cycles", "failures", "seconds")


@admin.register(UsageSample)
class UsageSampleAdmin(LoopRecordAdmin):
    list_display = ("at", "team", "gpu_type", "gpu_used", "gpu_borrowed", "gpu_nominal", "gpu_waiting")
    list_filter = ("team", "gpu_type")
    list_select_related = ("team",)
    date_hierarchy = "at"
