"""What-if scenarios: validate the changes, replay the last weeks of recorded work on the fleet as it is
(baseline) and as it would be (scenario), and store both results on a ``WhatIfScenario`` row.

Inputs (JSON, also the API body)::

    {"weeks": 4, "seed": 0,
     "fleet": [{"gpu_model": "H100", "nodes": 4, "gpus_per_node": 8}],      # negative nodes remove
     "weights": {"research": 30},                                           # fair-share % per team
     "policies": [{"orchestrator": "k8s", "weekdays": [1,2,3,4,5], "start": "08:00", "end": "20:00",
                   "floor_gpus": 32}],                                      # replace that pool's rules
     "quota_request": 17}                                                   # an approved, not yet active request

Each bad value raises ``ValidationError({field: message})`` naming the field and the rule. The run itself
(``run_scenario``) is what the Celery task calls; it is idempotent: a worker claims the row with a
conditional UPDATE, so a message delivered twice runs once, and a finished or failed row is left alone.

Orphaned runs (docs/operations.md): ``submit`` queues the run after the commit and fails the row at once
when the broker refuses; a running row heartbeats (``heartbeat_at``) while the simulator advances; a
message redelivered because its worker died takes the run over (``attempts`` counts the starts, at most
``GPUPORTAL_REAPER["max_attempts"]``); ``reap_stale`` re-queues a queued row nobody started and fails a
running row that stopped heartbeating, each with the reason in ``error``.
"""

from __future__ import annotations

import time as clock
from collections import Counter
from collections.abc import Collection
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from functools import partial
from typing import Any

from celery import Celery
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from scheduling.engine.calendar import PolicyRule, check_rules
from scheduling.engine.types import Node as EngineNode
from scheduling.engine.types import TeamSpec
from scheduling.models import Node, Orchestrator, PoolPolicy, Queue, QuotaRequest, Team, WhatIfScenario
from scheduling.selectors import access
from scheduling.selectors.engine_inputs import added_node, simulated_nodes
from scheduling.selectors.fleet import fleet_capacity
from scheduling.selectors.planning import history_trace_jobs
from scheduling.selectors.pool_policies import local_moment, rule_of
from scheduling.simulation.whatif import WhatIfInputs, inputs_as_json, inputs_from_json, run_whatif
from scheduling.wording import plural

from .dispatch import EnqueueFailed, enqueue_after_commit
from .governance import QueueChange
from .policies import check_proposed
from .simulation_runs import fan_out_then

MAX_WEEKS = 12
MAX_NODE_CHANGE = 10_000
DEFAULT_GPUS_PER_NODE = 8
MAX_GPUS_PER_NODE = 16
HALVES = ("baseline", "scenario")
HALF_TASK = "scheduling.tasks.run_whatif_half"
STORE_TASK = "scheduling.tasks.store_whatif"
HEARTBEAT_S = 30.0  # a running row is written at least this often, progress or not


INPUT_FIELDS = ("weeks", "seed", "fleet", "weights", "policies", "quota_request")


# --- validation ----------------------------------------------------------------------------------------


def clean_inputs(raw: dict[str, Any], visible_teams: Collection[int] | None = None) -> dict[str, Any]:
    """Normalised inputs, or ValidationError naming each bad field and the rule it breaks.

    ``visible_teams``: the teams whose quota requests the author may name (None: all); another team's
    request gets the same answer as a missing one, so validation tells nobody what they may not see."""
    if not isinstance(raw, dict):
        raise ValidationError({"inputs": "must be a JSON object"})
    if _has_nul(raw):
        raise ValidationError({"inputs": "text must not contain NUL characters"})
    errors: dict[str, str] = {}
    cleaned: dict[str, Any] = {}
    for field, cleaner in (  # the order of INPUT_FIELDS
        ("weeks", _clean_weeks),
        ("seed", _clean_seed),
        ("fleet", _clean_fleet),
        ("weights", _clean_weights),
        ("policies", _clean_policies),
        ("quota_request", partial(_clean_quota_request, visible_teams=visible_teams)),
    ):
        try:
            cleaned[field] = cleaner(raw.get(field))
        except ValidationError as error:
            errors[field] = " ".join(error.messages)
    unknown = sorted(set(raw) - set(INPUT_FIELDS))  # not ``cleaned``: a field refused above is not unknown
    if unknown:
        errors["inputs"] = f"unknown fields: {', '.join(unknown)}"
    if errors:
        raise ValidationError(errors)
    if not (cleaned["fleet"] or cleaned["weights"] or cleaned["policies"] or cleaned["quota_request"]):
        raise ValidationError({"inputs": "change at least one of fleet, weights, policies or quota_request"})
    return cleaned


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    return isinstance(value, list) and any(_has_nul(v) for v in value)


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValidationError(f"{what} must be a whole number")
    try:
        number = int(value)
    except ValueError:
        raise ValidationError(f"{what} must be a whole number, got {value!r}") from None
    if not low <= number <= high:
        raise ValidationError(f"{what} must be between {low} and {high}, got {number}")
    return number


def _clean_weeks(value: Any) -> int:
    return 4 if value in (None, "") else _int(value, "weeks", 1, MAX_WEEKS)


def _clean_seed(value: Any) -> int:
    return 0 if value in (None, "") else _int(value, "seed", 0, 2**31 - 1)


def _clean_fleet(value: Any) -> list[dict[str, Any]]:
    if not value:
        return []
    if not isinstance(value, list):
        raise ValidationError("must be a list of {gpu_model, nodes, gpus_per_node}")
    existing = Counter(Node.objects.serving().values_list("gpu_model", flat=True))
    cleaned = []
    for change in value:
        model = str((change or {}).get("gpu_model", "")).strip() if isinstance(change, dict) else ""
        if not model:
            raise ValidationError("each change needs a gpu_model")
        nodes = _int(change.get("nodes"), f"nodes of {model}", -MAX_NODE_CHANGE, MAX_NODE_CHANGE)
        if nodes == 0:
            raise ValidationError(f"nodes of {model} must not be 0 (positive adds, negative removes)")
        if nodes < 0 and -nodes > existing[model]:
            raise ValidationError(f"cannot remove {-nodes} {model} nodes: the fleet has {existing[model]}")
        per_node = change.get("gpus_per_node")
        per_node = None if per_node in (None, "") else _int(per_node, "gpus_per_node", 1, MAX_GPUS_PER_NODE)
        cleaned.append({"gpu_model": model, "nodes": nodes, "gpus_per_node": per_node})
    return cleaned


def _clean_weights(value: Any) -> dict[str, str]:
    if not value:
        return {}
    if not isinstance(value, dict):
        raise ValidationError("must map team slugs to a weight in %")
    teams = {t.slug: t for t in Team.objects.filter(slug__in=list(value))}
    queues = {q.team_id: q for q in Queue.objects.filter(gpu_model="", team__in=teams.values())}
    changes, cleaned = [], {}
    for slug, weight in value.items():
        if slug not in teams:
            raise ValidationError(f"no team {slug!r}")
        try:
            percent = Decimal(str(weight))
        except InvalidOperation:
            raise ValidationError(f"weight of {slug} must be a number, got {weight!r}") from None
        if not percent.is_finite() or not Decimal(0) <= percent <= Decimal(100):  # comparing NaN raises
            raise ValidationError(f"weight of {slug} must be between 0 and 100 %, got {percent}")
        queue = queues.get(teams[slug].pk)
        changes.append(
            QueueChange(teams[slug], "", percent, queue.guaranteed if queue else 0, queue.burst_limit if queue else 0)
        )
        cleaned[slug] = str(percent)
    problems = check_proposed(changes)
    if problems:
        raise ValidationError("; ".join(f"{m}" for messages in problems.values() for m in messages))
    return cleaned


def _clean_policies(value: Any) -> list[dict[str, Any]]:
    if not value:
        return []
    if not isinstance(value, list):
        raise ValidationError("must be a list of {orchestrator, weekdays, start, end, floor_gpus}")
    names = set(Orchestrator.objects.filter(kind__in=Orchestrator.SCHEDULER_KINDS).values_list("name", flat=True))
    cleaned = []
    for rule in value:
        named = rule.get("orchestrator") if isinstance(rule, dict) else None
        if not isinstance(named, str) or named not in names:  # a list or object is not a name (nor hashable)
            raise ValidationError(f"orchestrator must be one of {', '.join(sorted(names)) or '(none registered)'}")
        days = rule.get("weekdays") or []
        if not isinstance(days, list) or not days:
            raise ValidationError("weekdays must be a non-empty list of ISO weekdays 1 (Monday) to 7 (Sunday)")
        for day in days:
            _int(day, "weekdays", 1, 7)
        cleaned.append(
            {
                "orchestrator": rule["orchestrator"],
                "name": str(rule.get("name") or "what-if rule")[:120],
                "weekdays": sorted({int(d) for d in days}),
                "start": _clock(rule.get("start"), "start"),
                "end": _clock(rule.get("end"), "end"),
                "floor_gpus": _int(rule.get("floor_gpus", 0), "floor_gpus", 0, 1_000_000),
            }
        )
    problems = check_rules([_rule(r) for r in cleaned], fleet_capacity())
    if problems:
        raise ValidationError("; ".join(f"{p.field}: {p.message}" for p in problems))
    return cleaned


DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def describe_inputs(inputs: dict[str, Any]) -> list[str]:
    """A scenario's changes as sentences for its page (it showed the stored dict, Python's repr and all)."""
    lines = [f"Replays {plural(inputs.get('weeks') or 0, 'week')} of history (random seed {inputs.get('seed', 0)})."]
    for change in inputs.get("fleet") or ():
        verb = "Adds" if change["nodes"] > 0 else "Removes"
        per_node = f" of {plural(change['gpus_per_node'], 'GPU')}" if change.get("gpus_per_node") else ""
        lines.append(f"{verb} {plural(abs(change['nodes']), change['gpu_model'] + ' node')}{per_node}.")
    for slug, weight in (inputs.get("weights") or {}).items():
        lines.append(f"Sets {slug}'s weight to {weight} %.")
    for rule in inputs.get("policies") or ():
        days = ", ".join(DAY_NAMES[d - 1] for d in rule["weekdays"] if 1 <= d <= 7) or "every day"
        lines.append(
            f"Adds the pool rule “{rule['name']}” on {rule['orchestrator']}: a floor of "
            f"{plural(rule['floor_gpus'], 'GPU')}, {days} {rule['start']}–{rule['end']}."
        )
    if inputs.get("quota_request"):
        lines.append(f"Grants quota request #{inputs['quota_request']} as approved.")
    return lines


def _clock(value: Any, what: str) -> str:
    try:
        parsed = time.fromisoformat(str(value))
    except ValueError:
        raise ValidationError(f"{what} must be a time of day HH:MM, got {value!r}") from None
    return parsed.strftime("%H:%M")


def _clean_quota_request(value: Any, visible_teams: Collection[int] | None) -> int | None:
    if value in (None, ""):
        return None
    pk = _int(value, "quota_request", 1, 2**31 - 1)
    requests = QuotaRequest.objects.filter(pk=pk)
    request = (requests if visible_teams is None else requests.filter(team_id__in=visible_teams)).first()
    if request is None:
        raise ValidationError(f"no quota request #{pk}")
    if request.state != QuotaRequest.State.APPROVED:
        raise ValidationError(f"quota request #{pk} is {request.state}; only an approved, not yet active one applies")
    return pk


def _rule(rule: dict[str, Any]) -> PolicyRule:
    start, end = time.fromisoformat(rule["start"]), time.fromisoformat(rule["end"])
    return PolicyRule(
        rule["name"],
        rule["orchestrator"],
        frozenset(rule["weekdays"]),
        start.hour * 60 + start.minute,
        end.hour * 60 + end.minute,
        rule["floor_gpus"],
    )


# --- who may run and read ------------------------------------------------------------------------------


def can_run(user) -> bool:
    """Admins, and leads of any team (for a team they lead)."""
    return bool(user.has_perm("scheduling.run_whatif"))


def submit(*, name: str, raw_inputs: dict[str, Any], by, team: Team | None = None, enqueue=None) -> WhatIfScenario:
    """Validate and store a scenario; ``enqueue(pk)`` (the Celery task) runs after the commit. When the
    broker refuses it the row is failed with the reason and ``EnqueueFailed`` is raised (the view's 503)."""
    if not can_run(by):
        raise ValidationError({"team": "only portal admins and team leads run what-if scenarios"})
    if not access.sees_everything(by) and (team is None or team.pk not in access.lead_team_ids(by)):
        raise ValidationError({"team": "choose a team you lead: the result is shared with that team"})
    if not name.strip():
        raise ValidationError({"name": "give the scenario a name"})
    inputs = clean_inputs(raw_inputs, access.team_ids_visible_to(by))
    with transaction.atomic():
        scenario = WhatIfScenario.objects.create(
            name=name.strip()[:120], created_by=by, team=team, inputs=inputs, heartbeat_at=timezone.now()
        )
        if enqueue is not None:
            _enqueue_or_fail(scenario.pk, enqueue)
    return scenario


# --- building the two runs -----------------------------------------------------------------------------


def current_nodes() -> list[EngineNode]:
    """The fleet as the simulator should see it: every node that is not down, empty (``simulated_nodes``)."""
    return simulated_nodes()


def changed_nodes(nodes: list[EngineNode], changes: list[dict[str, Any]]) -> list[EngineNode]:
    result = list(nodes)
    for change in changes:
        model, count = change["gpu_model"], change["nodes"]
        same = [n for n in result if n.gpu_model == model]
        if count < 0:
            gone = {n.name for n in same[count:]}
            result = [n for n in result if n.name not in gone]
            continue
        template = same[-1] if same else added_node(model, DEFAULT_GPUS_PER_NODE)
        per_node = change["gpus_per_node"] or template.gpu_total
        for i in range(count):
            name = f"whatif-{model}-{i:04d}"
            result.append(
                replace(
                    template,
                    name=name,
                    gpu_total=per_node,
                    nvlink_domain=name,
                    leaf_switch=f"whatif-{model}-leaf{i // 32}",
                )
            )
    return result


def current_teams() -> list[TeamSpec]:
    tree = Team.objects.tree()
    queues = {q.team_id: q for q in Queue.objects.filter(gpu_model="")}
    return [
        TeamSpec(
            name=t.slug,
            parent=tree.parent_slug(t.pk),
            weight=float(queues[t.pk].weight) if t.pk in queues else 0.0,
            guaranteed=queues[t.pk].guaranteed if t.pk in queues else 0,
            burst_limit=queues[t.pk].burst_limit if t.pk in queues else None,
        )
        for t in tree.teams.values()
    ]


def changed_teams(teams: list[TeamSpec], weights: dict[str, str], quota_request: int | None) -> list[TeamSpec]:
    grant = QuotaRequest.objects.filter(pk=quota_request).select_related("team").first() if quota_request else None
    result = []
    for spec in teams:
        if spec.name in weights:
            spec = replace(spec, weight=float(weights[spec.name]))
        if grant is not None and spec.name == grant.team.slug:
            guaranteed = spec.guaranteed + grant.gpus
            burst = None if spec.burst_limit is None else max(spec.burst_limit, guaranteed)
            spec = replace(spec, guaranteed=guaranteed, burst_limit=burst)
        result.append(spec)
    return result


def current_rules() -> list[PolicyRule]:
    """Enabled pool policies with orchestrators named by kind, as the recorded jobs name them."""
    policies = PoolPolicy.objects.filter(enabled=True).select_related("orchestrator")
    return [rule_of(p, p.orchestrator.kind) for p in policies]


def changed_rules(rules: list[PolicyRule], changes: list[dict[str, Any]]) -> list[PolicyRule]:
    if not changes:
        return rules
    kinds = dict(Orchestrator.objects.values_list("name", "kind"))
    replaced = {kinds[c["orchestrator"]] for c in changes}
    new = [replace(_rule(c), orchestrator=kinds[c["orchestrator"]]) for c in changes]
    return [r for r in rules if r.orchestrator not in replaced] + new


def minute_of_week(moment: datetime) -> int:
    weekday, minute = local_moment(moment)
    return (weekday - 1) * 1440 + minute


def build_runs(inputs: dict[str, Any], until: datetime) -> tuple[WhatIfInputs, WhatIfInputs, dict[str, Any]]:
    """The baseline and the scenario on the same recorded jobs, and what the history held."""
    history = history_trace_jobs(until, inputs["weeks"])
    if not history.jobs:
        raise ValueError(
            f"no recorded work in the {inputs['weeks']} weeks before {until:%Y-%m-%d %H:%M}: nothing to replay"
        )
    nodes, teams, rules = current_nodes(), current_teams(), current_rules()
    common = dict(
        jobs=history.jobs,
        epoch_minute_of_week=minute_of_week(history.epoch),
        seed=inputs["seed"],
    )
    baseline = WhatIfInputs(nodes=tuple(nodes), teams=tuple(teams), rules=tuple(rules), **common)
    scenario = WhatIfInputs(
        nodes=tuple(changed_nodes(nodes, inputs["fleet"])),
        teams=tuple(changed_teams(teams, inputs["weights"], inputs["quota_request"])),
        rules=tuple(changed_rules(rules, inputs["policies"])),
        **common,
    )
    facts = {
        "since": history.epoch.isoformat(),
        "until": history.until.isoformat(),
        "jobs": len(history.jobs),
        "skipped": history.skipped,
    }
    return baseline, scenario, facts


# --- running --------------------------------------------------------------------------------------------


def _progress(pk: int, offset: int):
    """The simulator's progress callback: writes the percentage when it changes, and a heartbeat at least
    every HEARTBEAT_S, so the reaper can tell a long run from one whose worker is gone."""
    last = [-1, clock.monotonic()]

    def report(done: int, total: int) -> None:
        percent = min(99, offset + (50 * done) // max(total, 1))
        if percent != last[0] or clock.monotonic() - last[1] >= HEARTBEAT_S:
            last[0], last[1] = percent, clock.monotonic()
            WhatIfScenario.objects.filter(pk=pk).update(  # halves in parallel: the bar never moves back
                progress=Greatest(F("progress"), percent), heartbeat_at=timezone.now()
            )

    return report


def max_attempts() -> int:
    return int(settings.GPUPORTAL_REAPER["max_attempts"])


def stalled_after_s() -> float:
    return float(settings.GPUPORTAL_REAPER["stalled_after_s"])


STALL_WARNING_S = 3 * HEARTBEAT_S  # the page says progress stopped after three missed heartbeats


@dataclass(frozen=True)
class Liveness:
    """What a running run's page says of it: when it last made progress, and whether that has stopped."""

    last_progress_at: datetime | None
    silent_s: float
    stalled: bool
    note: str


def liveness(scenario: WhatIfScenario, now: datetime) -> Liveness:
    last = scenario.heartbeat_at or scenario.created_at
    silent = max((now - last).total_seconds(), 0.0)
    unfinished = scenario.status in (WhatIfScenario.Status.QUEUED, WhatIfScenario.Status.RUNNING)
    if not unfinished or silent < STALL_WARNING_S:
        return Liveness(scenario.heartbeat_at, silent, False, "")
    retry_at = last + timedelta(seconds=stalled_after_s())
    what = "started" if scenario.status == WhatIfScenario.Status.QUEUED else "made progress"
    note = (
        f"No worker has {what} on this run since {last:%H:%M:%S} UTC ({silent / 60:.0f} min): its worker or the "
        f"database may be down. The portal queues it again at about {retry_at:%H:%M} UTC if it is still silent."
    )
    return Liveness(scenario.heartbeat_at, silent, True, note)


def _claim(pk: int, take_over: bool) -> bool:
    """Start the run if no live worker has: a queued row, or a running one when this message was redelivered
    because its worker died (``take_over``). Each start counts; past ``max_attempts`` the row is failed
    instead, since a run that keeps killing its worker (out of memory, say) would otherwise loop forever."""
    now = timezone.now()
    # A redelivery comes after the visibility timeout (over an hour); a run the reaper queued again at its stall
    # has by then finished or hit the what-if time limit, so taking a running row over cannot double a live run.
    states = [WhatIfScenario.Status.QUEUED] + ([WhatIfScenario.Status.RUNNING] if take_over else [])
    claimed = WhatIfScenario.objects.filter(pk=pk, status__in=states).update(
        status=WhatIfScenario.Status.RUNNING, started_at=now, heartbeat_at=now, progress=0, attempts=F("attempts") + 1
    )
    if not claimed:
        return False
    attempts, limit = WhatIfScenario.objects.values_list("attempts", flat=True).get(pk=pk), max_attempts()
    if attempts > limit:
        fail_run(
            pk,
            f"Stopped: its worker was lost mid-run {attempts - 1} times; not started again (the run may be "
            "too large for a worker).",
        )
        return False
    if attempts > 1:
        WhatIfScenario.objects.filter(pk=pk).update(
            error=f"Restarted at {now:%Y-%m-%d %H:%M:%S} UTC: its worker was lost mid-run (start {attempts} of {limit})"
        )
    return True


def run_scenario(pk: int, *, take_over: bool = False, app: Celery | None = None) -> WhatIfScenario | None:
    """Run both replays and store the results (None if the row is gone). Only a claimed row runs: a done,
    failed or live running row is returned as is (``take_over``: see ``_claim``).

    The baseline and the scenario are independent: with a result backend they run as two tasks in parallel
    and a chord stores them (the row is returned still running); without one, here, one after the other.
    Either way ``store_results`` writes the same JSON, and a failed half fails the row with nothing stored."""
    scenario = WhatIfScenario.objects.filter(pk=pk).first()
    if scenario is None or not _claim(pk, take_over):
        return scenario if scenario is None else WhatIfScenario.objects.get(pk=pk)
    started = clock.process_time()
    try:
        baseline, changed, facts = build_runs(scenario.inputs, scenario.created_at)
    except (ValueError, ValidationError) as error:
        return _failed(pk, str(error))
    except Exception as error:  # a bug must not leave the row "running" forever; the worker still logs it
        _failed(pk, f"internal error: {type(error).__name__}: {error}")
        raise
    halves = [
        {"scenario": pk, "half": half, "inputs": inputs_as_json(inputs)}
        for half, inputs in zip(HALVES, (baseline, changed), strict=True)
    ]
    then = (STORE_TASK, store_results, [pk, facts, clock.process_time() - started])
    with suppress(HalfFailed):  # in-process: run_half has failed the row with the reason
        fan_out_then(HALF_TASK, halves, run_half, then, app=app)
    return WhatIfScenario.objects.get(pk=pk)


class HalfFailed(Exception):
    """A half of the run failed; the row is failed with the reason already."""


def run_half(message: dict[str, Any]) -> dict[str, Any]:
    """One replay (``half``: baseline or scenario) of a claimed run: its figures and the CPU it took. Its
    progress goes to the row (baseline 0-50 %, scenario 50-100 %). On failure the row is failed with the
    reason and ``HalfFailed`` is raised (a bug: the row says so and the exception propagates, to be logged)."""
    pk, half = int(message["scenario"]), str(message["half"])
    started = clock.process_time()
    try:
        figures = run_whatif(inputs_from_json(message["inputs"]), _progress(pk, 50 * HALVES.index(half)))
    except ValueError as error:
        fail_run(pk, f"the {half}: {error}")
        raise HalfFailed(str(error)) from error
    except Exception as error:
        fail_run(pk, f"internal error: {type(error).__name__}: {error} (in the {half})")
        raise
    return {"half": half, "figures": figures, "cpu_time_s": clock.process_time() - started}


def store_results(answers: list[dict[str, Any]], pk: int, facts: dict[str, Any], build_cpu_s: float) -> bool:
    """Store both halves at once on a row still running (False: it was failed or finished meanwhile)."""
    by_half = {answer["half"]: answer for answer in answers}
    results = {"history": facts, **{half: by_half[half]["figures"] for half in HALVES}}
    results["cpu_time_s"] = round(build_cpu_s + sum(answer["cpu_time_s"] for answer in answers), 3)
    return bool(
        WhatIfScenario.objects.filter(pk=pk, status=WhatIfScenario.Status.RUNNING).update(
            status=WhatIfScenario.Status.DONE, progress=100, results=results, finished_at=timezone.now(), error=""
        )
    )


def _failed(pk: int, message: str) -> WhatIfScenario:
    fail_run(pk, message)
    return WhatIfScenario.objects.get(pk=pk)


def fail_run(pk: int, reason: str, *, replace_error: bool = False) -> bool:
    """Mark an unfinished run failed with the reason shown on its page and in the API (False: it had finished).
    ``replace_error``: a failed run's reason is replaced too (the caller knows better why it stopped)."""
    unfinished = [WhatIfScenario.Status.QUEUED, WhatIfScenario.Status.RUNNING]
    unfinished += [WhatIfScenario.Status.FAILED] if replace_error else []
    return bool(
        WhatIfScenario.objects.filter(pk=pk, status__in=unfinished).update(
            status=WhatIfScenario.Status.FAILED, error=reason[:2000], finished_at=timezone.now()
        )
    )


# --- orphaned runs (the reaper) ------------------------------------------------------------------------


def _silent_since(cutoff: datetime) -> Q:
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff)


def reap_stale(now: datetime, *, enqueue, limits: dict[str, float]) -> dict[str, int]:
    """Re-queue queued runs no worker started within ``queued_after_s`` (their message was lost), failing
    them once they have been queued ``max_attempts`` times; queue again running runs with no progress for
    ``stalled_after_s`` (their worker or database was lost; each start counts against ``max_attempts``); fail
    running runs silent for ``running_after_s`` (past any redelivery of their message)."""
    counts = {"requeued": 0, "failed": 0}
    queued_cutoff = now - timedelta(seconds=limits["queued_after_s"])
    stale = WhatIfScenario.objects.filter(_silent_since(queued_cutoff), status=WhatIfScenario.Status.QUEUED)
    for pk, requeues in stale.values_list("pk", "requeues"):
        counts["requeued" if _requeue(pk, requeues, now, enqueue) else "failed"] += 1
    if "stalled_after_s" in limits:  # issue 36: act on the last progress, not on the visibility timeout
        stalled_cutoff = now - timedelta(seconds=limits["stalled_after_s"])
        stalled = WhatIfScenario.objects.filter(_silent_since(stalled_cutoff), status=WhatIfScenario.Status.RUNNING)
        for pk, heartbeat in stalled.values_list("pk", "heartbeat_at"):
            counts["requeued"] += int(_requeue_stalled(pk, heartbeat, stalled_cutoff, now, enqueue))
    running_cutoff = now - timedelta(seconds=limits["running_after_s"])
    silent = WhatIfScenario.objects.filter(_silent_since(running_cutoff), status=WhatIfScenario.Status.RUNNING)
    for pk, heartbeat in silent.values_list("pk", "heartbeat_at"):
        since = f"{heartbeat:%Y-%m-%d %H:%M:%S} UTC" if heartbeat else "it started"
        reason = (
            f"Stopped without finishing: no progress since {since} (its worker or its database connection was "
            "lost mid-run, and its message was not delivered again). Submit it again."
        )
        counts["failed"] += fail_run(pk, reason)
    return counts


def _requeue_stalled(pk: int, heartbeat: datetime | None, cutoff: datetime, now: datetime, enqueue) -> bool:
    """A running run that stopped making progress goes back to the queue; its next start counts against
    ``max_attempts`` (``_claim``), so a run that keeps killing its worker still ends failed."""
    since = f"{heartbeat:%Y-%m-%d %H:%M:%S} UTC" if heartbeat else "it started"
    note = f"Queued again at {now:%Y-%m-%d %H:%M:%S} UTC: no progress since {since} (its worker or database was lost)"
    silent = WhatIfScenario.objects.filter(_silent_since(cutoff), pk=pk, status=WhatIfScenario.Status.RUNNING)
    updated = silent.update(status=WhatIfScenario.Status.QUEUED, heartbeat_at=now, error=note)
    if updated:
        try:
            _enqueue_or_fail(pk, enqueue)
        except EnqueueFailed:
            return False
    return bool(updated)


def _requeue(pk: int, requeues: int, now: datetime, enqueue) -> bool:
    """Queue the run again (True), or fail it when it has been queued max_attempts times already (False)."""
    limit = max_attempts()
    if requeues + 1 >= limit:
        fail_run(pk, f"Never started: queued {requeues + 1} times and no worker took it. Is a Celery worker running?")
        return False
    note = f"Queued again at {now:%Y-%m-%d %H:%M:%S} UTC: no worker had started it (queued {requeues + 2} of {limit})"
    updated = WhatIfScenario.objects.filter(pk=pk, status=WhatIfScenario.Status.QUEUED).update(
        heartbeat_at=now, requeues=F("requeues") + 1, error=note
    )
    if updated:
        try:
            _enqueue_or_fail(pk, enqueue)
        except EnqueueFailed:
            return False
    return bool(updated)


def _enqueue_or_fail(pk: int, enqueue) -> None:
    enqueue_after_commit(lambda: enqueue(pk), lambda reason: fail_run(pk, f"The run {reason}"))


def comparison(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Rows of (figure, baseline, scenario) for the side-by-side table, formatted for reading."""
    base, new = results.get("baseline", {}), results.get("scenario", {})

    def pick(figures: dict[str, Any], path: tuple[str, ...]) -> Any:
        for key in path:
            figures = figures.get(key) if isinstance(figures, dict) else None
        return figures

    def shown(value: Any, unit: str) -> str:
        if value is None:
            return "—"
        if unit == "%":
            return f"{100 * value:.1f} %"
        return f"{value:.2f}" if unit == "h" or isinstance(value, float) else str(value)

    rows = [
        ("capacity (GPUs)", ("capacity_gpus",), ""),
        ("utilisation (GPU-hours asked / capacity)", ("utilisation",), "%"),
        ("allocation (GPU-hours held / capacity)", ("allocation",), "%"),
        ("wait p50 (h)", ("wait_hours", "all", "p50"), "h"),
        ("wait p95 (h)", ("wait_hours", "all", "p95"), "h"),
        ("wait p99 (h)", ("wait_hours", "all", "p99"), "h"),
        ("jobs never started", ("jobs", "queued_at_end"), ""),
        ("jobs rejected (never fit)", ("jobs", "rejected"), ""),
        ("preemptions", ("preemptions",), ""),
        ("Jain fairness", ("jain_fairness",), ""),
    ]
    return [(label, shown(pick(base, path), unit), shown(pick(new, path), unit)) for label, path, unit in rows]


def team_comparison(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per team: jobs, p50/p95 wait (h) and jobs never started, baseline vs scenario."""
    base = results.get("baseline", {}).get("waits_by_team", {})
    new = results.get("scenario", {}).get("waits_by_team", {})
    return [
        {"team": team, "baseline": base.get(team, {}), "scenario": new.get(team, {})}
        for team in sorted(set(base) | set(new))
    ]


def floor_comparison(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per orchestrator with a floor: hours under a floor and hours breached, baseline vs scenario."""
    base = results.get("baseline", {}).get("floor_breaches", {})
    new = results.get("scenario", {}).get("floor_breaches", {})
    return [
        {"orchestrator": name, "baseline": base.get(name, {}), "scenario": new.get(name, {})}
        for name in sorted(set(base) | set(new))
    ]
