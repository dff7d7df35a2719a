"""What a (partitioned) audit run audits: registry target -> probe settings and version.

Plain helpers shared by the T2T asset, the sensor and the schedule; the vision and scoring
assets ask :func:`target_of_run` which target their run audits. A run with a registry
partition key (``<target>@<version>``) audits that registry target at that model version; a
run with an ad-hoc key (``adhoc:<model>@<version>``, :func:`adhoc_run`) or none is an ad-hoc
audit configured entirely by its run config.

Run tags (:data:`RUN_TAGS`): every audit run carries ``dora/target``, ``dora/model``,
``dora/model_version``, ``dora/trigger`` and ``dora/family`` from its launch (sensor, schedule,
``dora audit``), and ``dora/audit_id`` from the audit log asset at its end
(``orchestration/defs/audits/assets.py``), which also fills any of the others a launch did
not set (a run started from the UI).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from ingestion.registry import (
    AuditTarget,
    adhoc_partition_key,
    default_registry_path,
    is_adhoc_partition,
    load_registry,
    parse_partition_key,
)
from ingestion.errors import VersionError
from models_inference.model_ref import resolve_version, resolve_version_with_source
from orchestration.defs.biasdora.config import AuditConfig, VisionConfig

#: Op name of the T2T probe asset, whose config the run requests fill.
T2T_OP = "t2t_completions"

#: The run tags of an audit run (Dagster UI -> Runs; filter with ``tag:dora/family=modscan``).
TAG_AUDIT_ID = "dora/audit_id"  # the audits the run landed, comma-separated (set at the run's end)
TAG_FAMILY = "dora/family"  # probe families run, comma-separated
TAG_MODEL = "dora/model"  # the model audited (``--model`` / the target's model)
TAG_MODEL_VERSION = "dora/model_version"
TAG_TARGET = "dora/target"  # the registry target, or AD_HOC
TAG_TRIGGER = "dora/trigger"  # cli, sensor, schedule, or manual (launched from the UI / Python)
RUN_TAGS = (TAG_AUDIT_ID, TAG_FAMILY, TAG_MODEL, TAG_MODEL_VERSION, TAG_TARGET, TAG_TRIGGER)
#: ``dora/target`` of an ad-hoc audit (no registry target).
AD_HOC = "(ad hoc)"
#: Run tag values are cut here (with "..."): a run of every family with many scorers lands a
#: dozen audit ids (~60 characters each), which must fit; a registry target's odd model name need not.
TAG_VALUE_LIMIT = 2000


def tag_value(value: str) -> str:
    """``value`` cut to :data:`TAG_VALUE_LIMIT` characters (ending ``...`` when cut)."""
    return value if len(value) <= TAG_VALUE_LIMIT else value[: TAG_VALUE_LIMIT - 3] + "..."


@dataclass
class AuditRun:
    """The resolved audit of one run.

    Attributes:
        config: the probe configuration (registry target's settings for partitioned runs).
        target: registry target name, or ``None`` for an ad-hoc run.
        model_version: the version the partition pins (overrides the backend's own), or None.
        modality: the target's modality (``t2t`` for ad-hoc runs).
        backend_kwargs: extra keyword arguments for ``load_text_backend``.
    """

    config: AuditConfig
    target: str | None = None
    model_version: str | None = None
    modality: str = "t2t"
    backend_kwargs: dict = field(default_factory=dict)
    family: str = "biasdora"


def config_for_target(config: AuditConfig | VisionConfig, target: AuditTarget) -> AuditConfig | VisionConfig:
    """``config`` with a registry target's model and probe settings: the one place a registry
    target becomes run configuration.

    :class:`AuditConfig` (a t2t target's T2T probe): model, backend, endpoint and every probe
    setting; the audit id is the deterministic one.

    :class:`VisionConfig` (a t2i or i2t target): its ``t2i_*`` / ``i2t_*`` fields: backend,
    model, endpoint, probe settings (:meth:`AuditTarget.probe_settings`: default both T2I
    settings / the 4 subjective description prompts), ``probe.batch_size`` when listed. t2i
    also: descriptors, descriptors per dimension, and ``probe.runs`` images per descriptor and
    setting (the VAE, steps and API image options stay the run config's). i2t also:
    temperature and top_p (which images: the run config's).

    Raises:
        ValueError: a vision config for a t2t target (it has no vision model).
    """
    if isinstance(config, VisionConfig):
        return _vision_config_for_target(config, target)
    p = target.probe
    return config.model_copy(
        update={
            "model": target.model,
            "backend": target.backend,
            "base_url": target.base_url,
            "settings": list(p.settings),
            "runs": p.runs,
            "letters": p.letters,
            "descriptor_source": p.descriptor_source,
            "descriptors": list(p.descriptors),
            "per_dimension": p.per_dimension,
            "prompt_style": p.prompt_style,
            "batch_size": p.batch_size,
            "temperature": p.temperature,
            "top_p": p.top_p,
            "audit_id": None,
        }
    )


def _vision_config_for_target(config: VisionConfig, target: AuditTarget) -> VisionConfig:
    if target.modality not in ("t2i", "i2t"):
        raise ValueError(f"target {target.name!r} is {target.modality}: no vision model to configure")
    p, m = target.probe, target.modality
    update = {f"{m}_backend": target.backend, f"{m}_model": target.model, f"{m}_base_url": target.base_url,
              f"{m}_settings": target.probe_settings()}
    if "batch_size" in p.model_fields_set:
        update[f"{m}_batch_size"] = p.batch_size
    if m == "t2i":
        update.update(descriptors=list(p.descriptors), per_dimension=p.per_dimension, images_per_descriptor=p.runs)
    else:
        update.update(i2t_temperature=p.temperature, i2t_top_p=p.top_p)
    return config.model_copy(update=update)


def resolve_audit_run(context: dg.AssetExecutionContext, config: AuditConfig) -> AuditRun:
    """The audit a T2T run performs.

    Partitioned run: reads the registry (``config.registry`` or the default), finds the
    partition's target and checks that its current version is the partition's version
    (an old version's model is gone, so it cannot be generated again; its landed rows stay).

    Raises:
        ingestion.registry.RegistryError: invalid registry. KeyError: unknown target.
        VersionError: the version cannot be read, or is no longer the target's current one.
    """
    found = target_of_run(context, config.registry, require_current=True)  # the one shared code path
    if found is None:
        return AuditRun(config)
    target, version = found.target, found.model_version
    kwargs = (
        {"api_key_env": target.api_key_env, "timeout": target.timeout, "concurrency": target.concurrency}
        if target.backend == "openai" else {}
    )
    return AuditRun(config_for_target(config, target), target.name, version, target.modality, kwargs, target.family)


def with_model_version(backend, model_version: str):
    """A shallow copy of ``backend`` reporting ``model_version`` (the registry's version)."""
    pinned = copy.copy(backend)
    pinned.model_version = model_version
    return pinned


#: The ``dora audit`` flags whose value is a registry target's own model, backend and endpoint.
TARGET_MODEL_FLAGS: dict[str, str] = {"--model": "model", "--backend": "backend", "--base-url": "base_url"}


def family_op_configs(target: AuditTarget, families: Sequence) -> dict:
    """Op name -> Config of the target's probe family (not BiasDora's: :func:`config_for_target`
    configures that one in the run): ``options``, the target's model / backend / base_url on the
    fields the family's ``--model`` / ``--backend`` / ``--base-url`` flags set, ``enabled`` and no
    progress bar; every other family's ops disabled.

    An option is named as its flag without ``--`` and the family's prefix (``instances`` for
    ``--modscan-instances``) or as the Config field (``instances_per_scenario``), and its value
    is checked by that flag's own argparse type (range, choices, letters, URLs:
    ``orchestration/options.py: option_values``), then by the Config.

    Args:
        families: every :class:`~orchestration.family.ProbeFamily` (``orchestration.families.FAMILIES``,
            passed in: the family records import this module through their assets).

    Raises:
        TargetConfigError: (a ``ValueError``) an unknown family, an unknown option, or a value
            the flag or the field refuses (one line naming the target and the option).
    """
    from pydantic import ValidationError

    from ingestion.errors import TargetConfigError
    from orchestration.options import option_values

    own = next((f for f in families if f.name == target.family), None)
    if own is None:
        raise TargetConfigError(f"target {target.name!r}: unknown probe family {target.family!r}; families: "
                                f"{', '.join(f.name for f in families)}")
    if own.name == "biasdora":
        return {}
    ops: dict = {}
    for family in families:
        for op, cls in family.configs.items():
            if family.name == "biasdora" or op in ops:
                continue
            if family is not own:
                if "enabled" in cls.model_fields:
                    ops[op] = cls(enabled=False)
                continue
            values = {field: getattr(target, attr) for flag in own.flags if flag.name in TARGET_MODEL_FLAGS
                      for c, field in flag.targets if c is cls for attr in [TARGET_MODEL_FLAGS[flag.name]]}
            values.update(option_values(own, cls, target.options, f"target {target.name!r}"))
            values.update({k: v for k, v in (("enabled", True), ("progress", False)) if k in cls.model_fields})
            try:
                ops[op] = cls(**values)
            except ValidationError as exc:
                err = exc.errors()[0]
                raise TargetConfigError(f"target {target.name!r}: option {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    return ops


def run_config_for_target(target: AuditTarget, families: Sequence, registry: str | None = None) -> dg.RunConfig:
    """The run config of one registry target's partition run: the registry path on the T2T
    op (every asset finds the target through it) and, for a target of another family, that
    family's ops (:func:`family_op_configs`).

    Raises:
        TargetConfigError: as :func:`family_op_configs`.
    """
    registry = registry or str(default_registry_path())
    ops = {T2T_OP: AuditConfig(registry=registry, progress=False)}
    ops.update(family_op_configs(target, families))
    return dg.RunConfig(ops=ops)


def audit_run_request(key: str, target: AuditTarget, version: str, *, trigger: str, families: Sequence,
                      run_key: str | None = None, registry: str | None = None) -> dg.RunRequest:
    """The run request of one partition: the whole audit job, configured for the target's
    family (:func:`run_config_for_target`); its audits extend the same family's earlier audits
    of the model (the change-test marts pair them by model, ordered by time). It runs on the
    executor of ``$DORA_EXECUTOR`` when set (:func:`orchestration.cluster.scheduled_execution_config`:
    ``celery`` runs scheduled re-audits on the cluster's workers)."""
    from orchestration.cluster import scheduled_execution_config

    run_config = run_config_for_target(target, families, registry)
    execution = scheduled_execution_config()
    if execution:
        run_config = dg.RunConfig(ops=run_config.ops, execution=execution)
    return dg.RunRequest(
        run_key=run_key or key,
        partition_key=key,
        run_config=run_config,
        tags={TAG_TARGET: target.name, TAG_MODEL: tag_value(target.model), TAG_MODEL_VERSION: tag_value(version),
              TAG_TRIGGER: trigger, TAG_FAMILY: target.family},
    )


def family_skip_reason(context, family: str, registry: str | None = None) -> str | None:
    """Why a family's asset does nothing in this run: a registry partition of another
    family's target (``None`` for an ad-hoc run or a partition of this family's target)."""
    run = target_of_run(context, registry)
    if run is not None and run.target.family != family:
        return f"partition {run.partition_key} audits registry target {run.target.name!r} of family {run.target.family!r}"
    return None


def current_versions(registry, log) -> tuple[dict[str, tuple[AuditTarget, str]], list[str]]:
    """Resolve every target's current version (each logged with the source it was read from);
    unreadable ones are logged and reported.

    Returns:
        ({target name: (target, version)}, [error messages]).
    """
    found: dict[str, tuple[AuditTarget, str]] = {}
    errors: list[str] = []
    for target in registry.targets:
        try:
            version, source = resolve_version_with_source(target)
        except VersionError as exc:
            errors.append(str(exc))
            log.error(f"dora: cannot read the version of target {target.name!r}: {exc}")
            continue
        found[target.name] = (target, version)
        log.info(f"dora: target {target.name!r} is at version {version} ({source})")
    return found, errors


def add_target_partition(instance: dg.DagsterInstance, name: str, registry_path: str | None = None) -> tuple[str, str, str]:
    """Register the partition of target ``name``'s current version (for ``dora audit --target``).

    Returns:
        (partition key, absolute registry path to put in the run config, one line saying where
        the version was read from: :func:`models_inference.model_ref.resolve_version_with_source`).

    Raises:
        RegistryError, KeyError (unknown target), VersionError (version unreadable).
    """
    from pathlib import Path

    from ingestion.registry import partition_key
    from orchestration.defs.audits.partitions import audit_partitions

    path = Path(registry_path).expanduser().resolve() if registry_path else default_registry_path()
    target = load_registry(path).target(name)
    version, source = resolve_version_with_source(target)
    key = partition_key(target.name, version)
    if not instance.has_dynamic_partition(audit_partitions.name, key):
        instance.add_dynamic_partitions(audit_partitions.name, [key])
    return key, str(path), source


def adhoc_tags(families: list[str], *, trigger: str = "cli") -> dict[str, str]:
    """The launch tags of an ad-hoc audit whose model is not known before it runs (families that
    name their models with flags of their own, ``--modscan-model``): target, trigger, families;
    the audit log step adds the models and versions that landed."""
    return {TAG_TARGET: AD_HOC, TAG_TRIGGER: trigger, TAG_FAMILY: ",".join(families)}


def adhoc_run(instance: dg.DagsterInstance, model: str, backend: str, families: list[str], *,
              trigger: str = "cli") -> tuple[str | None, dict[str, str]]:
    """The partition and run tags of an ad-hoc audit of ``model`` (``dora audit`` without
    ``--target``; the session's shared test audit runs it too, so both look alike in the UI).

    Registers the dynamic partition ``adhoc:<model>@<version>`` of the audit partitions (the
    Partitions tab of ``landing/t2t_completions`` then lists it), with
    the version of :func:`models_inference.model_ref.model_version` (hashed once per process).

    Args:
        instance: the Dagster instance the run goes to.
        model, backend: the audited model (``--model``, ``--backend``).
        families: the probe families the run selects (``dora/family``).
        trigger: ``dora/trigger``.

    Returns:
        (partition key, or ``None`` when the model's version cannot be read here, e.g. the
        embedded default is not installed: the run then fails with that message itself, or
        does not need the model; {tag: value} for :data:`RUN_TAGS` but the audit id).
    """
    from ingestion.errors import DoraError
    from models_inference.model_ref import model_version
    from orchestration.defs.audits.partitions import audit_partitions

    tags = {**adhoc_tags(families, trigger=trigger), TAG_MODEL: tag_value(model)}
    try:
        version = model_version(model, backend=backend)
    except DoraError:
        return None, tags
    tags[TAG_MODEL_VERSION] = tag_value(version)
    key = adhoc_partition_key(model, version)
    if not instance.has_dynamic_partition(audit_partitions.name, key):
        instance.add_dynamic_partitions(audit_partitions.name, [key])
    return key, tags


def target_run_tags(partition: str, registry: str, families: list[str], *, trigger: str = "cli") -> dict[str, str]:
    """The run tags (:data:`RUN_TAGS` but the audit id) of ``dora audit --target`` for the
    partition ``<target>@<version>`` of the registry file ``registry``.

    Raises:
        ValueError: a partition key that is not ``<target>@<version>``.
        ingestion.registry.RegistryError, KeyError: as :func:`ingestion.registry.load_registry` / ``target``.
    """
    name, version = parse_partition_key(partition)
    target = load_registry(registry).target(name)
    return {TAG_TARGET: name, TAG_MODEL: tag_value(target.model), TAG_MODEL_VERSION: tag_value(version),
            TAG_TRIGGER: trigger, TAG_FAMILY: ",".join(families)}


# ----------------------------------------------------------------------------- which target a run audits
# One code path for every asset of a partitioned run (T2T probe, T2I / I2T probes, scorers).

#: Run tag holding a partitioned run's key (Dagster sets it on every partitioned run).
PARTITION_TAG = "dagster/partition"


@dataclass
class RunTarget:
    """The registry target a partitioned run audits.

    Attributes:
        target: the registry entry (modality, backend, model, probe settings, scorers).
        model_version: the version the partition pins (``<target>@<version>``).
        partition_key: the run's partition key.
        registry: the registry file it was read from (absolute path).
    """

    target: AuditTarget
    model_version: str
    partition_key: str
    registry: str


def run_partition_key(context) -> str | None:
    """The partition key of the run ``context`` executes in, or ``None`` for an ad-hoc run.

    Read from the run's ``dagster/partition`` tag, so the unpartitioned assets of a
    partitioned ``dora_audit`` run (vision probes, scorers) see it as the T2T probe does;
    falls back to the context's own key (e.g. ``build_asset_context(partition_key=...)``).
    """
    key = context.run.tags.get(PARTITION_TAG) if context.run is not None else None
    if key:
        return key
    return context.partition_key if context.has_partition_key else None


def run_registry_path(context, registry: str | None = None) -> str | None:
    """The registry file of a run: ``registry`` (an asset's own config field) if given, else
    the T2T op's ``registry`` in the run config (``dora audit --target``, the sensor and the
    schedule put it there), else ``None``, i.e. :func:`ingestion.registry.default_registry_path`."""
    if registry:
        return registry
    ops = ((context.run.run_config or {}) if context.run is not None else {}).get("ops") or {}
    return ((ops.get(T2T_OP) or {}).get("config") or {}).get("registry")


def check_current_version(target: AuditTarget, version: str) -> None:
    """Raise unless ``version`` is the target's current version (only that one can be generated).

    Raises:
        VersionError: the version cannot be read, or the registry now resolves another one
            (the landed rows of the old version stay in the warehouse).
    """
    current = resolve_version(target)
    if current != version:
        raise VersionError(
            f"partition '{target.name}@{version}' asks for version {version!r} of target {target.name!r}, but "
            f"the registry now resolves it to {current!r}: only the current version can be generated (the "
            f"landed rows of {version!r} stay in the warehouse); materialise partition {target.name}@{current} instead"
        )


def target_of_run(context, registry: str | None = None, *, require_current: bool = False) -> RunTarget | None:
    """Which registry target (and version) the run of ``context`` audits; ``None`` when ad hoc
    (no partition, or an ``adhoc:`` one).

    Args:
        context: an asset execution context of any asset of the run.
        registry: the asset's own ``registry`` config field (see :func:`run_registry_path`).
        require_current: also check that the partition's version is the target's current one
            (assets that generate; scorers read landed rows of any version).

    Raises:
        ValueError: a partition key that is not ``<target>@<version>``.
        ingestion.registry.RegistryError: invalid registry. KeyError: unknown target.
        VersionError: ``require_current`` and the version is unreadable or not current.
    """
    key = run_partition_key(context)
    if key is None or is_adhoc_partition(key):  # an ad-hoc audit's partition: its run config says all
        return None
    name, version = parse_partition_key(key)
    path = run_registry_path(context, registry)
    target = load_registry(path).target(name)
    if require_current:
        check_current_version(target, version)
    resolved = str(Path(path).expanduser().resolve()) if path else str(default_registry_path())
    return RunTarget(target, version, key, resolved)


def partition_audit_ids(target: str, model_version: str) -> list[str]:
    """The audits of one partition: ids of the audits whose landed events (``landing/audits``,
    the source of ``stg_audits`` / ``dim_audits``) carry this registry target and model version.

    Returns:
        Sorted audit ids (empty when the partition has not landed anything yet).
    """
    from ingestion.landing import landing_dir, read_landing

    landing_dir("audits")  # the glob must exist before the first audit lands
    table = read_landing("audits", columns=["audit_id"], filters={"target": target, "model_version": model_version})
    return sorted(set(table.column("audit_id").to_pylist()))


def probe_metadata(summary, backend, target: str | None, statuses_key: str, **extra) -> dict:
    """The materialisation metadata every probe asset reports: audit, target, model, version,
    rows planned / already landed / generated, and the landed rows by status (under
    ``statuses_key``: ``parse_status``, ``image_status``, ...), plus ``extra``."""
    return {
        "status": "finished",
        "audit_id": summary.audit_id,
        "target": target or "(ad hoc)",
        "model_id": backend.model_id,
        "model_version": backend.model_version,
        "rows_planned": summary.planned,
        "rows_already_landed": summary.already_landed,
        "rows_generated": summary.generated,
        statuses_key: dg.MetadataValue.json(dict(summary.statuses)),
        **extra,
    }
