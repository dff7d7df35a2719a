"""The family seam: what a probe family tells the rest of dora, in one record.

A probe family (BiasDora, counterfactual, ModSCAN, VLStereoSet, ...) has five code homes:
its landing contract ``ingestion/contracts/<family>.py``, ``models_inference/probes/<family>/``,
``orchestration/defs/<family>/``, its dbt models in ``dbt_project/models/<layer>/<family>/``
(``<layer>``: ``staging``, ``intermediate``, ``marts``) and ``analytics/<family>*.py``. Its Dagster home declares one :class:`ProbeFamily`
(``orchestration/defs/<family>/family.py``) and :data:`orchestration.families.FAMILIES` lists
it; every entry point iterates that tuple:
the Dagster definitions (assets, checks), ``dora audit`` (flags, run config, ``--family``
selection, dry-run plan, summary), a registry target's run config (where the target's model
goes, its options, the family's own rules: :attr:`ProbeFamily.target_models`,
:attr:`ProbeFamily.configure_target`), ``dora diff --family``, ``dora report`` and
``dora families``. Nothing else names a family. What it writes is not listed in the record
but read from its homes: its landing tables from its contract
(:attr:`ProbeFamily.landing_tables`), its marts from its marts folder (:attr:`ProbeFamily.marts`).

Flags are :class:`Flag` rows over the family's Config fields: a flag's type, default, help
(``description``), choices and range (pydantic ``ge`` / ``gt`` / ``le`` / ``lt``) all come
from the field, so a default is stated once (``orchestration/cli/flags.py`` builds the
parser from them).

This module imports no Dagster and no family, so the family modules can import it.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Flag:
    """One ``dora audit`` flag: the (Config class, field) pairs it sets and its spelling.

    Attributes:
        targets: where the value goes; the first pair gives type, default, help and range.
        prefix: the family's flag prefix (``"cf-"``): the flag is ``--<prefix><field>``
            (``--<prefix>no-<field>`` for a bool field that defaults to True).
        name: the flag when it is not derived (``--faces``); a name another family already
            declared (``--model``) reuses that flag's value.
        aliases: further spellings (``--vlstereoset-images`` for ``--images``).
        deprecated: old spellings kept for one release, read from the one table of them
            (``orchestration/deprecation.py: RENAMED_FLAGS``): hidden from ``--help``, each says
            once on stderr which name to use; a registry option spelled the old way is read too.
        choices: allowed values of a closed field (from :mod:`ingestion.vocabulary` or the
            family's prompts); for a ``list`` field, the allowed items.
        validator: an argparse ``type`` for values a range cannot say (letters, URLs, ids);
            replaces the range check derived from the field.
        convert: parsed value -> field value (``0`` -> ``None``), after list splitting.
        repeat: the flag may be given several times (``action="append"``) for a list field.
        dest: the ``argparse`` attribute (default: from the flag's name).
        what: what one item is called in error messages (default: from the field's name).
        path: the value names an input on disk that must exist before Dagster starts:
            ``"file"``, ``"folder"`` or ``"file_or_folder"`` (``family_problem`` in
            ``orchestration/cli/flags.py`` refuses a missing path, a folder for a file, a file
            for a folder, a FIFO).
        local_model: the value names a model that may be local; checked like ``--model``
            (``local_model_problem``) when it runs on a local backend: the ``argparse`` attribute of
            its backend flag (checked when that backend is ``transformers`` / ``diffusers``), or
            ``"always"`` for a model that is always loaded locally.
    """

    targets: tuple[tuple[type, str], ...]
    prefix: str = ""
    name: str | None = None
    aliases: tuple[str, ...] = ()
    deprecated: tuple[str, ...] = ()
    choices: tuple[str, ...] | None = None
    validator: Callable[[str], Any] | None = None
    convert: Callable[[Any], Any] | None = None
    repeat: bool = False
    dest: str | None = None
    what: str | None = None
    path: str | None = None
    local_model: str | None = None

    def __post_init__(self):
        if not self.deprecated:
            from orchestration.deprecation import old_names

            object.__setattr__(self, "deprecated", old_names(self.flag))

    @classmethod
    def of(cls, config: type, *fields: str, **kw) -> tuple[Flag, ...]:
        """One flag per field of ``config`` (same keyword arguments for each)."""
        return tuple(cls(((config, f),), **kw) for f in fields)

    @property
    def field(self):
        """The pydantic ``FieldInfo`` of the first target."""
        config, name = self.targets[0]
        return config.model_fields[name]

    @property
    def field_name(self) -> str:
        return self.targets[0][1]

    @property
    def kind(self) -> type:
        """``bool``, ``int``, ``float``, ``str`` or ``list`` (``Optional`` unwrapped)."""
        ann = self.field.annotation
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if typing.get_origin(ann) in (typing.Union, types.UnionType) and len(args) == 1:
            ann = args[0]
        if typing.get_origin(ann) is typing.Literal:
            return type(typing.get_args(ann)[0])
        return list if typing.get_origin(ann) is list else ann

    @property
    def literal_choices(self) -> tuple | None:
        """The values of a ``Literal[...]`` annotation (else ``None``)."""
        ann = self.field.annotation
        for a in (ann, *typing.get_args(ann)):
            if typing.get_origin(a) is typing.Literal:
                return typing.get_args(a)
        return None

    @property
    def negated(self) -> bool:
        """A switch that turns a True default off (``--no-progress``)."""
        return self.kind is bool and self.field.default is True

    @property
    def flag(self) -> str:
        if self.name:
            return self.name
        dashed = self.field_name.replace("_", "-")
        return f"--{self.prefix}no-{dashed}" if self.negated else f"--{self.prefix}{dashed}"

    @property
    def arg_dest(self) -> str:
        """The ``argparse`` attribute: a switch's field name (with the prefix), else the flag's name."""
        if self.dest:
            return self.dest
        if self.kind is bool:
            return (self.prefix + self.field_name).replace("-", "_")
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def bounds(self) -> dict[str, float]:
        """The field's pydantic range constraints: any of ``ge``, ``gt``, ``le``, ``lt``."""
        out = {}
        for item in self.field.metadata:
            for key in ("ge", "gt", "le", "lt"):
                value = getattr(item, key, None)
                if value is not None:
                    out[key] = value
        return out


@dataclass(frozen=True)
class EstimatedStep:
    """One step of a family's audit in ``dora audit --dry-run``'s time estimate
    (``orchestration/estimates.py`` adds them up).

    Attributes:
        step: what runs (``T2T generation``, ``model load``, ``dbt models``).
        seconds: its wall time on the 2-core machine of BENCHMARKS.md, or ``None`` when no rate
            is measured for it (a server's, an API's or another model's).
        basis: ``measured`` (a rate or time a script of ``benchmarks/`` printed), ``assumed``
            (a figure carried over from another setting, e.g. a share of significant
            associations) or ``unknown`` (``seconds`` is ``None``).
        source: where the figure comes from, one line (``3.7 responses/s, bench_counterfactual``).
    """

    step: str
    seconds: float | None
    basis: str
    source: str

    def __post_init__(self):
        if self.basis not in ("measured", "assumed", "unknown"):
            raise ValueError(f"EstimatedStep {self.step!r}: basis must be measured, assumed or unknown, not {self.basis!r}")
        if (self.seconds is None) != (self.basis == "unknown"):
            raise ValueError(f"EstimatedStep {self.step!r}: an unknown step has no seconds, a measured or assumed one has them")


@dataclass(frozen=True)
class BatchStep:
    """One step of a family that can send its requests through the OpenAI Batch API
    (``--api-batch``; ``orchestration/cli/batch.py``: ``dora audit --dry-run``, ``dora batch
    export`` / ``import``).

    Attributes:
        step: the step's kind, recorded in its ledger (``meta.record.step``) so ``dora batch
            import`` can rebuild it (``t2t``, ``counterfactual_text``).
        title: its name in the dry run's table (``BiasDora T2T``).
        op: the op whose Config (``ProbeFamily.configs[op]``) holds its settings (``api_batch``,
            ``backend``, ``api_batch_max_requests``, ``enabled``).
        work: (Config, ``model_version=``, ``target=``, ``api_key_env=``) ->
            ``models_inference.backends.batch_requests.BatchWork`` (loads no model, reads no key), or
            ``None`` when its requests are known only once earlier steps ran (BiasDora's judge):
            the dry run then shows ``?`` and ``unknown``, and ``dora batch`` cannot export it.
        unknown: (Config) -> the dry run's one-line note for a step without ``work``.
        backend_flag: the flag that sets the step's ``backend`` (the dry run's note when it is
            not ``openai``).
    """

    step: str
    title: str
    op: str
    work: Callable[..., Any] | None = None
    unknown: Callable[[Any], str] | None = None
    backend_flag: str = "--backend"


@dataclass(frozen=True)
class ProbeFamily:
    """Everything dora's entry points need to know about one probe family.

    Attributes:
        name: ``dora audit --family NAME``, ``dora diff --family NAME``.
        title: one line (paper and seed) for ``dora families`` and ``--help``.
        paper: the paper it implements and its seed (``BiasDora (seed 004)``); with
            ``modalities``, ``measures`` and ``default_audit``, a row of the family tables of
            ``README.md`` and ``docs/families/README.md`` (``orchestration/cli/family_tables.py``).
        modalities: what it probes, in the paper's words (``T2T word completion, T2I images``).
        measures: what it measures (Markdown, one sentence).
        default_audit: whether and how plain ``dora audit`` runs it (``on (T2T; ...)``).
        errors: its own input error types (``DoraError`` subclasses outside ``ingestion/errors.py``,
            in ``models_inference/probes/<name>/errors.py``): ``dora audit`` prints their one-line
            message when a step raises one (``orchestration/cli/audit.py``).
        docs_page: its page (default ``docs/families/<name>.md``); set only by a family kept
            outside the repository.
        description: the family's ``--help-family`` paragraph.
        group: its Dagster asset group (``--family`` selects it); ``groups`` adds more.
        configs: op name -> the Dagster ``Config`` class of that op's run config.
        flags: its ``dora audit`` flags (:class:`Flag`).
        flag_prefix: how its flags start (``--cf-``), shown by ``dora families``.
        assets: () -> its asset definitions (imported on call: asset modules load backends).
        checks: () -> its asset checks.
        marts_folder: the folder of its marts' YAML (default ``dbt_project/models/marts/<name>``,
            the project being laid out layer first); its marts are the models the YAML files
            under it declare (:attr:`marts`). Set only by a family whose marts are documented
            outside the dbt project (a family kept outside the repository).
        audit_assets: the keys (``landing/<table>``) of its assets whose probes land audit events
            (``models_inference.resumable``): the parents of the shared audit log ``landing/audits``.
        extra_groups: further asset groups that belong to it (dbt folders).
        adjust: (values by Config class) -> None, in place: cross-field run-config rules
            (presets, ``none`` meaning off) after the flags are read.
        summary: (Dagster run result, parsed args) -> the text ``dora audit`` prints.
        plan: (op name -> Config, ``model_version=`` the registry partition's version or None) -> the
            ``dora audit --dry-run`` text; loads no model. A plan that names an audit id pins the
            version on the audited model as the partition's run does.
        change_test: the ``analytics.family_diff.FamilyChangeTest`` of ``dora diff --family``
            (``None``: the family has its own ``diff``, see ``diff``).
        diff: (args, change tests of every family) -> exit code, for a family whose ``dora diff`` is
            not a change-test mart (the change tests name the family of an audit given to the wrong one).
        diff_help: with ``diff``: its line of ``dora diff --help`` (metric; change test).
        report_section: (audit id or None, output folder) -> HTML of its ``dora report`` section.
        report_page: (output folder, audit id or None, ``top=``, ``sections=``, ``notes=``,
            ``drift=``: every family's drift results, or None) -> a page of its own; raises ``ReportPageSkipped`` (a ``LookupError``) with the reason when it
            writes none (marts not built, no audit of the family), and appends to ``notes`` one
            line per page it links nothing to (``dora report`` prints both).
        check: (op name -> Config) -> the first problem of the family's settings taken together
            (one line), or ``None``; run by ``dora audit`` before Dagster starts (exit 2), when
            the family is selected. Cheap: it loads no model and no large file.
        target_models: where a registry target's model goes when the family audits it: the
            target's ``modality`` (``t2t`` / ``t2i`` / ``i2t``) -> {target attribute (``model``,
            ``backend``, ``base_url``, ``timeout``, ``concurrency``): (Config class, field)}. A
            target runs only families that take its modality; one that lists no ``families`` runs
            every family that does (``orchestration/defs/audits/runs.py: target_families``).
        target_fields: the registry target's own fields the family reads besides its model,
            version and ``options`` (BiasDora: ``probe``, ``scorers``, ``judges``); a target that
            sets one must run a family that reads it.
        configure_target: (target, values by Config class, given) -> [problems], in place: the
            family's own rules for a registry target, after its model and options are set
            (``given``: (Config class, field) -> the option that set it, for conflicts). Each
            problem is one line naming the target's field (``probe.runs (--runs): ...``).
        plan_before_run: ``dora audit --target`` plans the family before a run to refuse a plan
            over the row cap (False: its flags' ranges bound its plan and planning is slow).
        reparse: (parsed ``dora reparse`` args, ``$DORA_HOME``) -> exit code: re-read the family's
            landed raw outputs with its current parser (``dora reparse --family NAME``), or ``None``.
        estimate: (op name -> Config, ``model_version=``) -> its steps' times
            (:class:`EstimatedStep`: model load, generation, scoring, dbt; each measured, assumed
            or unknown) for ``dora audit --dry-run``'s estimate; loads no model, returns ``[]``
            when its probes are off. ``orchestration/estimates.py`` adds every selected family's
            steps to the shared ones (start-up, the Dagster run).
        batch_steps: its steps that can run through the Batch API (:class:`BatchStep`), in
            dry-run order; those with ``work`` are what ``dora batch export --family NAME`` writes.
        drift: its drift checks and their mart (``analytics.drift.FamilyDrift``): each becomes a
            Dagster asset check on that mart (``orchestration/defs/audits/checks.py``), judged in
            ``dora audit``, ``dora models list`` and the version pages; a registry target sets
            their collapse ratios under ``options: {<name>: {checks: {<check>: <ratio>}}}``.
        legacy_thresholds: (registry target) -> {check: ratio} read from a registry field older
            than ``options.<name>.checks`` (kept readable for one release), or ``None``.
    """

    name: str
    title: str
    description: str
    group: str
    configs: Mapping[str, type]
    flags: tuple[Flag, ...]
    flag_prefix: str
    assets: Callable[[], Sequence]
    marts_folder: Path | None = None
    paper: str = ""
    modalities: str = ""
    measures: str = ""
    default_audit: str = ""
    docs_page: Path | None = None
    errors: tuple[type, ...] = ()
    checks: Callable[[], Sequence] = lambda: ()
    audit_assets: tuple[str, ...] = ()
    extra_groups: tuple[str, ...] = ()
    adjust: Callable[[dict], None] | None = None
    summary: Callable[[Any, Any], str] | None = None
    plan: Callable[..., str] | None = None
    estimate: Callable[..., Sequence[EstimatedStep]] | None = None
    change_test: Any = None
    diff: Callable[[Any, list], int] | None = None
    diff_help: str | None = None
    report_section: Callable[[str | None, Path], str] | None = None
    report_page: Callable[[Path, str | None], Path | None] | None = None
    check: Callable[[Mapping[str, Any]], str | None] | None = None
    target_models: Mapping[str, Mapping[str, tuple[type, str]]] = field(default_factory=dict)
    target_fields: tuple[str, ...] = ()
    configure_target: Callable[[Any, dict, dict], list[str]] | None = None
    plan_before_run: bool = True
    reparse: Callable[[Any, Path], int] | None = None
    batch_steps: tuple[BatchStep, ...] = ()
    drift: Any = None
    legacy_thresholds: Callable[[Any], Mapping[str, float]] | None = None
    config_classes: tuple[type, ...] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "config_classes", tuple(dict.fromkeys(self.configs.values())))

    @property
    def groups(self) -> tuple[str, ...]:
        """Every Dagster asset group of the family (its own first)."""
        return (self.group, *self.extra_groups)

    @property
    def page(self) -> Path:
        """Its documentation page: :attr:`docs_page`, else ``docs/families/<name>.md``."""
        return self.docs_page or Path(__file__).resolve().parents[1] / "docs" / "families" / f"{self.name}.md"

    @property
    def landing_tables(self) -> tuple[str, ...]:
        """The landing tables its contract declares (``FAMILY = name`` in
        ``ingestion/contracts/<name>.py``, or in a module registered with
        ``ingestion.contracts.register_contract``), in the contract's order; the shared tables
        (``audits``, ``input_quarantine``) are no family's."""
        from ingestion.contracts import family_tables

        return family_tables(self.name)

    @property
    def duckdb_functions(self) -> tuple[str, ...]:
        """The modules of its own DuckDB functions, as its landing contract names them
        (``DUCKDB_FUNCTIONS``), registered on dbt's warehouse connection by
        ``analytics/duckdb_plugin.py``."""
        from ingestion.contracts import duckdb_function_modules

        return duckdb_function_modules(self.name)

    @property
    def marts(self) -> tuple[str, ...]:
        """Its public relations: the models declared by the YAML files under
        :attr:`marts_folder` (default ``dbt_project/models/marts/<name>/``), sorted by name (the
        marts holding every family's rows, such as ``dim_audits``, are in
        ``dbt_project/models/marts/audits/``, no family's).

        Raises:
            yaml.YAMLError: a YAML file there does not parse (the dbt project is broken)."""
        if self.marts_folder is not None:
            return models_in(self.marts_folder)
        from orchestration.instance import DBT_PROJECT_DIR

        return models_in(DBT_PROJECT_DIR / "models" / "marts" / self.name)


def text_model_target(config: type, model: str = "model", backend: str = "backend", base_url: str = "base_url") -> dict:
    """:attr:`ProbeFamily.target_models` of a family that audits a registry target's text model:
    ``{"t2t": {"model": (config, model), "backend": (config, backend), "base_url": (config, base_url)}}``
    (the field names of ``config`` that take the target's model, backend and server)."""
    return {"t2t": {"model": (config, model), "backend": (config, backend), "base_url": (config, base_url)}}


def declared_family(module: str, **fields) -> ProbeFamily:
    """The :class:`ProbeFamily` of a family's ``family.py`` that declares its parts under the
    shared names, called at the end of that module (``FAMILY = declared_family(__name__, ...)``).

    Read from the module: ``NAME`` (the record's name and, unless ``group=`` is given, its
    Dagster group), ``P`` (the flag prefix: its flags are ``--<P><field>``), ``FLAGS``, and,
    when the module defines them, ``check``, ``summary``, ``plan``, ``estimate``,
    ``CHANGE_TEST`` and ``DRIFT``. Its assets are ``orchestration.defs.<NAME>.assets.<NAME>_assets``, imported when
    Dagster asks for them (asset modules load backends). ``fields`` give the rest of the
    record (``title``, ``description``, ``configs``, ...) and override any of the above.

    Raises:
        KeyError: the module is not imported or lacks ``NAME``, ``P`` or ``FLAGS``.
    """
    import importlib
    import sys

    names = vars(sys.modules[module])
    name = names["NAME"]

    def assets():
        return getattr(importlib.import_module(f"orchestration.defs.{name}.assets"), f"{name}_assets")

    optional = {"check": "check", "summary": "summary", "plan": "plan", "estimate": "estimate", "change_test": "CHANGE_TEST", "drift": "DRIFT"}
    declared = {key: names[attr] for key, attr in optional.items() if attr in names}
    return ProbeFamily(
        **{
            "name": name,
            "group": name,
            "flags": names["FLAGS"],
            "flag_prefix": "--" + names["P"],
            "assets": assets,
            **declared,
            **fields,
        }
    )


@functools.cache
def models_in(folder: Path) -> tuple[str, ...]:
    """The names of the dbt models declared (``models:``) by the YAML files under ``folder``
    (recursively), sorted; empty when there is no such folder. Read once per process."""
    import yaml

    names = []
    for path in sorted(folder.rglob("*.yml")):
        names += [model["name"] for model in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("models") or []]
    return tuple(sorted(names))


def materializations(result, table: str) -> list[dict]:
    """The metadata ({name: value}) of every materialisation of ``landing/<table>`` in a run result."""
    out = []
    for mat in result.get_asset_materialization_events():
        if mat.materialization.asset_key.path == ["landing", table]:
            out.append({k: v.value for k, v in mat.materialization.metadata.items()})
    return out
