"""Reference statistics the SQL is checked against, computed with scipy."""

from __future__ import annotations

from collections import Counter

from scipy import stats


def fisher_q_values(docs: dict[str, list[str]]) -> dict[tuple[str, str], float]:
    """(descriptor, word) -> the one-sided Fisher's exact test BH q-value of the association
    (docs/method.md#3-associations): per descriptor's document, [[a, n - a], [c, N - n - c]] with
    a = the word's count in it, n = its length, c = the word's count elsewhere, N = all words;
    Benjamini-Hochberg over every (descriptor, word) pair. Empty documents are left out."""
    tf = {d: Counter(ws) for d, ws in docs.items() if ws}
    total = Counter(w for ws in docs.values() for w in ws)
    grand = sum(total.values())
    keys, pvals = [], []
    for d, counts in tf.items():
        length = sum(counts.values())
        for w, a in counts.items():
            c = total[w] - a
            keys.append((d, w))
            pvals.append(stats.fisher_exact([[a, length - a], [c, grand - length - c]], alternative="greater").pvalue)
    return dict(zip(keys, map(float, stats.false_discovery_control(pvals, method="bh")), strict=True))
