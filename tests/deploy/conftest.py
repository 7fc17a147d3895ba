# The live Kubernetes fixture (a real kube-apiserver on free loopback ports, its own temp state dir) for
# the manifests' server-side dry-run. Imported, not redefined: one definition of how the fixture starts.
from tests.k8s_live.conftest import cluster  # noqa: F401
