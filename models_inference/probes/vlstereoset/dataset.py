"""VLStereoSet input: the released CSV, validated, and its images (VLStereoSet §3.2; docs/families/vlstereoset.md#data-it-ships-and-needs).

The released file (``data/VLStereoSet.csv`` of github.com/K-Square-00/VLStereo, docs/families/vlstereoset.md#the-released-csv) has the columns ``bias_type, target, context, stereotype, anti-stereotype, unrelated,
label, Imaeg URL`` [sic] plus a trailing empty column, starts with a UTF-8 byte-order mark,
and gives images as URLs only. It has no licence, so dora does not ship it; it ships a
SYNTHETIC file in the same format (:func:`synthetic_csv_path`).

Per row dora keeps D = (I, S_s, S_a, S_i, y) (§3.2): the three captions, the category
(``bias_type``), target and context, ``y = 's'`` (label 0, stereotypical image) or
``y = 'a'`` (label 1, anti-stereotypical image; dora's reading of the undocumented column,
docs/families/vlstereoset.md#the-released-csv, recorded as :data:`LABEL_TO_Y`). A caption column that holds one word is
taken as the attribute and filled into the context's ``BLANK``; a sentence is used as is.

Images (:func:`resolve_images`): an image folder (with an optional ``manifest.csv``) works
offline; URLs are downloaded only when asked; every image ends with a status
(``ok``, ``missing``, ``download_failed``, ``bad_image``, ``not_fetched``) and, when ok, is
stored content-addressed in the shared image store (``$DORA_HOME/images``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

# the family's error type lives with every DoraError (the CLI finds them there); re-exported here
from ingestion.errors import InputFileError
from ingestion.quarantine import QuarantinedRow, no_good_row_error, read_csv_records
from models_inference.image_store import StoredImage, store_png
from models_inference.probes.vlstereoset.errors import ItemPoolTooSmallError, VLStereoSetFormatError
from models_inference.probes.vlstereoset.neutralise import NEUTRALISATION_METHOD, neutralise

#: The released CSV's columns, in order ("Imaeg URL" sic), then an empty trailing column.
CSV_COLUMNS = ("bias_type", "target", "context", "stereotype", "anti-stereotype", "unrelated", "label", "Imaeg URL")
#: VLStereoSet's four categories (§3.1: StereoSet's gender, profession, race, religion).
CATEGORIES = ("gender", "profession", "race", "religion")
#: ``label`` -> ground truth y (docs/families/vlstereoset.md#the-released-csv: 0 = the stereotypical caption is correct; "verify").
LABEL_TO_Y = {"0": "s", "1": "a"}
#: Caption kinds, in the order of the CSV columns.
CAPTION_KINDS = ("stereotype", "anti-stereotype", "unrelated")
#: Image statuses; only ``ok`` images are scored by image scorers.
IMAGE_STATUSES = ("ok", "missing", "download_failed", "bad_image", "not_fetched")
_IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp")
_DATA = Path(__file__).resolve().parents[3] / "ingestion" / "data" / "vlstereoset_synthetic"


def synthetic_csv_path() -> Path:
    """The shipped SYNTHETIC file in the released format (22 rows; see its README.md)."""
    return _DATA / "VLStereoSet_synthetic.csv"


@dataclass(frozen=True)
class VLStereoSetItem:
    """One validated row: (I, S_s, S_a, S_i, y) with its provenance.

    Attributes:
        item_id: ``r<row>`` (data row number, 1-based, zero-padded to 5 digits); unique per file.
        source_row, source_line: data row number and line of the CSV file it came from.
        category: gender / profession / race / religion. target, context: as in the file.
        captions: caption kind (stereotype / anti-stereotype / unrelated) -> caption text.
        caption_source: ``as_given`` (sentences) or ``filled_blank`` (one-word attributes filled into BLANK).
        label: the raw label (0 or 1); y: ``s`` or ``a``.
        image_url: the row's image URL.
        neutral_*: S'_s, S'_a (:mod:`.neutralise`), rule and status.
    """

    item_id: str
    source_row: int
    source_line: int
    category: str
    target: str
    context: str
    captions: dict = field(hash=False)
    caption_source: str
    label: int
    y: str
    image_url: str
    neutral_stereotype: str | None = None
    neutral_anti_stereotype: str | None = None
    neutral_rule: str | None = None
    neutral_status: str = "target_not_found"


@dataclass(frozen=True)
class VLStereoSetDataset:
    """A VLStereoSet file read row by row: ``dataset_id`` = ``vls-`` + first 12 hex of the file's
    sha256; ``items`` are its good rows, ``quarantined`` the rows set aside (with line and reason),
    ``warnings`` what was read but ignored (values in unnamed trailing columns)."""

    dataset_id: str
    path: Path
    items: tuple[VLStereoSetItem, ...]
    is_synthetic: bool
    quarantined: tuple[QuarantinedRow, ...] = ()
    warnings: tuple[str, ...] = ()


def _fill(context: str, value: str) -> tuple[str, str]:
    if re.search(r"\s", value) or not re.search(r"BLANK", context):
        return value, "as_given"
    return re.sub(r"BLANK", value, context, count=1), "filled_blank"


def _row_problem(rec: dict[str, str]) -> str | None:
    """Why a row of the released format cannot be audited (field and value), or ``None``."""
    category = rec["bias_type"].lower()
    if category not in CATEGORIES:
        return f"field bias_type: unknown bias type {rec['bias_type']!r}; expected one of {CATEGORIES}"
    for name in ("target", "context", *CAPTION_KINDS):
        if not rec[name]:
            return f"field {name}: missing {'caption' if name in CAPTION_KINDS else 'field'}"
    if rec["label"] not in LABEL_TO_Y:
        return f"field label: {rec['label']!r} is not 0 (stereotypical image) or 1 (anti-stereotypical)"
    url = rec["Imaeg URL"]
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or re.search(r"\s", url):
        return f"field Imaeg URL: {url[:80]!r} is not an http(s) URL"
    return None


def _item(rec: dict[str, str], row_no: int, line: int) -> VLStereoSetItem:
    """The item of one good data row: captions filled into the context's BLANK when they are
    one word, neutral captions derived (:func:`.neutralise.neutralise`)."""
    category = rec["bias_type"].lower()
    captions, sources = {}, set()
    for kind in CAPTION_KINDS:
        captions[kind], src = _fill(rec["context"], rec[kind])
        sources.add(src)
    neutral = neutralise(category, rec["target"], rec["context"], captions["stereotype"], captions["anti-stereotype"])
    return VLStereoSetItem(
        item_id=f"r{row_no:05d}",
        source_row=row_no,
        source_line=line,
        category=category,
        target=rec["target"],
        context=rec["context"],
        captions=captions,
        caption_source="filled_blank" if "filled_blank" in sources else "as_given",
        label=int(rec["label"]),
        y=LABEL_TO_Y[rec["label"]],
        image_url=rec["Imaeg URL"],
        neutral_stereotype=neutral.stereotype,
        neutral_anti_stereotype=neutral.anti_stereotype,
        neutral_rule=neutral.rule,
        neutral_status=neutral.status,
    )


def load_vlstereoset_csv(path: str | Path) -> VLStereoSetDataset:
    """Read a VLStereoSet CSV in the released format, row by row.

    Every row that fits the format becomes an item; every other row is quarantined with its
    data row number, file line and reason (:class:`~ingestion.quarantine.QuarantinedRow`), so
    one odd row never blocks the rest (the released file has one: a stray value in the unnamed
    trailing column of row 979). Values in unnamed trailing columns are ignored with a warning
    (``VLStereoSetDataset.warnings``).

    Args:
        path: the CSV (UTF-8, with or without one or more BOMs; the trailing empty column is
            optional).

    Returns:
        A :class:`VLStereoSetDataset`: one :class:`VLStereoSetItem` per good data row, in file
        order, neutral captions derived (:func:`.neutralise.neutralise`); the quarantined rows.

    Rows are read by the shared reader (:func:`ingestion.quarantine.read_csv_records`: field
    count, encoding and field length per row), then each good row's values are checked here.

    Raises:
        VLStereoSetFormatError: no such file, a folder, a FIFO or device, a UTF-16 / UTF-32 file
            (its byte-order mark); an empty file; a header without one of
            the released columns (:data:`CSV_COLUMNS`, "Imaeg URL" spelled so; other columns
            are ignored); a file with no good row (the message gives the count and the first
            rows' reasons; for a file that is not UTF-8, the byte offset of its first bad byte).
    """
    path = Path(path).expanduser()
    try:  # the shared row-by-row reader: header, encoding, field counts, field lengths
        records, quarantined, raw = read_csv_records(path, CSV_COLUMNS, "VLStereoSet CSV", ignore_unnamed=True)
    except InputFileError as exc:  # the family's own type, so callers catch one error for its inputs
        raise VLStereoSetFormatError(str(exc)) from None
    items: list[VLStereoSetItem] = []
    ignored = [rec.line for rec in records if rec.ignored]
    for rec in records:
        why = _row_problem(rec.values)
        if why:
            quarantined.append(QuarantinedRow(path.name, rec.line, rec.row, why, rec.raw))
            continue
        items.append(_item(rec.values, rec.row, rec.line))
    if not items:
        raise VLStereoSetFormatError(str(no_good_row_error(path, "VLStereoSet CSV", quarantined)))
    quarantined.sort(key=lambda q: q.line or 0)
    warnings = ()
    if ignored:
        lines = ", ".join(map(str, ignored[:10])) + (" ..." if len(ignored) > 10 else "")
        warnings = (f"{path.name}: values in the unnamed trailing column ignored on {len(ignored)} row(s), line(s) {lines}",)
    digest = hashlib.sha256(raw).hexdigest()
    synthetic = path.resolve() == synthetic_csv_path().resolve()
    return VLStereoSetDataset(f"vls-{digest[:12]}", path, tuple(items), synthetic, tuple(quarantined), warnings)


# ----------------------------------------------------------------------------- the paper's item set

#: The paper's item set per (category, y) (VLStereoSet §3.2: "dataset balancing through down
#: sampling to ensure that there are equal numbers of stereotypical and anti-stereotypical
#: images in each of the four categories"; Table 1, 1,028 images, with its category labels
#: corrected as docs/families/vlstereoset.md#category-sizes derives from Table 4's denominators: gender 206, profession 322,
#: race 486, religion 14). The released file is the pool before balancing (gender 103 s / 220 a,
#: profession 470 / 161, race 717 / 243, religion 37 / 7): each cell is its category's smaller side.
PAPER_ITEM_COUNTS = {
    ("gender", "s"): 103,
    ("gender", "a"): 103,
    ("profession", "s"): 161,
    ("profession", "a"): 161,
    ("race", "s"): 243,
    ("race", "a"): 243,
    ("religion", "s"): 7,
    ("religion", "a"): 7,
}


def _field(item, name: str):
    return item[name] if isinstance(item, dict) else getattr(item, name)


def paper_item_ids(items, seed: int = 0, counts: dict | None = None) -> list[str]:
    """The item ids of a seeded down-sample of a pool to the paper's per-category counts.

    VLStereoSet §3.2 balances each category to equal numbers of stereotypical and
    anti-stereotypical images (Table 1: 1,028 images; per cell :data:`PAPER_ITEM_COUNTS`). The
    released file is the unbalanced pool (docs/families/vlstereoset.md#the-released-csv), and which of its rows the paper kept is
    not published, so this reproduces the paper's counts, not its exact items: every (category,
    y) cell keeps a uniform random sample of its count, without replacement. Pure: no I/O.

    Args:
        items: the pool: :class:`VLStereoSetItem` s or mappings with ``item_id``, ``category``
            and ``y`` (e.g. :func:`models_inference.probes.vlstereoset.probe.landed_items`); item
            ids are unique.
        seed: the sample's seed. Each cell draws from its own generator, seeded by (seed,
            category, y), over its ids sorted, so the sample depends neither on the pool's order
            nor on the other cells' items.
        counts: (category, y) -> items to keep (default :data:`PAPER_ITEM_COUNTS`); items of a
            cell not named here are left out.

    Returns:
        The sampled item ids, in pool order; ``sum(counts.values())`` of them (1,028 by default).

    Raises:
        ItemPoolTooSmallError: some cell has fewer pool items than its count (every short cell
            is named, e.g. a pool of the released file's rows after some were quarantined).
        ValueError: an item id that occurs twice.
    """
    import random

    counts = PAPER_ITEM_COUNTS if counts is None else counts
    cells: dict[tuple[str, str], list[str]] = {cell: [] for cell in counts}
    order: dict[str, int] = {}
    for item in items:
        item_id = _field(item, "item_id")
        if item_id in order:
            raise ValueError(f"item id {item_id!r} occurs twice in the pool")
        order[item_id] = len(order)
        cell = (_field(item, "category"), _field(item, "y"))
        if cell in cells:
            cells[cell].append(item_id)
    short = [f"{c} y={y}: {len(cells[(c, y)])} in the pool, {k} in the paper's item set" for (c, y), k in counts.items() if len(cells[(c, y)]) < k]
    if short:
        raise ItemPoolTooSmallError(
            f"the pool ({len(order)} items) is too small for the paper's item set in {len(short)} cell(s): " + "; ".join(short)
        )
    picked: list[str] = []
    for (category, y), k in counts.items():
        digest = hashlib.blake2b(f"vlstereoset-paper-items|{seed}|{category}|{y}".encode(), digest_size=8).digest()
        picked.extend(random.Random(int.from_bytes(digest, "big")).sample(sorted(cells[(category, y)]), k))
    return sorted(picked, key=order.__getitem__)


# ----------------------------------------------------------------------------- images


@dataclass(frozen=True)
class ImageOutcome:
    """Where an item's image came from and what happened: ``status`` in :data:`IMAGE_STATUSES`,
    ``stored`` when ok, ``source`` (folder / url / none), ``error`` text otherwise."""

    status: str
    source: str
    stored: StoredImage | None = None
    error: str | None = None


class ResolvedImages(dict):
    """item_id -> :class:`ImageOutcome` (a dict), with ``quarantined``: the rows of the image
    folder's ``manifest.csv`` that were not read (line and reason), landed by ``land_items``."""

    def __init__(self, outcomes=(), quarantined: tuple[QuarantinedRow, ...] = ()):
        super().__init__(outcomes)
        self.quarantined = tuple(quarantined)


#: Key columns of an image manifest (a row names its item by one of them).
MANIFEST_KEYS = ("row", "item_id", "url")


def read_manifest(images_dir: Path) -> tuple[dict[str, str], tuple[QuarantinedRow, ...]]:
    """``images_dir/manifest.csv`` as a map from ``row:<n>`` / ``item:<id>`` / ``url:<url>`` to a
    file name, read row by row, and its rows that were set aside.

    Columns: ``file`` and at least one of ``row`` (data row number), ``item_id``, ``url``.
    Missing manifest: an empty map (files are then found as ``<row>.<ext>`` or ``<item_id>.<ext>``).
    A row with a file name that is empty or leaves the folder, a ``row`` that is not a whole
    number, no key at all, too few or too many fields, or bytes that are not UTF-8 is
    quarantined with its line and reason; the other rows are used.

    Raises:
        VLStereoSetFormatError: a manifest without a ``file`` column or a key column, a UTF-16
            file, or one whose rows are all bad (names the first lines and reasons).
    """
    path = images_dir / "manifest.csv"
    if not path.exists():
        return {}, ()
    try:
        records, quarantined, _ = read_csv_records(path, ("file",), "image manifest", any_of=MANIFEST_KEYS)
    except InputFileError as exc:  # the family's own type, so callers catch one error for its inputs
        raise VLStereoSetFormatError(str(exc)) from None
    out: dict[str, str] = {}
    for rec in records:
        name = rec.values.get("file", "")
        keys = {k: rec.values[k] for k in MANIFEST_KEYS if rec.values.get(k)}
        why = None
        if not name or Path(name).name != name or name in (".", ".."):
            why = f"field file: {name!r} is not a file name in {images_dir}"
        elif not keys:
            why = f"no key: one of {', '.join(MANIFEST_KEYS)} must be given"
        elif "row" in keys and not (keys["row"].isascii() and keys["row"].isdigit()):
            why = f"field row: {keys['row']!r} is not a data row number (a whole number)"
        if why:
            quarantined.append(QuarantinedRow(path.name, rec.line, rec.row, why, rec.raw))
            continue
        for key, value in keys.items():
            out[f"{key}:{int(value) if key == 'row' else value}"] = name
    if not out:
        raise VLStereoSetFormatError(str(no_good_row_error(path, "image manifest", quarantined)))
    return out, tuple(sorted(quarantined, key=lambda q: q.line or 0))


def _local_file(item: VLStereoSetItem, images_dir: Path, manifest: dict[str, str]) -> Path | None:
    for key in (f"row:{item.source_row}", f"item_id:{item.item_id}", f"url:{item.image_url}"):
        if key in manifest:
            return images_dir / manifest[key]
    for stem in (str(item.source_row), item.item_id):
        for ext in _IMAGE_EXTENSIONS:
            if (images_dir / f"{stem}{ext}").is_file():
                return images_dir / f"{stem}{ext}"
    return None


def download_image(url: str, timeout: float = 15.0, max_bytes: int = 20 << 20) -> bytes:
    """GET one image URL (``urllib``), at most ``max_bytes``.

    Raises:
        OSError (``urllib.error.URLError`` / ``HTTPError``, timeouts): the link failed.
        ValueError: the body exceeds ``max_bytes``.
    """
    import urllib.request

    req = urllib.request.Request(url, headers={"User-Agent": "dora-vlstereoset/0.1 (research audit)"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (http(s) only: validated)
        data = resp.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"image larger than {max_bytes} bytes")
    return data


def resolve_images(
    items, images_dir: str | Path | None = None, *, download: bool = False, timeout: float = 15.0, fetch: bool = True
) -> dict[str, ImageOutcome]:
    """The image of every item: from ``images_dir`` first, then (if ``download``) its URL.

    Args:
        items: :class:`VLStereoSetItem` s.
        images_dir: a folder of images named by ``manifest.csv`` or ``<row>.<ext>`` / ``<item_id>.<ext>``.
        download: fetch the URL of items not found locally (needs the network; each failure is
            a ``download_failed`` outcome with the reason, never an exception).
        fetch: ``False``: every item is ``not_fetched`` (no image scorer asked for images).

    Returns:
        A :class:`ResolvedImages`: item_id -> :class:`ImageOutcome` (ok images are stored in the
        image store as PNG; a corrupt image or decompression bomb is ``bad_image`` with its
        reason, never an exception), with the manifest's quarantined rows.

    Raises:
        VLStereoSetFormatError: ``images_dir`` is given but is not a folder; a manifest with
            no usable row or without its columns (:func:`read_manifest`).
    """
    folder = Path(images_dir) if images_dir else None
    if folder is not None and not folder.is_dir():
        raise VLStereoSetFormatError(f"--images {folder}: {'no such folder' if not folder.exists() else 'not a folder'}")
    manifest, quarantined = read_manifest(folder) if folder else ({}, ())
    out = ResolvedImages(quarantined=quarantined)
    for item in items:
        if not fetch:
            out[item.item_id] = ImageOutcome("not_fetched", "none", error="no image scorer selected")
            continue
        local = _local_file(item, folder, manifest) if folder else None
        if local is not None:
            if not local.exists():
                out[item.item_id] = ImageOutcome("missing", "folder", error=f"{local.name} named in the manifest does not exist")
            elif not local.is_file():  # a FIFO or device: reading it could block forever
                out[item.item_id] = ImageOutcome("bad_image", "folder", error=f"{local.name}: not a regular file")
            else:
                try:
                    out[item.item_id] = ImageOutcome("ok", "folder", store_png(local.read_bytes()))
                except OSError as exc:  # permissions, I/O: the file, not its content
                    out[item.item_id] = ImageOutcome("bad_image", "folder", error=f"{local.name}: cannot be read ({exc.strerror or exc})")
                except ValueError as exc:  # not decodable, or a decompression bomb (store_png)
                    out[item.item_id] = ImageOutcome("bad_image", "folder", error=f"{local.name}: {exc}")
            continue
        if not download:
            why = f"not in {folder}" if folder else "no image folder given and downloads are off"
            out[item.item_id] = ImageOutcome("missing", "none", error=why)
            continue
        try:
            data = download_image(item.image_url, timeout)
        except (OSError, ValueError) as exc:
            out[item.item_id] = ImageOutcome("download_failed", "url", error=f"{type(exc).__name__}: {exc}")
            continue
        try:
            out[item.item_id] = ImageOutcome("ok", "url", store_png(data))
        except ValueError as exc:
            out[item.item_id] = ImageOutcome("bad_image", "url", error=str(exc))
    return out


def item_rows(dataset: VLStereoSetDataset, images: dict[str, ImageOutcome], landed_at) -> list[dict]:
    """The ``landing/vlstereoset_items`` rows of a dataset (one per item), images included."""
    rows = []
    for it in dataset.items:
        img = images.get(it.item_id) or ImageOutcome("not_fetched", "none")
        rows.append(
            {
                "dataset_id": dataset.dataset_id,
                "source_file": dataset.path.name,
                "is_synthetic": dataset.is_synthetic,
                "item_id": it.item_id,
                "source_row": it.source_row,
                "source_line": it.source_line,
                "category": it.category,
                "target": it.target,
                "context": it.context,
                "caption_stereotype": it.captions["stereotype"],
                "caption_anti_stereotype": it.captions["anti-stereotype"],
                "caption_unrelated": it.captions["unrelated"],
                "caption_source": it.caption_source,
                "label": it.label,
                "y": it.y,
                "image_url": it.image_url,
                "image_status": img.status,
                "image_source": img.source,
                "image_path": img.stored.path if img.stored else None,
                "image_sha256": img.stored.sha256 if img.stored else None,
                "image_width": img.stored.width if img.stored else None,
                "image_height": img.stored.height if img.stored else None,
                "image_error": img.error,
                "neutral_stereotype": it.neutral_stereotype,
                "neutral_anti_stereotype": it.neutral_anti_stereotype,
                "neutral_method": NEUTRALISATION_METHOD,
                "neutral_rule": it.neutral_rule,
                "neutral_status": it.neutral_status,
                "landed_at": landed_at,
            }
        )
    return rows


__all__ = [
    "CAPTION_KINDS",
    "CATEGORIES",
    "CSV_COLUMNS",
    "IMAGE_STATUSES",
    "ImageOutcome",
    "ItemPoolTooSmallError",
    "LABEL_TO_Y",
    "MANIFEST_KEYS",
    "PAPER_ITEM_COUNTS",
    "ResolvedImages",
    "VLStereoSetDataset",
    "VLStereoSetFormatError",
    "VLStereoSetItem",
    "download_image",
    "item_rows",
    "load_vlstereoset_csv",
    "paper_item_ids",
    "read_manifest",
    "resolve_images",
    "synthetic_csv_path",
]
