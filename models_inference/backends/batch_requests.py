"""The request side of batch mode (:mod:`models_inference.backends.batch_api`): the JSONL line
format of the OpenAI Batch API and of vLLM's ``run-batch`` (:func:`custom_id`, :func:`key_of`,
:func:`request_body`, :func:`request_line`, :func:`result_of`; an output line's shape and the
file-naming custom ids in :mod:`models_inference.backends.batch_lines`), what a step
gives a batch run (:class:`BatchWork`) and its options (:class:`BatchOptions`), files within the
API's limits (:func:`split_sizes`, :func:`plan_files`: at most :data:`MAX_REQUESTS_PER_FILE`
requests and :data:`MAX_FILE_BYTES` per file) and the prompt tokens of the requests, counted
before anything is sent (:func:`count_prompt_tokens`).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ingestion.errors import BatchError, MalformedReplyError
from models_inference.audit_log import AuditInfo
from models_inference.backends.base import GenerationRequest, GenerationResult, SamplingParams
from models_inference.backends.batch_lines import MAX_CUSTOM_ID, OutputLine, entry_custom_id, ledger_tag
from models_inference.backends.openai_api import api_error_text, redact, reply_choices

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
#: The endpoints each offline runner takes (vLLM's ``run-batch``: chat, embeddings, score and
#: rerank; not text completions, so a completion-style step cannot be exported for it).
RUNNER_ENDPOINTS: dict[str, tuple[str, ...]] = {"vllm": (CHAT_URL,), "openai": (CHAT_URL, COMPLETIONS_URL)}


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
        max_open: batches of the model open at once at the endpoint (every ledger counted;
            the other files wait, prepared, for a slot); ``None``: no bound.
        token_field: the chat requests' token budget field (``max_completion_tokens``,
            ``max_tokens``); ``None``: as the endpoint wants it (:func:`chat_token_field`).

    Raises:
        ValueError: a limit below 1 or above the API's, a poll interval <= 0, retries < 0,
            ``max_open`` < 1.
    """

    max_requests: int = MAX_REQUESTS_PER_FILE
    max_bytes: int = MAX_FILE_BYTES
    wait: bool = False
    poll_seconds: float = 60.0
    retries: int = 3
    record: Mapping = field(default_factory=dict)
    max_open: int | None = None
    token_field: str | None = None

    def __post_init__(self):
        if not 1 <= self.max_requests <= MAX_REQUESTS_PER_FILE:
            raise ValueError(f"max_requests must be in 1..{MAX_REQUESTS_PER_FILE}, got {self.max_requests}")
        if not 1 <= self.max_bytes <= MAX_FILE_BYTES:
            raise ValueError(f"max_bytes must be in 1..{MAX_FILE_BYTES}, got {self.max_bytes}")
        if not self.poll_seconds > 0:
            raise ValueError(f"poll_seconds must be > 0, got {self.poll_seconds}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.max_open is not None and self.max_open < 1:
            raise ValueError(f"max_open must be >= 1, got {self.max_open}")


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


def chat_token_field(backend) -> str:
    """The field of a chat request's token budget at ``backend``'s endpoint, as the live path
    sends it: OpenAI's ``max_completion_tokens`` (its reasoning models refuse ``max_tokens``),
    ``max_tokens`` for every other server
    (:func:`~models_inference.backends.server_caps.token_limit_field`)."""
    from models_inference.backends.server_caps import token_limit_field

    urls = getattr(backend, "base_urls", None) or [getattr(backend, "base_url", None)]
    return token_limit_field(urls[0])


def request_body(
    backend,
    request: GenerationRequest,
    sampling: SamplingParams,
    *,
    constraint: str | None = None,
    choices: Sequence[str] = (),
    token_field: str | None = None,
) -> tuple[str, dict]:
    """The endpoint and JSON body of one request, as the live backend sends it
    (:class:`~models_inference.backends.openai_chat.OpenAIChatBackend`: model, temperature, token
    budget, the row's 31-bit seed, ``top_p`` below 1; a completion-style prompt to
    ``/v1/completions``, a chat prompt as messages; log-probs when ``choices`` are asked for;
    a choice ``constraint``'s fields merged into the body). A chat request's budget is sent as
    ``token_field`` (default :func:`chat_token_field`); ``/v1/completions`` has only ``max_tokens``.

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
    field_name = token_field or chat_token_field(backend)
    if field_name != "max_tokens" and "max_tokens" in body:
        body[field_name] = body.pop("max_tokens")
    return CHAT_URL, body


def request_line(cid: str, url: str, body: dict) -> bytes:
    """One JSONL line of a batch input file (``custom_id``, ``method``, ``url``, ``body``), newline included."""
    return join_line(cid, line_tail(url, body))


def line_tail(url: str, body: dict) -> bytes:
    """A JSONL line of a batch input file without its ``custom_id`` (``"method":...}`` and the
    newline): the id is given when the file it goes into is known (:func:`join_line`)."""
    return (json.dumps({"method": "POST", "url": url, "body": body}, ensure_ascii=False, separators=(",", ":"))[1:] + "\n").encode("utf-8")


def join_line(cid: str, tail: bytes) -> bytes:
    """The JSONL line of custom id ``cid`` and the rest of the line ``tail`` (:func:`line_tail`)."""
    return b'{"custom_id":' + json.dumps(cid, ensure_ascii=False).encode("utf-8") + b"," + tail


def _one_line(text: str, key: str | None) -> str:
    return redact(" ".join(str(text).split()), [key] if key else [])[:500]


def result_of(
    line: OutputLine | Mapping, url: str, backend, *, constraint: str | None = None, choices: Sequence[str] = (), key: str | None = None
) -> GenerationResult | None:
    """The result of one line of a batch output or error file, read as the live backend reads a
    reply (the ``openai`` client builds a reply without validating it, and so does this: a
    ``finish_reason`` such as vLLM's ``abort`` is kept as the live path keeps it).

    Args:
        line: an :class:`~models_inference.backends.batch_lines.OutputLine` (a mapping is
            validated into one: pydantic.ValidationError when it has another shape).

    Returns:
        ``None`` when the request never ran (an error code of :data:`NOT_RUN_CODES`); a result
        with ``error`` (redacted of ``key``) for a failed request (an ``error`` object, nested
        ones read to their message; an HTTP status other than 200; a body that is not a
        completion); else the answer (``choice_logprobs`` read when ``choices`` are given, a
        constrained answer unwrapped).
    """
    import openai

    if not isinstance(line, OutputLine):
        line = OutputLine.model_validate(line)
    if line.error_code() in NOT_RUN_CODES:
        return None
    if line.error is not None:
        return GenerationResult("", True, error=_one_line(f"batch request failed: {line.error_text()}", key))
    status, body = line.response.status_code, line.response.body
    if status != 200:
        message = body.get("error", body) if isinstance(body, Mapping) else body
        if isinstance(message, Mapping):
            message = message.get("message", message)
        return GenerationResult("", True, error=_one_line(f"HTTP {status}: {message}", key))
    try:
        if not isinstance(body, Mapping):
            raise MalformedReplyError(f"the server's reply is not a completion (a JSON {type(body).__name__}): {str(body)[:120]!r}")
        if url == CHAT_URL:
            from openai.types.chat import ChatCompletion

            from models_inference.backends.server_caps import constrained_answer

            choice = reply_choices(ChatCompletion.construct(**body))[0]
            content = choice.message.content or ""
            text = constrained_answer(constraint, content) if constraint else content
            lps = backend._choice_logprobs(choice, tuple(choices)) if choices else None
            return GenerationResult(text, choice.finish_reason != "length", choice_logprobs=lps)
        choice = reply_choices(openai.types.Completion.construct(**body))[0]
        return GenerationResult(choice.text or "", choice.finish_reason != "length")
    except Exception as exc:  # noqa: BLE001 - kept as an 'error' row, never dropped
        return GenerationResult("", True, error=_one_line(api_error_text(exc, key), key))


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

    def line(self, item, token_field: str | None = None) -> tuple[str, str, bytes]:
        """``(key, url, tail)`` of ``item``: its resume key as JSON (:func:`custom_id`), its
        endpoint and its JSONL line after the ``custom_id`` (:func:`line_tail`)."""
        url, body = request_body(
            self.backend, self.request(item), self.sampling, constraint=self.constraint, choices=self.choices, token_field=token_field
        )
        return custom_id(self.key(item)), url, line_tail(url, body)

    def meta(self, options: BatchOptions) -> dict:
        urls = getattr(self.backend, "base_urls", [])
        return {
            "base_url": urls[0] if urls else None,
            "api_key_env": getattr(self.backend, "api_key_env", "OPENAI_API_KEY"),
            "model": getattr(self.backend, "model_id", None),
            "record": dict(options.record),
            "table": self.table,
            "tag": ledger_tag(self.name),
        }


def new_entry_id() -> str:
    """A new file (ledger entry) id: ``b`` + 16 hex characters."""
    return f"b{uuid.uuid4().hex[:16]}"


@dataclass
class FilePlan:
    """One file of a plan (:func:`plan_files`): its entry id, endpoint, requests, bytes, the
    resume keys of its lines (JSON, in file order) and its lines (each ``custom_id`` naming the
    ledger, the file and the line: :func:`~models_inference.backends.batch_lines.entry_custom_id`)."""

    endpoint: str
    requests: int
    bytes: int
    keys: list[str]
    lines: list[bytes] = field(repr=False, default_factory=list)
    id: str = field(default_factory=new_entry_id)


def plan_files(work: BatchWork, items: Sequence, options: BatchOptions, *, keep_lines: bool = True) -> list[FilePlan]:
    """The files ``items``' requests go into: one endpoint per file (chat and completion
    requests apart), each within ``options``' limits (:func:`split_sizes`, a line's size counted
    with the longest custom id), in plan order.

    Args:
        keep_lines: keep each file's lines (to write them); ``False`` counts only (dry run).

    Raises:
        BatchError: a request larger than a file may hold.
    """
    tag = ledger_tag(work.name)
    id_bytes = len(b'{"custom_id":"",') + MAX_CUSTOM_ID
    token_field = options.token_field or (chat_token_field(work.backend) if items else None)  # once per plan, not per line
    by_url: dict[str, list[tuple[str, bytes | int]]] = {}
    for item in items:
        cid, url, tail = work.line(item, token_field)
        by_url.setdefault(url, []).append((cid, tail if keep_lines else len(tail)))
    out = []
    for url, lines in by_url.items():
        sizes = [id_bytes + (len(tail) if keep_lines else tail) for _, tail in lines]
        for start, stop in split_sizes(sizes, options.max_requests, options.max_bytes):
            part = lines[start:stop]
            plan = FilePlan(url, len(part), sum(sizes[start:stop]), [c for c, _ in part])
            if keep_lines:
                plan.lines = [join_line(entry_custom_id(tag, plan.id, n), tail) for n, (_, tail) in enumerate(part)]
                plan.bytes = sum(len(line) for line in plan.lines)
            out.append(plan)
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
    "RUNNER_ENDPOINTS",
    "chat_token_field",
    "join_line",
    "line_tail",
    "new_entry_id",
    "plan_files",
    "request_body",
    "request_line",
    "result_of",
    "split_sizes",
]
