"""The audit registry: which models dora audits, how each one's version is read, and how.

The registry is a YAML file (default: ``registry.yaml`` at the repository root, or the file
named by ``$DORA_REGISTRY``) listing **audit targets**. Each target is one model to audit
again whenever its version changes (one audit per probe family = its probes against one model
version)::

    schedule:
      cron: "0 3 * * 1"          # weekly re-audit of every target (Mondays 03:00)
      timezone: UTC
    targets:
      - name: smollm2-135m       # [a-z0-9][a-z0-9._-]*, unique
        modality: t2t            # t2t | t2i | i2t: what kind of model `model` is
        backend: transformers    # t2t: transformers | openai; t2i: diffusers | openai; i2t: transformers | openai
        model: smollm2-135m      # alias, local folder / .gguf, hub id or API model name
        version:
          source: file_hash      # explicit | file_hash | hub_revision | api_model
        families: [biasdora, counterfactual, modscan, vlstereoset]   # default: every family of `dora audit`
        options:                 # per family: its `dora audit` flags without `--` and its prefix
          counterfactual: {occupations: [nurse, doctor], seeds: 3}
          modscan: {samples: 20}
        probe: {settings: [singular, noun], runs: 4, per_dimension: 2}   # the descriptor probes' settings
        scorers: [sentiment, toxicity, bias_level]   # default []: no scoring of this target's audits

Version sources (read by :func:`models_inference.model_ref.resolve_version`; this module only
validates them):

* ``explicit``: ``value`` is the version string (e.g. ``"v1"``), as declared by the user.
* ``file_hash``: ``sha256-<12 hex>`` of the weights file (``path``; default: the model's
  own file: the embedded GGUF for ``smollm2-135m``, or ``model`` itself when it is a local
  file or folder). A folder hashes every file in it (relative path + content). The embedded
  default's GGUF is named ``gguf-q4_1-<12 hex>`` (the same 12 digits), as ``dora audit`` names
  it: one name per set of weights.
* ``hub_revision``: the commit hash of ``revision`` (default ``main``) of a Hugging Face hub
  id: from the hub (``HfApi.model_info``) when online, from the local cache
  (``scan_cache_dir``) when ``HF_HUB_OFFLINE`` is set or the hub is unreachable.
* ``api_model``: ``value`` when given (a dated snapshot name such as
  ``gpt-4o-2024-08-06``); otherwise the endpoint's ``GET /models/{model}`` answer, as
  ``<id>@<creation date, UTC>`` (OpenAI-compatible endpoints; key from ``api_key_env``), or,
  from servers whose ``created`` is the request time (llama-server, vLLM), ``<id>@sha256-``,
  ``<id>@gguf-`` or ``<id>@vllm-<12 hex>`` of the served weights (formats in
  :mod:`models_inference.model_ref`).

Validation (:func:`load_registry`) reports every bad field it finds, each with its path in
the file (``targets[1] (name 'gpt4o').version.value: ...``); nothing is audited from an
invalid registry. This module knows no probe family: it checks that ``families`` and the keys
of ``options`` are names, and ``orchestration/defs/audits/runs.py: target_ops`` checks them
against the families dora hosts. This module is plain Python (pydantic + PyYAML); Dagster's
sensor and schedule (``orchestration/defs/audits/``) call into it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from ingestion.errors import RegistryError, UnknownTargetError
from ingestion.input_paths import path_problem
from ingestion.registry_fields import RESERVED, _loc, _message, register_target_fields, target_fields
from ingestion.vocabulary import ADHOC_PARTITION_PREFIX, BACKENDS, PARTITION_SEPARATOR

__all__ = [
    "AuditTarget",
    "adhoc_partition_key",
    "is_adhoc_partition",
    "Registry",
    "RegistryError",
    "VersionSpec",
    "base_url_list",
    "default_registry_path",
    "load_registry",
    "parse_registry",
    "parse_partition_key",
    "partition_key",
    "register_target_fields",
    "target_fields",
]

#: Default re-audit cadence: weekly, Mondays 03:00.
DEFAULT_CRON = "0 3 * * 1"

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,59}$")
_HTTP_URL = re.compile(r"^https?://[^\s/,]+\S*$")


def base_url_list(value) -> list[str]:
    """The server URLs a target's ``base_url`` names (a fleet of servers, one target).

    ``value`` is one URL, several separated by commas (``"http://a:8000/v1,http://b:8000/v1"``,
    the CLI's and Dagster config's spelling) or a list of URLs (YAML). Returns ``[]`` for
    ``None`` / empty (the default endpoint). Whitespace around each URL is dropped.

    Raises:
        ValueError: a URL that is not ``http(s)://host...`` (one line naming it), a repeated
            URL, or a value that is neither a string nor a list of strings.
    """
    if not value:
        return []
    if isinstance(value, str):
        parts = value.split(",")
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        parts = list(value)
    else:
        raise ValueError(f"must be an http(s) URL or a list of them, got {value!r}")
    urls = [p.strip() for p in parts if p.strip()]
    bad = [u for u in urls if not _HTTP_URL.match(u)]
    if bad:
        raise ValueError(f"must be an http(s) URL (or several, comma-separated), got {', '.join(map(repr, bad))}")
    if len(set(urls)) != len(urls):
        raise ValueError(f"a server URL is repeated in {', '.join(urls)}")
    return urls


_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-?LW#]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VersionSpec(_Strict):
    """How a target's model version is read (see the module docstring for each source)."""

    source: Literal["explicit", "file_hash", "hub_revision", "api_model"]
    value: Optional[str] = None
    path: Optional[str] = None
    revision: Optional[str] = None

    @model_validator(mode="after")
    def _fields_fit_source(self) -> "VersionSpec":
        allowed = {"explicit": {"value"}, "file_hash": {"path"}, "hub_revision": {"revision"}, "api_model": {"value"}}
        problems = []
        for name in ("value", "path", "revision"):
            if getattr(self, name) is not None and name not in allowed[self.source]:
                problems.append(f"{name}: not used by source {self.source!r} (it takes {sorted(allowed[self.source])})")
        if self.source == "explicit" and not (self.value or "").strip():
            problems.append("value: required (non-empty) when source is 'explicit'")
        for name in ("value", "path", "revision"):
            text = getattr(self, name)
            if text is not None and not text.strip():
                problems.append(f"{name}: must not be empty")
        if problems:
            raise ValueError("\n".join(problems))
        return self


class NotifySpec(_Strict):
    """Where a target's alarms go: ``notify: {webhook: URL}``. Every drift alarm (a collapse or a
    significant change of a check between the target's last two audits of a family) is POSTed
    once as JSON to ``webhook`` (``orchestration/alarms.py``; docs/operations.md#drift-checks)."""

    webhook: Optional[str] = None

    @field_validator("webhook")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(value)
            port_ok = parts.port is None or 0 < parts.port < 65536
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or any(c.isspace() for c in value):
            raise ValueError(f"{value!r} is not an http(s) URL with a host (e.g. https://hooks.example.com/dora)")
        return value


class AuditTarget(_Strict):
    """One model to audit, re-audited whenever its version changes.

    A partition ``<name>@<version>`` runs the target's ``families`` (the names of the probe
    families, e.g. ``[biasdora, counterfactual, modscan, vlstereoset]``) and only them: every
    other family skips the partition. Omitted: every family ``dora audit`` runs that audits a
    model of the target's ``modality`` (each family record says where it puts a registry target's
    model: ``ProbeFamily.target_models``, ``orchestration/family.py``). ``family: NAME`` (one
    family) is the same as ``families: [NAME]``.

    ``modality`` says what kind of model ``model`` is: ``t2t`` (a text generator: backend
    transformers | openai), ``t2i`` (an image generator: diffusers | openai) or ``i2t`` (a
    describer of images: transformers | openai); each family puts the target's ``model`` /
    ``backend`` / ``base_url`` on its fields for that kind of model.

    ``options``: per family, that family's settings (``{modscan: {samples: 20}}``): its flags
    without ``--`` and its prefix (``instances`` for ``--modscan-instances``), or the run-config
    fields they set (``dora audit --help-family NAME`` lists the flags). With ``family:`` (one
    family) the options may be given flat, as that family's. This module checks only their
    shape; the families, the options and their values are checked as the flags would be when
    the run config is built (``orchestration/defs/audits/runs.py: target_ops``) and by ``dora
    audit --target`` before anything starts (``orchestration/cli/target.py``).

    A family may declare fields of its own at the target's top level (:func:`target_fields`:
    ``probe``, ``scorers``, ``judges``, ``checks`` are BiasDora's, ``ingestion/biasdora/
    target_fields.py``); they are validated with the type the family gives, reported like any
    other field, and read with :meth:`family_field` (or as attributes: ``target.probe``). A
    target that sets one must run that family (``orchestration/defs/audits/runs.py``).

    ``notify``: where the target's drift alarms are POSTed (:class:`NotifySpec`).
    """

    name: str
    description: str = ""
    families: Optional[list[str]] = None
    options: dict[str, Any] = Field(default_factory=dict)
    modality: Literal["t2t", "t2i", "i2t"] = "t2t"
    backend: str = "transformers"
    model: str
    # one URL, or several (a YAML list or comma-separated): a fleet behind one target,
    # stored as one comma-separated string
    base_url: Optional[str] = None
    api_key_env: str = "OPENAI_API_KEY"
    # client limits of an API backend: seconds per request, requests in flight
    timeout: float = Field(default=60.0, gt=0, le=3600)
    concurrency: int = Field(default=4, ge=1, le=256)
    version: VersionSpec
    notify: Optional[NotifySpec] = None
    # the families' own fields (target_fields()), moved here from the top level by _gather_family_fields;
    # last, so that their checks see every other field
    family_fields: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_family_fields(cls, data: Any) -> Any:
        """The top-level keys a family declares (:func:`target_fields`) go to ``family_fields``;
        any other unknown key stays, to be refused as a typo."""
        if not isinstance(data, dict):
            return data
        declared = target_fields()
        data = dict(data)
        if "family_fields" in data:  # the name of the gathered fields, never a key of the file
            raise ValueError("family_fields: unknown field (typo?)")
        data["family_fields"] = {k: data.pop(k) for k in list(data) if k in declared}
        return data

    @field_validator("family_fields")
    @classmethod
    def _valid_family_fields(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from pydantic import TypeAdapter

        problems, parsed = [], {}
        for name, (kind, default, check) in target_fields().items():
            try:
                parsed[name] = TypeAdapter(kind).validate_python(value.get(name, default))
            except ValidationError as exc:
                problems += [f"{name}{_loc(err['loc'])}: {_message(err)}" for err in exc.errors()]
                continue
            if check is not None and name in value:
                problems += check(parsed[name], dict(info.data))
        if problems:
            raise ValueError("\n".join(problems))
        return {**parsed, "_given": sorted(value)}

    def family_field(self, name: str) -> Any:
        """The value of a family's own field ``name`` (:func:`target_fields`; its default when the
        file leaves it out).

        Raises:
            AttributeError: no family declares a target field ``name``."""
        fields = self.__dict__.get("family_fields") or {}
        if name == "_given" or name not in fields:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return fields[name]

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)  # type: ignore[misc]  # pydantic defines it outside TYPE_CHECKING
        except AttributeError:
            return self.family_field(name)

    def given(self, name: str) -> bool:
        """Whether the registry file gives the field ``name`` (the target's own or a family's) a
        value other than its default."""
        if name in type(self).model_fields:
            default = type(self).model_fields[name].get_default(call_default_factory=True)
            return name in self.model_fields_set and getattr(self, name) != default
        fields = self.__dict__.get("family_fields") or {}
        if name not in fields.get("_given", ()):
            return False
        kind, default, _ = target_fields()[name]
        from pydantic import TypeAdapter

        return fields[name] != TypeAdapter(kind).validate_python(default)

    @model_validator(mode="before")
    @classmethod
    def _one_family(cls, data: Any) -> Any:
        """``family: NAME`` is ``families: [NAME]``, its ``options`` (flat) that family's."""
        if not isinstance(data, dict) or "family" not in data:
            return data
        data = dict(data)
        family = data.pop("family")
        if "families" in data:
            raise ValueError("family: give 'families' (a list) or 'family' (one name), not both")
        if not isinstance(family, str):
            raise ValueError(f"family: must be one family name, got {family!r} (several: families: [a, b])")
        data["families"] = [family]
        options = data.get("options")
        if isinstance(options, dict) and options and set(options) != {family}:
            data["options"] = {family: options}
        return data

    @field_validator("name")
    @classmethod
    def _slug_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a target name: use 1-60 of a-z 0-9 . _ - starting with a letter or digit")
        return value

    @field_validator("model")
    @classmethod
    def _model_given(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("base_url", mode="before")
    @classmethod
    def _http_urls(cls, value) -> Optional[str]:
        if value is None:
            return None
        urls = base_url_list(value)
        if not urls:
            raise ValueError("must be an http(s) URL (or several), got an empty value")
        return ",".join(urls)

    @field_validator("backend")
    @classmethod
    def _backend_fits_modality(cls, value: str, info: ValidationInfo) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        modality = info.data.get("modality", "t2t")
        if modality in BACKENDS and value not in BACKENDS[modality]:
            raise ValueError(f"{value!r} is not a {modality.upper()} backend; expected one of {list(BACKENDS[modality])}")
        return value

    @model_validator(mode="after")
    def _version_fits_backend(self) -> "AuditTarget":
        problems = []
        if self.version.source == "api_model" and self.backend != "openai":
            problems.append("version.source: 'api_model' needs backend 'openai'")
        if self.version.source == "hub_revision" and self.backend not in ("transformers", "diffusers"):
            problems.append("version.source: 'hub_revision' needs a hub backend ('transformers' or 'diffusers')")
        if "backend" not in self.model_fields_set and self.backend not in BACKENDS[self.modality]:
            problems.append(f"backend: required for a {self.modality} target, one of {list(BACKENDS[self.modality])}")
        if self.base_url and self.backend != "openai":
            problems.append("base_url: only used by backend 'openai'")
        problems += self._family_problems()
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def _family_problems(self) -> list[str]:
        """The shape of ``families`` and ``options`` (which families exist is not known here)."""
        problems = []
        if self.families is not None:
            if not self.families:
                problems.append("families: list at least one family (or leave it out: every family of `dora audit`)")
            for name in self.families:
                if not _NAME.match(name):
                    problems.append(f"families: {name!r} is not a family name")
            repeated = sorted({n for n in self.families if self.families.count(n) > 1})
            if repeated:
                problems.append(f"families: {', '.join(map(repr, repeated))} listed more than once")
        for name, given in self.options.items():
            if self.families is not None and name not in self.families:
                problems.append(
                    f"options.{name}: {name!r} is not one of this target's families {self.families}; "
                    "options are given per family: options: {<family>: {<option>: <value>}}"
                )
            elif not isinstance(given, dict):
                problems.append(f"options.{name}: must be a mapping of the family's options ({{<option>: <value>}}), got {given!r}")
        return problems


RESERVED.update(AuditTarget.model_fields)


class ScheduleSpec(_Strict):
    """Re-audit schedule: a 5-field cron string in ``timezone`` (default weekly)."""

    cron: str = DEFAULT_CRON
    timezone: str = "UTC"

    @field_validator("cron")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        fields = value.split()
        if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
            raise ValueError(f"must be a 5-field cron string such as {DEFAULT_CRON!r}, got {value!r}")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r}") from None
        return value


class Registry(_Strict):
    """The parsed registry: re-audit schedule and audit targets (unique names)."""

    schedule: ScheduleSpec = Field(default_factory=ScheduleSpec)
    targets: Annotated[list[AuditTarget], Field(min_length=1)]

    @field_validator("targets")
    @classmethod
    def _unique_names(cls, value: list[AuditTarget]) -> list[AuditTarget]:
        seen: set[str] = set()
        for t in value:
            if t.name in seen:
                raise ValueError(f"target name {t.name!r} appears more than once")
            seen.add(t.name)
        return value

    def target(self, name: str) -> AuditTarget:
        """The target called ``name``.

        Raises:
            UnknownTargetError: (a ``KeyError``) no such target; one line listing the registered names.
        """
        for t in self.targets:
            if t.name == name:
                return t
        raise UnknownTargetError(f"no audit target {name!r} in the registry; registered: {', '.join(t.name for t in self.targets)}")


def default_registry_path() -> Path:
    """``$DORA_REGISTRY`` if set (read at call time), else ``registry.yaml`` at the repo root."""
    env = os.environ.get("DORA_REGISTRY")
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parent.parent / "registry.yaml"


def _field_path(loc: tuple, raw: object) -> str:
    parts: list[str] = []
    node = raw
    for item in loc:
        if isinstance(item, int):
            label = f"[{item}]"
            if parts and parts[-1] == "targets" and isinstance(node, list) and item < len(node):
                name = node[item].get("name") if isinstance(node[item], dict) else None
                if name:
                    label += f" (name {name!r})"
            parts[-1] += label
        else:
            parts.append(str(item))
        try:
            node = node[item]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            node = None
    return ".".join(parts) or "(top level)"


def _format_errors(exc: ValidationError, raw: object) -> list[str]:
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        if loc and loc[-1] == "family_fields":  # a family's own fields: their lines name them
            loc = loc[:-1]
        where = _field_path(loc, raw)
        msg = _message(err)
        for part in msg.split("\n"):  # model validators report one "<field>: <message>" per line
            # model-level validators report "<field>: <message>": attach the field to the path
            head, sep, rest = part.partition(": ")
            if sep and re.match(r"^[a-z_][a-z_.]*(\[\d+\])*(\.[a-z_]+)*$", head) and err["type"] == "value_error":
                problems.append(f"{where}.{head}: {rest}" if where != "(top level)" else f"{head}: {rest}")
            else:
                problems.append(f"{where}: {part}")
    return problems


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key repeated in one mapping (the last one
    silently won)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: the base class reports it
                break
            if repeated:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_registry(text: str, source: Path | str = "<registry>") -> Registry:
    """Parse and validate registry YAML text.

    Raises:
        RegistryError: not YAML, not a mapping, or any invalid field (all of them listed).
    """
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # safe_load, but a repeated key is an error
    except yaml.YAMLError as exc:
        raise RegistryError(source, [f"not valid YAML: {exc}"]) from None
    if not isinstance(raw, dict):
        raise RegistryError(source, ["(top level): must be a mapping with a 'targets' list"])
    try:
        return Registry.model_validate(raw)
    except ValidationError as exc:
        raise RegistryError(source, _format_errors(exc, raw)) from None


def load_registry(path: Path | str | None = None) -> Registry:
    """Read and validate the registry file (default :func:`default_registry_path`).

    Raises:
        RegistryError: the file is missing, not a regular file (a FIFO is refused unopened), not
            readable or invalid (every bad field named).
    """
    path = Path(path).expanduser().resolve() if path else default_registry_path()
    problem = path_problem(path, "file")  # a FIFO would block the read
    if problem:
        fix = " (set $DORA_REGISTRY or create registry.yaml)" if not path.exists() else ""
        raise RegistryError(path, [problem + fix])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RegistryError(path, [f"not UTF-8 text (byte {exc.start}: {exc.reason}); save the file as UTF-8"]) from None
    except OSError as exc:
        raise RegistryError(path, [f"cannot read it: {exc.strerror}"]) from None
    return parse_registry(text, path)


def partition_key(target: str, version: str) -> str:
    """The Dagster partition key of one (target, model version): ``<target>@<version>``."""
    return f"{target}{PARTITION_SEPARATOR}{version}"


def adhoc_partition_key(model: str, version: str) -> str:
    """The Dagster partition key of an ad-hoc audit (``dora audit`` without ``--target``) of
    ``model`` at ``version``: ``adhoc:<model>@<version>``, e.g.
    ``adhoc:smollm2-135m@gguf-q4_1-0123456789ab``. Its settings are the run's config, not a
    registry target's (:func:`is_adhoc_partition`)."""
    return f"{ADHOC_PARTITION_PREFIX}{model}{PARTITION_SEPARATOR}{version}"


def is_adhoc_partition(key: str) -> bool:
    """Whether partition ``key`` is an ad-hoc audit's (:func:`adhoc_partition_key`), not a registry target's."""
    return key.startswith(ADHOC_PARTITION_PREFIX)


def parse_partition_key(key: str) -> tuple[str, str]:
    """Split a partition key into (target, model version).

    Raises:
        ValueError: the key is not ``<target>@<version>``.
    """
    target, sep, version = key.partition(PARTITION_SEPARATOR)
    if not sep or not target or not version:
        raise ValueError(f"partition key {key!r} is not '<target>{PARTITION_SEPARATOR}<model version>'")
    return target, version
