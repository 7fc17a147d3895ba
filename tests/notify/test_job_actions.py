"""Act on my jobs (issue 33 item 14), the parts without a cluster: who may act (owner, lead of the team or above,
admin), the confirmation step (GET changes nothing; POST needs a reason and the CSRF token), the audit row, the
read-back that confirms, and a failed send told to the requester. The live tests send the real commands:
tests/governance_live/test_job_actions_live.py (Slurm) and test_job_actions_ray_live.py (Ray)."""

from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from scheduling.collectors.errors import SourceUnavailable
from scheduling.models import JobAction, Notification, Orchestrator, Workload
from scheduling.models.fleet import DEMO_PREFIX
from scheduling.services import job_actions

pytestmark = pytest.mark.django_db


@pytest.fixture
def hpc(db):
    return Orchestrator.objects.create(name="hpc", kind="slurm", endpoint="https://hpc.example:6820")


def _job(orchestrator, team, user="rita", state=Workload.State.RUNNING, reason="", **extra) -> Workload:
    return Workload.objects.create(
        orchestrator=orchestrator, external_id=extra.pop("external_id", "4242"), team=team, user=user, state=state,
        submitted_at=timezone.now() - timedelta(minutes=5), gpus_per_member=2, pending_reason=reason, **extra,
    )


@pytest.mark.parametrize(("who", "status"), [("outsider", 404), ("nlp_lead", 200), ("lead", 200), ("admin", 200)])
def test_who_may_open_the_confirmation_of_ritas_job(client, cast, teams, hpc, who, status):
    job = _job(hpc, teams["nlp"])
    client.force_login(cast[who])
    assert client.get(reverse("workload-act", args=[job.pk, "cancel"])).status_code == status


def test_a_researcher_cannot_cancel_another_researchers_job_and_nothing_is_sent(client, cast, teams, hpc,
                                                                                django_user_model):
    job = _job(hpc, teams["nlp"], user="rita")
    mate = django_user_model.objects.create_user("ruth")
    from scheduling.models import Membership

    Membership.objects.create(user=mate, team=teams["nlp"], role=Membership.Role.RESEARCHER)
    client.force_login(mate)
    assert client.get(reverse("workload-act", args=[job.pk, "cancel"])).status_code == 403
    assert client.post(reverse("workload-act", args=[job.pk, "cancel"]), {"reason": "mine now"}).status_code == 403
    page = unescape(client.get(reverse("workload-detail", args=[job.pk])).content.decode())
    assert "Cancel job…" not in page
    assert not JobAction.objects.exists()


def test_the_owner_confirms_with_a_reason_and_the_row_says_who_and_why(client, cast, teams, hpc):
    job = _job(hpc, teams["nlp"])
    client.force_login(cast["researcher"])
    page = unescape(client.get(reverse("workload-detail", args=[job.pk])).content.decode())
    assert "Cancel job…" in page and "Hold job…" not in page  # a running job cannot be held
    confirm = unescape(client.get(reverse("workload-act", args=[job.pk, "cancel"])).content.decode())
    assert "scancel 4242" in confirm and "Cancel job 4242" in confirm
    assert not JobAction.objects.exists()  # looking at the confirmation sends nothing
    answer = unescape(client.post(reverse("workload-act", args=[job.pk, "cancel"]), {"reason": ""}).content.decode())
    assert "reason: A reason is required" in answer and not JobAction.objects.exists()
    response = client.post(reverse("workload-act", args=[job.pk, "cancel"]), {"reason": "wrong input data"})
    assert response.status_code == 302
    action = JobAction.objects.get()
    assert (action.verb, action.state, action.requested_by, action.team) == (
        "cancel", "requested", cast["researcher"], teams["nlp"]
    )
    assert action.history.get().history_change_reason == "wrong input data"
    page = unescape(client.get(reverse("workload-detail", args=[job.pk])).content.decode())
    assert "cancel requested" in page and "Cancel job…" not in page
    again = client.post(reverse("workload-act", args=[job.pk, "cancel"]), {"reason": "twice"}, follow=True)
    assert "still waiting for the cluster" in unescape(again.content.decode()) and JobAction.objects.count() == 1


def test_the_confirmation_is_post_only_with_the_csrf_token(cast, teams, hpc):
    job = _job(hpc, teams["nlp"])
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(cast["researcher"])
    assert strict.post(reverse("workload-act", args=[job.pk, "cancel"]), {"reason": "x"}).status_code == 403
    assert not JobAction.objects.exists()


def test_a_lead_acts_on_the_teams_job_and_the_owner_is_told(cast, teams, hpc, django_capture_on_commit_callbacks):
    job = _job(hpc, teams["nlp"], state=Workload.State.PENDING, reason="Resources")
    assert job_actions.verbs_for(job) == ["cancel", "hold"]
    action = job_actions.request_action(job.pk, "hold", by=cast["lead"], reason="the nlp budget is spent")
    sent = JobAction.objects.filter(pk=action.pk)
    sent.update(state=JobAction.State.SENT)
    Workload.objects.filter(pk=job.pk).update(pending_reason="JobHeldAdmin")
    with django_capture_on_commit_callbacks(execute=True):
        assert job_actions.read_back(hpc) == 1
    assert sent.get().state == JobAction.State.CONFIRMED and sent.get().message == "pending on JobHeldAdmin"
    told = Notification.objects.filter(kind="job").order_by("recipient__username")
    assert [n.recipient.username for n in told] == ["leo", "rita"]
    assert told[1].body == "Asked by leo: the nlp budget is spent" and told[1].link == f"/workloads/{job.pk}/"


def test_a_cancel_stays_sent_until_the_job_is_gone(cast, teams, hpc):
    job = _job(hpc, teams["nlp"])
    action = job_actions.request_action(job.pk, "cancel", by=cast["admin"], reason="runaway job")
    JobAction.objects.filter(pk=action.pk).update(state=JobAction.State.SENT)
    assert job_actions.read_back(hpc) == 0  # still listed running
    Workload.objects.filter(pk=job.pk).update(state=Workload.State.CANCELLED)
    assert job_actions.read_back(hpc) == 1


class Refusing:
    def cancel(self, job_id):
        raise SourceUnavailable(f"scancel {job_id} -> 1: Access/permission denied", retryable=False)


def test_a_refused_send_fails_and_the_requester_hears_why(cast, teams, hpc, django_capture_on_commit_callbacks):
    job = _job(hpc, teams["nlp"])
    action = job_actions.request_action(job.pk, "cancel", by=cast["researcher"], reason="done")
    done = job_actions.carry_out(action.pk, control=Refusing())
    assert done.state == JobAction.State.FAILED and "permission denied" in done.message
    note = Notification.objects.get(recipient=cast["researcher"], kind="job")
    assert note.subject == "Could not cancel job 4242: scancel 4242 -> 1: Access/permission denied"
    assert job_actions.carry_out(action.pk, control=Refusing()).state == JobAction.State.FAILED  # not sent again


def test_no_verb_for_demo_jobs_ended_jobs_or_a_ray_driver_started_by_hand(teams, hpc):
    demo = Orchestrator.objects.create(name="demo-slurm", kind="slurm", endpoint=f"{DEMO_PREFIX}slurm")
    ray = Orchestrator.objects.create(name="ray", kind="ray", endpoint="http://ray.example:8265")
    assert job_actions.verbs_for(_job(demo, teams["nlp"])) == []
    assert job_actions.verbs_for(_job(hpc, teams["nlp"], state=Workload.State.COMPLETED, external_id="1")) == []
    assert job_actions.verbs_for(_job(ray, teams["nlp"], external_id="pg-1", submission_id="")) == []
    assert job_actions.verbs_for(_job(ray, teams["nlp"], external_id="pg-2", submission_id="raysubmit_1",
                                      state=Workload.State.PENDING)) == ["cancel"]  # Ray has no hold


def test_the_demo_says_its_simulated_cluster_takes_no_action_instead_of_nothing_can_be_done(client, cast, teams):
    demo = Orchestrator.objects.create(name="slurm-hpc", kind="slurm", endpoint=f"{DEMO_PREFIX}slurm")
    job = _job(demo, teams["nlp"], state=Workload.State.PENDING)
    client.force_login(cast["researcher"])
    page = unescape(client.get(reverse("workload-detail", args=[job.pk])).content.decode())
    assert "slurm-hpc is the demo's simulated Slurm: there is no cluster to send an action to" in page
    assert "Nothing can be done" not in page and "Cancel job…" not in page


def test_a_disabled_orchestrator_takes_no_action_and_the_page_says_why(client, cast, teams, hpc):
    """The portal no longer reads a disabled orchestrator: a cancel sent there would never be confirmed and would
    block every later action on the job. The owner is told to act on the cluster directly."""
    job = _job(hpc, teams["nlp"])
    Orchestrator.objects.filter(pk=hpc.pk).update(enabled=False)
    job.refresh_from_db()
    assert job_actions.verbs_for(job) == []
    client.force_login(cast["researcher"])
    page = unescape(client.get(reverse("workload-detail", args=[job.pk])).content.decode())
    assert "hpc is disabled in the portal" in page and "Cancel job…" not in page
    confirm = unescape(client.get(reverse("workload-act", args=[job.pk, "cancel"])).content.decode())
    assert "act on the cluster directly" in confirm and "scancel" not in confirm and 'name="reason"' not in confirm
    refused = client.post(reverse("workload-act", args=[job.pk, "cancel"]), {"reason": "stop it"}, follow=True)
    assert "verb: hpc is disabled in the portal" in unescape(refused.content.decode())
    assert not JobAction.objects.exists()


def test_an_orchestrator_disabled_before_the_worker_sends_fails_the_action_unsent(cast, teams, hpc):
    job = _job(hpc, teams["nlp"])
    action = job_actions.request_action(job.pk, "cancel", by=cast["researcher"], reason="done")
    Orchestrator.objects.filter(pk=hpc.pk).update(enabled=False)
    done = job_actions.carry_out(action.pk, control=Refusing())  # would raise if it were called
    assert done.state == JobAction.State.FAILED and done.message.startswith("nothing was sent: hpc is disabled")
    assert done.sent_at is None


def test_a_sent_cancel_on_an_orchestrator_disabled_since_does_not_promise_a_confirmation(client, cast, teams, hpc):
    job = _job(hpc, teams["nlp"])
    action = job_actions.request_action(job.pk, "cancel", by=cast["researcher"], reason="done")
    JobAction.objects.filter(pk=action.pk).update(state=JobAction.State.SENT)
    client.force_login(cast["researcher"])
    page = unescape(client.get(reverse("workload-detail", args=[job.pk])).content.decode())
    assert "the next collection round confirms it" in page
    Orchestrator.objects.filter(pk=hpc.pk).update(enabled=False)
    page = unescape(client.get(reverse("workload-detail", args=[job.pk])).content.decode())
    assert "no collection round can confirm it. hpc is disabled in the portal" in page and "meanwhile.." not in page
    assert "the next collection round confirms it" not in page
    confirm = unescape(client.get(reverse("workload-act", args=[job.pk, "cancel"])).content.decode())
    assert "still waiting for the cluster. hpc is disabled in the portal" in confirm
