"""The resumable probe loop (models_inference/resumable.py) on a scratch DORA_HOME, with a fake
generate callback writing real rows to the real ``t2t_completions`` / ``t2i_images`` landing
tables: shards, audit events, resume after a crash (an exception, and a SIGKILL of a real
process), retried statuses, progress bar."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ingestion.landing import read_landing
from models_inference.audit_log import CODE_VERSION, AuditInfo
from models_inference.resumable import ResumableTable, land_resumable, landed_keys, model_columns

REPO = Path(__file__).resolve().parents[1]
T2T = ResumableTable("t2t_completions", ("setting", "descriptor", "letter", "run"), "parse_status", unit="prompt")
#: 3 descriptors x 2 letters x 2 runs = 12 planned keys; shards of 5 -> 5 + 5 + 2 rows.
PLANNED = [("singular", d, letter, run) for d in ("child", "old person", "o'brien") for letter in "bc" for run in (1, 2)]
CONFIG = {"backend": "fake", "runs": 2, "letters": "bc"}


class FakeBackend:
    backend_name, model_id, model_version = "fake", "org/fake-model", "v1"


def t2t_row(audit_id: str, key: tuple) -> dict:
    """A full t2t_completions row for a (setting, descriptor, letter, run) key."""
    setting, descriptor, letter, run = key
    word = f"{letter}rave"
    return {
        **model_columns(audit_id, FakeBackend),
        "setting": setting,
        "descriptor": descriptor,
        "bias_dimension": "age",
        "letter": letter,
        "run": run,
        "seed": run,
        "prompt_style": "chat",
        "prompt": f"{descriptor} is [{letter}...]",
        "raw_output": f"[{word}]",
        "word": word,
        "parse_status": "ok" if letter == "b" else "wrong_letter",
        "generated_at": datetime.now(timezone.utc),
    }


class FakeGenerate:
    """generate_batch callback: records every batch, raises on batch ``fail_on`` (1-based)."""

    def __init__(self, audit_id: str, fail_on: int | None = None):
        self.audit_id, self.fail_on, self.batches = audit_id, fail_on, []

    def __call__(self, batch, advance):
        self.batches.append(list(batch))
        if len(self.batches) == self.fail_on:
            raise RuntimeError("simulated backend crash")
        advance(len(batch))
        return [t2t_row(self.audit_id, key) for key in batch]


def audit(audit_id: str, target: str | None = "tgt") -> AuditInfo:
    return AuditInfo(audit_id, FakeBackend.model_id, FakeBackend.model_version, "t2t", CONFIG, target)


def run(audit_id: str, generate, planned=PLANNED, **kwargs):
    return land_resumable(planned, lambda k: k, generate, table=T2T, audit=audit(audit_id), shard_rows=5, **kwargs)


def landed(audit_id: str) -> list[dict]:
    return [r for r in read_landing("t2t_completions").to_pylist() if r["audit_id"] == audit_id]


def events(audit_id: str) -> list[dict]:
    rows = [e for e in read_landing("audits").to_pylist() if e["audit_id"] == audit_id]
    return sorted(rows, key=lambda e: e["event_at"])


def shard_sizes(dora_home: Path, audit_id: str) -> list[int]:
    import pyarrow.parquet as pq

    folder = dora_home / "landing" / "t2t_completions" / audit_id
    return sorted(pq.read_metadata(p).num_rows for p in folder.glob("*.parquet"))


def key_of(row: dict) -> tuple:
    return (row["setting"], row["descriptor"], row["letter"], row["run"])


def test_fresh_run_lands_every_key_in_shards_with_audit_events_and_progress(dora_home, capsys):
    gen = FakeGenerate("a1")
    summary = run("a1", gen, progress=True)
    assert (summary.planned, summary.already_landed, summary.generated) == (12, 0, 12)
    assert dict(summary.statuses) == {"ok": 6, "wrong_letter": 6}
    assert [len(b) for b in gen.batches] == [5, 5, 2]
    assert shard_sizes(dora_home, "a1") == [2, 5, 5]
    rows = landed("a1")
    assert len(rows) == 12 and sorted(map(key_of, rows)) == sorted(PLANNED)
    assert {(r["model_id"], r["model_version"], r["backend"]) for r in rows} == {("org/fake-model", "v1", "fake")}
    ev = events("a1")
    assert [(e["status"], e["rows_generated"]) for e in ev] == [("started", 0), ("finished", 12)]
    cfg = json.dumps(CONFIG, sort_keys=True)
    for e in ev:
        assert (e["modality"], e["target"], e["code_version"], e["config_json"]) == ("t2t", "tgt", CODE_VERSION, cfg)
        assert e["config_hash"] == hashlib.sha256(cfg.encode()).hexdigest()[:16]
        assert (e["model_id"], e["model_version"]) == ("org/fake-model", "v1")
    bar = capsys.readouterr().err
    assert "T2T org/fake-model" in bar and "12/12" in bar and "prompt" in bar


def test_exception_mid_run_lands_failed_event_keeps_shards_and_resume_lands_only_missing_keys(dora_home):
    with pytest.raises(RuntimeError, match="simulated backend crash"):
        run("a2", FakeGenerate("a2", fail_on=3), progress=False)
    assert shard_sizes(dora_home, "a2") == [5, 5]
    first_ten = set(PLANNED[:10])
    assert set(map(key_of, landed("a2"))) == first_ten
    assert [(e["status"], e["rows_generated"]) for e in events("a2")] == [("started", 0), ("failed", 10)]

    gen = FakeGenerate("a2")
    summary = run("a2", gen, progress=False)
    assert (summary.planned, summary.already_landed, summary.generated) == (12, 10, 2)
    assert gen.batches == [PLANNED[10:]]  # only the missing keys reach the model
    rows = landed("a2")
    assert len(rows) == 12 and len(set(map(key_of, rows))) == 12  # every key exactly once
    assert [(e["status"], e["rows_generated"]) for e in events("a2")][2:] == [("started", 0), ("finished", 2)]

    # nothing missing: no model call, no event, no shard
    idle = FakeGenerate("a2")
    again = run("a2", idle, progress=False)
    assert (again.planned, again.already_landed, again.generated, idle.batches) == (12, 12, 0, [])
    assert len(events("a2")) == 4 and len(landed("a2")) == 12


def test_keyboard_interrupt_is_recorded_as_failed(dora_home):
    def interrupted(batch, advance):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run("a3", interrupted, progress=False)
    assert [(e["status"], e["rows_generated"]) for e in events("a3")] == [("started", 0), ("failed", 0)]
    assert landed("a3") == []


KILLED_CHILD = """
import os, signal, sys
from tests.test_resumable import FakeGenerate, run

class KilledOnThirdBatch(FakeGenerate):
    def __call__(self, batch, advance):
        if len(self.batches) == 2:
            os.kill(os.getpid(), signal.SIGKILL)  # no except/finally runs: a real crash
        return super().__call__(batch, advance)

run(sys.argv[1], KilledOnThirdBatch(sys.argv[1]), progress=False)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_sigkilled_process_resumes_with_only_the_missing_keys_exactly_once(dora_home):
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_CHILD, "killed"],
        cwd=REPO,
        env={**os.environ, "DORA_HOME": str(dora_home)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == -9, proc.stderr
    assert shard_sizes(dora_home, "killed") == [5, 5]
    assert [e["status"] for e in events("killed")] == ["started"]  # killed: no chance to say 'failed'
    assert landed_keys(T2T, "killed") == set(PLANNED[:10])

    gen = FakeGenerate("killed")
    summary = run("killed", gen, progress=False)
    assert (summary.already_landed, summary.generated) == (10, 2) and gen.batches == [PLANNED[10:]]
    rows = landed("killed")
    assert len(rows) == 12 and sorted(map(key_of, rows)) == sorted(PLANNED)


def test_keys_are_per_audit_and_quotes_are_safe(dora_home):
    run("it's", FakeGenerate("it's"), progress=False)
    assert landed_keys(T2T, "it's") == set(PLANNED)
    assert landed_keys(T2T, "other") == set()
    gen = FakeGenerate("other")
    assert run("other", gen, planned=PLANNED[:3], progress=False).generated == 3
    assert len(read_landing("t2t_completions")) == 15


def test_only_final_statuses_count_as_landed(dora_home):
    """A T2I-style table: 'error' rows are retried by the next run, 'ok' / 'refused' are not."""
    table = ResumableTable("t2i_images", ("setting", "descriptor", "image_index"), "status", ("ok", "refused"), unit="image")
    planned = [("singular", "child", i) for i in range(1, 7)]
    outcome = {1: "ok", 2: "error", 3: "refused", 4: "error", 5: "ok", 6: "error"}
    calls = []

    def draw(batch, advance):
        calls.append([k[2] for k in batch])
        advance(len(batch))
        return [
            {
                **model_columns("img", FakeBackend),
                "setting": s,
                "descriptor": d,
                "bias_dimension": "age",
                "image_index": i,
                "seed": i,
                "prompt": "Generate an image of a child",
                "status": outcome[i],
                "error": "api down" if outcome[i] == "error" else None,
                "generated_at": datetime.now(timezone.utc),
            }
            for s, d, i in batch
        ]

    info = AuditInfo("img", "org/fake-model", "v1", "t2i", {"steps": 2})
    first = land_resumable(planned, lambda k: k, draw, table=table, audit=info, shard_rows=4, progress=False)
    assert (first.generated, dict(first.statuses)) == (6, {"ok": 2, "error": 3, "refused": 1})
    for i in (2, 4, 6):
        outcome[i] = "ok"
    second = land_resumable(planned, lambda k: k, draw, table=table, audit=info, shard_rows=4, progress=False)
    assert (second.already_landed, second.generated, dict(second.statuses)) == (3, 3, {"ok": 3})
    assert calls == [[1, 2, 3, 4], [5, 6], [2, 4, 6]]
    rows = read_landing("t2i_images").to_pylist()
    assert len(rows) == 9 and sum(r["status"] == "ok" for r in rows) == 5
    assert landed_keys(table, "img") == set(planned)


def test_bad_arguments_are_clear_errors_and_land_nothing(dora_home):
    with pytest.raises(ValueError, match="shard_rows must be >= 1, got 0"):
        land_resumable(PLANNED, lambda k: k, FakeGenerate("z"), table=T2T, audit=audit("z"), shard_rows=0)
    assert read_landing("audits").num_rows == 0 and read_landing("t2t_completions").num_rows == 0
    with pytest.raises(ValueError, match=r"landing table 't2t_completions' has no column\(s\) \['image_index'\]"):
        ResumableTable("t2t_completions", ("setting", "image_index"), "parse_status")
    with pytest.raises(ValueError, match="no key column"):
        ResumableTable("t2t_completions", (), "parse_status")
    with pytest.raises(KeyError):
        ResumableTable("no_such_table", ("a",), "status")


def test_events_carry_the_family_and_an_old_shard_without_it_still_reads(dora_home):
    """Every event names the probe family (kept when the run adds its identity to the config,
    and copied by the blocks' ``finished`` event); an event shard landed before the audit log
    had a ``family`` column reads beside them with a null family (dbt's stg_audits then maps
    it from the modality)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ingestion.landing import SCHEMAS, landing_dir
    from models_inference.audit_log import audit_events
    from models_inference.resumable import finish_blocks

    info = AuditInfo("fam", FakeBackend.model_id, FakeBackend.model_version, "t2t", CONFIG, "tgt", family="biasdora")
    land_resumable(
        PLANNED[:4], lambda k: k, FakeGenerate("fam"), table=T2T, audit=info, shard_rows=5, identity={"backend": "fake"}, block="b0", progress=False
    )
    assert finish_blocks("fam", 4)
    assert [(e["status"], e["family"]) for e in audit_events("fam")] == [("started", "biasdora"), ("finished", "biasdora")]
    old = {**{k: v for k, v in info.event("finished", 3).items() if k != "family"}, "audit_id": "old"}
    old_schema = pa.schema([f for f in SCHEMAS["audits"] if f.name != "family"])
    (landing_dir("audits") / "old").mkdir()
    pq.write_table(pa.Table.from_pylist([old], schema=old_schema), landing_dir("audits") / "old" / "old.parquet")
    assert [(e["modality"], e["family"], e["rows_generated"]) for e in audit_events("old")] == [("t2t", None, 3)]
    assert {e["audit_id"]: e["family"] for e in read_landing("audits").to_pylist()} == {"fam": "biasdora", "old": None}


def test_run_probe_stamps_each_shard_once_its_calls_returned_and_lands_the_audit(dora_home):
    """``land_probe``: the rows of ``generate_rows`` get the model columns and one ``generated_at``
    per shard, read after the shard's calls; the events carry modality, family, target and the
    config with the backend's name."""
    from models_inference.audit_log import audit_events
    from models_inference.resumable import land_probe

    returned: list[datetime] = []

    def generate_rows(batch, advance):
        advance(len(batch))
        rows = [
            {k: v for k, v in t2t_row("p", key).items() if k not in ("audit_id", "model_id", "model_version", "backend", "generated_at")}
            for key in batch
        ]
        returned.append(datetime.now(timezone.utc))
        return rows

    summary = land_probe(
        PLANNED,
        lambda k: k,
        generate_rows,
        table=T2T,
        backend=FakeBackend,
        audit_id="p",
        modality="t2t",
        config={"runs": 2},
        family="biasdora",
        target="tgt",
        shard_rows=5,
        progress=False,
    )
    assert (summary.generated, dict(summary.statuses)) == (12, {"ok": 6, "wrong_letter": 6})
    rows = landed("p")
    assert {(r["audit_id"], r["model_id"], r["model_version"], r["backend"]) for r in rows} == {("p", "org/fake-model", "v1", "fake")}
    stamps = sorted({r["generated_at"] for r in rows})
    assert len(stamps) == 3 and [sum(r["generated_at"] == s for r in rows) for s in stamps] == [5, 5, 2]
    assert all(after <= stamp for after, stamp in zip(returned, stamps, strict=True))
    assert all(stamp <= after for stamp, after in zip(stamps, returned[1:], strict=False))
    assert [(e["status"], e["modality"], e["family"], e["target"], json.loads(e["config_json"])) for e in audit_events("p")] == [
        (status, "t2t", "biasdora", "tgt", {"backend": "fake", "runs": 2}) for status in ("started", "finished")
    ]
