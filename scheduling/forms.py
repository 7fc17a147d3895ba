"""Forms validate shape (types, ranges, required fields); the services keep the business rules."""

from decimal import Decimal

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput
from django.utils import timezone

from scheduling.limits import COMMENT_MAX_CHARS, DEPTH_RULE, JUSTIFICATION_MAX_CHARS, json_path, json_problem
from scheduling.models import Orchestrator, Queue, Team
from scheduling.models.quota import period_errors

DATETIME_INPUT = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class QuotaRequestForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), help_text="Teams you belong to (and their sub-teams).")
    gpus = forms.IntegerField(
        label="GPUs",
        min_value=1,
        max_value=100_000,
        error_messages={"min_value": "GPUs must be a whole number of at least 1."},
    )
    gpu_model = forms.ChoiceField(label="GPU model", required=False)
    orchestrator = forms.ModelChoiceField(
        queryset=Orchestrator.objects.filter(enabled=True), required=False, empty_label="any orchestrator"
    )
    starts_at = forms.DateTimeField(label="Start (UTC)", widget=DATETIME_INPUT)
    ends_at = forms.DateTimeField(label="End (UTC)", widget=DATETIME_INPUT)
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        max_length=JUSTIFICATION_MAX_CHARS,
        error_messages={"required": "A justification is required: say what the GPUs are for."},
    )
    # Set when the empty form is shown: sending this form twice (a double-click) files one request.
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=255)

    def __init__(self, *args, teams, gpu_models: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = Team.objects.filter(pk__in=[t.pk for t in teams])
        self.fields["gpu_model"].choices = [("", "any model"), *((m, m) for m in gpu_models)]

    def clean(self):
        data = super().clean()
        start, end = data.get("starts_at"), data.get("ends_at")
        if start and end:
            for field, message in period_errors(start, end, now=timezone.now()).items():
                self.add_error(field, message)
        return data


class DecisionForm(forms.Form):
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=COMMENT_MAX_CHARS,
        help_text="Shown to the requester; required to deny.",
    )
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("deny", "Deny"), ("revoke", "Revoke grant")])

    def clean(self):
        data = super().clean()
        if data.get("decision") in ("deny", "revoke") and not (data.get("comment") or "").strip():
            self.add_error("comment", "Say why: a denial or revocation needs a comment for the requester.")
        return data


class QueueRowForm(forms.Form):
    """One entitlement row of the fair-share editor; tree-wide rules come from governance.check_tree."""

    queue = forms.IntegerField(widget=forms.HiddenInput)
    weight = forms.DecimalField(
        label="Weight %", min_value=Decimal(0), max_value=Decimal(100), max_digits=5, decimal_places=2
    )
    guaranteed = forms.IntegerField(label="Guaranteed GPUs", min_value=0)
    burst_limit = forms.IntegerField(label="Burst limit GPUs", min_value=0)

    def clean(self):
        data = super().clean()
        guaranteed, burst = data.get("guaranteed"), data.get("burst_limit")
        if guaranteed is not None and burst is not None and guaranteed > burst:
            self.add_error("guaranteed", f"Guaranteed ({guaranteed}) must not exceed the burst limit ({burst}).")
        return data


QueueFormSet = forms.formset_factory(QueueRowForm, extra=0)


class ReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=COMMENT_MAX_CHARS,
        widget=forms.TextInput(attrs={"size": 60}),
        error_messages={"required": "A reason is required: every change of share or quota is audited."},
    )


class ReportWeekForm(forms.Form):
    week_of = forms.DateField(
        label="Week of",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"required": "Pick a day of the week to report on.", "invalid": "Enter a date as YYYY-MM-DD."},
    )


class StorableJSONField(forms.JSONField):
    """Django's JSON form field (the admin's, for every JSONField) refusing what the database cannot store:
    a NUL character, or nesting past MAX_JSON_DEPTH (a thousand levels raised RecursionError: a 500)."""

    def to_python(self, value):
        try:
            document = super().to_python(value)
        except RecursionError:
            raise ValidationError(DEPTH_RULE, code="invalid") from None
        problem = json_problem(document)
        if problem is not None:
            path, rule = problem
            raise ValidationError(f"{json_path(path)}: {rule}" if path else rule, code="invalid")
        return document

    def bound_data(self, data, initial):
        try:
            return super().bound_data(data, initial)
        except RecursionError:  # shown back as typed, next to the error
            return InvalidJSONInput(data)


def queue_initial(queues: list[Queue]) -> list[dict]:
    return [
        {"queue": q.pk, "weight": q.weight, "guaranteed": q.guaranteed, "burst_limit": q.burst_limit} for q in queues
    ]
