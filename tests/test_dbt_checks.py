"""dbt tests as named Dagster asset checks (orchestration/defs/dbt/checks.py): the names made
from rules, the checks of one ``model_rules`` test and of dbt's own tests, the result of each
check from its test's outcome, and (slow) a real failing build whose check names the broken
rule. The checks of the whole project are checked on the definitions in tests/test_ui_layout.py."""

from __future__ import annotations

import re

import dagster as dg
import pytest

from orchestration.defs.dbt.checks import MAX_NAME, NamedCheck, check_result, checks_by_test, dbt_test_label, named_checks, rule_name

KEY = dg.AssetKey("fct_x")
TEST_ID = "test.dora.model_rules_fct_x_a__b.0123456789"
TEST = "model_rules in dbt_project/models/marts/fam/fct_x.yml"


@pytest.mark.parametrize(
    "rule,name",
    [
        ("fisher_q >= fisher_p", "fisher_q_ge_fisher_p"),
        ("is_significant = (fisher_q < 0.05)", "is_significant_eq_fisher_q_lt_0_05"),
        ("paper_p_value >= 0 and paper_p_value <= 1", "paper_p_value_between_0_and_1"),
        ("r_units >= -1.000000001 and r_units <= 1.000000001", "r_units_between_minus_1_000000001_and_1_000000001"),
        ("modality in ('t2t', 't2i', 'i2t')", "modality_in_t2t_t2i_i2t"),
        ("from_audit_id <> to_audit_id", "from_audit_id_ne_to_audit_id"),
        ("(rating is not null) = (parse_status = 'ok')", "rating_is_not_null_eq_parse_status_eq_ok"),
        ("n_selected <= n_responses and n_responses <= n_queries", "n_selected_le_n_responses_and_n_responses_le_n_queries"),
    ],
)
def test_a_rule_is_named_after_what_it_says(rule, name):
    assert rule_name(rule) == name


def test_a_long_rule_is_cut_at_a_word():
    rule = "answers = parsed + n_empty + n_no_rating + n_ambiguous + n_out_of_range + n_error"
    name = rule_name(rule)
    assert name == "answers_eq_parsed_n_empty_n_no_rating_n_ambiguous_n_out_of"
    assert len(name) <= MAX_NAME and re.fullmatch(r"[a-z0-9_]+", name)
    assert rule_name("") == "rule"


def _manifest(**nodes):
    return {"nodes": nodes}


def test_a_model_rules_test_is_one_check_per_rule_and_repeats_are_numbered():
    node = {
        "name": "model_rules_fct_x_a__b",
        "original_file_path": "models/marts/fam/fct_x.yml",
        "test_metadata": {
            "name": "model_rules",
            "kwargs": {"not_null": ["a", "b"], "unique": ["a", "b"], "rules": ["b >= a", "b>=a", "a in ('x', 'y')"]},
        },
    }
    unique = {
        "name": "unique_fct_x_a",
        "column_name": "a",
        "original_file_path": "models/marts/fam/fct_x.yml",
        "test_metadata": {"name": "unique", "kwargs": {"column_name": "a"}},
    }
    manifest = _manifest(**{TEST_ID: node, "test.dora.unique_fct_x_a.1": unique})
    checks = named_checks(manifest, TEST_ID, "fct_x")
    assert [(c.name, c.rule, c.labels) for c in checks] == [
        ("not_null", "not null: a, b", ("not null: a", "not null: b")),
        ("unique_key", "unique: a, b", ("unique: a, b",)),
        ("b_ge_a", "b >= a", ("b >= a",)),
        ("b_ge_a", "b>=a", ("b>=a",)),
        ("a_in_x_y", "a in ('x', 'y')", ("a in ('x', 'y')",)),
    ]
    assert checks[2].description.startswith("Every row of `fct_x` satisfies `b >= a` (a row where it is NULL passes")
    assert "dbt_project/models/marts/fam/fct_x.yml" in checks[2].description
    assert "`a`, `b`" in checks[0].description and "key (`a`, `b`)" in checks[1].description
    named = checks_by_test(manifest, {TEST_ID: KEY, "test.dora.unique_fct_x_a.1": KEY})
    assert [c.name for _k, c in named[TEST_ID]] == ["not_null", "unique_key", "b_ge_a", "b_ge_a_2", "a_in_x_y"]
    assert [c.name for _k, c in named["test.dora.unique_fct_x_a.1"]] == ["unique_a"]


def test_dbt_own_tests_and_a_singular_test_are_named_after_their_column_or_file():
    rel = {
        "name": "relationships_fct_x_b__a__ref_fct_y_",
        "column_name": "b",
        "original_file_path": "m.yml",
        "test_metadata": {"name": "relationships", "kwargs": {"column_name": "b", "to": "ref('fct_y')", "field": "a"}},
    }
    values = {
        "name": "accepted_values_fct_x_c",
        "column_name": "c",
        "original_file_path": "m.yml",
        "test_metadata": {"name": "accepted_values", "kwargs": {"column_name": "c", "values": ["p", "q"]}},
    }
    singular = {
        "name": "fct_x_pairs_one_kind",
        "original_file_path": "tests/fct_x_pairs_one_kind.sql",
        "raw_code": "{#-\n    Pairs of one kind only:\n    the same target. -#}\nselect 1",
    }
    manifest = _manifest(**{"test.r": rel, "test.v": values, "test.s": singular})
    (r,), (v,), (s,) = (named_checks(manifest, uid, "fct_x") for uid in ("test.r", "test.v", "test.s"))
    assert dbt_test_label(manifest, "test.r") == "relationships in dbt_project/m.yml"
    assert dbt_test_label(manifest, "test.s") == "singular test in dbt_project/tests/fct_x_pairs_one_kind.sql"
    assert (r.name, r.rule) == ("b_in_fct_y", "b in fct_y.a")
    assert r.description == "Every non-NULL `b` of `fct_x` is a `a` of `fct_y` (dbt's relationships test)."
    assert (v.name, v.rule) == ("accepted_values_c", "c in ['p', 'q']")
    assert s.name == "fct_x_pairs_one_kind"
    assert s.description == (
        "Pairs of one kind only: the same target. (dbt_project/tests/fct_x_pairs_one_kind.sql: fails on every row its query returns)"
    )


NOT_NULL = NamedCheck("not_null", "d", "not null: a, b", ("not null: a", "not null: b"))
KEY_RULE = NamedCheck("unique_key", "d", "unique: a, b", ("unique: a, b",))
ROW_RULE = NamedCheck("b_ge_a", "d", "b >= a", ("b >= a",))
WHOLE = NamedCheck("unique_a", "d", "unique: a")


def _result(check, status, failing, message=None):
    result = check_result(KEY, check, status=status, test=TEST, failing=failing, message=message)
    rows = result.metadata.get("failing_rows")
    return result.passed, result.severity, result.description, None if rows is None else rows.value


def test_each_check_result_names_what_broke_and_how_many_rows():
    failing = {"not null: b": 3, "unique: a, b": 2, "b >= a": 1}
    assert _result(NOT_NULL, "fail", failing)[2] == "NULLs in b (3 rows)"
    assert _result(NOT_NULL, "fail", {"not null: a": 1, "not null: b": 2})[2:] == ("NULLs in a (1 row), b (2 rows)", 3)
    assert _result(KEY_RULE, "fail", failing)[2:] == ("2 values of the key (a, b) repeat", 2)
    assert _result(ROW_RULE, "fail", failing) == (False, dg.AssetCheckSeverity.ERROR, "1 row breaks `b >= a`", 1)
    # a rule of a failing test that no row breaks passes
    assert _result(ROW_RULE, "fail", {"not null: b": 3}) == (True, dg.AssetCheckSeverity.ERROR, None, 0)
    assert _result(ROW_RULE, "warn", {"b >= a": 4}) == (False, dg.AssetCheckSeverity.WARN, "4 rows break `b >= a`", 4)
    assert _result(WHOLE, "fail", {"": 5})[:3] == (False, dg.AssetCheckSeverity.ERROR, f"5 rows fail `unique: a` ({TEST})")
    assert _result(WHOLE, "pass", {"": 0})[0] and _result(NOT_NULL, "pass", None)[0]
    assert _result(ROW_RULE, "error", None, "the dbt test could not run: boom")[:3] == (
        False,
        dg.AssetCheckSeverity.ERROR,
        "the dbt test could not run: boom",
    )
    metadata = check_result(KEY, ROW_RULE, status="fail", test=TEST, failing=failing).metadata
    assert {k: v.value for k, v in metadata.items()} == {"rule": "b >= a", "dbt_test": TEST, "dbt_status": "fail", "failing_rows": 1}


@pytest.mark.slow
def test_a_failing_rule_is_named_in_its_check_in_a_real_build(dora_home):
    """A T2T completion landed with a setting outside the five: the Dagster build of
    stg_t2t_completions fails, and of its named checks only the setting rule fails, saying so;
    the model's other rules pass (one query, read back after dbt exits)."""
    from ingestion.landing import write_shard
    from orchestration.definitions import defs
    from tests.helpers.landing_rows import completion

    write_shard("t2t_completions", [completion("audit-x", "old person", "good", setting="sideways"), completion("audit-x", "old person", "kind")])
    job = defs.resolve_implicit_global_asset_job_def()
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance, asset_selection=[dg.AssetKey("stg_t2t_completions")], raise_on_error=False)
    assert not result.success
    checks = {e.event_specific_data.check_name: e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    setting = "setting_in_singular_plural_adjective_noun_verb"
    assert {name for name, c in checks.items() if not c.passed} == {setting}
    assert {"not_null", "unique_key", "accepted_values_bias_dimension", setting} <= set(checks)
    assert checks[setting].description == "1 row breaks `setting in ('singular', 'plural', 'adjective', 'noun', 'verb')`"
    assert checks[setting].metadata["failing_rows"].value == 1
