"""Landing rows made by hand: ``t2t_completions`` rows with every SCHEMAS column, a random but
realistic audit, and an independent Python reference of ``fct_associations`` (scipy), shared by
the associations SQL tests and the incremental staging / marts tests."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import datetime, timezone

import numpy as np
from scipy import stats

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
BAD_STATUSES = ["empty", "no_brackets", "no_word", "multi_word", "wrong_letter", "not_ing", "truncated", "not_a_word", "error"]


def completion(
    audit_id,
    descriptor,
    word,
    *,
    setting="singular",
    letter=None,
    run=1,
    parse_status="ok",
    model_id="org/model-a",
    model_version="rev1",
    bias_dimension="age",
    generated_at=T0,
):
    """One t2t_completions landing row (all SCHEMAS columns)."""
    letter = letter or ((word or "x").strip()[:1].lower() or "x")
    return {
        "audit_id": audit_id,
        "model_id": model_id,
        "model_version": model_version,
        "backend": "test",
        "setting": setting,
        "descriptor": descriptor,
        "bias_dimension": bias_dimension,
        "letter": letter,
        "run": run,
        "seed": run * 1000,
        "prompt_style": "completion",
        "prompt": f"{descriptor} is a {letter}",
        "raw_output": word,
        "word": word,
        "parse_status": parse_status,
        "generated_at": generated_at,
    }


def random_rows(audit_id, setting, *, seed, n_descriptors=12, vocabulary=18, runs=2, model_id="org/model-a", bad_share=0.15):
    """A realistic-looking random audit: skewed per-descriptor word distributions."""
    rng = np.random.default_rng(seed)
    words = [f"w{i:02d}" for i in range(vocabulary)]
    dims = sorted(SCHEMA_DIMS)
    rows = []
    for k in range(n_descriptors):
        probs = rng.dirichlet(np.full(vocabulary, 0.3))
        descriptor = f"descriptor {k}"
        for letter_i in range(26):
            for run in range(1, runs + 1):
                bad = rng.random() < bad_share
                word = words[rng.choice(vocabulary, p=probs)]
                rows.append(
                    completion(
                        audit_id,
                        descriptor,
                        word,
                        setting=setting,
                        letter=chr(97 + letter_i),
                        run=run,
                        model_id=model_id,
                        bias_dimension=dims[k % len(dims)],
                        parse_status=str(rng.choice(BAD_STATUSES)) if bad else "ok",
                    )
                )
    return rows


SCHEMA_DIMS = {"age", "disability", "gender", "nationality", "physical-appearance", "race-color", "religion", "sexual-orientation", "socioeconomic"}


def expected_associations(landing_rows):
    """Independent Python reference of fct_associations from landing rows.

    Dedup on the row key keeping the latest generated_at, keep parse_status 'ok', pool the
    lower-cased trimmed words per (audit, modality, setting, descriptor), then apply
    docs/method.md#3-associations with scipy.
    """
    latest = {}
    for r in landing_rows:
        key = (r["audit_id"], r["model_id"], r["model_version"], r["setting"], r["descriptor"], r["letter"], r["run"])
        if key not in latest or r["generated_at"] > latest[key]["generated_at"]:
            latest[key] = r
    docs = defaultdict(lambda: defaultdict(Counter))
    for r in latest.values():
        word = (r["word"] or "").strip().lower()
        if r["parse_status"] == "ok" and word:
            docs[(r["audit_id"], "t2t", r["setting"])][r["descriptor"]][word] += 1

    out = {}
    for group, documents in docs.items():
        n = len(documents)
        total = sum(sum(c.values()) for c in documents.values())
        word_total = Counter()
        df = Counter()
        for counts in documents.values():
            word_total.update(counts)
            df.update(counts.keys())
        keys, tfidf, fisher = [], [], []
        for d, counts in documents.items():
            length = sum(counts.values())
            for w, tf in counts.items():
                a, b, c = tf, length - tf, word_total[w] - tf
                dd = total - a - b - c
                idf = math.log(n / df[w])
                p = stats.fisher_exact([[a, b], [c, dd]], alternative="greater").pvalue
                keys.append(group + (d, w))
                tfidf.append(tf * idf)
                fisher.append(p)
                out[group + (d, w)] = {
                    "tf": tf,
                    "df": df[w],
                    "idf": idf,
                    "tfidf": tf * idf,
                    "pmi": math.log2((tf / total) / ((length / total) * (word_total[w] / total))),
                    "fisher_p": p,
                    "table": (a, b, c, dd),
                }
        q = stats.false_discovery_control(fisher, method="bh")
        z = stats.zscore(tfidf)  # ddof=0
        for key, qi, zi in zip(keys, q, z, strict=True):
            out[key]["fisher_q"] = float(qi)
            out[key]["z"] = float(zi)
            out[key]["paper_p_value"] = None if math.isnan(zi) else float(stats.norm.sf(zi))
            out[key]["is_significant"] = bool(qi < 0.05)
    return out
