"""Hostile batch outputs and ledgers: every line of an output is checked against a pydantic
model of its shape, a bad line is quarantined with its line number and reason while the rest
lands (the ledger entry never stays in ``landing``), lines split on ``\\n`` only (U+2028 and
U+0085 inside an answer are text), and a ledger that cannot be read is named in one line.

Against the local Files + Batches server (tests/helpers/batch_server.py) and files the tests write.
"""

from __future__ import annotations

import json

import pytest

from ingestion.errors import BatchError
from ingestion.landing import read_landing
from models_inference.backends.batch_ledger import ledger_path, load_ledger
from models_inference.backends.batch_lines import read_output
from models_inference.backends.batch_requests import BatchOptions
from models_inference.backends.openai_chat import OpenAIChatBackend
from models_inference.probes.biasdora.t2t import probe_t2t
from tests.helpers.batch_server import BatchStubServer, offline_run
from tests.test_batch_api import CHAT, TEMPLATES, _answered, _rows, letter_reply

FLAGS = ["--model", "stub-model", "--prompt-style", "chat", "--descriptors", "child", "--settings", "noun", "--letters", "bks", "--runs", "2"]


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")


def _good(cid: str, text: str = "[kind]") -> dict:
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "stub-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }
    return {"id": "r", "custom_id": cid, "response": {"status_code": 200, "request_id": "q", "body": body}, "error": None}


def _quarantine() -> list[dict]:
    return sorted(read_landing("input_quarantine").to_pylist(), key=lambda r: r["source_line"])


def test_read_output_quarantines_each_bad_shape_and_splits_on_newlines_only():
    rows = [
        json.dumps(_good("a", "a\u2028b\x85c")),  # raw U+2028 / U+0085 inside a JSON string: legal
        json.dumps({**_good("x"), "custom_id": ["singular", "child"]}),
        json.dumps({**_good("x"), "custom_id": 7}),
        json.dumps({**_good("x"), "custom_id": None}),
        json.dumps({**_good("x"), "response": "HTTP 200"}),
        json.dumps({"custom_id": "x"}),
        "[1, 2]",
        json.dumps(_good("b")),
        json.dumps(_good("c"))[:40],  # the runner killed mid-write
    ]
    text = "\n".join(rows).replace("\\u2028", "\u2028").replace("\\u0085", "\x85")
    assert "\u2028" in text and len(text.splitlines()) > len(rows)  # what str.splitlines would have split
    good, bad = read_output(text)
    assert [(n, line.custom_id) for n, line in good] == [(1, "a"), (8, "b")]
    assert good[0][1].response.body["choices"][0]["message"]["content"] == "a\u2028b\x85c"
    assert [(b.line, b.reason.split(":")[0].split(" (")[0]) for b in bad] == [
        (2, "custom_id"),
        (3, "custom_id"),
        (4, "custom_id"),
        (5, "response"),
        (6, "line"),
        (7, "a JSON list, not an object"),
        (9, "not JSON"),
    ]


def test_an_api_output_with_bad_lines_lands_the_rest_and_sends_the_bad_ones_again(dora_home, api_key):
    def corrupt(rows: list[dict]) -> str:  # the first batch's output: line 2 a list id, line 3 a string response, the last cut short
        corrupt.calls += 1
        if corrupt.calls > 1:
            return "".join(json.dumps(r) + "\n" for r in rows)
        lines = [json.dumps(r) for r in rows]
        lines[1] = json.dumps({**rows[1], "custom_id": ["noun", "child", 1, "b", 1]})
        lines[2] = json.dumps({**rows[2], "response": "ok"})
        lines[-1] = lines[-1][:30]
        return "\n".join(lines)

    corrupt.calls = 0
    with BatchStubServer() as server:
        server.chat_reply, server.output_text = letter_reply, corrupt
        summary = probe_t2t(
            TEMPLATES,
            OpenAIChatBackend("stub-model", base_url=server.base_url),
            CHAT,
            progress=False,
            batch=BatchOptions(wait=True, poll_seconds=0.01),
        )
        assert [len(server.lines_of(b)) for b in server.created] == [12, 3]  # the 3 bad lines' requests, sent again
    entries = load_ledger(summary.audit_id).entries
    assert [(e.state, e.landed, e.not_run, e.quarantined) for e in entries] == [("closed", 9, 3, 3), ("closed", 3, 0, 0)]
    rows = _rows(summary.audit_id)
    assert len(rows) == 12 and set(_answered(rows).values()) == {1} and summary.quarantined == 3
    bad = _quarantine()
    assert [r["source_line"] for r in bad] == [2, 3, 12] and {r["dataset_id"] for r in bad} == {f"batch-{entries[0].id}"}
    assert bad[0]["reason"].endswith("custom_id: Input should be a valid string") and "not JSON" in bad[2]["reason"]
    assert {r["family"] for r in bad} == {"biasdora"}


def test_import_quarantines_hostile_lines_and_lands_the_rest(dora_home, tmp_path, capsys):
    from orchestration.cli import main

    assert main(["batch", "export", "--out", str(tmp_path / "out"), *FLAGS]) == 0
    (path,) = [p for p in (tmp_path / "out").iterdir() if p.suffix == ".jsonl"]
    capsys.readouterr()
    offline_run(path, tmp_path / "ok.out", lambda body: "[kind]\u2028and\x85so")
    lines = (tmp_path / "ok.out").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == 6 and "\u2028" not in "".join(lines)  # json.dumps escapes them: make them raw, as a runner may
    lines = [line.replace("\\u2028", "\u2028").replace("\\u0085", "\x85") for line in lines]
    lines[1] = json.dumps({**json.loads(lines[1]), "custom_id": 3})
    lines[2] = json.dumps({**json.loads(lines[2]), "custom_id": None})
    lines[3] = json.dumps({**json.loads(lines[3]), "response": "done"})
    lines[5] = lines[5][:50]
    (tmp_path / "bad.out").write_text("\n".join(lines), encoding="utf-8")
    assert main(["batch", "import", str(tmp_path / "bad.out")]) == 0
    out = capsys.readouterr().out
    assert "2 rows landed from 1 file(s)" in out and "4 line(s) of another shape quarantined" in out and out.count("\n") == 1
    audit = next(iter({r["audit_id"] for r in read_landing("t2t_completions").to_pylist()}))
    (entry,) = load_ledger(audit).entries
    assert (entry.state, entry.landed, entry.not_run, entry.quarantined) == ("closed", 2, 4, 4)
    rows = _rows(audit)
    assert {r["raw_output"] for r in rows} == {"[kind]\u2028and\x85so"}
    assert [(r["source_line"], r["reason"].split(":")[0].split(" (")[0]) for r in _quarantine()] == [
        (2, "custom_id"),
        (3, "custom_id"),
        (4, "response"),
        (6, "not JSON"),
    ]
    # the 4 requests go back to the pool: the next export writes only them
    assert main(["batch", "export", "--out", str(tmp_path / "again"), *FLAGS]) == 0
    assert "4 requests in 1 file(s)" in capsys.readouterr().out


def test_an_unreadable_ledger_is_named_in_one_line_never_skipped(dora_home, api_key, capsys):
    from orchestration.cli import main

    with BatchStubServer() as server:
        server.chat_reply = letter_reply
        backend = OpenAIChatBackend("stub-model", base_url=server.base_url)
        first = probe_t2t(TEMPLATES, backend, CHAT, progress=False, batch=BatchOptions())
        path = ledger_path(first.audit_id)
        path.write_text(path.read_text()[:-15])  # a ledger cut short (a full disk, a copy interrupted)
        capsys.readouterr()
        assert main(["batches", "--no-refresh"]) == 1
        err = capsys.readouterr().err.strip()
        assert err == f"dora batches: the batch ledger {path} is not JSON (cut short?) " + err.split("(cut short?) ", 1)[1] and "\n" not in err
        assert "restore it from a backup" in err
        with pytest.raises(BatchError, match=r"the batch ledger .* is not JSON \(cut short\?\)") as exc:  # what dora audit prints
            probe_t2t(TEMPLATES, backend, CHAT, progress=False, batch=BatchOptions())
        assert "\n" not in str(exc.value)
        path.write_text(json.dumps({"name": first.audit_id, "entries": [{"id": "b1", "keys": "x"}]}))
        assert main(["batches", "--no-refresh"]) == 1
        assert "is not a ledger (entries.0.keys: Input should be a valid" in capsys.readouterr().err


def test_dora_audit_names_its_cut_short_ledger_in_one_line_and_import_refuses_a_fifo(dora_home, tmp_path, capsys):
    import os

    from models_inference.backends.batch_ledger import ledger_names
    from orchestration.cli import main

    assert main(["batch", "export", "--out", str(tmp_path / "out"), *FLAGS]) == 0
    (name,) = ledger_names()
    path = ledger_path(name)
    path.write_text(path.read_text()[:-10])
    capsys.readouterr()
    assert main(["audit", "--dry-run", "--family", "biasdora", "--api-batch", "--backend", "openai", *FLAGS]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"dora audit: the batch ledger {path} is not JSON (cut short?)") and "\n" not in err
    os.mkfifo(tmp_path / "fifo.out")  # a FIFO would block a reader for ever
    assert main(["batch", "import", str(tmp_path / "fifo.out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dora batch import: OUTPUT ") and "not a regular file" in err and "\n" not in err


def test_an_api_output_line_naming_another_file_is_quarantined_not_landed(dora_home, api_key):
    from models_inference.backends.batch_lines import ledger_tag

    def foreign(rows: list[dict]) -> str:  # one more line, naming a file of another audit
        extra = {**rows[0], "custom_id": f"{ledger_tag('t2t-another-audit')}-b0123456789abcdef-0"}
        return "".join(json.dumps(r) + "\n" for r in [*rows, extra])

    with BatchStubServer() as server:
        server.chat_reply, server.output_text = letter_reply, foreign
        backend = OpenAIChatBackend("stub-model", base_url=server.base_url)
        summary = probe_t2t(TEMPLATES, backend, CHAT, progress=False, batch=BatchOptions(wait=True, poll_seconds=0.01))
    (bad,) = _quarantine()
    assert bad["source_line"] == 13 and "names no line of file" in bad["reason"] and json.loads(bad["raw_text"])["custom_id"].endswith("-0")
    rows = _rows(summary.audit_id)
    assert len(rows) == 12 and set(_answered(rows).values()) == {1} and summary.quarantined == 1


def test_error_objects_of_every_shape_keep_their_message():
    from models_inference.backends.batch_lines import OutputLine

    def text(error) -> str | None:
        return OutputLine.model_validate({"custom_id": "x", "response": {"status_code": 400, "body": None}, "error": error}).error_text()

    assert text({"error": {"message": "bad template", "type": "BadRequestError", "code": 400}}) == "400: bad template"  # vLLM
    assert text({"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}) == "400: too long"  # older vLLM
    assert text({"code": "batch_expired", "message": "late"}) == "batch_expired: late"  # OpenAI
    assert text("URL /v1/completions was used") == "URL /v1/completions was used"
    assert text({}) is None  # an empty object beside a response is no error


def test_dora_batches_of_an_unreadable_ledger_names_it_once(dora_home, tmp_path, capsys):
    from models_inference.backends.batch_ledger import ledger_names
    from orchestration.cli import main

    assert main(["batch", "export", "--out", str(tmp_path / "out"), *FLAGS]) == 0
    (name,) = ledger_names()
    ledger_path(name).write_text("{")
    capsys.readouterr()
    for command in (["batches", name], ["batches", name, "--cancel"]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is not JSON (cut short?)" in err
