"""The T2T word-completion probe (BiasDora Section 3, Figure 8; METHOD.md section 2).

For each descriptor x setting x letter a..z x run 1..R, one completion is generated and
landed as a row of ``landing/t2t_completions`` (see :mod:`ingestion.landing`), whatever its
parse status. Rows are keyed by (audit_id, model_id, model_version, setting, descriptor,
letter, run): a re-run reads the keys already landed and generates only the missing rows,
so an interrupted audit resumes where it stopped and a finished one costs no model call.
"""

from __future__ import annotations

import hashlib
import json
import string
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Sequence

from ingestion.landing import read_landing, write_shard
from ingestion.templates import T2TTemplate as T2TTarget  # one descriptor x setting prefix
from models_inference.parsing import parse_answer
from models_inference.prompts import PROMPT_STYLES, T2T_SETTINGS, render_t2t_prompt
from models_inference.text_backends import GenerationRequest, SamplingParams, TextBackend

CODE_VERSION = "0.1.0"


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
    """

    runs: int = 1
    letters: str = string.ascii_lowercase
    prompt_style: str | None = None
    max_new_tokens: int | None = None
    temperature: float = 0.7
    top_p: float = 0.95
    shard_rows: int = 512

    def resolved(self, backend: TextBackend) -> "T2TProbeConfig":
        style = self.prompt_style or backend.default_prompt_style
        if style not in PROMPT_STYLES:
            raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {style!r}")
        if self.runs < 1:
            raise ValueError(f"runs must be >= 1, got {self.runs}")
        bad = [c for c in self.letters if not ("a" <= c <= "z")]
        if bad or not self.letters:
            raise ValueError(f"letters must be lower-case a-z, got {self.letters!r}")
        tokens = self.max_new_tokens or (100 if style == "chat" else 6)
        return T2TProbeConfig(self.runs, self.letters, style, tokens, self.temperature, self.top_p, self.shard_rows)

    def generation_fingerprint(self) -> dict:
        """The parameters that change what a row means (part of the audit id)."""
        return {
            "prompt_style": self.prompt_style,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
        }


@dataclass
class T2TRunSummary:
    """What a probe run did: rows planned, found already landed, generated, by parse status."""

    audit_id: str
    planned: int = 0
    already_landed: int = 0
    generated: int = 0
    parse_status: Counter = field(default_factory=Counter)

    @property
    def parse_rate(self) -> float:
        """Share of generated rows with parse_status ``ok`` (0.0 when nothing generated)."""
        return self.parse_status["ok"] / self.generated if self.generated else 0.0


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text.lower()).strip("-")[:60]


def audit_id_for(backend: TextBackend, config: T2TProbeConfig) -> str:
    """Deterministic audit id: ``t2t-<model>-<version>-<config hash>``.

    The same model version probed with the same generation parameters gets the same id, so
    re-running (or adding descriptors/runs) extends the same audit instead of starting anew.
    """
    digest = config_hash(backend, config)
    return f"t2t-{_slug(backend.model_id.split('/')[-1])}-{_slug(backend.model_version)[:20]}-{digest[:8]}"


def config_hash(backend: TextBackend, config: T2TProbeConfig) -> str:
    payload = {"backend": backend.backend_name, "model": backend.model_id, **config.generation_fingerprint()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def row_seed(audit_id: str, setting: str, descriptor: str, letter: str, run: int) -> int:
    """Per-row seed: 63-bit blake2b of the row key (stable across machines and batches)."""
    key = f"{audit_id}|{setting}|{descriptor}|{letter}|{run}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") >> 1


def landed_keys(audit_id: str) -> set[tuple[str, str, str, int]]:
    """(setting, descriptor, letter, run) keys already landed for ``audit_id``."""
    safe = audit_id.replace("'", "''")
    table = read_landing(
        "t2t_completions", columns=["setting", "descriptor", "letter", "run"], where=f"audit_id = '{safe}'"
    )
    cols = [table.column(c).to_pylist() for c in ("setting", "descriptor", "letter", "run")]
    return set(zip(*cols))


def _audit_event(audit_id, backend, config, status, rows, target=None) -> dict:
    cfg = json.dumps({"backend": backend.backend_name, **asdict(config)}, sort_keys=True, default=str)
    return {
        "audit_id": audit_id,
        "model_id": backend.model_id,
        "model_version": backend.model_version,
        "modality": "t2t",
        "config_json": cfg,
        "config_hash": hashlib.sha256(cfg.encode()).hexdigest()[:16],
        "code_version": CODE_VERSION,
        "status": status,
        "rows_generated": rows,
        "event_at": datetime.now(timezone.utc),
        "target": target,
    }


def run_t2t_probe(
    targets: Sequence[T2TTarget],
    backend: TextBackend,
    config: T2TProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    progress: bool = True,
    target: str | None = None,
) -> T2TRunSummary:
    """Generate and land every missing T2T completion for ``targets``.

    Args:
        targets: descriptor x setting prefixes (``ingestion.templates``).
        backend: a :class:`TextBackend`.
        config: probe parameters (default :class:`T2TProbeConfig`).
        audit_id: override the deterministic :func:`audit_id_for`.
        progress: show a tqdm progress bar on stderr.
        target: the audit registry target this audit belongs to (``ingestion/registry.py``),
            recorded on the audit events; ``None`` for an ad-hoc audit.

    Returns:
        A :class:`T2TRunSummary`. Rows land in shards of ``config.shard_rows`` as they are
        generated, so an interruption loses at most one shard of work.

    Raises:
        ValueError: invalid config or an unknown setting in ``targets``.
    """
    from tqdm.auto import tqdm

    cfg = (config or T2TProbeConfig()).resolved(backend)
    audit_id = audit_id or audit_id_for(backend, cfg)
    summary = T2TRunSummary(audit_id=audit_id)
    for t in targets:
        if t.setting not in T2T_SETTINGS:
            raise ValueError(f"unknown setting {t.setting!r} for descriptor {t.descriptor!r}")
    done = landed_keys(audit_id)
    todo: list[tuple[T2TTarget, str, int]] = []
    for t in targets:
        for letter in cfg.letters:
            for run in range(1, cfg.runs + 1):
                summary.planned += 1
                if (t.setting, t.descriptor, letter, run) in done:
                    summary.already_landed += 1
                else:
                    todo.append((t, letter, run))
    if not todo:
        return summary
    write_shard("audits", [_audit_event(audit_id, backend, cfg, "started", 0, target)], partition=audit_id)
    stop = "bracket" if cfg.prompt_style == "chat" else "word"
    sampling = SamplingParams(cfg.temperature, cfg.top_p)
    bar = tqdm(total=len(todo), desc=f"T2T {backend.model_id}", unit="prompt", disable=not progress, file=sys.stderr)
    try:
        for start in range(0, len(todo), cfg.shard_rows):
            chunk = todo[start : start + cfg.shard_rows]
            prompts = [render_t2t_prompt(t.prefix, t.setting, letter, cfg.prompt_style) for t, letter, _ in chunk]
            seeds = [row_seed(audit_id, t.setting, t.descriptor, letter, run) for t, letter, run in chunk]
            requests = [
                GenerationRequest(prompt=p, seed=s, max_new_tokens=cfg.max_new_tokens, stop=stop)
                for p, s in zip(prompts, seeds)
            ]
            results = backend.generate(requests, sampling, on_batch=bar.update)
            now = datetime.now(timezone.utc)
            rows = []
            for (t, letter, run), prompt, seed, res in zip(chunk, prompts, seeds, results):
                if res.error:
                    word, status, raw = None, "error", res.error
                else:
                    parsed = parse_answer(res.text, letter, t.setting, cfg.prompt_style, finished=res.finished)
                    word, status, raw = parsed.word, parsed.status, res.text
                summary.parse_status[status] += 1
                rows.append(
                    {
                        "audit_id": audit_id,
                        "model_id": backend.model_id,
                        "model_version": backend.model_version,
                        "backend": backend.backend_name,
                        "setting": t.setting,
                        "descriptor": t.descriptor,
                        "bias_dimension": t.bias_dimension,
                        "letter": letter,
                        "run": run,
                        "seed": seed,
                        "prompt_style": cfg.prompt_style,
                        "prompt": prompt.as_text(),
                        "raw_output": raw,
                        "word": word,
                        "parse_status": status,
                        "generated_at": now,
                    }
                )
            write_shard("t2t_completions", rows, partition=audit_id)
            summary.generated += len(rows)
    except BaseException:
        write_shard("audits", [_audit_event(audit_id, backend, cfg, "failed", summary.generated, target)], partition=audit_id)
        raise
    finally:
        bar.close()
    write_shard("audits", [_audit_event(audit_id, backend, cfg, "finished", summary.generated, target)], partition=audit_id)
    return summary


def select_targets(
    targets: Sequence[T2TTarget],
    *,
    settings: Sequence[str] = T2T_SETTINGS,
    descriptors: Sequence[str] = (),
    per_dimension: int = 0,
) -> list[T2TTarget]:
    """Choose which descriptors an audit probes.

    Args:
        targets: all available (setting, descriptor) prefixes.
        settings: settings to keep.
        descriptors: explicit descriptor keys to keep (empty = no filter).
        per_dimension: keep the first k descriptors of each bias dimension (in list order)
            among those available in every requested setting; 0 keeps all.

    Raises:
        ValueError: an unknown setting, a requested descriptor that does not exist, or a
            selection that leaves nothing to probe.
    """
    unknown = [s for s in settings if s not in T2T_SETTINGS]
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown}; expected some of {T2T_SETTINGS}")
    kept = [t for t in targets if t.setting in settings]
    if descriptors:
        wanted = {d.strip().lower() for d in descriptors}
        missing = sorted(wanted - {t.descriptor for t in kept})
        if missing:
            raise ValueError(f"descriptor(s) not in the descriptor list: {missing}")
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
    if not kept:
        raise ValueError("the descriptor selection is empty: nothing to probe")
    return kept
