"""Counterfactual sets: the SocialCounterfactuals set structure shipped with dora, samples of
it, user-defined sets, and image-set manifests.

Source: Howard et al. (seed 003) §3.1, App. A.1, Table 5; docs/families/counterfactual.md#attributes-and-subsets and docs/families/counterfactual.md#socialcounterfactuals-sets. The
authors' released metadata (``ingestion/data/counterfactuals/metadata_<subset>.parquet``,
MIT, converted losslessly from their CSVs) lists every set: the diffusion seed, guidance
scale (``cfg_scale``), prompt-to-prompt threshold and one caption per member
(``A picture of a White male plumber``). A set's id is ``<subset>-<row>`` (the 0-based row
of the released file; ``filename`` + ``rank`` is not unique in Race-Gender). The occupation
is the caption without its prefix, article and attributes (the authors' own rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from models_inference.probes.counterfactual.prompts import ATTRIBUTE_VALUES, SUBSETS

#: Folder of the shipped SocialCounterfactuals metadata, lexicon and licence.
DATA_DIR = Path(__file__).resolve().parents[3] / "ingestion" / "data" / "counterfactuals"
#: The four caption prefixes of the dataset (docs/families/counterfactual.md#socialcounterfactuals-sets).
CAPTION_PREFIXES: tuple[str, ...] = ("A photo of ", "A picture of ", "An image of ", "")


class CounterfactualInputError(ValueError):
    """Invalid counterfactual input (manifest, attribute value, occupation); the message
    names the file, row and field."""


@dataclass(frozen=True)
class Member:
    """One member of a set: its two attribute values (caption order) and, for image sets, the image.

    Attributes:
        a1, a2: attribute values of ``a1_type`` / ``a2_type`` ("White", "male").
        caption: the dataset caption (or the T2I prompt) of this member.
        image_path: image file (image sets only).
    """

    a1: str
    a2: str
    caption: str = ""
    image_path: str | None = None

    @property
    def group(self) -> str:
        """The intersectional group label "<a1> <a2>" (Table 2 style)."""
        return f"{self.a1} {self.a2}"


@dataclass(frozen=True)
class CounterfactualSet:
    """One counterfactual set (App. A.1): one occupation, one subset, one member per attribute pair.

    Attributes:
        set_id: ``<subset>-<row>`` for the shipped sets, or the manifest's / user's id.
        subset: ``race_gender`` / ``physical_gender`` / ``physical_race`` (Table 5).
        occupation: normalised key (lower-case, single spaces): grouping and the >= 35 rule.
        occupation_text: as written in the captions ("Civil Engineer"): used in prompts.
        members: 12 / 10 / 30 members (Table 5).
        seed, cfg_scale: the dataset's diffusion seed and guidance scale (None if unknown).
    """

    set_id: str
    subset: str
    occupation: str
    occupation_text: str
    members: tuple[Member, ...]
    seed: int | None = None
    cfg_scale: float | None = None
    caption_prefix: str = ""

    @property
    def a1_type(self) -> str:
        return SUBSETS[self.subset][0]

    @property
    def a2_type(self) -> str:
        return SUBSETS[self.subset][1]


def normalise_occupation(text: str) -> str:
    """Occupation key: lower-case, ``_`` and runs of spaces -> one space ("Civil Engineer" -> "civil engineer")."""
    return re.sub(r"\s+", " ", text.replace("_", " ")).strip().lower()


def parse_caption(caption: str, subset: str) -> tuple[str, str, str, str]:
    """Split a dataset caption into (prefix, a1, a2, occupation text).

    ``"A picture of an Indian female plumber"`` (race_gender) -> ``("A picture of ", "Indian",
    "female", "plumber")``.

    Raises:
        CounterfactualInputError: the caption does not start with an article and the subset's
            two attribute values.
    """
    a1_type, a2_type = SUBSETS[subset]
    rest, prefix = caption, ""
    for p in CAPTION_PREFIXES[:-1]:
        if caption.startswith(p):
            prefix, rest = p, caption[len(p):]
            break
    m = re.match(r"(?:an?|An?) (.*)$", rest)
    if not m:
        raise CounterfactualInputError(f"caption {caption!r}: no article after the prefix")
    rest = m.group(1)
    found = []
    for kind in (a1_type, a2_type):
        value = next((v for v in sorted(ATTRIBUTE_VALUES[kind], key=len, reverse=True) if rest.startswith(v + " ")), None)
        if value is None:
            raise CounterfactualInputError(f"caption {caption!r}: no {kind} value of {ATTRIBUTE_VALUES[kind]} where expected")
        found.append(value)
        rest = rest[len(value) + 1:]
    if not rest.strip():
        raise CounterfactualInputError(f"caption {caption!r}: no occupation")
    return prefix, found[0], found[1], rest.strip()


@lru_cache(maxsize=3)
def load_subset(subset: str) -> tuple[CounterfactualSet, ...]:
    """Every released set of ``subset`` (7,936 / 5,052 / 836 sets, Table 5), in file order.

    Raises:
        KeyError: unknown subset. CounterfactualInputError: a caption that does not parse
            (names the row and column).
    """
    import pyarrow.parquet as pq

    if subset not in SUBSETS:
        raise KeyError(f"unknown subset {subset!r}; expected one of {list(SUBSETS)}")
    table = pq.read_table(DATA_DIR / f"metadata_{subset}.parquet").to_pydict()
    captions = [c for c in table if c.startswith("caption_")]
    sets = []
    for row in range(len(table["seed"])):
        members = []
        occupations = set()
        prefix = ""
        for col in captions:
            cap = table[col][row]
            try:
                prefix, a1, a2, occ = parse_caption(cap, subset)
            except CounterfactualInputError as exc:
                raise CounterfactualInputError(f"metadata_{subset}.parquet row {row} {col}: {exc}") from None
            occupations.add(occ)
            members.append(Member(a1, a2, cap))
        occ_text = sorted(occupations)[0]
        sets.append(
            CounterfactualSet(
                f"{subset}-{row:05d}", subset, normalise_occupation(occ_text), occ_text, tuple(members),
                seed=int(table["seed"][row]), cfg_scale=float(table["cfg_scale"][row]), caption_prefix=prefix,
            )
        )
    return tuple(sets)


def sets_per_occupation(subset: str) -> dict[str, int]:
    """Released sets per occupation key of ``subset`` (the >= 35 rule of App. E counts these)."""
    counts: dict[str, int] = {}
    for s in load_subset(subset):
        counts[s.occupation] = counts.get(s.occupation, 0) + 1
    return counts


def sample_sets(
    subsets: Sequence[str],
    *,
    occupations: Sequence[str] = (),
    sets_per_occupation: int = 1,
    max_sets: int = 0,
) -> list[CounterfactualSet]:
    """A reproducible sample of the released sets.

    Per subset and occupation, the first ``sets_per_occupation`` sets in file order (0 = all);
    occupations in ``occupations`` (normalised keys; empty = every occupation of the subset,
    alphabetically); then at most ``max_sets`` per subset (0 = no cap).

    Raises:
        KeyError: unknown subset. CounterfactualInputError: an occupation that no set of a
            requested subset depicts (the message lists close matches).
    """
    wanted = [normalise_occupation(o) for o in occupations]
    out: list[CounterfactualSet] = []
    for subset in subsets:
        by_occ: dict[str, list[CounterfactualSet]] = {}
        for s in load_subset(subset):
            by_occ.setdefault(s.occupation, []).append(s)
        missing = [o for o in wanted if o not in by_occ]
        if missing:
            import difflib

            hints = {o: difflib.get_close_matches(o, list(by_occ), n=3) for o in missing}
            raise CounterfactualInputError(f"occupation(s) not in the {subset} sets: {hints}")
        picked: list[CounterfactualSet] = []
        for occ in wanted or sorted(by_occ):
            sets = by_occ[occ]
            picked += sets if sets_per_occupation <= 0 else sets[:sets_per_occupation]
        out += picked[:max_sets] if max_sets > 0 else picked
    return out


def custom_sets(
    occupations: Sequence[str], subsets: Sequence[str], values: dict[str, Sequence[str]] | None = None
) -> list[CounterfactualSet]:
    """User-defined text sets: one set per (subset, occupation) over the given attribute values.

    Args:
        occupations: occupation phrases as they should appear in the prompts.
        subsets: Table 5 subsets.
        values: per attribute type (``race`` / ``gender`` / ``physical``) the values to use
            instead of App. A.1's (any non-empty strings).

    Raises:
        CounterfactualInputError: empty occupation / value list. KeyError: unknown subset.
    """
    vals = {k: tuple(v) for k, v in ATTRIBUTE_VALUES.items()}
    for k, v in (values or {}).items():
        if k not in vals:
            raise CounterfactualInputError(f"unknown attribute type {k!r}; expected one of {list(vals)}")
        if not v or any(not str(x).strip() for x in v):
            raise CounterfactualInputError(f"attribute {k!r}: values must be non-empty strings, got {list(v)}")
        vals[k] = tuple(str(x).strip() for x in v)
    out = []
    for subset in subsets:
        a1_type, a2_type = SUBSETS[subset]
        for occ in occupations:
            if not occ.strip():
                raise CounterfactualInputError("an occupation is empty")
            members = tuple(Member(a1, a2) for a1 in vals[a1_type] for a2 in vals[a2_type])
            key = normalise_occupation(occ)
            out.append(CounterfactualSet(f"{subset}-custom-{key.replace(' ', '_')}", subset, key, occ.strip(), members))
    return out


#: Columns of an image-set manifest (CSV or Parquet).
MANIFEST_COLUMNS: tuple[str, ...] = ("set_id", "subset", "occupation", "a1", "a2", "image_path")


def load_manifest(path: str | Path) -> list[CounterfactualSet]:
    """Image sets from a manifest (CSV/Parquet) with columns :data:`MANIFEST_COLUMNS`
    (e.g. SocialCounterfactuals exported from its dataset). Relative image paths are read
    relative to the manifest's folder.

    Raises:
        CounterfactualInputError: missing file or column, an unknown subset or attribute
            value, a missing image file, a set whose members disagree on subset / occupation
            or repeat an attribute pair; every message names the file, the row (1-based data
            row) and the field.
    """
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise CounterfactualInputError(f"manifest {path}: no such file")
    table = pq.read_table(path) if path.suffix == ".parquet" else pcsv.read_csv(path)
    missing = [c for c in MANIFEST_COLUMNS if c not in table.column_names]
    if missing:
        raise CounterfactualInputError(f"manifest {path}: missing column(s) {missing}; expected {list(MANIFEST_COLUMNS)}")
    rows = table.select(list(MANIFEST_COLUMNS)).to_pylist()
    grouped: dict[str, list[tuple[int, dict]]] = {}
    for i, row in enumerate(rows, start=1):
        where = f"manifest {path} row {i}"
        for col in MANIFEST_COLUMNS:
            if row[col] is None or not str(row[col]).strip():
                raise CounterfactualInputError(f"{where}: field {col!r} is empty")
        subset = str(row["subset"])
        if subset not in SUBSETS:
            raise CounterfactualInputError(f"{where}: field 'subset' = {subset!r} is not one of {list(SUBSETS)}")
        for col, kind in zip(("a1", "a2"), SUBSETS[subset]):
            if str(row[col]) not in ATTRIBUTE_VALUES[kind]:
                raise CounterfactualInputError(
                    f"{where}: field {col!r} = {row[col]!r} is not a {kind} value of {list(ATTRIBUTE_VALUES[kind])}"
                )
        image = Path(str(row["image_path"]))
        if not image.is_absolute():
            image = path.parent / image
        if not image.is_file():
            raise CounterfactualInputError(f"{where}: field 'image_path' = {row['image_path']!r}: no such file ({image})")
        row["image_path"] = str(image)
        grouped.setdefault(str(row["set_id"]), []).append((i, row))
    out = []
    for set_id, items in grouped.items():
        first = items[0][1]
        seen = set()
        members = []
        for i, row in items:
            for col in ("subset", "occupation"):
                if row[col] != first[col]:
                    raise CounterfactualInputError(
                        f"manifest {path} row {i}: field {col!r} = {row[col]!r} differs from {first[col]!r} of set {set_id!r}"
                    )
            pair = (str(row["a1"]), str(row["a2"]))
            if pair in seen:
                raise CounterfactualInputError(f"manifest {path} row {i}: set {set_id!r} repeats member {pair}")
            seen.add(pair)
            members.append(Member(pair[0], pair[1], image_path=row["image_path"]))
        occ = str(first["occupation"]).strip()
        out.append(CounterfactualSet(set_id, str(first["subset"]), normalise_occupation(occ), occ, tuple(members)))
    return out


@dataclass(frozen=True)
class Lexicon:
    """A word lexicon with directions (App. E.1): ``word -> (dimension, direction)``."""

    name: str
    entries: tuple[tuple[str, str, int], ...] = field(default_factory=tuple)


def competence_lexicon(path: str | Path | None = None) -> Lexicon:
    """The competence lexicon: by default the authors' 861-word ``competency_words.txt``
    (Howard et al. code release, MIT; every word direction +1, dimension ``competence``).

    A user file may be a one-word-per-line list (all +1 competence) or a CSV with columns
    ``word,dimension,direction`` (Nicolas et al. 2021 style: dimensions competence / warmth,
    directions +1 / -1).

    Raises:
        CounterfactualInputError: unreadable file, bad direction / dimension (names the line).
    """
    p = Path(path) if path else DATA_DIR / "competency_words.txt"
    if not p.is_file():
        raise CounterfactualInputError(f"lexicon {p}: no such file")
    entries = []
    lines = p.read_text(encoding="utf-8").splitlines()
    is_csv = bool(lines) and lines[0].strip().lower().replace(" ", "") == "word,dimension,direction"
    for n, line in enumerate(lines[1:] if is_csv else lines, start=2 if is_csv else 1):
        if not line.strip():
            continue
        if is_csv:
            parts = [x.strip() for x in line.split(",")]
            if len(parts) != 3 or parts[1] not in ("competence", "warmth") or parts[2] not in ("1", "-1", "+1"):
                raise CounterfactualInputError(
                    f"lexicon {p} line {n}: expected word,dimension(competence|warmth),direction(1|-1), got {line!r}"
                )
            entries.append((parts[0].lower(), parts[1], int(parts[2])))
        else:
            entries.append((line.strip().lower(), "competence", 1))
    return Lexicon(p.name, tuple(dict.fromkeys(entries)))
