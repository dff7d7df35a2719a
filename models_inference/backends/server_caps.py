"""What an OpenAI-compatible server can do, found once per endpoint by a cheap probe.

Servers that speak OpenAI's wire format differ in what they add to it, and the strongest
option differs per server:

* **a choice constraint** (the answer is one of fixed strings, e.g. the Likert ratings
  "1".."5"): llama.cpp's ``llama-server`` takes a GBNF ``grammar``; vLLM >= 0.12
  ``structured_outputs: {"choice": [...]}`` (older vLLM ``guided_choice``, removed in 0.12);
  SGLang a ``regex``; OpenAI and Ollama a strict ``response_format`` JSON schema with an
  ``enum``. :data:`CONSTRAINTS` lists them; :func:`constraint_fields` builds the request fields.
* **top log-probabilities** on chat answers: how many alternatives the server gives
  (``top_logprobs``; OpenAI allows 20, llama-server more, some none). llama-server reports
  them before its grammar applies, so a constrained answer still carries the model's own
  distribution over the five digits.
* **batched text completions**: ``n`` samples of one prompt in one ``/v1/completions``
  request, and a list of prompts in one request (OpenAI's legacy endpoint, vLLM, llama-server).

:func:`server_capabilities` finds these with at most ~8 small requests (``max_tokens`` 1-16),
caches the answer per (base URL, model) for the process, and is recorded on the audit (the
probe and judge steps' metadata, every judge row's ``answer_mode``). A probe request that the
server refuses (HTTP 4xx) only means "not supported"; a server that cannot be reached is
not cached, so the next call asks again (the audit then fails on its own requests, in one line).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

#: Choice constraints, strongest first per server kind (:data:`_ORDER`); ``None`` = none works.
#: grammar: llama.cpp GBNF; structured_outputs: vLLM >= 0.12; guided_choice: vLLM < 0.12;
#: regex: SGLang; json_schema: OpenAI / Ollama strict ``response_format`` with an enum.
CONSTRAINTS: tuple[str, ...] = ("grammar", "structured_outputs", "guided_choice", "regex", "json_schema")

#: The mode a row was answered in (the ``answer_mode`` column of every family that picks among
#: fixed answers): ``free`` (parsed), ``constrained`` (a local model's first token restricted to
#: the choices) or the server's constraint.
ROW_ANSWER_MODES: tuple[str, ...] = ("free", "constrained", *CONSTRAINTS)

#: Which constraints to try, in order, by the kind of server the probe recognised.
_ORDER: dict[str, tuple[str, ...]] = {
    "llama.cpp": ("grammar", "json_schema"),
    "vllm": ("structured_outputs", "guided_choice", "json_schema"),
    "sglang": ("regex", "json_schema"),
    "ollama": ("json_schema",),
    "openai": ("json_schema",),
    "unknown": ("grammar", "structured_outputs", "regex", "json_schema"),
}

#: The ``top_logprobs`` values tried, largest first (OpenAI caps at 20; llama-server takes 100).
TOP_LOGPROBS_TRIED: tuple[int, ...] = (100, 20, 5)

#: The key of the JSON object a ``json_schema`` answer carries its choice under.
JSON_ANSWER_KEY = "answer"

#: The probe's question and choices: a free-answering model replies to it in prose, and no
#: server that answers every request alike says "alpha" or "omega", so only an honoured
#: constraint makes the reply exactly one of the probe's choices.
_PROBE_PROMPT = "Say hello to the user in one friendly sentence."
_PROBE_CHOICES: tuple[str, ...] = ("alpha", "omega")
#: Sent with every probe request (servers ignore it; logs and test servers can tell probe
#: requests from an audit's own).
PROBE_HEADER = {"X-Dora-Probe": "capabilities"}


@dataclass(frozen=True)
class ServerCapabilities:
    """What one endpoint accepts (see the module docstring).

    Attributes:
        server: ``llama.cpp``, ``vllm``, ``sglang``, ``ollama``, ``openai`` or ``unknown``.
        choice_constraint: the strongest honoured constraint (:data:`CONSTRAINTS`), or ``None``.
        top_logprobs: the most ``top_logprobs`` alternatives a chat answer came back with
            (0: no log-probabilities).
        completions: ``POST /completions`` exists for the model.
        completions_n: it returns ``n`` samples of one prompt in one request.
        prompt_lists: it takes a list of prompts in one request (choice ``index`` =
            prompt * n + sample).
        slots: parallel sequences the server runs (llama-server's ``total_slots``), or ``None``.
    """

    server: str = "unknown"
    choice_constraint: str | None = None
    top_logprobs: int = 0
    completions: bool = True
    completions_n: bool = False
    prompt_lists: bool = False
    slots: int | None = None

    def as_dict(self) -> dict:
        """A JSON-able dict of the fields (stored in the audit's metadata)."""
        return asdict(self)

    def summary(self) -> str:
        """One line: ``llama.cpp: constraint grammar, 100 top log-probs, completions n + prompt lists``."""
        batching = " + ".join(x for x, on in (("n", self.completions_n), ("prompt lists", self.prompt_lists)) if on)
        return (
            f"{self.server}: constraint {self.choice_constraint or 'none (free answers parsed)'}, "
            f"{self.top_logprobs} top log-probs, completions {batching or 'one per request' if self.completions else 'absent'}"
        )


def server_root(base_url: str | None) -> str | None:
    """The server's root URL: ``base_url`` without a trailing ``/v1`` (where llama-server's
    ``/props``, vLLM's ``/version`` and Ollama's ``/api/version`` live)."""
    if not base_url:
        return None
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def gbnf_alternatives(choices: Sequence[str]) -> str:
    """A GBNF grammar whose only sentences are ``choices``: ``root ::= "1" | "2"``."""
    return "root ::= " + " | ".join(json.dumps(c) for c in choices)


def constraint_fields(constraint: str, choices: Sequence[str]) -> dict:
    """The request fields that make a chat answer one of ``choices`` under ``constraint``.

    Returns:
        ``{"extra_body": {...}}`` (server-specific fields) or ``{"response_format": {...}}``
        (a strict JSON schema: ``{"answer": <one of choices>}``), to merge into
        ``chat.completions.create`` keyword arguments.

    Raises:
        ValueError: an unknown constraint.
    """
    choices = list(choices)
    if constraint == "grammar":
        return {"extra_body": {"grammar": gbnf_alternatives(choices)}}
    if constraint == "structured_outputs":
        return {"extra_body": {"structured_outputs": {"choice": choices}}}
    if constraint == "guided_choice":
        return {"extra_body": {"guided_choice": choices}}
    if constraint == "regex":
        return {"extra_body": {"regex": "(" + "|".join(re.escape(c) for c in choices) + ")"}}
    if constraint == "json_schema":
        schema = {
            "type": "object",
            "properties": {JSON_ANSWER_KEY: {"type": "string", "enum": choices}},
            "required": [JSON_ANSWER_KEY],
            "additionalProperties": False,
        }
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": schema}}}
    raise ValueError(f"unknown constraint {constraint!r}; expected one of {CONSTRAINTS}")


def constrained_answer(constraint: str, text: str | None) -> str:
    """The answer inside a constrained reply: the text itself, or for ``json_schema`` the
    ``answer`` field of the JSON object (the raw text when it is not such an object, so the
    caller can store it with a status)."""
    text = (text or "").strip()
    if constraint != "json_schema":
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict) and isinstance(value.get(JSON_ANSWER_KEY), (str, int)):
        return str(value[JSON_ANSWER_KEY]).strip()
    return text


def answer_tokens(constraint: str, max_tokens: int) -> int:
    """The token budget of a constrained answer: ``max_tokens``, but at least 24 under
    ``json_schema``, whose object needs room for its braces and key."""
    return max(max_tokens, 24) if constraint == "json_schema" else max_tokens


def merge_request(kwargs: dict, fields: dict) -> dict:
    """``kwargs`` with ``fields`` merged (``extra_body`` dicts combined, not replaced)."""
    out = dict(kwargs)
    for key, value in fields.items():
        if key == "extra_body":
            out["extra_body"] = {**out.get("extra_body", {}), **value}
        else:
            out[key] = value
    return out


def _get_json(root: str, path: str, timeout: float) -> dict | None:
    import httpx

    try:
        resp = httpx.get(root + path, timeout=timeout, headers=PROBE_HEADER)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    try:
        data = resp.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def detect_server(base_url: str | None, timeout: float = 5.0) -> tuple[str, int | None]:
    """``(kind, slots)`` of the server at ``base_url`` from its own GET routes: llama.cpp's
    ``/props`` (``total_slots``), SGLang's ``/get_server_info``, vLLM's ``/version``, Ollama's
    ``/api/version``; no ``base_url`` (the official endpoint) or ``api.openai.com`` is ``openai``."""
    root = server_root(base_url)
    if root is None or "api.openai.com" in root:
        return "openai", None
    props = _get_json(root, "/props", timeout)
    if props is not None and ("default_generation_settings" in props or "model_path" in props):
        slots = props.get("total_slots")
        return "llama.cpp", int(slots) if isinstance(slots, int) and slots > 0 else None
    if _get_json(root, "/get_server_info", timeout) is not None:
        return "sglang", None
    if _get_json(root, "/api/version", timeout) is not None:
        return "ollama", None
    if _get_json(root, "/version", timeout) is not None:
        return "vllm", None
    return "unknown", None


def token_limit_field(base_url: str | None) -> str:
    """The field a chat request's token budget goes in at ``base_url``: ``max_completion_tokens``
    for OpenAI (its reasoning models refuse the older ``max_tokens``), ``max_tokens`` for every
    other server (llama.cpp, vLLM, SGLang, Ollama and servers not recognised all take it; not
    all take the newer name). OpenAI is recognised as :func:`detect_server` recognises it, by
    its URL (none, or ``api.openai.com``), so no request is sent."""
    root = server_root(base_url)
    return "max_completion_tokens" if root is None or "api.openai.com" in root else "max_tokens"


def chat_token_kwargs(kwargs: dict, base_url: str | None) -> dict:
    """``kwargs`` of a chat request with its ``max_tokens`` moved to the field ``base_url``
    takes (:func:`token_limit_field`)."""
    field = token_limit_field(base_url)
    if field != "max_tokens" and "max_tokens" in kwargs:
        kwargs = {**kwargs, field: kwargs["max_tokens"]}
        del kwargs["max_tokens"]
    return kwargs


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _probe_constraint(client, model: str, kind: str) -> tuple[str | None, int]:
    """(the first constraint the server honours, the top_logprobs it accepted) by asking
    :data:`_PROBE_PROMPT` under each constraint in :data:`_ORDER` order."""
    import openai

    base = {
        "model": model,
        "messages": [{"role": "user", "content": _PROBE_PROMPT}],
        "temperature": 0,
        "max_tokens": 16,
        "extra_headers": PROBE_HEADER,
    }
    top_ok = 0
    for constraint in _ORDER.get(kind, _ORDER["unknown"]):
        fields = constraint_fields(constraint, _PROBE_CHOICES)
        for top in (*TOP_LOGPROBS_TRIED, 0):
            kwargs = merge_request(base, fields)
            if top:
                kwargs.update(logprobs=True, top_logprobs=top)
            try:
                choice = client.chat.completions.create(**kwargs).choices[0]
            except openai.BadRequestError:
                continue  # this top_logprobs (or the constraint) refused: try less, then the next constraint
            except openai.APIStatusError as exc:
                if _status(exc) in (404, 405, 422, 501):
                    break
                raise
            answer = constrained_answer(constraint, choice.message.content)
            if answer not in _PROBE_CHOICES:
                break  # the field was ignored (or the schema not enforced): not a constraint here
            content = getattr(getattr(choice, "logprobs", None), "content", None) or []
            if top and content:
                top_ok = top
            return constraint, top_ok
    return None, top_ok


def _probe_top_logprobs(client, model: str) -> int:
    import openai

    for top in TOP_LOGPROBS_TRIED:
        try:
            choice = client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "Hi"}],
                max_tokens=1,
                temperature=0,
                logprobs=True,
                top_logprobs=top,
                extra_headers=PROBE_HEADER,
            ).choices[0]
        except openai.BadRequestError:
            continue
        except openai.APIStatusError:
            return 0
        content = getattr(getattr(choice, "logprobs", None), "content", None) or []
        return top if content else 0
    return 0


def _probe_completions(client, model: str) -> tuple[bool, bool, bool]:
    """(completions exist, n honoured, prompt lists honoured)."""
    import openai

    try:
        resp = client.completions.create(model=model, prompt=["a", "b"], n=2, max_tokens=1, temperature=1.0, extra_headers=PROBE_HEADER)
        indices = sorted(c.index for c in resp.choices)
        if indices == [0, 1, 2, 3]:
            return True, True, True
    except openai.APIStatusError as exc:
        if _status(exc) in (404, 405, 501):
            return False, False, False
    try:
        resp = client.completions.create(model=model, prompt="a", n=2, max_tokens=1, temperature=1.0, extra_headers=PROBE_HEADER)
        n_ok = sorted(c.index for c in resp.choices) == [0, 1]
    except openai.APIStatusError as exc:
        if _status(exc) in (404, 405, 501):
            return False, False, False
        n_ok = False
    try:
        resp = client.completions.create(model=model, prompt=["a", "b"], max_tokens=1, temperature=1.0, extra_headers=PROBE_HEADER)
        lists_ok = sorted(c.index for c in resp.choices) == [0, 1]
    except openai.APIStatusError:
        lists_ok = False
    return True, n_ok, lists_ok


_CACHE: dict[tuple[str, str], ServerCapabilities] = {}
_CACHE_LOCK = threading.Lock()


def probe_capabilities(client, base_url: str | None, model: str, *, completions: bool = True) -> ServerCapabilities:
    """Probe one endpoint (no cache): the server kind, its strongest choice constraint, its top
    log-probs and, with ``completions``, whether ``/completions`` takes ``n`` and prompt lists.

    Args:
        client: an ``openai.OpenAI``-like client for the endpoint (dora's retrying client).
        base_url: the endpoint's URL (``None``: the official OpenAI API).
        model: the served model name.

    Raises:
        openai.APIConnectionError / APITimeoutError: the server cannot be reached.
        openai.AuthenticationError: the key is refused.
    """
    kind, slots = detect_server(base_url)
    constraint, top = _probe_constraint(client, model, kind)
    if constraint is None:
        top = _probe_top_logprobs(client, model)
    has, n_ok, lists_ok = _probe_completions(client, model) if completions else (True, False, False)
    return ServerCapabilities(kind, constraint, top, has, n_ok, lists_ok, slots)


def server_capabilities(connect: Callable[[], object], base_url: str | None, model: str) -> ServerCapabilities:
    """:func:`probe_capabilities`, once per (base URL, model) in this process (thread-safe).

    Args:
        connect: builds the probe's client; called only when the endpoint is not cached yet
            (backends ask for their capabilities on every batch of requests).
    """
    key = (base_url or "", model)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    caps = probe_capabilities(connect(), base_url, model)
    with _CACHE_LOCK:
        _CACHE[key] = caps
    return caps


def forget_capabilities() -> None:
    """Empty the per-process cache (a server restarted with other options)."""
    with _CACHE_LOCK:
        _CACHE.clear()


__all__ = [
    "CONSTRAINTS",
    "JSON_ANSWER_KEY",
    "PROBE_HEADER",
    "ROW_ANSWER_MODES",
    "ServerCapabilities",
    "answer_tokens",
    "constrained_answer",
    "constraint_fields",
    "detect_server",
    "forget_capabilities",
    "gbnf_alternatives",
    "merge_request",
    "probe_capabilities",
    "server_capabilities",
    "server_root",
    "chat_token_kwargs",
    "token_limit_field",
]
