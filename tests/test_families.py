"""The family seam: a fifth family (``tests/toy_family``, a fixture never shipped), all of it in
its own folder (contract, Config, asset, record, dbt models, page, registry entry), is plugged in
through the loader of the shipped families (``$DORA_FAMILIES``, ``orchestration/families.py``)
and picked up by ``dora audit --family``, ``dora audit --dry-run``, ``dora diff --family``,
``dora families``, a registry target, the generated docs tables and the Dagster definitions; it
declares its landing contract in its own module (no edit of ``ingestion.contracts.SCHEMAS``). A
family's landing tables and marts are read from its contract and its marts folder, never listed
by hand, and no shared file names the toy."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from orchestration import families as fam
from orchestration.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: The toy's one line in the families list: the module of its record, named in $DORA_FAMILIES.
TOY_MODULE = "tests.toy_family.family"


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The families loaded again with ``$DORA_FAMILIES`` naming the toy (importing its record
    registers its landing contract), and loaded without it afterwards; a fresh DORA_HOME."""
    from orchestration.definitions import defs

    # the shipped definitions resolve lazily (and cache what they resolved): resolve them before
    # FAMILIES holds the toy, so no later test sees a toy asset in them
    defs.resolve_asset_graph()
    monkeypatch.setenv(fam.FAMILY_MODULES_ENV, TOY_MODULE)
    importlib.reload(fam)
    assert [f.name for f in fam.FAMILIES][-1] == "toy"
    monkeypatch.setenv("DORA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home" / "dagster"))
    yield tmp_path / "home"
    monkeypatch.delenv(fam.FAMILY_MODULES_ENV)
    importlib.reload(fam)


def test_families_command_lists_every_family(toy, capsys):
    assert main(["families"]) == 0
    out = capsys.readouterr().out
    for family in fam.FAMILIES:
        assert f"{family.name}: {family.title}" in out and f"Dagster group: {family.groups[0]}" in out
    assert "landing tables: toy_rows" in out and "marts: fct_toy_change_tests, fct_toy_rows" in out
    assert [f.name for f in fam.FAMILIES] == [*(n for n in fam.family_names() if n != "toy"), "toy"]
    # the marts no hand list had (they were missing from `dora families`)
    for mart in ("agg_association_counts", "agg_completions_by_audit", "agg_scores_by_audit", "fct_association_dimensions", "agg_modscan_ensemble"):
        assert mart in out, mart
    assert main(["families", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "family,group,flags,landing_tables,marts,title"


@pytest.mark.slow  # the BiasDora plan extracts CrowS-Pairs descriptors with spaCy (~6 s)
def test_dry_run_plans_every_family(toy, capsys):
    assert main(["audit", "--dry-run", "--toy-rows", "4"]) == 0
    out = capsys.readouterr().out
    for name in ("t2t ", "counterfactual:", "modscan:", "vlstereoset:", "toy: 4 rows of 'alpha' on toy-model"):
        assert name in out, out
    # its record's estimate joins the others' in the one total the CLI adds up
    assert "  toy: 4 toy rows: 0 min 02 s (assumed: half a second a row)" in out
    assert main(["audit", "--dry-run", "--family", "toy"]) == 0
    plan, estimate = capsys.readouterr().out.strip().split("\n\n")
    assert plan == "toy: 3 rows of 'alpha' on toy-model"
    assert [ln.split(":")[0] for ln in estimate.splitlines()[1:-2]] == ["  every audit", "  toy"]
    assert "  toy: 3 toy rows: 0 min 02 s (assumed: half a second a row)" in estimate


def test_toy_flags_come_from_its_config(toy, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["audit", "--toy-rows", "51"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == ("dora audit: error: argument --toy-rows: 51 is out of range: expected 1..50")
    with pytest.raises(SystemExit):
        main(["audit", "--help-family", "toy"])
    out = capsys.readouterr().out
    assert "--toy-rows TOY_ROWS" in out and "rows to land (default: 3)" in out and "{alpha,beta,gamma}" in out


def test_the_cli_reference_generator_gives_the_toy_its_table(toy):
    """docs/cli.md's generator (orchestration/cli/reference.py) reads the families: the toy's
    flags get their own table, whose marker a page would need."""
    from orchestration.cli.reference import CLI_PAGE, flag_tables, missing_tables

    tables = flag_tables()
    assert "| `--toy-rows` | 3 | rows to land |" in tables["audit / toy"]
    assert "audit / toy" in missing_tables(CLI_PAGE.read_text(encoding="utf-8"), tables)


def test_diff_family_reads_the_toys_change_test(toy, capsys):
    toy.mkdir(parents=True)
    with duckdb.connect(str(toy / "warehouse.duckdb")) as con:
        con.execute(
            "create table fct_toy_rows as select * from (values ('a1', 'toy-model', 'v1', timestamp '2026-01-01'),"
            " ('a2', 'toy-model', 'v2', timestamp '2026-01-02')) t(audit_id, model_id, model_version, landed_at)"
        )
        con.execute(
            "create table fct_toy_change_tests as select 'a1' as from_audit_id, 'a2' as to_audit_id, 'alpha' as word,"
            " 3 as value_before, 9 as value_after, 0.01 as change_p, 0.02 as change_q,"
            " true as is_significant_change, 'increased' as change_type"
        )
    assert main(["diff", "toy-model", "--family", "toy"]) == 0
    out = capsys.readouterr().out
    assert "dora diff --family toy toy-model: a1 (version v1) -> a2 (version v2)" in out
    assert "1 of 1 compared rows changed significantly" in out and "increased 1" in out


def test_audit_probe_toy_runs_only_the_toy_group(toy, monkeypatch, capsys):
    """In process: the Dagster definitions are rebuilt from FAMILIES; --family toy runs the toy's
    asset only (no model, no dbt), and the toy's summary is printed."""
    import orchestration.definitions as definitions
    from ingestion.landing import read_landing

    defs = definitions.build_definitions()
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert "landing/toy_rows" in keys and "landing/t2t_completions" in keys
    monkeypatch.setattr(definitions, "defs", defs)
    assert main(["audit", "--family", "toy", "--toy-rows", "4", "--toy-word", "beta", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "toy: audit toy-toy-model-beta: 4 rows landed" in out
    assert "counterfactual" not in out and "modscan" not in out.lower()
    rows = read_landing("toy_rows").to_pylist()
    assert sorted(r["item"] for r in rows) == [0, 1, 2, 3] and {r["word"] for r in rows} == {"beta"}
    # its own dbt models over what it landed (plus item 0 landed again, later, by a resumed audit)
    from tests.helpers.dbt_jinja import render_model

    models = ROOT / "tests" / "toy_family" / "models"
    with duckdb.connect() as con:
        landed = read_landing("toy_rows")  # noqa: F841 - read by the SQL below
        con.execute("create table toy_rows as select * from landed")
        con.execute(
            "insert into toy_rows select audit_id, model_id, model_version, item, 'gamma', status, landed_at + interval 1 second from toy_rows where item = 0"
        )
        con.execute("create view stg_toy_rows as " + render_model(models / "staging" / "stg_toy_rows.sql", source=lambda s, t: t))
        staged = con.execute("select item, word from stg_toy_rows order by item").fetchall()
        assert staged == [(0, "gamma"), (1, "beta"), (2, "beta"), (3, "beta")]
        mart = con.execute(render_model(models / "marts" / "fct_toy_rows.sql")).fetchall()
        first = min(r["landed_at"] for r in rows)
    assert mart == [("toy-toy-model-beta", "toy-model", "v1", 4, 2, first)]
    assert not (toy / "landing" / "t2t_completions").exists() or not any((toy / "landing" / "t2t_completions").rglob("*.parquet"))
    # the toy names its model with a flag of its own (--toy-model): the run carries the launch's
    # dora tags but is no partition of the --model model (`adhoc:<model>@<version>` is for those)
    from dagster import DagsterInstance

    with DagsterInstance.get() as instance:
        (run,) = instance.get_runs(limit=1)
        assert instance.get_dynamic_partitions("audit_versions") == []
    assert "dagster/partition" not in run.tags and "dora/model" not in run.tags
    assert {k: run.tags[k] for k in ("dora/family", "dora/target", "dora/trigger")} == {
        "dora/family": "toy",
        "dora/target": "(ad hoc)",
        "dora/trigger": "cli",
    }


def test_every_record_matches_the_dagster_definitions():
    """Each family's op names are ops of the audit job, its group holds assets, and each of its
    landing tables is a ``landing/<table>`` asset of its group."""
    import dagster as dg

    from orchestration.definitions import defs
    from orchestration.instance import AUDIT_JOB

    job = defs.resolve_job_def(AUDIT_JOB)
    ops = {node.name for node in job.graph.node_defs}
    graph = defs.resolve_asset_graph()
    groups = {graph.get(k).group_name for k in graph.get_all_asset_keys()}
    for family in fam.FAMILIES:
        assert set(family.configs) <= ops, family.name
        assert family.group in groups, family.name
        assert {graph.get(dg.AssetKey(["landing", t])).group_name for t in family.landing_tables} == {family.group}


def test_the_toy_contract_is_registered_from_its_own_module(toy):
    """The toy's table joins SCHEMAS from tests/toy_family/contract.py, owned by the toy; a second
    registration changes nothing; a contract that redeclares a table or misnames one is refused
    with one line naming the module."""
    import types

    import pyarrow as pa

    from ingestion.contracts import SCHEMAS, TABLE_FAMILIES, family_tables, register_contract
    from ingestion.errors import LandingContractError
    from tests.toy_family import contract

    assert SCHEMAS["toy_rows"] is contract.SCHEMAS["toy_rows"] and SCHEMAS["toy_rows"].names == [
        "audit_id",
        "model_id",
        "model_version",
        "item",
        "word",
        "status",
        "landed_at",
    ]
    assert TABLE_FAMILIES["toy_rows"] == "toy" and family_tables("toy") == ("toy_rows",)
    assert register_contract("tests.toy_family.contract") == ("toy_rows",)
    before = dict(SCHEMAS)
    clash = types.ModuleType("other.contract")
    clash.FAMILY, clash.SCHEMAS = "other", {"other_rows": pa.schema([("a", pa.string())]), "audits": pa.schema([])}
    with pytest.raises(LandingContractError) as exc:
        register_contract(clash)
    assert str(exc.value) == "landing contract other.contract: table 'audits' is already declared by ingestion.contracts.shared"
    clash.SCHEMAS = {"Other Rows": pa.schema([("a", pa.string())])}
    with pytest.raises(LandingContractError, match=r"table name 'Other Rows' is not a lower-case identifier"):
        register_contract(clash)
    assert SCHEMAS == before and "other_rows" not in TABLE_FAMILIES  # nothing of a refused contract is merged


def test_each_family_owns_its_contract_sources_and_marts():
    """Every landing table is declared by one contract module: a family's (``FAMILY``) or the
    shared one; a family's tables are exactly the dbt sources of its folder
    (``models/staging/<family>/_<family>__sources.yml``), the shared ones read by dbt are in
    ``models/_landing__sources.yml``; a family's marts are the marts of its folder as
    ``dora tables`` reads them (analytics/catalog.py), and every mart belongs to one family."""
    import importlib
    from pathlib import Path

    import yaml

    from analytics.catalog import relations
    from ingestion.contracts import SCHEMAS, TABLE_FAMILIES, family_tables

    models = Path(__file__).resolve().parents[1] / "dbt_project" / "models"

    def sources(path: Path) -> list[str]:
        return [t["name"] for s in yaml.safe_load(path.read_text())["sources"] for t in s["tables"]]

    # every module of ingestion/contracts/ is merged, with no line naming it
    folder = models.parents[1] / "ingestion" / "contracts"
    contracts = [importlib.import_module(f"ingestion.contracts.{p.stem}") for p in folder.glob("*.py") if p.stem != "__init__"]
    assert {c.FAMILY for c in contracts} == {*fam.family_names(), None}
    shipped = {t: c.FAMILY for c in contracts for t in c.SCHEMAS}
    assert shipped == {t: owner for t, owner in TABLE_FAMILIES.items() if owner != "toy"} and set(TABLE_FAMILIES) == set(SCHEMAS)
    assert family_tables(None) == ("audits", "input_quarantine")
    assert sources(models / "_landing__sources.yml") == ["audits"]  # no dbt model reads input_quarantine
    for family in fam.FAMILIES:
        assert family.landing_tables, family.name
        assert sources(models / "staging" / family.name / f"_{family.name}__sources.yml") == list(family.landing_tables)
        assert set(family.marts) == {r.name for r in relations() if r.family == family.name and r.layer == "marts"}
    marts = [m for f in fam.FAMILIES for m in f.marts]
    # every mart is one family's but those every family shares, in the shared folder (no family's)
    assert sorted(marts) == sorted(r.name for r in relations() if r.layer == "marts" and not r.shared) and len(marts) == len(set(marts))
    assert {(r.family, r.name) for r in relations() if r.layer == "marts" and r.shared} == {("audits", "dim_audits")}


def test_the_toy_touches_only_its_own_homes_and_the_families_list():
    """Every file of the repository that names the toy family is in its own folder, or is this
    test (which plugs it in: its module in $DORA_FAMILIES) or ARCHITECTURE.md (which counts what
    it needed): no shared code, SQL, docs table or registry lists it."""
    tracked = (
        subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    word = re.compile(r"\btoy(?:_\w+)?\b|_toy_", re.I)
    naming = set()
    for name in filter(None, tracked):
        path = ROOT / name
        if path.is_file() and path.suffix in {".py", ".sql", ".yml", ".yaml", ".md", ".toml", ".cfg", ".sh", ".txt", ".json"}:
            if word.search(path.read_text(encoding="utf-8", errors="replace")):
                naming.add(name)
    homes = {n for n in naming if n.startswith("tests/toy_family/")}
    assert homes >= {"tests/toy_family/family.py", "tests/toy_family/contract.py", "tests/toy_family/toy.md", "tests/toy_family/registry.yaml"}
    assert naming - homes == {"tests/test_families.py", "ARCHITECTURE.md"}


@pytest.mark.slow  # two `dora families` processes (Dagster imported in each)
def test_a_family_is_plugged_in_by_naming_its_module(monkeypatch):
    """In a fresh process, $DORA_FAMILIES adds the toy to what `dora families` lists (after the
    shipped families); a module that does not exist, or that declares no family, is one line."""
    env = {**os.environ, fam.FAMILY_MODULES_ENV: TOY_MODULE, "DORA_HOME": "/nonexistent-dora-home"}

    def dora(*argv, **extra):
        return subprocess.run(
            [sys.executable, "-m", "orchestration.cli", *argv], capture_output=True, text=True, env={**env, **extra}, cwd=ROOT, timeout=600
        )

    listed = dora("families", "--format", "csv")
    assert listed.returncode == 0, listed.stderr
    names = [line.split(",")[0] for line in listed.stdout.splitlines()[1:] if line]
    assert names == [*fam.family_names(), "toy"]
    bad = dora("families", **{fam.FAMILY_MODULES_ENV: "tests.no_such_family"})
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert bad.stderr.strip().splitlines()[-1].startswith("dora: probe family module tests.no_such_family cannot be imported")
    from ingestion.errors import FamilyModuleError

    with pytest.raises(FamilyModuleError, match=r"^probe family module tests.toy_family.config declares no FAMILY"):
        fam.load_families(("tests.toy_family.config",))
    import types

    from tests.toy_family.family import FAMILY

    again = types.ModuleType("toy_again")
    again.FAMILY = FAMILY
    monkeypatch.setitem(sys.modules, "toy_again", again)
    with pytest.raises(FamilyModuleError, match=r"toy_again: family 'toy' is already declared by tests.toy_family.family$"):
        fam.load_families((TOY_MODULE, "toy_again"))


def test_the_toys_registry_entry_runs_the_toy(toy):
    """Its registry entry (tests/toy_family/registry.yaml) runs the toy only, with its options
    read as its flags; the family tables and the page headings include it like any family."""
    from ingestion.registry import load_registry
    from orchestration.cli.family_tables import FAMILY_PAGES, family_tables
    from orchestration.defs.audits.runs import target_families, target_ops

    registry = load_registry(ROOT / "tests" / "toy_family" / "registry.yaml")
    target = registry.target("toy-target")
    assert [f.name for f in target_families(target, fam.FAMILIES)] == ["toy"]
    ops = target_ops(target, fam.FAMILIES)
    config = ops["toy_rows"]
    assert (config.enabled, config.model, config.rows, config.word) == (True, "toy-model", 2, "gamma")
    assert not any(getattr(c, "enabled", False) for op, c in ops.items() if op != "toy_rows")
    readme = family_tables(FAMILY_PAGES[0])["overview"]
    assert readme.splitlines()[-1] == (
        "| `toy` | none (a test fixture) | a fake text model | nothing: each audit lands a few items carrying one word "
        "| on when plugged in (`$DORA_FAMILIES`) | [toy](tests/toy_family/toy.md) |"
    )
