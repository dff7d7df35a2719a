"""The dbt project's one convention, checked on the files without running dbt: layer first,
``models/{staging,intermediate,marts}/<family>/`` (and ``models/{staging,marts}/audits/`` for the
models every family shares), one YAML per model with its columns described,
a unit test for every int/fct/agg/dim model, materialisation stated once per layer, one landing
source whose location is written once, and the significance level as a dbt var; and two checked on
the parsed project (its cached manifest) and the files: each layer reads only downward, and every
model ends in ``select * from final`` (staging: ``select * from renamed``)."""

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
#: when it genuinely differs (incremental, or an exception whose reason its SQL states)
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


def test_a_familys_macros_live_in_its_own_folder():
    """A macro named after a family (``<family>_...``) sits in ``macros/<family>/``, and every
    folder of ``macros/`` is a family's: the shared macros are the files directly in ``macros/``."""
    from orchestration.families import family_names

    macros = PROJECT / "macros"
    assert {p.name for p in macros.iterdir() if p.is_dir()} <= set(family_names())
    for path in macros.rglob("*.sql"):
        for name in re.findall(r"\{% macro (\w+)\(", path.read_text()):
            owner = next((f for f in family_names() if name.startswith(f"{f}_")), None)
            assert path.parent == (macros / owner if owner else macros), f"macro {name} of {path.relative_to(PROJECT)}"


def test_every_model_sits_in_a_layer_family_folder():
    from orchestration.families import family_names

    assert set(family_names()) <= FAMILIES and SHARED_FOLDER in FOLDERS
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
    # a staging model that keeps one row per key (the latest landing, re-parse or score) holds
    # logic worth a test: which row wins a tie, and that the others are dropped
    if keeps_latest_row(sql):
        assert tested, f"{sql.stem}: keeps the latest row per key but has no unit test"


def keeps_latest_row(sql) -> bool:
    """Whether a model keeps one row per key: it calls the staging macros that do
    (``latest_per_key``, ``staged_association_scores``, dbt_project/macros/staging.sql) or
    numbers rows itself (``row_number()`` / ``qualify``)."""
    code = sql_code(sql.read_text()).lower()
    return bool(re.search(r"\b(latest_per_key|staged_association_scores)\(|\brow_number\(\)|\bqualify\b", code))


def test_the_staging_models_that_keep_the_latest_row_per_key_are_found():
    """The rule above sees them: every staging model of BiasDora's probes and scores keeps the
    latest row per key (a re-parse or a re-score appends rather than updates)."""
    latest = {sql.stem for sql in model_files() if keeps_latest_row(sql)}
    assert {"stg_t2t_completions", "stg_sentiment_scores", "stg_toxicity_scores", "stg_judge_ratings"} <= latest, latest
    assert "stg_descriptors" not in latest


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
    for path in [*model_files(), *sorted((PROJECT / "macros").rglob("*.sql"))]:
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
    template = env.from_string(
        body.replace("{% test", "{% macro").replace("{% endtest %}", "{% endmacro %}") + "{{ model_rules(model, not_null, unique, rules) }}"
    )
    rules = ["q >= p", "p >= 0 and p <= 1", "modality in ('t2t', 'i2t')"]
    sql = template.render(model="t", not_null=["k", "modality"], unique=["k", "modality"], rules=rules)
    with duckdb.connect() as con:
        con.execute(
            "create table t as select * from (values (1, 0.1, 0.2, 't2t'), (2, 0.5, 0.4, 'i2t'), (3, 1.5, 1.6, 't2i'),"
            " (4, null, null, null), (5, null, null, null), (5, null, null, null)) v(k, p, q, modality)"
        )
        assert sorted(con.execute(sql).fetchall()) == [
            (2, "not null: modality", 3),
            (3, "unique: k, modality", 1),
            (4, "q >= p", 1),
            (5, rules[1], 1),
            (6, rules[2], 1),
        ]
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
            assert not {"not_null", "accepted_range", "expression_is_true", "not_null_columns", "unique_combination_of_columns", "row_rules"} & set(
                kinds
            ), (path, model["name"])
            for t in tests:
                if isinstance(t, dict) and "model_rules" in t:
                    arguments = t["model_rules"]["arguments"]
                    assert set(arguments) <= {"not_null", "unique", "rules"}, (path, model["name"])
                    assert set(arguments.get("not_null", [])) | set(arguments.get("unique", [])) <= columns, (path, model["name"])
            for t in tests:  # accepted_values stays only where its values are a dbt var (with a severity)
                if isinstance(t, dict) and "accepted_values" in t:
                    assert isinstance(t["accepted_values"]["arguments"]["values"], str), (path, model["name"])


#: what a model of each layer may read (``depends_on.nodes`` of the parsed manifest, which also
#: holds the refs of the macros a model calls): staging reads the landing source and other
#: staging models (stg_description_words keeps only the tokens of stg_i2t_descriptions' winning
#: descriptions), intermediate reads staging and intermediate, a mart reads any model. The
#: project has no seeds.
LAYER_READS = {"staging": {"source", "staging"}, "intermediate": {"staging", "intermediate"}, "marts": {"staging", "intermediate", "marts"}}


@pytest.fixture(scope="module")
def manifest() -> dict:
    """The parsed project (``dbt_project/target/manifest.json``), parsed first only when a file of
    the project is newer than it (orchestration/defs/dbt/resources.py: dbt_project)."""
    import json

    from orchestration.defs.dbt.resources import dbt_project

    return json.loads(dbt_project().manifest_path.read_text())


def test_each_layer_reads_only_downward(manifest):
    """Lineage runs staging -> intermediate -> marts: a relation of a lower layer never reads a
    higher one, so a mart's rows never feed a working step (ARCHITECTURE.md)."""
    models = {uid: node for uid, node in manifest["nodes"].items() if node["resource_type"] == "model"}
    layer = {uid: Path(node["original_file_path"]).parts[1] for uid, node in models.items()}
    assert sorted(node["name"] for node in models.values()) == sorted(p.stem for p in model_files()), "a stale manifest"
    edges = [
        (node["name"], layer[uid], dep, layer.get(dep, dep.split(".")[0]))  # a source's "layer": source
        for uid, node in models.items()
        for dep in node["depends_on"]["nodes"]
    ]
    assert [f"{name} ({lower}) reads {dep}" for name, lower, dep, upper in edges if upper not in LAYER_READS[lower]] == []
    # every allowed kind of read occurs (staging -> staging included), so the rule is not vacuous
    assert {(lower, upper) for _, lower, _, upper in edges} == {(lower, upper) for lower, allowed in LAYER_READS.items() for upper in allowed}


#: the relation a model's last statement selects from: dbt's staging convention ends a staging
#: model in ``select * from renamed``, every other model in ``select * from final``
LAST_RELATION = {"staging": "renamed", "intermediate": "final", "marts": "final"}
#: a CTE definition at the start of a line (``final as (``, ``renamed as not materialized (``)
CTE = re.compile(r"^\s*(\w+) as (?:not materialized )?\(", re.M)
#: a last line that is a macro call naming its relation first: ``{{ select_with_build_stamp('final', false) }}``
RELATION_MACRO = re.compile(r"^\{\{ \w+\('(\w+)'.*\}\}$")
#: a model whose whole body is one macro call: ``{{ staged_association_scores(...) }}``
BODY_MACRO = re.compile(r"^\{\{ (\w+)\(.*\) \}\}$", re.S)


def macro_body(name: str) -> str:
    """The SQL of the project's macro ``name`` (dbt_project/macros/), comments removed."""
    for path in sorted((PROJECT / "macros").rglob("*.sql")):
        found = re.search(r"\{% macro " + name + r"\(.*?%\}(.*?)\{%-? endmacro", sql_code(path.read_text()), re.S)
        if found:
            return found.group(1)
    raise AssertionError(f"no macro {name}")


def ending(code: str) -> tuple[str, str | None]:
    """(the relation the last statement selects from, the last CTE defined) of a model's or a
    macro's SQL; ``("?", ...)`` when the last line is neither ``select * from X`` nor a macro
    call naming its relation first."""
    lines = [line.strip() for line in code.strip().splitlines() if line.strip()]
    ctes = CTE.findall(code)
    last = re.fullmatch(r"select \* from (\w+)", lines[-1]) or RELATION_MACRO.match(lines[-1])
    return (last.group(1) if last else "?"), (ctes[-1] if ctes else None)


@pytest.mark.parametrize("sql", model_files(), ids=lambda p: p.stem)
def test_every_model_ends_in_select_star_from_its_last_cte(sql):
    """The last CTE is ``final`` (staging: ``renamed``) and the model ends by selecting all of it,
    itself or through a macro that is handed its name or is the model's whole body."""
    expected = LAST_RELATION[sql.relative_to(MODELS).parts[0]]
    code = re.sub(r"\{%.*?%\}", "", sql_code(sql.read_text()), flags=re.S).strip()  # set / config blocks
    code = re.sub(r"^\{\{ config\w*\(.*?\) \}\}\s*", "", code, flags=re.S).strip()
    body = BODY_MACRO.match(code)
    if body and not CTE.search(code):
        code = macro_body(body.group(1))
    assert ending(code) == (expected, expected), f"{sql.stem} must end in `select * from {expected}`, its last CTE"


def test_the_ending_rule_reads_every_shape():
    """The forms a model ends in, read as the rule reads them, and the ones it refuses."""
    assert ending("with\n\nsource as (select 1),\n\nrenamed as (\n  select * from source\n)\n\nselect * from renamed") == ("renamed", "renamed")
    assert ending("with\nfinal as not materialized (select 1)\n{{ select_with_build_stamp('final', false) }}") == ("final", "final")
    assert ending("with\nfinal as (select 1),\nextra as (select 2)\nselect * from final") == ("final", "extra")
    assert ending("with\nfinal as (select 1)\nselect a, b\nfrom final") == ("?", "final")
    assert ending(macro_body("staged_association_scores")) == ("renamed", "renamed")
