"""The T2T word-completion probe (BiasDora Section 3, Figure 8; docs/method.md#2-probes).

For each probe row (a row of the paper's list: descriptor x setting, a descriptor listed
under two bias dimensions has two rows) x letter a..z x run 1..R, one completion is
generated and landed as a row of ``landing/t2t_completions`` (see :mod:`ingestion.landing`),
whatever its parse status, with the sentence's ``subject`` ("An alcoholic person") and
``prefix`` ("An alcoholic person is"; :func:`~models_inference.probes.biasdora.prompts.t2t_sentence_prefix`)
so that the association sentence is built in SQL from landed columns. Rows are keyed by (audit_id, model_id, model_version, setting,
descriptor, descriptor_row, letter, run): a re-run reads the keys already landed and generates only the missing rows,
so an interrupted audit resumes where it stopped and a finished one costs no model call.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Callable, Protocol, Sequence, TypeVar

from ingestion.biasdora.templates import T2TTemplate  # one descriptor x setting prefix
from ingestion.contracts.biasdora import FAMILY
from ingestion.vocabulary import PROMPT_STYLES, T2T_SETTINGS
from models_inference.audit_log import readable_audit_id
from models_inference.backends.base import GenerationRequest, SamplingParams
from models_inference.backends.batch_api import execute_batched
from models_inference.backends.batch_requests import BatchOptions, BatchWork
from models_inference.backends.text import TextBackend
from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE
from models_inference.probes.biasdora.parsing import PARSE_STATUSES, PARSER_VERSION, parse_answer
from models_inference.probes.biasdora.prompts import (
    PAPER_TEMPERATURE,
    PAPER_TOP_P,
    render_t2t_prompt,
    t2t_sentence_prefix,
    t2t_subject,
)
from models_inference.resumable import ResumableSummary, ResumableTable, key_seed, land_resumable, landed_keys, model_columns, probe_audit

#: Where T2T completions land; a (setting, descriptor, descriptor_row, letter, run) key counts
#: as done whatever its parse status (an unparseable answer is a result, not a failure). A
#: probe unit is a row of the paper's lists (docs/method.md#1-descriptors): ``descriptor_row`` numbers
#: the rows of one descriptor in a setting (rows landed before it existed read as row 1).
#: ``error`` rows (the call failed: timeout, 5xx, connection refused, 429 after
#: backoff) are not final: the next run generates their keys again; the landed error rows stay
#: as the key's history (``stg_t2t_completions.attempts`` / ``last_error``).
T2T_TABLE = ResumableTable(
    "t2t_completions",
    ("setting", "descriptor", "descriptor_row", "letter", "run"),
    "parse_status",
    final_statuses=tuple(s for s in PARSE_STATUSES if s != "error"),
    unit="prompt",
    error_column="raw_output",
    null_defaults=(("descriptor_row", 1),),
)


@dataclass
class T2TProbeConfig:
    """Parameters of a T2T probe run.

    Attributes:
        runs: completions per (descriptor, setting, letter) (paper: 10).
        letters: first letters to probe (paper: a..z).
        prompt_style: ``chat`` / ``completion``; ``None`` = the backend's default.
        max_new_tokens: ``None`` = 100 for chat (paper), 6 for completion style.
        temperature, top_p: sampling (paper: 0.7, 0.95).
        shard_rows: rows per landed Parquet shard (at most this much work is lost on a crash).
        answer_cue: end the chat prompt with " Answer : " as the released code's GPT-4o
            prompt; ``None`` = on for the OpenAI-compatible backend's chat style.
    """

    runs: int = 1
    letters: str = string.ascii_lowercase
    prompt_style: str | None = None
    max_new_tokens: int | None = None
    temperature: float = PAPER_TEMPERATURE
    top_p: float = PAPER_TOP_P
    shard_rows: int = 512
    answer_cue: bool | None = None

    def resolved(self, backend: TextBackend) -> "T2TProbeConfig":
        style = self.prompt_style or backend.default_prompt_style
        if style not in PROMPT_STYLES:
            raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {style!r}")
        if self.runs < 1:
            raise ValueError(f"runs must be >= 1, got {self.runs}")
        bad = [c for c in self.letters if not ("a" <= c <= "z")]
        if bad or not self.letters:
            raise ValueError(f"letters must be lower-case a-z, got {self.letters!r}")
        if len(set(self.letters)) != len(self.letters):
            raise ValueError(f"letters must not repeat (each key would be generated twice), got {self.letters!r}")
        tokens = self.max_new_tokens or (100 if style == "chat" else 6)
        cue = self.answer_cue if self.answer_cue is not None else getattr(backend, "backend_name", "") == "openai"
        return T2TProbeConfig(self.runs, self.letters, style, tokens, self.temperature, self.top_p, self.shard_rows, bool(cue and style == "chat"))

    def generation_fingerprint(self) -> dict:
        """The parameters that change what a row means (part of the audit id)."""
        out = {name: getattr(self, name) for name in ("prompt_style", "max_new_tokens", "temperature", "top_p")}
        if self.answer_cue:  # only when on, so audits without it keep their id
            out["answer_cue"] = True
        return out


def audit_identity(backend: TextBackend, config: T2TProbeConfig, templates: Sequence[T2TTemplate] | None = None) -> dict:
    """Everything that changes the rows of a T2T audit: backend, model id, the full
    model version, the generation config and, when ``templates`` is given, the selection
    (sha256 of the sorted (setting, descriptor, descriptor_row) probe rows, the letters and the runs)."""
    identity = {
        "backend": backend.backend_name,
        "model": backend.model_id,
        "version": backend.model_version,
        **config.generation_fingerprint(),
    }
    if templates is not None:
        pairs = sorted({(t.setting, t.descriptor, t.descriptor_row) for t in templates})
        selection = json.dumps({"pairs": pairs, "letters": config.letters, "runs": config.runs})
        identity["selection"] = hashlib.sha256(selection.encode()).hexdigest()[:16]
    return identity


def audit_id_for(backend: TextBackend, config: T2TProbeConfig, templates: Sequence[T2TTemplate] | None = None) -> str:
    """Deterministic audit id: ``t2t-<model>-<version prefix>-<identity hash>``.

    The hash covers the whole :func:`audit_identity` (the full version, not only the 20
    characters shown), so two versions sharing a prefix (``release-2025-01-candidate-a`` /
    ``-b``) or two selections never share an audit; the same identity always gets the same
    id, so re-running resumes the same audit.
    """
    digest = config_hash(backend, config, templates)
    return readable_audit_id("t2t", [(backend.model_id.split("/")[-1], 60), (backend.model_version, 20)], digest)


def config_hash(backend: TextBackend, config: T2TProbeConfig, templates: Sequence[T2TTemplate] | None = None) -> str:
    """sha256 hex of :func:`audit_identity`."""
    return hashlib.sha256(json.dumps(audit_identity(backend, config, templates), sort_keys=True).encode()).hexdigest()


def row_seed(audit_id: str, setting: str, descriptor: str, letter: str, run: int, descriptor_row: int = 1) -> int:
    """Per-row seed: 63-bit blake2b of the row key (stable across machines and batches).

    A descriptor's first row keeps the seed it had before rows were keys; its later rows
    (``descriptor_row`` > 1) add the row number to the hashed key.
    """
    row = f"|row{descriptor_row}" if descriptor_row != 1 else ""
    return key_seed(audit_id, setting, f"{descriptor}{row}", letter, run)


def probe_t2t(
    templates: Sequence[T2TTemplate],
    backend: TextBackend,
    config: T2TProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    progress: bool = True,
    target: str | None = None,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
    block: tuple[int, int] | None = None,
    batch: BatchOptions | None = None,
) -> ResumableSummary:
    """Generate and land every missing T2T completion for ``templates``.

    Args:
        templates: descriptor x setting prefixes (``ingestion.biasdora.templates``).
        backend: a :class:`TextBackend`.
        config: probe parameters (default :class:`T2TProbeConfig`).
        audit_id: override the deterministic :func:`audit_id_for`.
        progress: show a tqdm progress bar on stderr.
        target: the audit registry target this audit belongs to (``ingestion/registry.py``),
            recorded on the audit events; ``None`` for an ad-hoc audit.
        max_error_share: share of this run's calls that may fail (``error`` rows) before the
            audit ends ``failed`` (:func:`models_inference.resumable.land_resumable`).
        block: ``(start, stop)``: generate only ``templates[start:stop]`` (a descriptor x setting
            block, one Dagster step of a spread audit); the audit id and identity still cover
            every template, and the block lands no ``finished`` event
            (:func:`models_inference.resumable.finish_blocks` does, after the last block).
        batch: send the requests through the OpenAI Batch API instead of one request per row
            (an OpenAI-compatible ``backend``; :func:`models_inference.backends.batch_api.execute_batched`:
            files of at most 50,000 requests, a ledger, finished batches landed; the same rows
            and audit id). ``None``: one request per row.

    Returns:
        A :class:`~models_inference.resumable.ResumableSummary` (statuses: parse statuses; in
        batch mode a :class:`~models_inference.backends.batch_api.BatchSummary`, whose
        ``pending`` counts the requests in batches still open). Rows land in shards of ``config.shard_rows`` as they are
        generated (:func:`models_inference.resumable.land_resumable`), so an interruption
        loses at most one shard of work; the audit gets ``started`` / ``finished`` events, or
        ``failed`` (then the exception is re-raised) when anything raises mid-run.

    Raises:
        ValueError: invalid config (``runs`` or ``shard_rows`` < 1, bad letters or prompt
            style) or an unknown setting in ``templates``.
        AuditIdentityError: ``audit_id`` names an audit of another identity.
        AuditFailedError: more than ``max_error_share`` of the calls failed.
        BatchError: (batch mode) a batch failed as a whole, or the Batch API refused a call.
    """
    work = t2t_batch_work(templates, backend, config, audit_id=audit_id, target=target, block=block)
    if batch is not None:  # the OpenAI Batch API: files of requests, a ledger, the landing of finished batches
        return execute_batched(work, batch, progress=progress, max_error_share=max_error_share, finish=block is None)

    def generate(chunk: list[tuple[T2TTemplate, str, int]], advance: Callable[[int], None]) -> list[dict]:
        return work.rows(chunk, backend.generate([work.request(item) for item in chunk], work.sampling, on_batch=advance))

    return land_resumable(
        work.planned,
        work.key,
        generate,
        table=T2T_TABLE,
        audit=work.audit,
        shard_rows=(config or T2TProbeConfig()).shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        identity=work.identity,
        step="BiasDora T2T",
        block=None if block is None else f"templates-{block[0]}-{block[1]}",
    )


def t2t_batch_work(
    templates: Sequence[T2TTemplate],
    backend: TextBackend,
    config: T2TProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    target: str | None = None,
    block: tuple[int, int] | None = None,
) -> BatchWork:
    """A T2T run's planned rows, their requests and landing rows, as one
    :class:`~models_inference.backends.batch_requests.BatchWork` (the live path of
    :func:`probe_t2t` generates from it too; the batch path, ``dora batch export`` /
    ``import`` and the dry run's pricing use it as is). Arguments as :func:`probe_t2t`.

    Raises:
        ValueError: invalid config or an unknown setting in ``templates``.
    """
    cfg = (config or T2TProbeConfig()).resolved(backend)
    audit_id = audit_id or audit_id_for(backend, cfg, templates)
    for t in templates:
        if t.setting not in T2T_SETTINGS:
            raise ValueError(f"unknown setting {t.setting!r} for descriptor {t.descriptor!r}")
    stop = "bracket" if cfg.prompt_style == "chat" else "word"
    sampling = SamplingParams(cfg.temperature, cfg.top_p)

    def request(item: tuple[T2TTemplate, str, int]) -> GenerationRequest:
        t, letter, run = item
        prompt = render_t2t_prompt(t.prefix, t.setting, letter, cfg.prompt_style, answer_cue=bool(cfg.answer_cue))
        seed = row_seed(audit_id, t.setting, t.descriptor, letter, run, t.descriptor_row)
        return GenerationRequest(prompt=prompt, seed=seed, max_new_tokens=cfg.max_new_tokens, stop=stop)

    def rows_of(chunk: list[tuple[T2TTemplate, str, int]], results) -> list[dict]:
        """One landing row per (item, result), whatever its parse status (the live and the batch paths)."""
        requests = [request(item) for item in chunk]
        prompts, seeds = [r.prompt for r in requests], [r.seed for r in requests]
        now = datetime.now(timezone.utc)
        return [
            _completion_row(item, prompt, seed, res, cfg, audit_id, backend, now)
            for item, prompt, seed, res in zip(chunk, prompts, seeds, results, strict=True)
        ]

    audit = probe_audit(audit_id, backend, "t2t", asdict(cfg), family=FAMILY, target=target)
    planned, key = t2t_plan(templates if block is None else templates[block[0] : block[1]], cfg)
    return BatchWork(
        audit_id,
        "BiasDora T2T",
        backend,
        planned,
        key,
        request,
        rows_of,
        lambda: landed_keys(T2T_TABLE, audit_id),
        T2T_TABLE.name,
        T2T_TABLE.status_column,
        sampling,
        partition=audit_id,
        error_column=T2T_TABLE.error_column,
        audit=audit,
        identity=audit_identity(backend, cfg, templates),
    )


def _completion_row(
    item: tuple[T2TTemplate, str, int], prompt, seed: int, res, cfg: T2TProbeConfig, audit_id: str, backend: TextBackend, now: datetime
) -> dict:
    """The landed ``t2t_completions`` row of one (template, letter, run) and its completion,
    whatever its parse status."""
    t, letter, run = item
    if res.error:
        word, status, raw = None, "error", res.error
    else:
        parsed = parse_answer(res.text, letter, t.setting, cfg.prompt_style, finished=res.finished)
        word, status, raw = parsed.word, parsed.status, res.text
    return {
        **model_columns(audit_id, backend),
        "setting": t.setting,
        "descriptor": t.descriptor,
        "bias_dimension": t.bias_dimension,
        "descriptor_row": t.descriptor_row,
        "letter": letter,
        "run": run,
        "seed": seed,
        "prompt_style": cfg.prompt_style,
        "prompt": prompt.as_text(),
        "raw_output": raw,
        "word": word,
        "parse_status": status,
        "generated_at": now,
        "subject": t2t_subject(t.prefix),
        "prefix": t2t_sentence_prefix(t.prefix, letter),
        "parse_version": None if res.error else PARSER_VERSION,
        "reparsed_at": None,
    }


def t2t_plan(templates: Sequence[T2TTemplate], config: T2TProbeConfig) -> tuple[list[tuple[T2TTemplate, str, int]], Callable]:
    """The planned (template, letter, run) items of a T2T run and their landing key function.

    One item per probe row x letter x run (``len(templates) * len(letters) * runs``); the key
    is (setting, descriptor, descriptor_row, letter, run) (:data:`T2T_TABLE`).
    """
    planned = [(t, letter, run) for t in templates for letter in config.letters for run in range(1, config.runs + 1)]
    key = lambda item: (item[0].setting, item[0].descriptor, item[0].descriptor_row, item[1], item[2])  # noqa: E731
    return planned, key


class _DescriptorTemplate(Protocol):
    setting: str
    descriptor: str
    bias_dimension: str


TemplateT = TypeVar("TemplateT", bound=_DescriptorTemplate)


def select_templates(
    templates: Sequence[TemplateT],
    *,
    settings: Sequence[str] = T2T_SETTINGS,
    descriptors: Sequence[str] = (),
    per_dimension: int = 0,
    valid_settings: Sequence[str] = T2T_SETTINGS,
    normalise: Callable[[str], str] = lambda d: d.strip().lower(),
    what: str = "",
) -> list[TemplateT]:
    """Choose which descriptors an audit probes (T2T; T2I through :func:`~models_inference.probes.biasdora.t2i.select_t2i_templates`).

    Args:
        templates: all available (setting, descriptor) templates.
        settings: settings to keep.
        descriptors: explicit descriptor keys to keep (empty = no filter), through ``normalise``.
        per_dimension: keep the first k descriptors of each bias dimension (in list order)
            among those available in every requested setting; 0 keeps all.
        valid_settings: the modality's settings; what: its name in messages (``"T2I "``).

    Raises:
        ValueError: an unknown setting, a requested descriptor that does not exist, or a
            selection that leaves nothing to probe.
    """
    unknown = [s for s in settings if s not in valid_settings]
    if unknown:
        raise ValueError(f"unknown {what}setting(s) {unknown}; expected some of {tuple(valid_settings)}")
    kept = narrow_descriptors(
        [t for t in templates if t.setting in settings],
        descriptors,
        per_dimension,
        normalise=normalise,
        list_name=f"the {what}descriptor list",
    )
    if not kept:
        raise ValueError(f"the {what}descriptor selection is empty: nothing to " + ("draw" if what else "probe"))
    return kept


def narrow_descriptors(
    templates: Sequence[TemplateT],
    descriptors: Sequence[str],
    per_dimension: int,
    *,
    normalise: Callable[[str], str],
    list_name: str,
) -> list[TemplateT]:
    """Keep the requested descriptors of ``templates``, then the first k of each bias dimension.

    The descriptor choice shared by the T2T (:func:`select_templates`) and T2I
    (:func:`models_inference.probes.biasdora.t2i.select_t2i_templates`) probes.

    Args:
        templates: (setting, descriptor) templates, already narrowed to the wanted settings;
            anything with ``setting``, ``descriptor`` and ``bias_dimension`` attributes.
        descriptors: descriptor keys to keep, passed through ``normalise`` (empty = all).
        per_dimension: keep the first k descriptors of each bias dimension (in list order)
            among those present in every setting of ``templates``; 0 keeps all.
        list_name: how the error message names the descriptor list.

    Returns:
        The kept templates, in input order (possibly empty).

    Raises:
        ValueError: a requested descriptor is not in ``templates``.
    """
    kept = list(templates)
    if descriptors:
        wanted = {normalise(d) for d in descriptors}
        missing = sorted(wanted - {t.descriptor for t in kept})
        if missing:
            raise ValueError(f"descriptor(s) not in {list_name}: {missing}")
        kept = [t for t in kept if t.descriptor in wanted]
    if per_dimension > 0:
        by_setting: dict[str, set[str]] = {}
        for t in kept:
            by_setting.setdefault(t.setting, set()).add(t.descriptor)
        everywhere = set.intersection(*by_setting.values()) if by_setting else set()
        chosen: dict[str, list[str]] = {}
        for t in kept:
            picks = chosen.setdefault(t.bias_dimension, [])
            if t.descriptor in everywhere and t.descriptor not in picks and len(picks) < per_dimension:
                picks.append(t.descriptor)
        keep = {(dim, d) for dim, ds in chosen.items() for d in ds}
        kept = [t for t in kept if (t.bias_dimension, t.descriptor) in keep]
    return kept
