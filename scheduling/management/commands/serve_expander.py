"""Serve the gpu-priority-expander: cluster-autoscaler's gRPC expander protocol over TLS.

Run beside the portal (it reads the same database): ``manage.py serve_expander --cert tls.crt --key tls.key
--pool k8s-volcano``, then start cluster-autoscaler with ``--expander=grpc --grpc-expander-url=HOST:PORT
--grpc-expander-cert=ca.crt`` (it refuses plain connections). docs/rebalancer.md has the whole setup.
"""

from __future__ import annotations

import logging
import signal
from concurrent import futures
from pathlib import Path

import grpc
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, close_old_connections, connections

from scheduling.expander_protocol import codec, expander_pb2, expander_pb2_grpc
from scheduling.services import expander

log = logging.getLogger(__name__)


class GpuPriorityExpander(expander_pb2_grpc.ExpanderServicer):
    """Decodes the request, asks the portal, answers with the chosen option (none: the autoscaler keeps all)."""

    def __init__(self, default_pool: str) -> None:
        self.default_pool = default_pool

    def BestOptions(
        self, request: expander_pb2.BestOptionsRequest, context: grpc.ServicerContext,
    ) -> expander_pb2.BestOptionsResponse:
        close_old_connections()  # a thread of the pool may hold a connection the database has dropped
        try:
            options = codec.growth_options(request, self.default_pool)
            verdict = expander.choose(options, context.peer(), self.default_pool)
            log.info("expander: %s", verdict.summary)
            return codec.response(request, verdict.chosen)
        except codec.BadRequest as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))
        except DatabaseError as err:
            log.warning("expander: database unavailable (%s); cluster-autoscaler keeps all its options", err)
            context.abort(grpc.StatusCode.UNAVAILABLE, "the portal's database is unavailable")
        finally:
            # This thread's own connection: scale-ups come seconds apart, and a kept one would outlive the server
            connections.close_all()
        raise AssertionError("unreachable: context.abort raises")


def build_server(default_pool: str, cert: bytes, key: bytes, address: str, workers: int = 4) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="expander"))
    expander_pb2_grpc.add_ExpanderServicer_to_server(GpuPriorityExpander(default_pool), server)
    port = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
    if port == 0:
        raise CommandError(f"--listen {address}: cannot bind (in use, or not HOST:PORT)")
    return server, port


class Command(BaseCommand):
    help = "Serve cluster-autoscaler's gRPC expander protocol (the gpu-priority-expander) over TLS."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--listen", default="0.0.0.0:8947", help="HOST:PORT (default 0.0.0.0:8947)")
        parser.add_argument("--cert", required=True,
                            help="PEM certificate the autoscaler's --grpc-expander-cert trusts")
        parser.add_argument("--key", required=True, help="PEM private key of --cert")
        parser.add_argument("--pool", required=True,
                            help="the orchestrator a node group joins when its template has no gpuportal.io/pool label")
        parser.add_argument("--workers", type=int, default=4)

    def handle(self, *args, **options) -> None:
        cert, key = (self._read(options[name], name) for name in ("cert", "key"))
        server, port = build_server(options["pool"], cert, key, options["listen"], options["workers"])
        server.start()
        self.stdout.write(f"gpu-priority-expander listening on port {port} (TLS), default pool {options['pool']}")
        signal.signal(signal.SIGTERM, lambda *_: server.stop(grace=5))
        server.wait_for_termination()

    @staticmethod
    def _read(path: str, name: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as err:
            raise CommandError(f"--{name} {path}: {err.strerror}") from err
