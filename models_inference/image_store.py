"""The content-addressed image store: ``$DORA_HOME/images/<sha[:2]>/<sha256>.png``.

Images drawn by a T2I backend are stored as PNG under the sha256 of their bytes
(:func:`store_png`): the file name is never derived from descriptor text, so no descriptor
("../../etc/passwd", "a/b") can steer a path, and identical images share one file. Landed
rows keep the path relative to ``$DORA_HOME``; :func:`image_file` turns it back into an
absolute path and refuses any path outside the store.
"""

from __future__ import annotations

import hashlib
import io
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from ingestion.landing import dora_home


def images_dir() -> Path:
    """``$DORA_HOME/images`` (created)."""
    folder = dora_home() / "images"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass(frozen=True)
class StoredImage:
    """Where :func:`store_png` put an image: ``path`` relative to ``$DORA_HOME``."""

    path: str
    sha256: str
    width: int
    height: int


def store_png(data: bytes) -> StoredImage:
    """Store image bytes content-addressed as PNG: ``images/<sha[:2]>/<sha256>.png``.

    The bytes are decoded with Pillow (fully loaded, so truncated data fails here); a PNG is
    kept byte for byte, any other format (JPEG, WebP) is re-encoded as PNG first. The file
    name is the sha256 of the stored PNG bytes, so identical images share one file and no
    caller text reaches the path. Written atomically (temp file + rename).

    Returns:
        A :class:`StoredImage` (path relative to ``$DORA_HOME``, sha256 hex, size in pixels).

    Raises:
        ValueError: the bytes are not a decodable image.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            fmt, size = img.format, img.size
            if fmt != "PNG":
                buf = io.BytesIO()
                img.save(buf, format="PNG")
                data = buf.getvalue()
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise ValueError(f"not a decodable image ({len(data)} bytes): {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    folder = images_dir() / digest[:2]
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{digest}.png"
    if not target.exists():
        tmp = folder / f".{digest}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    return StoredImage(f"images/{digest[:2]}/{digest}.png", digest, int(size[0]), int(size[1]))


def image_file(relative_path: str) -> Path:
    """Absolute path of a stored image from its landed ``image_path``.

    Raises:
        ValueError: the path would leave ``$DORA_HOME/images`` (e.g. a tampered row).
    """
    root = images_dir().resolve()
    path = (dora_home() / relative_path).resolve()
    if root not in path.parents:
        raise ValueError(f"image path {relative_path!r} is outside {root}")
    return path


__all__ = ["StoredImage", "image_file", "images_dir", "store_png"]
