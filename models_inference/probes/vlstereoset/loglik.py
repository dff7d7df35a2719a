"""Log-likelihood of a given text under a local ``transformers`` model (docs/families/vlstereoset.md#selection-rule and docs/families/vlstereoset.md#text-only-use).

NOT FROM PAPER: the paper scores with ITM heads and contrastive similarities (§3.3); dora's
generative adaptations need log p(caption tokens | context):

* :func:`text_logliks`: a causal LM with no image (``vlstereo_text_caption_prior``), the
  caption after a fixed prefix (the tokenizer's BOS token, else its EOS token as a document
  separator, else nothing);
* :func:`vision_logliks`: an image-text-to-text chat model (LLaVA-style), the caption as the
  assistant's answer to a fixed neutral instruction with the image (``score=loglik``).

Both return, per text, the sum of the caption tokens' natural-log probabilities and the
number of caption tokens (the per-token mean is sum / n). They work on the backends' own
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


__all__ = ["LOGLIK_INSTRUCTION", "text_logliks", "text_prefix", "vision_logliks"]
