"""The request side of batch mode (:mod:`models_inference.backends.batch_api`): the JSONL line
format of the OpenAI Batch API and of vLLM's ``run-batch`` (:func:`custom_id`, :func:`key_of`,
:func:`request_body`, :func:`request_line`, :func:`result_of`, :func:`read_lines`), what a step
gives a batch run (:class:`BatchWork`) and its options (:class:`BatchOptions`), files within the
API's limits (:func:`split_sizes`, :func:`plan_files`: at most :data:`MAX_REQUESTS_PER_FILE`
requests and :data:`MAX_FILE_BYTES` per file) and the prompt tokens of the requests, counted
before anything is sent (:func:`count_prompt_tokens`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ingestion.errors import BatchError
from models_inference.backends.base import GenerationRequest, GenerationResult, SamplingParams
from models_inference.backends.openai_api import api_error_text, redact, reply_choices
from models_inference.audit_log import AuditInfo

#: The OpenAI Batch API's limits per input file: requests, and bytes (200 MB).
MAX_REQUESTS_PER_FILE = 50_000
MAX_FILE_BYTES = 200_000_000
#: The only completion window the Batch API offers.
COMPLETION_WINDOW = "24h"
CHAT_URL = "/v1/chat/completions"
COMPLETIONS_URL = "/v1/completions"
#: Batch statuses after which nothing more happens to a batch.
TERMINAL_STATUSES: tuple[str, ...] = ("completed", "expired", "failed", "cancelled")
#: Error codes of a line that was never run (it goes into the next batch; nothing lands).
NOT_RUN_CODES: tuple[str, ...] = ("batch_expired", "batch_cancelled")


@dataclass(frozen=True)
class BatchOptions:
    """How a step runs in batch mode.

    Attributes:
        max_requests: requests per file (at most :data:`MAX_REQUESTS_PER_FILE`).
        max_bytes: bytes per file (at most :data:`MAX_FILE_BYTES`).
        wait: poll until every batch is landed (else: submit, land what is finished, return).
        poll_seconds: seconds between polls while waiting.
        retries: times one run puts a row whose request failed or never ran into a new batch.
        record: what the ledger keeps to rebuild the step without its command (its kind and
            run config, JSON-serialisable; ``dora batch import`` reads it).

    Raises:
        ValueError: a limit below 1 or above the API's, a poll interval <= 0, retries < 0.
    """

    max_requests: int = MAX_REQUESTS_PER_FILE
    max_bytes: int = MAX_FILE_BYTES
    wait: bool = False
    poll_seconds: float = 60.0
    retries: int = 3
    record: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if not 1 <= self.max_requests <= MAX_REQUESTS_PER_FILE:
            raise ValueError(f"max_requests must be in 1..{MAX_REQUESTS_PER_FILE}, got {self.max_requests}")
        if not 1 <= self.max_bytes <= MAX_FILE_BYTES:
            raise ValueError(f"max_bytes must be in 1..{MAX_FILE_BYTES}, got {self.max_bytes}")
        if not self.poll_seconds > 0:
            raise ValueError(f"poll_seconds must be > 0, got {self.poll_seconds}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")


# ----------------------------------------------------------------------------- the line format


def custom_id(key: Sequence) -> str:
    """A row's resume key as a request's ``custom_id``: the key's values as a compact JSON list
    (``["singular","alcoholic person",1,"a",3]``), so any descriptor text survives."""
    return json.dumps(list(key), ensure_ascii=False, separators=(",", ":"), default=str)


def key_of(cid: str) -> tuple:
    """The resume key of a ``custom_id`` (:func:`custom_id` read back; nested lists as tuples).

    Raises:
        ValueError: not a JSON list.
    """
    value = json.loads(cid)
    if not isinstance(value, list):
        raise ValueError(f"custom_id {cid[:80]!r} is not a JSON list")

    def tup(v):
        return tuple(tup(x) for x in v) if isinstance(v, list) else v

    return tup(value)


def request_body(
    backend, request: GenerationRequest, sampling: SamplingParams, *, constraint: str | None = None, choices: Sequence[str] = ()
) -> tuple[str, dict]:
    """The endpoint and JSON body of one request, as the live backend sends it
    (:class:`~models_inference.backends.openai_chat.OpenAIChatBackend`: model, temperature, token
    budget, the row's 31-bit seed, ``top_p`` below 1; a completion-style prompt to
    ``/v1/completions``, a chat prompt as messages; log-probs when ``choices`` are asked for;
    a choice ``constraint``'s fields merged into the body).

    Returns:
        ``(url, body)``: :data:`CHAT_URL` or :data:`COMPLETIONS_URL` and the request body.
    """
    from models_inference.backends.server_caps import answer_tokens, constraint_fields, merge_request

    if request.prompt.style == "completion":
        body = backend._sampling_kwargs(sampling, request.max_new_tokens, request.seed)
        body["prompt"] = request.prompt.as_text()
        return COMPLETIONS_URL, body
    budget = answer_tokens(constraint, request.max_new_tokens) if constraint else request.max_new_tokens
    body = backend._sampling_kwargs(sampling, budget, request.seed)
    body["messages"] = request.prompt.as_messages()
    if choices and getattr(backend, "logprobs", False):
        body.update(logprobs=True, top_logprobs=int(getattr(backend, "top_logprobs", 20)))
    if constraint:
        body = merge_request(body, constraint_fields(constraint, choices))
        body.update(body.pop("extra_body", {}))  # the client would merge these into the JSON body
    return CHAT_URL, body


def request_line(cid: str, url: str, body: dict) -> bytes:
    """One JSONL line of a batch input file (``custom_id``, ``method``, ``url``, ``body``), newline included."""
    return (json.dumps({"custom_id": cid, "method": "POST", "url": url, "body": body}, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
        "utf-8"
    )


def _one_line(text: str, key: str | None) -> str:
    return redact(" ".join(str(text).split()), [key] if key else [])[:500]


def result_of(
    line: Mapping, url: str, backend, *, constraint: str | None = None, choices: Sequence[str] = (), key: str | None = None
) -> GenerationResult | None:
    """The result of one line of a batch output or error file, read as the live backend reads a reply.

    Returns:
        ``None`` when the request never ran (an error code of :data:`NOT_RUN_CODES`); a result
        with ``error`` (redacted of ``key``) for a failed request (an ``error`` object, an
        HTTP status other than 200, a body that is not a completion); else the answer
        (``choice_logprobs`` read when ``choices`` are given, a constrained answer unwrapped).
    """
    import openai

    error = line.get("error")
    response = line.get("response") or {}
    if isinstance(error, Mapping) and error.get("code") in NOT_RUN_CODES:
        return None
    if error:
        what = f"{error.get('code')}: {error.get('message')}" if isinstance(error, Mapping) else str(error)
        return GenerationResult("", True, error=_one_line(f"batch request failed: {what}", key))
    status, body = response.get("status_code"), response.get("body")
    if status != 200:
        message = body.get("error", body) if isinstance(body, Mapping) else body
        if isinstance(message, Mapping):
            message = message.get("message", message)
        return GenerationResult("", True, error=_one_line(f"HTTP {status}: {message}", key))
    try:
        if url == CHAT_URL:
            from openai.types.chat import ChatCompletion

            from models_inference.backends.server_caps import constrained_answer

            choice = reply_choices(ChatCompletion.model_validate(body))[0]
            content = choice.message.content or ""
            text = constrained_answer(constraint, content) if constraint else content
            lps = backend._choice_logprobs(choice, tuple(choices)) if choices else None
            return GenerationResult(text, choice.finish_reason != "length", choice_logprobs=lps)
        choice = reply_choices(openai.types.Completion.model_validate(body))[0]
        return GenerationResult(choice.text or "", choice.finish_reason != "length")
    except Exception as exc:  # noqa: BLE001 - kept as an 'error' row, never dropped
        return GenerationResult("", True, error=_one_line(api_error_text(exc, key), key))


def read_lines(text: str) -> list[dict]:
    """The JSON objects of a JSONL file's text (blank lines skipped).

    Raises:
        BatchError: a line that is not a JSON object (names its number).
    """
    out = []
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise BatchError(f"batch output line {n} is not JSON ({exc}): {raw[:120]!r}") from None
        if not isinstance(value, dict) or "custom_id" not in value:
            raise BatchError(f"batch output line {n} has no custom_id: {raw[:120]!r}")
        out.append(value)
    return out


# ----------------------------------------------------------------------------- files within the limits


def split_sizes(sizes: Iterable[int], max_requests: int = MAX_REQUESTS_PER_FILE, max_bytes: int = MAX_FILE_BYTES) -> list[tuple[int, int]]:
    """Split requests of the given line sizes (bytes, in order) into consecutive files of at
    most ``max_requests`` requests and ``max_bytes`` bytes, each as full as the limits allow.

    Returns:
        ``[(start, stop), ...]`` index ranges, one per file (none for no request).

    Raises:
        BatchError: one request is larger than ``max_bytes`` (names its index and size).
    """
    out: list[tuple[int, int]] = []
    start, count, size, i = 0, 0, 0, -1
    for i, s in enumerate(sizes):
        if s > max_bytes:
            raise BatchError(f"request {i} is {s:,} bytes, more than the {max_bytes:,} bytes a batch file may hold")
        if count and (count >= max_requests or size + s > max_bytes):
            out.append((start, i))
            start, count, size = i, 0, 0
        count += 1
        size += s
    if count:
        out.append((start, i + 1))
    return out


@dataclass
class BatchWork:
    """One step's requests and rows, for the batch runner (each probe builds its own).

    Attributes:
        name: the ledger's name (the audit id; the judge's model and mode).
        step: the step in messages (``BiasDora T2T``).
        backend: the OpenAI-compatible backend whose endpoint, model, key variable and request
            fields are used (:class:`~models_inference.backends.openai_chat.OpenAIChatBackend`).
        planned: the planned items (every row of the step, landed or not).
        key: item -> its resume key (a tuple of JSON values).
        request: item -> its :class:`GenerationRequest` (prompt, seed, token budget).
        rows: ``(items, results)`` -> landing rows (one per item, with its status).
        done: -> the resume keys already landed for good (those are never sent).
        table, partition: where rows land (``write_shard``).
        status_column, error_column, error_status: the rows' status column, the column of a
            failed row's error text and its status (counted against ``max_error_share``).
        sampling: the step's sampling parameters.
        choices, constraint: the answers asked for (log-probs) and the choice constraint.
        audit: the audit whose events the run lands (``started`` / ``finished`` / ``failed``);
            ``None``: no events (the judge).
        identity: checked against the audit's earlier events (:func:`~models_inference.audit_log.check_audit_identity`).
        lock: the landing lock's name (default ``name``).
    """

    name: str
    step: str
    backend: object
    planned: Sequence
    key: Callable[[object], tuple]
    request: Callable[[object], GenerationRequest]
    rows: Callable[[list, list[GenerationResult]], list[dict]]
    done: Callable[[], set]
    table: str
    status_column: str
    sampling: SamplingParams = SamplingParams()
    partition: str | None = None
    error_column: str | None = None
    error_status: str = "error"
    choices: tuple[str, ...] = ()
    constraint: str | None = None
    audit: AuditInfo | None = None
    identity: Mapping | None = None
    lock: str | None = None

    def line(self, item) -> tuple[str, str, bytes]:
        """``(custom_id, url, JSONL line)`` of ``item``."""
        cid = custom_id(self.key(item))
        url, body = request_body(self.backend, self.request(item), self.sampling, constraint=self.constraint, choices=self.choices)
        return cid, url, request_line(cid, url, body)

    def meta(self, options: BatchOptions) -> dict:
        urls = getattr(self.backend, "base_urls", [])
        return {
            "base_url": urls[0] if urls else None,
            "api_key_env": getattr(self.backend, "api_key_env", "OPENAI_API_KEY"),
            "model": getattr(self.backend, "model_id", None),
            "record": dict(options.record),
            "table": self.table,
        }


@dataclass
class FilePlan:
    """One file of a plan (:func:`plan_files`): endpoint, requests, bytes and its lines."""

    endpoint: str
    requests: int
    bytes: int
    keys: list[str]
    lines: list[bytes] = field(repr=False, default_factory=list)


def plan_files(work: BatchWork, items: Sequence, options: BatchOptions, *, keep_lines: bool = True) -> list[FilePlan]:
    """The files ``items``' requests go into: one endpoint per file (chat and completion
    requests apart), each within ``options``' limits (:func:`split_sizes`), in plan order.

    Args:
        keep_lines: keep each file's lines (to write them); ``False`` counts only (dry run).

    Raises:
        BatchError: a request larger than a file may hold.
    """
    by_url: dict[str, list[tuple[str, bytes]]] = {}
    for item in items:
        cid, url, line = work.line(item)
        by_url.setdefault(url, []).append((cid, line if keep_lines else len(line)))
    out = []
    for url, lines in by_url.items():
        sizes = [len(line) if keep_lines else line for _, line in lines]
        for start, stop in split_sizes(sizes, options.max_requests, options.max_bytes):
            part = lines[start:stop]
            out.append(FilePlan(url, len(part), sum(sizes[start:stop]), [c for c, _ in part], [line for _, line in part] if keep_lines else []))
    return out


# ----------------------------------------------------------------------------- prompt tokens, before anything is sent

#: Characters per token of the estimate when no tokenizer of the model is here (OpenAI's rule of
#: thumb for English text), and the tokens a chat message adds to its content (role and
#: separators) plus those that prime the reply (OpenAI's token counting guide for chat models).
CHARS_PER_TOKEN = 4
CHAT_MESSAGE_TOKENS = 3
CHAT_REPLY_TOKENS = 3


def local_tokenizer(model: str):
    """The tokenizer of ``model`` when it is here without a download (a local folder, or a hub
    id in the Hugging Face cache), else ``None`` (API model names such as ``gpt-4o``: none)."""
    path = Path(model).expanduser()
    found = path.is_dir()
    if not found and "/" in model and not model.startswith(("/", ".")):
        try:
            from huggingface_hub import try_to_load_from_cache

            found = isinstance(try_to_load_from_cache(model, "tokenizer_config.json"), str)
        except Exception:  # noqa: BLE001 - an id the cache cannot read: no tokenizer here
            found = False
    if not found:
        return None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(path) if path.is_dir() else model, local_files_only=True)
    except Exception:  # noqa: BLE001 - a folder without a tokenizer: estimate instead
        return None


def count_prompt_tokens(model: str, requests: Sequence[GenerationRequest]) -> tuple[int, str]:
    """The prompt tokens of ``requests`` (each distinct prompt counted once, times its repeats).

    Counted with ``model``'s tokenizer where one is here (:func:`local_tokenizer`: a chat prompt
    through its chat template when it has one, with the generation prompt); else estimated as
    ``ceil(characters / 4)`` per message, plus 3 per chat message and 3 per chat request
    (:data:`CHARS_PER_TOKEN`, :data:`CHAT_MESSAGE_TOKENS`, :data:`CHAT_REPLY_TOKENS`).

    Returns:
        ``(tokens, how)``: ``how`` says "counted with <model>'s tokenizer" or "estimated (...)".
    """
    prompts = Counter((r.prompt.style, r.prompt.system, r.prompt.text) for r in requests)
    tokenizer = local_tokenizer(model) if prompts else None
    total = 0
    for (style, system, text), times in prompts.items():
        if tokenizer is not None:
            if style == "chat" and getattr(tokenizer, "chat_template", None):
                messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
                n = len(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))
            else:
                n = sum(len(tokenizer(part, add_special_tokens=False)["input_ids"]) for part in (system, text) if part)
        else:
            parts = [p for p in (system, text) if p]
            n = sum(-(-len(p) // CHARS_PER_TOKEN) for p in parts)
            if style == "chat":
                n += CHAT_MESSAGE_TOKENS * len(parts) + CHAT_REPLY_TOKENS
        total += n * times
    if tokenizer is not None:
        return total, f"counted with {model}'s tokenizer"
    return total, (f"estimated (~{CHARS_PER_TOKEN} characters per token, {CHAT_MESSAGE_TOKENS} per chat message; no tokenizer of {model} here)")


__all__ = [
    "CHAT_URL",
    "COMPLETIONS_URL",
    "COMPLETION_WINDOW",
    "MAX_FILE_BYTES",
    "MAX_REQUESTS_PER_FILE",
    "NOT_RUN_CODES",
    "TERMINAL_STATUSES",
    "BatchOptions",
    "BatchWork",
    "FilePlan",
    "count_prompt_tokens",
    "custom_id",
    "key_of",
    "local_tokenizer",
    "plan_files",
    "read_lines",
    "request_body",
    "request_line",
    "result_of",
    "split_sizes",
]
