"""dora's home folder and the paths derived from it: ``$DORA_HOME`` (:func:`dora_home`), one
safe path component from arbitrary text (:func:`safe_path_component`), a path made literal for
a DuckDB glob (:func:`glob_escape`), and the home and artifact folders given to dbt
(:func:`dbt_home`, :func:`dbt_target_dir`).

Paths are data: an audit id or a model id never escapes its folder, and a home whose path holds
glob or SQL metacharacters reaches DuckDB and dbt only escaped or through a plain alias.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import uuid
from pathlib import Path

_SAFE = re.compile(r"[^A-Za-z0-9._=-]+")


#: The environment variable naming dora's home folder (warehouse, landing zone, caches).
DORA_HOME_ENV = "DORA_HOME"


def dora_home(*, create: bool = True) -> Path:
    """Return ``$DORA_HOME`` (default ``./data``) as an absolute path, creating it unless
    ``create`` is False.

    Read at call time, never at import time, so tests can point it at a temp folder.
    """
    home = Path(os.environ.get(DORA_HOME_ENV, "data")).expanduser().resolve()
    if create:
        home.mkdir(parents=True, exist_ok=True)
    return home


def safe_path_component(text: str) -> str:
    """Turn arbitrary text (an audit id, a model id) into one safe path component.

    Anything outside ``[A-Za-z0-9._=-]`` becomes ``_`` and leading dots are removed, so the
    result can never contain ``/`` or ``..`` and never escapes its parent folder.

    Raises:
        ValueError: if nothing usable is left.
    """
    cleaned = _SAFE.sub("_", text).lstrip(".")[:120]
    if not cleaned.strip("_"):
        raise ValueError(f"cannot build a file name from {text!r}")
    return cleaned


def glob_escape(path: str | Path) -> str:
    """``path`` with DuckDB/fnmatch glob metacharacters made literal (``[`` -> ``[[]``,
    ``*`` -> ``[*]``, ``?`` -> ``[?]``), so a folder named ``h[1]`` never matches ``h1``.

    The same escaping is done in Jinja for the dbt sources (``landing_root`` in ``dbt_project/dbt_project.yml``)."""
    return glob.escape(str(path))


#: Characters a home may hold and still be written into dbt's profile and SQL as is.
_PLAIN_PATH = re.compile(r"^[A-Za-z0-9 ._/+=,:@%~-]*$")


def dbt_home() -> Path:
    """The ``DORA_HOME`` to give dbt: the home itself when its path is plain, else a symlink to
    it with a plain name (``<tmp>/dora-homes-<uid>/<sha256 of the path>[:16]``).

    dbt-duckdb cuts the warehouse path at ``?`` and writes the catalog name into SQL unquoted
    (an apostrophe breaks every build), and the sources' ``read_parquet`` globs would read
    ``[`` ``*`` ``?`` as patterns: the alias keeps all of them out of dbt. It is
    deterministic, so the views dbt writes keep working; it is re-created when missing.
    """
    import hashlib
    import tempfile

    home = dora_home()
    if _PLAIN_PATH.match(str(home)):
        return home
    folder = Path(tempfile.gettempdir()) / f"dora-homes-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    alias = folder / hashlib.sha256(str(home).encode()).hexdigest()[:16]
    if not (alias.is_symlink() and Path(os.readlink(alias)) == home):
        tmp = folder / f".{alias.name}.{uuid.uuid4().hex}"
        tmp.symlink_to(home, target_is_directory=True)
        os.replace(tmp, alias)
    return alias


def dbt_target_dir(name: str) -> Path:
    """Where dbt keeps the artifacts of builds of this home's warehouse (``manifest.json``,
    ``run_results.json``, its log, ``partial_parse.msgpack``): ``<dbt_home()>/dbt/<name>``, one
    folder per caller (a Dagster step, the programmatic runner).

    Per home, because a parse is valid for one home only (dbt re-parses the whole project when
    the profile's warehouse path changes) and two homes built at once must not share one
    ``target/``; stable, so the next build of the same home parses only what changed. A new
    folder starts from the newest ``partial_parse.msgpack`` of the home's other folders (a
    copy, renamed into place): the home's first build of another step parses only what changed
    too, instead of the whole project (~3 s of CPU; dbt checks the file and re-parses what it
    no longer matches).
    """
    folder = dbt_home() / "dbt" / safe_path_component(name)
    seed = folder / "partial_parse.msgpack"
    if not seed.exists():
        others = [p for p in folder.parent.glob("*/partial_parse.msgpack") if p.parent != folder]
        if others:
            try:
                newest = max(others, key=lambda p: p.stat().st_mtime_ns)
                folder.mkdir(parents=True, exist_ok=True)
                tmp = folder / f".partial_parse.{os.getpid()}.tmp"
                shutil.copyfile(newest, tmp)
                os.replace(tmp, seed)
            except OSError:  # a folder removed meanwhile: this step parses the whole project
                pass
    return folder
