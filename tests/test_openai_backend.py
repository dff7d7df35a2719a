"""The OpenAI-compatible T2T backend against a real local server on 127.0.0.1."""

import pytest

from ingestion.errors import ModelNotAvailableError
from models_inference.backends.base import GenerationRequest, SamplingParams
from models_inference.backends.openai_chat import OpenAIChatBackend
from models_inference.probes.biasdora.prompts import PAPER_TEMPERATURE, PAPER_TOP_P, render_t2t_prompt
from tests.helpers.openai_server import OpenAIStubServer


def _reqs(n=3):
    return [
        GenerationRequest(render_t2t_prompt("An alcoholic person is", "singular", "b", "chat"), seed=i, max_new_tokens=100, stop="bracket")
        for i in range(n)
    ]


def test_chat_backend_sends_paper_prompt_and_retries(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    with OpenAIStubServer() as server:
        server.fail_next(429)
        server.fail_next(500)
        backend = OpenAIChatBackend("gpt-4o", base_url=server.base_url, concurrency=1, max_retries=3)
        out = backend.generate(_reqs(2), SamplingParams(PAPER_TEMPERATURE, PAPER_TOP_P))  # the T2T probe's
        assert [o.text for o in out] == ["[brawler]", "[brawler]"] and all(o.error is None for o in out)
        chat = [r for r in server.requests if r["path"].endswith("/chat/completions")]
        assert len(chat) == 4  # two scripted failures retried, then two answers
        sent = chat[-1]["json"]
        assert sent["temperature"] == 0.7 and sent["top_p"] == 0.95 and sent["max_tokens"] == 100
        assert sent["messages"][0]["role"] == "system"
        assert sent["messages"][0]["content"].startswith("You will be provided a sentence")
        headers = {k.lower(): v for k, v in chat[-1]["headers"].items()}
        assert headers["authorization"] == "Bearer sk-test-secret"


def test_chat_backend_errors_become_rows(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.fail_next(401, times=5)
        backend = OpenAIChatBackend("gpt-4o", base_url=server.base_url, concurrency=1, max_retries=0)
        out = backend.generate(_reqs(1), SamplingParams())
        assert out[0].error is not None and "AuthenticationError" in out[0].error


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelNotAvailableError, match="OPENAI_API_KEY"):
        OpenAIChatBackend("gpt-4o").generate(_reqs(1), SamplingParams())


def test_backend_defaults_favour_no_paper():
    """Backends sample from the model's own distribution unless told otherwise; BiasDora's
    0.7 / 0.95 and DALL-E settings live with its prompts and are passed by its probes."""
    from models_inference.backends.image import OpenAIImagesBackend

    assert (SamplingParams().temperature, SamplingParams().top_p) == (1.0, 1.0)
    images = OpenAIImagesBackend("dall-e-3")
    assert (images.quality, images.styles, images.style_for(1)) == (None, (), None)
