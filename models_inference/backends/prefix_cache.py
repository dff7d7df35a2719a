"""Shared-prefix generation for a local ``transformers`` causal LM (issue 16, generation speed).

The T2T prompts of one (descriptor, setting) share their whole prefix ("An alcoholic person
is" + the letter; BiasDora Section 3, Figure 8) and the ``runs`` repeats of one prompt are the
same token sequence. The plain path (``model.generate`` on a left-padded batch) recomputes the
prefix for each of the 26 letters x runs and keeps computing every row of a batch until its
slowest row stops. :func:`generate_shared_prefix` instead:

1. tokenises every prompt and keeps each distinct token sequence once (the runs of one
   prompt share one prefill);
2. per batch, groups the sequences by their longest common token prefix and computes the KV
   cache of each group's prefix once, then copies it (``DynamicCache.reorder_cache``) to every
   sequence of the group and feeds only the remaining suffix tokens;
3. copies each sequence's cache and last-position logits to its rows (one per request) and
   decodes token by token, dropping a row from the batch (and its cache) as soon as it stops,
   so finished rows cost nothing.

Sampling is the plain path's, row by row: the warpers of
:func:`models_inference.backends.local.sampling_processors` (temperature, then top-p below 1;
BiasDora Appendix A: 0.7 / 0.95; greedy at temperature 0), then one draw from the row's own
``torch.Generator`` seeded with the request's seed, exactly the ``torch.multinomial`` call of
the plain path's ``PerRowSampler``. The k-th token of a row therefore uses the k-th
draw of its generator in both paths, and a row's output depends only on its prompt and seed.
The tokens are the plain path's as long as the logits are: splitting one prefill into a
prefix and a suffix forward changes the matrix shapes, hence the float rounding (~1e-6 relative),
which flips a sampled token only when a draw falls on a top-p or sampling boundary. The
measured agreement is in BENCHMARKS.md ("T2T generation throughput") and checked by
``tests/test_prefix_cache.py``; the plain path itself agrees with itself run one prompt at a
time no better (batching changes the shapes too).
"""

from __future__ import annotations

from typing import Callable, Sequence


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan_batches(seqs: dict[tuple[int, ...], list[int]], batch_size: int) -> list[list[tuple[tuple[int, ...], list[int]]]]:
    """Split distinct sequences (-> their request indices) into batches of <= ``batch_size`` rows.

    Sequences are taken in lexicographic token order, so prompts sharing a prefix are
    neighbours; a sequence with more rows than ``batch_size`` is split over entries.

    Returns:
        Batches, each a list of ``(token sequence, request indices)`` entries.

    Raises:
        ValueError: ``batch_size < 1``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    entries = []
    for seq in sorted(seqs):
        rows = seqs[seq]
        entries += [(seq, rows[k : k + batch_size]) for k in range(0, len(rows), batch_size)]
    batches, cur, n = [], [], 0
    for entry in entries:
        if cur and n + len(entry[1]) > batch_size:
            batches.append(cur)
            cur, n = [], 0
        cur.append(entry)
        n += len(entry[1])
    if cur:
        batches.append(cur)
    return batches


def group_by_prefix(seqs: Sequence[tuple[int, ...]]) -> list[tuple[int, list[int]]]:
    """Group consecutive (sorted) sequences sharing a long prefix.

    A sequence joins the current group while its common prefix with the group's first
    sequence is at least half the shorter one's length. The group's prefix is the common
    prefix of all its members, shortened so every member keeps >= 1 suffix token.

    Returns:
        ``(prefix length, member positions)`` per group, in input order.
    """
    groups: list[tuple[int, list[int]]] = []
    for pos, seq in enumerate(seqs):
        if groups:
            plen, members = groups[-1]
            first = seqs[members[0]]
            lcp = min(plen, common_prefix_len(first, seq))
            if lcp >= max(1, min(len(first), len(seq)) // 2):
                groups[-1] = (min(lcp, len(seq) - 1), members + [pos])
                continue
        groups.append((len(seq) - 1, [pos]))
    return groups


def _left_pad(rows: Sequence[Sequence[int]], pad_id: int):
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r) :] = 1
    return ids, mask


def generate_shared_prefix(
    model,
    tokenizer,
    texts: Sequence[str],
    seeds: Sequence[int],
    max_new_tokens: Sequence[int],
    stop_done: Sequence[Callable[[str], bool] | None],
    *,
    temperature: float,
    top_p: float,
    eos_ids: Sequence[int],
    batch_size: int = 64,
    on_batch: Callable[[int], None] | None = None,
) -> list[tuple[str, bool]]:
    """Sample one completion per prompt text, sharing prefix KV caches (see module docstring).

    Args:
        model: a ``transformers`` causal LM whose forward takes ``past_key_values``
            (a ``DynamicCache``), ``position_ids`` and ``logits_to_keep``.
        tokenizer: its tokenizer (prompts are encoded without special tokens, as the plain
            path does).
        texts: the prompt texts, one per request.
        seeds: per-request seed (int; taken modulo 2**63).
        max_new_tokens: per-request token budget (>= 1).
        stop_done: per request, ``None`` (stop at EOS / budget only) or a predicate on the
            decoded new text that ends the row once true (checked after every token).
        temperature, top_p: sampling (BiasDora Appendix A: 0.7, 0.95).
        eos_ids: token ids that end a row.
        batch_size: rows decoded together (at most).
        on_batch: called with the number of rows of each finished batch.

    Returns:
        ``(text, finished)`` per request, in input order: the new text decoded with special
        tokens skipped; ``finished`` is False when the row stopped at its token budget
        without EOS or a satisfied stop predicate (the plain path's definition).

    Raises:
        ValueError: the lengths of the per-request arguments differ or ``batch_size < 1``.
    """
    import torch
    from transformers import DynamicCache

    from models_inference.backends.local import PerRowSampler, sampling_processors

    n = len(texts)
    if not (len(seeds) == len(max_new_tokens) == len(stop_done) == n):
        raise ValueError("texts, seeds, max_new_tokens and stop_done must have the same length")
    if n == 0:
        return []
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    distinct: dict[tuple[int, ...], list[int]] = {}
    for i, ids in enumerate(encoded):
        distinct.setdefault(tuple(ids), []).append(i)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    eos = set(eos_ids)
    # the plain path's processors (temperature, top-p below 1; none at temperature 0 = greedy),
    # without its per-row sampler: the rows' generators live here, across steps and batches
    processors = sampling_processors(temperature, top_p, [])
    warpers = [p for p in processors if not isinstance(p, PerRowSampler)]
    greedy = len(processors) == 0
    results: list[tuple[str, bool] | None] = [None] * n

    for batch in plan_batches(distinct, batch_size):
        seqs = [seq for seq, _ in batch]
        groups = group_by_prefix(seqs)
        with torch.inference_mode():
            # 1. each group's shared prefix, once
            entry_group = torch.empty(len(seqs), dtype=torch.long)
            prefix_len = [0] * len(seqs)
            for g, (plen, members) in enumerate(groups):
                for m in members:
                    entry_group[m], prefix_len[m] = g, plen
            cache = DynamicCache()
            prefixes = [seqs[members[0]][:plen] for plen, members in groups]
            if any(prefixes):
                ids, pmask = _left_pad(prefixes, pad_id)
                pos = (pmask.cumsum(-1) - 1).clamp(min=0)
                model(input_ids=ids, attention_mask=pmask, position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1)
                cache.reorder_cache(entry_group)
                mask = pmask[entry_group]
            else:
                mask = torch.zeros((len(seqs), 0), dtype=torch.long)
            # 2. each distinct sequence's suffix
            suffixes = [seq[p:] for seq, p in zip(seqs, prefix_len)]
            ids, smask = _left_pad(suffixes, pad_id)
            pos = (torch.tensor(prefix_len).unsqueeze(1) + smask.cumsum(-1) - 1).clamp(min=0)
            mask = torch.cat([mask, smask], dim=1)
            out = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1)
            # 3. rows (requests): copy each sequence's cache and logits, decode
            row_entry = [e for e, (_, rows) in enumerate(batch) for _ in rows]
            rows = [r for _, rs in batch for r in rs]
            sel = torch.tensor(row_entry, dtype=torch.long)
            cache.reorder_cache(sel)
            mask = mask[sel]
            logits = out.logits[:, -1, :][sel].to(dtype=torch.float32)
            gens = {r: torch.Generator().manual_seed(int(seeds[r]) % (2**63)) for r in rows}
            new: dict[int, list[int]] = {r: [] for r in rows}
            active = rows
            while True:
                scores = logits
                for warp in warpers:
                    scores = warp(None, scores)
                if greedy:
                    picked = scores.argmax(dim=-1).tolist()
                else:
                    probs = torch.softmax(scores, dim=-1)
                    picked = [int(torch.multinomial(probs[k], 1, generator=gens[r])) for k, r in enumerate(active)]
                keep = []
                for k, (r, tok) in enumerate(zip(active, picked)):
                    new[r].append(tok)
                    # decode only when a stop rule needs the text (or the row ends)
                    text = tokenizer.decode(new[r], skip_special_tokens=True) if stop_done[r] is not None else None
                    stopped = tok in eos or (text is not None and stop_done[r](text))
                    if stopped or len(new[r]) >= max_new_tokens[r]:
                        if text is None:
                            text = tokenizer.decode(new[r], skip_special_tokens=True)
                        results[r] = (text, stopped or len(new[r]) < max_new_tokens[r])
                    else:
                        keep.append(k)
                if not keep:
                    break
                if len(keep) < len(active):
                    idx = torch.tensor(keep, dtype=torch.long)
                    cache.reorder_cache(idx)
                    mask = mask[idx]
                    active = [active[k] for k in keep]
                    picked = [picked[k] for k in keep]
                pos = mask.sum(-1, keepdim=True)
                mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long)], dim=1)
                out = model(
                    input_ids=torch.tensor(picked, dtype=torch.long).unsqueeze(1), attention_mask=mask,
                    position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1,
                )
                logits = out.logits[:, -1, :].to(dtype=torch.float32)
        if on_batch:
            on_batch(len(rows))
    return results  # type: ignore[return-value]
