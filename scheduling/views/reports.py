"""Weekly capacity reports: the list with downloads and the subscription form, a report page, downloads.

Who sees what (like Open XDMoD): every signed-in user reads the fleet report; the per-user rows of a
team's top users only show to admins and to the leads of that team (or of a team above it).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from scheduling import tasks
from scheduling.forms import ReportWeekForm
from scheduling.models import ReportSubscription
from scheduling.reports import documents as reports
from scheduling.selectors import access
from scheduling.selectors import report as report_reads
from scheduling.services import report_delivery
from scheduling.tables import CapacityReportTable

from .common import paginate

CONTENT_TYPES = {"html": "text/html; charset=utf-8", "pdf": "application/pdf", "csv": "text/csv; charset=utf-8"}


@login_required
def report_list(request: HttpRequest) -> HttpResponse:
    table = CapacityReportTable(report_reads.stored_reports())
    paginate(request, table, 25)
    context = {
        "table": table,
        "subscription": report_delivery.subscription_of(request.user),
        "formats": ReportSubscription.Format.choices,
        "build_form": ReportWeekForm() if access.sees_everything(request.user) else None,
    }
    return render(request, "scheduling/report_list.html", context)


@login_required
@require_POST
def report_build(request: HttpRequest) -> HttpResponse:
    """An admin builds the report of any finished week (the weekly task builds only the last one)."""
    if not access.sees_everything(request.user):
        raise PermissionDenied("Only portal admins build reports on request; the weekly one is built every Monday.")
    form = ReportWeekForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError(form.errors)
        report, queued = report_delivery.request_build(
            form.cleaned_data["week_of"], enqueue=tasks.build_requested_report.delay
        )
    except ValidationError as error:
        for message in error.messages:
            messages.error(request, f"Week of: {message}")
        return redirect("report-list")
    week = f"{report.period_start:%Y-%m-%d}"
    if queued:
        messages.success(request, f"Building the report of the week of {week}: it is listed here once it is ready.")
    elif report.status == report.Status.GENERATING:
        wait = int(report_delivery.retry_after().total_seconds())
        messages.info(
            request,
            f"The report of the week of {week} is being built since {report.claimed_at:%H:%M} UTC; "
            f"if it is still generating {wait} s after that, ask again to build it anew.",
        )
    else:
        messages.info(request, f"The report of the week of {week} exists already ({report.get_status_display()}).")
    return redirect("report-list")


def _report_or_404(pk: int):
    report = report_reads.stored_report(pk)
    if report is None:
        raise Http404("No such report, or it is still being generated.")
    return report


def download_links(report) -> dict[str, str]:
    return {fmt: reverse("report-download", args=[report.pk, fmt]) for fmt in CONTENT_TYPES}


@login_required
def report_detail(request: HttpRequest, pk: int) -> HttpResponse:
    report = _report_or_404(pk)
    scope = access.report_scope(request.user)
    body = reports.render_body(report.content, scope)
    return render(
        request, "scheduling/report_detail.html", {"report": report, "body": body, "links": download_links(report)}
    )


def rendered(report, fmt: str, scope) -> HttpResponse:
    """One stored report as a downloadable file, with what this reader may see."""
    if fmt == "pdf":
        payload: bytes | str = reports.render_pdf(report.content, scope)
    elif fmt == "csv":
        payload = reports.render_csv(report.content, scope)
    else:
        payload = reports.render_html(report.content, scope)
    response = HttpResponse(payload, content_type=CONTENT_TYPES[fmt])
    if fmt == "html":  # read by django-csp's middleware: the document's own <style>, and no other
        response._csp_update = {"style-src-elem": reports.style_hashes(payload)}
    name = f"capacity-report-{report.period_start:%Y-%m-%d}.{fmt}"
    response["Content-Disposition"] = f'{"inline" if fmt == "html" else "attachment"}; filename="{name}"'
    return response


@login_required
def report_download(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    if fmt not in CONTENT_TYPES:
        raise Http404("Formats: html, pdf, csv.")
    report = _report_or_404(pk)
    return rendered(report, fmt, access.report_scope(request.user))


@login_required
@require_POST
def report_subscription(request: HttpRequest) -> HttpResponse:
    if request.POST.get("action") == "unsubscribe":
        report_delivery.unsubscribe(request.user)
        messages.success(request, "You will no longer get the weekly capacity report by email.")
        return redirect("report-list")
    try:
        report_delivery.subscribe(request.user, request.POST.get("format", ""))
    except ValidationError as error:
        for problem in error.message_dict.get("format", []):
            messages.error(request, problem)
        return redirect("report-list")
    if not request.user.email:
        messages.warning(request, "Subscribed, but your account has no email address: add one to receive it.")
    else:
        messages.success(request, f"Subscribed: the report goes to {request.user.email} every Monday.")
    return redirect("report-list")
