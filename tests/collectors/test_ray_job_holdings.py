"""GPUs held per Ray job, read from the dashboard's real answers (the pool ceiling's read-back, issue 31)."""

from scheduling.collectors.ray import job_holdings

from .conftest import load_shared


def test_the_sample_clusters_job_holds_all_24_gpus_with_its_owner_and_submission_id() -> None:
    [job] = job_holdings(
        jobs_doc=load_shared("ray", "api_jobs.json"),
        placement_groups_doc=load_shared("ray", "api_v0_placement_groups_detail_true.json"),
        tasks_doc=load_shared("ray", "api_v0_tasks_detail_true_limit_100.json"),
        actors_doc=load_shared("ray", "api_v0_actors_detail_true.json"),
    )
    assert (job.submission_id, job.team, job.user, job.status) == ("portal-demo-1796225579", "llm", "alice", "RUNNING")
    assert job.gpus == 24.0


def test_work_of_a_job_the_jobs_api_does_not_list_is_held_by_an_unstoppable_entry() -> None:
    group = {"placement_group_id": "p1", "state": "CREATED", "creator_job_id": "09",
             "bundles": [{"unit_resources": {"GPU": 8}, "node_id": "n"}]}
    pgs = {"result": True, "data": {"result": {"result": [group]}}}
    empty = {"result": True, "data": {"result": {"result": []}}}
    [job] = job_holdings(jobs_doc=[], placement_groups_doc=pgs, tasks_doc=empty, actors_doc=empty)
    assert (job.job_id, job.submission_id, job.gpus) == ("09", "", 8.0)
