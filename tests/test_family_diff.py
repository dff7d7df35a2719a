"""``dora diff --family counterfactual|modscan|vlstereoset``: the families' change tests.

Two small synthetic audits per family (two versions of one model) are landed in a tmp
DORA_HOME, the change-test marts are built by dbt (their unit tests run in tests/test_associations_sql.py), and ``dora diff
--family ...`` is read back: a change built to be significant is significant, a no-change is
not, and each p-value equals scipy's computed here from the landed rows (not from SQL).
A third, earlier audit per family (v0) probed other units: counterfactual another variant
(nothing in common: refused in one line), ModSCAN half the samples and VLStereoSet half the
gender items (compared on the units both audits have, the rest left out and counted).
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta, timezone

import duckdb
import pytest
from scipy import stats

from analytics.change_tests import chi2_stratified_pvalue, mann_whitney_pvalue
from analytics.dbt_runner import invoke_dbt
from ingestion.contracts import SCHEMAS
from ingestion.landing import write_shard
from orchestration.cli import main
from tests.helpers.homes import NO_UNIT_TESTS

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SELECT = ["+fct_max_toxicity_change_tests", "+fct_modscan_change_tests", "+fct_vlstereoset_change_tests"]


def _row(table: str, **values) -> dict:
    """A landing row of ``table``: the given columns, None elsewhere."""
    unknown = set(values) - set(SCHEMAS[table].names)
    assert not unknown, unknown
    return {name: values.get(name) for name in SCHEMAS[table].names}


# --- counterfactual: 12 two-member sets; prompt "Describe" gets more toxic in v2, "Explain" does not
CF_MODEL = "cf-model"
CF_SETS = 12


def cf_toxicity(version: int, prompt: str, set_index: int, member: str) -> float:
    """Toxicity of one response: member a 0.0; member b gives the set's MaxToxicity."""
    if member == "a":
        return 0.0
    if prompt == "Describe" and version == 2:
        return 0.5 + 0.02 * set_index  # 0.50 .. 0.72: every v2 unit above every v1 unit
    return 0.01 * set_index  # 0.00 .. 0.11, the same in both versions for Explain


def land_counterfactual(version: int) -> None:
    """Version 0: the image variant (the others: text), nothing in common with them."""
    audit, at = f"cf-v{version}", T0 + timedelta(days=version)
    responses, toxicity = [], []
    for prompt in ("Describe", "Explain"):
        for i in range(CF_SETS):
            for member in ("a", "b"):
                rid = f"{audit}-{prompt}-{i}-{member}"
                responses.append(
                    _row(
                        "counterfactual_responses",
                        audit_id=audit,
                        model_id=CF_MODEL,
                        model_version=f"v{version}",
                        backend="synthetic",
                        variant="image" if version == 0 else "text",
                        modality="text",
                        subset="race_gender",
                        set_id=f"s{i}",
                        occupation="nurse",
                        a1_type="race",
                        a1="x",
                        a2_type="gender",
                        a2=member,
                        group_label=member,
                        prompt_kind="open",
                        prompt_label=prompt,
                        mitigation="none",
                        seed=0,
                        prompt="p",
                        raw_output="r",
                        status="ok",
                        response_id=rid,
                        generated_at=at,
                    )
                )
                toxicity.append(
                    _row(
                        "counterfactual_toxicity",
                        audit_id=audit,
                        response_id=rid,
                        scorer="synthetic",
                        scorer_version="1",
                        toxicity=cf_toxicity(version, prompt, i, member),
                        scored_at=at,
                    )
                )
    write_shard("counterfactual_responses", responses, partition=audit)
    write_shard("counterfactual_toxicity", toxicity, partition=audit)


# --- ModSCAN: 6 persona instances x 8 samples; "original" goes from one-sided to balanced, "blank" barely moves
MS_MODEL = "ms-model"
MS_INSTANCES = 6


def ms_answers(version: int, condition: str, j: int) -> list[str | None]:
    """The 8 answers of instance j (None = N/A); version 0 asked only the first 4 samples."""
    if version == 0:
        return ms_answers(2, condition, j)[:4]
    if condition == "original":
        if version == 1:
            return ["male" if j % 2 else "female"] * 8  # S_bias 0.5 (the maximum)
        return ["male"] * 4 + ["female"] * 3 + [None]  # close to balanced, one N/A
    return ["male"] * 4 + ["female"] * 4 if version == 1 else ["male"] * 5 + ["female"] * 3


def land_modscan(version: int) -> None:
    audit, at = f"ms-v{version}", T0 + timedelta(days=version)
    rows = []
    for condition in ("original", "blank"):
        for j in range(MS_INSTANCES):
            for sample, group in enumerate(ms_answers(version, condition, j)):
                rows.append(
                    _row(
                        "modscan_responses",
                        audit_id=audit,
                        model_id=MS_MODEL,
                        model_version=f"v{version}",
                        backend="synthetic",
                        probe="modscan_text_persona",
                        modality="text",
                        attribute="gender",
                        scenario="persona",
                        instance=f"trait{j}",
                        condition=condition,
                        prefix="none",
                        query_unit=f"{condition}-{j}-{sample}",
                        sample=sample,
                        seed=sample,
                        prompt="p",
                        raw_output=group or "?",
                        chosen_group=group,
                        status="ok" if group else "na_no_term",
                        generated_at=at,
                    )
                )
    write_shard("modscan_responses", rows, partition=audit)


def ms_counts(version: int, condition: str) -> list[list[int]]:
    """Per instance [female, male, N/A] counts, straight from the landed answers."""
    return [[a.count("female"), a.count("male"), a.count(None)] for a in (ms_answers(version, condition, j) for j in range(MS_INSTANCES))]


# --- VLStereoSet: 20 gender items (all anti-stereotypical images) pick S_s in v1 and S_a in v2; 8 race items stay
VLS_MODEL = "vls-model"
VLS_ITEMS = {"gender": 20, "race": 8}
KINDS = ("stereotype", "anti-stereotype", "unrelated")


def vls_pick(version: int, category: str, i: int) -> str:
    if version == 0:  # scored only the first 10 gender items (land_vlstereoset)
        return vls_pick(2, category, i)
    if category == "gender":
        return "stereotype" if version == 1 else "anti-stereotype"
    return "unrelated" if i < 3 else "stereotype"  # race: 5 of 8 relevant, 5 stereotype picks, both versions


def land_vlstereoset_items() -> None:
    items = [
        _row(
            "vlstereoset_items",
            dataset_id="syn",
            source_file="syn.csv",
            is_synthetic=True,
            item_id=f"{c}{i}",
            source_row=n,
            category=c,
            target="t",
            context="c",
            caption_stereotype="s",
            caption_anti_stereotype="a",
            caption_unrelated="u",
            label=0,
            y="a",
            image_status="ok",
            image_path="x.png",
            neutral_stereotype="ns",
            neutral_anti_stereotype="na",
            neutral_status="ok",
            landed_at=T0,
        )
        for n, (c, i) in enumerate((c, i) for c, k in VLS_ITEMS.items() for i in range(k))
    ]
    write_shard("vlstereoset_items", items, partition="items", name="syn")


def land_vlstereoset(version: int) -> None:
    audit, at = f"vls-v{version}", T0 + timedelta(days=version)
    rows = [
        _row(
            "vlstereoset_scores",
            audit_id=audit,
            model_id=VLS_MODEL,
            model_version=f"v{version}",
            backend="synthetic",
            scorer="clip",
            scorer_variant="clip",
            from_paper=True,
            score_kind="logit",
            dataset_id="syn",
            item_id=f"{c}{i}",
            condition="original",
            caption_kind=k,
            caption_text=k,
            score=1.0 if vls_pick(version, c, i) == k else 0.0,
            status="ok",
            scored_at=at,
        )
        for c, n in VLS_ITEMS.items()
        for i in range(n)
        for k in KINDS
        if version > 0 or (c == "gender" and i < 10)
    ]
    write_shard("vlstereoset_scores", rows, partition=audit)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One DORA_HOME with two audits of each family and the change-test marts built."""
    home = tmp_path_factory.mktemp("famdiff") / "dora_home"
    mp = pytest.MonkeyPatch()
    mp.setenv("DORA_HOME", str(home))
    mp.setenv("DAGSTER_HOME", str(home / "dagster"))
    for version in (0, 1, 2):
        land_counterfactual(version)
        land_modscan(version)
        land_vlstereoset(version)
    land_vlstereoset_items()
    invoke_dbt(["build", "--select", *SELECT, *NO_UNIT_TESTS], home)
    yield home
    mp.undo()


def diff_rows(capsys, *argv) -> list[dict]:
    assert main(["diff", *argv, "--format", "csv"]) == 0
    return list(csv.DictReader(io.StringIO(capsys.readouterr().out)))


@pytest.mark.slow
def test_counterfactual_change_is_significant_and_p_equals_scipy(home, capsys):
    rows = {r["prompt_label"]: r for r in diff_rows(capsys, CF_MODEL, "--family", "counterfactual")}
    assert set(rows) == {"Describe", "Explain"} and {r["head"] for r in rows.values()} == {"toxicity"}
    v1 = [cf_toxicity(1, "Describe", i, "b") for i in range(CF_SETS)]
    v2 = [cf_toxicity(2, "Describe", i, "b") for i in range(CF_SETS)]
    expected = stats.mannwhitneyu(v1, v2, alternative="two-sided").pvalue
    assert float(rows["Describe"]["change_p"]) == pytest.approx(expected, rel=1e-12)
    assert float(rows["Describe"]["change_q"]) == pytest.approx(expected * 2, rel=1e-12)  # BH, 2 tests
    assert rows["Describe"]["change_type"] == "increased"
    same = [cf_toxicity(1, "Explain", i, "b") for i in range(CF_SETS)]
    assert float(rows["Explain"]["change_p"]) == pytest.approx(stats.mannwhitneyu(same, same).pvalue)
    assert rows["Explain"]["change_type"] == "unchanged"

    assert main(["diff", CF_MODEL, "--family", "counterfactual"]) == 0
    out = capsys.readouterr().out
    assert "cf-v1 (version v1) -> cf-v2 (version v2)" in out and "Mann-Whitney" in out
    assert "1 of 2 compared rows changed significantly (BH change q < 0.05): increased 1" in out
    assert out.index("Describe") < out.index("Explain")  # sorted by change q
    # a CI exit status: 1 when a row changed significantly; collapse is BiasDora's (parse rate,
    # significant associations) and refused in one line for another family
    assert main(["diff", CF_MODEL, "--family", "counterfactual", "--fail-on", "change"]) == 1
    assert capsys.readouterr().err == "dora diff: --fail-on change: 1 rows changed significantly (BH change q < 0.05)\n"
    assert main(["diff", CF_MODEL, "--family", "counterfactual", "--fail-on", "collapse"]) == 2
    assert capsys.readouterr().err.startswith("dora diff: --fail-on collapse reads the parse rate")


@pytest.mark.slow
def test_modscan_change_is_significant_and_p_equals_scipy(home, capsys):
    rows = {r["condition"]: r for r in diff_rows(capsys, MS_MODEL, "--family", "modscan", "--from", "v1", "--to", "ms-v2")}
    for condition, change_type in (("original", "decreased"), ("blank", "unchanged")):
        before, after = ms_counts(1, condition), ms_counts(2, condition)
        statistic = dof = 0
        for b, a in zip(before, after, strict=True):
            cols = [k for k in range(3) if b[k] + a[k]]
            if len(cols) > 1:
                res = stats.chi2_contingency([[b[k] for k in cols], [a[k] for k in cols]], correction=False)
                statistic, dof = statistic + res.statistic, dof + res.dof
        assert float(rows[condition]["change_p"]) == pytest.approx(stats.chi2.sf(statistic, dof), rel=1e-12)
        assert rows[condition]["change_type"] == change_type
    assert float(rows["original"]["s_bias_before"]) == pytest.approx(0.5)
    assert float(rows["blank"]["change_p"]) > 0.5


@pytest.mark.slow
def test_vlstereoset_change_is_significant_and_p_equals_scipy(home, capsys):
    rows = {(r["category"], r["metric"]): r for r in diff_rows(capsys, VLS_MODEL, "--family", "vlstereoset")}
    assert set(rows) == {(c, m) for c in ("all", "gender", "race") for m in ("vlrs", "vlbs")}
    vlbs = rows[("gender", "vlbs")]
    assert (vlbs["k_before"], vlbs["n_before"], vlbs["k_after"], vlbs["n_after"]) == ("20", "20", "0", "20")
    assert float(vlbs["change_p"]) == pytest.approx(stats.fisher_exact([[20, 0], [0, 20]]).pvalue, rel=1e-9)
    assert vlbs["is_significant_change"] == "True" and vlbs["change_type"] == "decreased"
    for key in (("gender", "vlrs"), ("race", "vlrs"), ("race", "vlbs")):
        assert rows[key]["change_type"] == "unchanged" and float(rows[key]["change_p"]) == 1.0
    all_vlbs = rows[("all", "vlbs")]  # 25 of 28 -> 5 of 28
    assert float(all_vlbs["change_p"]) == pytest.approx(stats.fisher_exact([[25, 3], [5, 23]]).pvalue, rel=1e-9)


@pytest.mark.slow
def test_modscan_compares_the_queries_both_audits_asked(home, capsys):
    """ms-v0 asked 4 samples per instance, ms-v1 8: the test uses the first 4 of each."""
    rows = {r["condition"]: r for r in diff_rows(capsys, MS_MODEL, "--family", "modscan", "--from", "v0", "--to", "v1")}
    for condition in ("original", "blank"):
        statistic = dof = 0
        for j in range(MS_INSTANCES):
            b, a = ms_answers(0, condition, j), ms_answers(1, condition, j)[:4]
            b, a = [[x.count(g) for g in ("female", "male", None)] for x in (b, a)]
            cols = [k for k in range(3) if b[k] + a[k]]
            if len(cols) > 1:
                res = stats.chi2_contingency([[b[k] for k in cols], [a[k] for k in cols]], correction=False)
                statistic, dof = statistic + res.statistic, dof + res.dof
        expected = stats.chi2.sf(statistic, dof) if dof else 1.0
        assert float(rows[condition]["change_p"]) == pytest.approx(expected, rel=1e-12), condition
        assert (rows[condition]["units_compared"], rows[condition]["units_only_before"], rows[condition]["units_only_after"]) == (
            str(MS_INSTANCES * 4),
            "0",
            str(MS_INSTANCES * 4),
        )
    assert main(["diff", MS_MODEL, "--family", "modscan", "--from", "v0", "--to", "v1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith(
        ", each row tested on the units both audits have (units_compared); 2 of 2 rows left units "
        "of one audit out (up to 0 only before, 24 only after)"
    )


@pytest.mark.slow
def test_vlstereoset_compares_the_items_both_audits_scored_and_gives_the_power(home, capsys):
    """vls-v0 scored the first 10 gender items (anti-stereotype picks), vls-v1 all 28."""
    import math

    rows = {(r["category"], r["metric"]): r for r in diff_rows(capsys, VLS_MODEL, "--family", "vlstereoset", "--from", "v0", "--to", "v1")}
    assert set(rows) == {(c, m) for c in ("all", "gender") for m in ("vlrs", "vlbs")}  # no race item in common
    vlbs = rows[("gender", "vlbs")]
    assert (vlbs["k_before"], vlbs["n_before"], vlbs["k_after"], vlbs["n_after"]) == ("0", "10", "10", "10")
    assert float(vlbs["change_p"]) == pytest.approx(stats.fisher_exact([[0, 10], [10, 0]]).pvalue, rel=1e-9)
    assert (vlbs["units_compared"], vlbs["units_only_before"], vlbs["units_only_after"]) == ("10", "0", "10")
    assert rows[("all", "vlrs")]["units_only_after"] == str(sum(VLS_ITEMS.values()) - 10)
    # power by hand: Cohen's h detectable with 10 items a side (two-sided alpha 0.05, power 0.8,
    # normal approximation), from vlbs 0: a rise to 100 sin(h / 2)^2, no fall
    h = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / math.sqrt(10 * 10 / 20)
    assert float(vlbs["detectable_above"]) == pytest.approx(100 * math.sin(h / 2) ** 2, rel=1e-4)
    assert vlbs["detectable_below"] == ""
    assert main(["diff", VLS_MODEL, "--family", "vlstereoset", "--from", "v0", "--to", "v1"]) == 0
    out = capsys.readouterr().out
    assert "  power: detectable_below / detectable_above are the values the later audit had to pass" in out


@pytest.mark.slow
def test_audits_without_a_common_unit_are_refused_in_one_line(home, capsys):
    assert main(["diff", CF_MODEL, "--family", "counterfactual", "--from", "v0", "--to", "v1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "dora diff: counterfactual audits cf-v0 (v0) and cf-v1 (v1) probed no row in common (variant: image vs text): nothing to compare\n"
    )


@pytest.mark.slow
def test_errors_name_the_family_and_the_audit(home, capsys):
    assert main(["diff", CF_MODEL, "--family", "modscan"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dora diff: no modscan audit of model 'cf-model'") and "ms-model" in err and "\n" not in err
    assert main(["diff", CF_MODEL, "--family", "counterfactual", "--from", "ms-v1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "dora diff: --from 'ms-v1' is a modscan audit, not a counterfactual one: use --family modscan"
    assert main(["diff", CF_MODEL, "--family", "counterfactual", "--to", "v9"]) == 2
    assert "neither an audit id nor a model version" in capsys.readouterr().err
    assert main(["diff", CF_MODEL, "--family", "counterfactual", "--from", "v2", "--to", "v1"]) == 2
    assert "must be an earlier counterfactual audit" in capsys.readouterr().err
    assert main(["diff", MS_MODEL]) == 2  # default family biasdora: the model only has ModSCAN audits
    err = capsys.readouterr().err.strip()
    assert err.endswith("; 'ms-model' has modscan audits: use --family modscan") and "\n" not in err


@pytest.mark.slow
def test_audits_are_found_by_registry_target(home, capsys):
    """A family's audits landed in a registry target's partition are filed under the target in
    the audit log (dim_audits.target), whatever the model is called: `dora diff TARGET --family`
    finds them by that name (here a dim_audits of two rows stands in for the built one)."""
    with duckdb.connect(str(home / "warehouse.duckdb")) as con:
        con.execute("create table dim_audits as select * from (values ('cf-v1', 'my-finetune'), ('cf-v2', 'my-finetune')) t(audit_id, target)")
    try:
        assert main(["diff", "my-finetune", "--family", "counterfactual"]) == 0
        assert "cf-v1 (version v1) -> cf-v2 (version v2)" in capsys.readouterr().out
        assert main(["diff", "my-finetune", "--family", "modscan"]) == 2  # its ModSCAN audits are not the target's
        assert "no modscan audit of model 'my-finetune'" in capsys.readouterr().err
    finally:
        with duckdb.connect(str(home / "warehouse.duckdb")) as con:
            con.execute("drop table dim_audits")


def test_missing_marts_give_one_line(dora_home, capsys):
    dora_home.mkdir(parents=True)
    duckdb.connect(str(dora_home / "warehouse.duckdb")).close()  # a warehouse without the family marts
    assert main(["diff", CF_MODEL, "--family", "counterfactual"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no counterfactual marts" in err and "\n" not in err


def test_help_names_each_family_metric_and_test(capsys):
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    out = capsys.readouterr().out
    for needle in (
        "counterfactual: mean MaxToxicity",
        "Mann-Whitney U",
        "modscan: S_bias",
        "chi-square",
        "vlstereoset: vlrs and vlbs",
        "Fisher's exact",
    ):
        assert needle in out


def test_udfs_equal_scipy_and_handle_empty_sides():
    from analytics.duckdb_plugin import register_functions

    con = duckdb.connect()
    register_functions(con)
    x, y = [0.1, 0.4, 0.4, 0.9, 0.2], [0.5, 0.7, 0.4, 0.8]
    got = con.execute("select mann_whitney_p(?, ?)", [x, y]).fetchone()[0]
    assert got == pytest.approx(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue, rel=1e-12)
    assert con.execute("select mann_whitney_p([]::double[], [1.0])").fetchone()[0] is None
    before, after = [[3, 1, 0], [0, 4, 1]], [[1, 3, 0], [2, 2, 0]]
    got = con.execute("select chi2_stratified_p(?::integer[][], ?::integer[][])", [before, after]).fetchone()[0]
    assert got == pytest.approx(chi2_stratified_pvalue(before, after), rel=1e-12)
    s1 = stats.chi2_contingency([[3, 1], [1, 3]], correction=False)
    s2 = stats.chi2_contingency([[0, 4, 1], [2, 2, 0]], correction=False)
    assert got == pytest.approx(stats.chi2.sf(s1.statistic + s2.statistic, s1.dof + s2.dof), rel=1e-12)
    assert chi2_stratified_pvalue([[0, 0]], [[1, 1]]) is None  # no instance answered in both audits
    assert mann_whitney_pvalue([0.2, 0.2], [0.2]) == 1.0
    with pytest.raises(ValueError, match="stratum 0"):
        chi2_stratified_pvalue([[1, 2]], [[1, 2, 3]])
