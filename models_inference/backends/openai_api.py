"""The one OpenAI client helper of every API backend (text, judge, image, vision).

What each API backend shares lives here once: the endpoint fields (:class:`OpenAIEndpoint`:
model, base URL, key variable, retries, timeout, concurrency, version), the client
construction (:func:`openai_client`: key read from the environment at call time, never
stored), the redaction of error texts (:func:`redact`, :func:`api_error_text`: some servers
and proxies quote the request's key in their error message) and the concurrency map
(:func:`map_concurrently`: one HTTP request per item, ``concurrency`` in flight). Retries are
dora's one policy (:mod:`models_inference.api_retry`): the client built by
:meth:`OpenAIEndpoint.each` sends every request through
:func:`~models_inference.api_retry.call_with_retries` (connection errors, 429 and 5xx retried
with backoff; a timed-out request never re-sent; a circuit breaker per batch).

A fleet of servers behind one target: an endpoint whose ``base_url`` names several
URLs (a list, or URLs separated by commas; :func:`fleet_urls`) sends its requests through a
:class:`ServerFleet` instead of one client (least outstanding requests, failover, a per-server
report), so every OpenAI-compatible backend (chat and completion text, judge, vision, images)
scales out the same way.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence, TypeVar

from ingestion.errors import CircuitOpenError, MalformedReplyError, ModelNotAvailableError
from ingestion.registry import base_url_list

#: Key-shaped tokens: OpenAI-style ``sk-...`` keys (also partly masked ones, ``sk-abc***wxyz``)
#: and any run of 32+ letters, digits, ``_`` or ``-`` (bearer tokens of other providers).
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{3,}|[A-Za-z0-9_\-]{32,})\b")

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with every given secret and anything key-shaped replaced by ``***``.

    The one redaction of dora's API backends (chat, images, vision, judge): every error text
    they keep in a row or log goes through it. Key-shaped means ``sk-`` followed by 3+ key
    characters, or any token of 32+ ``[A-Za-z0-9_-]`` characters.

    Args:
        text: the message to clean.
        secrets: exact strings to mask first (the API key in use); empty ones are skipped.

    Returns:
        The message with each secret and key-shaped token replaced by ``***``.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


def api_error_text(exc: BaseException, key: str | None) -> str:
    """``"<ExceptionType>: <message>"`` of a failed API call, redacted (:func:`redact`) of ``key``.

    A 200 reply that is not a completion (:func:`reply_choices`) or not JSON at all is named
    as such, with the first 120 characters of the body.

    A connection error also names its cause and the URL (``APIConnectionError: Connection
    error. (connection refused) at http://127.0.0.1:8080/v1/completions``), so the message of
    a failed audit says what was unreachable. A call not sent because the server had failed
    too many calls in a row (:class:`~ingestion.errors.CircuitOpenError`) gets the
    text of that last failure."""
    last = getattr(exc, "last_error", None)
    if isinstance(exc, CircuitOpenError) and last is not None:
        return api_error_text(last, key)
    if isinstance(exc, MalformedReplyError):  # its message already says what the server sent
        return redact(str(exc), [key] if key else [])
    if isinstance(exc, json.JSONDecodeError):  # the client parsing a 200 body: name the body, not the parser's position
        return redact(f"the server's reply is not JSON: {_body_start(exc.doc)}", [key] if key else [])
    text = f"{type(exc).__name__}: {exc}"
    request = getattr(exc, "request", None)
    if request is not None and type(exc).__name__ in ("APIConnectionError", "APITimeoutError"):
        cause = exc.__cause__ or exc.__context__
        reason = str(cause) if cause is not None else ""
        if "refused" in reason.lower():
            reason = "connection refused"
        text += (f" ({reason})" if reason else "") + f" at {getattr(request, 'url', '')}"
    return redact(text, [key] if key else [])


def _body_start(body: object, limit: int = 120) -> str:
    """The first ``limit`` characters of a reply body, on one line."""
    text = " ".join(str(body).split())
    return text[:limit] + ("..." if len(text) > limit else "")


def reply_choices(reply: object) -> list:
    """The ``choices`` of a (chat) completion reply, checked before any field is read.

    The ``openai`` client does not validate a 200 body: a JSON string comes back as a ``str``,
    ``{"choices": "x"}`` as a reply whose ``choices`` is ``"x"``; reading them would fail
    with an internal ``AttributeError`` that names nothing the user sent or can fix.

    Raises:
        MalformedReplyError: no non-empty ``choices`` list of choices (each with
            ``finish_reason``); the message quotes the first 120 characters of the body.
    """
    choices = getattr(reply, "choices", None)
    if not isinstance(choices, list):
        reason = "no choices list"
    elif not choices:
        reason = "an empty choices list"
    elif not all(hasattr(c, "finish_reason") for c in choices):  # read by every caller
        reason = "a choice without finish_reason"
    else:
        return choices
    dump = getattr(reply, "model_dump_json", None)
    body = dump(exclude_unset=True, warnings=False) if callable(dump) else json.dumps(reply, default=str)
    raise MalformedReplyError(f"the server's reply is not a completion ({reason}): {_body_start(body)}")


def openai_client(
    api_key_env: str,
    base_url: str | None = None,
    *,
    max_retries: int,
    timeout: float,
    purpose: str = "the OpenAI-compatible backend",
):
    """The ``openai.OpenAI`` client of every API backend (and of API version look-ups).

    The key is read from the environment variable ``api_key_env`` at call time and never
    stored by dora; ``base_url`` defaults to ``$OPENAI_BASE_URL``, then the official endpoint.
    ``timeout`` is in seconds. The client's own retries are off: requests go through
    :func:`models_inference.api_retry.call_with_retries` (``max_retries``; see
    :meth:`OpenAIEndpoint.each`), which never re-sends a timed-out request.

    Raises:
        ModelNotAvailableError: ``api_key_env`` is unset or empty (the message names ``purpose``).
    """
    import openai

    key = os.environ.get(api_key_env)
    if not key:
        raise ModelNotAvailableError(f"set {api_key_env} in the environment to use {purpose}")
    return openai.OpenAI(
        api_key=key,
        base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
        max_retries=0,  # dora's one retry policy instead (models_inference/api_retry.py)
        timeout=timeout,
    )


def fleet_urls(base_url: str | Sequence[str] | None) -> list[str]:
    """The server URLs of a target's ``base_url``: a list, or one string with commas.

    Returns an empty list for ``None`` / empty (the default endpoint); one URL gives a list
    of one (a plain client, no fleet). Same parser as the registry's
    (:func:`ingestion.registry.base_url_list`).

    Raises:
        ValueError: a URL that does not start with ``http://`` or ``https://`` (one line naming
            it), or a repeated URL.
    """
    try:
        return base_url_list(base_url)
    except ValueError as exc:
        raise ValueError(f"base_url: {exc}") from None


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
        if name.startswith("_"):
            raise AttributeError(name)
        return _Path(self._fleet, (*self._path, name))

    def __call__(self, *args, **kwargs):
        return self._fleet.call(self._path, *args, **kwargs)


class ServerFleet:
    """Least-outstanding-requests dispatch with failover over several OpenAI-compatible servers.

    Used like an ``openai.OpenAI`` client (``fleet.chat.completions.create(...)``,
    ``fleet.completions.create(...)``, ``fleet.images.generate(...)``,
    ``fleet.models.retrieve(...)``); ``api_key`` is the key in use (for redaction only).

    Each request goes to the server with the fewest requests in flight (ties: the one that
    served fewer). A request that fails there for a server-side reason (connection refused or
    reset, timeout, HTTP 5xx) is sent at once to another server not yet tried for it; the
    failure is counted in :meth:`report` and that server is skipped for ``cooldown_s`` seconds
    (while another one is up). A client error (4xx: bad request, bad key, content policy,
    429) is the request's own and is raised as it is. When every server failed the request,
    the last error is raised: dora's retry policy (:class:`RetryingClient`, wrapped around the
    fleet by :meth:`OpenAIEndpoint.each`: backoff, circuit breaker) then retries the request
    over the fleet again, so a dead server costs no backoff while another one answers.

    The key is read from the environment by :func:`openai_client` for every server and never
    stored by dora (only the clients hold it, as for one server).

    Args:
        urls: the servers' base URLs (>= 1).
        api_key_env, max_retries, timeout: as :func:`openai_client`, for every server.
        cooldown_s: how long a server that failed is skipped (while another one is up).

    Raises:
        ValueError: no URL. ModelNotAvailableError: the key variable is unset.
    """

    def __init__(
        self,
        urls: Sequence[str],
        api_key_env: str = "OPENAI_API_KEY",
        *,
        max_retries: int = 2,
        timeout: float = 60.0,
        cooldown_s: float = 30.0,
        purpose: str = "the OpenAI-compatible fleet",
    ):
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
                    server.last_error = api_error_text(exc, self.api_key)
                    self.failovers += 1
                last = exc
                continue
            with self._lock:
                server.outstanding -= 1
                server.served += 1
            return result

    def report(self) -> list[dict]:
        """Per server, in ``urls`` order: ``base_url``, requests ``served`` (answered, including
        client errors), ``failures`` (server-side, each one failed over) and the ``last_error``
        text (redacted, :func:`api_error_text`; ``None`` if none)."""
        with self._lock:
            return [{"base_url": s.url, "served": s.served, "failures": s.failures, "last_error": s.last_error} for s in self.servers]


class RetryingClient:
    """An ``openai.OpenAI`` client whose request methods (``create``, ``generate``, ``retrieve``)
    go through :func:`~models_inference.api_retry.call_with_retries` with one circuit breaker.

    Attribute access is passed through (``client.chat.completions.create``,
    ``client.images.generate``, ``client.api_key``); only the request calls are wrapped.
    """

    _WRAPPED = ("create", "generate", "retrieve")

    def __init__(self, target, max_retries: int, breaker=None):
        from models_inference.api_retry import CircuitBreaker

        self._target, self._max_retries = target, max_retries
        self._breaker = breaker if breaker is not None else CircuitBreaker()

    def __getattr__(self, name: str):
        from models_inference.api_retry import call_with_retries

        attr = getattr(self._target, name)
        if name in self._WRAPPED and callable(attr):
            return lambda *a, **k: call_with_retries(lambda: attr(*a, **k), self._max_retries, self._breaker)
        if name.startswith("_") or isinstance(attr, (str, int, float, bool, type(None))):
            return attr
        return RetryingClient(attr, self._max_retries, self._breaker)


def map_concurrently(
    call: Callable[[_Item], _Result],
    items: Iterable[_Item],
    concurrency: int,
    on_done: Callable[[int], None] | None = None,
) -> list[_Result]:
    """``[call(item) for item in items]`` with up to ``concurrency`` calls in flight (threads).

    Results come back in the order of ``items``; ``on_done(1)`` (e.g. a progress bar's tick)
    is called once per result, in that order, as soon as it and all earlier ones are in.

    Raises:
        ValueError: ``concurrency < 1`` (from :class:`~concurrent.futures.ThreadPoolExecutor`).
        Whatever ``call`` raises (the first such exception, in item order).
    """
    results = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for res in pool.map(call, items):
            results.append(res)
            if on_done:
                on_done(1)
    return results


@dataclass
class OpenAIEndpoint:
    """The fields and the request loop every OpenAI-compatible backend shares.

    Attributes:
        model_id: the served model name (e.g. ``gpt-4o``, ``dall-e-3``).
        base_url: endpoint root (default: ``$OPENAI_BASE_URL`` or the OpenAI API); several
            (a list, or URLs separated by commas; stored comma-separated) make the endpoint a
            fleet (:class:`ServerFleet`): every server must serve ``model_id``.
        api_key_env: the environment variable holding the key (read at call time, never stored).
        max_retries / timeout: the client's retries on 429/5xx/timeouts and its timeout (s).
        concurrency: requests in flight at once.
        model_version: default the served name (an API model's version; ``model_ref.model_version``).
        fleet_cooldown_s: seconds a fleet server that failed is skipped (several URLs only).

    Raises:
        ValueError: ``concurrency < 1``, ``timeout <= 0``, or a ``base_url`` that is not
            http(s) (:func:`fleet_urls`).
    """

    model_id: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 4
    timeout: float = 60.0
    concurrency: int = 4
    model_version: str = ""
    backend_name: str = "openai"
    fleet_cooldown_s: float = 30.0
    _fleet: ServerFleet | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        urls = fleet_urls(self.base_url)
        self.base_url = ",".join(urls) or None
        self.model_version = self.model_version or self.model_id
        if int(self.concurrency) < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")

    @property
    def base_urls(self) -> list[str]:
        """The servers of this endpoint (``[]``: the default endpoint; 2+: a fleet)."""
        return fleet_urls(self.base_url)

    @property
    def fleet(self) -> ServerFleet | None:
        """The endpoint's :class:`ServerFleet` once a request was sent through it (several
        ``base_url`` s), else ``None``."""
        return self._fleet

    def fleet_report(self) -> list[dict]:
        """:meth:`ServerFleet.report` of the endpoint's fleet (``[]``: one server, or nothing sent yet)."""
        return self._fleet.report() if self._fleet is not None else []

    def client(self, purpose: str = "the OpenAI-compatible backend"):
        """A configured ``openai.OpenAI`` client (:func:`openai_client`), or for several
        ``base_url`` s the endpoint's :class:`ServerFleet` (built on first use and kept for the
        endpoint's life, so its per-server counts span every batch).

        Raises:
            ModelNotAvailableError: the API key variable is unset.
        """
        urls = self.base_urls
        if len(urls) < 2:
            return openai_client(self.api_key_env, self.base_url, max_retries=self.max_retries, timeout=self.timeout, purpose=purpose)
        if self._fleet is None:
            self._fleet = ServerFleet(
                urls, self.api_key_env, max_retries=self.max_retries, timeout=self.timeout, cooldown_s=self.fleet_cooldown_s, purpose=purpose
            )
        return self._fleet

    def capabilities(self):
        """What the endpoint's server accepts (:class:`~models_inference.backends.server_caps.ServerCapabilities`:
        its choice constraint, top log-probs, ...), probed once per (base URL, model) in this
        process; for a fleet, its first server's.

        Returns ``None`` when the server cannot be reached now (nothing is cached: the backend's
        own requests then fail with their one-line error, and the next call probes again).

        Raises:
            ModelNotAvailableError: the API key variable is unset, or the server refuses the key.
        """
        import openai

        from models_inference.backends.server_caps import server_capabilities

        url = (self.base_urls or [None])[0]
        made: list = []

        def connect():
            # no retries and a short timeout: a probe that fails only means "ask freely"
            made.append(openai_client(self.api_key_env, url, max_retries=0, timeout=min(self.timeout, 30.0), purpose="the OpenAI-compatible backend"))
            return made[-1]

        try:
            return server_capabilities(connect, url, self.model_id)
        except (openai.APIConnectionError, openai.APITimeoutError):
            return None
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise ModelNotAvailableError(f"the endpoint refused the key: {api_error_text(exc, made[-1].api_key)}") from None
            return None

    def constraint(self) -> str | None:
        """The strongest choice constraint the endpoint honours (``grammar``, ``json_schema``, ...),
        or ``None`` (free answers only; also when the server cannot be reached now)."""
        caps = self.capabilities()
        return caps.choice_constraint if caps else None

    def required_constraint(self) -> str:
        """:meth:`constraint` for a ``choose`` that cannot answer without one.

        Raises:
            ValueError: the endpoint honours no choice constraint (ask freely instead).
        """
        constraint = self.constraint()
        if constraint is None:
            raise ValueError(f"{self.base_url or 'the OpenAI API'} honours no choice constraint for {self.model_id!r}")
        return constraint

    def each(
        self,
        requests: Sequence[_Item],
        call: Callable[[object, str, _Item], _Result],
        on_done: Callable[[int], None] | None = None,
        purpose: str = "the OpenAI-compatible backend",
    ) -> list[_Result]:
        """``call(client, key, request)`` for every request, ``concurrency`` at a time, in order.

        ``call`` turns its own API failures into a result (using :func:`api_error_text` with the
        ``key`` it is given); the client is built once per batch of requests and is a
        :class:`RetryingClient` (dora's retry policy, one circuit breaker per batch) around
        :meth:`client` (one server, or the endpoint's :class:`ServerFleet`: failover first,
        then the retry policy over the fleet).

        Raises:
            ModelNotAvailableError: the API key variable is unset.
        """
        raw = self.client(purpose)
        key = raw.api_key
        client = RetryingClient(raw, self.max_retries)
        return map_concurrently(lambda req: call(client, key, req), requests, max(1, self.concurrency), on_done)


__all__ = ["OpenAIEndpoint", "RetryingClient", "ServerFleet", "api_error_text", "fleet_urls", "map_concurrently", "openai_client", "redact"]
