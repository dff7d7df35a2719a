"""BiasDora's side of a registry target: its ``probe`` settings as run config, and which target
(version, skip) a T2T run audits.

The shared translation (``orchestration/defs/audits/runs.py: target_ops``) puts the target's
model on the fields of :data:`TARGET_MODELS` (the T2T probe's for a ``t2t`` target, the T2I /
I2T probe's for a ``t2i`` / ``i2t`` one) and its ``options.biasdora`` through BiasDora's flags;
:func:`configure_target` then adds what only BiasDora reads: the ``probe`` block, mapped onto
the fields of the target's modality (each setting checked by the flag of the field it sets),
and the probes the target's modality does not run turned off (a ``t2t`` target draws and
describes no image; a ``t2i`` / ``i2t`` target generates no T2T completion). The scorers read
the target's ``scorers`` / ``judges`` in their run (``scoring/assets.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestration.defs.biasdora.config import AuditConfig, VisionConfig

#: Where a registry target's model goes, per modality (``ProbeFamily.target_models``): the T2T
#: probe's model, backend, endpoint and API client limits; the T2I / I2T probe's model, backend
#: and endpoint.
TARGET_MODELS = {
    "t2t": {
        "model": (AuditConfig, "model"),
        "backend": (AuditConfig, "backend"),
        "base_url": (AuditConfig, "base_url"),
        "timeout": (AuditConfig, "api_timeout"),
        "concurrency": (AuditConfig, "api_concurrency"),
    },
    "t2i": {"model": (VisionConfig, "t2i_model"), "backend": (VisionConfig, "t2i_backend"), "base_url": (VisionConfig, "t2i_base_url")},
    "i2t": {"model": (VisionConfig, "i2t_model"), "backend": (VisionConfig, "i2t_backend"), "base_url": (VisionConfig, "i2t_base_url")},
}

#: The target's own fields BiasDora reads (``ProbeFamily.target_fields``), declared with their
#: types in ``ingestion/biasdora/target_fields.py`` (``checks``, the older spelling of the
#: collapse ratios, is read by ``legacy_thresholds``).
TARGET_FIELDS = ("probe", "scorers", "judges")

#: ``probe`` setting -> the run-config field it sets, per modality. A t2t target's settings are
#: the T2T probe's fields of the same name; a t2i target's ``runs`` are images per descriptor and
#: setting; an i2t target's ``temperature`` / ``top_p`` are the describer's.
T2T_PROBE_FIELDS = (
    "settings",
    "runs",
    "letters",
    "descriptor_source",
    "descriptors",
    "per_dimension",
    "prompt_style",
    "batch_size",
    "temperature",
    "top_p",
)
VISION_PROBE_FIELDS = {
    "t2i": {
        "settings": "t2i_settings",
        "batch_size": "t2i_batch_size",
        "descriptors": "descriptors",
        "per_dimension": "per_dimension",
        "runs": "images_per_descriptor",
    },
    "i2t": {"settings": "i2t_settings", "batch_size": "i2t_batch_size", "temperature": "i2t_temperature", "top_p": "i2t_top_p"},
}


def configure_target(target, values: dict, given: dict, flags) -> list[str]:
    """BiasDora's rules for a registry target's partition, in place on ``values`` ({Config
    class: {field: value}}, the target's model and ``options.biasdora`` already set).

    ``t2t``: every ``probe`` setting (listed or its default: the quick audit) on the T2T probe's
    field, the deterministic audit id, no T2I / I2T model. ``t2i`` / ``i2t``: the probe settings
    of :data:`VISION_PROBE_FIELDS` (``settings`` default: the modality's,
    ``ingestion.biasdora.target_fields.probe_settings``; ``batch_size`` when listed), the T2T probe off. Each setting
    the target lists is checked by the flag of the field it sets (``--runs``, ``--letters``,
    ``--images-per-descriptor``, ...): ``flags``, BiasDora's flags.

    Returns:
        One line per problem: ``probe.runs (--runs): 100000 is out of range: expected 1..1000``,
        or a ``probe`` setting and an option setting the same field.
    """
    from ingestion.biasdora.target_fields import probe_settings
    from ingestion.errors import TargetConfigError
    from orchestration.options import option_value

    probe, modality = target.probe, target.modality
    listed = probe.model_fields_set
    if modality == "t2t":
        cls, fields = AuditConfig, {name: name for name in T2T_PROBE_FIELDS}
        settings = {name: getattr(probe, name) for name in fields}
    else:
        cls, fields = VisionConfig, VISION_PROBE_FIELDS[modality]
        settings = {name: getattr(probe, name) for name in fields if name != "batch_size" or name in listed}
        settings["settings"] = probe_settings(target)
    problems = []
    for name, value in settings.items():
        field_name = fields[name]
        if (cls, field_name) in given:  # an option names it: it wins over a default, not over a listed setting
            if name in listed:
                problems.append(f"probe.{name} and option {given[(cls, field_name)]} (options.biasdora) both set {field_name}; give one")
            continue
        flag = next((f for f in flags for c, n in f.targets if c is cls and n == field_name), None)
        if flag is not None and name in listed:
            try:
                option_value(flag, value, f"probe.{name}")
            except TargetConfigError as exc:
                problems.append(str(exc))
                continue
        values.setdefault(cls, {})[field_name] = list(value) if isinstance(value, list) else value
    if modality == "t2t":
        values[AuditConfig]["audit_id"] = None
        values.setdefault(VisionConfig, {}).update(t2i_model=None, i2t_model=None)
    else:
        values.setdefault(AuditConfig, {})["enabled"] = False
    return problems


@dataclass
class AuditRun:
    """What the T2T probe of one run does.

    Attributes:
        config: the T2T probe's run config (a registry partition's: built from the target when
            the run was requested, ``orchestration/defs/audits/runs.py: target_ops``).
        target: registry target name, or ``None`` for an ad-hoc run.
        model_version: the version the partition pins (overrides the backend's own), or None.
        modality: the target's modality (``t2t`` for ad-hoc runs).
        backend_kwargs: extra keyword arguments for ``load_text_backend`` (the target's API key
            variable).
        skip: why the T2T probe generates nothing in this run (another family's or another
            modality's target, turned off), or ``None``.
    """

    config: AuditConfig
    target: str | None = None
    model_version: str | None = None
    modality: str = "t2t"
    backend_kwargs: dict = field(default_factory=dict)
    skip: str | None = None


def resolve_audit_run(context, config: AuditConfig) -> AuditRun:
    """The audit a T2T run performs.

    Partitioned run: the partition's target (``target_of_run``); unless the T2T probe skips it,
    its current version must be the partition's (an old version's model is gone, so it cannot be
    generated again; its landed rows stay).

    Raises:
        ingestion.registry.RegistryError: invalid registry. KeyError: unknown target.
        VersionError: the version cannot be read, or is no longer the target's current one.
    """
    from orchestration.defs.audits.runs import check_current_version, skip_reason_of, target_of_run

    found = target_of_run(context, config.registry)  # the one shared code path
    skip = skip_reason_of(context, found, "biasdora")
    if found is None:
        return AuditRun(config, skip=None if config.enabled else "the T2T probe is turned off (enabled: false)")
    target = found.target
    if skip is None and target.modality != "t2t":
        skip = f"partition {found.partition_key} audits a {target.modality} target: no text model to probe"
    if skip is None and not config.enabled:
        skip = "the T2T probe is turned off (enabled: false)"
    if skip is None:
        check_current_version(target, found.model_version)
    kwargs = {"api_key_env": target.api_key_env} if config.backend == "openai" else {}
    return AuditRun(config, target.name, found.model_version, target.modality, kwargs, skip)
