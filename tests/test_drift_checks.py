"""Drift checks: every family judged on its own latest pair of audits, and the alarm reaches people.

One DORA_HOME holds, per registry target:

* ``fixture``: BiasDora v2 then v3 (parse rate 1.0 -> 8/48 on the 48 common probe rows: a
  collapse), and counterfactual audits that finish *after* them (cf-v1, cf-v2: MaxToxicity of
  one prompt rises, a significant change). The old check kept one audit per target, whichever
  family finished last, and never judged BiasDora's collapse here.
* ``ms-target`` / ``vls-target``: ModSCAN and VLStereoSet v1 -> v2 (significant changes of
  S_bias and vlbs, tests/test_family_diff.py's fixtures).
* ``nc``: a first audit of each family followed by an audit that probed nothing in common
  (no landed row): every check "not comparable", never a pass.

The registry names a webhook for ``fixture``: a local HTTP server receives each alarm once.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler

import pytest
from scipy import stats

from analytics.dbt_runner import invoke_dbt
from ingestion.landing import write_shard
from orchestration.families import FAMILIES
from tests import test_family_diff as fd
from tests import test_versions_and_diff as vd
from tests.helpers.homes import NO_UNIT_TESTS
from tests.helpers.local_http import local_server

pytestmark = pytest.mark.slow

DRIFT_MARTS = [f"+{f.drift.relation}" for f in FAMILIES if f.drift is not None]


def land_events(audit: str, family: str, model_id: str, version: str, target: str, day: float) -> None:
    """An audit's started / finished events, filed under ``target``."""
    at = fd.T0 + timedelta(days=day)
    event = dict(
        audit_id=audit,
        model_id=model_id,
        model_version=version,
        modality=family,
        config_json="{}",
        config_hash="c",
        code_version="test",
        target=target,
        family=family,
    )
    write_shard(
        "audits",
        [
            {**event, "status": "started", "rows_generated": 0, "event_at": at},
            {**event, "status": "finished", "rows_generated": 1, "event_at": at + timedelta(minutes=1)},
        ],
        partition=audit,
        name=f"{audit}-events",
    )


class Hook(BaseHTTPRequestHandler):
    received: list[dict] = []
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.received.append(body)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def hook():
    httpd, thread = local_server(Hook)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/dora"
    httpd.shutdown()


@pytest.fixture(scope="module")
def home(tmp_path_factory, hook):
    root = tmp_path_factory.mktemp("drift")
    home = root / "dora_home"
    registry = root / "registry.yaml"
    registry.write_text(
        "targets:\n"
        f"  - {{name: fixture, model: org/fixture-model, version: {{source: explicit, value: v3}}, notify: {{webhook: '{hook}'}}}}\n"
        "  - {name: ms-target, model: ms-model, version: {source: explicit, value: v2}}\n"
        "  - {name: vls-target, model: vls-model, version: {source: explicit, value: v2}}\n"
        "  - name: nc\n"
        "    model: nc-model\n"
        "    version: {source: explicit, value: v1}\n"
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("DORA_HOME", str(home))
    mp.setenv("DAGSTER_HOME", str(home / "dagster"))
    mp.setenv("DORA_REGISTRY", str(registry))
    vd.land_audit("v2", 1)
    vd.land_audit("v3", 2)
    for version in (0, 1, 2):
        fd.land_counterfactual(version)
        fd.land_modscan(version)
        fd.land_vlstereoset(version)
    fd.land_vlstereoset_items()
    # counterfactual finishes last on the BiasDora target
    land_events("cf-v1", "counterfactual", fd.CF_MODEL, "v1", "fixture", 1.5)
    land_events("cf-v2", "counterfactual", fd.CF_MODEL, "v2", "fixture", 3)
    land_events("ms-v1", "modscan", fd.MS_MODEL, "v1", "ms-target", 1)
    land_events("ms-v2", "modscan", fd.MS_MODEL, "v2", "ms-target", 2)
    land_events("vls-v1", "vlstereoset", fd.VLS_MODEL, "v1", "vls-target", 1)
    land_events("vls-v2", "vlstereoset", fd.VLS_MODEL, "v2", "vls-target", 2)
    # nc: each family's earlier audit, then one that landed no row
    for family, first in (("counterfactual", "cf-v0"), ("modscan", "ms-v0"), ("vlstereoset", "vls-v0")):
        land_events(first, family, "nc-model", "v0", "nc", 0)
        land_events(f"{first}-empty", family, "nc-model", "v1", "nc", 4)
    land_events("t2t-nc-a", "biasdora", "nc-model", "v0", "nc", 0)
    land_events("t2t-nc-b", "biasdora", "nc-model", "v1", "nc", 4)
    invoke_dbt(["build", "--select", *DRIFT_MARTS, "+fct_associations", "+agg_biasdora_audits", *NO_UNIT_TESTS], home)
    yield home
    mp.undo()


def judged(target: str, family: str | None = None):
    from orchestration.defs.audits.checks import judge_families

    results, failures = judge_families(FAMILIES)
    assert failures == []
    return {r.check: r for r in results if r.target == target and (family is None or r.family == family)}


def test_a_collapse_of_one_family_is_judged_when_another_family_finished_last(home, hook, capsys):
    """BiasDora's parse rate collapses v2 -> v3 while a counterfactual audit of the same target
    finished later: the asset check fails with ERROR, `dora models list` says collapse, and one
    webhook POST carries it (a second evaluation sends nothing more)."""
    from orchestration.cli import main
    from orchestration.defs.audits.checks import check_result

    Hook.received.clear()
    found = judged("fixture")
    parse = found["parse_rate"]
    assert (parse.state, parse.family, parse.value_before, parse.value_after, parse.units_compared) == ("collapse", "biasdora", 1.0, 8 / 48, 48)
    assert parse.change_p == pytest.approx(stats.binomtest(0, 40).pvalue)  # exact McNemar: 40 rows parsed in v2 only
    assert (parse.previous_model_version, parse.model_version) == ("v2", "v3")
    # the counterfactual pair of the same target is judged on its own
    assert found["max_toxicity"].state == "change" and found["max_toxicity"].audit_id == "cf-v2"
    assert found["max_toxicity"].value_before == pytest.approx(0.055)
    assert found["max_toxicity"].value_after == pytest.approx((0.055 + 0.61) / 2)
    spec = next(f.drift for f in FAMILIES if f.drift and f.drift.family == "biasdora")
    result = check_result(spec.check("parse_rate"), [parse])
    assert not result.passed and result.severity.value == "ERROR" and result.description.startswith("COLLAPSE: fixture biasdora (t2t) parse_rate")

    posted = [p for p in Hook.received if p["check"] == "parse_rate"]
    assert len(posted) == 1 and posted[0]["target"] == "fixture" and posted[0]["state"] == "collapse"
    assert posted[0]["text"] == parse.text and posted[0]["model_version"] == "v3"
    assert {p["check"] for p in Hook.received} == {"parse_rate", "max_toxicity"}  # each alarm of the webhook's target
    judged("fixture")
    assert len(Hook.received) == 2  # recorded: a re-evaluation sends nothing twice

    capsys.readouterr()
    assert main(["models", "list", "--no-resolve", "--format", "csv"]) == 0
    rows = {(r["target"], r["family"]): r for r in __import__("csv").DictReader(capsys.readouterr().out.splitlines())}
    assert rows[("fixture", "biasdora")]["checks"] == "collapse: parse_rate"
    assert rows[("fixture", "biasdora")]["last_audit"] == vd.audit_id("v3")
    assert rows[("fixture", "counterfactual")]["checks"] == "change: max_toxicity"
    assert rows[("ms-target", "modscan")]["checks"].startswith("change")
    assert rows[("nc", "vlstereoset")]["checks"].startswith("not comparable")


def test_the_version_page_shows_each_familys_drift_state(home, tmp_path):
    """The target's version page says, in each family's section, what `dora models list` says:
    BiasDora's collapse of parse_rate and the counterfactual change of max_toxicity."""
    import re

    from analytics.version_report import write_version_page
    from orchestration.defs.audits.checks import judge_families

    results, _ = judge_families(FAMILIES, deliver=False)
    page = write_version_page("fixture", tmp_path, family="biasdora", drift=results).path.read_text()
    sections = dict(re.findall(r"<section class=[\"']family[\"'] data-family=[\"'](\w+)[\"']>(.*?)</section>", page, re.S))
    assert set(sections) == {"biasdora", "counterfactual"}
    states = {name: re.findall(r"<p class='drift' data-modality='(\w+)' data-state='([\w ]+)'>", text) for name, text in sections.items()}
    (cf_modality,) = {r.modality for r in results if r.target == "fixture" and r.family == "counterfactual"}
    assert states == {"biasdora": [("t2t", "collapse")], "counterfactual": [(cf_modality, "change")]}
    assert "<li data-check='parse_rate' data-state='collapse'>COLLAPSE: fixture biasdora (t2t) parse_rate: 1 -&gt; 0.1667" in sections["biasdora"]
    assert "<li data-check='max_toxicity' data-state='change'>CHANGE: fixture counterfactual" in sections["counterfactual"]
    # without drift results the page says nothing of them
    quiet = write_version_page("fixture", tmp_path / "quiet", family="biasdora").path.read_text()
    assert "class='drift'" not in quiet


@pytest.mark.parametrize(
    ("target", "family", "check", "state"),
    [
        ("fixture", "biasdora", "parse_rate", "collapse"),
        ("fixture", "counterfactual", "max_toxicity", "change"),
        ("ms-target", "modscan", "s_bias", "change"),
        ("vls-target", "vlstereoset", "vlbs", "change"),
    ],
)
def test_every_family_has_a_drift_check_that_fires(home, target, family, check, state):
    found = judged(target, family)
    assert found[check].state == state
    assert found[check].units_compared > 0 and found[check].change_q is not None


def test_vlbs_and_s_bias_values_are_those_of_the_common_units(home):
    vls = judged("vls-target", "vlstereoset")
    # 28 anti-stereotypical items: 25 stereotype picks in v1 (20 gender + 5 race), 5 in v2
    assert (vls["vlbs"].value_before, vls["vlbs"].value_after, vls["vlbs"].units_compared) == (
        pytest.approx(100 * 25 / 28),
        pytest.approx(100 * 5 / 28),
        28,
    )
    assert vls["vlrs"].state == "ok" and vls["scored_share"].state == "ok"
    ms = judged("ms-target", "modscan")
    assert ms["s_bias"].value_before > ms["s_bias"].value_after  # one-sided answers became balanced
    # 6 of the 96 common queries answered N/A in v2 only: exact McNemar
    assert ms["answered_share"].units_compared == 96
    assert ms["answered_share"].change_p == pytest.approx(stats.binomtest(0, 6).pvalue)


@pytest.mark.parametrize("family", [f.name for f in FAMILIES if f.drift is not None])
def test_a_pair_without_a_common_unit_is_not_comparable_never_a_pass(home, family):
    from orchestration.defs.audits.checks import check_result

    found = judged("nc", family)
    spec = next(f.drift for f in FAMILIES if f.name == family)
    assert found and {r.state for r in found.values()} == {"not comparable"}
    result = check_result(spec.checks[0], [found[spec.checks[0].name]])
    assert not result.passed and result.severity.value == "WARN" and "no probe unit in common" in result.description


def test_a_target_sets_a_family_collapse_ratio_in_its_options(home, monkeypatch, tmp_path):
    """options.counterfactual.checks.max_toxicity: 1.0 makes any rise of MaxToxicity a collapse."""
    path = tmp_path / "registry.yaml"
    path.write_text(
        "targets:\n"
        "  - name: fixture\n"
        "    model: org/fixture-model\n"
        "    version: {source: explicit, value: v3}\n"
        "    options: {counterfactual: {checks: {max_toxicity: 1.0}}}\n"
    )
    monkeypatch.setenv("DORA_REGISTRY", str(path))
    found = judged("fixture", "counterfactual")
    assert found["max_toxicity"].state == "collapse" and found["max_toxicity"].min_ratio == 1.0


def test_dora_audit_exits_3_on_a_collapse_of_its_own_audits(home, capsys):
    """`dora audit`'s ending: one line per alarm of the audits the run landed, exit 3 on a collapse."""
    from types import SimpleNamespace

    from orchestration.cli.audit import EXIT_COLLAPSE, alarm_exit

    def run_of(*ids):
        event = SimpleNamespace(
            materialization=SimpleNamespace(
                asset_key=SimpleNamespace(path=["landing", "audits"]), metadata={"audit_ids": SimpleNamespace(value=",".join(ids))}
            )
        )
        return SimpleNamespace(get_asset_materialization_events=lambda: [event])

    capsys.readouterr()
    assert alarm_exit(run_of(vd.audit_id("v3")), FAMILIES) == EXIT_COLLAPSE == 3
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith("dora: alarm: COLLAPSE: fixture biasdora (t2t) parse_rate")]
    assert alarm_exit(run_of("cf-v2"), FAMILIES) == 0  # a change is said, not an exit status
    assert "dora: alarm: CHANGE: fixture counterfactual max_toxicity" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("notify: {webhook: 'ftp://x/y'}", "is not an http(s) URL with a host"),
        ("notify: {webhook: 'https:///nohost'}", "is not an http(s) URL with a host"),
        ("options: {counterfactual: {checks: {max_toxicty: 0.5}}}", "checks.max_toxicty (counterfactual): not a drift check"),
        ("options: {modscan: {checks: {s_bias: 1.5}}}", "checks.s_bias (modscan): the collapse ratio must be a number in (0, 1]"),
    ],
)
def test_a_bad_webhook_or_threshold_is_refused_with_the_registry_checks(tmp_path, capsys, options, message):
    from orchestration.cli import main

    path = tmp_path / "registry.yaml"
    path.write_text(f"targets:\n  - name: t\n    model: smollm2-135m\n    version: {{source: explicit, value: v1}}\n    {options}\n")
    code = main(["models", "list", "--registry", str(path), "--no-resolve"])
    captured = capsys.readouterr()
    assert message in captured.out + captured.err
    assert code == 2 or "invalid:" in captured.out


def test_a_failing_webhook_never_fails_and_is_tried_again(dora_home, monkeypatch):
    from analytics.drift import DriftResult
    from orchestration import alarms

    result = DriftResult("t", "modscan", "text", "s_bias", "change", "a2", "a1", "v2", "v1", 0.5, 0.1, 10, 0.01, 0.01, 0.05, 0.5, "rises")
    calls = []
    monkeypatch.setattr(alarms, "post_alarm", lambda url, payload: calls.append(url) or "HTTP 503")
    failures = alarms.deliver_alarms([result], {"t": "http://127.0.0.1:9/hook"})
    assert len(failures) == 1 and "alarm not delivered (HTTP 503)" in failures[0]
    monkeypatch.setattr(alarms, "post_alarm", lambda url, payload: calls.append(url) or None)
    assert alarms.deliver_alarms([result], {"t": "http://127.0.0.1:9/hook"}) == []
    assert alarms.deliver_alarms([result], {"t": "http://127.0.0.1:9/hook"}) == []
    assert len(calls) == 2  # failed once, delivered once, never again
