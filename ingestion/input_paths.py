"""Input paths a user names (a flag, a command's argument, a registry field, ``$DORA_REGISTRY``):
one check of what may be read, before anything reads it.

Opening a FIFO to read blocks until a writer comes, for ever if none does; a socket or a device
is no input either. So every path dora reads from a user is checked here first, without being
opened: only a regular file (or a folder, where one is wanted) passes.
"""

from __future__ import annotations

import os
from pathlib import Path

#: What a path may be: a file, a folder, or either.
KINDS = ("file", "folder", "file_or_folder")


def path_problem(value: str | os.PathLike, kind: str = "file", name: str | None = None) -> str | None:
    """Why ``value`` cannot be read as an input of ``kind`` (``None`` if it can), without opening it.

    Args:
        value: the path as given (``~`` is expanded). kind: ``"file"``, ``"folder"`` or
            ``"file_or_folder"`` (:data:`KINDS`). name: what names the path in the message (a
            flag such as ``--cf-images``, ``OUTPUT``); ``None``: the message is the reason alone.

    Returns:
        One line, ``"<name> <value>: <reason>"`` (or ``"<reason>"`` without ``name``): no such
        path (a broken symbolic link named as such), a folder where a file is expected (or the
        reverse), not a regular file (a FIFO, socket or device: reading one could block for
        ever), or not readable (permission denied).

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    path = Path(value).expanduser()
    wanted = {"file": "file", "folder": "folder"}.get(kind, "file or folder")
    reason = None
    if not path.exists():
        reason = f"no such {wanted}" + (" (a broken symbolic link)" if path.is_symlink() else "")
    elif path.is_dir():
        if kind == "file":
            reason = "is a folder; expected a file"
        elif not os.access(path, os.R_OK | os.X_OK):
            reason = "the folder cannot be read (permission denied)"
    elif not path.is_file():
        reason = f"not a regular file (a FIFO, socket or device); expected a {wanted}"
    elif kind == "folder":
        reason = "is a file; expected a folder"
    elif not os.access(path, os.R_OK):
        reason = "the file cannot be read (permission denied)"
    if reason is None:
        return None
    return f"{name} {value}: {reason}" if name else reason


__all__ = ["KINDS", "path_problem"]
