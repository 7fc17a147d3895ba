"""Shape of the demo fleet and its teams: 40 DGX-class nodes (320 GPUs) over four leaf switches."""

from dataclasses import dataclass


@dataclass(frozen=True)
class DemoOrchestrator:
    name: str
    kind: str
    gpu_models: tuple[tuple[str, int], ...]  # (model, nodes)
    placement_policy: str


ORCHESTRATORS = (
    DemoOrchestrator("slurm-hpc", "slurm", (("H100", 20),), "best-fit"),
    DemoOrchestrator("k8s-serving", "kubernetes", (("H100", 4), ("A100", 6)), "fgd"),
    DemoOrchestrator("ray-sweeps", "ray", (("A100", 10),), "first-fit"),
)
GPUS_PER_NODE = 8
NODES_PER_LEAF = 10

# (slug, name, parent, weight %, guaranteed GPUs, burst limit GPUs)
TEAMS = (
    ("research", "Research", None, 40, 112, 256),
    ("nlp", "NLP research", "research", 60, 64, 192),
    ("vision", "Vision research", "research", 40, 48, 160),
    ("production", "Production", None, 60, 160, 288),
    ("inference", "Inference serving", "production", 50, 96, 160),
    ("recsys", "Recommendation models", "production", 50, 64, 192),
)
LEAF_TEAMS = ("nlp", "vision", "inference", "recsys")

# Philly virtual clusters -> demo teams (the four largest VCs of the slice first).
VC_TEAMS = {"6214e9": "nlp", "11cb48": "vision", "6c71a0": "recsys", "103959": "inference"}


def team_for_vc(vc: str) -> str:
    return VC_TEAMS.get(vc) or LEAF_TEAMS[sum(map(ord, vc)) % len(LEAF_TEAMS)]


def node_layout() -> list[dict[str, object]]:
    """Every demo node with its owner and topology path (one NVLink domain per 8-GPU node)."""
    nodes: list[dict[str, object]] = []
    for orch in ORCHESTRATORS:
        for model, count in orch.gpu_models:
            for _ in range(count):
                index = len(nodes)
                nodes.append(
                    {
                        "name": f"gpu{index + 1:03d}",
                        "orchestrator": orch.name,
                        "gpu_model": model,
                        "gpu_total": GPUS_PER_NODE,
                        "nvlink_domain": f"nvl-gpu{index + 1:03d}",
                        "leaf_switch": f"leaf-{index // NODES_PER_LEAF + 1}",
                        "spine": "spine-1",
                    }
                )
    return nodes
