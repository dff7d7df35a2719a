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

import hashlib
import json
import re
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Sequence

# the family's error type lives with every DoraError (the CLI finds them there); re-exported here
from ingestion.errors import InputFileError
from ingestion.quarantine import QuarantinedRow, decode_text, no_good_row_error, not_utf8, read_csv_records, read_input_bytes, shown
from models_inference.image_store import image_problem
from models_inference.probes.counterfactual.errors import CounterfactualInputError
from models_inference.probes.counterfactual.prompts import ATTRIBUTE_VALUES, SUBSETS

#: Folder of the shipped SocialCounterfactuals metadata, lexicon and licence.
DATA_DIR = Path(__file__).resolve().parents[3] / "ingestion" / "data" / "counterfactuals"
#: The four caption prefixes of the dataset (docs/families/counterfactual.md#socialcounterfactuals-sets).
CAPTION_PREFIXES: tuple[str, ...] = ("A photo of ", "A picture of ", "An image of ", "")


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


@lru_cache(maxsize=None)
def _caption_pattern(subset: str) -> re.Pattern:
    """:func:`parse_caption`'s reading as one regular expression, compiled once per subset (a
    released subset has up to 7,936 sets x 12 captions: sorting the values for each one took most
    of a second). Atomic groups keep its choices: the first prefix that matches, then the
    longest value of each attribute followed by a space, none taken back."""

    def values(kind: str) -> str:
        return "|".join(re.escape(v) for v in sorted(ATTRIBUTE_VALUES[kind], key=len, reverse=True))

    a1_type, a2_type = SUBSETS[subset]
    prefixes = "|".join(re.escape(p) for p in CAPTION_PREFIXES[:-1])
    return re.compile(rf"(?>({prefixes})?)(?:an?|An?) (?>({values(a1_type)}) )(?>({values(a2_type)}) )(.*)$")


def parse_caption(caption: str, subset: str) -> tuple[str, str, str, str]:
    """Split a dataset caption into (prefix, a1, a2, occupation text).

    ``"A picture of an Indian female plumber"`` (race_gender) -> ``("A picture of ", "Indian",
    "female", "plumber")``.

    Raises:
        CounterfactualInputError: the caption does not start with an article and the subset's
            two attribute values.
    """
    m = _caption_pattern(subset).match(caption)
    if m and m.group(4).strip():
        return m.group(1) or "", m.group(2), m.group(3), m.group(4).strip()
    return read_caption_stepwise(caption, subset)  # raises, saying where the caption fails


def read_caption_stepwise(caption: str, subset: str) -> tuple[str, str, str, str]:
    """:func:`parse_caption` one part at a time (prefix, article, a1, a2, occupation): the same
    result, slower, and on a caption that does not parse the error names the part that failed.

    Raises:
        CounterfactualInputError: as :func:`parse_caption`.
    """
    a1_type, a2_type = SUBSETS[subset]
    rest, prefix = caption, ""
    for p in CAPTION_PREFIXES[:-1]:
        if caption.startswith(p):
            prefix, rest = p, caption[len(p) :]
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
        rest = rest[len(value) + 1 :]
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
    parsed: dict[str, tuple[str, str, str, str]] = {}  # captions repeat across the sets of an occupation
    for row in range(len(table["seed"])):
        members = []
        occupations = set()
        prefix = ""
        for col in captions:
            cap = table[col][row]
            try:
                if cap not in parsed:
                    parsed[cap] = parse_caption(cap, subset)
                prefix, a1, a2, occ = parsed[cap]
            except CounterfactualInputError as exc:
                raise CounterfactualInputError(f"metadata_{subset}.parquet row {row} {col}: {exc}") from None
            occupations.add(occ)
            members.append(Member(a1, a2, cap))
        occ_text = sorted(occupations)[0]
        sets.append(
            CounterfactualSet(
                f"{subset}-{row:05d}",
                subset,
                normalise_occupation(occ_text),
                occ_text,
                tuple(members),
                seed=int(table["seed"][row]),
                cfg_scale=float(table["cfg_scale"][row]),
                caption_prefix=prefix,
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


def custom_sets(occupations: Sequence[str], subsets: Sequence[str], values: dict[str, Sequence[str]] | None = None) -> list[CounterfactualSet]:
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
#: Fewest usable members of a set: a counterfactual comparison needs two members that differ.
MIN_SET_MEMBERS = 2


@dataclass(frozen=True)
class SetFile(SequenceABC):
    """The sets of one manifest file, read row by row; it is a sequence of its good sets.

    Attributes:
        path: the manifest. dataset_id: ``cfsets-`` + 12 hex of the file's sha256 (the
            partition its quarantined rows land under in ``landing/input_quarantine``).
        sets: the sets with at least :data:`MIN_SET_MEMBERS` good members, in file order.
        quarantined: every row that was not used, with its line and reason.
    """

    path: Path
    dataset_id: str
    sets: tuple[CounterfactualSet, ...]
    quarantined: tuple[QuarantinedRow, ...] = ()

    def __len__(self) -> int:
        return len(self.sets)

    def __getitem__(self, index):
        return self.sets[index]


def _manifest_records(path: Path) -> tuple[list[tuple[int, int, dict, str]], list[QuarantinedRow], bytes]:
    """(line, data row, values, raw text) of every structurally sound row, the quarantined
    ones, and the file's bytes; Parquet rows have their data row number as line."""
    try:
        if path.suffix.lower() != ".parquet":
            records, bad, raw = read_csv_records(path, MANIFEST_COLUMNS, "counterfactual manifest")
            return [(r.line, r.row, r.values, r.raw) for r in records], bad, raw
        raw = read_input_bytes(path, "counterfactual manifest")
    except InputFileError as exc:  # the family's own type, so callers catch one error for its inputs
        raise CounterfactualInputError(str(exc)) from None
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a file that is not Parquet
        raise CounterfactualInputError(f"counterfactual manifest {path}: not a readable Parquet file ({exc})") from None
    missing = [c for c in MANIFEST_COLUMNS if c not in table.column_names]
    if missing:
        raise CounterfactualInputError(f"counterfactual manifest {path}: missing column(s) {missing}; expected {list(MANIFEST_COLUMNS)}")
    rows = table.select(list(MANIFEST_COLUMNS)).to_pylist()
    out = [
        (i, i, {k: "" if v is None else str(v).strip() for k, v in row.items()}, json.dumps(row, default=str)) for i, row in enumerate(rows, start=1)
    ]
    return out, [], raw


def _row_problem(values: dict, folder: Path) -> str | None:
    """Why one manifest row cannot be a set member (field and value), or ``None``."""
    for col in MANIFEST_COLUMNS:
        if not values[col]:
            return f"field {col!r} is empty"
    subset = values["subset"]
    if subset not in SUBSETS:
        return f"field 'subset' = {subset!r} is not one of {list(SUBSETS)}"
    for col, kind in zip(("a1", "a2"), SUBSETS[subset], strict=True):
        if values[col] not in ATTRIBUTE_VALUES[kind]:
            return f"field {col!r} = {values[col]!r} is not a {kind} value of {list(ATTRIBUTE_VALUES[kind])}"
    image = Path(values["image_path"])
    image = image if image.is_absolute() else folder / image
    why = image_problem(image)
    if why:
        return f"field 'image_path' = {values['image_path']!r}: {why} ({image})"
    values["image_path"] = str(image)
    return None


def load_manifest(path: str | Path) -> SetFile:
    """Image sets from a manifest (CSV/Parquet) with columns :data:`MANIFEST_COLUMNS`
    (e.g. SocialCounterfactuals exported from its dataset), read row by row. Relative image
    paths are read relative to the manifest's folder.

    A row is quarantined with its line and reason when it cannot be split into the header's
    fields, is not UTF-8, has an empty field, an unknown subset or attribute value, or an
    image that is missing, not decodable or a decompression bomb; when its subset or
    occupation differs from its set's first good row; or when it repeats a member. A set left
    with fewer than :data:`MIN_SET_MEMBERS` good members has its rows quarantined too.

    Returns:
        A :class:`SetFile` (a sequence of the good sets, with the quarantined rows).

    Raises:
        CounterfactualInputError: missing file, a file that is not a manifest (missing column,
            not Parquet, UTF-16), or one with no usable set; the message names the file and
            the first rows' reasons.
    """
    path = Path(path)
    records, quarantined, raw = _manifest_records(path)
    return _group_sets(path, path.name, path.parent, records, quarantined, raw, "counterfactual manifest")


def _quarantined(where: str | None, line: int, row: int, why: str, text: str) -> QuarantinedRow:
    """A file's row (``where`` = its name) or, ``where`` None, a folder's entry (its relative path)."""
    if where is None:
        return QuarantinedRow(text, None, row, why, shown(text))
    return QuarantinedRow(where, line, row, why, shown(text))


def _group_sets(path: Path, where: str | None, folder: Path, records, quarantined: list, raw: bytes, what: str) -> SetFile:
    """The good sets of ``records`` ((line, data row, values, raw text), values keyed by
    :data:`MANIFEST_COLUMNS`), every other row quarantined with its reason (see :func:`load_manifest`)."""
    grouped: dict[str, list[tuple[int, int, dict, str]]] = {}
    for line, row, values, text in records:
        why = _row_problem(values, folder)
        if why is None:
            group = grouped.setdefault(values["set_id"], [])
            first = group[0][2] if group else values
            diff = next((c for c in ("subset", "occupation") if values[c] != first[c]), None)
            if diff:
                why = f"field {diff!r} = {values[diff]!r} differs from {first[diff]!r} of set {values['set_id']!r} (line {group[0][0]})"
            elif any((v["a1"], v["a2"]) == (values["a1"], values["a2"]) for _, _, v, _ in group):
                why = f"set {values['set_id']!r} repeats member {(values['a1'], values['a2'])}"
        if why:
            quarantined.append(_quarantined(where, line, row, why, text))
            continue
        grouped[values["set_id"]].append((line, row, values, text))
    sets = []
    for set_id, items in grouped.items():
        if len(items) < MIN_SET_MEMBERS:
            why = f"set {set_id!r} has {len(items)} usable member(s); a counterfactual set needs at least {MIN_SET_MEMBERS} to compare"
            quarantined += [_quarantined(where, line, row, why, text) for line, row, _, text in items]
            continue
        first = items[0][2]
        members = tuple(Member(v["a1"], v["a2"], v.get("caption", ""), image_path=v["image_path"]) for _, _, v, _ in items)
        occ = first["occupation"]
        sets.append(CounterfactualSet(set_id, first["subset"], normalise_occupation(occ), occ, members))
    quarantined.sort(key=lambda q: (q.line or 0, q.row or 0))
    if not sets:
        exc = no_good_row_error(path, what, quarantined)
        raise CounterfactualInputError(f"{exc} (no usable set)")
    return SetFile(path, f"cfsets-{hashlib.sha256(raw).hexdigest()[:12]}", tuple(sets), tuple(quarantined))


#: Image file suffixes an image-set folder is read for (anything else in it is quarantined).
IMAGE_SUFFIXES: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".webp")
#: The manifest an image-set folder may hold instead of the subset / set / caption tree.
FOLDER_MANIFEST = "manifest.csv"


def load_image_folder(folder: str | Path) -> SetFile:
    """Image sets from a folder in the SocialCounterfactuals layout (Howard et al., seed 003,
    App. A.1: a set is one occupation, its members differ only in the subset's two attributes,
    each member's caption names them): ``<folder>/<subset>/<set_id>/<caption>.<png|jpg|jpeg|webp>``,
    e.g. ``race_gender/nurse-0/A photo of a Black female nurse.png``. The caption (file name
    without its suffix) is split by :func:`parse_caption` into the member's two attribute
    values and the occupation, the rule the released metadata follows. A folder holding
    ``manifest.csv`` is read as that manifest (:func:`load_manifest`) instead.

    A file that is not in that layout (wrong depth, unknown subset, a caption that does not
    parse, not an image) is quarantined with its relative path and reason, as are the rows
    :func:`load_manifest` would quarantine (mixed occupations in a set, a repeated member, a
    set with fewer than :data:`MIN_SET_MEMBERS` good members).

    Returns:
        A :class:`SetFile` (``dataset_id``: ``cfsets-`` + 12 hex of the sha256 of the sorted
        relative paths and file sizes).

    Raises:
        CounterfactualInputError: not a folder, an empty folder, or no usable set.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise CounterfactualInputError(f"counterfactual image folder {folder}: not a folder")
    if (folder / FOLDER_MANIFEST).is_file():
        return load_manifest(folder / FOLDER_MANIFEST)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    if not files:
        raise CounterfactualInputError(f"counterfactual image folder {folder}: no file in it")
    records, quarantined, listing = [], [], []
    for n, p in enumerate(files, start=1):
        rel = p.relative_to(folder)
        listing.append(f"{rel.as_posix()}\t{p.stat().st_size}")
        why = None
        if len(rel.parts) != 3:
            why = f"not <subset>/<set_id>/<caption>.<image suffix> ({len(rel.parts)} path parts)"
        elif p.suffix.lower() not in IMAGE_SUFFIXES:
            why = f"suffix {p.suffix!r} is not one of {list(IMAGE_SUFFIXES)}"
        elif rel.parts[0] not in SUBSETS:
            why = f"subset folder {rel.parts[0]!r} is not one of {list(SUBSETS)}"
        else:
            try:
                _, a1, a2, occ = parse_caption(p.stem, rel.parts[0])
            except CounterfactualInputError as exc:
                why = str(exc)
        if why:
            quarantined.append(_quarantined(None, n, n, why, rel.as_posix()))
            continue
        values = {"set_id": rel.parts[1], "subset": rel.parts[0], "occupation": occ, "a1": a1, "a2": a2, "image_path": str(p), "caption": p.stem}
        records.append((n, n, values, rel.as_posix()))
    raw = "\n".join(listing).encode()
    return _group_sets(folder, None, folder, records, quarantined, raw, "counterfactual image folder")


def load_image_sets(source: str | Path) -> SetFile:
    """The image sets of ``source``: a folder (:func:`load_image_folder`) or a manifest file
    (CSV / Parquet, :func:`load_manifest`).

    Raises:
        CounterfactualInputError: as those two functions.
    """
    source = Path(source).expanduser()
    return load_image_folder(source) if source.is_dir() else load_manifest(source)


@dataclass(frozen=True)
class Lexicon:
    """A word lexicon with directions (App. E.1): ``word -> (dimension, direction)``.

    ``quarantined``: the lines of a user's file that were not read (line and reason);
    ``dataset_id``: ``cflex-`` + 12 hex of the file's sha256, their landing partition."""

    name: str
    entries: tuple[tuple[str, str, int], ...] = field(default_factory=tuple)
    quarantined: tuple[QuarantinedRow, ...] = ()
    dataset_id: str = ""


def competence_lexicon(path: str | Path | None = None) -> Lexicon:
    """The competence lexicon: by default the authors' 861-word ``competency_words.txt``
    (Howard et al. code release, MIT; every word direction +1, dimension ``competence``).

    A user file may be a one-word-per-line list (all +1 competence) or a CSV with columns
    ``word,dimension,direction`` (Nicolas et al. 2021 style: dimensions competence / warmth,
    directions +1 / -1). Read line by line: a line with a bad dimension or direction, or bytes
    that are not UTF-8, is quarantined (``Lexicon.quarantined``) and the others are used.

    Raises:
        CounterfactualInputError: missing or unreadable file, a UTF-16 file, or a file with no
            usable word (the message names the first bad lines).
    """
    p = Path(path) if path else DATA_DIR / "competency_words.txt"
    try:
        raw = read_input_bytes(p, "lexicon")
        lines = decode_text(raw, p, "lexicon").splitlines()
    except InputFileError as exc:
        raise CounterfactualInputError(str(exc)) from None
    entries, quarantined = [], []
    is_csv = bool(lines) and lines[0].strip().lower().replace(" ", "") == "word,dimension,direction"
    for n, line in enumerate(lines[1:] if is_csv else lines, start=2 if is_csv else 1):
        if not line.strip():
            continue
        why = not_utf8([line], raw)
        parts = [x.strip() for x in line.split(",")]
        if (
            why is None
            and is_csv
            and (len(parts) != 3 or not parts[0] or parts[1] not in ("competence", "warmth") or parts[2] not in ("1", "-1", "+1"))
        ):
            why = "expected word,dimension(competence|warmth),direction(1|-1)"
        if why:
            quarantined.append(QuarantinedRow(p.name, n, n - 1 if is_csv else n, why, shown(line)))
        elif is_csv:
            entries.append((parts[0].lower(), parts[1], int(parts[2])))
        else:
            entries.append((line.strip().lower(), "competence", 1))
    if not entries and not quarantined:
        raise CounterfactualInputError(f"lexicon {p}: no word in it")
    if not entries:
        raise CounterfactualInputError(f"{no_good_row_error(p, 'lexicon', quarantined, unit='lines')} (no usable word)")
    return Lexicon(p.name, tuple(dict.fromkeys(entries)), tuple(quarantined), f"cflex-{hashlib.sha256(raw).hexdigest()[:12]}")
