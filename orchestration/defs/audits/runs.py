"""What a (partitioned) audit run audits: registry target -> the families it runs, their run
config, the version and the run tags.

One way a registry target becomes run configuration, when its run is requested (the sensor,
the schedule, ``dora audit --target``): :func:`target_ops`, through each family's record
(``ProbeFamily.target_models``: where the target's model goes; its ``options`` through the
family's flags; ``ProbeFamily.configure_target``: the family's own rules). A partition runs
exactly the target's families (:func:`target_families`); the other families' ops are turned
off and their assets, asked in the run (:func:`family_skip_reason`), skip it. Assets read the
target of their run (:func:`target_of_run`) only for its name, its pinned version and whether
they run. A run with an ad-hoc key (``adhoc:<model>@<version>``, :func:`adhoc_run`) or none is
an ad-hoc audit configured entirely by its run config.

Run tags (:data:`RUN_TAGS`): every audit run carries ``dora/target``, ``dora/model``,
``dora/model_version``, ``dora/trigger`` and ``dora/family`` from its launch (sensor, schedule,
``dora audit``), and ``dora/audit_id`` from the audit log asset at its end
(``orchestration/defs/audits/assets.py``), which also fills any of the others a launch did
not set (a run started from the UI). A registry partition's run also carries
``dora/registry``, the registry file its assets read the target from.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from ingestion.errors import VersionError
from ingestion.registry import (
    AuditTarget,
    adhoc_partition_key,
    default_registry_path,
    is_adhoc_partition,
    load_registry,
    parse_partition_key,
    partition_key,
)
from models_inference.model_ref import resolve_version, resolve_version_with_source

#: The run tags of an audit run (Dagster UI -> Runs; filter with ``tag:dora/family=modscan``).
TAG_AUDIT_ID = "dora/audit_id"  # the audits the run landed, comma-separated (set at the run's end)
TAG_FAMILY = "dora/family"  # probe families run, comma-separated
TAG_MODEL = "dora/model"  # the model audited (``--model`` / the target's model)
TAG_MODEL_VERSION = "dora/model_version"
TAG_TARGET = "dora/target"  # the registry target, or AD_HOC
TAG_TRIGGER = "dora/trigger"  # cli, sensor, schedule, or manual (launched from the UI / Python)
RUN_TAGS = (TAG_AUDIT_ID, TAG_FAMILY, TAG_MODEL, TAG_MODEL_VERSION, TAG_TARGET, TAG_TRIGGER)
#: The registry file (absolute path) a registry partition's run reads its target from.
TAG_REGISTRY = "dora/registry"
#: ``dora/target`` of an ad-hoc audit (no registry target).
AD_HOC = "(ad hoc)"
#: Run tag values are cut here (with "..."): a run of every family with many scorers lands a
#: dozen audit ids (~60 characters each), which must fit; a registry target's odd model name need not.
TAG_VALUE_LIMIT = 2000


def tag_value(value: str) -> str:
    """``value`` cut to :data:`TAG_VALUE_LIMIT` characters (ending ``...`` when cut)."""
    return value if len(value) <= TAG_VALUE_LIMIT else value[: TAG_VALUE_LIMIT - 3] + "..."


def with_model_version(backend, model_version: str):
    """A shallow copy of ``backend`` reporting ``model_version`` (the registry's version)."""
    pinned = copy.copy(backend)
    pinned.model_version = model_version
    return pinned


def target_families(target: AuditTarget, families: Sequence) -> list:
    """The probe families a target's partition runs, in the order of ``families``: those it lists,
    or, when it lists none, every family that audits a model of its modality
    (``ProbeFamily.target_models``).

    Args:
        families: every :class:`~orchestration.family.ProbeFamily` (``orchestration.families.FAMILIES``,
            passed in: the family records import this module through their assets).

    Raises:
        TargetConfigError: (a ``ValueError``) an unknown family, a listed family that audits no
            model of the target's modality, or none that does (one line naming the target).
    """
    from ingestion.errors import TargetConfigError

    if target.families is None:
        found = [f for f in families if target.modality in f.target_models]
        if not found:
            raise TargetConfigError(f"target {target.name!r}: no probe family audits a {target.modality} model")
        return found
    known = {f.name: f for f in families}
    problems = []
    unknown = [n for n in target.families if n not in known]
    if unknown:
        problems.append(f"unknown probe famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(map(repr, unknown))}; families: {', '.join(known)}")
    for name in target.families:
        if name in known and target.modality not in known[name].target_models:
            takes = ", ".join(known[name].target_models) or "none"
            problems.append(f"family {name} audits no {target.modality} model (its target models: {takes})")
    if problems:
        raise TargetConfigError(f"target {target.name!r}: " + "; ".join(problems))
    return [f for f in families if f.name in target.families]


def _set_by_file(target: AuditTarget, attr: str) -> bool:
    """Whether the registry file gives the target's field ``attr`` a value other than its default."""
    return target.given(attr)


def target_ops(target: AuditTarget, families: Sequence, *, registry: str | None = None, base: dict | None = None) -> dict:
    """Op name -> Config of a registry target's partition run: the one place a registry target
    becomes run configuration.

    For each family the target runs (:func:`target_families`): the family's Configs from
    ``base`` (the command line's, for ``dora audit --target``) or their defaults, then the
    target's model / backend / base_url / client limits on the fields of the family's
    ``target_models`` for the target's modality, then ``options.<family>`` as the family's
    flags (``orchestration/options.py: family_options``), then the family's own
    ``configure_target`` (BiasDora's ``probe`` settings); ``enabled``, and ``registry`` on every
    Config that has the field; no progress bars when ``base`` is ``None`` (a daemon's run). Every
    other family's Configs with an ``enabled`` field get ``enabled: false``.

    Args:
        families: every :class:`~orchestration.family.ProbeFamily` (``orchestration.families.FAMILIES``).
        registry: the registry file (absolute path) the run's assets read the target from.
        base: op name -> Config to start from (default: each Config's defaults).

    Raises:
        TargetConfigError: (a ``ValueError``) one line naming the target and every problem found,
            ``; ``-separated: unknown families or options, a value a flag or field refuses, an
            option setting the target's own model, a target field (``probe``) no family of the
            target reads.
    """
    from ingestion.errors import TargetConfigError

    own = target_families(target, families)
    names = [f.name for f in own]
    problems: list[str] = []
    for attr in dict.fromkeys(a for f in families for a in f.target_fields):
        if _set_by_file(target, attr) and not any(attr in f.target_fields for f in own):
            readers = ", ".join(f.name for f in families if attr in f.target_fields)
            problems.append(f"{attr}: read by family {readers}, which this target does not run (families: {', '.join(names)})")
    for name in target.options:
        if name not in names:
            problems.append(f"options.{name}: not a family this target runs (families: {', '.join(names)})")
    ops: dict = {}
    for family in families:
        start = {cls: dict(base[op].model_dump()) for op, cls in family.configs.items() if base is not None and op in base}
        if family.name in names:
            built, found = _family_configs(family, target, start, registry=registry, daemon=base is None)
            problems += found
        else:  # a family the target does not run: turned off where it can be (its assets skip the partition anyway)
            built = {cls: cls(**{**start.get(cls, {}), "enabled": False}) for cls in family.config_classes if "enabled" in cls.model_fields}
        ops.update({op: built[cls] for op, cls in family.configs.items() if cls in built})
    if problems:
        raise TargetConfigError(f"target {target.name!r}: " + "; ".join(dict.fromkeys(problems)))
    return ops


def _family_configs(family, target: AuditTarget, start: dict, *, registry: str | None, daemon: bool) -> tuple[dict, list[str]]:
    """{Config class: Config} of one family the target runs (see :func:`target_ops`), and the
    problems found (one line each)."""
    from pydantic import ValidationError

    from orchestration.options import family_options

    values = {cls: dict(start.get(cls, {})) for cls in family.config_classes}
    models = family.target_models[target.modality]  # where the target's model goes in this family
    own_fields = {where: attr for attr, where in models.items()}
    for attr, (cls, field_name) in models.items():
        values[cls][field_name] = getattr(target, attr)
    options, given, problems = family_options(family, target.options.get(family.name, {}))
    for (cls, field_name), option in given.items():
        if (cls, field_name) in own_fields:
            attr = own_fields[(cls, field_name)]
            problems.append(f"option {option} ({family.name}) sets the target's own {attr}: give it as the target's '{attr}'")
        else:
            values[cls][field_name] = options[cls][field_name]
    for cls, fields in values.items():
        for name, value in (("enabled", True), ("registry", registry), ("progress", False if daemon else None)):
            if name in cls.model_fields and value is not None:
                fields[name] = value
    if family.configure_target is not None:  # last: it may turn a probe of the family off
        problems += family.configure_target(target, values, given)
    built = {}
    for cls in family.config_classes:
        try:
            built[cls] = cls(**values[cls])
        except ValidationError as exc:  # a value no flag checks: the field's own validation, named
            for err in exc.errors():
                where = (cls, str(err["loc"][0])) if err["loc"] else None
                what = f"option {given[where]}" if where in given else own_fields.get(where) or ".".join(map(str, err["loc"])) or cls.__name__
                problems.append(f"{what}: {err['msg']}")
    return built, problems


def run_config_for_target(target: AuditTarget, families: Sequence, registry: str | None = None) -> dg.RunConfig:
    """The run config of one registry target's partition run (:func:`target_ops`, registry file
    default: :func:`ingestion.registry.default_registry_path`).

    Raises:
        TargetConfigError: as :func:`target_ops`.
    """
    return dg.RunConfig(ops=target_ops(target, families, registry=registry or str(default_registry_path())))


def target_tags(target: AuditTarget, version: str, families: Sequence[str], registry: str, *, trigger: str) -> dict[str, str]:
    """The launch tags of a registry target's partition run: :data:`RUN_TAGS` but the audit id,
    and :data:`TAG_REGISTRY`. ``families``: the names of the families the run runs."""
    return {
        TAG_TARGET: target.name,
        TAG_MODEL: tag_value(target.model),
        TAG_MODEL_VERSION: tag_value(version),
        TAG_TRIGGER: trigger,
        TAG_FAMILY: ",".join(families),
        TAG_REGISTRY: tag_value(registry),
    }


def audit_run_request(
    key: str, target: AuditTarget, version: str, *, trigger: str, families: Sequence, run_key: str | None = None, registry: str | None = None
) -> dg.RunRequest:
    """The run request of one partition: the whole audit job, configured for the target's
    families (:func:`target_ops`; the others turned off); each family's audits extend its earlier
    audits of the model (the change-test marts pair them by model, ordered by time). It runs on
    the executor of ``$DORA_EXECUTOR`` when set (:func:`orchestration.cluster.scheduled_execution_config`:
    ``celery`` runs scheduled re-audits on the cluster's workers).

    Raises:
        TargetConfigError: as :func:`target_ops`.
    """
    from orchestration.cluster import scheduled_execution_config

    registry = registry or str(default_registry_path())
    ops = target_ops(target, families, registry=registry)
    execution = scheduled_execution_config()
    run_config = dg.RunConfig(ops=ops, execution=execution) if execution else dg.RunConfig(ops=ops)
    names = [f.name for f in target_families(target, families)]
    return dg.RunRequest(
        run_key=run_key or key, partition_key=key, run_config=run_config, tags=target_tags(target, version, names, registry, trigger=trigger)
    )


def describe_targets(registry, families: Sequence) -> list[str]:
    """One line per registry target: ``<name>: <the families its partition runs>`` (or why the
    target cannot run), for the sensor's and the schedule's descriptions in the UI."""
    from ingestion.errors import TargetConfigError

    lines = []
    for target in registry.targets:
        try:
            lines.append(f"{target.name}: {', '.join(f.name for f in target_families(target, families))}")
        except TargetConfigError as exc:
            lines.append(f"{target.name}: refused ({str(exc).removeprefix(f'target {target.name!r}: ')})")
    return lines


def run_families(context, target: AuditTarget) -> list[str] | None:
    """The names of the families a registry partition's run runs: its :data:`TAG_FAMILY` tag (the
    sensor, the schedule and ``dora audit --target`` set it to the target's families), else the
    families the target lists; ``None`` when neither says (a run launched from the UI on a
    target that lists none: every family runs, as the run config says)."""
    tagged = context.run.tags.get(TAG_FAMILY) if context.run is not None else None
    if tagged:
        return [name for name in tagged.split(",") if name]
    return list(target.families) if target.families is not None else None


def skip_reason_of(context, run: "TargetRun | None", family: str) -> str | None:
    """Why ``family`` does nothing in the run of the registry target ``run`` (``None``: an ad-hoc
    run, or a partition whose run runs the family: :func:`run_families`)."""
    if run is None:
        return None
    names = run_families(context, run.target)
    if names is None or family in names:
        return None
    what = f"family {names[0]!r}" if len(names) == 1 else f"families {', '.join(map(repr, names))}"
    return f"partition {run.partition_key} audits registry target {run.target.name!r} of {what}"


def family_skip_reason(context, family: str, registry: str | None = None) -> str | None:
    """Why a family's asset does nothing in this run: a registry partition whose run does not run
    the family (``None`` for an ad-hoc run or a partition whose run does; :func:`run_families`).

    Raises:
        RegistryError, KeyError: as :func:`target_of_run`.
    """
    return skip_reason_of(context, target_of_run(context, registry), family)


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


def add_target_partition(instance: dg.DagsterInstance, target: AuditTarget) -> tuple[str, str, str]:
    """Register the partition of ``target``'s current version (for ``dora audit --target``).

    Returns:
        (partition key, the version, one line saying where the version was read from:
        :func:`models_inference.model_ref.resolve_version_with_source`).

    Raises:
        VersionError: the version cannot be read now.
    """
    from orchestration.defs.audits.partitions import audit_partitions

    version, source = resolve_version_with_source(target)
    key = partition_key(target.name, version)
    if not instance.has_dynamic_partition(audit_partitions.name, key):
        instance.add_dynamic_partitions(audit_partitions.name, [key])
    return key, version, source


def adhoc_tags(families: list[str], *, trigger: str = "cli") -> dict[str, str]:
    """The launch tags of an ad-hoc audit whose model is not known before it runs (families that
    name their models with flags of their own, ``--modscan-model``): target, trigger, families;
    the audit log step adds the models and versions that landed."""
    return {TAG_TARGET: AD_HOC, TAG_TRIGGER: trigger, TAG_FAMILY: ",".join(families)}


def adhoc_run(
    instance: dg.DagsterInstance, model: str, backend: str, families: list[str], *, trigger: str = "cli"
) -> tuple[str | None, dict[str, str]]:
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


# ----------------------------------------------------------------------------- which target a run audits
# One code path for every asset of a partitioned run (T2T probe, T2I / I2T probes, scorers).

#: Run tag holding a partitioned run's key (Dagster sets it on every partitioned run).
PARTITION_TAG = "dagster/partition"


@dataclass
class TargetRun:
    """A registry target's resolved run: what a partitioned Dagster run audits
    (:func:`target_of_run`), or what ``dora audit --target`` would run
    (``orchestration/cli/target.py: target_run``).

    Attributes:
        target: the registry entry (modality, backend, model, probe settings, scorers).
        registry: the registry file it was read from (absolute path).
        model_version: the version the partition pins (``<target>@<version>``); for ``dora
            audit --target``, read only by a dry run (None when it cannot be read now).
        partition_key: the Dagster run's partition key (None before the partition exists).
        families: (``dora audit --target``) the :class:`~orchestration.family.ProbeFamily` s
            it runs: the target's, narrowed by ``--family``.
        ops: (``dora audit --target``) op name -> Config of the Dagster run (the target's
            families configured, the others turned off where they can be, else as the command
            line left them: they skip the partition).
        version_read: (dry runs) how the version was read, or why it could not be, for the
            dry run's header.
    """

    target: AuditTarget
    registry: str
    model_version: str | None = None
    partition_key: str | None = None
    families: list = field(default_factory=list)
    ops: dict = field(default_factory=dict)
    version_read: str = ""

    @property
    def family_names(self) -> list[str]:
        return [f.name for f in self.families]


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
    """The registry file of a run: ``registry`` (an asset's own config field) if given, else the
    run's :data:`TAG_REGISTRY` tag (the sensor, the schedule and ``dora audit --target`` set it),
    else a ``registry`` in any op's run config (a run launched from the UI with one), else
    ``None``, i.e. :func:`ingestion.registry.default_registry_path`."""
    if registry:
        return registry
    if context.run is None:
        return None
    tagged = context.run.tags.get(TAG_REGISTRY)
    if tagged:
        return tagged
    ops = (context.run.run_config or {}).get("ops") or {}
    return next(
        (
            op["config"]["registry"]
            for op in ops.values()
            if isinstance(op, dict) and isinstance(op.get("config"), dict) and op["config"].get("registry")
        ),
        None,
    )


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


def target_of_run(context, registry: str | None = None, *, require_current: bool = False) -> TargetRun | None:
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
    return TargetRun(target, resolved, model_version=version, partition_key=key)


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
