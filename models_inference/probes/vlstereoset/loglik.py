"""Log-likelihood of a given text under a local ``transformers`` model (docs/families/vlstereoset.md#selection-rule and docs/families/vlstereoset.md#text-only-use).

NOT FROM PAPER: the paper scores with ITM heads and contrastive similarities (§3.3); dora's
generative adaptations need log p(caption tokens | context):

* :func:`text_logliks`: a causal LM with no image (``vlstereo_text_caption_prior``), the
  caption after a fixed prefix (the tokenizer's BOS token, else its EOS token as a document
  separator, else nothing);
* :func:`vision_logliks`: an image-text-to-text chat model (LLaVA-style), the caption as the
  assistant's answer to a fixed neutral instruction with the image (``score=loglik``).

Both return, per text, the sum of the caption tokens' natural-log probabilities and the
number of caption tokens (the per-token mean is sum / n).

:func:`text_logliks_shared` computes :func:`text_logliks`'s numbers with far less work (the plain loop ran at ~5 log-likelihoods/s on 2 cores). The captions of one VLStereoSet item
are one context with a different word in the blank, the released file repeats a caption row
for each of its images, and a causal LM's output at a token depends only on the tokens before
it. So the distinct token sequences are merged into a prefix tree, each tree node (a token
after a given prefix) is computed once, in packed rows whose attention mask lets a node see
only its ancestors (position id = depth), and the output projection runs only where a next
token is scored. The numbers are the plain loop's up to float rounding (different matrix
shapes); BENCHMARKS.md gives the measured difference. They work on the backends' own
model objects (:class:`models_inference.backends.text.TransformersBackend`,
:class:`models_inference.backends.vision.TransformersVisionBackend`) and change neither.
"""

from __future__ import annotations

from typing import Sequence

#: The neutral instruction the caption answers in ``score=loglik`` (docs/families/vlstereoset.md#selection-rule's example).
LOGLIK_INSTRUCTION = "Describe the image."


def text_prefix(tokenizer) -> str:
    """The fixed text before every caption in :func:`text_logliks` (BOS, else EOS, else empty)."""
    return tokenizer.bos_token or tokenizer.eos_token or ""


def text_logliks(model, tokenizer, texts: Sequence[str], *, batch_size: int = 32) -> list[tuple[float, int]]:
    """(sum of log p, number of tokens) of each text under a causal LM, after :func:`text_prefix`.

    Args:
        model, tokenizer: a ``transformers`` causal LM and its tokenizer (e.g. the embedded
            SmolLM2-135M of ``load_text_backend('smollm2-135m')``: ``backend.model``, ``backend.tokenizer``).
        texts: the captions; batched ``batch_size`` at a time, right-padded.

    Returns:
        One ``(loglik_sum, n_tokens)`` per text, in order; natural log; ``n_tokens >= 1``.

    Raises:
        ValueError: a text that tokenises to no token.
    """
    import torch

    prefix = text_prefix(tokenizer)
    prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []
    out: list[tuple[float, int]] = []
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        seqs, spans = [], []
        for text in chunk:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            if not ids:
                raise ValueError(f"caption {text!r} has no token")
            seqs.append(prefix_ids + ids)
            spans.append((len(prefix_ids), len(prefix_ids) + len(ids)))
        width = max(len(s) for s in seqs)
        input_ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            input_ids[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
        with torch.inference_mode():
            logits = model(input_ids=input_ids, attention_mask=mask).logits.float()
        logp = torch.log_softmax(logits, dim=-1)
        for i, (a, b) in enumerate(spans):
            # token t is predicted at position t-1; a caption starting at 0 (no prefix) loses its first token
            first = max(a, 1)
            targets = input_ids[i, first:b]
            lp = logp[i, first - 1 : b - 1].gather(1, targets.unsqueeze(1)).squeeze(1)
            out.append((float(lp.sum()), int(b - first)))
    return out


def _packed_rows(seqs: Sequence[tuple[int, ...]], row_tokens: int) -> list[list[tuple[int, list[int]]]]:
    """Split sequences (sorted) into rows; per row, ``(sequence index, row position of each token)``.

    A row stores each distinct prefix once: sorted sequences share their longest common prefix
    with their predecessor, which is the longest they share with any earlier one of the row.
    A row takes sequences while its node count stays within ``row_tokens`` (a longer sequence
    gets a row of its own).
    """
    rows: list[list[tuple[int, list[int]]]] = []
    prev: tuple[int, ...] = ()
    prev_path: list[int] = []
    used = 0
    for idx, seq in enumerate(seqs):
        lcp = 0
        if rows:
            n = min(len(prev), len(seq))
            while lcp < n and prev[lcp] == seq[lcp]:
                lcp += 1
        if not rows or used + len(seq) - lcp > row_tokens:
            rows.append([])
            lcp, used, prev_path = 0, 0, []
        path = prev_path[:lcp] + list(range(used, used + len(seq) - lcp))
        used += len(seq) - lcp
        rows[-1].append((idx, path))
        prev, prev_path = seq, path
    return rows


def text_logliks_shared(model, tokenizer, texts: Sequence[str], *, row_tokens: int = 256, cache: dict | None = None) -> list[tuple[float, int]]:
    """:func:`text_logliks`'s ``(sum of log p, number of tokens)`` per text, each distinct prefix computed once.

    The distinct token sequences (prefix + caption) are sorted and packed into rows of at
    most ``row_tokens`` tree nodes (:func:`_packed_rows`); a row is one forward pass with a 4-D
    attention mask (node i sees node j iff j is i or an ancestor of i) and position ids = depth,
    so every node's hidden state is the one it has in its own unpadded sequence. A caption's
    last token is not fed at all unless another sequence continues it (nothing reads its
    output), and logits are computed (``logits_to_keep``) only at nodes whose next token is
    scored. Each node's log-probability is then summed along each text's path, in token order,
    in float32 as in :func:`text_logliks`.

    Args:
        model, tokenizer: as :func:`text_logliks` (a ``transformers`` causal LM whose forward
            takes ``position_ids`` and a 4-D additive ``attention_mask``; ``logits_to_keep`` is
            used when the forward has it).
        texts: the captions, in any order; repeats are computed once.
        row_tokens: tree nodes per forward pass (attention costs O(row_tokens^2) per row;
            256 keeps it a few percent of the matrix products of a 135M model).
        cache: optional text -> ``(loglik_sum, n_tokens)`` map, read and filled (a scorer
            passes the same map for all its calls, so a caption repeated across chunks is
            computed once).

    Returns:
        One ``(loglik_sum, n_tokens)`` per text, in order; natural log; the token counts of
        :func:`text_logliks` and its sums up to float rounding (max |difference| below 1e-4
        nats on the shipped synthetic file and an excerpt of the released one; figures in
        BENCHMARKS.md, "VLStereoSet text prior").

    Raises:
        ValueError: a text that tokenises to no token, or ``row_tokens < 1``.
    """
    import inspect

    if row_tokens < 1:
        raise ValueError(f"row_tokens must be >= 1, got {row_tokens}")
    cache = {} if cache is None else cache
    todo = sorted({t for t in texts if t not in cache})
    if todo:
        first, full, by_fed = _fed_sequences(tokenizer, todo, cache)
        fed = sorted(by_fed)
        takes_keep = "logits_to_keep" in inspect.signature(model.forward).parameters
        for row in _packed_rows(fed, row_tokens):
            logp, keep = _row_logprobs(model, row, fed, first, takes_keep)
            at = {pos: i for i, pos in enumerate(keep)}
            # every scored (node, next token) of the row, gathered in one indexing: per text, its
            # tokens' log-probabilities in order, then summed in float32 as text_logliks does
            spans, rows_at, targets = [], [], []
            for idx, path in row:
                for text in by_fed[fed[idx]]:
                    seq = full[text]
                    spans.append((text, len(rows_at), len(seq) - first))
                    rows_at.extend(at[pos] for pos in path[first - 1 :])
                    targets.extend(seq[first:])
            picked = logp[_torch_long(rows_at), _torch_long(targets)]
            for text, start, count in spans:
                cache[text] = (float(picked[start : start + count].sum()), count)
    return [cache[t] for t in texts]


def _torch_long(values: list[int]):
    """``values`` as a torch ``long`` tensor (indices)."""
    import torch

    return torch.tensor(values, dtype=torch.long)


def _fed_sequences(tokenizer, todo: list[str], cache: dict) -> tuple[int, dict, dict]:
    """(the position of a text's first scored token, text -> its full token sequence (prefix +
    caption), fed sequence -> the texts it scores): a sequence's last token is never fed. A text
    with nothing to score goes straight into ``cache`` as ``(0.0, 0)``. Raises ValueError: a
    text that tokenises to no token."""
    prefix = text_prefix(tokenizer)
    prefix_ids = tuple(tokenizer(prefix, add_special_tokens=False)["input_ids"]) if prefix else ()
    encoded = tokenizer(todo, add_special_tokens=False)["input_ids"]
    for text, ids in zip(todo, encoded, strict=True):
        if not ids:
            raise ValueError(f"caption {text!r} has no token")
    # the scored tokens of a text: from the first caption token, or the second with no prefix
    # (nothing predicts a first token; :func:`text_logliks` drops it the same way)
    first = max(len(prefix_ids), 1)
    full = {text: prefix_ids + tuple(ids) for text, ids in zip(todo, encoded, strict=True)}
    by_fed: dict[tuple[int, ...], list[str]] = {}  # a sequence's last token is never input: feed the rest
    for text, seq in full.items():
        if len(seq) <= first:  # one token and no prefix: nothing scored, as in text_logliks
            cache[text] = (0.0, 0)
        else:
            by_fed.setdefault(seq[:-1], []).append(text)
    return first, full, by_fed


def _row_logprobs(model, row: list, fed: list[tuple[int, ...]], first: int, takes_keep: bool):
    """One packed row's forward pass with its tree attention mask (a node sees itself and its
    ancestors) and position ids = depth. Returns (log-probabilities, float32 on CPU, one row per
    kept node; the kept nodes' positions: every node at depth >= ``first - 1``)."""
    import numpy as np
    import torch

    param = next(model.parameters())
    n = 1 + max(max(path) for _, path in row)
    ids, depth, parent = [0] * n, [0] * n, [-1] * n
    for idx, path in row:
        for d, pos in enumerate(path):
            ids[pos], depth[pos], parent[pos] = fed[idx][d], d, path[d - 1] if d else -1
    allowed = np.eye(n, dtype=bool)
    for pos in range(n):  # parents come before children, so a node inherits its ancestors
        if parent[pos] >= 0:
            allowed[pos] |= allowed[parent[pos]]
    mask = torch.zeros((n, n), dtype=param.dtype).masked_fill_(torch.from_numpy(~allowed), torch.finfo(param.dtype).min)
    # logits where a next token is scored: every fed node at depth >= first - 1 (each is
    # followed by a scored token of some text); the prefix's own nodes need none
    keep = [pos for pos in range(n) if depth[pos] >= first - 1]
    keep_t = torch.tensor(keep, dtype=torch.long, device=param.device)
    kwargs = {"logits_to_keep": keep_t} if takes_keep else {}
    with torch.inference_mode():
        logits = model(
            input_ids=torch.tensor([ids], device=param.device),
            attention_mask=mask[None, None].to(param.device),
            position_ids=torch.tensor([depth], device=param.device),
            use_cache=False,
            **kwargs,
        ).logits[0]
        if not takes_keep:
            logits = logits[keep_t]
        return torch.log_softmax(logits.float(), dim=-1).cpu(), keep


def vision_logliks(backend, image, captions: Sequence[str], instruction: str = LOGLIK_INSTRUCTION) -> list[tuple[float, int]]:
    """(sum of log p, n tokens) of each caption as the answer to ``instruction`` about ``image``.

    Args:
        backend: a :class:`models_inference.backends.vision.TransformersVisionBackend` in ``chat`` mode.
        image: a PIL RGB image.
        captions: the candidate captions (one forward pass each).

    Returns:
        One ``(loglik_sum, n_tokens)`` per caption, natural log.

    Raises:
        ValueError: the backend is not a chat image-text-to-text model (prefix-mode
            captioners are not supported), or a caption adds no token.
    """
    import torch

    if getattr(backend, "mode", None) != "chat":
        raise ValueError(f"loglik scoring needs a chat image-text-to-text model; {backend.model_id} is in {backend.mode!r} mode")
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": instruction}]}]
    prompt = backend.processor.apply_chat_template(messages, add_generation_prompt=True)
    base = backend.processor(images=[image], text=[prompt], return_tensors="pt")
    n_prompt = base["input_ids"].shape[1]
    results = []
    for caption in captions:
        enc = backend.processor(images=[image], text=[f"{prompt} {caption}"], return_tensors="pt")
        enc = {k: v.to(backend.device) for k, v in enc.items() if k != "token_type_ids"}
        if "pixel_values" in enc and backend.model.dtype != enc["pixel_values"].dtype:
            enc["pixel_values"] = enc["pixel_values"].to(backend.model.dtype)
        ids = enc["input_ids"][0]
        n = ids.shape[0] - n_prompt
        if n < 1:
            raise ValueError(f"caption {caption!r} adds no token to the prompt")
        with torch.inference_mode():
            logits = backend.model(**enc).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        targets = ids[n_prompt:]
        lp = logp[n_prompt - 1 : ids.shape[0] - 1].gather(1, targets.unsqueeze(1)).squeeze(1)
        results.append((float(lp.sum()), int(n)))
    return results


__all__ = ["LOGLIK_INSTRUCTION", "text_logliks", "text_logliks_shared", "text_prefix", "vision_logliks"]
