"""The I2T probe: objective and subjective descriptions of the T2I images (BiasDora
Sections 2.2-2.3, Appendix A.10, Figures 10-11; METHOD.md section 2).

Every image of an image audit (``landing/t2i_images``, status ``ok``) is described once per
description setting with the paper's prompts (:data:`models_inference.prompts.I2T_PROMPTS`):
the objective settings (straightforward, moderate, comprehensive; the paper kept
comprehensive) give the T2I associations, the subjective settings (subjective,
stereotypical, implicit, lexical) the I2T associations. Sampling: temperature 0.7,
top_p 0.95, at most 200 new tokens (METHOD.md section 2).

Backends (one interface, :class:`VisionBackend`):

* :class:`TransformersVisionBackend`: a ``transformers`` image-text-to-text model by hub id
  or local folder (paper: LLaVA), loaded with ``AutoModelForImageTextToText``. Chat models
  get the image and the prompt in one user turn through the processor's chat template;
  encoder-decoder captioners (``VisionEncoderDecoderModel``) get the prompt as the decoder's
  prefix. Each row samples with its own seed (independent of batching).
* :class:`OpenAIVisionBackend`: any OpenAI-compatible vision chat endpoint (paper: GPT-4o),
  the image sent inline as a ``data:image/png;base64,...`` URL.

Rows land in ``landing/i2t_descriptions`` keyed by (audit_id, image_setting, descriptor,
image_index, setting); a re-run describes only keys without a non-error row, so an
interrupted audit resumes and failed calls are retried.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Protocol, Sequence

from ingestion.landing import landing_dir
from models_inference.prompts import DEFAULT_I2T_SETTINGS, I2T_SETTINGS, RenderedPrompt, description_kind, render_i2t_prompt
from models_inference.resumable import AuditInfo, ResumableTable, model_columns, run_resumable
from models_inference.t2i import image_file, local_model_version, slug
from models_inference.text_backends import (
    GenerationResult,
    ModelNotAvailableError,
    SamplingParams,
    _PerRowSampler,
    api_error_text,
    map_concurrently,
    openai_client,
)

#: Default token budget of a description (METHOD.md section 2).
DEFAULT_MAX_NEW_TOKENS = 200
#: Description statuses that count as done (a re-run does not describe them again).
FINAL_DESCRIPTION_STATUSES = ("ok", "truncated", "empty")
#: Where descriptions land; an (image_setting, descriptor, image_index, setting) key is done
#: once it has a row with a final status (``error`` rows are retried).
I2T_TABLE = ResumableTable(
    "i2t_descriptions", ("image_setting", "descriptor", "descriptor_row", "image_index", "setting"), "status",
    FINAL_DESCRIPTION_STATUSES, null_defaults=(("descriptor_row", 1),),
    unit="description",
)


#: The paper's LLaVA (BiasDora released code; METHOD.md 3a; issue 11).
PAPER_LLAVA_MODEL = "llava-hf/llava-v1.6-vicuna-7b-hf"
#: The system prompt of the paper's LLaVA runs. ASSUMPTION (the released code's exact text is
#: not in this repository's sources): LLaVA's own vicuna_v1 conversation system prompt.
PAPER_LLAVA_SYSTEM_PROMPT = (
    "A chat between a curious human and an artificial intelligence assistant. The assistant gives "
    "helpful, detailed, and polite answers to the human's questions."
)
#: The paper's LLaVA input size (width, height).
PAPER_LLAVA_IMAGE_SIZE = (448, 448)


@dataclass(frozen=True)
class DescriptionRequest:
    """One image to describe.

    Attributes:
        image_path: absolute path of the stored PNG.
        prompt: the description prompt (:func:`models_inference.prompts.render_i2t_prompt`).
        seed: per-row seed (int64).
        max_new_tokens: token budget (default 200).
    """

    image_path: Path
    prompt: RenderedPrompt
    seed: int
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS


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
        cls, model_ref: str, *, batch_size: int = 4, device: str | None = None,
        system_prompt: str | None = None, image_size: tuple[int, int] | None = None,
    ) -> "TransformersVisionBackend":
        """Load by hub id (offline: only if cached) or local folder; fp16 on CUDA, fp32 on CPU.

        ``system_prompt`` (chat mode) is sent as a system turn before the image and prompt;
        ``image_size`` (width, height) resizes every image first. The paper's LLaVA
        configuration (:data:`PAPER_LLAVA_MODEL`, :data:`PAPER_LLAVA_SYSTEM_PROMPT`, 448x448;
        issue 11) sets both.

        Raises:
            ModelNotAvailableError: the model or its processor cannot be loaded here.
        """
        import torch
        from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.float16 if device.startswith("cuda") else torch.float32
        try:
            model = AutoModelForImageTextToText.from_pretrained(model_ref, dtype=dtype)
            processor = AutoProcessor.from_pretrained(model_ref)
            tokenizer = getattr(processor, "tokenizer", None)
            image_processor = getattr(processor, "image_processor", None)
            if tokenizer is None:  # AutoProcessor gave only one half (e.g. VisionEncoderDecoder folders)
                tokenizer = processor if hasattr(processor, "batch_decode") else AutoTokenizer.from_pretrained(model_ref)
            if image_processor is None:
                image_processor = AutoImageProcessor.from_pretrained(model_ref)
        except (OSError, ValueError, KeyError) as exc:
            raise ModelNotAvailableError(
                f"cannot load image-to-text model {model_ref!r} here: {exc}. Use a local folder "
                "(save_pretrained of model and processor) or a hub id already in the Hugging Face "
                "cache, or unset HF_HUB_OFFLINE on a machine with hub access."
            ) from exc
        model.to(device).eval()
        # chat mode needs a multimodal processor (not a bare tokenizer) that has a chat template
        chat = processor is not tokenizer and bool(getattr(processor, "chat_template", None))
        if hasattr(tokenizer, "padding_side"):
            tokenizer.padding_side = "left"
        if getattr(tokenizer, "pad_token", None) is None and getattr(tokenizer, "eos_token", None) is not None:
            tokenizer.pad_token = tokenizer.eos_token
        version = getattr(model.config, "_commit_hash", None) or local_model_version(model_ref)
        return cls(model_ref, version, model, processor, tokenizer, image_processor,
                   mode="chat" if chat else "prefix", batch_size=batch_size, device=device,
                   system_prompt=system_prompt, image_size=tuple(image_size) if image_size else None)

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

    def _eos_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)}
        flat: set[int] = set()
        for i in ids:
            if isinstance(i, (list, tuple)):
                flat.update(i)
            elif i is not None:
                flat.add(int(i))
        return sorted(flat)

    def describe(self, requests, sampling=SamplingParams(), on_batch=None):
        """Describe ``requests`` in batches of ``batch_size`` images sharing a prompt.

        Returns one :class:`~models_inference.text_backends.GenerationResult` per request in
        input order; an unreadable image or a failing batch gives ``error`` results.
        """
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

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
        eos = self._eos_ids()
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
                    processors = LogitsProcessorList(
                        [
                            TemperatureLogitsWarper(sampling.temperature),
                            TopPLogitsWarper(sampling.top_p),
                            _PerRowSampler([requests[i].seed for i in batch]),
                        ]
                    )
                    config = GenerationConfig(
                        do_sample=False, max_new_tokens=first.max_new_tokens, pad_token_id=pad, eos_token_id=eos or None,
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
class OpenAIVisionBackend:
    """Any OpenAI-compatible vision chat endpoint (paper: GPT-4o) via the ``openai`` client.

    One user turn per request: the prompt text and the image as a data URL. The key is read
    from ``api_key_env`` at call time (never stored; error texts are redacted with
    :func:`models_inference.text_backends.redact`, since some servers quote the key in them);
    retries on 429/5xx/timeouts are the client's (``max_retries``); other failures become
    ``error`` results (retried next run).
    """

    model_id: str = "gpt-4o"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 4
    timeout: float = 120.0
    concurrency: int = 4
    model_version: str = ""
    backend_name: str = "openai"

    def __post_init__(self):
        self.model_version = self.model_version or self.model_id

    def describe(self, requests, sampling=SamplingParams(), on_batch=None):
        """One chat completion per request, ``concurrency`` at a time.

        Raises:
            ModelNotAvailableError: the API key variable is unset.
        """
        import openai

        client = openai_client(self.api_key_env, self.base_url, max_retries=self.max_retries, timeout=self.timeout)
        key = client.api_key

        def one(req: DescriptionRequest) -> GenerationResult:
            try:
                url = image_data_url(req.image_path)
            except OSError as exc:
                return GenerationResult("", True, f"cannot read image {req.image_path.name}: {exc}")
            messages = [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": req.prompt.text},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ]
            try:
                resp = client.chat.completions.create(
                    model=self.model_id,
                    messages=messages,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    max_tokens=req.max_new_tokens,
                    seed=int(req.seed) % (2**31),
                )
            except openai.OpenAIError as exc:  # the key-quoting proxy case: never stored
                return GenerationResult("", True, api_error_text(exc, key))
            choice = resp.choices[0]
            return GenerationResult(choice.message.content or "", choice.finish_reason != "length")

        return map_concurrently(one, requests, self.concurrency, on_batch)


I2T_BACKENDS = ("transformers", "openai")


def load_vision_backend(model: str, *, backend: str = "transformers", **kwargs) -> VisionBackend:
    """Build an I2T backend by name: ``transformers`` (local) or ``openai`` (vision chat API).

    Raises:
        ValueError: unknown backend. ModelNotAvailableError: the model cannot be loaded.
    """
    if backend == "transformers":
        return TransformersVisionBackend.load(model, **kwargs)
    if backend == "openai":
        return OpenAIVisionBackend(model_id=model, **kwargs)
    raise ValueError(f"unknown I2T backend {backend!r}; expected one of {I2T_BACKENDS}")


# ----------------------------------------------------------------------------- the probe


@dataclass
class I2TProbeConfig:
    """Parameters of an I2T probe run.

    Attributes:
        settings: description settings (default: comprehensive + the 4 subjective ones).
        max_new_tokens, temperature, top_p: generation (paper: 200, 0.7, 0.95).
        shard_rows: descriptions per landed Parquet shard.
    """

    settings: tuple[str, ...] = DEFAULT_I2T_SETTINGS
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 0.7
    top_p: float = 0.95
    shard_rows: int = 32

    def validate(self) -> "I2TProbeConfig":
        self.settings = tuple(self.settings)
        if not self.settings:
            raise ValueError("no description setting selected")
        for s in self.settings:
            description_kind(s)  # raises on an unknown setting
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        return self

    def fingerprint(self) -> dict:
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p}


@dataclass
class I2TRunSummary:
    """What an I2T run did: images found, descriptions planned / already landed / generated, by status."""

    audit_id: str
    image_audit_id: str
    images: int = 0
    planned: int = 0
    already_landed: int = 0
    generated: int = 0
    status: Counter = field(default_factory=Counter)


def description_audit_id_for(backend: VisionBackend, image_audit_id: str, t2i_model_id: str, config: I2TProbeConfig) -> str:
    """Deterministic description audit id ``vision-<t2i model>-<i2t model>-<hash8>``.

    The hash covers the image audit, the I2T backend, model and version, and the sampling
    parameters: describing the same images with the same model extends the same audit.
    """
    payload = {"images": image_audit_id, "backend": backend.backend_name, "model": backend.model_id,
               "version": backend.model_version, **config.fingerprint()}
    params = getattr(backend, "description_params", dict)()
    if params:  # only when set (system prompt, image size): earlier audits keep their id
        payload["params"] = params
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    name = lambda m: slug(m.rstrip("/").split("/")[-1], 24)  # noqa: E731
    return f"vision-{name(t2i_model_id)}-{name(backend.model_id)}-{digest[:8]}"


def description_seed(audit_id: str, image_setting: str, descriptor: str, image_index: int, setting: str) -> int:
    """Per-description seed: 63-bit blake2b of the row key."""
    key = f"{audit_id}|i2t|{image_setting}|{descriptor}|{image_index}|{setting}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") >> 1


def landed_images(image_audit_id: str) -> list[dict]:
    """The latest row of every image key of an image audit whose status is ``ok``, in key order."""
    import duckdb

    from ingestion.landing import landing_glob

    landing_dir("t2i_images")
    sql = """
        select * from read_parquet(?, union_by_name = true)
        where audit_id = ?
        qualify row_number() over (
            partition by setting, descriptor, coalesce(descriptor_row, 1), image_index order by generated_at desc
        ) = 1
        order by setting, descriptor, coalesce(descriptor_row, 1), image_index
    """
    with duckdb.connect() as con:
        rows = con.sql(sql, params=[landing_glob("t2i_images"), image_audit_id]).to_arrow_table().to_pylist()
    for r in rows:
        r["descriptor_row"] = r.get("descriptor_row") or 1
    return [r for r in rows if r["status"] == "ok" and r["image_path"]]


def run_i2t_probe(
    image_audit_id: str,
    backend: VisionBackend,
    config: I2TProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    progress: bool = True,
) -> I2TRunSummary:
    """Describe every ``ok`` image of an image audit in each setting, landing missing rows.

    Args:
        image_audit_id: the T2I audit whose images to describe (``landing/t2i_images``).
        backend: a :class:`VisionBackend`.
        config: :class:`I2TProbeConfig`.
        audit_id: override :func:`description_audit_id_for`.
        progress: tqdm bar on stderr.

    Returns:
        An :class:`I2TRunSummary`; statuses: ``ok``, ``truncated`` (hit max_new_tokens; its
        words still count), ``empty``, ``error`` (retried next run). Rows land in shards of
        ``config.shard_rows`` (:func:`models_inference.resumable.run_resumable`); the audit
        gets ``started`` / ``finished`` events, or ``failed`` (then the exception is re-raised).

    Raises:
        ValueError: invalid config (incl. ``shard_rows < 1``), or the image audit has no
            ``ok`` image.
        ModelNotAvailableError: the backend cannot run (e.g. API key unset).
    """
    cfg = (config or I2TProbeConfig()).validate()
    images = landed_images(image_audit_id)
    if not images:
        raise ValueError(f"image audit {image_audit_id!r} has no image with status 'ok' to describe")
    t2i_model_id, t2i_version = images[0]["model_id"], images[0]["model_version"]
    audit_id = audit_id or description_audit_id_for(backend, image_audit_id, t2i_model_id, cfg)
    sampling = SamplingParams(cfg.temperature, cfg.top_p)

    def generate(chunk: list[tuple[dict, str]], advance: Callable[[int], None]) -> list[dict]:
        requests, bad = [], {}
        for n, (img, setting) in enumerate(chunk):
            row = img["descriptor_row"]
            seed = description_seed(audit_id, img["setting"], img["descriptor"] + (f"|row{row}" if row != 1 else ""),
                                    img["image_index"], setting)
            try:
                path = image_file(img["image_path"])
            except ValueError as exc:
                bad[n] = str(exc)
                path = Path("/nonexistent")
            requests.append(DescriptionRequest(path, render_i2t_prompt(setting), seed, cfg.max_new_tokens))
        ok_idx = [n for n in range(len(chunk)) if n not in bad]
        answers = backend.describe([requests[n] for n in ok_idx], sampling, on_batch=advance)
        results: dict[int, GenerationResult] = dict(zip(ok_idx, answers))
        for n, msg in bad.items():
            results[n] = GenerationResult("", True, msg)
            advance(1)
        now = datetime.now(timezone.utc)
        rows = []
        for n, ((img, setting), req) in enumerate(zip(chunk, requests)):
            res = results[n]
            if res.error:
                status = "error"
            elif not res.text.strip():
                status = "empty"
            elif not res.finished:
                status = "truncated"
            else:
                status = "ok"
            row = f"|row{img['descriptor_row']}" if img["descriptor_row"] != 1 else ""
            key = f"{audit_id}|{img['setting']}|{img['descriptor']}{row}|{img['image_index']}|{setting}|{now.isoformat()}"
            rows.append(
                {
                    **model_columns(audit_id, backend),
                    "description_id": hashlib.blake2b(key.encode(), digest_size=16).hexdigest(),
                    "image_audit_id": image_audit_id,
                    "t2i_model_id": t2i_model_id,
                    "t2i_model_version": t2i_version,
                    "image_setting": img["setting"],
                    "descriptor": img["descriptor"],
                    "bias_dimension": img["bias_dimension"],
                    "descriptor_row": img["descriptor_row"],
                    "image_index": img["image_index"],
                    "image_sha256": img["sha256"],
                    "setting": setting,
                    "description_kind": description_kind(setting),
                    "seed": req.seed,
                    "prompt": req.prompt.text,
                    "raw_output": res.text if not res.error else None,
                    "status": status,
                    "error": res.error,
                    "generated_at": now,
                }
            )
        return rows

    event_cfg = {"backend": backend.backend_name, "image_audit_id": image_audit_id, "t2i_model_id": t2i_model_id,
                 "settings": list(cfg.settings), **cfg.fingerprint()}
    audit = AuditInfo(audit_id, backend.model_id, backend.model_version, "i2t", event_cfg)
    planned = [(img, setting) for img in images for setting in cfg.settings]
    key = lambda item: (item[0]["setting"], item[0]["descriptor"], item[0]["descriptor_row"], item[0]["image_index"], item[1])  # noqa: E731
    result = run_resumable(planned, key, generate, table=I2T_TABLE, audit=audit, shard_rows=cfg.shard_rows, progress=progress)
    return I2TRunSummary(
        audit_id, image_audit_id, images=len(images), planned=result.planned, already_landed=result.already_landed,
        generated=result.generated, status=result.statuses,
    )


__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "DescriptionRequest",
    "I2TProbeConfig",
    "I2TRunSummary",
    "I2T_BACKENDS",
    "I2T_SETTINGS",
    "OpenAIVisionBackend",
    "TransformersVisionBackend",
    "VisionBackend",
    "description_audit_id_for",
    "image_data_url",
    "landed_images",
    "load_vision_backend",
    "run_i2t_probe",
]
