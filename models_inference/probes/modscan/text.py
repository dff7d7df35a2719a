"""ModSCAN text-only analogues on any text backend (docs/families/modscan.md#text-only-use; NOT FROM PAPER).

ModSCAN (seed 000) has no text-only variant. These two analogues let a text LLM (the
embedded SmolLM2-135M offline, or any OpenAI-compatible chat model) give ModSCAN-style
results; every row says so in its ``probe`` (``modscan_text_persona`` / ``modscan_text_faces``),
its ``modality`` (``text``) and its ``deviation`` note.

* ``modscan_text_persona`` (language modality without an image): per persona trait x
  attribute x sample, the Table 2 scene description + the Table 3 sentence with the group
  terms in a per-query shuffled order (seeded, stored as ``term_order``); condition
  ``blank`` sends the sentence alone (the analogue of Table 5's blank image). Parsed with
  §3.2's Table 10 word lists / race phrases.
* ``modscan_text_faces`` (vision modality without faces): per instance of the three
  scenarios x attribute x sample, two people described left and right, then §3.1's question.
  Sides are counterbalanced (instance i, sample s: race combination ((s-1) div 2 + i) mod 6 of
  the 6 unordered race pairs; the pair's first group is left when s + i is odd), stored as
  ``left_group`` / ``right_group``. Parsed with the free-text left/right rule.

How an answer is asked for (``answer_mode``): ``free`` (default) sends the prompt and parses the
free answer, as the paper does. ``constrained`` (an option, NOT FROM PAPER) restricts the answer
to the query's choices, ``left`` / ``right`` or the shuffled social terms as the prompt writes
them (:func:`~models_inference.probes.modscan.prompts.term_phrases`), through the backend's
``choose``: a local model's first token restricted to the choices (when each choice is one token
of its tokenizer), a server's strongest choice constraint (llama.cpp ``grammar``, vLLM
``structured_outputs``, SGLang ``regex``, a strict ``json_schema``). Where neither is possible
(a server that honours no constraint, multi-token race phrases on a local model) the query is
asked freely. Every row stores the mode it was answered in (``answer_mode``: ``free``,
``constrained`` or the server's constraint) and a constrained row says so in its ``deviation``;
the answer goes through the same parser as a free one, so an answer outside the choices keeps
the status the parser gives it. ``constrained`` is part of the audit id (free audits keep theirs).

Rows land in ``landing/modscan_responses`` through the shared resumable loop
(:func:`models_inference.resumable.land_resumable`), keyed by (probe, attribute, scenario,
instance, condition, prefix, query_unit): a re-run generates only what has not landed; an
``error`` row is retried.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from ingestion.contracts.modscan import FAMILY
from ingestion.errors import ModelNotAvailableError
from models_inference.audit_log import readable_audit_id
from models_inference.backends.base import GenerationRequest, RenderedPrompt, SamplingParams
from models_inference.backends.server_caps import ROW_ANSWER_MODES
from models_inference.backends.text import TextBackend
from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE
from models_inference.probes.modscan.parsing import parse_side, parse_term, strip_echo
from models_inference.probes.modscan.prompts import SIDE_CHOICES, term_phrases, text_faces_prompt, text_persona_prompt, with_prefix
from models_inference.probes.modscan.tables import ATTRIBUTES, GROUPS, PREFIXES, SCENARIOS
from models_inference.resumable import ResumableSummary, ResumableTable, check_plan_size, key_seed, land_probe

#: Where ModSCAN queries land; a key whose rows are all ``error`` is generated again.
MODSCAN_TABLE = ResumableTable(
    "modscan_responses",
    ("probe", "attribute", "scenario", "instance", "condition", "prefix", "query_unit"),
    "status",
    final_statuses=("ok", "na_no_term", "na_multiple_terms", "na_box_filtered", "na_box_outside", "na_box_conflict"),
    unit="query",
    error_column="error",
)

TEXT_PROBES: tuple[str, ...] = ("modscan_text_persona", "modscan_text_faces")
CONDITIONS: tuple[str, ...] = ("original", "blank")
#: The 6 unordered race combinations of §5.1 ("all possible combinations of two faces").
RACE_PAIRS: tuple[tuple[str, str], ...] = tuple(itertools.combinations(GROUPS["race"], 2))
#: How an answer is asked for (module docstring): ``free`` = the paper's parsed free answer;
#: ``constrained`` = restricted to the query's choices where the backend can (NOT FROM PAPER).
ANSWER_MODES: tuple[str, ...] = ("free", "constrained")

_DEVIATION = {
    "modscan_text_persona": "NOT FROM PAPER: text-only analogue of the language modality (docs/families/modscan.md#text-only-use): "
    "scene described in text (Table 2 SD prompt) instead of an SD image",
    "modscan_text_faces": "NOT FROM PAPER: text-only analogue of the vision modality (docs/families/modscan.md#text-only-use): "
    "two people described in text instead of spliced UTKFace faces; sides counterbalanced",
}


@dataclass
class TextProbeConfig:
    """Parameters of a text-analogue run (defaults: the default audit's small sample).

    Attributes:
        probes: which analogues (:data:`TEXT_PROBES`).
        attributes: ``gender`` / ``race``.
        scenarios: scenarios of ``modscan_text_faces`` (``modscan_text_persona`` is persona only,
            as the paper's language modality, §3.2).
        conditions: ``original`` / ``blank`` (text_persona only; text_faces is ``original``).
        prefixes: prompt prefixes (§7, App. C; ``none`` = the original prompt).
        runs: runs of each query per (instance, attribute, condition, prefix), each with its
            own seed (paper: 200 images per trait; A.6 suggests 200 samples at temperature > 0).
        instances_per_scenario: k instances of each Table 1 scenario, spread evenly over its
            list (:func:`spread`; 0 = all).
        max_new_tokens, temperature, top_p: generation ([UNDEFINED] in the paper; A.2.3).
        prompt_style: ``chat`` (the prompt as the user turn) -- the only style.
        answer_mode: ``free`` (the paper's parsed free answer) or ``constrained`` (restricted to
            the query's choices where the backend can; NOT FROM PAPER, module docstring).
        shard_rows: rows per landed shard.
    """

    probes: Sequence[str] = TEXT_PROBES
    attributes: Sequence[str] = ATTRIBUTES
    scenarios: Sequence[str] = tuple(SCENARIOS)
    conditions: Sequence[str] = CONDITIONS
    prefixes: Sequence[str] = ("none",)
    runs: int = 2
    instances_per_scenario: int = 0
    max_new_tokens: int = 24
    temperature: float = 0.7
    top_p: float = 0.95
    prompt_style: str = "chat"
    answer_mode: str = "free"
    shard_rows: int = 256

    def validate(self) -> "TextProbeConfig":
        """Raises ValueError naming the first bad field; PlanTooLargeError when the counts
        (runs x instances x ...) plan more than :data:`~models_inference.resumable.MAX_PLANNED_ROWS` queries."""
        checks = [
            ("probes", self.probes, TEXT_PROBES),
            ("attributes", self.attributes, ATTRIBUTES),
            ("scenarios", self.scenarios, tuple(SCENARIOS)),
            ("conditions", self.conditions, CONDITIONS),
            ("prefixes", self.prefixes, tuple(PREFIXES)),
        ]
        for name, values, allowed in checks:
            bad = [v for v in values if v not in allowed]
            if bad or not values:
                raise ValueError(f"modscan {name}: {list(values)!r} must be a non-empty subset of {list(allowed)}")
        if self.runs < 1:
            raise ValueError(f"modscan runs must be >= 1, got {self.runs}")
        if self.instances_per_scenario < 0:
            raise ValueError(f"modscan instances_per_scenario must be >= 0, got {self.instances_per_scenario}")
        if self.prompt_style != "chat":
            raise ValueError(f"modscan prompt_style must be 'chat', got {self.prompt_style!r}")
        if self.answer_mode not in ANSWER_MODES:
            raise ValueError(f"modscan answer_mode must be one of {list(ANSWER_MODES)}, got {self.answer_mode!r}")
        rows = self.planned_rows()
        check_plan_size(
            rows, "modscan text analogues", f"{rows // self.runs:,} (probe, attribute, scenario instance, condition, prefix) cells x {self.runs} runs"
        )
        return self

    def planned_rows(self) -> int:
        """The number of queries :func:`plan_text_queries` builds, counted without building them."""
        cells = 0
        for probe in self.probes:
            scenarios = ("persona",) if probe == "modscan_text_persona" else tuple(self.scenarios)
            conditions = len(self.conditions) if probe == "modscan_text_persona" else 1
            instances = sum(len(spread(SCENARIOS[s], self.instances_per_scenario)) for s in scenarios)
            cells += len(self.attributes) * instances * conditions * len(self.prefixes)
        return cells * self.runs

    def generation_params(self) -> dict:
        """What changes the meaning of a row (part of the audit id and of every row). The answer
        mode enters only when ``constrained``, so the ids of free audits stay what they were."""
        params = {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p, "prompt_style": self.prompt_style}
        if self.answer_mode != "free":
            params["answer_mode"] = self.answer_mode
        return params


@dataclass(frozen=True)
class TextQuery:
    """One planned text-analogue query (the key fields of a ``modscan_responses`` row)."""

    probe: str
    attribute: str
    scenario: str
    instance: str
    condition: str
    prefix: str
    run: int
    term_order: tuple[str, ...] = ()
    left_group: str | None = None
    right_group: str | None = None
    seed: int = 0

    @property
    def query_unit(self) -> str:
        # the landed key spells a run "sample-k" (files already written keep their keys)
        return f"sample-{self.run}"

    def key(self) -> tuple:
        return (self.probe, self.attribute, self.scenario, self.instance, self.condition, self.prefix, self.query_unit)

    def choices(self) -> tuple[str, ...]:
        """The answers a constrained query is restricted to: ``left`` / ``right`` (text faces), or
        the social terms in this query's shuffled order, as the prompt writes them (text persona)."""
        if self.probe == "modscan_text_persona":
            return term_phrases(self.attribute, self.term_order)
        return SIDE_CHOICES

    def prompt(self) -> str:
        if self.probe == "modscan_text_persona":
            base = text_persona_prompt(self.instance, self.attribute, self.term_order, blank=self.condition == "blank")
        else:
            base = text_faces_prompt(self.instance, self.left_group, self.right_group)
        return with_prefix(self.prefix, base)


def spread(items: Sequence[str], k: int) -> tuple[str, ...]:
    """``k`` items spread evenly over ``items`` (first and last included; all when ``k`` is 0 or
    >= len): the default audit's sample of Table 1 instances (NOT FROM PAPER)."""
    n = len(items)
    if k <= 0 or k >= n:
        return tuple(items)
    if k == 1:
        return (items[0],)
    return tuple(items[int(i * (n - 1) / (k - 1) + 0.5)] for i in range(k))


def plan_text_queries(config: TextProbeConfig, audit_id: str) -> list[TextQuery]:
    """Every query of a text-analogue run, in generation order (deterministic for an audit).

    Raises:
        ValueError: invalid config.
    """
    cfg = config.validate()
    queries = []
    for probe in cfg.probes:
        scenarios = ("persona",) if probe == "modscan_text_persona" else tuple(cfg.scenarios)
        conditions = tuple(cfg.conditions) if probe == "modscan_text_persona" else ("original",)
        for attribute, scenario, condition, prefix in itertools.product(cfg.attributes, scenarios, conditions, cfg.prefixes):
            instances = spread(SCENARIOS[scenario], cfg.instances_per_scenario)
            for index, instance in enumerate(instances):
                for run in range(1, cfg.runs + 1):
                    seed = key_seed(audit_id, probe, attribute, scenario, instance, condition, prefix, run)
                    groups = GROUPS[attribute]
                    if probe == "modscan_text_persona":  # Shuffle(.) of §3.2, drawn per query
                        order = tuple(random.Random(seed).sample(groups, len(groups)))
                        queries.append(TextQuery(probe, attribute, scenario, instance, condition, prefix, run, term_order=order, seed=seed))
                    else:
                        pair = groups if attribute == "gender" else RACE_PAIRS[((run - 1) // 2 + index) % len(RACE_PAIRS)]
                        left, right = pair if (run + index) % 2 else pair[::-1]
                        queries.append(
                            TextQuery(probe, attribute, scenario, instance, condition, prefix, run, left_group=left, right_group=right, seed=seed)
                        )
    return queries


def text_audit_id(backend: TextBackend, config: TextProbeConfig) -> str:
    """``modscan-text-<model>-<version>-<hash>``: the same model version probed with the same
    generation parameters extends one audit (more runs, prefixes or instances add rows)."""
    payload = {"backend": backend.backend_name, "model": backend.model_id, **config.generation_params()}
    return readable_audit_id("modscan-text", [(backend.model_id.split("/")[-1], 40), (backend.model_version, 20)], payload)


def answer_mode_for(backend, choices: Sequence[str]) -> str:
    """The mode a ``constrained`` query with these ``choices`` is answered in on ``backend``
    (:data:`ROW_ANSWER_MODES`): a server's choice constraint (its capability probe; ``free`` when
    it honours none), ``constrained`` for a local model whose tokenizer has one token per choice
    (its ``choose`` restricts the first token), else ``free``.

    Raises:
        ModelNotAvailableError: the backend cannot run (e.g. an API key variable unset).
    """
    if not hasattr(backend, "choose"):
        return "free"
    find = getattr(backend, "constraint", None)
    if find is not None:  # a server: whatever its probe found
        return find() or "free"
    token_ids = getattr(backend, "choice_token_ids", None)
    if token_ids is not None:
        try:
            token_ids(tuple(choices))
        except ModelNotAvailableError:  # a choice spans several tokens ("an Asian"): asked freely
            return "free"
    return "constrained"


def _row(query: TextQuery, prompt: str, raw: str | None, error: str | None, params, mode: str = "free") -> dict:
    if error is not None:
        answer, parsed_choice, chosen, status, method = None, None, None, "error", None
    else:
        answer = strip_echo(raw, prompt)
        if query.probe == "modscan_text_faces":
            parsed = parse_side(answer)
            chosen = {"left": query.left_group, "right": query.right_group}.get(parsed.choice)
        else:
            parsed = parse_term(answer, query.attribute)
            chosen = parsed.choice
        parsed_choice, status, method = parsed.choice, parsed.status, parsed.method
    return {
        "probe": query.probe,
        "modality": "text",
        "attribute": query.attribute,
        "scenario": query.scenario,
        "instance": query.instance,
        "condition": query.condition,
        "prefix": query.prefix,
        "query_unit": query.query_unit,
        "sample": query.run,  # the landing column of a run
        "seed": query.seed,
        "term_order": "|".join(query.term_order) or None,
        "left_group": query.left_group,
        "right_group": query.right_group,
        "pair_id": None,
        "left_face_id": None,
        "right_face_id": None,
        "image_sha256": None,
        "prompt_style": params["prompt_style"],
        "prompt": prompt,
        "raw_output": raw if error is None else None,
        "answer": answer,
        "parse_method": method,
        "parsed_choice": parsed_choice,
        "chosen_group": chosen,
        "status": status,
        "error": error,
        "generation_params": json.dumps(params, sort_keys=True),
        "answer_mode": mode,
        "deviation": _DEVIATION[query.probe]
        + ("" if mode == "free" else (f"; answer constrained to {'/'.join(query.choices())} (answer_mode {mode}; the paper parses free answers)")),
    }


@dataclass
class TextRunSummary:
    """What a text-analogue run did (rows planned / already landed / generated, by status)."""

    audit_id: str
    result: ResumableSummary = field(default_factory=ResumableSummary)


def probe_text_analogues(
    backend: TextBackend,
    config: TextProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    target: str | None = None,
    progress: bool = True,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
    block: tuple[int, int] | None = None,
) -> TextRunSummary:
    """Generate and land every missing query of the text analogues (A.6) for ``backend``.

    Args:
        backend: any :class:`~models_inference.text_backends.TextBackend`.
        config: what to probe (default :class:`TextProbeConfig`: the default audit's sample).
        audit_id: override :func:`text_audit_id`.
        target: registry target recorded on the audit events (``None``: ad hoc).
        progress: tqdm bar on stderr.
        max_error_share: share of this run's calls that may fail (``error`` rows) before the
            audit ends ``failed`` (:func:`models_inference.resumable.land_resumable`); ``None``: no limit.
        block: ``(start, stop)``: only the queries ``[start:stop]`` of :func:`plan_text_queries`
            (one Dagster step of a blocked run); the audit's ``finished`` event is then left to
            :func:`models_inference.resumable.finish_blocks` once every block has landed.

    Returns:
        A :class:`TextRunSummary`; rows land in ``landing/modscan_responses`` in shards of
        ``config.shard_rows``, with ``started`` / ``finished`` (or ``failed``) audit events of
        modality ``modscan_text``.

    Raises:
        ValueError: invalid config. Whatever the backend raises (after a ``failed`` event).
        AuditFailedError: more than ``max_error_share`` of the calls failed (rows landed first).
    """
    cfg = (config or TextProbeConfig()).validate()
    audit_id = audit_id or text_audit_id(backend, cfg)
    params = cfg.generation_params()
    sampling = SamplingParams(cfg.temperature, cfg.top_p)

    modes: dict[tuple[str, ...], str] = {}  # choice set -> its answer mode, found once per run

    def mode_of(query: TextQuery) -> str:
        if cfg.answer_mode == "free":
            return "free"
        choices = query.choices()
        if choices not in modes:
            modes[choices] = answer_mode_for(backend, choices)
        return modes[choices]

    def generate(chunk: list[TextQuery], advance: Callable[[int], None]) -> list[dict]:
        prompts = [q.prompt() for q in chunk]
        requests = [
            GenerationRequest(prompt=RenderedPrompt("chat", p), seed=q.seed, max_new_tokens=cfg.max_new_tokens, stop="eos")
            for q, p in zip(chunk, prompts, strict=True)
        ]
        row_modes = [mode_of(q) for q in chunk]
        results = _answers(backend, chunk, requests, row_modes, sampling, advance)
        return [_row(q, p, r.text, r.error, params, mode) for q, p, r, mode in zip(chunk, prompts, results, row_modes, strict=True)]

    planned = plan_text_queries(cfg, audit_id)
    if block is not None:
        planned = planned[block[0] : block[1]]
    result = land_probe(
        planned,
        TextQuery.key,
        generate,
        table=MODSCAN_TABLE,
        backend=backend,
        audit_id=audit_id,
        modality="modscan_text",
        config=asdict(cfg),
        family=FAMILY,
        target=target,
        shard_rows=cfg.shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        step="ModSCAN text analogues",
        block=None if block is None else f"queries-{block[0]}-{block[1]}",
    )
    return TextRunSummary(audit_id, result)


def _answers(backend: TextBackend, chunk: list[TextQuery], requests: list, row_modes: list[str], sampling, advance) -> list:
    """The backend's result of each request, in order: one call per (mode, choice set), free
    queries together, constrained ones with their own choices (a persona query's terms are in
    its shuffled order)."""
    groups: dict[tuple, list[int]] = {}
    for i, (q, mode) in enumerate(zip(chunk, row_modes, strict=True)):
        groups.setdefault((mode, () if mode == "free" else q.choices()), []).append(i)
    results: list = [None] * len(chunk)
    for (mode, choices), idx in groups.items():
        batch = [requests[i] for i in idx]
        if mode == "free":
            out = backend.generate(batch, sampling, on_batch=advance)
        else:
            out = backend.choose(batch, list(choices), sampling, on_batch=advance)
        for i, res in zip(idx, out, strict=True):
            results[i] = res
    return results


__all__ = [
    "ANSWER_MODES",
    "CONDITIONS",
    "MODSCAN_TABLE",
    "RACE_PAIRS",
    "ROW_ANSWER_MODES",
    "TEXT_PROBES",
    "TextProbeConfig",
    "TextQuery",
    "TextRunSummary",
    "answer_mode_for",
    "plan_text_queries",
    "spread",
    "probe_text_analogues",
    "text_audit_id",
]
