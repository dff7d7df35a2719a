"""The text backend of an OpenAI-compatible server (:class:`OpenAIChatBackend`): chat or
completion requests with their seeds, a fleet of servers behind one ``base_url``, answers
constrained to a closed set of choices (:meth:`OpenAIChatBackend.choose`) and prompt lists
where the server takes them (``server_caps``). The local backend and the loader are in
:mod:`models_inference.backends.text`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ingestion.errors import CompletionsUnsupportedError
from models_inference.backends.base import GenerationRequest, GenerationResult, SamplingParams
from models_inference.backends.openai_api import OpenAIEndpoint, api_error_text, reply_choices

#: HTTP statuses that mean "this endpoint / model has no text-completions route".
_NO_COMPLETIONS = (404, 405, 501)
#: Tokens around a number that make it an end of an echoed range ("scale of 1 to 5", "1-5").
_RANGE_BEFORE = ("of", "from", "to", "-", "–", "between", "and")
_RANGE_AFTER = ("to", "-", "–", "and")


@dataclass
class OpenAIChatBackend(OpenAIEndpoint):
    """Any OpenAI-compatible endpoint (:class:`~models_inference.backends.openai_api.OpenAIEndpoint`).

    The chat prompt style goes to ``chat.completions``; the completion style (the prompt ends
    in the prefilled letter, BiasDora Figure 8 rendered as a continuation) goes to the
    text-completions endpoint ``completions`` (llama.cpp's ``llama-server``, vLLM and most
    local servers have it), so the model continues the word instead of answering a user turn
    in prose. An endpoint without it (404/405/501, e.g. OpenAI's chat models)
    raises :class:`CompletionsUnsupportedError` naming ``--prompt-style chat``; a chat answer
    is never parsed as a continuation. Any other per-request failure, including a malformed
    200 reply (``choices: []``, a body that is not JSON), becomes that request's error
    result, never an exception that would discard the rest of the chunk.

    A request with ``choices`` asks for ``logprobs`` (``top_logprobs`` alternatives) unless
    ``logprobs`` is off (servers that reject it). ``top_p`` is sent only below 1.

    Attributes:
        model_id: the served model name (e.g. ``gpt-4o``); the version is the served name
            (or a dated snapshot name) unless pinned.
    """

    default_prompt_style: str = "chat"
    logprobs: bool = True
    top_logprobs: int = 20
    #: pack completion-style requests (``n``, prompt lists) where the endpoint honours them
    batch_completions: bool = True
    #: samples of one prompt per request (``n``) and prompts per request, when batching
    max_n: int = 16
    prompts_per_request: int = 8
    #: send a prompt's runs as ``n``; ``None``: where the server takes it, except llama-server,
    #: whose ``n`` copies the prompt's cache to every child slot (measured slower than the same
    #: runs spread over prompt lists: benchmarks/bench_server_throughput.py)
    use_n: bool | None = None

    @staticmethod
    def _choice_logprobs(choice, choices: Sequence[str]) -> dict[str, float] | None:
        content = getattr(getattr(choice, "logprobs", None), "content", None) or []
        words = [(item.token or "").strip().lower() for item in content]
        for i, item in enumerate(content):
            # a number that ends an echoed range ("scale of 1 to 5") is not the answer
            before = next((w for w in reversed(words[:i]) if w), "")
            after = next((w for w in words[i + 1 :] if w), "")
            if before in _RANGE_BEFORE or after in _RANGE_AFTER:
                continue
            if (item.token or "").strip() in choices:
                merged = {alt.token: alt.logprob for alt in (item.top_logprobs or [])}
                merged[item.token] = item.logprob  # the chosen token may be absent from a short top list
                mass: dict[str, float] = {}
                for token, lp in merged.items():
                    t = token.strip()
                    if t in choices and lp is not None and math.isfinite(lp):
                        mass[t] = mass.get(t, 0.0) + math.exp(lp)
                return {t: math.log(m) for t, m in mass.items() if m > 0}
        return None

    def _sampling_kwargs(self, sampling: SamplingParams, max_tokens: int, seed: int) -> dict:
        """The request fields every text request shares: model, temperature, token budget, the
        row's seed (31 bits: servers reject larger ones) and ``top_p`` only below 1."""
        kwargs = dict(model=self.model_id, temperature=sampling.temperature, max_tokens=max_tokens, seed=int(seed) % (2**31))
        if sampling.top_p < 1.0:
            kwargs["top_p"] = sampling.top_p
        return kwargs

    def choose(self, requests, choices: Sequence[str], sampling=SamplingParams(), on_batch=None) -> list[GenerationResult]:
        """Constrained answers: each reply is one of ``choices`` under the endpoint's strongest
        choice constraint (:meth:`capabilities`: llama.cpp ``grammar``, vLLM
        ``structured_outputs``, SGLang ``regex``, a strict ``json_schema``), with top log-probs
        (as many as the endpoint gives) read into ``choice_logprobs``.

        Returns:
            One result per request, in order: ``text`` = the answer (for ``json_schema`` the
            object's ``answer`` field; the raw reply when it is not such an object, for the
            caller to store with a status), ``choice_logprobs`` at the answer token.

        Raises:
            ValueError: the endpoint honours no choice constraint (:meth:`required_constraint`;
                use :meth:`generate` and parse the free answer).
            ModelNotAvailableError: the API key variable is unset.
        """
        from models_inference.backends.server_caps import answer_tokens, chat_token_kwargs, constrained_answer, constraint_fields, merge_request

        constraint = self.required_constraint()
        fields = constraint_fields(constraint, choices)
        top = self.capabilities().top_logprobs if self.logprobs else 0

        def one(client, key, req: GenerationRequest) -> GenerationResult:
            kwargs = self._sampling_kwargs(sampling, answer_tokens(constraint, req.max_new_tokens), req.seed)
            kwargs["messages"] = req.prompt.as_messages()
            if top:
                kwargs.update(logprobs=True, top_logprobs=top)
            try:
                kwargs = chat_token_kwargs(kwargs, (self.base_urls or [None])[0])  # OpenAI: max_completion_tokens
                choice = reply_choices(client.chat.completions.create(**merge_request(kwargs, fields)))[0]
            except Exception as exc:  # noqa: BLE001 - kept as an 'error' row, never dropped
                return GenerationResult(text="", finished=True, error=api_error_text(exc, key))
            text = constrained_answer(constraint, choice.message.content)
            lps = self._choice_logprobs(choice, tuple(choices)) if top else None
            return GenerationResult(text, choice.finish_reason != "length", choice_logprobs=lps)

        return self.each(requests, one, on_batch)

    def generate(self, requests, sampling=SamplingParams(), on_batch=None):
        """One chat completion per request, ``concurrency`` at a time; errors become results.

        Completion-style requests go to ``/completions``; where the endpoint honours them
        (:meth:`capabilities`), the samples of one prompt go as ``n`` in one request and
        several prompts as one list (at most ``prompts_per_request`` prompts and ``max_n``
        samples per request), so a server that batches sequences gets them together. Each
        row keeps its own seed and key (the probe's); a request is sent with its first row's
        seed, from which the server draws all its samples.

        Raises:
            ModelNotAvailableError: the API key variable is unset.
            CompletionsUnsupportedError: completion style on an endpoint without ``/completions``.
        """

        batched = [i for i, r in enumerate(requests) if r.prompt.style == "completion"]
        caps = self.capabilities() if batched and self.batch_completions else None
        if caps is not None and (caps.completions_n or caps.prompt_lists) and len(batched) > 1:
            results: list[GenerationResult | None] = [None] * len(requests)
            rest = [i for i in range(len(requests)) if requests[i].prompt.style != "completion"]
            if rest:
                for i, res in zip(rest, self._generate_each([requests[i] for i in rest], sampling, on_batch), strict=True):
                    results[i] = res
            for i, res in zip(batched, self._generate_batched([requests[i] for i in batched], sampling, on_batch, caps), strict=True):
                results[i] = res
            return results  # type: ignore[return-value]
        return self._generate_each(requests, sampling, on_batch)

    def _completions_unsupported(self, exc) -> CompletionsUnsupportedError:
        return CompletionsUnsupportedError(
            f"{self.base_url or 'the OpenAI API'} has no text-completions endpoint for model "
            f"{self.model_id!r} (POST /completions: HTTP {exc.status_code}); the completion prompt "
            "style needs it: use --prompt-style chat (or a server with /v1/completions, e.g. "
            "llama-server or vLLM)"
        )

    def _generate_batched(self, requests, sampling, on_batch, caps) -> list[GenerationResult]:
        """Completion-style requests packed by prompt (``n``) and into prompt lists."""
        import threading

        import openai

        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.prompt.as_text(), r.max_new_tokens), []).append(i)
        use_n = caps.completions_n and (self.use_n if self.use_n is not None else caps.server != "llama.cpp")
        # llama-server refuses an n above its parallel slots (-np): HTTP 400
        max_n = max(1, min(self.max_n, caps.slots or self.max_n)) if use_n else 1
        chunks = {key: [idx[k : k + max_n] for k in range(0, len(idx), max_n)] for key, idx in groups.items()}
        per_request = max(1, self.prompts_per_request) if caps.prompt_lists else 1
        # Run-major ("striped"): the first unit of every prompt, then the second ...; a request
        # never holds one prompt twice, because a server seeds every prompt of a request with the
        # request's one seed (llama-server: a prompt listed twice came back twice identical)
        packs: list[list[list[int]]] = []
        open_pack: dict[tuple, list[list[int]]] = {}
        for k in range(max(len(c) for c in chunks.values())):
            for key, units in chunks.items():
                if k >= len(units):
                    continue
                unit = units[k]
                shape = (len(unit), requests[unit[0]].max_new_tokens)  # a request's prompts share n and budget
                pack = open_pack.get(shape)
                if pack is None or len(pack) >= per_request or any(requests[u[0]].prompt.as_text() == key[0] for u in pack):
                    pack = open_pack[shape] = []
                    packs.append(pack)
                pack.append(unit)
        results: list[GenerationResult | None] = [None] * len(requests)
        lock = threading.Lock()

        def one(client, key, pack: list[list[int]]) -> None:
            n = len(pack[0])
            first = requests[pack[0][0]]
            prompts = [requests[u[0]].prompt.as_text() for u in pack]
            kwargs = self._sampling_kwargs(sampling, first.max_new_tokens, first.seed)
            kwargs["prompt"] = prompts if len(prompts) > 1 else prompts[0]
            if n > 1:
                kwargs["n"] = n
            out: list[tuple[int, GenerationResult]] = []
            try:
                choices = reply_choices(client.completions.create(**kwargs))
                by_index = {c.index: c for c in choices}
                if sorted(by_index) != list(range(len(prompts) * n)):
                    raise ValueError(f"the server returned choices {sorted(by_index)[:8]} for {len(prompts)} prompts x n={n}")
                for p, unit in enumerate(pack):
                    for k, row in enumerate(unit):
                        c = by_index[p * n + k]
                        out.append((row, GenerationResult(c.text or "", c.finish_reason != "length")))
            except openai.APIStatusError as exc:
                if exc.status_code in _NO_COMPLETIONS:
                    raise self._completions_unsupported(exc) from None
                out = [(row, GenerationResult("", True, error=api_error_text(exc, key))) for u in pack for row in u]
            except Exception as exc:  # noqa: BLE001 - kept as 'error' rows (timeouts, bad replies), never dropped
                out = [(row, GenerationResult("", True, error=api_error_text(exc, key))) for u in pack for row in u]
            with lock:
                for row, res in out:
                    results[row] = res
                if on_batch:
                    on_batch(len(out))

        self.each(packs, one)
        return results  # type: ignore[return-value]

    def _generate_each(self, requests, sampling, on_batch) -> list[GenerationResult]:
        import openai

        from models_inference.backends.server_caps import chat_token_kwargs

        def send(client, req: GenerationRequest) -> GenerationResult:
            kwargs = self._sampling_kwargs(sampling, req.max_new_tokens, req.seed)
            if req.prompt.style == "completion":  # a continuation: the text-completions endpoint
                choice = reply_choices(client.completions.create(prompt=req.prompt.as_text(), **kwargs))[0]
                return GenerationResult(choice.text or "", choice.finish_reason != "length")
            if req.choices and self.logprobs:
                kwargs.update(logprobs=True, top_logprobs=self.top_logprobs)
            kwargs = chat_token_kwargs(kwargs, (self.base_urls or [None])[0])  # OpenAI's reasoning models refuse max_tokens
            choice = reply_choices(client.chat.completions.create(messages=req.prompt.as_messages(), **kwargs))[0]
            lps = self._choice_logprobs(choice, req.choices) if req.choices else None
            return GenerationResult(choice.message.content or "", choice.finish_reason != "length", choice_logprobs=lps)

        def one(client, key, req: GenerationRequest) -> GenerationResult:
            try:
                return send(client, req)
            except openai.APIStatusError as exc:
                if req.prompt.style == "completion" and exc.status_code in _NO_COMPLETIONS:
                    raise self._completions_unsupported(exc) from None
                return GenerationResult(text="", finished=True, error=api_error_text(exc, key))
            except Exception as exc:  # noqa: BLE001 - kept as an 'error' row (timeouts, bad replies), never dropped
                # some endpoints quote the key in their error text: it must not reach a row
                return GenerationResult(text="", finished=True, error=api_error_text(exc, key))

        return self.each(requests, one, on_batch)


__all__ = ["OpenAIChatBackend"]
