"""The utilisation drill-down (Open XDMoD's): team → its users → a user's jobs → a job, in one window.

The window (a live preset, a pinned one or a free from/to) rides along in every link and breadcrumb; each
level's table downloads as CSV (``paginate``). Who may see whose rows is ``access.usage_users_readable_by``
(the weekly report's rule) for the per-user levels and ``access.workloads_visible_to`` (the API's) for a job.
"""

from urllib.parse import quote

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone

from scheduling import charts
from scheduling.models import JobAction, Team, Workload
from scheduling.selectors import access, drilldown, why_waits
from scheduling.selectors import workloads as workload_reads
from scheduling.services import job_actions
from scheduling.tables import JobInWindowTable, UserUsageTable

from .common import TimeRange, paginate, time_range
from .page_cache import served_while_unchanged

PER_PAGE = 50


def user_url(team: Team, user: str, window: TimeRange) -> str:
    return f"{reverse('usage-user', args=[team.slug, quote(user, safe='')])}?{window.query}"


def job_url(pk: int, team: Team, window: TimeRange) -> str:
    return f"{reverse('workload-detail', args=[pk])}?team={team.slug}&{window.query}"


@login_required
@served_while_unchanged
def team_users(request: HttpRequest, slug: str) -> HttpResponse:
    team = access.team_or_404(request.user, slug)
    window = time_range(request, default="7d")
    readable = access.usage_users_readable_by(request.user, team)
    usage = drilldown.team_users(team, window.since, window.until, readable)
    link = lambda row: user_url(team, row.user, window) if row.named else None  # noqa: E731
    table = UserUsageTable(usage.rows, link=link)
    paginate(request, table, PER_PAGE)
    named = [row for row in usage.rows if row.named]
    context = {
        "team": team,
        "window": window,
        "usage": usage,
        "table": table,
        "all_named": readable is None,
        "chart": charts.user_hours_chart(named, f"{team.name}: GPU-hours by user", [link(row) for row in named]),
    }
    return render(request, "scheduling/usage_team.html", context)


@login_required
@served_while_unchanged
def user_jobs(request: HttpRequest, slug: str, user: str) -> HttpResponse:
    team = access.team_or_404(request.user, slug)
    readable = access.usage_users_readable_by(request.user, team)
    if readable is not None and user not in readable:
        raise Http404("No user of this team matches the given query.")
    window = time_range(request, default="7d")
    jobs = drilldown.jobs_in_window(Team.objects.tree().subtree(team.pk), window.since, window.until, user)
    table = JobInWindowTable(jobs, link=lambda job: job_url(job.pk, team, window))
    paginate(request, table, PER_PAGE)
    context = {
        "team": team,
        "user_name": user,
        "window": window,
        "table": table,
        "gpu_hours": sum(job.gpu_hours for job in jobs),
        "ran": sum(1 for job in jobs if job.ran_in_window),
        "count": len(jobs),
    }
    return render(request, "scheduling/usage_user.html", context)


@login_required
@served_while_unchanged
def workload_detail(request: HttpRequest, pk: int) -> HttpResponse:
    workloads = access.workloads_visible_to(request.user).select_related("orchestrator", "team")
    workload = get_object_or_404(workloads, pk=pk)
    row = why_waits.with_advice(workload_reads.workload_rows(workloads.filter(pk=pk)), timezone.now())[0]
    window = time_range(request, default="7d")
    context = {
        "w": workload,
        "row": row,
        "wait_s": (workload.started_at - workload.submitted_at).total_seconds() if workload.started_at else None,
        "placement": drilldown.placement(workload),
        "crumbs": _job_crumbs(request, workload, window),
        **job_actions_context(request.user, workload),
    }
    return render(request, "scheduling/workload_detail.html", context)


def _job_crumbs(request: HttpRequest, workload, window: TimeRange) -> list[tuple[str, str | None]]:
    """Utilisation › team › user, each linked when the reader may open it, in the window they came with."""
    crumbs: list[tuple[str, str | None]] = [("Utilisation", f"{reverse('utilisation')}?{window.query}")]
    team = _team_above(request.GET.get("team", ""), workload) or workload.team
    if team is None or not request.user.has_perm("scheduling.see_team", team):
        return crumbs
    crumbs.append((team.name, f"{reverse('usage-team', args=[team.slug])}?{window.query}"))
    readable = access.usage_users_readable_by(request.user, team)
    user = workload.user or drilldown.UNKNOWN_USER
    crumbs.append((user, user_url(team, user, window) if readable is None or user in readable else None))
    return crumbs


def _team_above(slug: str, workload) -> Team | None:
    """The team the reader drilled down from (``?team=``), when the job belongs to it or a team below it."""
    team = Team.objects.filter(slug=slug).first() if slug else None
    if team is None or workload.team_id not in Team.objects.tree().subtree(team.pk):
        return None
    return team


def job_actions_context(user, workload) -> dict:
    """What the job page shows of item 14: the verbs this user may use now, and the actions taken so far."""
    can_act = job_actions.may_act(user, workload)
    return {
        "can_act": can_act,
        "verbs": job_actions.verbs_for(workload) if can_act else [],
        # The demo's simulated clusters take no actions: say so rather than "nothing can be done".
        "simulated": workload.state in Workload.ACTIVE_STATES and workload.orchestrator.is_demo,
        "disabled": job_actions.why_disabled(workload),
        "waiting": job_actions.open_action(workload),
        "actions": list(workload.actions.select_related("requested_by").order_by("-requested_at", "-pk")[:10]),
    }


@login_required
def workload_act(request: HttpRequest, pk: int, verb: str) -> HttpResponse:
    """The confirmation step of a cancel, hold or release (GET shows what will be sent; POST, with a reason,
    records it). 404 for a job the user cannot see, 403 for one they may not act on: nothing is sent."""
    workload = get_object_or_404(
        access.workloads_visible_to(request.user).select_related("orchestrator", "team"), pk=pk
    )
    if not job_actions.may_act(request.user, workload):
        raise PermissionDenied("Only the job's owner, a lead of its team or an admin may act on it.")
    if verb not in JobAction.Verb.values:
        raise Http404("No such action.")
    if request.method == "POST":
        try:
            job_actions.request_action(workload.pk, verb, by=request.user, reason=request.POST.get("reason", ""))
        except ValidationError as error:
            for field, problems in error.message_dict.items():
                messages.error(request, f"{field}: {' '.join(problems)}")
        else:
            messages.success(request, f"{JobAction.Verb(verb).label} requested: the page says so until the "
                                      "cluster's next listing shows it done.")
            return redirect("workload-detail", pk=workload.pk)
    possible = verb in job_actions.verbs_for(workload)
    context = {
        "w": workload,
        "verb": verb,
        "verb_label": JobAction.Verb(verb).label,
        "possible": possible,
        "sends": job_actions.what_is_sent(workload, verb) if possible else "",
        "waiting": job_actions.open_action(workload),
        "disabled": job_actions.why_disabled(workload),
    }
    return render(request, "scheduling/workload_act.html", context)
