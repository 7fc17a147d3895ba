"""The shipped Kubernetes manifests (deploy/k8s), read as the kustomization lists them."""

from pathlib import Path
from typing import Any

import yaml

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"


def kustomization() -> dict[str, Any]:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def documents() -> list[dict[str, Any]]:
    """Every object of every file the kustomization lists, in its order."""
    found = []
    for name in kustomization()["resources"]:
        found += [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]
    return found


def find(kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc
