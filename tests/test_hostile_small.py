"""Small hostile inputs, each ending as one clear line: a 200 reply of an OpenAI-compatible
server that is not a completion (the row's error says so and quotes the body), and a model
folder that cannot be loaded (a short cause and what a folder needs, not the loader's list of
every model type)."""

from __future__ import annotations

import pytest

from models_inference.backends.base import GenerationRequest, RenderedPrompt, SamplingParams
from tests.helpers.openai_server import OpenAIStubServer

_NOT_A_COMPLETION = {
    "json_string": r'the server\'s reply is not a completion \(no choices list\): "upstream says: model is loading"',
    "choices_not_list": r"the server's reply is not a completion \(no choices list\): \{\"choices\":\"x\"\}",
    "no_choices": r"the server's reply is not a completion \(an empty choices list\): \{.*\"choices\":\[\]",
    "not_json": r"the server's reply is not JSON: <html><body>502 Bad Gateway</body></html>",
}


def _request(style: str, seed: int = 1) -> GenerationRequest:
    return GenerationRequest(prompt=RenderedPrompt(style, "A child is"), seed=seed, max_new_tokens=4, stop="eos")


def _backend(server, **extra):
    from models_inference.backends.text import OpenAIChatBackend

    return OpenAIChatBackend("stub-model", base_url=server.base_url, concurrency=1, max_retries=0, **extra)


def _one_line(error: str | None, pattern: str) -> None:
    import re

    assert error is not None and "\n" not in error and re.fullmatch(pattern + r".*", error), error
    assert "object has no attribute" not in error and "Traceback" not in error


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


@pytest.mark.parametrize("kind", sorted(_NOT_A_COMPLETION))
@pytest.mark.parametrize("style", ["chat", "completion"])
def test_a_malformed_200_reply_is_an_error_row_that_says_what_was_wrong(api_key, kind, style):
    with OpenAIStubServer() as server:
        server.malformed_next(kind)
        first, second = _backend(server, batch_completions=False).generate([_request(style), _request(style, 2)])
    _one_line(first.error, _NOT_A_COMPLETION[kind])
    assert second.error is None and second.text  # the rest of the chunk is answered


@pytest.mark.parametrize("kind", ["json_string", "choices_not_list"])
def test_a_malformed_reply_to_packed_completions_fails_that_pack_only(api_key, kind):
    with OpenAIStubServer() as server:
        server.completion_batching = True
        server.malformed_next(kind)
        backend = _backend(server, prompts_per_request=1, use_n=False)
        results = backend.generate([GenerationRequest(RenderedPrompt("completion", f"Prompt {i}"), seed=i,
                                                      max_new_tokens=4, stop="eos") for i in range(3)])
    errors = [r.error for r in results if r.error]
    assert len(errors) == 1 and all(r.text for r in results if not r.error)
    _one_line(errors[0], _NOT_A_COMPLETION[kind])


def test_a_malformed_reply_to_a_constrained_choice_is_an_error_row(api_key):
    with OpenAIStubServer() as server:
        server.constraints = {"grammar"}
        server.malformed_next("choices_not_list")
        first, second = _backend(server).choose([_request("chat"), _request("chat", 2)], ["1", "2", "3"], SamplingParams())
    _one_line(first.error, _NOT_A_COMPLETION["choices_not_list"])
    assert second.error is None and second.text in {"1", "2", "3"}


def test_the_reply_body_quoted_in_an_error_is_cut_and_redacted():
    from ingestion.errors import MalformedReplyError
    from models_inference.backends.openai_api import api_error_text, reply_choices

    with pytest.raises(MalformedReplyError) as err:
        reply_choices("invalid key sk-secret123 " + "x" * 500)
    text = api_error_text(err.value, "sk-secret123")
    assert "sk-secret123" not in text and len(text) < 200 and text.endswith("...")


@pytest.mark.parametrize("files, missing", [
    ({}, "config.json, no weights, no tokenizer"),
    ({"config.json": "{}"}, "weights, no tokenizer"),
    ({"config.json": "{}", "model.safetensors": "", "tokenizer.json": "{}"}, None),
])
def test_a_model_folder_that_cannot_load_is_one_short_line(tmp_path, files, missing):
    from models_inference.backends.text import _load_failure

    folder = tmp_path / "model"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    # what transformers says of a config.json without model_type: every model type it knows
    loader = ValueError(f"Unrecognized model in {folder}. Should have a `model_type` key: " + ", ".join(["albert"] * 900))
    message = _load_failure(str(folder), loader)
    cause = f"the folder has no {missing}" if missing else f"Unrecognized model in {folder}"
    assert message.startswith(f"cannot load model '{folder}' offline: {cause}. Use 'smollm2-135m', a local folder")
    assert message.endswith("; a model folder needs config.json, the weights (*.safetensors or *.bin) and the tokenizer files.")
    assert len(message) < 400 + len(str(folder)) and "\n" not in message and "albert" not in message


@pytest.mark.slow  # imports torch and transformers (~5 s)
def test_loading_an_empty_model_folder_says_what_it_lacks(tmp_path):
    from ingestion.errors import ModelNotAvailableError
    from models_inference.backends.text import TransformersBackend

    with pytest.raises(ModelNotAvailableError, match=r"offline: the folder has no config\.json, no weights, no tokenizer\. Use ") as err:
        TransformersBackend.load(str(tmp_path))
    assert "Error:" not in str(err.value) and len(str(err.value)) < 400 + len(str(tmp_path))


def test_a_loader_message_is_cut_to_its_first_sentence():
    from models_inference.backends.text import _load_failure_cause

    long = ValueError("Unrecognized model in x. Should have a `model_type` key, or one of: " + ", ".join(["albert"] * 900))
    assert _load_failure_cause("no-such-folder", long) == "Unrecognized model in x"
    assert len(_load_failure_cause("no-such-folder", ValueError("y" * 5000))) == 200
