"""Where the landing zone is: the local folder ``$DORA_HOME/landing`` or object storage
(``$DORA_LANDING_URL``, any fsspec URL: :func:`landing_url`, :func:`landing_root`), and how a
DuckDB connection reads it (:func:`register_landing`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ingestion.home import dora_home

if TYPE_CHECKING:
    from typing_extensions import TypeIs
    from upath import UPath

# --- the landing zone on object storage (any fsspec URL) -----------------------------------
#: The landing zone on object storage: an fsspec URL (``s3://bucket/prefix``, ``gs://...``).
#: Unset: the local folder ``$DORA_HOME/landing``. Endpoint and credentials come from the
#: storage library's own environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...), never
#: from dora's code or files (docs/operations.md#object-storage-landing).
LANDING_URL_ENV = "DORA_LANDING_URL"


def landing_url() -> str | None:
    """The landing zone's object-storage URL (``$DORA_LANDING_URL``, trailing ``/`` removed), or
    ``None`` for the local landing folder.

    Raises:
        LandingLocationError: the value is not a URL with a protocol (``s3://bucket/prefix``),
            its protocol keeps files inside one process or on one machine (:data:`UNSHARED_PROTOCOLS`),
            fsspec knows no such protocol, or the package implementing it is not installed.
    """
    from ingestion.errors import LandingLocationError, shown

    url = os.environ.get(LANDING_URL_ENV, "").strip().rstrip("/")
    if not url:
        return None
    protocol, sep, rest = url.partition("://")
    if not sep or not protocol or not rest or protocol == "file":
        raise LandingLocationError(
            f"${LANDING_URL_ENV}={shown(url, quote=True)} is not an object-storage URL (e.g. s3://bucket/prefix); "
            "unset it to land in $DORA_HOME/landing"
        )
    for proto in protocol.split("::"):  # a chained URL (simplecache::s3://...): every link counts
        problem = _protocol_problem(proto)
        if problem:
            raise LandingLocationError(f"${LANDING_URL_ENV}={shown(url, quote=True)}: {problem}")
    return url


#: fsspec protocols whose files live inside one process (``memory``: each worker of a run would
#: land in its own copy, and the warehouse build would see none of it), on this machine only
#: (local files and caches: use ``$DORA_HOME`` instead), or that cannot be written (archives,
#: wrappers over another filesystem given in Python, not in a URL).
UNSHARED_PROTOCOLS = frozenset(
    {
        "memory",
        "data",
        "reference",
        "generic",
        "dir",
        "async_wrapper",
        "asyncwrapper",
        "local",
        "file",
        "asynclocal",
        "blockcache",
        "cached",
        "filecache",
        "simplecache",
        "zip",
        "tar",
        "libarchive",
        "dask",
        "pyscript",
    }
)


def _protocol_problem(proto: str) -> str | None:
    """Why fsspec ``proto`` cannot hold the landing zone (``None`` if it can): not shared between
    the processes of a run, unknown, or its package not installed (fsspec's registry names it)."""
    import fsspec
    from fsspec.registry import known_implementations

    from ingestion.errors import shown

    if proto in UNSHARED_PROTOCOLS:
        return (
            f"the {shown(proto, quote=True)} filesystem is not shared between processes (each step "
            "process would land in its own); use object storage (e.g. s3://bucket/prefix) or unset it to land in "
            "$DORA_HOME/landing"
        )
    try:
        fsspec.get_filesystem_class(proto)
    except ValueError:
        return (
            f"fsspec knows no filesystem {shown(proto, quote=True)}; use object storage (e.g. s3://bucket/prefix) "
            "or unset it to land in $DORA_HOME/landing"
        )
    except ImportError as exc:  # a known protocol whose package is missing (gs:// without gcsfs)
        known = known_implementations.get(proto, {})
        package = str(known.get("class", "")).split(".")[0]
        install = f": pip install {package}" if package and package != "fsspec" else ""
        reason = (str(known.get("err") or exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"the {proto!r} filesystem is not installed ({reason}){install}"
    return None


def landing_root():
    """Where every landing table's folder lives: ``$DORA_HOME/landing`` (a ``Path``), or the
    :func:`landing_url` as a ``upath.UPath`` (its ``fs`` is the fsspec filesystem).

    Raises:
        LandingLocationError: a malformed :data:`LANDING_URL_ENV`.
    """
    url = landing_url()
    if url is None:
        return dora_home() / "landing"
    from upath import UPath

    # no listings cache: workers land shards in the same folders at once, and a cached listing
    # made the filesystem answer "file not found" for a shard another worker landed after it
    # (DuckDB's read of a shard its glob had just found then failed)
    return UPath(url, use_listings_cache=False)


def is_remote(path: Path | UPath) -> TypeIs[UPath]:
    """True for a landing path on object storage (not a local ``pathlib.Path``)."""
    return not isinstance(path, Path)


def register_landing(con) -> None:
    """Let the DuckDB connection ``con`` read the landing zone: on object storage, register its
    fsspec filesystem (``read_parquet('s3://...')`` and ``glob`` then go through it; it keeps no
    listings cache, :func:`landing_root`, so shards other workers landed are seen). Nothing to
    do for a local landing folder."""
    root = landing_root()
    if is_remote(root):
        con.register_filesystem(root.fs)
