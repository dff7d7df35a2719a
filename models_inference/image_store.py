"""The content-addressed image store: ``$DORA_HOME/images/<sha[:2]>/<sha256>.png``.

Images drawn by a T2I backend are stored as PNG under the sha256 of their bytes
(:func:`store_png`): the file name is never derived from descriptor text, so no descriptor
("../../etc/passwd", "a/b") can steer a path, and identical images share one file. Landed
rows keep the path relative to ``$DORA_HOME``; :func:`image_file` turns it back into an
absolute path and refuses any path outside the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

from ingestion.home import dora_home


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


def _bomb(exc: Exception) -> str:
    return f"decompression bomb refused: {exc} (Pillow's limit, checked from the header before any pixel is decoded)"


@contextlib.contextmanager
def _guarded():
    """Pillow's decompression-bomb warning as an error: an image over ~89.5 megapixels (a 50 kB
    PNG can declare 20000 x 20000, 1.2 GB decoded) is refused from its header, never decoded."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        yield


def image_problem(path: str | Path) -> str | None:
    """Why the image file at ``path`` cannot be used, in one line without the file's name (the
    caller names it), or ``None`` when it decodes.

    The header is read first and an image over Pillow's pixel limit (a decompression bomb)
    is refused before its pixels are; otherwise the image is fully decoded,
    so a truncated file is caught here. Never raises for a bad file: a missing, unreadable,
    non-image or corrupt file is a reason, for the caller to quarantine.
    """
    from PIL import Image

    path = Path(path)
    if not path.exists():
        return "no such file"
    if not path.is_file():
        return "not a regular file"
    try:
        with _guarded(), Image.open(path) as img:
            img.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return _bomb(exc)
    except OSError as exc:
        if exc.errno is not None:  # the file itself (permissions, I/O), not its content
            return f"cannot be read ({exc.strerror or exc})"
        return f"not a decodable image ({type(exc).__name__}: {exc})"
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types on a malformed file; each is "not decodable"
        return f"not a decodable image ({type(exc).__name__}: {exc})"
    return None


def store_png(data: bytes) -> StoredImage:
    """Store image bytes content-addressed as PNG: ``images/<sha[:2]>/<sha256>.png``.

    The bytes are decoded with Pillow (fully loaded, so truncated data fails here); a PNG is
    kept byte for byte, any other format (JPEG, WebP) is re-encoded as PNG first. The file
    name is the sha256 of the stored PNG bytes, so identical images share one file and no
    caller text reaches the path. Written atomically (temp file + rename).

    Returns:
        A :class:`StoredImage` (path relative to ``$DORA_HOME``, sha256 hex, size in pixels).

    Raises:
        ValueError: the bytes are not a decodable image, or declare more than
            Pillow's pixel limit (a decompression bomb: refused from its header).
    """
    from PIL import Image

    try:
        with _guarded(), Image.open(io.BytesIO(data)) as img:
            img.load()
            fmt, size = img.format, img.size
            if fmt != "PNG":
                buf = io.BytesIO()
                img.save(buf, format="PNG")
                data = buf.getvalue()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValueError(_bomb(exc)) from None
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types on a malformed file; each is "not decodable"
        raise ValueError(f"not a decodable image ({len(data)} bytes): {type(exc).__name__}: {exc}") from exc
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


__all__ = ["StoredImage", "image_file", "image_problem", "images_dir", "store_png"]
