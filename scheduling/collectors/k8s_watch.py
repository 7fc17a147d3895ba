"""An informer-style cache of a Kubernetes cluster: list once, then watch (issue 35 item 1).

Re-listing 5,000 nodes and 150,000 pods every 30-second round costs ~10 s CPU, nearly all of it decoding
objects that did not change. A :class:`WatchedList` lists one resource once (page by page, as the
collector does) and then follows a watch from that list's ``resourceVersion``: each event decodes one
object (only the fields :mod:`.k8s_wire` names) and replaces it in the cache. The round then builds its
snapshot from the cache (:meth:`WatchingCollector.collect`): no JSON is read for objects that did not
change.

How it stays right, as client-go's reflector does it:

- **Bookmarks** (``allow_watch_bookmarks``) move the resourceVersion on while nothing we watch changes,
  so a re-watch after a quiet hour does not start from a version etcd has compacted away.
- **A broken stream** (connection reset, read timeout, the server ending the watch at ``timeout_seconds``)
  is re-watched from the last version seen: the API server replays every event after it, so nothing is
  lost, and an event seen twice replaces an object by itself (the cache is keyed by name, never appended).
- **410 Gone** (an ``ERROR`` event or an HTTP 410: the version was compacted away) and any event we cannot
  read: the cache is no longer known to be whole, so the list is read again and replaces it whole.
- Until a list has succeeded, or while one is being read again after a 410, the cache is not *synced*:
  the round then re-lists like the plain collector (:class:`WatchingCollector` falls back), never reports a
  half cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from . import k8s_wire as wire
from .errors import MalformedResponse, SourceUnavailable
from .k8s import VOLCANO, GangContext, KubernetesCollector, namespaced_key, pod_gpus, pod_key
from .k8s_compact import NodeCompactor, PodCompactor, PodGroupCompactor, Unchanged
from .k8s_rounds import Changes, WatchRounds
from .reliability import guarded
from .snapshot import Snapshot

logger = logging.getLogger(__name__)

# The API server ends a watch after timeout_seconds (it randomises it further); we then watch again from
# the last version. Shorter than etcd's default 5-minute compaction so bookmarks keep the version fresh.
WATCH_SECONDS = 240
# Reading nothing for this long (no event, no bookmark: the server sends one about every minute) means
# the connection is dead though the socket is not closed: re-watch.
READ_TIMEOUT_S = WATCH_SECONDS + 60
RELIST_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


class Gone(Exception):
    """The watch's resourceVersion is too old (410) or otherwise refused by an ERROR event: only a new list
    makes the cache whole again."""


class NotOpened(SourceUnavailable):
    """A watch could not be opened (the API server is unreachable or refuses): the cache may be missing
    changes from now on, so it is no longer synced and rounds re-list (and fail, marking the source stale,
    while the API server stays away)."""


class _EventHead(msgspec.Struct, gc=False):
    type: str
    object: msgspec.Raw


class _Status(msgspec.Struct, gc=False):
    code: int = 0
    reason: str = ""
    message: str = ""


class _Meta(msgspec.Struct, frozen=True, gc=False):
    resourceVersion: str = ""


class _Versioned(msgspec.Struct, gc=False):
    """Any object's resourceVersion (a BOOKMARK carries nothing else)."""

    metadata: _Meta = _Meta()


_HEAD = msgspec.json.Decoder(_EventHead)
_STATUS = msgspec.json.Decoder(_Status)
_VERSIONED = msgspec.json.Decoder(_Versioned)


@dataclass(frozen=True)
class Resource:
    """One list the collector reads: how to list and watch it (the official client's method and its leading
    arguments), the Structs it decodes into, each object's cache key, and which objects the cache keeps."""

    what: str
    call: Callable[..., Any]
    args: tuple[Any, ...]
    item: type[Any]
    page: type[Any]
    key: Callable[[Any], str]
    keep: Callable[[Any], bool] | None = None
    selectors: tuple[tuple[str, str], ...] = ()
    # Builds what rewrites each kept object before it is cached (k8s_compact: the pods' shared parts stored once).
    compactor: Callable[[], Unchanged] = Unchanged


def _named(obj: Any) -> str:
    return str(obj.metadata.name)


class WatchedList:
    """One resource kept current by a list and a watch; thread-safe (the watch thread writes, rounds read)."""

    def __init__(self, source: KubernetesCollector, resource: Resource, *, watch_seconds: int = WATCH_SECONDS) -> None:
        self.source, self.resource, self.watch_seconds = source, resource, watch_seconds
        self._items: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.version = ""
        self.synced = False
        self.missing = False  # the list answered 404 (a CRD that is not installed)
        self.lists = self.watches = self.events = 0
        self.last_error = ""
        self._decoder = msgspec.json.Decoder(resource.item)
        self._response: Any = None
        self._compact = resource.compactor()
        # Each key changed since a round last read the list: its object before the first change and after the
        # last. None: listed again (or no round read it yet), so a round reads every object (k8s_rounds).
        self._changed: dict[str, tuple[Any, Any]] | None = None

    # ------------------------------------------------------------------------------------ the cache

    def items(self) -> list[Any]:
        with self._lock:
            return list(self._items.values())

    def take(self) -> Changes:
        """Every object, and what changed since the last ``take`` (a round's read: one reader)."""
        with self._lock:
            changed, self._changed = self._changed, {}
            return Changes(list(self._items.values()), changed)

    def _put(self, key: str, obj: Any) -> None:
        """Replace (``obj``) or remove (``None``) one cached object, noting the change for the next round.
        Called with the lock held."""
        changed = self._changed
        if changed is not None:
            first = changed.get(key)
            changed[key] = (first[0] if first else self._items.get(key), obj)
            if len(changed) > len(self._items) // 2 + 1000:
                self._changed = None  # rounds stopped reading: the next one reads everything, the notes go
        if obj is None:
            self._items.pop(key, None)
        else:
            self._items[key] = obj

    def apply(self, line: bytes) -> None:
        """One watch event (a line of the stream). ``Gone`` on a 410; ``MalformedResponse`` on a line that
        is not an event we can read (the cache would no longer be known to be whole)."""
        head = wire.decode(f"{self.resource.what} watch event", line, _HEAD)
        kind = head.type
        if kind == "ERROR":
            # 410: the version was compacted away; any other (a version the server cannot serve, 504 "too large
            # resource version"): watching again from the same version would fail the same way. Both list again.
            status = wire.decode(f"{self.resource.what} watch error", head.object, _STATUS)
            raise Gone(f"{self.resource.what}: watch error {status.code} {status.message or status.reason}")
        version = wire.decode(f"{self.resource.what} watch event", head.object, _VERSIONED).metadata.resourceVersion
        if kind != "BOOKMARK":
            obj = wire.decode(f"{self.resource.what} watch event", head.object, self._decoder)
            keep = self.resource.keep
            key = self.resource.key(obj)
            with self._lock:
                if kind == "DELETED" or (keep is not None and not keep(obj)):
                    if key in self._items:
                        self._put(key, None)
                elif kind in ("ADDED", "MODIFIED"):
                    self._put(key, self._compact(obj))
                    self._compact.fit(len(self._items))
                else:
                    raise MalformedResponse(f"kubernetes: {self.resource.what} watch event of unknown type {kind!r}")
            self.events += 1
        if version:
            self.version = version

    # ---------------------------------------------------------------------------------- list, watch

    def relist(self) -> None:
        """Every object, all pages (the first page's resourceVersion is the whole list's), replacing the cache."""
        resource = self.resource
        decoder = msgspec.json.Decoder(resource.page)
        items: dict[str, Any] = {}
        token: str | None = None
        version = ""
        self.synced = False
        compact = resource.compactor()  # a new list starts the shared values afresh
        while True:
            kwargs = dict(resource.selectors)
            if token:
                kwargs["_continue"] = token
            try:
                body = self.source._raw(
                    "list", resource.what, resource.call, *resource.args, limit=self.source.page_size, **kwargs
                )
            except SourceUnavailable as exc:
                if exc.status == 404:
                    self.missing = True
                    with self._lock:
                        if self._items:  # asked again every 30 s while missing: the rounds need not start over
                            self._items, self._changed = {}, None
                    self.synced = True
                    return
                raise
            page = wire.decode(resource.what, body, decoder)
            version = version or page.metadata.resourceVersion
            for obj in page.items:
                if resource.keep is None or resource.keep(obj):
                    items[resource.key(obj)] = compact(obj)
            token = page.metadata.continue_ or None
            if not token:
                break
        with self._lock:
            self._items, self._compact, self._changed = items, compact, None
        self.version, self.missing, self.synced = version, False, True
        self.lists += 1

    def watch(self, stop: threading.Event) -> None:
        """Follow one watch from ``version`` until the server ends it, the stream breaks (``SourceUnavailable``)
        or ``stop`` is set. ``Gone`` when the version is too old."""
        resource = self.resource
        try:
            response = resource.call(
                *resource.args,
                watch=True,
                resource_version=self.version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.watch_seconds,
                _preload_content=False,
                _request_timeout=(self.source.timeout, READ_TIMEOUT_S),
                **dict(resource.selectors),
            )
        except ApiException as exc:
            if exc.status == 410:
                raise Gone(f"{resource.what}: HTTP 410 {exc.reason}") from exc
            raise NotOpened(
                f"kubernetes: watch {resource.what} -> HTTP {exc.status} {exc.reason}", status=exc.status
            ) from exc
        except (Urllib3Error, OSError) as exc:
            raise NotOpened(f"kubernetes: watch {resource.what} failed: {exc}") from exc
        self._response = response
        self.watches += 1
        try:
            for line in _lines(response):
                if stop.is_set():
                    return
                self.apply(line)
        except (Urllib3Error, OSError, ValueError) as exc:  # reset, read timeout, or closed by cut()
            if not stop.is_set():
                raise SourceUnavailable(f"kubernetes: watch {resource.what} broke: {exc}") from exc
        finally:
            self._response = None
            response.release_conn()

    def cut(self) -> None:
        """Break the current stream as a network failure would (tests; ``stop``)."""
        response = self._response
        if response is not None:
            try:
                response.shutdown()  # urllib3 2.3+: unblocks a read in another thread
            except (AttributeError, OSError):
                response.close()

    def run(self, stop: threading.Event) -> None:
        """List, then watch until ``stop``: re-watch from the last version when a stream ends or breaks,
        list again on 410 or an unreadable event; a failing list is retried with back-off."""
        failures = 0
        while not stop.is_set():
            try:
                if not self.synced:
                    self.relist()
                    failures = 0
                if self.missing:  # a CRD not installed: look again later, as a re-listing round would
                    stop.wait(RELIST_BACKOFF_S[-1])
                    self.synced = False
                    continue
                self.watch(stop)
                failures = 0
            except Gone as exc:
                logger.info("kubernetes %s: %s; listing again", self.resource.what, exc)
                self.last_error, self.synced = str(exc), False
            except (MalformedResponse, SourceUnavailable) as exc:
                self.last_error = str(exc)
                if isinstance(exc, MalformedResponse | NotOpened):
                    self.synced = False
                failures += 1
                logger.warning("kubernetes %s: %s", self.resource.what, exc)
                stop.wait(RELIST_BACKOFF_S[min(failures, len(RELIST_BACKOFF_S)) - 1])


def _lines(response: Any) -> Iterator[bytes]:
    """The newline-separated events of a watch stream, however its chunks cut them."""
    rest = b""
    for chunk in response.stream(65536, decode_content=False):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from (line for line in lines if line.strip())
    if rest.strip():
        yield rest


class WatchingCollector:
    """The Kubernetes collector for a long-lived process: nodes, GPU pods and (when installed) Volcano Queues
    and PodGroups kept by :class:`WatchedList` threads; ``collect`` reads them. While a list is not synced
    (just started, listing again after a 410, the API server unreachable) ``collect`` re-lists like
    :class:`KubernetesCollector`, so a round is never worse than without the watch."""

    def __init__(self, source: KubernetesCollector, *, watch_seconds: int = WATCH_SECONDS) -> None:
        self.source, self.name = source, source.name
        gpu = source.resource
        resources = [
            Resource("nodes", source.core.list_node, (), wire.Node, wire.NodeList, _named, compactor=NodeCompactor),
            Resource(
                "pods",
                source.core.list_pod_for_all_namespaces,
                (),
                wire.Pod,
                wire.PodList,
                pod_key,
                keep=lambda pod: pod_gpus(pod, gpu) > 0,
                selectors=(("field_selector", "status.phase!=Succeeded,status.phase!=Failed"),),
                compactor=PodCompactor,
            ),
        ]
        if source.volcano:
            custom = source.custom.list_cluster_custom_object
            resources += [
                Resource("queues", custom, (*VOLCANO, "queues"), wire.Queue, wire.QueueList, _named),
                Resource("podgroups", custom, (*VOLCANO, "podgroups"), wire.PodGroup, wire.PodGroupList, namespaced_key,
                         compactor=PodGroupCompactor),
            ]
        self.lists = {r.what: WatchedList(source, r, watch_seconds=watch_seconds) for r in resources}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.fallbacks = 0
        # Rounds run one at a time (one watch process; scrapes hold a lease).
        self.rounds = WatchRounds(source.name, resource=gpu, labels_config=source.labels_config)

    def start(self) -> WatchingCollector:
        for what, watched in self.lists.items():
            thread = threading.Thread(
                target=watched.run, args=(self._stop,), name=f"watch-{self.name}-{what}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        for watched in self.lists.values():
            watched.cut()
        for thread in self._threads:
            thread.join(timeout)

    def using(self, breaker: Any) -> WatchingCollector:
        """This collector with a round's circuit breaker (the breaker's state lives in the database, per scrape)."""
        self.source.breaker = breaker
        return self

    @property
    def synced(self) -> bool:
        return all(w.synced for w in self.lists.values())

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.synced and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.synced

    def collect(self) -> Snapshot:
        if not self.synced:
            self.fallbacks += 1
            return self.source.collect()
        return guarded(self.source.breaker, self.name, self._from_cache)

    def _from_cache(self) -> Snapshot:
        taken_at = datetime.now(UTC)
        errors: tuple[str, ...] = ()
        volcano = [self.lists[w] for w in ("queues", "podgroups") if w in self.lists]
        if any(w.missing for w in volcano):
            errors = ("volcano CRDs not installed: no queues or pod groups",)
        context, admission_error = self.source.gang_context()
        return self.snapshot_of_cache(context, errors=errors + admission_error, taken_at=taken_at)

    def snapshot_of_cache(self, context: GangContext, *, errors: tuple[str, ...], taken_at: datetime) -> Snapshot:
        """The round's snapshot from the cache and what changed in it since the last round, with ``context``."""
        lists = self.lists
        return self.rounds.snapshot(
            nodes=lists["nodes"].items(),
            pods=lists["pods"].take(),
            podgroups=lists["podgroups"].take() if "podgroups" in lists else Changes([], {}),
            queues=lists["queues"].items() if "queues" in lists else [],
            context=context,
            errors=errors,
            taken_at=taken_at,
        )
