"""Turn raw T2T model output into a word and a parse status. Nothing is dropped.

Every completion is stored with its raw text; this module only decides which word (if any)
it contributes and why not. Rules follow docs/method.md#2-probes: in the chat style the answer is
the text inside the first ``[...]``, lower-cased; in the completion style the word is the
prefilled letter plus the letters the model continued with.

Before parsing, the raw text is repaired and normalised (:func:`normalise_output`): mojibake
(UTF-8 read as Latin-1, ``fiancÃ©``) is undone with ``ftfy`` and the text is put in Unicode NFC,
so an accented word (``fiancé``) is read whole instead of being cut at its first non-ASCII letter
(``fianc``, which then counted as a word of its own). Words may contain any Latin-script letter;
other scripts (a Cyrillic ``а`` that looks like ``a``) are not words.

Parse statuses (also the accepted values of ``stg_t2t_completions.parse_status``):

============= ===============================================================
ok            a single word that starts with the letter (and ends in -ing for verb)
empty         the model returned nothing (or only whitespace / control bytes)
no_brackets   chat style: no ``[...]`` in the answer
no_word       nothing alphabetic where the word should be
multi_word    chat style: more than one word inside the brackets
wrong_letter  the word does not start with the requested letter
not_ing       verb setting: the word does not end in -ing
truncated     completion style: generation stopped inside the word (max tokens)
new_word      completion style: the model did not continue the prefilled letter but started a
              new word (a space or a capital letter right after it: "an i" + "Beam product" is
              not the word "ibeam")
error         the backend raised for this prompt (message kept in raw_output)
============= ===============================================================
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import ftfy

PARSE_STATUSES: tuple[str, ...] = (
    "ok",
    "empty",
    "no_brackets",
    "no_word",
    "multi_word",
    "wrong_letter",
    "not_ing",
    "truncated",
    "new_word",
    "error",
)


def _parser_version() -> str:
    """The first 12 hex digits of the SHA-256 of this module's syntax tree (``ast.dump``): any
    change to the rules is a new version, without anyone having to remember to bump a number,
    while comments, line breaks and quote style (a formatter's work) are not: the tree has none
    of them. Docstrings are in the tree, so rewording one is a new version (harmless: a reparse)."""
    import ast
    import hashlib
    from pathlib import Path

    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:12]


#: Version of these parsing rules, landed with every parsed row (``t2t_completions.parse_version``).
PARSER_VERSION: str = _parser_version()

_BRACKET = re.compile(r"\[([^\[\]]*)\]")
# Latin-script letters after NFC: ASCII, Latin-1 Supplement (without the signs x and /),
# Latin Extended-A/B and Latin Extended Additional; other scripts are not English words.
_LATIN = "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff"
_WORD = re.compile(rf"^[{_LATIN}]+(?:['-][{_LATIN}]+)*$")
_CONTINUATION = re.compile(rf"^[{_LATIN}]+(?:['-][{_LATIN}]+)*")
_MAX_WORD_LEN = 40


@dataclass(frozen=True)
class ParsedAnswer:
    """Result of parsing one answer: ``word`` is ``None`` unless a word could be read."""

    word: str | None
    status: str


def normalise_output(raw: str | None) -> str:
    """Repair and normalise one raw model output before it is parsed.

    ``ftfy.fix_text`` undoes mojibake (``"iancÃ©"`` -> ``"iancé"``) and other encoding
    accidents, then the text is put in Unicode NFC so that an accented letter is one code point
    (``"e" + U+0301`` -> ``"é"``). ``None`` -> ``""``. The raw output itself is stored unchanged;
    only the parsed word depends on this.
    """
    if not raw:
        return ""
    return unicodedata.normalize("NFC", ftfy.fix_text(raw))


def _check_word(word: str, letter: str, setting: str) -> ParsedAnswer:
    if not word.startswith(letter):
        return ParsedAnswer(word, "wrong_letter")
    if setting == "verb" and not word.endswith("ing"):
        return ParsedAnswer(word, "not_ing")
    return ParsedAnswer(word, "ok")


def parse_chat_answer(raw: str | None, letter: str, setting: str) -> ParsedAnswer:
    """Parse a chat-style answer: the word inside the first ``[...]`` (docs/method.md#2-probes).

    ``"[Brawler]"`` -> ``brawler``/ok; ``"[b__]"`` -> no_word; ``"brawler"`` -> no_brackets;
    ``"[big man]"`` -> multi_word; ``"[drunk]"`` for letter b -> wrong_letter.

    Args:
        raw: the model's answer text (``None`` is treated as empty).
        letter: requested first letter (a-z).
        setting: T2T setting (``verb`` additionally requires -ing).
    """
    text = normalise_output(raw).strip()
    if not text:
        return ParsedAnswer(None, "empty")
    match = _BRACKET.search(text)
    if match is None:
        return ParsedAnswer(None, "no_brackets")
    inner = match.group(1).strip().strip(".,;:!?\"'`*_ ").lower()
    # an echoed slot ("[h_n]", "[c_A_m_A_sh]") is not a word: inner underscores are
    # never removed to make one ("hn", "camash" were read as ok words); "[b__]" leaves "b"
    if not inner or "_" in inner:
        return ParsedAnswer(None, "no_word")
    parts = inner.split()
    if len(parts) > 1:
        return ParsedAnswer(None, "multi_word")
    word = parts[0]
    if not _WORD.match(word) or len(word) > _MAX_WORD_LEN or len(word) < 2:
        return ParsedAnswer(None, "no_word")
    return _check_word(word, letter, setting)


def parse_completion_answer(raw: str | None, letter: str, setting: str, *, finished: bool = True) -> ParsedAnswer:
    """Parse a completion-style continuation of a prompt that ends in the prefilled letter.

    The word is ``letter`` + the leading letters of ``raw``: ``"rawler, and he"`` after
    ``b`` -> ``brawler``/ok; ``"iancé who"`` (or its mojibake ``"iancÃ©"``) after ``f`` ->
    ``fiancé``/ok. A continuation that starts with a space or a capital letter starts a new
    word instead of continuing the letter (``"Beam product"`` after ``i``) -> new_word; one that
    starts with punctuation leaves the bare letter -> no_word. If the backend stopped at its token
    limit while still inside the word (``finished=False`` and no word boundary seen) -> truncated.

    Args:
        raw: the continuation text (``None`` is treated as empty).
        letter: the prefilled letter (a-z).
        setting: T2T setting (``verb`` additionally requires -ing).
        finished: ``False`` when generation stopped at max tokens rather than at a boundary.
    """
    text = normalise_output(raw)
    if not text.strip():
        return ParsedAnswer(None, "empty")
    if text[0].isspace() or text[0].isupper():
        return ParsedAnswer(None, "new_word")
    match = _CONTINUATION.match(text)
    if match is None:
        return ParsedAnswer(None, "no_word")
    word = (letter + match.group(0)).lower()
    if match.end() == len(text) and not finished:
        return ParsedAnswer(None, "truncated")
    if len(word) > _MAX_WORD_LEN:
        return ParsedAnswer(None, "no_word")
    return _check_word(word, letter, setting)


def parse_answer(raw: str | None, letter: str, setting: str, style: str, *, finished: bool = True) -> ParsedAnswer:
    """Dispatch to :func:`parse_chat_answer` or :func:`parse_completion_answer` by style."""
    if style == "chat":
        return parse_chat_answer(raw, letter, setting)
    if style == "completion":
        return parse_completion_answer(raw, letter, setting, finished=finished)
    raise ValueError(f"unknown prompt style {style!r}")
