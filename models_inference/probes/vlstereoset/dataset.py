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

import csv
import hashlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from models_inference.probes.vlstereoset.neutralise import NEUTRALISATION_METHOD, neutralise
from models_inference.image_store import StoredImage, store_png

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


class VLStereoSetFormatError(ValueError):
    """A VLStereoSet CSV (or image manifest) that does not fit the format; the message names
    the file, the row (data row number and file line) and the field."""


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
    """A validated VLStereoSet file: ``dataset_id`` = ``vls-`` + first 12 hex of the file's sha256."""

    dataset_id: str
    path: Path
    items: tuple[VLStereoSetItem, ...]
    is_synthetic: bool


def _fill(context: str, value: str) -> tuple[str, str]:
    if re.search(r"\s", value) or not re.search(r"BLANK", context):
        return value, "as_given"
    return re.sub(r"BLANK", value, context, count=1), "filled_blank"


def load_vlstereoset_csv(path: str | Path) -> VLStereoSetDataset:
    """Read and validate a VLStereoSet CSV in the released format.

    Args:
        path: the CSV (UTF-8, with or without BOM; the trailing empty column is optional).

    Returns:
        A :class:`VLStereoSetDataset` with one :class:`VLStereoSetItem` per data row, in file
        order, neutral captions derived (:func:`.neutralise.neutralise`).

    Raises:
        FileNotFoundError: no such file.
        VLStereoSetFormatError: not UTF-8, wrong header, or a row with a wrong number of
            fields, an empty caption / target / context, an unknown bias type, a label other
            than 0 / 1, or an image URL that is not http(s) with a host; the message names the
            file, the data row, its line and the field. An empty file is an error too.
    """
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise VLStereoSetFormatError(f"{path}: not UTF-8 text ({exc})") from exc
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise VLStereoSetFormatError(f"{path}: empty file, expected the header {', '.join(CSV_COLUMNS)}") from None
    names = [h.strip() for h in header]
    while names and names[-1] == "":
        names.pop()
    if tuple(names) != CSV_COLUMNS:
        raise VLStereoSetFormatError(
            f"{path}, line 1: header {names} is not the released VLStereoSet header {list(CSV_COLUMNS)} "
            "(\"Imaeg URL\" is spelled so in the released file)"
        )
    items: list[VLStereoSetItem] = []
    for row_no, fields in enumerate(reader, start=1):
        line = reader.line_num
        where = f"{path}, row {row_no} (line {line})"
        if not any(f.strip() for f in fields):
            continue  # a blank line (e.g. at the end of the file)
        while len(fields) > len(CSV_COLUMNS) and fields[-1].strip() == "":
            fields = fields[:-1]
        if len(fields) != len(CSV_COLUMNS):
            raise VLStereoSetFormatError(f"{where}: {len(fields)} fields, expected {len(CSV_COLUMNS)} ({', '.join(CSV_COLUMNS)})")
        rec = dict(zip(CSV_COLUMNS, (f.strip() for f in fields)))
        category = rec["bias_type"].lower()
        if category not in CATEGORIES:
            raise VLStereoSetFormatError(f"{where}, field bias_type: unknown bias type {rec['bias_type']!r}; expected one of {CATEGORIES}")
        for name in ("target", "context", *CAPTION_KINDS):
            if not rec[name]:
                what = "caption" if name in CAPTION_KINDS else "field"
                raise VLStereoSetFormatError(f"{where}, field {name}: missing {what}")
        if rec["label"] not in LABEL_TO_Y:
            raise VLStereoSetFormatError(f"{where}, field label: {rec['label']!r} is not 0 (stereotypical image) or 1 (anti-stereotypical)")
        url = rec["Imaeg URL"]
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc or re.search(r"\s", url):
            raise VLStereoSetFormatError(f"{where}, field Imaeg URL: {url!r} is not an http(s) URL")
        captions, sources = {}, set()
        for kind in CAPTION_KINDS:
            captions[kind], src = _fill(rec["context"], rec[kind])
            sources.add(src)
        neutral = neutralise(category, rec["target"], rec["context"], captions["stereotype"], captions["anti-stereotype"])
        items.append(
            VLStereoSetItem(
                item_id=f"r{row_no:05d}", source_row=row_no, source_line=line, category=category, target=rec["target"],
                context=rec["context"], captions=captions, caption_source="filled_blank" if "filled_blank" in sources else "as_given",
                label=int(rec["label"]), y=LABEL_TO_Y[rec["label"]], image_url=url,
                neutral_stereotype=neutral.stereotype, neutral_anti_stereotype=neutral.anti_stereotype,
                neutral_rule=neutral.rule, neutral_status=neutral.status,
            )
        )
    if not items:
        raise VLStereoSetFormatError(f"{path}: no data row after the header")
    digest = hashlib.sha256(raw).hexdigest()
    synthetic = path.resolve() == synthetic_csv_path().resolve()
    return VLStereoSetDataset(f"vls-{digest[:12]}", path, tuple(items), synthetic)


# ----------------------------------------------------------------------------- images


@dataclass(frozen=True)
class ImageOutcome:
    """Where an item's image came from and what happened: ``status`` in :data:`IMAGE_STATUSES`,
    ``stored`` when ok, ``source`` (folder / url / none), ``error`` text otherwise."""

    status: str
    source: str
    stored: StoredImage | None = None
    error: str | None = None


def read_manifest(images_dir: Path) -> dict[str, str]:
    """``images_dir/manifest.csv`` as a map from ``row:<n>`` / ``item:<id>`` / ``url:<url>`` to a file name.

    Columns: ``file`` and at least one of ``row`` (data row number), ``item_id``, ``url``.
    Missing manifest: an empty map (files are then found as ``<row>.<ext>`` or ``<item_id>.<ext>``).

    Raises:
        VLStereoSetFormatError: a manifest without a ``file`` column or a key column, a row
            with an empty file name, or a file name leaving the folder (names the line).
    """
    path = images_dir / "manifest.csv"
    if not path.exists():
        return {}
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        cols = set(reader.fieldnames or [])
        if "file" not in cols or not cols & {"row", "item_id", "url"}:
            raise VLStereoSetFormatError(f"{path}, line 1: a manifest needs a 'file' column and one of 'row', 'item_id', 'url'")
        out: dict[str, str] = {}
        for rec in reader:
            name = (rec.get("file") or "").strip()
            if not name or Path(name).name != name:
                raise VLStereoSetFormatError(f"{path}, line {reader.line_num}, field file: {name!r} is not a file name in {images_dir}")
            for key in ("row", "item_id", "url"):
                if (rec.get(key) or "").strip():
                    value = rec[key].strip()
                    out[f"{key}:{int(value) if key == 'row' else value}"] = name
        return out


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
        item_id -> :class:`ImageOutcome`; ok images are stored in the image store (PNG).

    Raises:
        NotADirectoryError: ``images_dir`` is given but is not a folder.
        VLStereoSetFormatError: a malformed manifest (:func:`read_manifest`).
    """
    folder = Path(images_dir) if images_dir else None
    if folder is not None and not folder.is_dir():
        raise NotADirectoryError(f"--images {folder}: not a folder")
    manifest = read_manifest(folder) if folder else {}
    out: dict[str, ImageOutcome] = {}
    for item in items:
        if not fetch:
            out[item.item_id] = ImageOutcome("not_fetched", "none", error="no image scorer selected")
            continue
        local = _local_file(item, folder, manifest) if folder else None
        if local is not None:
            try:
                out[item.item_id] = ImageOutcome("ok", "folder", store_png(local.read_bytes()))
            except FileNotFoundError:
                out[item.item_id] = ImageOutcome("missing", "folder", error=f"{local.name} named in the manifest does not exist")
            except ValueError as exc:
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
                "dataset_id": dataset.dataset_id, "source_file": dataset.path.name, "is_synthetic": dataset.is_synthetic,
                "item_id": it.item_id, "source_row": it.source_row, "source_line": it.source_line,
                "category": it.category, "target": it.target, "context": it.context,
                "caption_stereotype": it.captions["stereotype"], "caption_anti_stereotype": it.captions["anti-stereotype"],
                "caption_unrelated": it.captions["unrelated"], "caption_source": it.caption_source,
                "label": it.label, "y": it.y, "image_url": it.image_url,
                "image_status": img.status, "image_source": img.source,
                "image_path": img.stored.path if img.stored else None, "image_sha256": img.stored.sha256 if img.stored else None,
                "image_width": img.stored.width if img.stored else None, "image_height": img.stored.height if img.stored else None,
                "image_error": img.error,
                "neutral_stereotype": it.neutral_stereotype, "neutral_anti_stereotype": it.neutral_anti_stereotype,
                "neutral_method": NEUTRALISATION_METHOD, "neutral_rule": it.neutral_rule, "neutral_status": it.neutral_status,
                "landed_at": landed_at,
            }
        )
    return rows


__all__ = [
    "CAPTION_KINDS", "CATEGORIES", "CSV_COLUMNS", "IMAGE_STATUSES", "ImageOutcome", "LABEL_TO_Y", "VLStereoSetDataset",
    "VLStereoSetFormatError", "VLStereoSetItem", "download_image", "item_rows", "load_vlstereoset_csv", "read_manifest",
    "resolve_images", "synthetic_csv_path",
]
