"""The audit log: every decision the portal records, in one list, filterable and downloadable as CSV.
Reads go through ``selectors.audit_log`` (which rows exist) and ``selectors.access`` (who may read them)."""

from datetime import UTC, datetime, time, timedelta

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from scheduling.filters import NamedChoiceField
from scheduling.limits import NUL, NUL_RULE
from scheduling.models import Team
from scheduling.selectors import access
from scheduling.selectors.audit_log import KINDS, AuditFilter, decisions
from scheduling.tables import AuditLogTable

from .common import paginate

PAGE_SIZE = 50


class AuditLogFilterForm(forms.Form):
    """The log's filters: a team the user may see, who acted, what kind of decision, and a date range (whole
    UTC days, both ends included)."""

    team = NamedChoiceField(queryset=Team.objects.none(), to_field_name="slug", required=False, empty_label="Any team")
    user = forms.CharField(label="User", required=False, max_length=150)
    kind = forms.ChoiceField(label="Decision", required=False, choices=(("", "Any decision"), *KINDS.items()))
    since = forms.DateField(label="From (UTC date)", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(label="To (UTC date)", required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args, teams, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams
        self.fields["team"].label = "Team"

    def clean_user(self) -> str:
        text = self.cleaned_data["user"].strip()
        if NUL in text:
            raise forms.ValidationError(NUL_RULE)
        return text

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["until"] < data["since"]:
            self.add_error("until", "must be on or after From.")
        return data

    def audit_filter(self) -> AuditFilter:
        data = self.cleaned_data
        until = data.get("until")
        return AuditFilter(
            team=data.get("team"), actor=data.get("user", ""), kind=data.get("kind", ""),
            since=_day_start(data.get("since")), until=_day_start(until + timedelta(days=1)) if until else None,
        )


def _day_start(day) -> datetime | None:
    return datetime.combine(day, time.min, tzinfo=UTC) if day else None


@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    teams = access.only_visible(Team.objects.order_by("slug"), request.user, field="pk")
    form = AuditLogFilterForm(request.GET or None, teams=teams)
    valid = form.is_valid() if form.is_bound else True
    rows = decisions(request.user, form.audit_filter() if form.is_bound else AuditFilter()) if valid else []
    table = AuditLogTable(rows, user=request.user)
    paginate(request, table, PAGE_SIZE)
    context = {
        "table": table, "filter": {"form": form}, "no_team": access.in_no_team(request.user),
        "sees_everything": access.sees_everything(request.user),
    }
    return render(request, "scheduling/audit_log.html", context, status=200 if valid else 400)
