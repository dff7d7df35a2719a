"""The T2T word-completion prompt prefixes: five lexical settings per descriptor.

BiasDora's text-to-text probe (seed 004, Figure 8 and Appendix A.8; docs/method.md#2-probes) asks a
model to complete the last word of a sentence about a descriptor, given its first letter. The
sentence differs by *setting*:

* singular (``t2t_setting1.csv``): ``An alcoholic person is``
* plural (``t2t_setting2.csv``): ``Alcoholic people are``
* adjective (``t2t_setting3.csv``): ``This alcoholic person is``
* noun (``t2t_setting4.csv``): ``This alcoholic person is a/an``
* verb (``t2t_setting5.csv``): ``This alcoholic person is``

A :class:`T2TTemplate` holds only the prefix, up to (not including) the letter slot; the probe
code (``models_inference``) appends the slot (`` a[__].``, `` b`` ...) and the instructions.
This module is the one place where the prefixes are made: :func:`curated_t2t_templates` reads
the paper's CSVs, :func:`render_t2t_templates` builds the same shapes for any descriptor table.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

import pyarrow as pa

from ingestion.biasdora.descriptors import default_biasdora_dir, normalise_descriptors, plural_descriptor
from ingestion.contracts import SCHEMAS
from ingestion.contracts.biasdora import CURATED_SOURCE
from ingestion.crows_pairs import BIAS_DIMENSIONS
from ingestion.vocabulary import T2T_SETTINGS

#: Arrow schema of :func:`templates_table`.
TEMPLATES_SCHEMA = pa.schema(
    [
        ("setting", pa.string()),
        ("descriptor", pa.string()),
        ("bias_dimension", pa.string()),
        ("prefix", pa.string()),
        ("source", pa.string()),
        ("descriptor_row", pa.int32()),
    ]
)

_NOUN_SLOT = "a/an"
_THIS_GLITCH = re.compile(r"^This([a-zA-Z]+)$")


@dataclass(frozen=True)
class T2TTemplate:
    """One T2T prompt prefix.

    Attributes:
        setting: one of :data:`T2T_SETTINGS`.
        descriptor: the descriptor key (:func:`ingestion.biasdora.descriptors.normalise_descriptor`).
        bias_dimension: the CrowS-Pairs bias dimension the descriptor was listed under.
        prefix: the sentence up to, not including, the letter slot, e.g.
            "An alcoholic person is" (singular) or "This alcoholic person is a/an" (noun).
        source: 'biasdora' for the paper's CSVs, else the descriptor table's ``source``.
        descriptor_row: 1-based ordinal of this row among the rows of the setting's list with
            the same descriptor key (1 for most; 2 for the second "An old person is" row of
            ``t2t_setting1.csv``, listed under disability). A probe unit is a row of the
            paper's lists (docs/method.md#1-descriptors), so (setting, descriptor, descriptor_row) is
            the row's key.
    """

    setting: str
    descriptor: str
    bias_dimension: str
    prefix: str
    source: str = "custom"
    descriptor_row: int = 1


def _check_settings(settings: Iterable[str]) -> tuple[str, ...]:
    settings = tuple(settings)
    unknown = [s for s in settings if s not in T2T_SETTINGS]
    if unknown:
        raise ValueError(f"unknown T2T setting(s) {unknown}; expected some of {T2T_SETTINGS}")
    return settings


def _split_template(raw: str, setting: str) -> tuple[str, str | None]:
    """(descriptor phrase, verb or None) of one template cell of the paper's CSVs."""
    words = raw.split()  # collapses doubled, leading and trailing whitespace
    # The paper made settings 3-5 by replacing "A"/"An" with "This" everywhere, capitals inside
    # words included: "This ThisIDS person" was "An AIDS person", "This Thismish" "An Amish".
    words = [words[0]] + [_THIS_GLITCH.sub(r"A\1", w) for w in words[1:]] if words else words
    if words and setting == "noun" and words[-1].lower() == _NOUN_SLOT:
        words = words[:-1]
    verb = words.pop().lower() if words and words[-1].lower() in ("is", "are") else None
    if not words:
        raise ValueError(f"no descriptor in template {raw!r}")
    return " ".join(words), verb


def _repair_prefix(phrase: str, verb: str | None, key: str, setting: str) -> str:
    """The prefix with whitespace collapsed and a missing or mismatched verb repaired."""
    if verb is None:
        # Rows that lost their verb ("A skinny person", "This skinny person a/an").
        verb = "are" if setting == "plural" else "is"
    elif setting == "plural" and verb == "is" and plural_descriptor(key) == _strip_det(phrase):
        verb = "are"  # "Caucasians is" -> "Caucasians are"; singular rows ("A girl is") stay
    return f"{phrase} {verb}" + (f" {_NOUN_SLOT}" if setting == "noun" else "")


def _strip_det(phrase: str) -> str:
    words = phrase.lower().split()
    if len(words) > 1 and words[0] in ("a", "an", "the", "this"):
        words = words[1:]
    return " ".join(words)


def curated_t2t_templates(settings: Sequence[str] = T2T_SETTINGS, folder: str | Path | None = None) -> list[T2TTemplate]:
    """The T2T prefixes the BiasDora paper used, read from its ``t2t_setting1..5.csv``.

    Source: the CSVs published with BiasDora (seed 004, Appendix A.8; docs/method.md#2-probes),
    columns ``bias_type,template``. Each template is kept verbatim except for these repairs:

    * whitespace collapsed ("This young person is  a/an" -> "This young person is a/an");
    * a missing final verb is put back: "is" ("are" in the plural setting), before "a/an"
      in the noun setting ("A skinny person" -> "A skinny person is");
    * in the plural setting a plural subject with "is" gets "are" ("Caucasians is"); rows
      of that file that are singular sentences ("A girl is") are left as they are.
    * in settings 3-5 the paper turned "A"/"An" into "This" everywhere, also inside words;
      those words are put back ("This ThisIDS person is" -> "This AIDS person is", likewise
      "Thismish" -> "Amish", "Thisrabic" -> "Arabic", "Thistheist" -> "Atheist").

    ``descriptor`` is :func:`~ingestion.biasdora.descriptors.normalise_descriptor` of the phrase
    inside the prefix (without the leading article or "This" and the trailing verb), so
    "Alcoholic people are" has the key "alcoholic person"; ``bias_dimension`` is the CSV's
    ``bias_type``. **Every row is kept** (docs/method.md#1-descriptors: a probe unit is a row of the
    paper's lists): the files repeat a descriptor under several bias dimensions (e.g. "An old
    person is" under age and disability), and each repeat is probed, with ``descriptor_row``
    = 1, 2, ... numbering the rows of one descriptor key in file order. Associations pool per
    descriptor over its rows and belong to every dimension of its rows (the dbt bridge
    ``int_descriptor_dimensions``).

    Args:
        settings: which settings to read (a subset of :data:`T2T_SETTINGS`).
        folder: the folder holding the CSVs; default the shipped ``ingestion/data/biasdora``.

    Returns:
        Templates in settings order, then file order; ``source`` = 'biasdora'. For the
        shipped files 406 / 413 / 406 / 406 / 406 rows (singular / plural / adjective / noun
        / verb; 364 / 368 / 364 / 364 / 364 descriptor keys).

    Raises:
        ValueError: an unknown setting; a file without ``bias_type``/``template`` columns, a
            ``bias_type`` outside the CrowS-Pairs dimensions or an empty template (the message
            names the file and line).
        FileNotFoundError: a CSV is missing.
    """
    settings = _check_settings(settings)
    if folder is None:  # the shipped files: spaCy's ~6 s are paid once per machine
        return [t for t in _shipped_curated_templates() if t.setting in settings]
    return _read_curated_templates(settings, Path(folder))


def _shipped_curated_templates() -> list[T2TTemplate]:
    """Every setting's templates from the shipped CSVs, computed once per machine (spaCy's
    ~6 s) and kept in dora's cache (:func:`ingestion.build_state.cache_root`).

    The cache is keyed by a fingerprint of the five CSVs, this module, the descriptor
    normaliser and the spaCy version (``ingestion/build_state.py``), so any change re-reads.
    """
    from importlib.metadata import version

    from ingestion.biasdora import descriptors
    from ingestion.build_state import Fingerprint, cache_json, cached_json

    folder = default_biasdora_dir()
    fp = Fingerprint()
    for i in range(1, len(T2T_SETTINGS) + 1):
        fp.add_file(folder / f"t2t_setting{i}.csv")
    fp.add_file(Path(__file__)).add_file(Path(descriptors.__file__)).add_value("spacy", version("spacy"))
    cached = cached_json("curated_t2t_templates", fp)
    if cached is not None:
        try:
            return [T2TTemplate(**row) for row in cached]
        except TypeError:
            pass  # an entry of another shape: read the files again
    templates = _read_curated_templates(T2T_SETTINGS, folder)
    cache_json("curated_t2t_templates", fp, [asdict(t) for t in templates])
    return templates


def _read_curated_templates(settings: Sequence[str], folder: Path) -> list[T2TTemplate]:
    out: list[T2TTemplate] = []
    for setting in settings:
        path = folder / f"t2t_setting{T2T_SETTINGS.index(setting) + 1}.csv"
        if not path.is_file():
            raise FileNotFoundError(f"T2T template file not found: {path}")
        rows: list[tuple[str, str, str | None]] = []  # (dimension, phrase, verb)
        with open(path, encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            if not {"bias_type", "template"} <= set(reader.fieldnames or ()):
                raise ValueError(f"{path.name} line 1: expected columns bias_type,template")
            for row in reader:
                line = reader.line_num
                dim = (row["bias_type"] or "").strip().lower()
                if dim not in BIAS_DIMENSIONS:
                    raise ValueError(f"{path.name} line {line}: unknown bias_type {dim!r}")
                try:
                    rows.append((dim, *_split_template(row["template"] or "", setting)))
                except ValueError as exc:
                    raise ValueError(f"{path.name} line {line}: bad template ({exc})") from None
        keys = normalise_descriptors(phrase for _, phrase, _ in rows)
        seen: dict[str, int] = {}
        for (dim, phrase, verb), key in zip(rows, keys, strict=True):
            seen[key] = seen.get(key, 0) + 1
            prefix = _repair_prefix(phrase, verb, key, setting)
            out.append(T2TTemplate(setting, key, dim, prefix, CURATED_SOURCE, seen[key]))
    return out


@functools.lru_cache(maxsize=1)
def _inflector():
    import inflect

    return inflect.engine()


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def render_t2t_templates(descriptors: pa.Table, settings: Sequence[str] = T2T_SETTINGS) -> list[T2TTemplate]:
    """Build the T2T prefixes for any descriptor table (e.g. the extracted descriptors).

    Shapes (BiasDora seed 004, Figure 8; docs/method.md#2-probes), with the descriptor key as
    the singular phrase:

    * singular: "A/An <key> is", the article chosen by inflect's ``a()`` from the first
      sound ("An alcoholic person is", "An asian is", "A european is");
    * plural: "<Plural> are", from the table's ``plural`` column when it is set, else
      :func:`~ingestion.biasdora.descriptors.plural_descriptor` ("Alcoholic people are");
    * adjective and verb: "This <key> is"; noun: "This <key> is a/an".

    Every (descriptor, bias dimension) row is a probe row, as in :func:`curated_t2t_templates`
    (a descriptor listed under two dimensions is probed once per row; ``descriptor_row``
    numbers its rows); exact repeats of (descriptor, bias dimension) are dropped.

    Args:
        descriptors: a ``descriptors`` table (columns ``descriptor``, ``bias_dimension``,
            ``source``; ``plural`` optional); shape (n, >=3).
        settings: a subset of :data:`T2T_SETTINGS`.

    Returns:
        Templates in settings order, then table order; ``source`` = the row's ``source``.

    Raises:
        ValueError: an unknown setting, or a row with an empty descriptor.
        KeyError: a required column is missing.
    """
    settings = _check_settings(settings)
    for col in ("descriptor", "bias_dimension", "source"):
        if col not in descriptors.column_names:
            raise KeyError(f"descriptor table has no column {col!r}")
    keys = descriptors.column("descriptor").to_pylist()
    dims = descriptors.column("bias_dimension").to_pylist()
    sources = descriptors.column("source").to_pylist()
    plurals = descriptors.column("plural").to_pylist() if "plural" in descriptors.column_names else [None] * len(keys)
    inflector = _inflector()
    out: list[T2TTemplate] = []
    for setting in settings:
        seen: dict[str, int] = {}
        pairs: set[tuple[str, str]] = set()
        for key, dim, source, plural in zip(keys, dims, sources, plurals, strict=True):
            if not key or not key.strip():
                raise ValueError("descriptor table has a row with an empty descriptor")
            if (key, dim) in pairs:
                continue
            pairs.add((key, dim))
            seen[key] = seen.get(key, 0) + 1
            if setting == "singular":
                prefix = f"{_capitalise(inflector.a(key))} is"
            elif setting == "plural":
                prefix = f"{_capitalise(plural or plural_descriptor(key))} are"
            elif setting == "noun":
                prefix = f"This {key} is {_NOUN_SLOT}"
            else:
                prefix = f"This {key} is"
            out.append(T2TTemplate(setting, key, dim, prefix, source, seen[key]))
    return out


def templates_table(templates: Iterable[T2TTemplate]) -> pa.Table:
    """Templates as an Arrow table (schema :data:`TEMPLATES_SCHEMA`; shape (n, 5))."""
    return pa.Table.from_pylist([asdict(t) for t in templates], schema=TEMPLATES_SCHEMA)


# --------------------------------------------------------------------------- list rows
#: Arrow schema of :func:`descriptor_rows_table` (landing table ``descriptor_rows``).
DESCRIPTOR_ROWS_SCHEMA = SCHEMAS["descriptor_rows"]

#: The T2I CSVs spell bias types with spaces ("race color", "socioeconomic status").
_T2I_DIMENSION_ALIASES = {"socioeconomic status": "socioeconomic"}
T2I_LIST_SETTINGS: tuple[str, ...] = ("singular", "plural")


def t2i_list_rows(setting: str, folder: str | Path | None = None) -> list[tuple[str, str, str, int]]:
    """The rows of the paper's T2I list of one setting (``t2i_setting1.csv`` singular,
    ``t2i_setting2.csv`` plural), in file order: ``(bias_dimension, phrase, descriptor key,
    descriptor_row)``. The bias types are spelled with spaces in these files ("race color",
    "socioeconomic status") and mapped to the CrowS-Pairs names; the key is
    :func:`~ingestion.biasdora.descriptors.normalise_descriptor` of the phrase, and repeats of a key are
    numbered by ``descriptor_row`` (every row is a probe unit, docs/method.md#1-descriptors).

    Raises:
        FileNotFoundError: the CSV is missing. ValueError: missing columns, an unknown
        bias_type or an empty phrase (the message names the file and line).
    """
    folder = Path(folder) if folder is not None else default_biasdora_dir()
    path = folder / f"t2i_setting{T2I_LIST_SETTINGS.index(setting) + 1}.csv"
    column = f"target_{setting}"
    if not path.is_file():
        raise FileNotFoundError(f"T2I template file not found: {path}")
    rows: list[tuple[str, str]] = []
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        if not {"bias_type", column} <= set(reader.fieldnames or ()):
            raise ValueError(f"{path.name} line 1: expected columns bias_type,{column}")
        for row in reader:
            raw = " ".join((row["bias_type"] or "").lower().split())
            dim = _T2I_DIMENSION_ALIASES.get(raw, raw.replace(" ", "-"))
            if dim not in BIAS_DIMENSIONS:
                raise ValueError(f"{path.name} line {reader.line_num}: unknown bias_type {dim!r}")
            phrase = " ".join((row[column] or "").split()).rstrip(".")
            if not phrase:
                raise ValueError(f"{path.name} line {reader.line_num}: empty {column}")
            rows.append((dim, phrase))
    seen: dict[str, int] = {}
    out = []
    for (dim, phrase), key in zip(rows, normalise_descriptors(p for _, p in rows), strict=True):
        seen[key] = seen.get(key, 0) + 1
        out.append((dim, phrase, key, seen[key]))
    return out


def curated_t2i_rows(folder: str | Path | None = None) -> list[dict]:
    """Every row of the paper's ``t2i_setting1|2.csv`` with its descriptor key and dimensions.

    Source: BiasDora (seed 004, Appendix A.9) T2I lists, 344 rows per setting. A row's bias
    dimensions are its CSV ``bias_type`` plus every dimension ``bias_target_mapping.json``
    lists its descriptor key under (docs/method.md#1-descriptors: the mapping assigns e.g. woman,
    mother to gender, which the T2I CSVs never name).

    Returns:
        Dicts ``setting, row_number, descriptor, descriptor_row, phrase, bias_dimension,
        dimensions`` (``dimensions``: sorted list, the row's own dimension first), in
        setting then file order.

    Raises:
        FileNotFoundError: a CSV is missing. ValueError: missing columns, an unknown
        bias_type or an empty phrase (the message names the file and line).
    """
    from ingestion.biasdora.descriptors import curated_descriptors

    folder = Path(folder) if folder is not None else default_biasdora_dir()
    mapping: dict[str, set[str]] = {}
    cur = curated_descriptors(folder / "bias_target_mapping.json")
    for key, dim in zip(cur.column("descriptor").to_pylist(), cur.column("bias_dimension").to_pylist(), strict=True):
        mapping.setdefault(key, set()).add(dim)
    out: list[dict] = []
    for setting in T2I_LIST_SETTINGS:
        for n, (dim, phrase, key, descriptor_row) in enumerate(t2i_list_rows(setting, folder), 1):
            extra = sorted(mapping.get(key, set()) - {dim})
            out.append(
                {
                    "setting": setting,
                    "row_number": n,
                    "descriptor": key,
                    "descriptor_row": descriptor_row,
                    "phrase": phrase,
                    "bias_dimension": dim,
                    "dimensions": [dim, *extra],
                }
            )
    return out


def descriptor_rows_table(folder: str | Path | None = None) -> pa.Table:
    """Every row of the paper's T2T and T2I lists with each bias dimension it belongs to.

    The source of the dbt bridge ``int_descriptor_dimensions`` (docs/method.md#1-descriptors):
    a descriptor belongs to every dimension it is listed under. T2T: one row per CSV row
    (``membership_source`` 'row'; settings 1-5 = 406 / 413 / 406 / 406 / 406 rows). T2I: one
    row per (CSV row, dimension): the row's ``bias_type`` ('row') and each further dimension of
    its key in ``bias_target_mapping.json`` ('mapping').

    Returns:
        A table with schema :data:`DESCRIPTOR_ROWS_SCHEMA`.
    """
    rows: list[dict] = []
    templates = curated_t2t_templates() if folder is None else curated_t2t_templates(folder=folder)
    counters: dict[str, int] = {}
    for t in templates:
        counters[t.setting] = counters.get(t.setting, 0) + 1
        rows.append(
            {
                "list_modality": "t2t",
                "setting": t.setting,
                "row_number": counters[t.setting],
                "descriptor": t.descriptor,
                "descriptor_row": t.descriptor_row,
                "bias_dimension": t.bias_dimension,
                "membership_source": "row",
                "phrase": t.prefix,
            }
        )
    for r in curated_t2i_rows(folder):
        for j, dim in enumerate(r["dimensions"]):
            rows.append(
                {
                    "list_modality": "t2i",
                    "setting": r["setting"],
                    "row_number": r["row_number"],
                    "descriptor": r["descriptor"],
                    "descriptor_row": r["descriptor_row"],
                    "bias_dimension": dim,
                    "membership_source": "row" if j == 0 else "mapping",
                    "phrase": r["phrase"],
                }
            )
    return pa.Table.from_pylist(rows, schema=DESCRIPTOR_ROWS_SCHEMA)
