"""Forms validate shape (types, ranges, required fields); the services keep the business rules."""

import re
from decimal import Decimal

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput
from django.utils import timezone

from scheduling.limits import COMMENT_MAX_CHARS, DEPTH_RULE, JUSTIFICATION_MAX_CHARS, json_path, json_problem
from scheduling.models import Orchestrator, PoolPolicy, Queue, QuotaRequest, Team
from scheduling.models.quota import period_errors
from scheduling.selectors import access
from scheduling.services import whatif

DATETIME_INPUT = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # ISO numbering: Monday is 1
WEEKDAY_CHOICES = [(str(d), name) for d, name in enumerate(WEEKDAYS, 1)]
FIELD_OF = {"fleet": "fleet_nodes", "weights": "weight_value", "policies": "policy_floor"}  # service key -> field


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


class AmendRequestForm(forms.Form):
    """The requester's correction of a submitted request: the shape of the fields; the service keeps the rules."""

    gpus = forms.IntegerField(
        label="GPUs", min_value=1, max_value=100_000, error_messages={"min_value": "GPUs must be at least 1."}
    )
    starts_at = forms.DateTimeField(label="Start (UTC)", widget=DATETIME_INPUT)
    ends_at = forms.DateTimeField(label="End (UTC)", widget=DATETIME_INPUT)
    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=JUSTIFICATION_MAX_CHARS)
    reason = forms.CharField(
        label="Why amend",
        max_length=COMMENT_MAX_CHARS,
        error_messages={"required": "Say why you amend it: the deciders see the reason with the change."},
    )

    @classmethod
    def for_request(cls, request: QuotaRequest, data=None) -> "AmendRequestForm":
        fields = ("gpus", "starts_at", "ends_at", "justification")
        return cls(data, initial={name: getattr(request, name) for name in fields}, prefix="amend")

    def _kept_if_same_minute(self, name: str):
        """The inputs show minutes: a date sent back unchanged keeps its seconds, so it does not read as amended."""
        typed, before = self.cleaned_data.get(name), self.initial.get(name)
        if typed and before and typed == before.replace(second=0, microsecond=0):
            return before
        return typed

    def clean_starts_at(self):
        return self._kept_if_same_minute("starts_at")

    def clean_ends_at(self):
        return self._kept_if_same_minute("ends_at")


class ExtendGrantForm(forms.Form):
    """The requester asks to keep a grant's GPUs longer: a new end and why (a new request the deciders see)."""

    ends_at = forms.DateTimeField(label="New end (UTC)", widget=DATETIME_INPUT)
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=JUSTIFICATION_MAX_CHARS,
        error_messages={"required": "A justification is required: say why the GPUs are needed longer."},
    )


class DecisionForm(forms.Form):
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=COMMENT_MAX_CHARS,
        help_text="Shown to the requester; required to deny.",
    )
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("deny", "Deny"), ("revoke", "Revoke grant")])
    # The request's version on the page: a decision applies only to what the decider saw (issue 36).
    version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=1)

    def clean(self):
        data = super().clean()
        if data.get("decision") in ("deny", "revoke") and not (data.get("comment") or "").strip():
            self.add_error("comment", "Say why: a denial or revocation needs a comment for the requester.")
        return data


class _TypedAsText:
    """A number field whose input is text: a browser's number input turns what is not a number ("6e",
    "abc") into an empty value, so the editor said "required", or dropped the keystroke, instead of
    telling the admin what was wrong with what they typed."""

    kind = "a number"

    def __init__(self, **kwargs):
        kwargs.setdefault("widget", forms.TextInput(attrs={"inputmode": "decimal", "autocomplete": "off", "size": 7}))
        super().__init__(**kwargs)

    def to_python(self, value):
        try:
            return super().to_python(value)
        except ValidationError as error:
            if error.code == "invalid":
                raise ValidationError(f"{value!r} is not {self.kind}.", code="invalid") from None
            raise


class PercentField(_TypedAsText, forms.DecimalField):
    kind = "a percentage (a number such as 40 or 12.5)"


class GpuCountField(_TypedAsText, forms.IntegerField):
    kind = "a whole number of GPUs"


class QueueRowForm(forms.Form):
    """One entitlement row of the fair-share editor; tree-wide rules come from governance.check_tree."""

    queue = forms.IntegerField(widget=forms.HiddenInput)
    # The queue's version when the page was built: a save is refused if the row has moved on (services/versions.py).
    version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=1)
    weight = PercentField(
        label="Weight %", min_value=Decimal(0), max_value=Decimal(100), max_digits=5, decimal_places=2
    )
    guaranteed = GpuCountField(label="Guaranteed GPUs", min_value=0)
    burst_limit = GpuCountField(label="Burst limit GPUs", min_value=0)

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


class PoolPolicyForm(forms.ModelForm):
    """A pool policy rule (admins); the calendar rules themselves are checked by ``pool_policies``."""

    weekdays = forms.TypedMultipleChoiceField(
        choices=list(enumerate(WEEKDAYS, 1)),
        coerce=int,
        widget=forms.CheckboxSelectMultiple,
    )
    reason = forms.CharField(max_length=COMMENT_MAX_CHARS, help_text="Why: stored with the change (audited).")
    # The rule's version the edit was made on: a rule another admin saved since refuses this save.
    seen_version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=1)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.fields["seen_version"].initial = self.instance.version

    class Meta:
        model = PoolPolicy
        fields = [
            "orchestrator",
            "name",
            "weekdays",
            "start_time",
            "end_time",
            "floor_gpus",
            "ceiling_gpus",
            "lendable",
            "precedence",
            "enabled",
        ]
        widgets = {
            "start_time": forms.TimeInput(attrs={"type": "time"}),
            "end_time": forms.TimeInput(attrs={"type": "time"}),
        }


class WhatIfForm(forms.Form):
    """One what-if scenario's inputs; ``whatif.submit`` checks them against the fleet and the policies."""

    name = forms.CharField(max_length=120)
    team = forms.ModelChoiceField(Team.objects.none(), required=False, help_text="Shared with this team's branch.")
    weeks = forms.IntegerField(min_value=1, max_value=whatif.MAX_WEEKS, initial=4, help_text="Weeks of history")
    seed = forms.IntegerField(min_value=0, initial=0)
    fleet_model = forms.CharField(required=False, label="GPU model to add or remove")
    fleet_nodes = forms.IntegerField(required=False, label="Nodes (+ add, − remove)")
    fleet_gpus_per_node = forms.IntegerField(required=False, label="GPUs per added node", min_value=1)
    weight_team = forms.ModelChoiceField(Team.objects.none(), required=False, to_field_name="slug", label="Team weight")
    weight_value = forms.DecimalField(required=False, label="New weight (%)", max_digits=5, decimal_places=2)
    policy_orchestrator = forms.ModelChoiceField(
        Orchestrator.objects.filter(kind__in=Orchestrator.SCHEDULER_KINDS),
        required=False,
        to_field_name="name",
        label="Pool policy for",
        help_text="Replaces that pool's rules in the scenario",
    )
    policy_weekdays = forms.MultipleChoiceField(choices=WEEKDAY_CHOICES, required=False, label="Days")
    policy_start = forms.TimeField(required=False, label="From (HH:MM)")
    policy_end = forms.TimeField(required=False, label="To (HH:MM)")
    policy_floor = forms.IntegerField(required=False, min_value=0, label="Floor GPUs")
    quota_request = forms.ModelChoiceField(
        QuotaRequest.objects.filter(state=QuotaRequest.State.APPROVED).select_related("team"),
        required=False,
        label="Approved request, as if active",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        admin = access.sees_everything(user)
        leads = Team.objects.all() if admin else Team.objects.filter(pk__in=access.lead_team_ids(user))
        self.fields["team"].queryset = leads
        self.fields["team"].required = not admin
        self.fields["weight_team"].queryset = access.only_visible(Team.objects.all(), user, "pk")
        requests = self.fields["quota_request"].queryset
        self.fields["quota_request"].queryset = access.only_visible(requests, user)

    def raw_inputs(self) -> dict:
        data = self.cleaned_data
        raw: dict = {"weeks": data["weeks"], "seed": data["seed"]}
        if data.get("fleet_model") or data.get("fleet_nodes") is not None:
            raw["fleet"] = [
                {
                    "gpu_model": data.get("fleet_model") or "",
                    "nodes": data.get("fleet_nodes"),
                    "gpus_per_node": data.get("fleet_gpus_per_node"),
                }
            ]
        if data.get("weight_team") is not None:
            value = data.get("weight_value")
            raw["weights"] = {data["weight_team"].slug: "" if value is None else str(value)}
        if data.get("policy_orchestrator") is not None:
            raw["policies"] = [
                {
                    "orchestrator": data["policy_orchestrator"].name,
                    "weekdays": [int(d) for d in data.get("policy_weekdays") or []],
                    "start": data["policy_start"].strftime("%H:%M") if data.get("policy_start") else "",
                    "end": data["policy_end"].strftime("%H:%M") if data.get("policy_end") else "",
                    "floor_gpus": data.get("policy_floor") if data.get("policy_floor") is not None else 0,
                }
            ]
        if data.get("quota_request") is not None:
            raw["quota_request"] = data["quota_request"].pk
        return raw

    def clean(self):
        data = super().clean()
        changed = (
            data.get("fleet_model") or data.get("fleet_nodes") is not None,
            data.get("weight_team"),
            data.get("policy_orchestrator"),
            data.get("quota_request"),
        )
        if not any(changed) and not self.errors:  # the service would say it in its API's field names
            raise ValidationError(
                "Change at least one thing: nodes of a GPU model, a team's weight, a pool policy, or an approved "
                "request as if active."
            )
        return data

    def add_service_errors(self, error: ValidationError) -> None:
        for field, messages in error.message_dict.items():
            target = FIELD_OF.get(field, field)
            self.add_error(target if target in self.fields else None, [_in_form_words(m) for m in messages])


# The what-if service checks API bodies and names their keys; the form shows its own labels instead.
FORM_WORDS = {"gpus_per_node": "GPUs per added node", "gpu_model": "GPU model", "floor_gpus": "floor GPUs",
              "quota_request": "approved request", "weekdays": "days"}


def _in_form_words(message: str) -> str:
    return re.sub(r"\b(" + "|".join(FORM_WORDS) + r")\b", lambda m: FORM_WORDS[m.group(1)], message)


def queue_initial(queues: list[Queue]) -> list[dict]:
    return [
        {
            "queue": q.pk,
            "version": q.version,
            "weight": q.weight,
            "guaranteed": q.guaranteed,
            "burst_limit": q.burst_limit,
        }
        for q in queues
    ]
