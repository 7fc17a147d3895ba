"""Admin for every model. Governance edits go through the same services (and rules) as the pages,
with a required reason recorded in the history."""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import ValidationError
from django.db.models import JSONField
from simple_history.admin import SimpleHistoryAdmin

from . import models
from .forms import StorableJSONField
from .limits import COMMENT_MAX_CHARS
from .selectors import retention
from .services import governance, report_delivery
from .services import orchestrators as orchestrator_access
from .services.accounts import tokens_revoked_message
from .services.audit import save_audited


class StorableJSONMixin:
    """Every JSON field of the admin refuses NUL and deep nesting with a form error (``StorableJSONField``)."""

    formfield_overrides = {JSONField: {"form_class": StorableJSONField}}


class HistoryAdmin(StorableJSONMixin, SimpleHistoryAdmin):
    pass


class ModelAdmin(StorableJSONMixin, admin.ModelAdmin):
    pass


class ReasonForm(forms.ModelForm):
    change_reason = forms.CharField(
        max_length=COMMENT_MAX_CHARS, help_text="Why? Recorded with your name in the history.", required=True
    )


class AuditedAdmin(HistoryAdmin):
    form = ReasonForm

    def save_model(self, request, obj, form, change):
        save_audited(obj, by=request.user, reason=form.cleaned_data["change_reason"])


class GovernedForm(ReasonForm):
    """A row of the team tree or its entitlements: after the model's own validation, the whole-tree rules of
    ``services.governance`` (``check``), reported on the fields they name."""

    check = staticmethod(lambda instance: None)

    def _post_clean(self):
        super()._post_clean()  # self.instance now holds the edited values
        if self.errors:
            return
        try:
            type(self).check(self.instance)
        except ValidationError as error:
            self._update_errors(error)


class QueueForm(GovernedForm):
    check = staticmethod(governance.check_queue_edit)

    class Meta:
        model = models.Queue
        fields = ("team", "gpu_model", "weight", "guaranteed", "burst_limit")


@admin.register(models.Queue)
class QueueAdmin(AuditedAdmin):
    """Saved through ``governance.save_queue``: the promise check under the capacity lock, and the reason.
    Not deleted here (nor through the API): a guarantee of 0 withdraws it, audited like any edit."""

    form = QueueForm
    list_display = ("team", "gpu_model", "weight", "guaranteed", "burst_limit")
    list_filter = ("gpu_model",)

    def save_model(self, request, obj, form, change):
        governance.save_queue(obj, by=request.user, reason=form.cleaned_data["change_reason"])

    def has_delete_permission(self, request, obj=None):
        return False


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 0
    autocomplete_fields = ("user",)


class TeamForm(GovernedForm):
    check = staticmethod(governance.check_team)

    class Meta:
        model = models.Team
        fields = ("slug", "name", "parent", "description")


@admin.register(models.Team)
class TeamAdmin(AuditedAdmin):
    """Saved through ``governance.save_team``: a re-parenting is checked like any entitlement edit (no loop,
    sub-teams within parents, promises within the fleet), under the capacity lock, with the reason."""

    form = TeamForm
    list_display = ("slug", "name", "parent")
    search_fields = ("slug", "name")
    inlines = [MembershipInline]

    def save_model(self, request, obj, form, change):
        governance.save_team(obj, by=request.user, reason=form.cleaned_data["change_reason"])


class OrchestratorForm(ReasonForm):
    send_secret_to_new_endpoint = forms.BooleanField(
        required=False,
        help_text="When you change the endpoint: send the stored credentials there too (else re-enter them).",
    )

    class Meta:
        model = models.Orchestrator
        fields = ("name", "kind", "endpoint", "credentials_ref", "node_domain", "enabled", "options")

    def clean(self):
        cleaned = super().clean()
        stored = models.Orchestrator.objects.filter(pk=self.instance.pk).first() if self.instance.pk else None
        entered = "credentials_ref" in self.changed_data or cleaned.get("send_secret_to_new_endpoint", False)
        moved = orchestrator_access.secret_destination_problem(stored, cleaned.get("endpoint", ""), entered)
        if moved:
            self.add_error("credentials_ref", moved)
        return cleaned


@admin.register(models.Orchestrator)
class OrchestratorAdmin(AuditedAdmin):
    form = OrchestratorForm
    list_display = ("name", "kind", "endpoint", "node_domain", "enabled", "last_success_at", "is_stale")
    list_filter = ("kind", "enabled")
    readonly_fields = ("last_success_at", "last_error", "last_error_at")


@admin.register(models.Node)
class NodeAdmin(AuditedAdmin):
    list_display = (
        "name",
        "domain",
        "orchestrator",
        "gpu_model",
        "gpu_total",
        "gpu_allocated",
        "state",
        "nvlink_domain",
        "leaf_switch",
        "pinned",
    )
    list_filter = ("domain", "orchestrator", "gpu_model", "state", "leaf_switch", "pinned")
    search_fields = ("name",)


@admin.register(models.PoolPolicy)
class PoolPolicyAdmin(AuditedAdmin):
    list_display = (
        "orchestrator",
        "name",
        "weekdays",
        "start_time",
        "end_time",
        "floor_gpus",
        "ceiling_gpus",
        "lendable",
        "enabled",
    )


@admin.register(models.HistoryRetention)
class HistoryRetentionAdmin(AuditedAdmin):
    """One row: how long raw scrape rows are kept (services/retention.py prunes them hourly, rollups stay).
    Saved with the reason, like every other policy edit; the model's ``clean`` names the field and the rule."""

    list_display = ("raw_days", "pruned_before")
    readonly_fields = ("pruned_before",)

    def has_add_permission(self, request):
        return super().has_add_permission(request) and not models.HistoryRetention.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False  # without the row the default period applies: a change of policy, so edit it instead

    def save_model(self, request, obj, form, change):
        obj.pk = retention.SINGLETON
        super().save_model(request, obj, form, change)


class DecidedElsewhereAdmin(HistoryAdmin):
    """Read-only: requests and grants change only through ``services.quota`` (filing, amending, approval with
    the promise check, revocation, extension), from the pages or the API, each with who and why."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.QuotaRequest)
class QuotaRequestAdmin(DecidedElsewhereAdmin):
    list_display = ("pk", "team", "requester", "gpus", "gpu_model", "starts_at", "ends_at", "state")
    list_filter = ("state", "team")


@admin.register(models.QuotaGrant)
class QuotaGrantAdmin(DecidedElsewhereAdmin):
    list_display = ("team", "gpus", "gpu_model", "starts_at", "ends_at", "state")
    list_filter = ("state", "team")


class NodeMoveInline(admin.TabularInline):
    model = models.NodeMove
    extra = 0


@admin.register(models.RebalancePlan)
class RebalancePlanAdmin(HistoryAdmin):
    list_display = ("pk", "created_at", "state", "dry_run")
    inlines = [NodeMoveInline]


@admin.register(models.ReclaimPlan)
class ReclaimPlanAdmin(HistoryAdmin):
    list_display = ("pk", "orchestrator", "created_at", "mode", "state", "cause")
    list_filter = ("state", "mode")
    readonly_fields = ("reclaims", "passed", "actions")


@admin.register(models.Workload)
class WorkloadAdmin(ModelAdmin):
    list_display = (
        "external_id",
        "orchestrator",
        "team",
        "user",
        "kind",
        "gang_size",
        "gpus_per_member",
        "state",
        "submitted_at",
    )
    list_filter = ("orchestrator", "state", "kind", "team")
    search_fields = ("external_id", "user", "name")
    date_hierarchy = "submitted_at"


@admin.register(models.CollectorRun)
class CollectorRunAdmin(ModelAdmin):
    list_display = ("orchestrator", "started_at", "duration_ms", "ok", "nodes", "gpus_total", "gpus_allocated", "error")
    list_filter = ("orchestrator", "ok")


@admin.register(models.Membership)
class MembershipAdmin(HistoryAdmin):
    """``source``: a membership typed in here is ``manual`` and no directory sync touches it; ``mapping`` rows
    follow the user's groups (docs/identity.md)."""

    list_display = ("user", "team", "role", "source")
    list_filter = ("source", "role", "team")
    search_fields = ("user__username", "team__slug")


@admin.register(models.GroupMapping)
class GroupMappingAdmin(AuditedAdmin):
    list_display = ("pattern", "team", "role")
    list_filter = ("role", "team")
    search_fields = ("pattern", "team__slug")


@admin.register(models.IdentityOverride)
class IdentityOverrideAdmin(AuditedAdmin):
    """Whose a submitter name is where the default (the portal user of that name) is wrong or silent."""

    list_display = ("user", "kind", "name", "orchestrator")
    list_filter = ("kind", "orchestrator")
    search_fields = ("user__username", "name")
    autocomplete_fields = ("user",)


@admin.register(models.ExternalIdentity)
class ExternalIdentityAdmin(ModelAdmin):
    """Who signed in through LDAP or OIDC, and the groups last seen (written by sign-in and re-sync only)."""

    list_display = ("user", "provider", "subject", "synced_at")
    list_filter = ("provider",)
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "provider", "subject", "groups", "synced_at")

    def has_add_permission(self, request):
        return False
admin.site.register(models.UsageRollup)
admin.site.register(models.UsageSample)
admin.site.register(models.WorkloadUtilisation)
admin.site.register(models.CapacityLock)


@admin.register(models.CapacityReport)
class CapacityReportAdmin(ModelAdmin):
    """Stored weekly reports; the content is computed, never edited. "Resend" is the one deliberate retry."""

    list_display = ("period_start", "status", "generated_at", "sent_at", "recipients", "claimed_by")
    list_filter = ("status",)
    readonly_fields = [f.name for f in models.CapacityReport._meta.fields]
    actions = ["resend"]

    @admin.action(description="Send again to every subscriber")
    def resend(self, request, queryset):
        for report in queryset.filter(generated_at__isnull=False):
            report_delivery.resend_report(report)
            report_delivery.send_report(report.pk, base_url=request.build_absolute_uri("/"))


admin.site.register(models.ReportSubscription)


@admin.register(models.WhatIfScenario)
class WhatIfScenarioAdmin(ModelAdmin):
    """Read-only: scenarios are submitted through /whatif/ or the API and filled in by the Celery task."""

    list_display = ("pk", "name", "team", "created_by", "status", "progress", "created_at")
    list_filter = ("status",)
    readonly_fields = [f.name for f in models.WhatIfScenario._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


# --- The GPU ledger. Inventory and aliases are admin-edited (audited); findings are read-only. ---


@admin.register(models.FleetHost)
class FleetHostAdmin(AuditedAdmin):
    list_display = ("name", "gpu_model", "gpu_total", "retired")
    list_filter = ("retired", "gpu_model")
    search_fields = ("name", "aliases__name")


@admin.register(models.NodeAlias)
class NodeAliasAdmin(AuditedAdmin):
    list_display = ("name", "orchestrator", "host")
    list_filter = ("orchestrator",)
    search_fields = ("name", "host__name")


@admin.register(models.LedgerFinding)
class LedgerFindingAdmin(ModelAdmin):
    list_display = ("kind", "severity", "node", "orchestrators", "opened_at", "last_seen", "closed_at")
    list_filter = ("kind", "severity", ("closed_at", admin.EmptyFieldListFilter))
    search_fields = ("node", "explanation")
    readonly_fields = [f.name for f in models.LedgerFinding._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(models.AdmissionDecision)
class AdmissionDecisionAdmin(ModelAdmin):
    """Read-only: every answer of the admission webhook, written by services.admission."""

    list_display = ("at", "namespace", "name", "kind", "user", "allowed", "patched", "scheduler", "pool")
    list_filter = ("allowed", "patched", "scheduler", "kind")
    search_fields = ("namespace", "name", "user", "uid")
    readonly_fields = [f.name for f in models.AdmissionDecision._meta.fields]

    def has_add_permission(self, request):
        return False


admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class PortalUserAdmin(UserAdmin):
    """Django's user admin, saying when a password set here revoked the user's API tokens."""

    def log_change(self, request, obj, message):
        # Called once a change is saved; the set-password form's save ran the password_changed hook.
        if hasattr(obj, "revoked_api_tokens"):
            messages.info(request, tokens_revoked_message(obj, obj.get_username()))
        return super().log_change(request, obj, message)
