"""Submissions as the router reads them: sbatch options and Kubernetes manifests (pure, no database)."""

import pytest

from scheduling.engine.submissions import describe_file, describe_manifest, describe_sbatch, slurm_time
from scheduling.selectors.routing import submission_request

SBATCH = """#!/bin/bash
#SBATCH --job-name=llm
#SBATCH --gres=gpu:h100:8   # eight per node
#SBATCH -N 4
#SBATCH --time=1-12:00:00
#SBATCH -A nlp
srun python train.py
#SBATCH --gres=gpu:1
"""

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: notebook
  namespace: vision
  annotations:
    scheduler.gpuportal.io/scheduler: volcano
    scheduler.gpuportal.io/kind: inference
spec:
  containers:
  - name: main
    image: x
    resources:
      limits:
        nvidia.com/gpu: 2
"""

VOLCANO = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: gang
  labels: {scheduler.gpuportal.io/team: nlp}
spec:
  minAvailable: 9
  tasks:
  - name: launcher
    replicas: 1
    template: {spec: {containers: [{name: l, image: x}]}}
  - name: worker
    replicas: 8
    template:
      spec:
        activeDeadlineSeconds: 7200
        containers: [{name: w, image: x, resources: {limits: {nvidia.com/gpu: 8}}}]
"""


def test_an_sbatch_script_gives_gpus_nodes_time_and_account_and_stops_at_the_first_command() -> None:
    description = describe_sbatch(SBATCH)
    assert (description.gpus_per_member, description.members, description.team) == (8, 4, "nlp")
    assert description.duration_s == 36 * 3600


@pytest.mark.parametrize(("value", "seconds"), [
    ("30", 1800), ("30:15", 1815), ("2:00:00", 7200), ("1-0", 86_400), ("1-2:30", 95_400), ("UNLIMITED", 0),
])
def test_slurm_time_forms_are_read_as_slurm_reads_them(value: str, seconds: int) -> None:
    assert slurm_time(value) == seconds


def test_a_bad_time_names_the_option() -> None:
    with pytest.raises(ValueError, match="--time 'soon'"):
        slurm_time("soon")


def test_a_pod_gives_its_gpus_namespace_team_and_explicit_scheduler() -> None:
    description = describe_manifest(POD)
    assert (description.gpus_per_member, description.members, description.team) == (2, 1, "vision")
    assert description.scheduler == "volcano" and description.kind == "inference"
    assert submission_request(description).orchestrator == "kubernetes"


def test_a_volcano_job_counts_its_gpu_workers_as_the_gang() -> None:
    description = describe_file(VOLCANO)
    assert (description.members, description.gpus_per_member, description.team) == (8, 8, "nlp")
    assert description.duration_s == 7200


def test_files_are_told_apart_by_their_first_line() -> None:
    assert describe_file(SBATCH).members == 4
    assert describe_file(POD).team == "vision"


@pytest.mark.parametrize(("text", "message"), [
    ("a: [", "not YAML"),
    ("- 1\n- 2\n", "one Kubernetes object"),
    ("kind: Deployment\n", "cannot route a Deployment"),
    ("kind: Pod\nspec: {containers: [{resources: {limits: {nvidia.com/gpu: many}}}]}\n", "not a whole number"),
])
def test_bad_manifests_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        describe_manifest(text)


BATCH_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {{name: trial, namespace: nlp}}
spec:
  parallelism: {parallelism}
  template: {{spec: {{containers: [{{name: t, image: x, resources: {{limits: {{nvidia.com/gpu: 2}}}}}}]}}}}
"""


def test_a_job_whose_parallelism_is_null_runs_one_pod_as_the_api_server_defaults_it() -> None:
    assert describe_manifest(BATCH_JOB.format(parallelism="null")).members == 1
    assert describe_manifest(BATCH_JOB.format(parallelism="3")).members == 3


def test_a_job_whose_parallelism_is_no_number_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"spec.parallelism: 'three' is not a whole number"):
        describe_manifest(BATCH_JOB.format(parallelism="three"))
