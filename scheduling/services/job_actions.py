"""Act on my jobs (issue 33 item 14): a person cancels, holds or releases a job they may act on; the worker
sends it through the orchestrator's actuator (``collectors/job_control.py``); the next collection round reads
the job back and confirms it.

Who may act: the job's owner (ingest's ``Workload.user``), a lead of its team or a team above it, a portal admin.
Anyone else is refused before anything is recorded or sent. Every action is a ``JobAction`` row with who and why
(its history is the audit); the owner hears of an action someone else took (inbox, mail, chat).

The action task is named, not imported: tasks sit above services (import-linter's layers)."""

from __future__ import annotations

import logging
from functools import partial

from celery import current_app
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from scheduling.collectors.errors import CollectorError
from scheduling.collectors.job_control import KubernetesJobControl, RayJobControl, SlurmJobControl
from scheduling.collectors.reclaim_actuators import RayJobStop
from scheduling.models import JobAction, Notification, Orchestrator, Workload
from scheduling.rules import is_lead, is_portal_admin

from . import notifications
from .audit import require_reason, stamp_author
from .orchestrators import endpoint_of, kubernetes_api, masked, option

log = logging.getLogger(__name__)
TASK = "scheduling.tasks.act_on_job"
Verb, State = JobAction.Verb, JobAction.State
VERBS_BY_KIND = {
    Orchestrator.Kind.SLURM: (Verb.CANCEL, Verb.HOLD, Verb.RELEASE),
    Orchestrator.Kind.KUBERNETES: (Verb.CANCEL,),  # no hold: see collectors/job_control.py
    Orchestrator.Kind.RAY: (Verb.CANCEL,),
}
WHAT_IS_SENT = {
    (Orchestrator.Kind.SLURM, Verb.CANCEL): "scancel {id}",
    (Orchestrator.Kind.SLURM, Verb.HOLD): "scontrol hold {id}",
    (Orchestrator.Kind.SLURM, Verb.RELEASE): "scontrol release {id}",
    (Orchestrator.Kind.KUBERNETES, Verb.CANCEL): "evict the pods of {id} (the Eviction API: a PodDisruptionBudget "
                                                 "may refuse)",
    (Orchestrator.Kind.RAY, Verb.CANCEL): "stop Ray job {id}, every task, actor and group of it "
                                          "(POST /api/jobs/{id}/stop)",
}


def target_of(workload: Workload) -> str:
    """The id the orchestrator acts on: Ray stops a whole job by its submission id; the others the job itself."""
    return workload.submission_id if workload.orchestrator.kind == Orchestrator.Kind.RAY else workload.external_id


def may_act(user, workload: Workload) -> bool:
    """The owner, a lead of the job's team or above, or a portal admin."""
    if not (user and user.is_authenticated):
        return False
    if is_portal_admin(user) or (workload.user and workload.user == user.get_username()):
        return True
    return workload.team is not None and is_lead(user, workload.team)


def is_held(workload: Workload) -> bool:
    """A pending job waiting on a hold (Slurm's JobHeldUser/JobHeldAdmin as collected)."""
    return workload.state == Workload.State.PENDING and workload.pending_reason.startswith("JobHeld")


def verbs_for(workload: Workload) -> list[str]:
    """What can be done to the job now: cancel while active; hold while pending and not held; release when held.
    None for the demo's simulated jobs (no cluster to send anything to), nor on a disabled orchestrator: the portal
    no longer reads it, so nothing sent could be confirmed, and its open action would block the next for ever."""
    orchestrator = workload.orchestrator
    if orchestrator.is_demo or not orchestrator.enabled or workload.state not in Workload.ACTIVE_STATES:
        return []
    if not target_of(workload):
        return []  # a Ray driver started by hand: the Jobs API cannot stop it
    possible = VERBS_BY_KIND.get(workload.orchestrator.kind, ())
    wanted = [Verb.CANCEL]
    if workload.state == Workload.State.PENDING:
        wanted.append(Verb.RELEASE if is_held(workload) else Verb.HOLD)
    return [verb.value for verb in wanted if verb in possible]


def disabled_message(orchestrator: Orchestrator) -> str:
    return (f"{orchestrator.name} is disabled in the portal (Orchestrators): the portal neither reads it nor acts "
            "on it until an admin enables it again; act on the cluster directly meanwhile.")


def why_disabled(workload: Workload) -> str:
    """Why an active job takes no action because its orchestrator is disabled, or ""."""
    active = workload.state in Workload.ACTIVE_STATES
    return disabled_message(workload.orchestrator) if active and not workload.orchestrator.enabled else ""


def what_is_sent(workload: Workload, verb: str) -> str:
    return WHAT_IS_SENT[(workload.orchestrator.kind, verb)].format(id=target_of(workload))


def open_action(workload: Workload) -> JobAction | None:
    return workload.actions.filter(state__in=JobAction.OPEN_STATES).order_by("-requested_at", "-pk").first()


@transaction.atomic
def request_action(workload_id: int, verb: str, *, by, reason: str) -> JobAction:
    """Record the action and queue it for the worker (after the commit). Refused with nothing recorded or
    sent: PermissionDenied for someone who may not act on the job, ValidationError for a verb the job cannot
    take now, a missing reason, or an action still waiting for the cluster."""
    workload = Workload.objects.select_for_update(of=("self",)).select_related("orchestrator", "team").get(
        pk=workload_id
    )
    if not may_act(by, workload):
        raise PermissionDenied("Only the job's owner, a lead of its team or an admin may act on it.")
    reason = require_reason(reason)
    possible = verbs_for(workload)
    if verb not in possible and (disabled := why_disabled(workload)):
        raise ValidationError({"verb": disabled})
    if verb not in possible:
        can = ", ".join(possible) or "nothing"
        raise ValidationError({"verb": f"{verb!r} is not possible for this {workload.get_state_display().lower()} "
                                       f"job on {workload.orchestrator.kind}; possible now: {can}."})
    waiting = open_action(workload)
    if waiting is not None:
        raise ValidationError({"verb": f"a {waiting.verb} requested by {waiting.requested_by} is still waiting for "
                                       "the cluster; wait for it to be confirmed or to fail."})
    action = JobAction(workload=workload, team=workload.team, verb=verb, requested_by=by, reason=reason,
                       dry_run=bool(option(workload.orchestrator, "job_actions", {}).get("dry_run", False)))
    stamp_author(action, by=by, reason=reason)
    action.save()
    transaction.on_commit(lambda: _publish(action.pk))
    return action


def _publish(action_id: int) -> None:
    try:
        current_app.signature(TASK, args=[action_id]).apply_async()
    except Exception:
        log.warning("could not queue job action %s", action_id, exc_info=True)


def _control(orchestrator: Orchestrator, dry_run: bool):
    if orchestrator.kind == Orchestrator.Kind.SLURM:
        slurm_conf = option(orchestrator, "slurm_conf")
        return SlurmJobControl(dry_run=dry_run, env={"SLURM_CONF": slurm_conf} if slurm_conf else None)
    if orchestrator.kind == Orchestrator.Kind.KUBERNETES:
        return KubernetesJobControl(kubernetes_api(orchestrator), dry_run=dry_run)
    return RayJobControl(RayJobStop(endpoint_of(orchestrator), dry_run=dry_run))


def carry_out(action_id: int, control=None) -> JobAction:
    """Send a requested action to its cluster (the worker's part); a retried message finds it sent and stops."""
    with transaction.atomic():
        action = JobAction.objects.select_for_update(of=("self",)).select_related(
            "workload__orchestrator", "requested_by"
        ).get(pk=action_id)
        if action.state != State.REQUESTED:
            return action
        orchestrator = action.workload.orchestrator
        try:
            if not orchestrator.enabled:  # disabled between the request and the worker
                raise ValueError(f"nothing was sent: {disabled_message(orchestrator)}")
            control = control or _control(orchestrator, action.dry_run)
            result = getattr(control, action.verb)(target_of(action.workload))
        except (CollectorError, ValueError, OSError) as error:
            action.state, action.message = State.FAILED, masked(str(error), orchestrator)[:1000]
        else:
            action.state, action.sent_at = State.SENT, timezone.now()
            action.command, action.message = result.command_or_request[:1000], result.message[:1000]
        stamp_author(action, by=None, reason=f"{action.verb} {action.state}: {action.message}"[:1000])
        action.save()
    if action.state == State.FAILED:
        _tell(action, f"Could not {action.verb} job {action.workload.external_id}: {action.message}")
    return action


def read_back(orchestrator: Orchestrator) -> int:
    """After a scrape is stored: confirm the sent actions whose job now reads as asked (cancelled: no longer
    active; held: pending on a hold; released: no longer held). Returns how many were confirmed."""
    confirmed = 0
    sent = JobAction.objects.filter(state=State.SENT, workload__orchestrator=orchestrator).select_related("workload")
    for action in sent.order_by("pk"):
        seen = _seen_as_asked(action)
        if seen:
            action.state, action.confirmed_at, action.message = State.CONFIRMED, timezone.now(), seen
            stamp_author(action, by=None, reason=f"read back: {seen}"[:1000])
            action.save()
            confirmed += 1
            transaction.on_commit(partial(_tell_confirmed, action))
    return confirmed


def _tell_confirmed(action: JobAction) -> None:
    _tell(action, f"{action.get_verb_display()} of job {action.workload.external_id} confirmed: {action.message}")


def _seen_as_asked(action: JobAction) -> str:
    workload = action.workload
    if action.verb == Verb.CANCEL and workload.state not in Workload.ACTIVE_STATES:
        return f"the cluster no longer runs or queues it ({workload.get_state_display().lower()})"
    if action.verb == Verb.HOLD and is_held(workload):
        return f"pending on {workload.pending_reason}"
    if action.verb == Verb.RELEASE and not is_held(workload):
        waits_on = f", {workload.pending_reason}" if workload.pending_reason else ""
        return f"no longer held ({workload.get_state_display().lower()}{waits_on})"
    return ""


def _tell(action: JobAction, subject: str) -> None:
    """The requester hears of the outcome; the owner too when someone else acted on their job."""
    owner = get_user_model().objects.filter(username=action.workload.user).first() if action.workload.user else None
    people = [p for p in (action.requested_by, owner) if p is not None]
    body = f"Asked by {action.requested_by or 'someone'}: {action.reason}"
    notifications.tell(people, kind=Notification.Kind.JOB, subject=subject, body=body,
                       path=reverse("workload-detail", args=[action.workload_id]), team_id=action.team_id)
