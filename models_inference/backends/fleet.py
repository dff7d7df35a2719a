"""A fleet of OpenAI-compatible servers behind one target (issue 16, scale-out of generation).

A target may name several ``base_url`` s (e.g. several vLLM or llama.cpp servers serving the
same model): :class:`ServerFleet` stands in for the ``openai.OpenAI`` client of an API backend
and sends each request to the server with the fewest requests in flight (least outstanding
requests). A request that fails on a server for a server-side reason - connection refused or
reset, timeout, HTTP 5xx - is retried on another server; the failure is recorded in
:meth:`ServerFleet.report`, and that server is skipped for ``cooldown_s`` seconds. A client
error (4xx: bad request, bad key) is the request's own and is raised as it is. Each server's
own retries are the ``openai`` client's (``max_retries``, :func:`openai_client`); the fleet
fails over only once they are spent. The key is read from the environment by
:func:`openai_client` for every server and never stored by dora.

:class:`FleetChatBackend` is :class:`~models_inference.backends.text.OpenAIChatBackend` over
a fleet: same requests, same rows; :func:`fleet_urls` parses a target's ``base_url``
(a list, or URLs separated by commas).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

from models_inference.backends.openai_api import openai_client, redact
from models_inference.backends.text import OpenAIChatBackend


def fleet_urls(base_url: str | Sequence[str] | None) -> list[str]:
    """The server URLs of a target's ``base_url``: a list, or one string with commas.

    Returns an empty list for ``None`` / empty (the default endpoint).

    Raises:
        ValueError: a URL that does not start with ``http://`` or ``https://``.
    """
    if not base_url:
        return []
    urls = [u.strip() for u in (base_url.split(",") if isinstance(base_url, str) else base_url) if u and u.strip()]
    bad = [u for u in urls if not u.startswith(("http://", "https://"))]
    if bad:
        raise ValueError(f"base_url: not an http(s) URL: {bad}")
    return urls


def _server_side(exc: BaseException) -> bool:
    """A failure another server may not have: connection, timeout, HTTP 5xx."""
    import openai

    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


@dataclass
class _Server:
    url: str
    client: object
    outstanding: int = 0
    served: int = 0
    failures: int = 0
    down_until: float = 0.0
    last_error: str | None = None


class _Path:
    """``fleet.chat.completions`` etc.: the attribute path, dispatched when called."""

    def __init__(self, fleet: "ServerFleet", path: tuple[str, ...]):
        self._fleet, self._path = fleet, path

    def __getattr__(self, name: str) -> "_Path":
        return _Path(self._fleet, (*self._path, name))

    def __call__(self, *args, **kwargs):
        return self._fleet.call(self._path, *args, **kwargs)


class ServerFleet:
    """Least-outstanding-requests dispatch with failover over several OpenAI-compatible servers.

    Used like an ``openai.OpenAI`` client (``fleet.chat.completions.create(...)``,
    ``fleet.images.generate(...)``); ``api_key`` is the key in use (for redaction only).

    Args:
        urls: the servers' base URLs (>= 1).
        api_key_env, max_retries, timeout: as :func:`openai_client`, for every server.
        cooldown_s: how long a server that failed is skipped (while another one is up).

    Raises:
        ValueError: no URL. ModelNotAvailableError: the key variable is unset.
    """

    def __init__(self, urls: Sequence[str], api_key_env: str = "OPENAI_API_KEY", *, max_retries: int = 2,
                 timeout: float = 60.0, cooldown_s: float = 30.0, purpose: str = "the OpenAI-compatible fleet"):
        if not urls:
            raise ValueError("a fleet needs at least one base_url")
        self.servers = [_Server(u, openai_client(api_key_env, u, max_retries=max_retries, timeout=timeout, purpose=purpose)) for u in urls]
        self.api_key = self.servers[0].client.api_key
        self.cooldown_s = cooldown_s
        self.failovers = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> _Path:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Path(self, (name,))

    def _pick(self, tried: set[int]) -> _Server | None:
        with self._lock:
            now = time.monotonic()
            candidates = [s for i, s in enumerate(self.servers) if i not in tried]
            up = [s for s in candidates if s.down_until <= now] or candidates
            if not up:
                return None
            server = min(up, key=lambda s: (s.outstanding, s.served))
            server.outstanding += 1
            return server

    def call(self, path: tuple[str, ...], *args, **kwargs):
        """Call ``client.<path>(*args, **kwargs)`` on the least busy server, failing over.

        Raises:
            The last server-side error when every server failed; a client error (4xx) at once.
        """
        tried: set[int] = set()
        last: BaseException | None = None
        while True:
            server = self._pick(tried)
            if server is None:
                assert last is not None
                raise last
            tried.add(self.servers.index(server))
            try:
                target = server.client
                for name in path:
                    target = getattr(target, name)
                result = target(*args, **kwargs)
            except Exception as exc:
                with self._lock:
                    server.outstanding -= 1
                    if not _server_side(exc):
                        server.served += 1
                        raise
                    server.failures += 1
                    server.down_until = time.monotonic() + self.cooldown_s
                    server.last_error = redact(f"{type(exc).__name__}: {exc}", [self.api_key])
                    self.failovers += 1
                last = exc
                continue
            with self._lock:
                server.outstanding -= 1
                server.served += 1
            return result

    def report(self) -> list[dict]:
        """Per server: ``base_url``, requests ``served``, ``failures`` and the ``last_error`` (redacted)."""
        with self._lock:
            return [{"base_url": s.url, "served": s.served, "failures": s.failures, "last_error": s.last_error} for s in self.servers]


@dataclass
class FleetChatBackend(OpenAIChatBackend):
    """:class:`OpenAIChatBackend` whose requests go to a :class:`ServerFleet` of ``base_urls``.

    The fleet (and its per-server counts, :attr:`fleet`) lives as long as the backend.
    ``model_version`` is the served name, as for one server: every server must serve the same
    model (same name).
    """

    base_urls: tuple[str, ...] = ()
    cooldown_s: float = 30.0
    fleet: ServerFleet | None = field(default=None, repr=False)

    def client(self, purpose: str = "the OpenAI-compatible backend"):
        """The backend's :class:`ServerFleet` (built on first use).

        Raises:
            ModelNotAvailableError: the API key variable is unset.
        """
        if self.fleet is None:
            self.fleet = ServerFleet(fleet_urls(list(self.base_urls)), self.api_key_env, max_retries=self.max_retries,
                                     timeout=self.timeout, cooldown_s=self.cooldown_s, purpose=purpose)
        return self.fleet
