from django.contrib import admin

from portal.admin_display import LoopRecordAdmin, cpu, memory
from scheduling.models import ClusterNode, Cycle, CycleTotals, SimJob, SimNode, UsageSample


@admin.register(SimNode)
class SimNodeAdmin(admin.ModelAdmin):
    """The simulated cluster's nodes: what an admin sets up for the demo, so they stay editable."""

    list_display = ("name", "gpu", "cpu_shown", "memory_shown", "schedulable")
    list_filter = ("schedulable",)
    search_fields = ("name",)

    @admin.display(description="CPU", ordering="cpu")
    def cpu_shown(self, node: SimNode) -> str:
        return cpu(node.cpu)

    @admin.display(description="Memory", ordering="memory")
    def memory_shown(self, node: SimNode) -> str:
        return memory(node.memory)


@admin.register(SimJob)
class SimJobAdmin(LoopRecordAdmin):
    """What the simulated cluster runs: created by admission, advanced by the simulated clock."""

    list_display = ("job_id", "namespace", "name", "started_at", "duration", "suspended", "finished_at", "succeeded")
    list_filter = ("suspended", "succeeded", "namespace")
    search_fields = ("name", "namespace")


@admin.register(ClusterNode)
class ClusterNodeAdmin(LoopRecordAdmin):
    """The loop's mirror of the cluster's nodes, rewritten on every cycle."""

    list_display = ("name", "gpu", "cpu_shown", "memory_shown", "outside_gpu", "outside_cpu_shown", "outside_memory_shown", "seen_at")
    search_fields = ("name",)

    @admin.display(description="CPU", ordering="cpu")
    def cpu_shown(self, node: ClusterNode) -> str:
        return cpu(node.cpu)

    @admin.display(description="Memory", ordering="memory")
    def memory_shown(self, node: ClusterNode) -> str:
        return memory(node.memory)

    @admin.display(description="Outside CPU", ordering="outside_cpu")
    def outside_cpu_shown(self, node: ClusterNode) -> str:
        return cpu(node.outside_cpu)

    @admin.display(description="Outside memory", ordering="outside_memory")
    def outside_memory_shown(self, node: ClusterNode) -> str:
        return memory(node.outside_memory)


@admin.register(Cycle)
class CycleAdmin(LoopRecordAdmin):
    list_display = ("started_at", "duration", "admitted", "preempted", "rejected", "waiting", "cluster_reachable", "failed")
    list_filter = ("cluster_reachable", "failed")


@admin.register(CycleTotals)
class CycleTotalsAdmin(LoopRecordAdmin):
    list_display = ("cycles", "failures", "seconds")


@admin.register(UsageSample)
class UsageSampleAdmin(LoopRecordAdmin):
    list_display = ("at", "team", "gpu_used", "gpu_borrowed", "gpu_nominal", "gpu_waiting")
    list_filter = ("team",)
    list_select_related = ("team",)
    date_hierarchy = "at"
