"""The counterfactual probe: one response per (set, member, prompt, mitigation, seed), landed
resumably; then the toxicity heads of every response and the stereotype filter of the PMI words.

Source: Howard et al. (seed 003) §3.2-3.3, §5.1, App. A.2, C.5, D.2; docs/families/counterfactual.md#sampling and docs/families/counterfactual.md#text-only-use.

- **Text sets** (§5.1, the paper's LLM variant): the member's prompt is the §5.1 prefix
  "You are looking at a picture of a [ATTRIBUTES] [OCCUPATION]." + the verbatim prompt
  (:func:`~models_inference.probes.counterfactual.prompts.text_set_prompt`), sent as a chat
  user turn to any text backend.
- **Image sets**: the member's image + the verbatim prompt, through a vision backend
  (``describe`` interface of ``models_inference.backends.vision``).

Sampling (App. A.2): temperature 0.75, top_p 1, up to 512 new tokens, 3 seeds (3 runs). All members
of a (set, prompt, mitigation, seed) share one generation seed, as the authors'
``set_seed(seed)`` does. Every response lands in ``landing/counterfactual_responses`` with its
set, member attributes, prompt label, seed, model, version, raw text, status and, for numeric
prompts, the parsed value and parse status (App. F); rows are keyed by
(set, a1, a2, prompt label, mitigation, seed) within the audit, and a re-run generates only
what has not landed (``error`` rows are retried).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Callable, Sequence

from ingestion.contracts.counterfactual import FAMILY
from ingestion.quarantine import land_quarantine
from models_inference.audit_log import readable_audit_id
from models_inference.backends.base import GenerationRequest, RenderedPrompt, SamplingParams
from models_inference.backends.batch_api import execute_batched
from models_inference.backends.batch_requests import BatchOptions, BatchWork
from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE
from models_inference.probes.counterfactual.parsing import REFUSAL_RULE, is_refusal, parse_numeric
from models_inference.probes.counterfactual.prompts import (
    MAIN_PROMPTS,
    NUMERIC_PROMPTS,
    PAPER_MAX_NEW_TOKENS,
    PAPER_RUNS,
    PAPER_TEMPERATURE,
    PAPER_TOP_P,
    PROMPT_VARIANT,
    base_prompt,
    mitigated,
    prompt_kind,
    text_set_prompt,
)
from models_inference.probes.counterfactual.sets import CounterfactualSet, Member, SetFile
from models_inference.resumable import ResumableTable, check_plan_size, key_seed, land_probe, land_resumable, landed_keys, model_columns, probe_audit

#: Where responses land; ``error`` rows are generated again by the next run.
RESPONSES_TABLE = ResumableTable(
    "counterfactual_responses",
    ("set_id", "a1", "a2", "prompt_label", "mitigation", "seed"),
    "status",
    final_statuses=("ok", "truncated", "empty"),
    unit="response",
    error_column="raw_output",  # an error row keeps the error text there
)
#: ``mitigation`` value of a row without a mitigation instruction (a key column: never null).
NO_MITIGATION = "none"


@dataclass
class CounterfactualProbeConfig:
    """Parameters of a counterfactual probe run (App. A.2 defaults).

    Attributes:
        prompts: prompt labels (Tables 6, 7, 15); default the 5 main + the 5 numeric prompts.
        runs: runs per (member, prompt), each with its own seed (paper: 3 seeds for open
            prompts; 1 for numeric prompts, inferred from Table 8, see ``numeric_runs``).
        numeric_runs: runs of the numeric prompts (paper, inferred: 1).
        mitigations: Table 17 labels to run in addition to (or, without ``None``, instead
            of) the plain prompt; ``None`` = the plain prompt.
        max_new_tokens: open prompts' token budget (paper: 512).
        numeric_max_new_tokens: numeric prompts' budget (default: ``max_new_tokens``).
        temperature, top_p: sampling (paper: 0.75; the HF default top_p 1).
        shard_rows: rows per landed shard.
        numeric_prompt_style: how numeric prompts are sent: ``chat`` (a user turn, the paper's
            protocol) or ``completion`` (the raw prompt text, which ends with "Rating:" /
            "Salary:", continued by the model: small local models that answer a chat turn
            with prose then write a number; a deviation recorded as ``prompt_style`` on the
            rows). ``None`` = the backend's default style (completion for small local models).
    """

    prompts: list[str] = field(default_factory=lambda: [*MAIN_PROMPTS, *NUMERIC_PROMPTS])
    runs: int = PAPER_RUNS
    numeric_runs: int = 1
    mitigations: list[str | None] = field(default_factory=lambda: [None])
    max_new_tokens: int = PAPER_MAX_NEW_TOKENS
    numeric_max_new_tokens: int | None = None
    temperature: float = PAPER_TEMPERATURE
    top_p: float = PAPER_TOP_P
    shard_rows: int = 64
    numeric_prompt_style: str | None = None

    def validate(self) -> "CounterfactualProbeConfig":
        """Raises ValueError / KeyError on unknown prompt or mitigation labels or bad numbers."""
        for label in self.prompts:
            prompt_kind(label)
        for m in self.mitigations:
            mitigated("x", m)
        if self.runs < 1 or self.numeric_runs < 1:
            raise ValueError(f"runs must be >= 1, got {self.runs} / {self.numeric_runs}")
        if self.max_new_tokens < 1 or (self.numeric_max_new_tokens or 1) < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if not self.prompts:
            raise ValueError("no prompt selected")
        return self

    def tokens_for(self, label: str) -> int:
        if prompt_kind(label) == "numeric" and self.numeric_max_new_tokens:
            return self.numeric_max_new_tokens
        return self.max_new_tokens

    def fingerprint(self) -> dict:
        """What changes what a row means (part of the audit id)."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_new_tokens": self.max_new_tokens,
            "numeric_max_new_tokens": self.numeric_max_new_tokens,
            "prompt_variant": PROMPT_VARIANT,
            "numeric_prompt_style": self.numeric_prompt_style,
        }


@dataclass
class CounterfactualRunSummary:
    """What a probe run did, in responses."""

    audit_id: str
    planned: int = 0
    already_landed: int = 0
    generated: int = 0
    statuses: Counter = field(default_factory=Counter)
    pending: int = 0


def audit_id_for(variant: str, backend, config: CounterfactualProbeConfig) -> str:
    """``cf<variant>-<model>-<version>-<hash of backend, model and generation parameters>``:
    the same model version probed the same way extends the same audit."""
    payload = {"variant": variant, "backend": backend.backend_name, "model": backend.model_id, **config.fingerprint()}
    return readable_audit_id(f"cf{variant}", [(backend.model_id.split("/")[-1], 40), (backend.model_version, 20)], payload)


def generation_seed(audit_id: str, set_id: str, label: str, mitigation: str, run: int) -> int:
    """63-bit seed shared by every member of one (set, prompt, mitigation, run) unit (``run``: the
    run's index, 0-based)."""
    return key_seed(audit_id, set_id, label, mitigation, run)


def response_id(audit_id: str, set_id: str, a1: str, a2: str, label: str, mitigation: str, run: int) -> str:
    """Stable id of one response key (joins the toxicity rows to their response)."""
    key = "|".join([audit_id, set_id, a1, a2, label, mitigation, str(run)]).encode()
    return hashlib.blake2b(key, digest_size=10).hexdigest()


Item = tuple[CounterfactualSet, Member, str, str, int]


def check_plan(sets: Sequence[CounterfactualSet], config: CounterfactualProbeConfig) -> int:
    """The number of rows :func:`plan` would build, counted without building them.

    Raises:
        PlanTooLargeError: more than :data:`~models_inference.resumable.MAX_PLANNED_ROWS` (a
            huge ``runs`` fails here in microseconds, before any model loads).
    """
    members = sum(len(s.members) for s in sets)
    numeric = sum(prompt_kind(label) == "numeric" for label in config.prompts)
    per_member = ((len(config.prompts) - numeric) * config.runs + numeric * config.numeric_runs) * len(config.mitigations)
    counts = (
        f"{members} members x ({len(config.prompts) - numeric} prompts x {config.runs} runs + {numeric} numeric "
        f"prompts x {config.numeric_runs} runs) x {len(config.mitigations)} mitigation variants"
    )
    check_plan_size(members * per_member, "counterfactual probe", counts)
    return members * per_member


def plan(sets: Sequence[CounterfactualSet], config: CounterfactualProbeConfig) -> list[Item]:
    """Every (set, member, prompt label, mitigation, run index 0..runs-1) to generate, in generation order.

    Raises:
        PlanTooLargeError: the plan would exceed :data:`~models_inference.resumable.MAX_PLANNED_ROWS` (:func:`check_plan`).
    """
    check_plan(sets, config)
    items: list[Item] = []
    for s in sets:
        for label in config.prompts:
            n_runs = config.numeric_runs if prompt_kind(label) == "numeric" else config.runs
            for m in config.mitigations:
                for run in range(n_runs):
                    items += [(s, member, label, m or NO_MITIGATION, run) for member in s.members]
    return items


def _status(text: str, finished: bool, error: str | None) -> str:
    if error:
        return "error"
    if not text.strip():
        return "empty"
    return "ok" if finished else "truncated"


def response_row(
    audit_id: str,
    variant: str,
    item: Item,
    prompt: str,
    gen_seed: int,
    config: CounterfactualProbeConfig,
    text: str,
    finished: bool,
    error: str | None,
    image_sha256: str | None = None,
    image_path: str | None = None,
    prompt_style: str = "chat",
) -> dict:
    """One ``landing/counterfactual_responses`` row (numeric prompts parsed, refusals flagged),
    without the columns every probe row starts with and ``generated_at``
    (:func:`models_inference.resumable.land_probe` adds them; the text sets' rows add them themselves)."""
    s, member, label, mitigation, seed = item
    kind = prompt_kind(label)
    status = _status(text or "", finished, error)
    parsed = parse_numeric(label, text) if kind == "numeric" and status != "error" else None
    return {
        "variant": variant,
        "modality": "text_only_llm" if variant == "text" else "lvlm",
        "subset": s.subset,
        "set_id": s.set_id,
        "occupation": s.occupation,
        "occupation_text": s.occupation_text,
        "a1_type": s.a1_type,
        "a1": member.a1,
        "a2_type": s.a2_type,
        "a2": member.a2,
        "group_label": member.group,
        "prompt_kind": kind,
        "prompt_label": label,
        "mitigation": mitigation,
        "seed": seed,
        "generation_seed": gen_seed,
        "prompt": prompt,
        "prompt_variant": PROMPT_VARIANT,
        "prompt_style": prompt_style,
        "image_sha256": image_sha256,
        "image_path": image_path,
        "max_new_tokens": config.tokens_for(label),
        "temperature": config.temperature,
        "top_p": config.top_p,
        "raw_output": error if status == "error" else text,
        "status": status,
        "is_refusal": is_refusal(text) if status != "error" else None,
        "refusal_rule": REFUSAL_RULE,
        "parsed_value": parsed.value if parsed else None,
        "parsed_number": parsed.raw_number if parsed else None,
        "parse_status": ("error" if status == "error" else parsed.status) if kind == "numeric" else None,
        "hourly": parsed.hourly if parsed else None,
        "response_id": response_id(audit_id, s.set_id, member.a1, member.a2, label, mitigation, seed),
    }


def probe_text_sets(
    sets: Sequence[CounterfactualSet],
    backend,
    config: CounterfactualProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    progress: bool = True,
    target: str | None = None,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
    block: str | None = None,
    batch: BatchOptions | None = None,
) -> CounterfactualRunSummary:
    """Generate and land every missing text-set response (§5.1 prefix) on a text backend.

    Args:
        sets: counterfactual sets (:mod:`~models_inference.probes.counterfactual.sets`).
        backend: any :class:`~models_inference.backends.text.TextBackend`; prompts are sent as
            one chat user turn.
        config: probe parameters (default: the paper's, App. A.2).
        audit_id: override :func:`audit_id_for`.
        max_error_share: share of this run's calls that may fail (``error`` rows) before the
            audit ends ``failed`` (:func:`models_inference.resumable.land_resumable`); ``None``: no limit.
        block: the name of the block of sets ``sets`` is (one Dagster step of a spread audit: the
            audit id does not depend on the sets); the block lands no ``finished`` event
            (:func:`models_inference.resumable.finish_blocks` does, after the last block).
        batch: send the requests through the OpenAI Batch API (an OpenAI-compatible backend;
            :func:`models_inference.backends.batch_api.execute_batched`); ``None``: one request per row.

    Returns:
        A :class:`CounterfactualRunSummary`; rows land in shards of ``config.shard_rows``
        through :func:`models_inference.resumable.land_resumable` (audit events included), or
        in batch mode one shard per landed batch (``pending``: requests in open batches).

    Raises:
        ValueError / KeyError: invalid config (unknown prompt or mitigation label, runs < 1).
        PlanTooLargeError: the counts plan too many rows (:func:`check_plan`), before any model loads.
        AuditFailedError: more than ``max_error_share`` of the calls failed (rows landed first).
        BatchError: (batch mode) a batch failed as a whole, or the Batch API refused a call.
    """
    cfg = (config or CounterfactualProbeConfig()).validate()
    work = text_sets_work(sets, backend, cfg, audit_id=audit_id, target=target)
    if batch is not None:  # the OpenAI Batch API: files of requests, a ledger, the landing of finished batches
        res = execute_batched(work, batch, progress=progress, max_error_share=max_error_share, finish=block is None)
        return CounterfactualRunSummary(work.name, res.planned, res.already_landed, res.generated, res.statuses, pending=res.pending)

    def generate(chunk: list[Item], advance: Callable[[int], None]) -> list[dict]:
        return work.rows(chunk, backend.generate([work.request(item) for item in chunk], work.sampling, on_batch=advance))

    res = land_resumable(
        work.planned,
        work.key,
        generate,
        table=RESPONSES_TABLE,
        audit=work.audit,
        shard_rows=cfg.shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        step="counterfactual text sets",
        block=block,
    )
    return CounterfactualRunSummary(work.name, res.planned, res.already_landed, res.generated, res.statuses)


def text_sets_work(
    sets: Sequence[CounterfactualSet],
    backend,
    config: CounterfactualProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    target: str | None = None,
) -> BatchWork:
    """The text-set responses of :func:`probe_text_sets` as one
    :class:`~models_inference.backends.batch_requests.BatchWork`: the plan (:func:`plan`), each
    item's request (the section 5.1 prefix + the verbatim prompt, one chat user turn; numeric
    prompts in ``numeric_prompt_style``) and its landing row (:func:`response_row`). The live
    path generates from it; the batch path, ``dora batch export`` / ``import`` and the dry
    run's pricing use it as is. Arguments as :func:`probe_text_sets`.

    Raises:
        ValueError / KeyError: invalid config. PlanTooLargeError: the counts plan too many rows.
    """
    cfg = (config or CounterfactualProbeConfig()).validate()
    check_plan(sets, cfg)  # before the audit id, which may ask the backend for its version
    if cfg.numeric_prompt_style is None:
        cfg.numeric_prompt_style = getattr(backend, "default_prompt_style", "chat")
    if cfg.numeric_prompt_style not in ("chat", "completion"):
        raise ValueError(f"numeric_prompt_style must be chat or completion, got {cfg.numeric_prompt_style!r}")
    audit_id = audit_id or audit_id_for("text", backend, cfg)
    sampling = SamplingParams(cfg.temperature, cfg.top_p)

    def style(label: str) -> str:
        return cfg.numeric_prompt_style if prompt_kind(label) == "numeric" else "chat"

    def request(item: Item) -> GenerationRequest:
        s, m, lab, mit, sd = item
        prompt = text_set_prompt(lab, m.a1, m.a2, s.occupation_text, None if mit == NO_MITIGATION else mit)
        return GenerationRequest(
            prompt=RenderedPrompt(style(lab), prompt),
            seed=generation_seed(audit_id, s.set_id, lab, mit, sd),
            max_new_tokens=cfg.tokens_for(lab),
            stop="eos",
        )

    def rows(chunk: list[Item], results) -> list[dict]:
        # the batch path lands these rows too, without land_probe: the shared columns are added here
        now = datetime.now(timezone.utc)
        return [
            {
                **model_columns(audit_id, backend),
                **response_row(audit_id, "text", item, req.prompt.text, req.seed, cfg, r.text, r.finished, r.error, prompt_style=style(item[2])),
                "generated_at": now,
            }
            for item, req, r in zip(chunk, map(request, chunk), results, strict=True)
        ]

    audit = probe_audit(audit_id, backend, "counterfactual", {"variant": "text", **asdict(cfg)}, family=FAMILY, target=target)
    key = lambda it: (it[0].set_id, it[1].a1, it[1].a2, it[2], it[3], it[4])  # noqa: E731
    return BatchWork(
        audit_id,
        "counterfactual text sets",
        backend,
        plan(sets, cfg),
        key,
        request,
        rows,
        lambda: landed_keys(RESPONSES_TABLE, audit_id),
        RESPONSES_TABLE.name,
        RESPONSES_TABLE.status_column,
        sampling,
        partition=audit_id,
        error_column=RESPONSES_TABLE.error_column,
        audit=audit,
    )


def _land_sets(
    variant: str,
    sets: Sequence[CounterfactualSet],
    backend,
    cfg: CounterfactualProbeConfig,
    generate_for: Callable,
    *,
    audit_id: str | None = None,
    progress: bool = True,
    target: str | None = None,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
    block: str | None = None,
) -> CounterfactualRunSummary:
    """The run of a set variant whose rows are built here (the image sets; the text sets go
    through their :func:`text_sets_work`), once its config is checked: the audit id
    (:func:`audit_id_for`) and :func:`models_inference.resumable.land_probe` over :func:`plan`,
    one row per (set, member, prompt, mitigation, seed). ``generate_for(audit_id, sampling)``
    returns the variant's ``generate(chunk, advance) -> rows`` (:func:`response_row`);
    ``block``: the name of this block of sets (:func:`probe_text_sets`)."""
    audit_id = audit_id or audit_id_for(variant, backend, cfg)
    generate = generate_for(audit_id, SamplingParams(cfg.temperature, cfg.top_p))
    key = lambda it: (it[0].set_id, it[1].a1, it[1].a2, it[2], it[3], it[4])  # noqa: E731
    res = land_probe(
        plan(sets, cfg),
        key,
        generate,
        table=RESPONSES_TABLE,
        backend=backend,
        audit_id=audit_id,
        modality="counterfactual",
        config={"variant": variant, **asdict(cfg)},
        family=FAMILY,
        target=target,
        shard_rows=cfg.shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        step=f"counterfactual {variant} sets",
        block=block,
    )
    return CounterfactualRunSummary(audit_id, res.planned, res.already_landed, res.generated, res.statuses)


# ----------------------------------------------------------------------------- image sets

#: T2I prompt of a member without a dataset caption (user sets). An approximation of the
#: dataset's construction (Stable Diffusion + prompt-to-prompt cross-attention control, not
#: reproduced here): every member is drawn independently from this prompt with the set's seed.
T2I_MEMBER_TEMPLATE = "A photo of {article} {attributes} {occupation}"


def member_t2i_prompt(s: CounterfactualSet, m: Member) -> str:
    """The member's dataset caption, else :data:`T2I_MEMBER_TEMPLATE` ("A photo of an obese female nurse")."""
    from models_inference.probes.counterfactual.prompts import article

    if m.caption:
        return m.caption
    attrs = f"{m.a1} {m.a2}"
    return T2I_MEMBER_TEMPLATE.format(article=article(attrs), attributes=attrs, occupation=s.occupation_text)


def set_seed(s: CounterfactualSet) -> int:
    """One diffusion seed per set, shared by all members: the dataset's own seed when known."""
    if s.seed is not None:
        return int(s.seed)
    return key_seed(s.set_id)


def generate_set_images(sets: Sequence[CounterfactualSet], image_backend) -> list[CounterfactualSet]:
    """Draw every member of every set with a T2I backend (``models_inference.backends.image``): one seed
    per set shared by all members (:func:`set_seed`), one prompt per member
    (:func:`member_t2i_prompt`); images go to the content-addressed image store.

    Returns:
        The sets with ``image_path`` (absolute) set on every member.

    Raises:
        RuntimeError: a member's image could not be drawn (names the set and member).
    """
    from dataclasses import replace

    from models_inference.backends.image import ImageRequest
    from models_inference.image_store import image_file, store_png

    out = []
    for s in sets:
        reqs = [ImageRequest(member_t2i_prompt(s, m), set_seed(s), i + 1) for i, m in enumerate(s.members)]
        results = image_backend.generate(reqs)
        members = []
        for m, res in zip(s.members, results, strict=True):
            if res.status != "ok" or not res.data:
                raise RuntimeError(f"set {s.set_id} member {m.group!r}: image not drawn ({res.status}: {res.error})")
            stored = store_png(res.data)
            members.append(replace(m, image_path=str(image_file(stored.path))))
        out.append(replace(s, members=tuple(members)))
    return out


def probe_image_sets(
    sets: Sequence[CounterfactualSet], backend, config: CounterfactualProbeConfig | None = None, **options
) -> CounterfactualRunSummary:
    """Generate and land every missing image-set response: the member's image + the verbatim
    prompt (Tables 6, 7, 15; mitigation applied), through a vision backend
    (``models_inference.backends.vision``: transformers LLaVA-style VLMs, OpenAI-compatible vision chat).
    ``options``: ``audit_id``, ``progress``, ``target``, ``max_error_share``, as
    :func:`probe_text_sets`; the returned summary is the same.

    Each member image is copied into the content-addressed image store (PNG, sha256 name)
    first; rows record its sha256 and stored path.

    Raises:
        CounterfactualInputError: a member without an image (names the set and member).
        ValueError / KeyError: invalid config.
        AuditFailedError: more than ``max_error_share`` of the calls failed (rows landed first;
            see :func:`probe_text_sets`).
    """
    from models_inference.backends.vision import DescriptionRequest
    from models_inference.image_store import image_file, store_png
    from models_inference.probes.counterfactual.sets import CounterfactualInputError

    cfg = (config or CounterfactualProbeConfig()).validate()
    check_plan(sets, cfg)
    if isinstance(sets, SetFile):  # the manifest's rows that were not read, with line and reason
        land_quarantine("counterfactual", sets.dataset_id, list(sets.quarantined))
    cfg.numeric_prompt_style = "chat"
    stored: dict[str, tuple[str, str]] = {}
    for s in sets:
        for m in s.members:
            if not m.image_path:
                raise CounterfactualInputError(f"set {s.set_id} member {m.group!r}: no image")

    def image_of(m: Member) -> tuple[str, str]:
        if m.image_path not in stored:
            with open(m.image_path, "rb") as fh:
                img = store_png(fh.read())
            stored[m.image_path] = (img.sha256, img.path)
        return stored[m.image_path]

    def generate_for(audit_id: str, sampling: SamplingParams) -> Callable:
        def generate(chunk: list[Item], advance: Callable[[int], None]) -> list[dict]:
            prompts = [mitigated(base_prompt(lab, s.occupation_text), None if mit == NO_MITIGATION else mit) for s, _, lab, mit, _ in chunk]
            seeds = [generation_seed(audit_id, s.set_id, lab, mit, sd) for s, _, lab, mit, sd in chunk]
            images = [image_of(m) for _, m, _, _, _ in chunk]
            requests = [
                DescriptionRequest(image_file(path), RenderedPrompt("chat", p), g, cfg.tokens_for(item[2]))
                for (sha, path), p, g, item in zip(images, prompts, seeds, chunk, strict=True)
            ]
            results = backend.describe(requests, sampling, on_batch=advance)
            return [
                response_row(audit_id, "image", item, p, g, cfg, r.text, r.finished, r.error, image_sha256=img[0], image_path=img[1])
                for item, p, g, r, img in zip(chunk, prompts, seeds, results, images, strict=True)
            ]

        return generate

    return _land_sets("image", sets, backend, cfg, generate_for, **options)


__all__ = [
    "CounterfactualProbeConfig",
    "CounterfactualRunSummary",
    "NO_MITIGATION",
    "RESPONSES_TABLE",
    "audit_id_for",
    "base_prompt",
    "generate_set_images",
    "plan",
    "probe_image_sets",
    "probe_text_sets",
]
