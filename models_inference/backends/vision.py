"""Image-to-text backends: one interface (:class:`VisionBackend`), two implementations.

* :class:`TransformersVisionBackend`: a ``transformers`` image-text-to-text model by hub id
  or local folder (paper: LLaVA), loaded with ``AutoModelForImageTextToText``. Chat models
  get the image and the prompt in one user turn through the processor's chat template;
  encoder-decoder captioners (``VisionEncoderDecoderModel``) get the prompt as the decoder's
  prefix. Each row samples with its own seed (independent of batching).
* :class:`OpenAIVisionBackend`: any OpenAI-compatible vision chat endpoint (paper: GPT-4o),
  the image sent inline as a ``data:image/png;base64,...`` URL. Its ``choose`` restricts each
  answer to fixed strings under the server's strongest choice constraint
  (:mod:`models_inference.backends.server_caps`), as the text chat backend's does.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Protocol, Sequence

from ingestion.errors import ModelNotAvailableError
from models_inference.backends.base import GenerationResult, RenderedPrompt, SamplingParams, build_backend
from models_inference.backends.local import eos_token_ids, sampling_processors, torch_device_dtype
from models_inference.backends.model_folder import load_failure_cause
from models_inference.backends.openai_api import OpenAIEndpoint, api_error_text, reply_choices
from models_inference.model_ref import model_version


@dataclass(frozen=True)
class DescriptionRequest:
    """One image to describe.

    Attributes:
        image_path: absolute path of the stored PNG.
        prompt: the description prompt (:func:`models_inference.probes.biasdora.prompts.render_i2t_prompt`).
        seed: per-row seed (int64).
        max_new_tokens: token budget; no default, it is the probe's choice (BiasDora:
            :data:`models_inference.probes.biasdora.prompts.PAPER_I2T_MAX_NEW_TOKENS`).
    """

    image_path: Path
    prompt: RenderedPrompt
    seed: int
    max_new_tokens: int


class VisionBackend(Protocol):
    """What an I2T backend provides; ``describe`` returns one result per request, in order."""

    backend_name: str
    model_id: str
    model_version: str

    def describe(
        self, requests: Sequence[DescriptionRequest], sampling: SamplingParams, on_batch: Callable[[int], None] | None = None
    ) -> list[GenerationResult]: ...


def _load_rgb(path: Path):
    from PIL import Image

    with Image.open(path) as img:
        return img.convert("RGB")


@dataclass
class TransformersVisionBackend:
    """A local ``transformers`` image-text-to-text model (paper: LLaVA). Build with :meth:`load`.

    Attributes:
        mode: ``chat`` (the processor has a chat template: image + prompt in one user turn)
            or ``prefix`` (an encoder-decoder captioner: the prompt is the decoder's prefix).
        batch_size: images per ``generate`` call (requests with the same prompt are batched).
    """

    model_id: str
    model_version: str
    model: object = field(repr=False)
    processor: object = field(repr=False)
    tokenizer: object = field(repr=False)
    image_processor: object = field(repr=False)
    mode: str = "chat"
    batch_size: int = 4
    device: str = "cpu"
    backend_name: str = "transformers"
    system_prompt: str | None = None
    image_size: tuple[int, int] | None = None

    def description_params(self) -> dict:
        """Parameters that change what a description means (part of the audit id when set)."""
        out = {}
        if self.system_prompt:
            out["system_prompt"] = self.system_prompt
        if self.image_size:
            out["image_size"] = list(self.image_size)
        return out

    @classmethod
    def load(
        cls,
        model_ref: str,
        *,
        batch_size: int = 4,
        device: str | None = None,
        system_prompt: str | None = None,
        image_size: tuple[int, int] | None = None,
    ) -> "TransformersVisionBackend":
        """Load by hub id (offline: only if cached) or local folder; fp16 on CUDA, fp32 on CPU.

        ``system_prompt`` (chat mode) is sent as a system turn before the image and prompt;
        ``image_size`` (width, height) resizes every image first. The paper's LLaVA
        configuration (:data:`models_inference.probes.biasdora.prompts.PAPER_LLAVA_MODEL`,
        :data:`~models_inference.probes.biasdora.prompts.PAPER_LLAVA_SYSTEM_PROMPT`, 448x448) sets both.

        Raises:
            ModelNotAvailableError: the model or its processor cannot be loaded here.
        """
        from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

        device, dtype = torch_device_dtype(device)
        part = "weights"  # what is loading: named in the message when the folder looks whole
        try:
            model = AutoModelForImageTextToText.from_pretrained(model_ref, dtype=dtype)
            part = "processor"
            processor = AutoProcessor.from_pretrained(model_ref)
            tokenizer = getattr(processor, "tokenizer", None)
            image_processor = getattr(processor, "image_processor", None)
            if tokenizer is None:  # AutoProcessor gave only one half (e.g. VisionEncoderDecoder folders)
                tokenizer = processor if hasattr(processor, "batch_decode") else AutoTokenizer.from_pretrained(model_ref)
            if image_processor is None:
                image_processor = AutoImageProcessor.from_pretrained(model_ref)
        # a partial folder fails with whatever the loader trips on first (AttributeError,
        # SafetensorError, a bare Exception from tokenizers ...): each means this model cannot load
        except Exception as exc:
            raise ModelNotAvailableError(
                f"cannot load image-to-text model {model_ref!r} here: {load_failure_cause(model_ref, 'image-to-text', exc, part)}. "
                "Use a local folder (save_pretrained of model and processor) or a hub id already in the Hugging Face "
                "cache, or unset HF_HUB_OFFLINE on a machine with hub access."
            ) from exc
        model.to(device).eval()
        # chat mode needs a multimodal processor (not a bare tokenizer) that has a chat template
        chat = processor is not tokenizer and bool(getattr(processor, "chat_template", None))
        if hasattr(tokenizer, "padding_side"):
            tokenizer.padding_side = "left"
        if getattr(tokenizer, "pad_token", None) is None and getattr(tokenizer, "eos_token", None) is not None:
            tokenizer.pad_token = tokenizer.eos_token
        version = model_version(model_ref)
        return cls(
            model_ref,
            version,
            model,
            processor,
            tokenizer,
            image_processor,
            mode="chat" if chat else "prefix",
            batch_size=batch_size,
            device=device,
            system_prompt=system_prompt,
            image_size=tuple(image_size) if image_size else None,
        )

    # -- encoding

    def _chat_inputs(self, prompt: str, images):
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": [{"type": "text", "text": self.system_prompt}]})
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True)
        enc = self.processor(images=images, text=[text] * len(images), return_tensors="pt", padding=True)
        return {k: v for k, v in enc.items() if k != "token_type_ids"}, "input_ids"

    def _prefix_inputs(self, prompt: str, images):
        import torch

        pixels = self.image_processor(images=images, return_tensors="pt")["pixel_values"]
        if getattr(self.model.config, "is_encoder_decoder", False) and hasattr(self.model, "decoder"):
            start = self.model.config.decoder_start_token_id
            if start is None:
                start = self.tokenizer.bos_token_id
            ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
            prefix = torch.tensor([[start, *ids]] * len(images), dtype=torch.long)
            return {"pixel_values": pixels, "decoder_input_ids": prefix}, "decoder_input_ids"
        enc = self.processor(images=images, text=[prompt] * len(images), return_tensors="pt", padding=True)
        return {k: v for k, v in enc.items() if k != "token_type_ids"}, "input_ids"

    def describe(self, requests, sampling=SamplingParams(), on_batch=None):
        """Describe ``requests`` in batches of ``batch_size`` images sharing a prompt.

        Returns one :class:`~models_inference.backends.base.GenerationResult` per request in
        input order; an unreadable image or a failing batch gives ``error`` results.
        """
        import torch
        from transformers import GenerationConfig

        results: list[GenerationResult | None] = [None] * len(requests)
        order = sorted(range(len(requests)), key=lambda i: (requests[i].prompt.text, requests[i].max_new_tokens))
        groups: list[list[int]] = []
        for i in order:
            last = groups[-1] if groups else None
            if (
                last
                and len(last) < self.batch_size
                and requests[last[0]].prompt.text == requests[i].prompt.text
                and requests[last[0]].max_new_tokens == requests[i].max_new_tokens
            ):
                last.append(i)
            else:
                groups.append([i])
        eos = eos_token_ids(self.tokenizer, self.model.generation_config)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (eos[0] if eos else None)
        for group in groups:
            images, batch = [], []
            for i in group:
                try:
                    image = _load_rgb(requests[i].image_path)
                    if self.image_size:
                        image = image.resize(tuple(self.image_size))
                    images.append(image)
                    batch.append(i)
                except (OSError, ValueError) as exc:
                    results[i] = GenerationResult("", True, f"cannot read image {requests[i].image_path.name}: {exc}")
            if batch:
                first = requests[batch[0]]
                try:
                    make = self._chat_inputs if self.mode == "chat" else self._prefix_inputs
                    inputs, fed_key = make(first.prompt.text, images)
                    inputs = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in inputs.items()}
                    if "pixel_values" in inputs and self.model.dtype != inputs["pixel_values"].dtype:
                        inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
                    processors = sampling_processors(sampling.temperature, sampling.top_p, [requests[i].seed for i in batch])
                    config = GenerationConfig(
                        do_sample=False,
                        max_new_tokens=first.max_new_tokens,
                        pad_token_id=pad,
                        eos_token_id=eos or None,
                        decoder_start_token_id=getattr(self.model.config, "decoder_start_token_id", None),
                    )
                    with torch.inference_mode():
                        out = self.model.generate(**inputs, generation_config=config, logits_processor=processors)
                    fed = inputs[fed_key]
                    n = fed.shape[1]
                    new = out[:, n:] if out.shape[1] >= n and torch.equal(out[:, :n].cpu(), fed.cpu()) else out
                    texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
                    for row, i in enumerate(batch):
                        toks = new[row].tolist()
                        hit_eos = any(t in eos for t in toks)
                        finished = hit_eos or len(toks) < first.max_new_tokens
                        results[i] = GenerationResult(" ".join(texts[row].split()), finished)
                except (RuntimeError, ValueError, TypeError) as exc:
                    for i in batch:
                        results[i] = GenerationResult("", True, f"{type(exc).__name__}: {exc}")
            if on_batch:
                on_batch(len(group))
        return results  # type: ignore[return-value]


def image_data_url(path: Path) -> str:
    """``data:image/png;base64,...`` of a stored PNG (what OpenAI vision chat accepts inline)."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


@dataclass
class OpenAIVisionBackend(OpenAIEndpoint):
    """Any OpenAI-compatible vision chat endpoint (paper: GPT-4o) through the one client helper
    (:class:`~models_inference.backends.openai_api.OpenAIEndpoint`: key from the environment,
    redacted error texts, the client's retries, ``concurrency`` in flight).

    One user turn per request: the prompt text and the image as a data URL; failures become
    ``error`` results (retried next run). :meth:`choose` sends the same turn under the server's
    choice constraint (:meth:`constraint`, found by the endpoint's capability probe).
    """

    model_id: str = "gpt-4o"
    timeout: float = 120.0

    def _ask(self, requests, sampling, on_batch, fields: dict | None = None, read=None) -> list[GenerationResult]:
        """One chat completion per request (image + prompt), ``concurrency`` at a time, with
        ``fields`` merged into each request and ``read`` turning the reply text into the answer."""
        from models_inference.backends.server_caps import merge_request

        def one(client, key, req: DescriptionRequest) -> GenerationResult:
            try:
                url = image_data_url(req.image_path)
            except OSError as exc:
                return GenerationResult("", True, f"cannot read image {req.image_path.name}: {exc}")
            content = [{"type": "text", "text": req.prompt.text}, {"type": "image_url", "image_url": {"url": url}}]
            kwargs = dict(
                model=self.model_id,
                messages=[{"role": "user", "content": content}],
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=req.max_new_tokens,
                seed=int(req.seed) % (2**31),
            )
            try:
                # a malformed 200 reply (a JSON string, no choices list) is an error row that says so
                choice = reply_choices(client.chat.completions.create(**merge_request(kwargs, fields or {})))[0]
                text = choice.message.content or ""
                return GenerationResult(read(text) if read else text, choice.finish_reason != "length")
            except Exception as exc:  # noqa: BLE001 - the key-quoting proxy case: never stored
                return GenerationResult("", True, api_error_text(exc, key))

        return self.each(requests, one, on_batch)

    def describe(self, requests, sampling=SamplingParams(), on_batch=None):
        """One chat completion per request, ``concurrency`` at a time.

        Raises:
            ModelNotAvailableError: the API key variable is unset.
        """
        return self._ask(requests, sampling, on_batch)

    def choose(self, requests, choices: Sequence[str], sampling=SamplingParams(), on_batch=None) -> list[GenerationResult]:
        """Constrained answers: each reply is one of ``choices`` under the endpoint's strongest
        choice constraint (:meth:`constraint`: llama.cpp ``grammar``, vLLM ``structured_outputs``,
        SGLang ``regex``, a strict ``json_schema``).

        Returns:
            One result per request, in order: ``text`` = the answer (for ``json_schema`` the
            object's ``answer`` field; the raw reply when it is not such an object, for the caller
            to parse and store with a status).

        Raises:
            ValueError: the endpoint honours no choice constraint (use :meth:`describe`).
            ModelNotAvailableError: the API key variable is unset.
        """
        from models_inference.backends.server_caps import answer_tokens, constrained_answer, constraint_fields

        constraint = self.required_constraint()
        requests = [replace(r, max_new_tokens=answer_tokens(constraint, r.max_new_tokens)) for r in requests]
        return self._ask(requests, sampling, on_batch, constraint_fields(constraint, choices), lambda text: constrained_answer(constraint, text))


#: I2T backend name (:data:`~ingestion.vocabulary.I2T_BACKENDS`) -> its constructor.
VISION_BACKENDS = {"transformers": TransformersVisionBackend.load, "openai": lambda m, **kw: OpenAIVisionBackend(model_id=m, **kw)}


def load_vision_backend(model: str, *, backend: str = "transformers", **kwargs) -> VisionBackend:
    """Describe with ``VISION_BACKENDS[backend](model, **kwargs)``: a local VLM or the vision chat API.

    Raises:
        ValueError: not a name of :data:`VISION_BACKENDS`. ModelNotAvailableError: the model cannot be loaded.
    """
    return build_backend("I2T", backend, model, VISION_BACKENDS, **kwargs)


__all__ = ["DescriptionRequest", "OpenAIVisionBackend", "TransformersVisionBackend", "VisionBackend", "image_data_url", "load_vision_backend"]
