"""Neutralised captions S'_s and S'_a for lmss and vlss (VLStereoSet §3.5; docs/families/vlstereoset.md#neutralised-captions-and-the-blank-image).

The paper: "S'_s and S'_a represent modified captions with "neutralized" context, where the
target term in the context has been either removed or replaced by a neutral term" (Figure 2:
*sister* -> *sibling*); its analysis is on gender only and the authors neutralised by hand.
The released data has no neutralised captions ([UNDEFINED] in docs/families/vlstereoset.md), so dora derives
them with the documented rules below (NOT FROM PAPER), stores them beside each item with the
method (:data:`NEUTRALISATION_METHOD`) and the rule applied per item, and leaves them null
(status ``target_not_found``) when no rule applies.

Rules, applied to the words that belong to the item's context (never to the filled-in
attribute, so "The nurse was a *woman*" keeps its attribute):

* gender: every word of :data:`GENDER_NEUTRAL` (the target and the other gendered words of
  the context: *He taught himself* -> *They taught themself*) is replaced by its neutral term,
  possessives included (*My mother's cooking* -> *My parent's cooking*, *the ladies' room*);
  rule ``gender_map``.
* profession, race, religion: the target phrase, or a form derived from it (a plural, or a
  demonym made with ``-n`` / ``-an`` / ``-ian``: the item *Syria* whose context says "The young
  *Syrian* man"), is **removed** when the next word is a noun
  (spaCy POS NOUN/PROPN, the pipeline of :func:`ingestion.biasdora.descriptors.load_spacy`), i.e. it modifies it
  (*The Hispanic man* -> *The man*, *Japanese people* -> *People*), rule ``removed_modifier``;
  otherwise it is **replaced** by the category's neutral noun phrase
  (:data:`NEUTRAL_NOUN`: *The nurse was* -> *The person was*, *Ethiopia is* -> *This country is*),
  rule ``replaced_noun``.

Case: a replacement at the start of the sentence is capitalised; matching is
case-insensitive on whole words.

An item none of whose rules changes both captions keeps null neutral captions with status
``target_not_found`` (recorded on its ``landing/vlstereoset_items`` row; its ``neutral`` and
``blank_neutral`` conditions are not scored). In the released file this is one item, 3 rows:
the race item *Arab* whose captions name *Saudi Arabia*, a country, not the target term, so
there is no target term in its context to remove or replace (§3.5's definition).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Recorded on every item (``neutral_method``): which rule set produced the neutral captions.
#: v2: gender possessives ("mother's") and more plurals ("wives") are neutralised; v1 left an
#: item whose only gendered word was one of them without neutral captions.
#: v3: a race / profession / religion target also matches its demonym ("Syrian" for Syria),
#: and the released file's misspelling "gentlement" is a gendered word.
NEUTRALISATION_METHOD = "dora-target-map-v3"

#: Gendered word -> gender-neutral term (Figure 2: sister -> sibling). Lower-case keys.
GENDER_NEUTRAL: dict[str, str] = {
    "sister": "sibling",
    "sisters": "siblings",
    "brother": "sibling",
    "brothers": "siblings",
    "mother": "parent",
    "mothers": "parents",
    "father": "parent",
    "fathers": "parents",
    "mom": "parent",
    "mommy": "parent",
    "mum": "parent",
    "dad": "parent",
    "daddy": "parent",
    "stepmother": "step-parent",
    "stepfather": "step-parent",
    "son": "child",
    "sons": "children",
    "daughter": "child",
    "daughters": "children",
    "boy": "child",
    "boys": "children",
    "girl": "child",
    "girls": "children",
    "schoolboy": "schoolchild",
    "schoolgirl": "schoolchild",
    "schoolboys": "schoolchildren",
    "schoolgirls": "schoolchildren",
    "man": "person",
    "men": "people",
    "woman": "person",
    "women": "people",
    "gentleman": "person",
    "gentlemen": "people",
    "lady": "person",
    "ladies": "people",
    "guy": "person",
    "guys": "people",
    "male": "person",
    "female": "person",
    "males": "people",
    "females": "people",
    "husband": "spouse",
    "wife": "spouse",
    "bride": "spouse",
    "groom": "spouse",
    "boyfriend": "partner",
    "girlfriend": "partner",
    "fiance": "partner",
    "fiancee": "partner",
    "grandfather": "grandparent",
    "grandmother": "grandparent",
    "grandpa": "grandparent",
    "grandma": "grandparent",
    "uncle": "relative",
    "aunt": "relative",
    "nephew": "relative",
    "niece": "relative",
    "king": "monarch",
    "queen": "monarch",
    "prince": "royal",
    "princess": "royal",
    "he": "they",
    "she": "they",
    "him": "them",
    "his": "their",
    "her": "their",
    "hers": "theirs",
    "himself": "themself",
    "herself": "themself",
    "moms": "parents",
    "dads": "parents",
    "stepmothers": "step-parents",
    "stepfathers": "step-parents",
    "husbands": "spouses",
    "wives": "spouses",
    "brides": "spouses",
    "grooms": "spouses",
    "boyfriends": "partners",
    "girlfriends": "partners",
    "grandfathers": "grandparents",
    "grandmothers": "grandparents",
    "uncles": "relatives",
    "aunts": "relatives",
    "nephews": "relatives",
    "nieces": "relatives",
    "kings": "monarchs",
    "queens": "monarchs",
    "princes": "royals",
    "princesses": "royals",
    # the released file's spelling of "gentlemen" in its item "There  gentlement in Congress"
    "gentlement": "people",
}
#: Possessive endings split off a gendered noun before the look-up ("mother's", "ladies'").
_POSSESSIVE = re.compile(r"^(.+?)('s|')$", re.IGNORECASE)
#: Pronouns are never split at an apostrophe ("he's" is "he is", not a possessive).
_PRONOUNS = {"he", "she", "him", "her", "his", "hers", "himself", "herself"}

#: Neutral noun phrase replacing a target used as a noun, per category (NOT FROM PAPER).
NEUTRAL_NOUN: dict[str, str] = {"profession": "the person", "race": "this country", "religion": "this faith"}

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


@dataclass(frozen=True)
class Neutralised:
    """The neutral captions of one item.

    Attributes:
        stereotype, anti_stereotype: S'_s and S'_a, or ``None`` when no rule applied.
        rule: ``gender_map``, ``removed_modifier``, ``replaced_noun`` or ``None``.
        status: ``ok`` or ``target_not_found``.
    """

    stereotype: str | None
    anti_stereotype: str | None
    rule: str | None
    status: str


def _cap_like(original: str, replacement: str, at_start: bool) -> str:
    if at_start:
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _base(word: str) -> tuple[str, str]:
    """A word as (gendered key, ending): ``("mother", "'s")`` for *mother's*, else ``(word, "")``."""
    m = _POSSESSIVE.match(word)
    if m and m.group(1).lower() in GENDER_NEUTRAL and m.group(1).lower() not in _PRONOUNS:
        return m.group(1), m.group(2)
    return word, ""


def _context_words(context: str) -> set[str]:
    return {_base(w)[0].lower() for w in _WORD.findall(re.sub(r"BLANK", " ", context, flags=re.IGNORECASE))}


def _gender(caption: str, context_words: set[str]) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match) -> str:
        nonlocal count
        word, ending = _base(m.group(0))
        neutral = GENDER_NEUTRAL.get(word.lower())
        if neutral is None or word.lower() not in context_words:
            return m.group(0)
        count += 1
        if ending == "'" and not neutral.endswith("s"):  # "ladies'" -> "people's", "sisters'" -> "siblings'"
            ending = "'s"
        return _cap_like(word, neutral, m.start() == 0) + ending

    return _WORD.sub(repl, caption), count


def _modifies_next_word(caption: str, end: int) -> bool:
    """Whether the word right after character ``end`` is a noun (spaCy POS NOUN/PROPN), i.e.
    the target before it is used as a modifier ("The Hispanic *man*")."""
    from ingestion.biasdora.descriptors import load_spacy

    doc = load_spacy()(caption)
    nxt = [t for t in doc if t.idx >= end and not t.is_space]
    return bool(nxt) and nxt[0].pos_ in ("NOUN", "PROPN") and not nxt[0].is_punct


#: Endings of the forms derived from a target that count as the target: plurals and demonyms
#: ("Syria" -> "Syrian(s)", "Crimean" -> "Crimeans"). Longest first, so "Syrians" is one match.
_DERIVED = r"(?:ians|ian|ans|an|ns|n|s)?"


def _target(caption: str, target: str, category: str) -> tuple[str, str | None]:
    pattern = re.compile(r"(?<![A-Za-z])" + re.escape(target.strip()) + _DERIVED + r"(?![A-Za-z])", re.IGNORECASE)
    m = pattern.search(caption)
    if not m:
        return caption, None
    after = caption[m.end() :]
    if _modifies_next_word(caption, m.end()):
        before = caption[: m.start()].rstrip()
        out = (before + " " + after.lstrip()) if before else after.lstrip()
        return out[:1].upper() + out[1:], "removed_modifier"
    neutral = NEUTRAL_NOUN[category]
    before = caption[: m.start()]
    if re.search(r"\b(the|a|an)\s+$", before, re.IGNORECASE):  # "The nurse" -> "The person", not "The the person"
        neutral = neutral.split(" ", 1)[1]
    return before + _cap_like(m.group(0), neutral, m.start() == 0) + after, "replaced_noun"


def neutralise(category: str, target: str, context: str, stereotype: str, anti_stereotype: str) -> Neutralised:
    """S'_s and S'_a of one item by the rules of this module (see the module docstring).

    Args:
        category: gender, profession, race or religion.
        target: the item's target term (``target`` column).
        context: the context sentence with ``BLANK`` (``context`` column).
        stereotype, anti_stereotype: S_s and S_a.

    Returns:
        A :class:`Neutralised`; ``status = 'target_not_found'`` (captions ``None``) when no rule
        changed both captions.

    Raises:
        ValueError: unknown category.
    """
    if category not in ("gender", *NEUTRAL_NOUN):
        raise ValueError(f"unknown VLStereoSet category {category!r}")
    if category == "gender":
        words = _context_words(context)
        s, ns = _gender(stereotype, words)
        a, na = _gender(anti_stereotype, words)
        ok, rule = ns > 0 and na > 0, "gender_map"
    else:
        s, rs = _target(stereotype, target, category)
        a, ra = _target(anti_stereotype, target, category)
        ok, rule = rs is not None and ra is not None, rs
    if not ok:
        return Neutralised(None, None, None, "target_not_found")
    return Neutralised(s, a, rule, "ok")


__all__ = ["GENDER_NEUTRAL", "NEUTRALISATION_METHOD", "NEUTRAL_NOUN", "Neutralised", "neutralise"]
