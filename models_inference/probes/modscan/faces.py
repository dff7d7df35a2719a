"""Faces for ModSCAN's vision modality (seed 000 §3.1, §4; docs/families/modscan.md#faces-and-scene-images and docs/families/modscan.md#vision-modality).

UTKFace cannot ship (non-commercial research licence), so the user points dora at a folder in
UTKFace's file-name format ``[age]_[gender]_[race]_[date&time].jpg`` (gender 0 = male,
1 = female; race 0 = White, 1 = Black, 2 = Asian, 3 = Indian, 4 = Others [EXTERNAL]) or at a
CSV manifest with the columns ``face_id, path, age, gender, race``.

* :func:`read_faces` validates every file / row: a bad file name, an unreadable image or a
  bad manifest field is a :class:`FaceProblem` naming the file or row (counted and reported,
  never silently dropped); :class:`FaceSet` also counts what the paper's filters remove
  (§4: ages under 18 or over 65, race "Others").
* :func:`build_pairs`: gender pairs within (age, race); race pairs within (age, gender) for
  each of the 6 unordered race combinations (§5.1), up to ``per_group`` (paper: 20) pairs per
  group, sides randomised with a seed (§4). [UNDEFINED] in the paper, dora's choices: faces
  drawn without replacement within one group's pairs (a face may recur across race
  combinations), the seed, and a 400x200 canvas of two 200x200 faces.
* :func:`splice` / :func:`store_pair`: the two faces side by side, stored content-addressed
  in the image store (``images/<sha[:2]>/<sha256>.png``).
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ingestion.errors import InputFileError
from ingestion.quarantine import QuarantinedRow, no_good_row_error, read_csv_records, shown
from models_inference.backends.image import png_bytes
from models_inference.image_store import StoredImage, image_problem, store_png
from models_inference.probes.modscan.tables import GROUPS

UTK_GENDERS = {"0": "male", "1": "female"}
UTK_RACES = {"0": "White", "1": "Black", "2": "Asian", "3": "Indian", "4": "Others"}
_UTK_NAME = re.compile(r"^(\d{1,3})_([01])_([0-4])_(\d+)")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
#: §4: "the general legal working age" to "the traditional retirement age".
MIN_AGE, MAX_AGE = 18, 65
FACE_SIZE = 200  # UTKFace's aligned crops are 200x200 [EXTERNAL]


@dataclass(frozen=True)
class Face:
    """One labelled face: ``face_id`` (file stem or manifest id), absolute ``path``, labels."""

    face_id: str
    path: Path
    age: int
    gender: str
    race: str


@dataclass(frozen=True)
class FaceProblem:
    """A file or manifest row that could not be used, and why.

    Attributes:
        source: names it: the file name (folder) or ``<manifest> line <n>``.
        problem: the reason, one line.
        file: the folder entry's or the manifest's file name. line, row: the manifest row's file
            line and data row (``None`` for a folder entry). raw: the row's text as read.
    """

    source: str
    problem: str
    file: str = ""
    line: int | None = None
    row: int | None = None
    raw: str = ""


#: Columns of a faces manifest.
MANIFEST_COLUMNS = ("face_id", "path", "age", "gender", "race")


@dataclass
class FaceSet:
    """Validated faces and what was left out.

    Attributes:
        faces: faces that passed validation and the paper's filters.
        problems: every invalid file / row (bad name, unreadable image or decompression bomb,
            bad field, short row, bytes that are not UTF-8), quarantined, never dropped.
        filtered: faces removed by the paper's filters, by reason (``age`` / ``race``).
        dataset_id: ``faces-`` + 12 hex of the manifest's sha256 (or of the folder's file names
            and sizes): the partition its quarantined rows land under.
    """

    faces: list[Face] = field(default_factory=list)
    problems: list[FaceProblem] = field(default_factory=list)
    filtered: Counter = field(default_factory=Counter)
    dataset_id: str = "faces-unknown"

    def report(self) -> str:
        """One line of counts, then one line per problem."""
        lines = [f"{len(self.faces)} faces kept, {len(self.problems)} invalid, filtered out: {dict(self.filtered) or 0}"]
        lines += [f"  {p.source}: {p.problem}" for p in self.problems]
        return "\n".join(lines)

    def quarantined(self) -> list[QuarantinedRow]:
        """The problems as quarantined input rows (``landing/input_quarantine``): file, line, reason."""
        return [QuarantinedRow(p.file or p.source, p.line, p.row, p.problem, shown(p.raw)) for p in self.problems]


def _readable(path: Path) -> str | None:
    why = image_problem(path)
    return f"unreadable image: {why}" if why else None


def _keep(face: Face, out: FaceSet) -> None:
    if not MIN_AGE <= face.age <= MAX_AGE:
        out.filtered["age"] += 1  # §4: under 18 or over 65
    elif face.race not in GROUPS["race"]:
        out.filtered["race"] += 1  # §4: White, Black, Asian and Indian only
    else:
        out.faces.append(face)


def _nothing_usable(out: FaceSet) -> bool:
    return not out.faces and not out.filtered


def read_faces_folder(folder: str | Path, *, check_images: bool = True) -> FaceSet:
    """Validate a UTKFace-format folder (files directly inside it; hidden files and sub-folders
    ignored). Every other entry that cannot be used (a name not in UTKFace's format, an image
    that does not decode, a decompression bomb, a FIFO or device) is a :class:`FaceProblem`
    named by its file name; the good faces are kept.

    Raises:
        InputFileError: ``folder`` is not a folder, or none of its entries is a usable face
            (the message gives the count and the first reasons).
    """
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise InputFileError(f"faces folder {root} does not exist or is not a folder")
    out = FaceSet()
    listing = hashlib.sha256()
    try:
        entries = sorted(p for p in root.iterdir() if not p.name.startswith(".") and not p.is_dir())
    except OSError as exc:  # e.g. a folder without read permission
        raise InputFileError(f"faces folder {root}: cannot be listed ({exc.strerror or exc})") from None
    for path in entries:
        listing.update(path.name.encode("utf-8", "surrogateescape") + b"\0")
        if not path.is_file():  # a FIFO or device named like an image would block the reader
            out.problems.append(FaceProblem(path.name, "not a regular file", path.name))
            continue
        listing.update(str(path.stat().st_size).encode() + b"\0")
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            out.problems.append(FaceProblem(path.name, f"not an image file name (expected one of {IMAGE_SUFFIXES})", path.name))
            continue
        m = _UTK_NAME.match(path.name)
        if not m:
            out.problems.append(FaceProblem(path.name, "file name is not [age]_[gender 0|1]_[race 0-4]_[datetime].jpg", path.name))
            continue
        problem = _readable(path) if check_images else None
        if problem:
            out.problems.append(FaceProblem(path.name, problem, path.name))
            continue
        age, gender, race, _ = m.groups()
        _keep(Face(path.name.split(".")[0], path.resolve(), int(age), UTK_GENDERS[gender], UTK_RACES[race]), out)
    out.dataset_id = f"faces-{listing.hexdigest()[:12]}"
    if _nothing_usable(out):
        if not out.problems:
            raise InputFileError(f"faces folder {root}: no image file in it (expected [age]_[gender]_[race]_[datetime].jpg)")
        raise no_good_row_error(root, "faces folder", out.quarantined(), unit="files")
    return out


def read_faces_manifest(manifest: str | Path, *, check_images: bool = True) -> FaceSet:
    """Validate a CSV manifest (``face_id, path, age, gender, race``; gender male/female or
    0/1, race a name or 0-4; relative paths are relative to the manifest's folder), row by row.

    Every row that cannot be used (too few or too many fields, bytes that are not UTF-8, a bad
    value, a repeated id, a missing or unreadable image, a decompression bomb) is a
    :class:`FaceProblem` with its line and reason; the good rows are kept.

    Raises:
        InputFileError: no such file (or not a file), an empty file, a header without a
            required column (named), a UTF-16 file, or a manifest with no usable row.
    """
    path = Path(manifest).expanduser()
    records, bad, raw = read_csv_records(path, MANIFEST_COLUMNS, "faces manifest")
    out = FaceSet(dataset_id=f"faces-{hashlib.sha256(raw).hexdigest()[:12]}")
    out.problems += [FaceProblem(f"{path.name} line {q.line}", q.reason, path.name, q.line, q.row, q.raw) for q in bad]
    names = {v.lower(): v for v in (*UTK_RACES.values(),)}
    seen: set[str] = set()
    for rec in records:
        row = rec.values
        face_id = row["face_id"]
        gender = UTK_GENDERS.get(row["gender"], row["gender"].lower())
        race = UTK_RACES.get(row["race"]) or names.get(row["race"].lower())
        problem = image = None
        if not face_id or face_id in seen:
            problem = f"face_id {face_id!r} is empty or repeated"
        elif not row["age"].isdigit() or not row["age"].isascii():
            problem = f"age {row['age']!r} is not a whole number"
        elif gender not in GROUPS["gender"]:
            problem = f"gender {row['gender']!r} is not male/female or 0/1"
        elif race is None:
            problem = f"race {row['race']!r} is not one of {list(UTK_RACES.values())} or 0-4"
        elif not row["path"]:
            problem = "path is empty"
        else:
            image = Path(row["path"]).expanduser()
            image = image if image.is_absolute() else path.parent / image
            if not image.is_file():
                problem = f"image {image} does not exist" if not image.exists() else f"image {image} is not a regular file"
            elif check_images:
                problem = _readable(image)
        if problem:
            out.problems.append(FaceProblem(f"{path.name} line {rec.line}", problem, path.name, rec.line, rec.row, rec.raw))
            continue
        seen.add(face_id)
        _keep(Face(face_id, image.resolve(), int(row["age"]), gender, race), out)
    if _nothing_usable(out):
        raise no_good_row_error(path, "faces manifest", out.quarantined())
    return out


def read_faces(source: str | Path, *, check_images: bool = True) -> FaceSet:
    """:func:`read_faces_folder` for a folder, :func:`read_faces_manifest` for a ``.csv`` file.

    Raises:
        InputFileError: a regular file that is not ``.csv``, and see the two readers.
    """
    p = Path(source).expanduser()
    if p.is_file() and p.suffix.lower() != ".csv":
        raise InputFileError(
            f"faces {p}: a file that is not a .csv manifest; give a UTKFace-format folder or a CSV manifest ({', '.join(MANIFEST_COLUMNS)})"
        )
    return read_faces_manifest(p, check_images=check_images) if p.suffix.lower() == ".csv" else read_faces_folder(p, check_images=check_images)


@dataclass(frozen=True)
class FacePair:
    """Two faces side by side: ``pair_key`` is stable for (seed, attribute, stratum, faces)."""

    attribute: str
    stratum: str  # gender pairs: "age=30|race=Asian"; race pairs: "age=30|gender=male|Asian-White"
    left: Face
    right: Face

    @property
    def pair_key(self) -> str:
        return f"{self.attribute}|{self.stratum}|{self.left.face_id}|{self.right.face_id}"

    def group(self, face: Face) -> str:
        return face.gender if self.attribute == "gender" else face.race


def _pairs(rng: random.Random, a: list[Face], b: list[Face], per_group: int) -> list[tuple[Face, Face]]:
    a, b = sorted(a, key=lambda f: f.face_id), sorted(b, key=lambda f: f.face_id)
    rng.shuffle(a)
    rng.shuffle(b)
    out = []
    for x, y in zip(a[:per_group], b[:per_group], strict=False):
        out.append((x, y) if rng.random() < 0.5 else (y, x))  # randomised left / right (§4)
    return out


def build_pairs(faces: Sequence[Face], attribute: str, *, per_group: int = 20, seed: int = 0) -> list[FacePair]:
    """The paper's face pairs (§3.1, §4, §5.1).

    Gender: within each (age, race), up to ``per_group`` male-female pairs. Race: within each
    (age, gender) and each of the 6 race combinations, up to ``per_group`` pairs. Within one
    group's pairs a face is used once; sides are drawn with ``seed``.

    Raises:
        ValueError: unknown attribute or ``per_group < 1``.
    """
    if attribute not in GROUPS:
        raise ValueError(f"unknown attribute {attribute!r}; expected one of {list(GROUPS)}")
    if per_group < 1:
        raise ValueError(f"per_group must be >= 1, got {per_group}")
    strata: dict[tuple, dict[str, list[Face]]] = {}
    for f in faces:
        key = (f.age, f.race) if attribute == "gender" else (f.age, f.gender)
        strata.setdefault(key, {}).setdefault(f.gender if attribute == "gender" else f.race, []).append(f)
    pairs = []
    for key in sorted(strata):
        groups = strata[key]
        rng = random.Random(f"{seed}|{attribute}|{key}")
        if attribute == "gender":
            stratum = f"age={key[0]}|race={key[1]}"
            pairs += [
                FacePair(attribute, stratum, left, right) for left, right in _pairs(rng, groups.get("male", []), groups.get("female", []), per_group)
            ]
        else:
            for r1, r2 in itertools.combinations(GROUPS["race"], 2):
                stratum = f"age={key[0]}|gender={key[1]}|{r1}-{r2}"
                pairs += [FacePair(attribute, stratum, left, right) for left, right in _pairs(rng, groups.get(r1, []), groups.get(r2, []), per_group)]
    return pairs


def splice(pair: FacePair, size: int = FACE_SIZE):
    """The two faces resized to ``size`` x ``size`` and spliced horizontally (left, right): a
    ``2*size`` x ``size`` RGB PIL image."""
    from PIL import Image

    canvas = Image.new("RGB", (2 * size, size), "white")
    for i, face in enumerate((pair.left, pair.right)):
        with Image.open(face.path) as img:
            canvas.paste(img.convert("RGB").resize((size, size)), (i * size, 0))
    return canvas


def store_pair(pair: FacePair, size: int = FACE_SIZE) -> StoredImage:
    """Splice ``pair`` and store it in the image store (content-addressed PNG)."""
    return store_png(png_bytes(splice(pair, size)))


__all__ = [
    "MANIFEST_COLUMNS",
    "Face",
    "FacePair",
    "FaceProblem",
    "FaceSet",
    "build_pairs",
    "read_faces",
    "read_faces_folder",
    "read_faces_manifest",
    "splice",
    "store_pair",
]
