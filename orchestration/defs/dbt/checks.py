"""dbt data tests as Dagster asset checks that a person can read: one check per rule.

dagster-dbt makes one asset check of each dbt test, named after the test's node name. dora
gathers a model's data rules into one ``model_rules`` test (dbt_project/tests/generic/model_rules.sql:
one query per model: an audit's dbt steps take 23.5 s instead of 30.9 s with one test per
rule, measured there), whose generated name lists every argument (up to ~1,000 characters)
and tells nothing when it fails. Here each test becomes checks named after what they check,
each with a description:

- a ``model_rules`` test: ``not_null`` (every not-null column), ``unique_key`` (the key
  columns) and one check per row rule, named after the rule (``fisher_q >= fisher_p`` ->
  ``fisher_q_ge_fisher_p``, ``p >= 0 and p <= 1`` -> ``p_between_0_and_1``);
- dbt's own tests: ``unique_<column>``, ``accepted_values_<column>``, ``<column>_in_<model>``
  (relationships); a singular test keeps its file name, its description is the file's leading
  Jinja comment.

The query still runs once per model: its result rows name each broken rule with a count, and
:func:`named_check_events` turns a test's outcome into one ``AssetCheckResult`` per check.
When the test passes, every check passes (no query); when it fails, the test's compiled query
(``run_results.json``) is run again read-only after dbt has exited (DuckDB lets no reader in
while dbt writes), so a failing check names its rule and how many rows break it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

#: The grouped data test (dbt_project/tests/generic/model_rules.sql).
MODEL_RULES = "model_rules"
#: dagster-dbt's metadata key holding a check's dbt test (``dagster_dbt.asset_utils``).
UNIQUE_ID_KEY = "dagster_dbt/unique_id"
#: Longest check name made from a rule (the description holds the whole rule).
MAX_NAME = 64

_RANGE = re.compile(r"^\s*(\w+)\s*>=\s*(\S+)\s+and\s+\1\s*<=\s*(\S+)\s*$", re.I)
_OPERATORS = ((">=", " ge "), ("<=", " le "), ("<>", " ne "), ("!=", " ne "), ("=", " eq "), (">", " gt "), ("<", " lt "))
_LEADING_COMMENT = re.compile(r"^\s*\{#-?(.*?)-?#\}", re.S)
_REF = re.compile(r"""ref\(\s*['"](\w+)['"]""")


@dataclass(frozen=True)
class NamedCheck:
    """One Dagster asset check made from a dbt test.

    ``rule``: what it checks, on one line (the result's metadata). ``labels``: the rules it
    covers as the ``model_rules`` query names them in its ``rule`` column (``"not null:
    <column>"``, ``"unique: <a>, <b>"``, the row rule's SQL); empty for a check that is a
    whole dbt test.
    """

    name: str
    description: str
    rule: str
    labels: tuple[str, ...] = ()


def rule_name(rule: str) -> str:
    """A check name for a row rule (a SQL condition): lower case, ``[a-z0-9_]``, at most
    :data:`MAX_NAME` characters; comparison operators become words (``>=`` -> ``ge``), a
    two-sided range ``x >= a and x <= b`` becomes ``x_between_a_and_b``, a minus before a
    number ``minus``. Example: ``"is_significant = (fisher_q < 0.05)"`` ->
    ``"is_significant_eq_fisher_q_lt_0_05"``."""
    match = _RANGE.match(rule)
    text = f"{match[1]} between {match[2]} and {match[3]}" if match else rule
    text = re.sub(r"(?<![\w.])-(?=\d)", " minus ", text)
    for operator, word in _OPERATORS:
        text = text.replace(operator, word)
    name = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    if len(name) > MAX_NAME:
        name = name[:MAX_NAME].rsplit("_", 1)[0]
    return name or "rule"


def _listed(columns) -> str:
    return ", ".join(f"`{c}`" for c in columns)


def _model_rules_checks(node: Mapping[str, Any], model: str) -> list[NamedCheck]:
    kwargs = node["test_metadata"].get("kwargs") or {}
    not_null, unique, rules = kwargs.get("not_null") or [], kwargs.get("unique") or [], kwargs.get("rules") or []
    where = (
        f"Checked in one query with the model's other data rules (the `model_rules` test, "
        f"dbt_project/tests/generic/model_rules.sql; the rules: dbt_project/{node['original_file_path']})."
    )
    checks = []
    if not_null:
        checks.append(
            NamedCheck(
                "not_null",
                f"No NULL in the columns {_listed(not_null)} of `{model}`. {where}",
                "not null: " + ", ".join(not_null),
                tuple(f"not null: {c}" for c in not_null),
            )
        )
    if unique:
        key = "unique: " + ", ".join(unique)
        checks.append(NamedCheck("unique_key", f"No two rows of `{model}` share the key ({_listed(unique)}). {where}", key, (key,)))
    for rule in rules:
        checks.append(
            NamedCheck(
                rule_name(rule),
                f"Every row of `{model}` satisfies `{rule}` (a row where it is NULL passes: NULLs are the not-null check's). {where}",
                rule,
                (rule,),
            )
        )
    return checks


def _test_check(node: Mapping[str, Any], model: str) -> NamedCheck:
    meta = node.get("test_metadata") or {}
    test, kwargs = meta.get("name"), meta.get("kwargs") or {}
    column = node.get("column_name") or kwargs.get("column_name")
    own = " ".join((node.get("description") or "").split())
    if not test:  # a singular test: its file name; its leading Jinja comment says what it checks
        comment = _LEADING_COMMENT.match(node.get("raw_code") or "")
        text = own or (" ".join(comment[1].split()) if comment else "")
        path = f"dbt_project/{node['original_file_path']}"
        return NamedCheck(
            node["name"],
            f"{text} ({path}: fails on every row its query returns)"
            if text
            else f"The singular dbt test {path}: fails on every row its query returns.",
            f"no row returned by {path}",
        )
    if test == "unique" and column:
        return NamedCheck(f"unique_{column}", own or f"No two rows of `{model}` share a `{column}` (dbt's unique test).", f"unique: {column}")
    if test == "relationships" and column:
        ref = _REF.search(str(kwargs.get("to") or ""))
        to = ref[1] if ref else str(kwargs.get("to"))
        return NamedCheck(
            f"{column}_in_{to}",
            own or f"Every non-NULL `{column}` of `{model}` is a `{kwargs.get('field')}` of `{to}` (dbt's relationships test).",
            f"{column} in {to}.{kwargs.get('field')}",
        )
    if test == "accepted_values" and column:
        values = kwargs.get("values")
        shown = "the dbt var `bias_dimensions` (dbt_project/dbt_project.yml)" if "bias_dimensions" in str(values) else str(values)
        return NamedCheck(
            f"accepted_values_{column}",
            own or f"Every `{column}` of `{model}` is one of {shown} (dbt's accepted_values test).",
            f"{column} in {'var(bias_dimensions)' if 'bias_dimensions' in str(values) else values}",
        )
    name = f"{test}_{column}" if column else str(test)
    return NamedCheck(name, own or f"dbt's `{test}` test on `{model}`" + (f", column `{column}`." if column else "."), name)


def named_checks(manifest: Mapping[str, Any], unique_id: str, model: str) -> list[NamedCheck]:
    """The checks the dbt test ``unique_id`` of ``manifest`` shows as: several for a
    ``model_rules`` test, one otherwise (see the module docstring). ``model``: the name of the
    model it checks, for the descriptions. Names are not yet unique per model
    (:func:`named_check_specs` numbers repeats)."""
    node = manifest["nodes"][unique_id]
    if (node.get("test_metadata") or {}).get("name") == MODEL_RULES:
        return _model_rules_checks(node, model)
    return [_test_check(node, model)]


def _unique_names(checks: list[NamedCheck], taken: set[str]) -> list[NamedCheck]:
    out = []
    for check in checks:
        name, n = check.name, 1
        while name in taken:
            n += 1
            name = f"{check.name}_{n}"
        taken.add(name)
        out.append(NamedCheck(name, check.description, check.rule, check.labels))
    return out


def dbt_tests(specs) -> dict[str, dg.AssetKey]:
    """dbt test unique id -> the asset it checks, from check specs carrying :data:`UNIQUE_ID_KEY`
    (dagster-dbt's, one per test, or the named ones of :func:`named_check_specs`)."""
    return {spec.metadata[UNIQUE_ID_KEY]: spec.asset_key for spec in specs if spec.metadata.get(UNIQUE_ID_KEY)}


def checks_by_test(manifest: Mapping[str, Any], tests: Mapping[str, dg.AssetKey]) -> dict[str, list[tuple[dg.AssetKey, NamedCheck]]]:
    """dbt test unique id -> its (asset key, named check) pairs, for the tests of ``tests``
    (:func:`dbt_tests`) found in ``manifest``. Names are unique per asset: a repeat gets
    ``_2``, ``_3``, ... in the order of the tests' unique ids, so the definitions and a running
    step (which sees every test of its assets) name them alike."""
    taken: dict[dg.AssetKey, set[str]] = {}
    out: dict[str, list[tuple[dg.AssetKey, NamedCheck]]] = {}
    for unique_id in sorted(tests):
        if unique_id not in manifest.get("nodes", {}):
            continue
        key = tests[unique_id]
        checks = _unique_names(named_checks(manifest, unique_id, key.path[-1]), taken.setdefault(key, set()))
        out[unique_id] = [(key, c) for c in checks]
    return out


def named_check_specs(manifest: Mapping[str, Any], specs) -> list[dg.AssetCheckSpec]:
    """dagster-dbt's check specs (one per dbt test, named after the test's node) replaced by
    the named checks of :func:`checks_by_test`, each keeping its test's dependencies,
    blocking flag and metadata (the test's unique id: dagster-dbt selects the test when any of
    its checks is selected). Specs of no dbt test in ``manifest`` are kept as they are."""
    specs = list(specs)
    by_id = {spec.metadata.get(UNIQUE_ID_KEY): spec for spec in specs}
    named = checks_by_test(manifest, dbt_tests(specs))
    out = [spec for spec in specs if spec.metadata.get(UNIQUE_ID_KEY) not in named]
    for unique_id, checks in named.items():
        spec = by_id[unique_id]
        out += [
            dg.AssetCheckSpec(
                check.name,
                asset=key,
                description=check.description,
                additional_deps=spec.additional_deps,
                blocking=spec.blocking,
                metadata=spec.metadata,
            )
            for key, check in checks
        ]
    return out


def _count_text(n: int, what: str = "row") -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def dbt_test_label(manifest: Mapping[str, Any], unique_id: str) -> str:
    """A dbt test in a few words: its kind and the file declaring it (``model_rules in
    dbt_project/models/marts/biasdora/fct_associations.yml``); its node name (up to ~1,000
    characters for a ``model_rules`` test) stays in the check spec's metadata."""
    node = manifest["nodes"][unique_id]
    kind = (node.get("test_metadata") or {}).get("name") or "singular test"
    return f"{kind} in dbt_project/{node.get('original_file_path')}"


def check_result(
    key: dg.AssetKey, check: NamedCheck, *, status: str, test: str, failing: Mapping[str, int] | None, message: str | None = None
) -> dg.AssetCheckResult:
    """The result of one named check from its dbt test's outcome.

    Args:
        status: the test's dbt status (``pass``, ``fail``, ``warn``, ``error``).
        test: the test's :func:`dbt_test_label`.
        failing: rows breaking each rule label (:class:`NamedCheck`; a label left out broke no
            row); for a check that is a whole test, ``{"": failures}``. ``None``: not known
            (the test errored, or its query could not be read back; ``message`` says why).

    Returns:
        Passed when the test passed, or when none of the check's own rules broke; severity
        WARN when the test only warns. Metadata: the rule(s), ``failing_rows`` and the dbt test.
    """
    severity = dg.AssetCheckSeverity.WARN if status == "warn" else dg.AssetCheckSeverity.ERROR
    metadata: dict[str, Any] = {"rule": check.rule, "dbt_test": test, "dbt_status": status}
    if status == "pass":
        return dg.AssetCheckResult(asset_key=key, check_name=check.name, passed=True, metadata={**metadata, "failing_rows": 0})
    if failing is None:
        return dg.AssetCheckResult(
            asset_key=key, check_name=check.name, passed=False, severity=severity, metadata=metadata, description=message or f"dbt test {status}"
        )
    labels = check.labels or ("",)
    broken = {label: failing[label] for label in labels if failing.get(label)}
    if not broken:
        return dg.AssetCheckResult(asset_key=key, check_name=check.name, passed=True, metadata={**metadata, "failing_rows": 0})
    if check.name == "not_null" and check.labels:
        text = "NULLs in " + ", ".join(f"{label.removeprefix('not null: ')} ({_count_text(n)})" for label, n in broken.items())
    elif check.name == "unique_key" and check.labels:
        n = sum(broken.values())
        text = f"{n} {'value' if n == 1 else 'values'} of the key ({next(iter(broken)).removeprefix('unique: ')}) {'repeats' if n == 1 else 'repeat'}"
    elif check.labels:
        n = sum(broken.values())
        text = f"{_count_text(n)} {'breaks' if n == 1 else 'break'} `{check.labels[0]}`"
    else:
        text = f"{_count_text(sum(broken.values()))} fail `{check.rule}` ({test})"
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=check.name,
        passed=False,
        severity=severity,
        description=text,
        metadata={**metadata, "failing_rows": sum(broken.values()), **({"null_rows": dict(broken)} if check.name == "not_null" else {})},
    )


def _failing_rules(compiled_sql: str | None) -> tuple[dict[str, int] | None, str | None]:
    """{rule label: failing rows} of a ``model_rules`` test's compiled query run read-only on
    the warehouse (``analytics.query.execute_query``), or ``(None, why)``."""
    if not compiled_sql:
        return None, "its compiled query is not in run_results.json"
    from analytics.query import execute_query

    try:
        rows = execute_query(compiled_sql).rows
    except Exception as exc:  # noqa: BLE001 - the check still fails, saying why its rules are not named
        return None, f"its query could not be read back ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
    return {rule: int(n) for _number, rule, n in rows}, None


def named_check_events(invocation, context: dg.AssetExecutionContext) -> Iterator[Any]:
    """dagster-dbt's events of a running ``dbt build`` (``invocation``: a ``DbtCliInvocation``
    started with ``raise_on_error=False``), each dbt test's outcome as the results of its named
    checks (:func:`checks_by_test`; only checks selected in ``context``).

    A ``model_rules`` test that fails is reported after dbt exits, with the count of each
    broken rule (:func:`_failing_rules`); any other outcome as it comes. Tests with no
    selected named check (dbt's indirect selection) and every other node: dagster-dbt's own
    events. Does not raise when dbt fails (the caller does, after these events).
    """
    manifest = invocation.manifest
    # every check of the step's assets (not only the selected ones): names come out as in the definitions
    by_test = checks_by_test(manifest, dbt_tests(context.assets_def.node_check_specs_by_output_name.values()))
    selected = set(context.selected_asset_check_keys)
    failed: list[tuple[str, str, list]] = []
    for event in invocation.stream_raw_events():
        data = event.raw_event.get("data") or {}
        unique_id = (data.get("node_info") or {}).get("unique_id") or ""
        checks = [(k, c) for k, c in by_test.get(unique_id, []) if dg.AssetCheckKey(k, c.name) in selected]
        if not (checks and event.is_result_event):
            yield from event.to_default_asset_events(
                manifest=manifest,
                dagster_dbt_translator=invocation.dagster_dbt_translator,
                context=context,
                target_path=invocation.target_path,
                project=invocation.project,
            )
            continue
        status = str(data.get("status") or (data.get("node_info") or {}).get("node_status") or "").lower()
        if status == "skipped":
            continue
        grouped = any(c.labels for _k, c in checks)
        if status in ("fail", "warn") and grouped:
            failed.append((unique_id, status, checks))  # named once dbt has released the warehouse
            continue
        failures = None if status == "error" else {"": int(data.get("num_failures") or 0)}
        message = f"the dbt test could not run: {' '.join(str(data.get('msg') or status).split())[:300]}" if status == "error" else None
        for key, check in checks:
            yield check_result(key, check, status=status, test=dbt_test_label(manifest, unique_id), failing=failures, message=message)
    if failed:
        try:
            compiled = {r["unique_id"]: r.get("compiled_code") for r in invocation.get_artifact("run_results.json")["results"]}
        except (OSError, ValueError, KeyError):
            compiled = {}
        for unique_id, status, checks in failed:
            failing, why = _failing_rules(compiled.get(unique_id))
            if failing is not None and not any(failing.values()):
                failing, why = None, "dbt counted failing rows, reading them back found none"
            for key, check in checks:
                yield check_result(
                    key,
                    check,
                    status=status,
                    test=dbt_test_label(manifest, unique_id),
                    failing=failing,
                    message=f"the model's data test failed; which of its rules: {why}",
                )
