"""The dbt project's one convention, checked on the files without running dbt: layer first,
``models/{staging,intermediate,marts}/<family>/`` (and ``models/{staging,marts}/audits/`` for the
models every family shares), one YAML per model with its columns described,
a unit test for every int/fct/agg/dim model, materialisation stated once per layer, one landing
source whose location is written once, and the significance level as a dbt var."""

import re
from pathlib import Path

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[1] / "dbt_project"
MODELS = PROJECT / "models"
#: the folder of the models every family shares (the audit log and the audit dimension): not a family
SHARED_FOLDER = "audits"
LAYERS = {"staging", "intermediate", "marts"}
#: the folders under the layers: every family's and the shared one
FOLDERS = {p.name for layer in LAYERS for p in (MODELS / layer).iterdir() if p.is_dir()}
#: the families: every model folder but the shared one
FAMILIES = FOLDERS - {SHARED_FOLDER}
#: what each layer builds (dbt_project.yml); a model states another materialisation only
#: when it genuinely differs (incremental, or the two documented exceptions)
FOLDER_MATERIALIZED = {"staging": "view", "intermediate": "view", "marts": "table"}


def model_files() -> list[Path]:
    return sorted(MODELS.rglob("*.sql"))


def yaml_of(sql: Path) -> dict:
    path = sql.with_suffix(".yml")
    assert path.is_file(), f"{sql.relative_to(PROJECT)} has no YAML beside it"
    return yaml.safe_load(path.read_text())


def sql_code(text: str) -> str:
    """The SQL without Jinja comments and ``--`` comments."""
    return re.sub(r"--[^\n]*", "", re.sub(r"\{#.*?#\}", "", text, flags=re.S))


def test_every_model_sits_in_a_layer_family_folder():
    assert {"biasdora", "counterfactual", "modscan", "vlstereoset"} <= FAMILIES and SHARED_FOLDER in FOLDERS
    assert {p.name for p in MODELS.iterdir() if p.is_dir()} == LAYERS
    for sql in model_files():
        parts = sql.relative_to(MODELS).parts
        assert len(parts) == 3, f"{sql.relative_to(PROJECT)}: not models/<layer>/<family>/<model>.sql"
        layer, family = parts[:2]
        assert layer in LAYERS and family in FOLDERS, f"{sql.relative_to(PROJECT)}: not models/<layer>/<family>/"
        # the shared folder holds exactly the models holding every family's rows (`dora tables`)
        shared = bool(((yaml_of(sql)["models"][0].get("config") or {}).get("meta") or {}).get("shared"))
        assert shared == (family == SHARED_FOLDER), f"{sql.stem}: meta shared is {shared} in models/{layer}/{family}/"
        prefix = sql.stem.split("_")[0]
        expected = {"staging": {"stg"}, "intermediate": {"int"}, "marts": {"fct", "agg", "dim"}}[layer]
        assert prefix in expected, f"{sql.name} in {layer}/"


@pytest.mark.parametrize("sql", model_files(), ids=lambda p: p.stem)
def test_one_yaml_per_model_with_columns_described_and_unit_tested(sql):
    doc = yaml_of(sql)
    models = doc.get("models") or []
    assert [m["name"] for m in models] == [sql.stem], f"{sql.stem}.yml must describe exactly its model"
    model = models[0]
    assert model.get("description"), f"{sql.stem}: no description"
    columns = model.get("columns") or []
    assert columns and all(c.get("description") for c in columns), f"{sql.stem}: a column without description"
    tested = [t for t in doc.get("unit_tests") or [] if t["model"] == sql.stem]
    assert all(t["model"] == sql.stem for t in doc.get("unit_tests") or []), f"{sql.stem}.yml tests another model"
    if sql.stem.split("_")[0] in ("int", "fct", "agg", "dim"):
        assert tested, f"{sql.stem}: no unit test"


def test_materialization_is_stated_once_per_layer():
    """dbt_project.yml configures the layers only, so a family (a new one included) adds no line there."""
    config = yaml.safe_load((PROJECT / "dbt_project.yml").read_text())["models"]["dora"]
    assert {k for k in config if not k.startswith("+")} == LAYERS
    assert {layer: config[layer] for layer in LAYERS} == {layer: {"+materialized": m} for layer, m in FOLDER_MATERIALIZED.items()}


@pytest.mark.parametrize("sql", model_files(), ids=lambda p: p.stem)
def test_materialization_is_stated_only_where_it_differs(sql):
    layer = sql.relative_to(MODELS).parts[0]
    stated = re.findall(r"materialized\s*=\s*'(\w+)'", sql_code(sql.read_text()))
    stated += re.findall(r"materialized:\s*(\w+)", sql.with_suffix(".yml").read_text())
    assert FOLDER_MATERIALIZED[layer] not in stated, f"{sql.stem} restates its folder's materialization"


def test_one_landing_source_with_one_location():
    """One source, `landing`, split over a shared sources file and one per family in its staging
    folder (only staging reads it); its location is stated once, in dbt_project.yml, for every
    table whatever its file."""
    sources = [
        (path.relative_to(MODELS).as_posix(), source)
        for path in MODELS.rglob("*.yml")
        for source in (yaml.safe_load(path.read_text()) or {}).get("sources") or []
    ]
    assert {s["name"] for _, s in sources} == {"landing"}, "one source, `landing`"
    families = sorted(p.name for p in (MODELS / "staging").iterdir() if p.is_dir() and p.name != SHARED_FOLDER)
    assert sorted(path for path, _ in sources) == ["_landing__sources.yml", *(f"staging/{f}/_{f}__sources.yml" for f in families)]
    text = "\n".join(p.read_text() for p in MODELS.rglob("*.yml"))
    # a sources file's meta would reach its own tables only
    assert not re.search(r"^\s*(external_location|landing_root):", text, re.M) and "env_var" not in text
    meta = yaml.safe_load((PROJECT / "dbt_project.yml").read_text())["sources"]["dora"]["+meta"]
    assert meta["external_location"] == "read_parquet('{landing_root}/{name}/**/*.parquet', union_by_name = true)"
    # the location is read from the environment once: $DORA_LANDING_URL (object storage), else $DORA_HOME/landing
    project_lines = (PROJECT / "dbt_project.yml").read_text().splitlines()
    assert [line.split(":")[0].strip() for line in project_lines if "env_var" in line] == ["landing_root"]
    assert "env_var('DORA_LANDING_URL', '')" in meta["landing_root"] and "env_var('DORA_HOME')" in meta["landing_root"]
    for sql in model_files():
        sources_read = re.findall(r"source\('(\w+)'", sql.read_text())
        assert set(sources_read) <= {"landing"}, sql.name
        assert not sources_read or sql.relative_to(MODELS).parts[0] == "staging", f"{sql.stem}: only staging reads the source"


def test_significance_level_is_a_var():
    assert yaml.safe_load((PROJECT / "dbt_project.yml").read_text())["vars"]["significance_level"] == 0.05
    for path in [*model_files(), *sorted((PROJECT / "macros").glob("*.sql"))]:
        assert not re.search(r"<\s*0?\.05\b", sql_code(path.read_text())), f"{path.name}: alpha as a literal"


def test_model_rules_lists_each_broken_rule():
    """The project's data test (one query per model, tests/generic/model_rules.sql), rendered
    as dbt renders it: one failing row per broken rule with its count (NULLs per not-null
    column, repeated key values, rows breaking a row rule); a NULL breaks no row rule, and
    NULL key columns are one key (GROUP BY); a table keeping every rule returns no row."""
    import duckdb
    import jinja2

    body = (PROJECT / "tests" / "generic" / "model_rules.sql").read_text()
    env = jinja2.Environment(extensions=["jinja2.ext.do"])
    template = env.from_string(body.replace("{% test", "{% macro").replace("{% endtest %}", "{% endmacro %}")
                               + "{{ model_rules(model, not_null, unique, rules) }}")
    rules = ["q >= p", "p >= 0 and p <= 1", "modality in ('t2t', 'i2t')"]
    sql = template.render(model="t", not_null=["k", "modality"], unique=["k", "modality"], rules=rules)
    with duckdb.connect() as con:
        con.execute("create table t as select * from (values (1, 0.1, 0.2, 't2t'), (2, 0.5, 0.4, 'i2t'), (3, 1.5, 1.6, 't2i'),"
                    " (4, null, null, null), (5, null, null, null), (5, null, null, null)) v(k, p, q, modality)")
        assert sorted(con.execute(sql).fetchall()) == [
            (2, "not null: modality", 3), (3, "unique: k, modality", 1), (4, "q >= p", 1), (5, rules[1], 1), (6, rules[2], 1)]
        con.execute("delete from t where p >= 0.5 or p is null")
        assert con.execute(sql).fetchall() == []
        only_rules = template.render(model="t", not_null=None, unique=None, rules=rules)
        assert con.execute(only_rules).fetchall() == []


def test_data_rules_are_stated_once_per_model():
    """A model's not_null, unique_combination_of_columns, accepted_range, accepted_values (a
    literal list) and expression_is_true tests are gathered into its one ``model_rules`` test
    (each data test is a node of every build), naming only columns the model has. A column's own
    ``unique`` test (a one-column key, e.g. the target of a ``relationships`` test) stays."""
    for path in MODELS.rglob("*.yml"):
        for model in (yaml.safe_load(path.read_text()) or {}).get("models", []):
            columns = {c["name"] for c in model.get("columns", [])}
            tests = [*(model.get("data_tests") or []), *(t for c in model.get("columns", []) for t in c.get("data_tests") or [])]
            kinds = [next(iter(t)) if isinstance(t, dict) else t for t in tests]
            assert kinds.count("model_rules") <= 1, (path, model["name"])
            assert not {"not_null", "accepted_range", "expression_is_true", "not_null_columns",
                        "unique_combination_of_columns", "row_rules"} & set(kinds), (path, model["name"])
            for t in tests:
                if isinstance(t, dict) and "model_rules" in t:
                    arguments = t["model_rules"]["arguments"]
                    assert set(arguments) <= {"not_null", "unique", "rules"}, (path, model["name"])
                    assert set(arguments.get("not_null", [])) | set(arguments.get("unique", [])) <= columns, (path, model["name"])
            for t in tests:  # accepted_values stays only where its values are a dbt var (with a severity)
                if isinstance(t, dict) and "accepted_values" in t:
                    assert isinstance(t["accepted_values"]["arguments"]["values"], str), (path, model["name"])