"""What every local ``transformers`` backend shares (text, judge, vision): per-row sampling,
end-of-turn ids, word / bracket stopping, and the fp32 cache of dequantised GGUF weights.

Sampling follows docs/method.md#2-probes / BiasDora Appendix A: temperature, then top-p, then one
draw per row from its own seeded ``torch.Generator`` (:class:`PerRowSampler`), so a row's
sample depends only on its seed, not on the batch it happens to be in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence


class PerRowSampler:
    """Logits processor that samples each row with its own ``torch.Generator``.

    Applied after temperature and top-p warping; it masks every token but the sampled one,
    so ``generate``'s greedy step picks the sample.
    """

    def __init__(self, seeds: Sequence[int]):
        import torch

        self.generators = [torch.Generator().manual_seed(int(s) % (2**63)) for s in seeds]

    def __call__(self, input_ids, scores):
        import torch

        probs = torch.softmax(scores.float(), dim=-1)
        picked = torch.stack([torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(self.generators)])
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(1, picked, 0.0)
        return out


def sampling_processors(temperature: float, top_p: float, seeds: Sequence[int]):
    """The logits processors of one batch: temperature, top-p (only below 1), per-row sampler.

    ``temperature <= 0`` gives none (greedy decoding).
    """
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

    if temperature <= 0:
        return LogitsProcessorList()
    warpers = [TemperatureLogitsWarper(temperature)]
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    return LogitsProcessorList([*warpers, PerRowSampler(seeds)])


def eos_token_ids(tokenizer, generation_config=None) -> list[int]:
    """End-of-sequence ids: the tokenizer's EOS, ``<|im_end|>`` when the vocabulary has it
    (instruct models end turns with it; a GGUF's metadata names another EOS), and the
    generation config's ``eos_token_id`` (one id or a list)."""
    ids: set[int] = set()
    candidates = [tokenizer.eos_token_id, getattr(generation_config, "eos_token_id", None)]
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)
    if convert is not None:
        im_end = convert("<|im_end|>")
        if isinstance(im_end, int) and im_end != getattr(tokenizer, "unk_token_id", None):
            candidates.append(im_end)
    for c in candidates:
        if isinstance(c, (list, tuple)):
            ids.update(int(i) for i in c)
        elif c is not None:
            ids.add(int(c))
    return sorted(ids)


def word_complete(text: str) -> bool:
    """True once a word has started and a non-letter follows it (completion-style stop)."""
    for ch in text:
        if not (ch.isalpha() or ch in "'-"):
            return True
    return False


class StopCriteria:
    """Per-row stopping: a finished word (completion style) or a closing bracket (chat)."""

    def __init__(self, tokenizer, prompt_len: int, stop: str):
        self.tokenizer, self.prompt_len, self.stop = tokenizer, prompt_len, stop

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        texts = self.tokenizer.batch_decode(input_ids[:, self.prompt_len :], skip_special_tokens=True)
        if self.stop == "bracket":
            done = ["]" in t for t in texts]
        else:  # word: a non-letter after the word has started means the word is complete
            done = [word_complete(t) for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def dequantised_cache_dir(version: str) -> Path | None:
    """Where the fp32 weights of a GGUF model are cached (``$DORA_CACHE``, default
    ``~/.cache/dora``), keyed by the GGUF's version; ``None`` if the folder cannot be created."""
    from ingestion.build_state import cache_root

    root = cache_root()
    try:
        (root / "models").mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root / "models" / version


def save_dequantised(model, tokenizer, target: Path) -> None:
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


def torch_device_dtype(device: str | None = None):
    """(device, dtype) of a local model: CUDA in fp16 when available, else CPU in fp32."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return device, torch.float16 if device.startswith("cuda") else torch.float32
