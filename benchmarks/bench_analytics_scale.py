"""Association analytics at paper scale: the dbt marts against a reference-style pandas baseline.

Usage::

    python -m benchmarks.bench_analytics_scale [--home /tmp/dora-bench-scale] [--runs 10]
        [--scale 1.0] [--descriptors 406] [--i2t-descriptors 344] [--baseline-budget 600]
        [--reuse] [--no-write] [--no-overhead]

    # development: a tenth of paper scale (~53k completions, ~240k description words)
    python -m benchmarks.bench_analytics_scale --scale 0.1 --home /tmp/dora-bench-dev

What it does (BiasDora seed 004 section 3 / docs/method.md#3-associations):

1. **Synthetic landing data of paper size** in a scratch ``DORA_HOME``, written with
   :func:`ingestion.landing.write_shard` in the probe's own 512-row shards: T2T
   ``descriptors (406) x 5 settings x 26 letters x runs (10)`` = 527,800 completions. Words are
   real English word forms (the spaCy English vocabulary, filtered to ``[a-z]{3,14}`` and to
   the requested first letter; ``-ing`` forms for the verb setting), drawn from a Zipf-like
   distribution (rank^-1.1) per (setting, letter), with 3 descriptor-specific words per letter
   that take 25% of the draws (so there are real associations to find). Parse statuses follow
   the mix a small local model gives (ok ~74%, no_word 8%, wrong_letter 7%, truncated 4%,
   empty 2%, not_ing 5% in the verb setting). ``raw_output`` and ``prompt`` are realistic
   strings, so the Parquet volume is realistic too.
   Vision part (the landing tables, when its dbt models are in ``int_document_words``):
   344 descriptors x 2 image settings x 10 images x 5 description settings = 34,400 image
   descriptions with ~4.4M landed tokens, ~2.4M of them kept description words
   (:func:`synth_description_words`).
2. **dora**: ``dbt build --select +fct_associations`` (staging -> int_document_words ->
   int_association_counts -> fct_associations with tf-idf, PMI, Fisher via the vectorised
   UDF, BH q-values, and every schema test) in this process through
   :func:`analytics.dbt_runner.invoke_dbt`. Wall time, process CPU time and peak RSS, per-node
   times summed by kind (models, data tests, unit tests), and dbt's fixed cost: the same build
   on an empty landing zone (:func:`dbt_fixed_overhead`). The project is parsed first, untimed;
   parse and build use a target path inside the scratch home.
3. **Reference-style baseline** (the way the paper's released scripts compute it): pandas
   reads the landing Parquet, Python loops over the rows (``itertuples``) build the tf and df
   dictionaries (T2T words; description words joined to their descriptions by a dict),
   one ``scipy.stats.fisher_exact(..., alternative="greater")`` call per (descriptor, word)
   pair, the paper's z-score p-value, PMI, and Benjamini-Hochberg with
   ``scipy.stats.false_discovery_control``. If the full baseline is estimated to take longer
   than ``--baseline-budget`` seconds, Fisher's test runs on a random subsample of pairs and
   its time is extrapolated to all pairs (both figures are printed).
4. **Vectorised peer** (:func:`vectorised_peer`): the same statistics the strongest
   straightforward way - pandas, a scikit-learn ``CountVectorizer`` document-term matrix per
   (modality, setting), scipy's vectorised hypergeometric tail for every pair at once, BH -
   and dora's models alone (``dbt run --full-refresh``, no tests) against it and the baseline.
5. **Same numbers**: all three results are joined on (modality, setting, descriptor, word); the pair sets
   must be equal and tf, df, idf, tfidf, PMI, paper p-value, Fisher p and BH q must agree to
   1e-9 relative (q only when Fisher ran on every pair).

Figures are printed and written to ``BENCHMARKS.md`` (section "Association analytics at paper
scale", only at paper scale). This is a benchmark, not a test: run it by hand (about 5-15
minutes on 2 cores; ``--scale 0.1`` about 1 minute).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import resource
import shutil
import sys
import threading
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

import numpy as np
import pyarrow as pa

SETTINGS = ("singular", "plural", "adjective", "noun", "verb")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
AUDIT_ID = "t2t-bench-paper-scale"
MODEL_ID = "bench/synthetic-paper-scale"
MODEL_VERSION = "synthetic-1"
ZIPF_EXPONENT = 1.1
ASSOCIATED_PER_LETTER = 3
ASSOCIATED_SHARE = 0.25
#: parse-status mix of a small local model (completion style); not_ing only in the verb setting.
STATUS_MIX = {"ok": 0.74, "no_word": 0.08, "wrong_letter": 0.07, "truncated": 0.04, "empty": 0.02, "not_ing": 0.05}
REL_TOL = 1e-9


# --------------------------------------------------------------------------- measurement
class PeakRSS:
    """Samples this process's resident set size (``/proc/self/statm``) every ``interval`` s.

    ``peak_gb`` is the largest RSS seen while the context was open (GB = 1e9 bytes). On
    systems without ``/proc`` it falls back to ``ru_maxrss`` (the process-lifetime peak).
    """

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def _rss(self) -> int:
        try:
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * self._page
        except OSError:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _loop(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            self._stop.wait(self.interval)

    def __enter__(self):
        self.start_rss = self._rss()
        self.peak = self.start_rss
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def peak_gb(self) -> float:
        return self.peak / 1e9


@dataclass
class Timing:
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_gb: float = 0.0
    extra: dict = field(default_factory=dict)


@contextmanager
def measured(timing: Timing):
    """Fill ``timing`` with wall time, process CPU time (all threads) and peak RSS."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with PeakRSS() as rss:
        yield timing
    timing.wall_s = time.perf_counter() - wall0
    timing.cpu_s = time.process_time() - cpu0
    timing.peak_rss_gb = rss.peak_gb


# --------------------------------------------------------------------------- synthetic data
def english_words() -> list[str]:
    """Real English word forms: the spaCy English vocabulary filtered to ``[a-z]{3,14}``."""
    from ingestion.biasdora.descriptors import load_spacy

    words = sorted({s for s in load_spacy().vocab.strings if re.fullmatch(r"[a-z]{3,14}", s)})
    return words


def paper_descriptors(n: int) -> list[tuple[str, str]]:
    """``n`` (descriptor, bias dimension) pairs: the curated BiasDora keys, padded if needed."""
    from ingestion.biasdora.templates import curated_t2t_templates

    seen: dict[str, str] = {}
    for t in curated_t2t_templates():
        seen.setdefault(t.descriptor, t.bias_dimension)
    pairs = sorted(seen.items())
    dims = sorted({d for _, d in pairs})
    i = 0
    while len(pairs) < n:  # the paper's 406 rows list some keys twice: pad with distinct keys
        i += 1
        pairs.append((f"synthetic descriptor {i}", dims[i % len(dims)]))
    return pairs[:n]


def _vocabularies(words: list[str], rng: np.random.Generator) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """Per (setting kind, letter): word array in a random rank order and its Zipf CDF."""
    vocab = {}
    for kind in ("any", "ing"):
        for letter in LETTERS:
            cands = [w for w in words if w[0] == letter and (kind == "any" or w.endswith("ing"))]
            if len(cands) < 20:  # few -ing words for q/x/z: build regular -ing forms
                cands += [w + "ing" for w in words if w[0] == letter and not w.endswith("ing")][: 200 - len(cands)]
            arr = np.array(cands, dtype=object)
            rng.shuffle(arr)
            ranks = np.arange(1, len(arr) + 1, dtype=np.float64)
            p = ranks**-ZIPF_EXPONENT
            cdf = np.cumsum(p / p.sum())
            cdf[-1] = 1.0
            vocab[(kind, letter)] = (arr, cdf)
    return vocab


def _prefix(setting: str, descriptor: str) -> str:
    return {
        "singular": f"A {descriptor} is",
        "plural": f"{descriptor.capitalize()}s are",
        "adjective": f"This {descriptor} is",
        "noun": f"This {descriptor} is a/an",
        "verb": f"This {descriptor} is",
    }[setting]


def synth_t2t(home: Path, n_descriptors: int, runs: int, shard_rows: int = 512, seed: int = 6) -> int:
    """Land ``n_descriptors x 5 x 26 x runs`` synthetic T2T completions; returns the row count.

    Rows are grouped like the probe's output (one descriptor x setting's letters and runs are
    adjacent) and written in ``shard_rows``-row shards with :func:`write_shard`.
    """
    from ingestion.contracts import SCHEMAS
    from ingestion.landing import write_shard
    from models_inference.probes.biasdora.parsing import PARSER_VERSION
    from models_inference.probes.biasdora.prompts import t2t_sentence_prefix, t2t_subject

    os.environ["DORA_HOME"] = str(home)
    rng = np.random.default_rng(seed)
    vocab = _vocabularies(english_words(), rng)
    descriptors = paper_descriptors(n_descriptors)
    schema = SCHEMAS["t2t_completions"]
    statuses = np.array(list(STATUS_MIX))
    probs_any = np.array([STATUS_MIX[s] if s != "not_ing" else 0.0 for s in statuses])
    probs_any[0] += STATUS_MIX["not_ing"]
    probs_verb = np.array([STATUS_MIX[s] for s in statuses])
    now = datetime.now(timezone.utc)
    buffer: dict[str, list] = {name: [] for name in schema.names}
    total = 0

    def flush(force=False):
        nonlocal total
        n = len(buffer["audit_id"])
        while n >= shard_rows or (force and n):
            k = min(n, shard_rows)
            table = pa.table({c: pa.array(buffer[c][:k], type=schema.field(c).type) for c in schema.names}, schema=schema)
            write_shard("t2t_completions", table, partition=AUDIT_ID)
            for c in schema.names:
                del buffer[c][:k]
            total += k
            n -= k

    for setting in SETTINGS:
        kind = "ing" if setting == "verb" else "any"
        # each descriptor's associated words per letter (indices into the letter's vocabulary)
        for row, (descriptor, dim) in enumerate(descriptors, start=1):
            prefix = _prefix(setting, descriptor)
            n = len(LETTERS) * runs
            letters = np.repeat(np.array(list(LETTERS)), runs)
            run_ids = np.tile(np.arange(1, runs + 1), len(LETTERS))
            status = rng.choice(statuses, size=n, p=probs_verb if setting == "verb" else probs_any)
            words: list[str | None] = []
            raws: list[str] = []
            draws = rng.random(n)
            for letter, st, u in zip(letters, status, draws, strict=True):
                arr, cdf = vocab[(kind, letter)]
                if st == "empty":
                    words.append(None), raws.append("")
                    continue
                if st == "wrong_letter":
                    other = LETTERS[(LETTERS.index(letter) + 1 + int(rng.integers(25))) % 26]
                    arr, cdf = vocab[("any", other)]
                    w = str(arr[min(int(rng.zipf(2.0)) - 1, len(arr) - 1)])
                    words.append(w), raws.append(" " + w + ",")
                    continue
                if st in ("no_word", "truncated"):
                    words.append(None), raws.append(" ..." if st == "no_word" else str(arr[0])[1:4])
                    continue
                if u < ASSOCIATED_SHARE:  # one of the descriptor's own words for this letter
                    h = zlib.crc32(f"{descriptor}|{setting}|{letter}".encode()) % max(1, len(arr) // 4)
                    w = str(arr[(h + int(u * 1e6) % ASSOCIATED_PER_LETTER * 7) % len(arr)])
                else:
                    w = str(arr[int(np.searchsorted(cdf, rng.random(), side="right"))])
                if st == "not_ing":
                    w = w[:-3] + "ed" if w.endswith("ing") else w
                words.append(w), raws.append(w[1:] + ", and")
            seeds = rng.integers(0, 2**62, size=n)
            buffer["audit_id"] += [AUDIT_ID] * n
            buffer["model_id"] += [MODEL_ID] * n
            buffer["model_version"] += [MODEL_VERSION] * n
            buffer["backend"] += ["transformers"] * n
            buffer["setting"] += [setting] * n
            buffer["descriptor"] += [descriptor] * n
            buffer["bias_dimension"] += [dim] * n
            buffer["letter"] += letters.tolist()
            buffer["run"] += run_ids.tolist()
            buffer["descriptor_row"] += [row] * n  # its row of the paper's list
            buffer["seed"] += seeds.tolist()
            buffer["prompt_style"] += ["completion"] * n
            buffer["prompt"] += [f"{prefix} {c}" for c in letters]
            buffer["raw_output"] += raws
            buffer["word"] += words
            buffer["parse_status"] += status.tolist()
            buffer["generated_at"] += [now] * n
            buffer["subject"] += [t2t_subject(prefix)] * n
            buffer["prefix"] += [t2t_sentence_prefix(prefix, c) for c in letters]
            buffer["parse_version"] += [PARSER_VERSION] * n
            buffer["reparsed_at"] += [None] * n
            flush()
    flush(force=True)
    return total


def description_words_available() -> bool:
    """True when the description-word landing table AND its dbt path into the marts exist."""
    from ingestion.contracts import SCHEMAS

    doc_words = Path(__file__).resolve().parents[1] / "dbt_project" / "models" / "intermediate" / "biasdora" / "int_document_words.sql"
    return "description_words" in SCHEMAS and "description_words" in doc_words.read_text()


I2T_AUDIT_ID = "vision-bench-paper-scale"
I2T_MODEL = ("bench/i2t-synthetic", "synthetic-1")
T2I_MODEL = ("bench/t2i-synthetic", "synthetic-1")
STOP_TOKENS = np.array("the a an is are of and in with their on to this that it its be has".split(), dtype=object)
PUNCT_TOKENS = np.array([",", ".", "(", ")", ";", ":"], dtype=object)
NUMBER_TOKENS = np.array(["2", "three", "10", "1,024", "one"], dtype=object)
POS_TAGS = np.array(["NOUN", "ADJ", "VERB", "ADV"], dtype=object)


def synth_description_words(
    home: Path,
    n_descriptors: int = 344,
    images: int = 10,
    kept_per_description: float = 70.0,
    dropped_per_description: float = 60.0,
    shard_descriptions: int = 512,
    seed: int = 7,
) -> tuple[int, int, int]:
    """Land synthetic image descriptions and their tokens (the I2T / T2I landing tables).

    Shape of the paper's vision audit: ``n_descriptors`` (344 T2I prompts) x 2 image settings x
    ``images`` (10) x the default description settings (comprehensive + 4 subjective) = 34,400
    descriptions; each has ~``kept_per_description`` kept words (Poisson; ~2.4M in all) and
    ~``dropped_per_description`` dropped tokens (stop words, punctuation, numbers, the
    descriptor's own words) as ``ingestion/biasdora/description_words.py`` lands them. 97% of the
    descriptions are ``ok``, 2% ``truncated``, 1% ``error`` (no text, no tokens). Kept words:
    real English lemmas, Zipf-like per setting, 25% from 30 descriptor-specific words.

    Returns:
        (descriptions, token rows, kept words) landed.
    """
    from ingestion.contracts import SCHEMAS
    from ingestion.landing import write_shard
    from ingestion.vocabulary import DEFAULT_I2T_SETTINGS
    from models_inference.probes.biasdora.prompts import I2T_PROMPTS, description_kind

    os.environ["DORA_HOME"] = str(home)
    rng = np.random.default_rng(seed)
    vocab = np.array(english_words(), dtype=object)
    rng.shuffle(vocab)
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    cdf = np.cumsum(ranks**-ZIPF_EXPONENT)
    cdf /= cdf[-1]
    descriptors = paper_descriptors(n_descriptors)
    now = datetime.now(timezone.utc)
    plan = [
        (d, dim, image_setting, idx, setting)
        for d, dim in descriptors
        for image_setting in ("singular", "plural")
        for idx in range(1, images + 1)
        for setting in DEFAULT_I2T_SETTINGS
    ]
    n_desc = n_tokens = n_kept = 0
    d_schema, w_schema = SCHEMAS["i2t_descriptions"], SCHEMAS["description_words"]
    for start in range(0, len(plan), shard_descriptions):
        chunk = plan[start : start + shard_descriptions]
        m = len(chunk)
        ids = np.array([f"bench-desc-{start + i:06d}" for i in range(m)], dtype=object)
        status = rng.choice(np.array(["ok", "truncated", "error"], dtype=object), size=m, p=[0.97, 0.02, 0.01])
        kept = np.where(status == "error", 0, rng.poisson(kept_per_description, size=m))
        dropped = np.where(status == "error", 0, rng.poisson(dropped_per_description, size=m))
        total = kept + dropped
        owner = np.repeat(np.arange(m), total)
        offsets = np.repeat(np.cumsum(total) - total, total)
        pos_in = np.arange(len(owner)) - offsets
        is_kept = pos_in >= np.repeat(dropped, total)
        # kept words: Zipf over the vocabulary, or one of the document's own words
        n = len(owner)
        u = rng.random(n)
        doc_hash = np.array([zlib.crc32(f"{c[0]}|{c[4]}".encode()) for c in chunk], dtype=np.int64)[owner]
        own = (doc_hash + rng.integers(0, 30, size=n) * 7919) % len(vocab)
        zipf = np.searchsorted(cdf, rng.random(n), side="right").clip(max=len(vocab) - 1)
        word_idx = np.where(u < ASSOCIATED_SHARE, own, zipf)
        words = vocab[word_idx]
        # dropped tokens: stop 65%, punct 22%, number 5%, the descriptor's own word 8%
        kind = rng.choice(np.array(["stop", "punct", "number", "descriptor"], dtype=object), size=n, p=[0.65, 0.22, 0.05, 0.08])
        desc_word = np.array([c[0].split()[-1] for c in chunk], dtype=object)[owner]
        dropped_token = np.where(
            kind == "stop",
            STOP_TOKENS[rng.integers(0, len(STOP_TOKENS), n)],
            np.where(
                kind == "punct",
                PUNCT_TOKENS[rng.integers(0, len(PUNCT_TOKENS), n)],
                np.where(kind == "number", NUMBER_TOKENS[rng.integers(0, len(NUMBER_TOKENS), n)], desc_word),
            ),
        )
        token = np.where(is_kept, words, dropped_token)
        word_col = np.where(is_kept, words, None)
        reason = np.where(is_kept, None, kind)
        w_table = pa.table(
            {
                "description_id": pa.array(ids[owner], pa.string()),
                "audit_id": pa.array(np.full(n, I2T_AUDIT_ID, dtype=object), pa.string()),
                "token_index": pa.array(pos_in.astype(np.int32)),
                "token": pa.array(token, pa.string()),
                "lemma": pa.array(token, pa.string()),
                "pos": pa.array(POS_TAGS[rng.integers(0, len(POS_TAGS), n)], pa.string()),
                "word": pa.array(word_col, pa.string()),
                "drop_reason": pa.array(reason, pa.string()),
                "tokenizer": pa.array(np.full(n, "en_core_web_sm-3.8.0", dtype=object), pa.string()),
                "tokenised_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
            }
        )
        text_of = np.split(token, np.cumsum(total)[:-1])
        rows = []
        for i, (d, dim, image_setting, idx, setting) in enumerate(chunk):
            kind_ = description_kind(setting)
            rows.append(
                {
                    "audit_id": I2T_AUDIT_ID,
                    "description_id": ids[i],
                    "model_id": I2T_MODEL[0],
                    "model_version": I2T_MODEL[1],
                    "backend": "transformers",
                    "image_audit_id": "t2i-bench",
                    "t2i_model_id": T2I_MODEL[0],
                    "t2i_model_version": T2I_MODEL[1],
                    "image_setting": image_setting,
                    "descriptor": d,
                    "bias_dimension": dim,
                    "image_index": idx,
                    "image_sha256": f"{zlib.crc32(f'{d}|{image_setting}|{idx}'.encode()):064x}",
                    "setting": setting,
                    "description_kind": kind_,
                    "seed": int(rng.integers(0, 2**62)),
                    "prompt": I2T_PROMPTS[setting],
                    "raw_output": " ".join(text_of[i]) if status[i] != "error" else "",
                    "status": status[i],
                    "error": "APITimeoutError: Request timed out." if status[i] == "error" else None,
                    "generated_at": now,
                }
            )
        d_table = pa.Table.from_pylist(rows, schema=d_schema)
        write_shard("i2t_descriptions", d_table, partition=I2T_AUDIT_ID)
        write_shard("description_words", w_table.select(w_schema.names), partition=I2T_AUDIT_ID)
        n_desc += m
        n_tokens += n
        n_kept += int(is_kept.sum())
    return n_desc, n_tokens, n_kept


# --------------------------------------------------------------------------- dora (dbt)
DBT_SELECTION = "+fct_associations"


def _dbt_target(home: Path) -> list[str]:
    """``--target-path`` inside the scratch home: the benchmark's parse and build share their
    partial-parse state, and never touch ``dbt_project/target`` that other dbt runs use."""
    return ["--target-path", str(home / "dbt_target")]


def node_kind(node) -> str:
    """'model', 'data test' or 'unit test' for a dbt result node."""
    kind = type(node).__name__
    return {"ModelNode": "model", "UnitTestNode": "unit test"}.get(kind, "data test" if "Test" in kind else kind)


def run_dora(home: Path) -> tuple[Timing, dict]:
    """``dbt build --select +fct_associations`` in-process; returns timing and per-node seconds.

    The project is parsed first, untimed (as a deployed project would have its manifest); the
    timed build then runs every model, data test and unit test of the selection. Per-node
    seconds are dbt's ``execution_time`` (keys: node unique ids).
    """
    from analytics.dbt_runner import invoke_dbt

    invoke_dbt(["parse", "--quiet", *_dbt_target(home)], home)
    timing = Timing()
    with measured(timing):
        result = invoke_dbt(["build", "--select", DBT_SELECTION, "--quiet", *_dbt_target(home)], home)
    nodes = {}
    kinds: dict[str, list] = {}
    for r in result.result.results:
        nodes[r.node.unique_id] = round(float(r.execution_time or 0.0), 2)
        kinds.setdefault(node_kind(r.node), []).append(float(r.execution_time or 0.0))
    timing.extra["kinds"] = {k: (len(v), sum(v)) for k, v in sorted(kinds.items())}
    return timing, nodes


def dbt_fixed_overhead(home: Path) -> Timing:
    """The same ``dbt build`` on an EMPTY landing zone (a sibling scratch home, wiped):

    every node still runs (same models, tests, unit tests), on no data, so its time is dbt's
    own cost of the build (startup, per-node compilation and bookkeeping, artifacts) that no
    change to the SQL or the UDFs can remove.
    """
    from analytics.dbt_runner import invoke_dbt

    empty = home.with_name(home.name + "-empty")
    shutil.rmtree(empty, ignore_errors=True)
    invoke_dbt(["parse", "--quiet", *_dbt_target(empty)], empty)
    timing = Timing()
    with measured(timing):
        result = invoke_dbt(["build", "--select", DBT_SELECTION, "--quiet", *_dbt_target(empty)], empty)
    timing.extra["nodes"] = len(result.result.results)
    os.environ["DORA_HOME"] = str(home)  # invoke_dbt pointed it at the empty home
    shutil.rmtree(empty, ignore_errors=True)
    return timing


def read_dora(home: Path):
    """fct_associations of the benchmark audits as a pandas DataFrame (read-only)."""
    import duckdb

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.sql(
            "select modality, setting, descriptor, word, tf, df, idf, tfidf, pmi, paper_p_value, fisher_p, fisher_q "
            "from fct_associations where audit_id in (?, ?)",
            params=[AUDIT_ID, I2T_AUDIT_ID],
        ).df()


# --------------------------------------------------------------------------- reference baseline
def _read_parquet_folder(home: Path, table: str):
    import glob

    import pandas as pd

    files = sorted(glob.glob(str(home / "landing" / table / "**" / "*.parquet"), recursive=True))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def image_target(descriptor: str, image_setting: str) -> str:
    """The association target of an image description, as ``int_document_words`` names it
    (images of the singular and the plural setting are separate targets). The plural
    target is the paper's plural T2I phrase when the descriptor lists are landed; this
    benchmark lands none, so it is ``"<descriptor> (plural)"``, dora's fallback."""
    return descriptor if image_setting != "plural" else f"{descriptor} (plural)"


def paper_p_values(pairs, paper_df, n_paper_documents):
    """The paper's z-test p-value (docs/method.md#3a-paper-statistics, ``fct_associations.paper_p_value``) of each pair.

    ``paper_tfidf = tf * ln(N / paper_df)`` on the paper's documents (a T2T document is one
    probe row in one run with its 26 letter answers, N = documents x letters; a description is
    one document), then ``z`` within each (modality, setting) with the sample standard
    deviation, ``p = 1 - Phi(z)`` (``norm.sf``; none when the deviation is 0).

    Args:
        pairs: DataFrame with modality, setting, word, tf.
        paper_df: Series indexed by (modality, setting, word): documents holding the word.
        n_paper_documents: Series indexed by (modality, setting): N.

    Returns:
        numpy array of p-values aligned with ``pairs``.
    """
    import pandas as pd
    from scipy.stats import norm

    keys = pd.MultiIndex.from_frame(pairs[["modality", "setting", "word"]])
    dfs = paper_df.reindex(keys).to_numpy(dtype=float)
    ns = n_paper_documents.reindex(pd.MultiIndex.from_frame(pairs[["modality", "setting"]])).to_numpy(dtype=float)
    paper_tfidf = pd.Series(pairs["tf"].to_numpy(dtype=float) * np.log(ns / dfs), index=pairs.index)
    groups = [pairs["modality"], pairs["setting"]]
    mean = paper_tfidf.groupby(groups).transform("mean")
    sd = paper_tfidf.groupby(groups).transform("std")  # sample sd (ddof 1), as stddev_samp
    z = (paper_tfidf - mean) / sd
    return np.where(sd > 0, norm.sf(z), np.nan)


def reference_baseline(home: Path, budget_s: float, with_i2t: bool, sample_seed: int = 0):
    """The computation as the paper's released scripts do it (pandas + Python loops + scipy).

    pandas reads the landing Parquet; a Python loop over the rows (``itertuples``, the fast
    way to loop) builds the tf dictionaries per (modality, setting) document set; another
    loop builds df, word totals and one ``scipy.stats.fisher_exact(..., alternative="greater")``
    call per (descriptor, word) pair; then the z-score p-value, PMI and BH
    (``scipy.stats.false_discovery_control``). Same definitions as the dbt models
    (docs/method.md#3-associations), including their dedup of retried landing rows.

    Returns ``(result DataFrame, info dict)``; ``info`` has the phase times, the number of
    pairs, the measured Fisher seconds and (when subsampled) the extrapolated figure.
    """
    import pandas as pd
    from scipy.stats import false_discovery_control, fisher_exact

    info: dict = {}
    t0 = time.perf_counter()
    t2t = _read_parquet_folder(home, "t2t_completions")
    t2t = t2t[t2t["audit_id"] == AUDIT_ID]
    if with_i2t:
        descs = _read_parquet_folder(home, "i2t_descriptions")
        words = _read_parquet_folder(home, "description_words")
    info["read_s"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    tf: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    # T2T: keep the last landed row per completion key (the landing table is append-only)
    t2t = t2t.sort_values("generated_at").drop_duplicates(["setting", "descriptor", "letter", "run"], keep="last")
    paper_docs: dict[tuple[str, str], set] = {}  # the paper's documents (docs/method.md#3a-paper-statistics)
    paper_letters: dict[tuple[str, str], set] = {}
    word_docs: dict[tuple[str, str, str], set] = {}
    for row in t2t.itertuples(index=False):  # the reference scripts' loop over rows
        document = (row.descriptor, row.descriptor_row, row.run)
        paper_docs.setdefault(("t2t", row.setting), set()).add(document)
        paper_letters.setdefault(("t2t", row.setting), set()).add(row.letter)
        if row.parse_status != "ok" or pd.isna(row.word):
            continue
        word = str(row.word).strip().lower()
        if not word:
            continue
        doc = tf.setdefault(("t2t", row.setting), {}).setdefault(row.descriptor, {})
        doc[word] = doc.get(word, 0) + 1
        word_docs.setdefault(("t2t", row.setting, word), set()).add(document)
    if with_i2t:
        descs = descs[descs["audit_id"] == I2T_AUDIT_ID]
        descs = descs.sort_values("generated_at").drop_duplicates(["audit_id", "image_setting", "descriptor", "image_index", "setting"], keep="last")
        meta = {}
        for row in descs.itertuples(index=False):
            if row.status in ("ok", "truncated"):
                modality = "t2i" if row.description_kind == "objective" else "i2t"
                meta[row.description_id] = (modality, row.setting, image_target(row.descriptor, row.image_setting))
                paper_docs.setdefault((modality, row.setting), set()).add(row.description_id)
        words = words.drop_duplicates(["description_id", "token_index"], keep="last")
        for row in words.itertuples(index=False):
            key = meta.get(row.description_id)
            if key is None or not pd.isna(row.drop_reason) or pd.isna(row.word):
                continue
            word = str(row.word).strip()
            if not word:
                continue
            doc = tf.setdefault(key[:2], {}).setdefault(key[2], {})
            doc[word] = doc.get(word, 0) + 1
            word_docs.setdefault((*key[:2], word), set()).add(row.description_id)
    pairs = []
    for (modality, setting), docs in tf.items():
        dfreq: dict[str, int] = {}
        word_total: dict[str, int] = {}
        doc_len = {d: sum(ws.values()) for d, ws in docs.items()}
        for ws in docs.values():
            for w, c in ws.items():
                dfreq[w] = dfreq.get(w, 0) + 1
                word_total[w] = word_total.get(w, 0) + c
        n_docs = len(docs)
        grand = sum(doc_len.values())
        for d, ws in docs.items():
            for w, c in ws.items():
                idf = math.log(n_docs / dfreq[w])
                pairs.append(
                    {
                        "modality": modality,
                        "setting": setting,
                        "descriptor": d,
                        "word": w,
                        "tf": c,
                        "df": dfreq[w],
                        "idf": idf,
                        "tfidf": c * idf,
                        "pmi": math.log2((c * grand) / (doc_len[d] * word_total[w])),
                        "table": ((c, doc_len[d] - c), (word_total[w] - c, grand - doc_len[d] - word_total[w] + c)),
                    }
                )
    info["tf_df_loop_s"] = time.perf_counter() - t1
    info["pairs"] = len(pairs)

    # Fisher's exact test, one scipy call per pair; estimate first, subsample if over budget
    t2 = time.perf_counter()
    probe = min(2000, len(pairs))
    for p in pairs[:probe]:
        p["fisher_p"] = fisher_exact(p["table"], alternative="greater").pvalue
    per_pair = (time.perf_counter() - t2) / max(1, probe)
    info["fisher_per_pair_us"] = per_pair * 1e6
    estimated_total = info["read_s"] + info["tf_df_loop_s"] + per_pair * len(pairs)
    info["estimated_full_s"] = estimated_total
    if estimated_total <= budget_s:
        for p in pairs[probe:]:
            p["fisher_p"] = fisher_exact(p["table"], alternative="greater").pvalue
        info["fisher_s"] = time.perf_counter() - t2
        info["fisher_pairs_measured"] = len(pairs)
        info["subsampled"] = False
    else:
        rng = random.Random(sample_seed)
        remaining = budget_s - info["read_s"] - info["tf_df_loop_s"]
        budget_pairs = max(20 * probe, int(remaining / per_pair))
        k = max(0, min(len(pairs) - probe, budget_pairs - probe))
        sample = rng.sample(range(probe, len(pairs)), k)
        for i in sample:
            pairs[i]["fisher_p"] = fisher_exact(pairs[i]["table"], alternative="greater").pvalue
        measured_s = time.perf_counter() - t2
        n_measured = probe + len(sample)
        info["fisher_s_measured"] = measured_s
        info["fisher_pairs_measured"] = n_measured
        info["fisher_s"] = measured_s / n_measured * len(pairs)  # extrapolated to every pair
        info["subsampled"] = True

    t3 = time.perf_counter()
    res = pd.DataFrame(pairs).drop(columns=["table"])
    if "fisher_p" not in res:
        res["fisher_p"] = np.nan
    parts = []
    res["paper_p_value"] = paper_p_values(
        res,
        pd.Series({k: len(v) for k, v in word_docs.items()}),
        pd.Series({k: len(v) * max(1, len(paper_letters.get(k, ()))) for k, v in paper_docs.items()}),
    )
    for _, g in res.groupby(["modality", "setting"]):
        g = g.copy()
        if not info["subsampled"]:
            g["fisher_q"] = false_discovery_control(g["fisher_p"].to_numpy(), method="bh")
        parts.append(g)
    res = pd.concat(parts, ignore_index=True)
    info["stats_bh_s"] = time.perf_counter() - t3
    info["total_s"] = info["read_s"] + info["tf_df_loop_s"] + info["fisher_s"] + info["stats_bh_s"]
    return res, info


def compare(dora, base, fisher_q: bool) -> dict:
    """Join on (modality, setting, descriptor, word); max relative difference per statistic."""
    key = ["modality", "setting", "descriptor", "word"]
    merged = dora.merge(base, on=key, how="outer", suffixes=("_dora", "_base"), indicator=True)
    out = {
        "pairs_dora": len(dora),
        "pairs_baseline": len(base),
        "only_in_dora": int((merged["_merge"] == "left_only").sum()),
        "only_in_baseline": int((merged["_merge"] == "right_only").sum()),
    }
    both = merged[merged["_merge"] == "both"]
    cols = ["tf", "df", "idf", "tfidf", "pmi", "paper_p_value", "fisher_p"] + (["fisher_q"] if fisher_q else [])
    for c in cols:
        a = both[f"{c}_dora"].astype(float).to_numpy()
        b = both[f"{c}_base"].astype(float).to_numpy()
        ok = ~np.isnan(b)
        a, b = a[ok], b[ok]
        denom = np.maximum(np.maximum(np.abs(a), np.abs(b)), 1e-300)
        rel = np.abs(a - b) / denom
        rel[(a == b)] = 0.0
        out[f"max_rel_diff_{c}"] = float(rel.max()) if len(rel) else 0.0
        out[f"compared_{c}"] = int(len(rel))
    out["agree"] = out["only_in_dora"] == 0 and out["only_in_baseline"] == 0 and all(out[f"max_rel_diff_{c}"] <= REL_TOL for c in cols)
    return out


# --------------------------------------------------------------------------- vectorised peer
def vectorised_peer(home: Path, with_i2t: bool):
    """The strongest straightforward peer: vectorised pandas + scikit-learn + scipy.

    Same inputs and definitions as :func:`reference_baseline` (docs/method.md#3-associations), without
    Python row loops: pandas reads and deduplicates the landing Parquet (``drop_duplicates``),
    one scikit-learn ``CountVectorizer`` document-term matrix per (modality, setting)
    (documents = descriptors, tokens = their words; identity analyzer), tf / df / document
    lengths / word totals from the sparse matrix, Fisher's one-sided test for all pairs at
    once with scipy's vectorised hypergeometric tail (``hypergeom.sf(tf - 1, T, word_total,
    doc_length)``, = ``fisher_exact(..., alternative="greater")``), the z-score p-value, PMI and
    BH (``false_discovery_control``).

    Returns ``(result DataFrame, info dict)`` with phase times (read, documents, statistics).
    """
    import pandas as pd
    from scipy.stats import false_discovery_control, hypergeom
    from sklearn.feature_extraction.text import CountVectorizer

    info: dict = {}
    t0 = time.perf_counter()
    cols = ["audit_id", "setting", "descriptor", "descriptor_row", "letter", "run", "word", "parse_status", "generated_at"]
    t2t = pd.read_parquet(home / "landing" / "t2t_completions", columns=cols)
    if with_i2t:
        descs = pd.read_parquet(
            home / "landing" / "i2t_descriptions",
            columns=[
                "audit_id",
                "description_id",
                "image_setting",
                "descriptor",
                "image_index",
                "setting",
                "description_kind",
                "status",
                "generated_at",
            ],
        )
        words = pd.read_parquet(home / "landing" / "description_words", columns=["description_id", "token_index", "word", "drop_reason"])
    info["read_s"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    t2t = t2t[t2t["audit_id"] == AUDIT_ID]
    t2t = t2t.sort_values("generated_at", kind="stable").drop_duplicates(["setting", "descriptor", "letter", "run"], keep="last")
    # the paper's documents (docs/method.md#3a-paper-statistics): a probe row in one run x its letters; a description
    docs = t2t.drop_duplicates(["setting", "descriptor", "descriptor_row", "run"]).groupby("setting").size()
    letters = t2t.groupby("setting")["letter"].nunique()
    n_paper = {("t2t", st): int(docs[st] * letters[st]) for st in docs.index}
    t2t = t2t[(t2t["parse_status"] == "ok") & t2t["word"].notna()]
    w = t2t["word"].str.strip().str.lower()
    doc_ids = t2t["descriptor"] + "|" + t2t["descriptor_row"].astype(str) + "|" + t2t["run"].astype(str)
    parts = [
        pd.DataFrame(
            {
                "modality": "t2t",
                "setting": t2t["setting"].to_numpy(),
                "descriptor": t2t["descriptor"].to_numpy(),
                "word": w.to_numpy(),
                "doc": doc_ids.to_numpy(),
            }
        )
    ]
    if with_i2t:
        descs = descs[descs["audit_id"] == I2T_AUDIT_ID].sort_values("generated_at", kind="stable")
        descs = descs.drop_duplicates(["audit_id", "image_setting", "descriptor", "image_index", "setting"], keep="last")
        descs = descs[descs["status"].isin(["ok", "truncated"])]
        descs = descs.assign(
            modality=np.where(descs["description_kind"] == "objective", "t2i", "i2t"),
            descriptor=[image_target(d, s) for d, s in zip(descs["descriptor"], descs["image_setting"], strict=True)],
        )
        words = words.drop_duplicates(["description_id", "token_index"], keep="last")
        words = words[words["drop_reason"].isna() & words["word"].notna()]
        n_paper.update({k: int(v) for k, v in descs.groupby(["modality", "setting"]).size().items()})
        joined = words.merge(descs[["description_id", "modality", "setting", "descriptor"]], on="description_id")
        parts.append(
            pd.DataFrame(
                {
                    "modality": joined["modality"].to_numpy(),
                    "setting": joined["setting"].to_numpy(),
                    "descriptor": joined["descriptor"].to_numpy(),
                    "word": joined["word"].str.strip().to_numpy(),
                    "doc": joined["description_id"].to_numpy(),
                }
            )
        )
    doc_words = pd.concat(parts, ignore_index=True)
    doc_words = doc_words[doc_words["word"] != ""]
    paper_df = doc_words.groupby(["modality", "setting", "word"])["doc"].nunique()
    documents = {
        key: group.groupby("descriptor", sort=True)["word"].agg(list) for key, group in doc_words.groupby(["modality", "setting"], sort=True)
    }
    info["documents_s"] = time.perf_counter() - t1

    t2 = time.perf_counter()
    out = []
    for (modality, setting), docs in documents.items():
        vectorizer = CountVectorizer(analyzer=lambda tokens: tokens, lowercase=False)
        matrix = vectorizer.fit_transform(list(docs)).tocoo()
        matrix.sum_duplicates()  # canonical order first: a later .sum() would reorder row/col/data in place
        vocab = vectorizer.get_feature_names_out()
        descriptors = docs.index.to_numpy()
        tf = matrix.data.astype(np.int64)
        doc_len = np.asarray(matrix.sum(axis=1)).ravel()[matrix.row]
        word_total = np.asarray(matrix.sum(axis=0)).ravel()[matrix.col]
        dfreq = np.bincount(matrix.col, minlength=len(vocab))[matrix.col]
        grand = int(matrix.sum())
        idf = np.log(len(docs) / dfreq)
        tfidf = tf * idf
        fisher_p = hypergeom.sf(tf - 1, grand, word_total, doc_len)
        out.append(
            pd.DataFrame(
                {
                    "modality": modality,
                    "setting": setting,
                    "descriptor": descriptors[matrix.row],
                    "word": vocab[matrix.col],
                    "tf": tf,
                    "df": dfreq,
                    "idf": idf,
                    "tfidf": tfidf,
                    "pmi": np.log2((tf * grand) / (doc_len * word_total)),
                    "fisher_p": fisher_p,
                    "fisher_q": false_discovery_control(fisher_p, method="bh"),
                }
            )
        )
    res = pd.concat(out, ignore_index=True)
    res["paper_p_value"] = paper_p_values(res, paper_df, pd.Series(n_paper))
    info["stats_s"] = time.perf_counter() - t2
    info["pairs"] = len(res)
    info["total_s"] = info["read_s"] + info["documents_s"] + info["stats_s"]
    return res, info


def run_dora_models_only(home: Path) -> Timing:
    """``dbt run --select +fct_associations --full-refresh``: the models alone, every audit
    recomputed from the landing zone (no data tests, no unit tests), in-process."""
    from analytics.dbt_runner import invoke_dbt

    timing = Timing()
    with measured(timing):
        invoke_dbt(["run", "--select", DBT_SELECTION, "--full-refresh", "--quiet", *_dbt_target(home)], home)
    return timing


# --------------------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default="/tmp/dora-bench-scale", help="scratch DORA_HOME (wiped unless --reuse)")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="fraction of paper scale for development runs (e.g. 0.1): scales --descriptors and "
        "--i2t-descriptors when they are not given; BENCHMARKS.md is only written at scale 1",
    )
    parser.add_argument("--descriptors", type=int, default=None, help="T2T descriptors (default 406 x scale)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--shard-rows", type=int, default=512)
    parser.add_argument("--i2t-descriptors", type=int, default=None, help="T2I prompts of the vision part (default 344 x scale; 0 = skip it)")
    parser.add_argument("--no-overhead", action="store_true", help="skip the empty-landing build (dbt's fixed cost)")
    parser.add_argument("--i2t-words", type=float, default=70.0, help="mean kept words per description")
    parser.add_argument("--baseline-budget", type=float, default=600.0, help="seconds; above it Fisher is subsampled")
    parser.add_argument("--reuse", action="store_true", help="reuse landing data already in --home")
    parser.add_argument("--no-write", action="store_true", help="do not write BENCHMARKS.md")
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error("--scale must be > 0")
    if args.descriptors is None:
        args.descriptors = max(1, round(406 * args.scale))
    if args.i2t_descriptors is None:
        args.i2t_descriptors = max(1, round(344 * args.scale))
    paper_scale = args.descriptors == 406 and args.runs == 10 and args.i2t_descriptors in (0, 344)

    home = Path(args.home).resolve()
    os.environ["DORA_HOME"] = str(home)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with_i2t = args.i2t_descriptors > 0 and description_words_available()
    gen = Timing()
    if not args.reuse:
        shutil.rmtree(home, ignore_errors=True)
        with measured(gen):
            rows = synth_t2t(home, args.descriptors, args.runs, args.shard_rows)
            i2t = synth_description_words(home, args.i2t_descriptors, kept_per_description=args.i2t_words) if with_i2t else (0, 0, 0)
    else:
        (home / "warehouse.duckdb").unlink(missing_ok=True)
        rows = args.descriptors * len(SETTINGS) * len(LETTERS) * args.runs
        i2t = (0, 0, 0)
        if with_i2t:
            import duckdb

            glob = str(home / "landing" / "description_words" / "**" / "*.parquet")
            dglob = str(home / "landing" / "i2t_descriptions" / "**" / "*.parquet")
            with duckdb.connect() as con:
                tokens, kept = con.sql("select count(*), count(word) from read_parquet(?)", params=[glob]).fetchall()[0]
                descs = con.sql("select count(*) from read_parquet(?)", params=[dglob]).fetchall()[0][0]
            i2t = (descs, tokens, kept)
            with_i2t = i2t[1] > 0

    def landing_size(table: str) -> tuple[int, float]:
        files = [f for f in (home / "landing" / table).rglob("*.parquet") if f.name != "_schema.parquet"]
        return len(files), sum(f.stat().st_size for f in files) / 1e6

    shards, size_mb = landing_size("t2t_completions")
    data_lines = [
        f"T2T: {rows:,} synthetic completions ({args.descriptors} descriptors x 5 settings x 26 letters x {args.runs} runs), "
        f"{shards} landing shards of {args.shard_rows} rows, {size_mb:.0f} MB Parquet; Zipf-like real English words, "
        "parse statuses ok/no_word/wrong_letter/truncated/empty/not_ing"
    ]
    if with_i2t:
        wshards, wsize = landing_size("description_words")
        data_lines.append(
            f"I2T/T2I: {i2t[0]:,} synthetic image descriptions ({args.i2t_descriptors} descriptors x 2 image settings x 10 "
            f"images x 5 description settings) with {i2t[1]:,} landed tokens, of which **{i2t[2]:,} kept description words**, "
            f"{wshards} shards, {wsize:.0f} MB Parquet (the `i2t_descriptions` / `description_words` tables)"
        )
    else:
        data_lines.append("I2T/T2I description words: not benchmarked (the tables / dbt models not present)")
    for ln in data_lines:
        print(ln, flush=True)
    if gen.wall_s:
        print(f"generated in {gen.wall_s:.0f} s", flush=True)

    dora_t, nodes = run_dora(home)
    dora = read_dora(home)
    print(
        f"dora dbt build +fct_associations: {dora_t.wall_s:.1f} s wall, {dora_t.cpu_s:.1f} s CPU, "
        f"peak RSS {dora_t.peak_rss_gb:.2f} GB; {len(dora):,} associations",
        flush=True,
    )
    slow = sorted(nodes.items(), key=lambda kv: -kv[1])[:6]
    print("  slowest nodes: " + ", ".join(f"{k.split('.')[-1]} {v:.1f}s" for k, v in slow), flush=True)
    kinds_line = ", ".join(f"{n} {k}s {t:.1f} s" for k, (n, t) in dora_t.extra["kinds"].items())
    print(f"  node execution time by kind (2 dbt threads, so they overlap): {kinds_line}", flush=True)
    overhead = None if args.no_overhead else dbt_fixed_overhead(home)
    if overhead is not None:
        print(
            f"  dbt's fixed cost: the same build on an empty landing zone ({overhead.extra['nodes']} nodes) takes "
            f"{overhead.wall_s:.1f} s wall, {overhead.cpu_s:.1f} s CPU",
            flush=True,
        )

    base_t = Timing()
    with measured(base_t):
        base, info = reference_baseline(home, args.baseline_budget, with_i2t)
    total_base = info["total_s"]
    print(
        f"baseline (pandas + row loops + {info['pairs']:,} fisher_exact calls + BH): "
        f"read {info['read_s']:.1f} s, tf/df loops {info['tf_df_loop_s']:.1f} s, "
        f"Fisher {info['fisher_s']:.1f} s{' (extrapolated)' if info['subsampled'] else ''} "
        f"({info['fisher_per_pair_us']:.0f} us/pair), stats+BH {info['stats_bh_s']:.1f} s; "
        f"total {total_base:.1f} s; measured wall {base_t.wall_s:.1f} s, CPU {base_t.cpu_s:.1f} s, "
        f"peak RSS {base_t.peak_rss_gb:.2f} GB",
        flush=True,
    )
    if info["subsampled"]:
        print(
            f"  Fisher measured on {info['fisher_pairs_measured']:,} random pairs in "
            f"{info['fisher_s_measured']:.1f} s, extrapolated to {info['pairs']:,} pairs",
            flush=True,
        )
    cmp = compare(dora, base, fisher_q=not info["subsampled"])
    peer_t = Timing()
    with measured(peer_t):
        peer, peer_info = vectorised_peer(home, with_i2t)
    peer_cmp = compare(dora, peer, fisher_q=True)
    print(
        f"vectorised peer (pandas + sklearn CountVectorizer + scipy hypergeom.sf + BH): read {peer_info['read_s']:.1f} s, "
        f"documents {peer_info['documents_s']:.1f} s, statistics {peer_info['stats_s']:.1f} s; wall {peer_t.wall_s:.1f} s, "
        f"CPU {peer_t.cpu_s:.1f} s, peak RSS {peer_t.peak_rss_gb:.2f} GB; same numbers: {peer_cmp['agree']}",
        flush=True,
    )
    models_t = run_dora_models_only(home)
    print(f"dora models only (`dbt run --full-refresh`): {models_t.wall_s:.1f} s wall, {models_t.cpu_s:.1f} s CPU", flush=True)
    vs_peer = (
        f"dora with tests {dora_t.wall_s:.1f} s / models only {models_t.wall_s:.1f} s vs the vectorised peer {peer_t.wall_s:.1f} s: "
        f"peer / dora = {peer_t.wall_s / dora_t.wall_s:.2f}x with tests, {peer_t.wall_s / models_t.wall_s:.2f}x models only; "
        f"vs the reference-style baseline {total_base:.1f} s: {total_base / dora_t.wall_s:.1f}x with tests, {total_base / models_t.wall_s:.1f}x models only"
    )
    print(vs_peer, flush=True)
    ratio = total_base / dora_t.wall_s
    measured_ratio = base_t.wall_s / dora_t.wall_s
    print(f"same numbers: {cmp['agree']} ({cmp})", flush=True)
    cpu_ratio = base_t.cpu_s / dora_t.cpu_s if dora_t.cpu_s else float("nan")
    print(
        f"speed-up dora / baseline: {ratio:.1f}x"
        + (f" (extrapolated; measured part alone {measured_ratio:.1f}x)" if info["subsampled"] else "")
        + f" (goal >= 50x); dora < 60 s: {dora_t.wall_s < 60}; CPU time ratio {cpu_ratio:.1f}x",
        flush=True,
    )
    load_end = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"ru_maxrss of the whole process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB; "
        f"load average at start {load:.1f}, at end {load_end:.1f} on {os.cpu_count()} cores",
        flush=True,
    )

    if not args.no_write and not paper_scale:
        print("BENCHMARKS.md not written: not paper scale (--scale / sizes changed)", flush=True)
    if not args.no_write and paper_scale:
        from benchmarks.report import write_section

        lines = data_lines + [
            f"dora `dbt build --select +fct_associations` (staging, intermediate, marts + every schema/unit test, in-process): "
            f"**{dora_t.wall_s:.1f} s wall**, {dora_t.cpu_s:.1f} s CPU, peak RSS {dora_t.peak_rss_gb:.2f} GB, "
            f"{len(dora):,} associations; slowest nodes: "
            + ", ".join(f"{k.split('.')[-1]} {v:.1f} s" for k, v in slow)
            + f"; node execution time by kind (2 dbt threads, overlapping): {kinds_line}"
            + (
                f"; dbt's fixed cost (the same {overhead.extra['nodes']} nodes on an empty landing zone): "
                f"{overhead.wall_s:.1f} s wall, {overhead.cpu_s:.1f} s CPU"
                if overhead is not None
                else ""
            ),
            f"reference-style baseline (pandas read, `itertuples` loops building tf/df dicts, one "
            f"`scipy.stats.fisher_exact` per pair, z-score p, PMI, BH): **{total_base:.1f} s**"
            + (
                " (Fisher extrapolated from a random subsample: "
                f"{info['fisher_pairs_measured']:,} of {info['pairs']:,} pairs measured in {info['fisher_s_measured']:.1f} s; "
                f"measured wall of the baseline as run: {base_t.wall_s:.1f} s)"
                if info["subsampled"]
                else ""
            )
            + f" = read {info['read_s']:.1f} s + loops {info['tf_df_loop_s']:.1f} s + Fisher {info['fisher_s']:.1f} s "
            f"({info['fisher_per_pair_us']:.0f} us/pair x {info['pairs']:,} pairs) + stats/BH {info['stats_bh_s']:.1f} s; "
            f"peak RSS {base_t.peak_rss_gb:.2f} GB",
            f"**speed-up: {ratio:.1f}x** (goal >= 50x)"
            + (f"; measured part alone {measured_ratio:.1f}x" if info["subsampled"] else "")
            + f"; dora under 60 s: {dora_t.wall_s < 60} (goal: yes); CPU time ratio {cpu_ratio:.1f}x "
            f"(baseline {base_t.cpu_s:.1f} s CPU, one core; dora {dora_t.cpu_s:.1f} s CPU over 2 cores)",
            f"same numbers on the compared pairs: {cmp['agree']} (pairs dora {cmp['pairs_dora']:,}, baseline "
            f"{cmp['pairs_baseline']:,}, only in one side {cmp['only_in_dora'] + cmp['only_in_baseline']}; max relative "
            "difference "
            + ", ".join(f"{c[13:]} {v:.1e}" for c, v in cmp.items() if c.startswith("max_rel_diff_"))
            + (f"; Fisher p compared on the {cmp['compared_fisher_p']:,} measured pairs, q not compared" if info["subsampled"] else "")
            + ")",
            f"vectorised peer (pandas read + `drop_duplicates`, one scikit-learn `CountVectorizer` document-term matrix per "
            f"(modality, setting), scipy `hypergeom.sf` for every pair at once, z-score p, PMI, BH): **{peer_t.wall_s:.1f} s** wall "
            f"= read {peer_info['read_s']:.1f} s + documents {peer_info['documents_s']:.1f} s + statistics {peer_info['stats_s']:.1f} s; "
            f"{peer_t.cpu_s:.1f} s CPU, peak RSS {peer_t.peak_rss_gb:.2f} GB; same numbers as dora: {peer_cmp['agree']} (max relative "
            "difference " + ", ".join(f"{c[13:]} {v:.1e}" for c, v in peer_cmp.items() if c.startswith("max_rel_diff_")) + ")",
            f"dora models only (`dbt run --select +fct_associations --full-refresh`, no tests): {models_t.wall_s:.1f} s wall, {models_t.cpu_s:.1f} s CPU",
            f"**{vs_peer}**",
            f"machine load average at start: {load:.1f}, at end {load_end:.1f}, on {os.cpu_count()} cores (other work was running: "
            "wall times are upper bounds; CPU times are less sensitive)",
        ]
        write_section(
            "Association analytics at paper scale",
            "\n".join(f"- {ln}" for ln in lines) + "\n\nCommand: `python -m benchmarks.bench_analytics_scale`",
        )
    return 0 if cmp["agree"] and peer_cmp["agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
