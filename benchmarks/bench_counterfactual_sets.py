"""Start-up cost of the counterfactual family: reading the released image sets and the stop list.

Usage: python -m benchmarks.bench_counterfactual_sets [--repeats 3]

Every counterfactual audit process reads the released sets of its subsets (7,936 + 5,052 + 836
sets, Table 5 of Howard et al.; 170,832 captions, 16,652 of them distinct) and lands the
stop list. Prints, as the median of ``--repeats`` alternating runs in this process:

* the captions' reading: every caption read with
  :func:`~models_inference.probes.counterfactual.sets.read_caption_stepwise` (the reading
  before, which sorted the attribute values for each caption) against each distinct caption
  read once with :func:`~models_inference.probes.counterfactual.sets.parse_caption` (one
  compiled pattern per subset), as :func:`~models_inference.probes.counterfactual.sets.load_subset`
  now reads them; the two must give equal readings, or the script stops; then the whole
  ``load_subset`` of the three subsets as it is now;
* the stop list read from spaCy's module file (``spacy_english_stop_words``) against
  ``from spacy.lang.en.stop_words import STOP_WORDS`` (which imports spaCy, thinc and torch),
  each in a new Python process, so that neither finds the other's imports.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def _captions() -> list[tuple[str, str]]:
    """(caption, subset) of every member of every released set, in file order."""
    import pyarrow.parquet as pq

    from models_inference.probes.counterfactual.sets import DATA_DIR, SUBSETS

    out = []
    for subset in SUBSETS:
        table = pq.read_table(DATA_DIR / f"metadata_{subset}.parquet").to_pydict()
        out += [(c, subset) for col, values in table.items() if col.startswith("caption_") for c in values]
    return out


def _timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def _import_seconds(code: str) -> float:
    """Wall seconds of ``python -c code`` (a new process: its imports are its own)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - t0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from models_inference.probes.counterfactual.sets import SUBSETS, load_subset, parse_caption, read_caption_stepwise

    captions = _captions()

    def before():
        return [read_caption_stepwise(c, subset) for c, subset in captions]

    def now():
        parsed = {}
        for key in captions:
            if key not in parsed:
                parsed[key] = parse_caption(*key)
        return [parsed[key] for key in captions]

    def whole_load():
        load_subset.cache_clear()
        return [load_subset(subset) for subset in SUBSETS]

    old, new, load = [], [], []
    for _ in range(args.repeats):
        t_old, read_old = _timed(before)
        t_new, read_new = _timed(now)
        if read_new != read_old:
            raise SystemExit("the compiled pattern and the stepwise reading read the captions differently")
        old.append(t_old)
        new.append(t_new)
        load.append(_timed(whole_load)[0])
    print(
        f"{len(captions)} captions ({len(set(captions))} distinct): stepwise, each caption {statistics.median(old):.2f} s; "
        f"compiled pattern, each distinct caption once {statistics.median(new):.2f} s: "
        f"{statistics.median(old) / statistics.median(new):.1f}x (median of {args.repeats}; equal readings); "
        f"load_subset of the 3 subsets now {statistics.median(load):.2f} s"
    )

    spacy_code = "from spacy.lang.en.stop_words import STOP_WORDS; assert len(STOP_WORDS) == 326"
    file_code = "from ingestion.biasdora.description_words import spacy_english_stop_words as s; assert len(s()) == 326"
    old = [_import_seconds(spacy_code) for _ in range(args.repeats)]
    new = [_import_seconds(file_code) for _ in range(args.repeats)]
    print(
        f"stop list in a new process: importing spaCy {statistics.median(old):.2f} s, "
        f"its module file {statistics.median(new):.2f} s: {statistics.median(old) / statistics.median(new):.1f}x"
    )


if __name__ == "__main__":
    main()
