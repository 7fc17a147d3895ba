"""Shared by the live rebalance tests and the worker subprocess they kill: a Kubernetes side that records
the verbs it is asked for (used where the live Kubernetes fixture is not available)."""

from scheduling.services import rebalance

CALLS: list[tuple[str, str]] = []


class RecordingKubernetes(rebalance.PoolVerbs):
    def release(self, node: str, why: str) -> str:
        CALLS.append(("cordon+taint", node))
        return "cordon+taint"

    def undo_release(self, node: str) -> str:
        CALLS.append(("untaint+uncordon", node))
        return "untaint+uncordon"

    def take(self, node: str) -> str:
        CALLS.append(("label+uncordon", node))
        return "label+uncordon"

    def undo_take(self, node: str) -> str:
        CALLS.append(("cordon+unlabel", node))
        return "cordon+unlabel"


def verbs(orchestrator, dry_run: bool) -> rebalance.PoolVerbs:
    if orchestrator.kind == "kubernetes":
        return RecordingKubernetes(orchestrator, dry_run)
    return rebalance.verbs_for(orchestrator, dry_run)


WORKER = """
import sys, time, django
django.setup()
from scheduling.services import rebalance
from tests.rebalance.live_support import verbs
plan_id = int(sys.argv[1])
while True:
    outcome = rebalance.apply_step(plan_id, verbs=verbs)
    print(outcome, flush=True)
    if outcome.finished:
        break
    time.sleep(60)
"""
