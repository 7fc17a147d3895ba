"""Each rule has one home (issue 17): the unschedulable states are ``Node.UNSCHEDULABLE`` and every reader of
the fleet obeys it; orchestrators' state words are parsed only in ``collectors/``; ``Orchestrator.options``
and the credentials reference are read only by ``services/orchestrators.py``.

The source scans (ast, not grep: comments and docstrings do not count) catch a copy on a path no test
runs; the behaviour checks run the readers and look at what they do.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from scheduling.collectors.snapshot import NodeCondition, ObservedNode
from scheduling.models import Node, Orchestrator
from scheduling.selectors.engine_inputs import engine_node, engine_nodes, node_rows
from scheduling.selectors.fleet import fleet_capacity
from scheduling.selectors.rebalance import nodes_now
from scheduling.services import busy, collection, demo, ingest, orchestrators, rebalance

PACKAGE = Path(__file__).resolve().parents[2] / "scheduling"
ORCHESTRATOR_WORDS = {"DRAIN", "NOT_RESPONDING", "NOTREADY", "ALIVE", "DEAD", "PLANNED"}
UNSCHEDULABLE_WORDS = {"draining", "drained", "down", "DRAINING", "DRAINED", "DOWN"}


def _sources(*skip: str):
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(("migrations/", *skip)):
            continue
        yield relative, ast.parse(path.read_text(encoding="utf-8"))


def _word(node: ast.AST) -> str | None:
    """``"drained"`` for the literal, ``DRAINED`` for ``Node.State.DRAINED`` (any ``...State.X``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "State":
        return node.attr
    return None


def _collections(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            yield node, node.elts
        elif isinstance(node, ast.Dict):
            yield node, [k for k in node.keys if k is not None]


# --------------------------------------------------------------------------------- schedulable nodes


def test_the_unschedulable_states_are_written_down_once_on_the_model():
    """No set, tuple, list or dict of two or more of draining/drained/down outside models/ (collectors/ speak
    the orchestrators' words, not the stored states)."""
    copies = []
    for relative, tree in _sources("models/", "collectors/"):
        for node, elements in _collections(tree):
            words = {w.lower() for w in map(_word, elements) if w in UNSCHEDULABLE_WORDS}
            if len(words) >= 2:
                copies.append(f"{relative}:{node.lineno} {sorted(words)}")
    assert not copies, "a copy of Node.UNSCHEDULABLE: " + "; ".join(copies)
    assert {Node.State.DRAINING, Node.State.DRAINED, Node.State.DOWN} == Node.UNSCHEDULABLE


def test_only_the_collectors_parse_orchestrator_state_words():
    found = []
    for relative, tree in _sources("collectors/"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in ORCHESTRATOR_WORDS:
                found.append(f"{relative}:{node.lineno} {node.value!r}")
    assert not found, "orchestrator state words parsed outside collectors/: " + "; ".join(found)


@pytest.mark.django_db
def test_every_reader_of_the_fleet_obeys_the_one_set(orchestrator):
    """One node per stored state: the queryset, the engine translation (page, demo and rebalancer paths) and
    the capacity agree with ``Node.UNSCHEDULABLE``."""
    for i, state in enumerate(Node.State):
        Node.objects.create(orchestrator=orchestrator, name=f"n{i}", gpu_model="H100", gpu_total=8, state=state)
    takes_work = {n.name for n in Node.objects.all() if n.state not in Node.UNSCHEDULABLE}
    assert set(Node.objects.schedulable().values_list("name", flat=True)) == takes_work
    assert {n.name for n in map(engine_node, node_rows()) if n.schedulable} == takes_work
    assert {n.name for n in engine_nodes() if n.schedulable} == takes_work
    assert {n.name for n in nodes_now([orchestrator]) if n.schedulable} == takes_work
    assert fleet_capacity() == 8 * (len(Node.State) - 1)  # every node but the down one
    assert Node.State.DOWN not in Node.objects.serving().values_list("state", flat=True)


@pytest.mark.parametrize("condition", list(NodeCondition))
def test_ingest_stores_a_node_unschedulable_exactly_when_its_collector_says_it_takes_no_work(condition):
    for allocated in (0, 4):
        observed = ObservedNode("n", "o", gpu_total=8, gpu_allocated=allocated, condition=condition)
        stored = ingest._node_state(observed)
        assert (stored in Node.UNSCHEDULABLE) is (condition is not NodeCondition.READY), (condition, allocated)


# ------------------------------------------------------------------------- options and credentials


ALLOWED_READERS = {"services/orchestrators.py"}
# cluster-autoscaler's protobuf request has its own ``options`` (node groups); import-linter keeps that package
# from importing Django, so it cannot reach an Orchestrator row.
OTHER_OPTIONS = ("expander_protocol/",)


def test_no_module_but_services_orchestrators_reads_options_or_the_credentials_reference():
    """Attribute reads of ``.options``/``.credentials_ref`` anywhere in scheduling/ (the model validating its
    own fields in ``clean`` aside; the API serializer shows and schema-checks the stored document as DRF
    fields, by name, which is representing the row rather than reading what it means)."""
    readers = []
    for relative, tree in _sources("models/"):
        if relative in ALLOWED_READERS or relative.startswith(OTHER_OPTIONS):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("options", "credentials_ref"):
                readers.append(f"{relative}:{node.lineno} .{node.attr}")
    assert not readers, "; ".join(readers)


class _Spy:
    """A data descriptor standing in for a model field: records the module of each code that reads it."""

    def __init__(self, name: str, readers: list[str]) -> None:
        self.name, self.readers = name, readers

    def __get__(self, instance, owner):
        if instance is None:
            return self
        self.readers.append(inspect.currentframe().f_back.f_globals.get("__name__", "?"))
        return instance.__dict__[self.name]

    def __set__(self, instance, value) -> None:
        instance.__dict__[self.name] = value


@pytest.fixture
def readers(monkeypatch):
    found: list[str] = []
    for name in ("options", "credentials_ref"):
        monkeypatch.setattr(Orchestrator, name, _Spy(name, found))
    return found


@pytest.mark.django_db
def test_collecting_rebalancing_and_metrics_read_options_only_through_services_orchestrators(readers, cast):
    demo.create_demo_federation()
    slurm, _ = collection.register_orchestrator(
        kind="slurm",
        name="slurm-real",
        url="http://127.0.0.1:9",
        options={
            "user": "portal",
            "rebalance": {"dry_run": True, "slurm_conf": "/etc/gpuportal/credentials/slurm.conf"},
        },
    )
    ray, _ = collection.register_orchestrator(
        kind="ray", name="ray-real", url="http://127.0.0.1:9", options={"rebalance": {"ray_node_type": "gpu"}}
    )
    source, _ = collection.register_orchestrator(
        kind="prometheus", name="dcgm", url="http://127.0.0.1:9", options={"orchestrators": ["slurm-real"]}
    )
    slurm_verbs = rebalance.verbs_for(slurm, True).actuated
    assert slurm_verbs.actuator.env["SLURM_CONF"] == "/etc/gpuportal/credentials/slurm.conf"
    assert rebalance.verbs_for(ray, True).actuated.node_type == "gpu"
    assert rebalance.dry_run_for(slurm) and not rebalance.dry_run_for(Orchestrator.objects.get(name="ray-sweeps"))
    rebalance.decide_now()
    assert [o.name for o in busy.covered_orchestrators(source)] == ["slurm-real"]
    assert orchestrators.build_collector(slurm, None).name == "slurm-real"
    assert not orchestrators.has_credentials(slurm)
    ours = {module for module in readers if module.startswith("scheduling.")}
    assert ours and ours <= {"scheduling.services.orchestrators", "scheduling.models.fleet"}, ours


def _reads_staff_flag(node: ast.AST) -> bool:
    """``user.is_staff``, ``getattr(user, "is_staff", ...)`` or a query ``filter(is_staff=...)``."""
    if isinstance(node, ast.Attribute) and node.attr == "is_staff":
        return True
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) > 1:
            return isinstance(node.args[1], ast.Constant) and node.args[1].value == "is_staff"
        if isinstance(func, ast.Attribute) and func.attr in {"filter", "exclude", "get"}:
            return any(k.arg == "is_staff" for k in node.keywords)
    return False


def test_portal_admin_is_decided_only_by_rules_is_portal_admin():
    """A superuser without staff once saw every row but could not build reports: four places tested the raw
    flag. Creating users with ``is_staff=`` (the demo, fixtures) is not a test of it and stays allowed."""
    found = [
        f"{relative}:{node.lineno}"
        for relative, tree in _sources("rules.py")
        for node in ast.walk(tree)
        if _reads_staff_flag(node)
    ]
    assert found == []
