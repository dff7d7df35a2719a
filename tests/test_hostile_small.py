"""Small hostile inputs, each ending as one clear line: a 200 reply of an OpenAI-compatible
server that is not a completion, to a text or a vision request (the row's error says so and
quotes the body), and a model folder that cannot be loaded, for a text, vision or text-to-image
backend (what the folder lacks or holds broken and what a folder needs, never the loader's
internal exception nor its list of every model type)."""

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
    from models_inference.backends.openai_chat import OpenAIChatBackend

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
        results = backend.generate(
            [GenerationRequest(RenderedPrompt("completion", f"Prompt {i}"), seed=i, max_new_tokens=4, stop="eos") for i in range(3)]
        )
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


@pytest.mark.parametrize("kind", sorted(_NOT_A_COMPLETION))
def test_a_malformed_200_reply_to_a_vision_request_is_an_error_row_that_says_so(api_key, tmp_path, kind):
    from PIL import Image

    from models_inference.backends.vision import DescriptionRequest, OpenAIVisionBackend

    image = tmp_path / "face.png"
    Image.new("RGB", (4, 4), "gray").save(image)
    requests = [DescriptionRequest(image, RenderedPrompt("chat", "Describe the image"), seed, 8) for seed in (1, 2)]
    with OpenAIStubServer() as server:
        server.malformed_next(kind)
        backend = OpenAIVisionBackend("stub-vlm", base_url=server.base_url, concurrency=1, max_retries=0)
        first, second = backend.describe(requests)
    _one_line(first.error, _NOT_A_COMPLETION[kind])
    assert second.error is None and second.text == "[brawler]"  # the stub's chat answer: the next row is described


def test_the_reply_body_quoted_in_an_error_is_cut_and_redacted():
    from ingestion.errors import MalformedReplyError
    from models_inference.backends.openai_api import api_error_text, reply_choices

    with pytest.raises(MalformedReplyError) as err:
        reply_choices("invalid key sk-secret123 " + "x" * 500)
    text = api_error_text(err.value, "sk-secret123")
    assert "sk-secret123" not in text and len(text) < 200 and text.endswith("...")


@pytest.mark.parametrize(
    "files, cause",
    [
        ({}, "the folder has no config.json, no weights, no tokenizer"),
        ({"config.json": "{}"}, "the folder has no weights, no tokenizer"),
        (
            {"config.json": "{}", "model.safetensors": "", "tokenizer.json": "{}"},
            "its model.safetensors is not a safetensors file (shorter than its 8-byte header length)",
        ),
    ],
)
def test_a_model_folder_that_cannot_load_is_one_short_line(tmp_path, files, cause):
    from models_inference.backends.text import _load_failure

    folder = tmp_path / "model"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    # what transformers says of a config.json without model_type: every model type it knows
    loader = ValueError(f"Unrecognized model in {folder}. Should have a `model_type` key: " + ", ".join(["albert"] * 900))
    message = _load_failure(str(folder), loader)
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


# ------------------------------------------------------------------ what a model folder lacks
_LLAMA = '{"model_type": "llama"}'
_TOKENIZER = '{"version": "1.0", "model": {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"}}'


def _weights(path, cut: int = 0):
    """A real safetensors file of one 4x4 float32 tensor (64 bytes of data), ``cut`` bytes short."""
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.zeros((4, 4), dtype=np.float32)}, str(path))
    if cut:
        path.write_bytes(path.read_bytes()[:-cut])


def _folder(tmp_path, files: dict, weights_cut: int | None = 0):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    if weights_cut is not None:
        _weights(folder / "model.safetensors", weights_cut)
    return folder


@pytest.mark.parametrize(
    "kind, files, weights_cut, cause",
    [
        ("text", {"config.json": _LLAMA, "tokenizer.json": _TOKENIZER}, 0, None),
        ("text", {"config.json": _LLAMA}, None, "the folder has no weights, no tokenizer"),
        ("text", {"config.json": "{not json", "tokenizer.json": _TOKENIZER}, 0, "its config.json is not valid JSON (line 1, column 2)"),
        ("text", {"config.json": "{}", "tokenizer.json": _TOKENIZER}, 0, "its config.json names no model_type"),
        (
            "text",
            {"config.json": _LLAMA, "tokenizer.json": _TOKENIZER},
            4,
            "its model.safetensors is truncated: its header lists 64 bytes of tensors, the file holds 60",
        ),
        ("text", {"config.json": _LLAMA, "tokenizer.json": "{}"}, 0, "its tokenizer.json holds no tokenizer (no model section)"),
        ("image-to-text", {"config.json": _LLAMA, "tokenizer.json": _TOKENIZER}, 0, "the folder has no image processor (preprocessor_config.json)"),
        ("image-to-text", {"config.json": _LLAMA, "tokenizer.json": _TOKENIZER, "processor_config.json": '{"image_processor": {}}'}, 0, None),
        (
            "text-to-image",
            {
                "model_index.json": '{"_class_name": "P", "unet": ["diffusers", "UNet2DConditionModel"], '
                '"scheduler": ["diffusers", "PNDMScheduler"], "safety_checker": [null, null]}',
                "scheduler/scheduler_config.json": "{}",
            },
            0,
            "the folder has no unet/ (model_index.json lists it)",
        ),
        (
            "text-to-image",
            {"model_index.json": '{"unet": ["diffusers", "UNet2DConditionModel"]}', "unet/config.json": "{}"},
            0,
            "the folder unet/ has no weights",
        ),
    ],
    ids=[
        "whole",
        "no_weights_no_tokenizer",
        "config_not_json",
        "no_model_type",
        "weights_truncated",
        "tokenizer_not_one",
        "vlm_no_image_processor",
        "vlm_processor_config",
        "pipeline_no_unet",
        "pipeline_unet_no_weights",
    ],
)
def test_a_model_folder_s_problem_is_named(tmp_path, kind, files, weights_cut, cause):
    from models_inference.backends.model_folder import folder_problem

    assert folder_problem(_folder(tmp_path, files, weights_cut), kind) == cause


def test_a_whole_folder_s_load_failure_names_the_part_not_the_exception(tmp_path):
    from models_inference.backends.model_folder import load_failure_cause

    folder = str(_folder(tmp_path, {"config.json": '{"model_type": "clip"}', "tokenizer.json": _TOKENIZER}))
    wrong = ValueError(
        "Unrecognized configuration class <class 'CLIPConfig'> for this kind of AutoModel: "
        "AutoModelForCausalLM.\nModel type should be one of " + ", ".join(["AriaConfig"] * 300)
    )
    assert load_failure_cause(folder, "text", wrong, "weights") == "its config.json describes a 'clip' model, not a causal language model"
    internal = AttributeError("'NoneType' object has no attribute 'endswith'")
    assert load_failure_cause(folder, "image-to-text", internal, "weights") == "the folder has no image processor (preprocessor_config.json)"
    assert load_failure_cause(folder, "text", internal, "tokenizer") == (
        "its tokenizer files (tokenizer.json) cannot be loaded: they are incomplete or not a tokenizer of this model"
    )
    assert (
        load_failure_cause(folder, "text", RuntimeError("size mismatch for w: copying a param with shape [4, 4]"), "weights")
        == "its weights do not fit the shapes its config.json gives (another model's weights?)"
    )
    # a hub id: the loader's first sentence when it says what is missing, never an internal error's text
    assert (
        load_failure_cause("org/model", "text", OSError("We couldn't connect to 'https://huggingface.co'. More."), "tokenizer")
        == "We couldn't connect to 'https://huggingface.co'"
    )
    assert (
        load_failure_cause("org/model", "text", KeyError("added_tokens"), "tokenizer") == "the loader failed while reading its tokenizer (KeyError)"
    )


@pytest.mark.slow  # builds tiny random models and loads them with transformers / diffusers (~10 s)
def test_damaged_vision_and_image_model_folders_say_what_is_wrong(tmp_path):
    import shutil

    from ingestion.errors import ModelNotAvailableError
    from models_inference.backends.image import DiffusersImageBackend
    from models_inference.backends.vision import TransformersVisionBackend
    from tests.helpers.tiny_models import build_tiny_captioner, build_tiny_sd

    captioner = build_tiny_captioner(tmp_path)
    (captioner / "preprocessor_config.json").unlink()  # the loader: "Can't load image processor ... If you were trying ..."
    with pytest.raises(ModelNotAvailableError) as err:
        TransformersVisionBackend.load(str(captioner))
    assert str(err.value).startswith(
        f"cannot load image-to-text model '{captioner}' here: the folder has no image processor (preprocessor_config.json). Use a local folder"
    )
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (captioner / name).unlink()  # the loader: "'NoneType' object has no attribute 'endswith'"
    with pytest.raises(ModelNotAvailableError, match=r"here: the folder has no tokenizer, no image processor"):
        TransformersVisionBackend.load(str(captioner))

    pipeline, _ = build_tiny_sd(tmp_path)
    weights = pipeline / "unet" / "diffusion_pytorch_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])  # the loader: "Unable to load weights from checkpoint file ..."
    with pytest.raises(ModelNotAvailableError) as err:
        DiffusersImageBackend.load(str(pipeline))
    assert "here: its unet/diffusion_pytorch_model.safetensors is truncated: its header lists " in str(err.value)
    shutil.rmtree(pipeline / "unet")
    with pytest.raises(ModelNotAvailableError, match=r"here: the folder has no unet/ \(model_index\.json lists it\)\. Use ") as err:
        DiffusersImageBackend.load(str(pipeline))
    assert "\n" not in str(err.value) and "Error" not in str(err.value)


@pytest.mark.slow  # a Dagster audit in this process, its T2T step failing on the model (~15 s)
def test_dora_audit_on_a_damaged_model_folder_is_one_line_exit_1(tmp_path, monkeypatch, capsys):
    import json

    from orchestration.cli import main
    from tests.helpers.tiny_models import word_tokenizer

    model = tmp_path / "model"
    tokenizer, vocab = word_tokenizer(["brave", "bold"])
    tokenizer.save_pretrained(model)
    (model / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "vocab_size": len(vocab),
                "hidden_size": 8,
                "intermediate_size": 16,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
            }
        )
    )
    _weights(model / "model.safetensors", cut=10)  # a download cut short
    home = tmp_path / "home"
    monkeypatch.setenv("DORA_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    code = main(
        [
            "audit",
            "--family",
            "biasdora",
            "--model",
            str(model),
            "--per-dimension",
            "1",
            "--runs",
            "1",
            "--letters",
            "b",
            "--settings",
            "singular",
            "--judge-backend",
            "none",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("dora audit: error:")]
    assert errors == [
        f"dora audit: error: cannot load model '{model}' offline: its model.safetensors is truncated: its "
        "header lists 64 bytes of tensors, the file holds 54. Use 'smollm2-135m', a local folder or .gguf file, "
        "or a hub id that is already in the Hugging Face cache; a model folder needs config.json, the weights "
        "(*.safetensors or *.bin) and the tokenizer files."
    ], err
