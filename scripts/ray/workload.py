"""A Ray job that leaves the cluster in a known state for the live collector tests.

On 3 nodes x 8 GPUs: a 2 x 8-GPU STRICT_SPREAD placement group (a gang) fills two nodes, a 4-GPU
actor and two 2-GPU tasks fill the third; then three 4-GPU tasks, one 16-GPU task (fits no node)
and a second 2 x 8-GPU group wait. Expected: 24/24 GPUs allocated, 3x4 + 16 + 2x8 = 44 GPUs pending.
Runs until cancelled; writes "ready" to the file given as argv[1] once everything is in place.
"""

import sys
import time
from pathlib import Path

import ray
from ray.util.placement_group import placement_group


@ray.remote(num_gpus=2, num_cpus=1)
def hold_two():
    time.sleep(86400)


@ray.remote(num_gpus=4, num_cpus=1)
def wait_four():
    time.sleep(86400)


@ray.remote(num_gpus=16, num_cpus=1)
def too_big():
    time.sleep(86400)


@ray.remote(num_gpus=4, num_cpus=1)
class GpuActor:
    def ping(self):
        return ray.get_gpu_ids()


def main() -> None:
    ray.init(address="auto")
    gang = placement_group([{"GPU": 8, "CPU": 1}] * 2, strategy="STRICT_SPREAD", name="pg-train")
    ray.get(gang.ready(), timeout=60)
    actor = GpuActor.options(name="gpu-actor").remote()
    ray.get(actor.ping.remote(), timeout=60)
    running = [hold_two.remote() for _ in range(2)]
    deadline = time.time() + 60
    while time.time() < deadline and ray.available_resources().get("GPU", 0) > 0:
        time.sleep(0.2)
    waiting = [wait_four.remote() for _ in range(3)] + [too_big.remote()]
    pending_gang = placement_group([{"GPU": 8, "CPU": 1}] * 2, strategy="STRICT_SPREAD", name="pg-big")
    Path(sys.argv[1]).write_text("ready")
    ray.get(running + waiting + [pending_gang.ready()])


if __name__ == "__main__":
    main()
