"""A step that fails inside the Dagster run is one line on the terminal, for every family.

``dora audit`` prints ``dora audit: error: <cause and fix>`` for a failure dora knows (a
:class:`~ingestion.errors.DoraError` anywhere in the step's error chain) and ``... failed
unexpectedly (<Exception>: <first line>); full trace: <log>`` for any other, then where the
stack traces are (``$DORA_HOME/logs/audit-<run id>.log``); the traceback itself never reaches
the terminal. The unit test runs a real Dagster job in-process; the end-to-end cases run
``dora audit`` as a subprocess per family with an input that makes its step fail.
"""

from __future__ import annotations

import re
import subprocess

import dagster as dg
import pytest

from ingestion.errors import InputFileError
from orchestration.cli.audit import failure_lines
from tests.helpers.dora_cli import dora_argv, dora_env, free_port


def _failed_run(tmp_path, *errors):
    ops = []
    for i, error in enumerate(errors):

        @dg.op(name=f"step_{i}")
        def step(error=error):
            raise error

        ops.append(step)

    @dg.job
    def job():
        for op in ops:
            op()

    return job.execute_in_process(raise_on_error=False, instance=dg.DagsterInstance.ephemeral())


def test_known_and_unexpected_step_failures_are_one_line_each_and_the_traces_go_to_the_log(tmp_path):
    result = _failed_run(
        tmp_path, InputFileError("faces manifest /x.csv: empty file, expected a header"), ZeroDivisionError("division by zero\nsecond line")
    )
    lines = failure_lines(result, tmp_path, tmp_path / "out.log")
    log = tmp_path / f"audit-{result.run_id}.log"
    assert lines[0] == "dora audit: error: faces manifest /x.csv: empty file, expected a header"
    assert lines[1] == f"dora audit: error: step step_1 failed unexpectedly (ZeroDivisionError: division by zero); full trace: {log}"
    assert lines[2] == f"dora: audit failed (Dagster run {result.run_id}); stack traces: {log}" and len(lines) == 3
    text = log.read_text()
    assert "===== step step_0 failed" in text and "===== step step_1 failed" in text and "Stack Trace" in text
    assert "Traceback" not in "\n".join(lines)


def test_more_failed_steps_than_lines_are_counted(tmp_path):
    result = _failed_run(tmp_path, *(InputFileError(f"bad file {i}") for i in range(4)))
    lines = failure_lines(result, tmp_path, tmp_path / "out.log")
    assert lines[:2] == ["dora audit: error: bad file 0", "dora audit: error: bad file 1"]
    assert "2 more failed steps" in lines[2] and len(lines) == 3


def _vlstereoset_bad_header(tmp_path):
    bad = tmp_path / "vls.csv"
    bad.write_text("a,b,c\n1,2,3\n")
    return [
        "--family",
        "vlstereoset",
        "--vlstereoset-csv",
        str(bad),
    ], r"line 1: missing column\(s\) \['bias_type', .* in the header \['a', 'b', 'c'\]"


def _counterfactual_unknown_occupation(tmp_path):
    return ["--family", "counterfactual", "--cf-occupations", "zz-no-such-job"], r"occupation\(s\) not in the race_gender sets"


def _modscan_unreachable_server(tmp_path):
    port = free_port()  # nothing listens on it
    return (
        [
            "--family",
            "modscan",
            "--modscan-backend",
            "openai",
            "--modscan-base-url",
            f"http://127.0.0.1:{port}/v1",
            "--modscan-model",
            "stub",
            "--modscan-instances",
            "1",
            "--modscan-probes",
            "modscan_text_persona",
            "--modscan-attributes",
            "gender",
            "--modscan-conditions",
            "original",
        ],
        rf"ModSCAN text analogues: 1 of 1 calls failed .*connection refused\) at http://127\.0\.0\.1:{port}/v1",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [_vlstereoset_bad_header, _counterfactual_unknown_occupation, _modscan_unreachable_server],
    ids=["vlstereoset-bad-header", "counterfactual-unknown-occupation", "modscan-unreachable-server"],
)
def test_a_failing_step_is_one_error_line_and_a_log_path(tmp_path, case):
    argv, cause = case(tmp_path)
    home = tmp_path / "home"
    proc = subprocess.run(
        dora_argv("audit", *argv, "--no-progress"), env=dora_env(home, OPENAI_API_KEY="sk-test"), capture_output=True, text=True, timeout=600
    )
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and len(err) <= 3, proc.stderr[-3000:]
    errors = [line for line in err if line.startswith("dora audit: error: ")]
    assert len(errors) == 1 and re.search(cause, errors[0]), proc.stderr
    log = re.search(r"stack traces: (\S+\.log)$", err[-1])
    assert log and (home / "logs").resolve() == type(home)(log.group(1)).resolve().parent, err[-1]
    assert "Stack Trace" in type(home)(log.group(1)).read_text()


def test_summary_names_rows_quarantined_per_family_when_not_zero():
    """The summary line of each family whose landing assets set input rows aside (a real run of
    assets keyed like the families' landing tables, with their ``rows_quarantined`` metadata)."""
    from orchestration import families as fam
    from orchestration.cli.audit import quarantine_lines

    def landing(table, n, **more):
        @dg.asset(key=["landing", table])
        def _asset():
            return dg.MaterializeResult(metadata={"rows_quarantined": n, **more})

        return _asset

    result = dg.materialize(
        [landing("vlstereoset_items", 3), landing("counterfactual_responses", 0), landing("modscan_responses", 1200), landing("t2t_completions", 0)],
        instance=dg.DagsterInstance.ephemeral(),
    )
    lines = quarantine_lines(result, fam.FAMILIES)
    assert [line.split(" (")[0] for line in lines] == ["modscan: rows_quarantined 1,200", "vlstereoset: rows_quarantined 3"]
    assert all("landing/input_quarantine" in line for line in lines)
    # the counterfactual lexicon's and image sets' counts add up
    result = dg.materialize([landing("counterfactual_responses", 2, image_rows_quarantined=5)], instance=dg.DagsterInstance.ephemeral())
    assert [line.split(" (")[0] for line in quarantine_lines(result, fam.FAMILIES)] == ["counterfactual: rows_quarantined 7"]
