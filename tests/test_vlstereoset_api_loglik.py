"""Caption log-likelihoods from an OpenAI-compatible endpoint (the local stub server): ``echo``
and vLLM's ``prompt_logprobs`` give the exact sums of the stub's per-token log-probs, the
context's tokens excluded; an endpoint with neither is one clear error before any row lands;
``dora audit --family vlstereoset`` with the text prior on the API lands ok rows."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ingestion.errors import PromptLogprobsUnsupportedError
from models_inference.backends.api_loglik import api_text_logliks, detect_loglik_mode
from models_inference.backends.text import load_text_backend
from tests.helpers.openai_server import OpenAIStubServer, stub_logprob, stub_tokens

CAPTIONS = ["My sister is caring.", "My sister is rude.", "My sibling is caring."]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123")
    with OpenAIStubServer() as srv:
        yield srv


def endpoint(server, **kw):
    return load_text_backend("stub-model", backend="openai", base_url=server.base_url, max_retries=0, **kw)


def expected(text: str, skip_first: bool) -> tuple[float, int]:
    values = [stub_logprob(t) for t in stub_tokens(text)][1 if skip_first else 0 :]
    return sum(values), len(values)


@pytest.mark.parametrize("mode", ["echo", "vllm"])
def test_caption_sums_equal_the_stub_token_logprobs(server, mode):
    server.prompt_logprobs = mode
    backend = endpoint(server)
    api_mode = detect_loglik_mode(backend)
    assert api_mode == {"echo": "echo", "vllm": "prompt_logprobs"}[mode]
    # no context: the prompt's first token has no log-prob (nothing precedes it) and is not counted
    got = api_text_logliks(backend, CAPTIONS, api_mode)
    assert [(r.total, r.n_tokens, r.error) for r in got] == [(*expected(c, True), None) for c in CAPTIONS]
    assert got[0].n_tokens == 4 and got[0].total == sum(stub_logprob(t) for t in [" sister", " is", " caring", "."])
    # a context: its tokens are excluded at the boundary (" My" is the caption's first token)
    got = api_text_logliks(backend, [" My sister is caring."], api_mode, context="Describe the image.")
    assert (got[0].total, got[0].n_tokens) == expected(" My sister is caring.", False)
    # a token straddling the boundary ("Q: M" + "y sister": the token " My") carries caption text: counted
    got = api_text_logliks(backend, ["y sister"], api_mode, context="Q: M")
    assert (got[0].total, got[0].n_tokens) == (stub_logprob(" My") + stub_logprob(" sister"), 2)
    sent = [r["json"] for r in server.requests if r["path"].endswith("/completions")][-1]
    if mode == "echo":
        assert (sent["echo"], sent["logprobs"], sent["max_tokens"]) == (True, 1, 0)
    else:
        assert sent["prompt_logprobs"] == 0 and "echo" not in sent


@pytest.mark.parametrize("how", ["none", "chat_only"])
def test_an_endpoint_without_prompt_logprobs_is_one_clear_error(server, how):
    from models_inference.probes.vlstereoset.scorers import TextPriorScorer

    if how == "chat_only":
        server.chat_only = True
    else:
        server.prompt_logprobs = "none"  # echo and prompt_logprobs both ignored
    with pytest.raises(PromptLogprobsUnsupportedError) as err:
        TextPriorScorer(endpoint(server))
    message = str(err.value)
    assert "\n" not in message and server.base_url in message and "'stub-model'" in message
    assert "returns no log-probabilities of prompt tokens" in message and "echo=True" in message and "prompt_logprobs" in message
    detail = {
        "none": "echo: no prompt log-probs in the reply; prompt_logprobs: no prompt log-probs in the reply",
        "chat_only": "echo: HTTP 404; prompt_logprobs: HTTP 404",
    }[how]
    assert detail in message
    assert "sk-test-key-123" not in message


def test_text_prior_scorer_on_the_api_scores_and_keeps_failures_as_error_rows(server):
    from models_inference.probes.vlstereoset.scorers import TextPriorScorer, Unit

    scorer = TextPriorScorer(endpoint(server))
    assert scorer.config() == {"prefix": "none (the server's own BOS, if any)", "log": "natural", "api_prompt_logprobs": "echo"}
    unit = Unit("r1", "neutral", {"stereotype": CAPTIONS[0], "anti-stereotype": CAPTIONS[1]}, None, "s", "gender")
    server.fail_next(400)  # the first caption's request is refused: an error row, never an exception
    (rows,) = scorer.score([unit])
    by = {(r.caption_kind, r.variant): r for r in rows}
    failed = [r for r in rows if r.status == "error"]
    ok = [r for r in rows if r.status == "ok"]
    assert len(failed) == 2 and len(ok) == 2 and all("scripted 400" in r.error for r in failed)
    kind = ok[0].caption_kind
    total, n = expected(CAPTIONS[0] if kind == "stereotype" else CAPTIONS[1], True)
    assert by[(kind, scorer.variants[0])].score == total and by[(kind, scorer.variants[1])].score == total / n
    (rows,) = scorer.score([unit])  # the next call retries the failed caption
    assert all(r.status == "ok" for r in rows)


@pytest.mark.slow
def test_dora_audit_vlstereoset_text_prior_over_the_api(dora_home, server, monkeypatch, capsys):
    import duckdb

    from models_inference.probes.vlstereoset.dataset import synthetic_csv_path
    from orchestration.cli import main

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # the dbt executable
    lines = synthetic_csv_path().read_text(encoding="utf-8-sig").splitlines()[:5]
    csv_path = dora_home.parent / "VLStereoSet_mini.csv"
    csv_path.write_bytes(b"\xef\xbb\xbf" + ("\r\n".join(lines) + "\r\n").encode())
    assert (
        main(
            [
                "audit",
                "--family",
                "vlstereoset",
                "--vlstereoset-csv",
                str(csv_path),
                "--vlstereoset-scorers",
                "vlstereo_text_caption_prior",
                "--vlstereoset-text-backend",
                "openai",
                "--vlstereoset-text-model",
                "stub-model",
                "--vlstereoset-text-base-url",
                server.base_url,
                "--no-progress",
            ]
        )
        == 0
    )
    assert "vlstereo_text_caption_prior:sum" in capsys.readouterr().out
    with duckdb.connect(str(dora_home / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute(
            "select status, count(*), count(distinct item_id), min(backend) from fct_vlstereoset_scores "
            "where scorer_variant like '%:sum' group by status"
        ).fetchall()
        caption, score = con.execute(
            "select caption_text, score from fct_vlstereoset_scores where scorer_variant like '%:sum' "
            "and condition = 'original' order by item_id, caption_kind limit 1"
        ).fetchone()
    assert [r[:3] for r in rows] == [("ok", rows[0][1], 4)] and rows[0][1] >= 4 * 3
    assert score == expected(caption, True)[0]
