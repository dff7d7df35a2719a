"""Shared-prefix generation for a local ``transformers`` causal LM (generation speed).

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
3. decodes token by token over *states* - (distinct sequence, tokens sampled so far) - rather
   than rows: the runs of one prompt have the same cache and logits until their draws
   differ, so each step runs the model once per state (a step's forward reads every weight
   once whatever its width, so fewer, wider batches: up to ``batch_size`` distinct prompts
   and ``8 * batch_size`` rows per batch); a row leaves the batch as soon as it stops, so
   finished rows cost nothing.

Sampling is the plain path's, row by row: the warpers of
:func:`models_inference.backends.local.sampling_processors` (temperature, then top-p below 1;
BiasDora Appendix A: 0.7 / 0.95; greedy at temperature 0), then one draw from the row's own
``torch.Generator`` seeded with the request's seed, the same draw as the plain path's
``PerRowSampler`` (``torch.multinomial``). Two exact shortcuts: top-p without sorting the whole
vocabulary (:func:`top_p_filter`, falls back to the warper whenever it is not certain) and the
draw in ``multinomial``'s own exponential-race form, batched (:func:`sample_rows`). The k-th token of a row therefore uses the k-th
draw of its generator in both paths, and a row's output depends only on its prompt and seed.
The tokens are the plain path's as long as the logits are: splitting one prefill into a
prefix and a suffix forward changes the matrix shapes, hence the float rounding (~1e-6 relative),
which flips a sampled token only when a draw falls on a top-p or sampling boundary. The
measured agreement is in BENCHMARKS.md ("T2T generation throughput") and checked by
``tests/test_prefix_cache.py``; the plain path itself agrees with itself run one prompt at a
time no better (batching changes the shapes too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan_batches(
    seqs: dict[tuple[int, ...], list[int]], batch_size: int, max_rows: int | None = None
) -> list[list[tuple[tuple[int, ...], list[int]]]]:
    """Split distinct sequences (-> their request indices) into batches.

    A batch holds at most ``batch_size`` distinct sequences (prefills) and at most
    ``max_rows`` rows (requests; default ``batch_size``). Rows of one sequence cost little
    beyond their sequence (decoding runs once per distinct state, see
    :func:`generate_shared_prefix`), so the shared-prefix path passes ``max_rows`` larger than
    ``batch_size``. Sequences are taken in lexicographic token order, so prompts sharing a
    prefix are neighbours; a sequence with more rows than ``max_rows`` is split over entries.

    Returns:
        Batches, each a list of ``(token sequence, request indices)`` entries.

    Raises:
        ValueError: ``batch_size < 1`` or ``max_rows < 1``.
    """
    max_rows = batch_size if max_rows is None else max_rows
    if batch_size < 1 or max_rows < 1:
        raise ValueError(f"batch_size and max_rows must be >= 1, got {batch_size}, {max_rows}")
    entries = []
    for seq in sorted(seqs):
        rows = seqs[seq]
        entries += [(seq, rows[k : k + max_rows]) for k in range(0, len(rows), max_rows)]
    batches, cur, n = [], [], 0
    for entry in entries:
        if cur and (n + len(entry[1]) > max_rows or len(cur) >= batch_size):
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


def top_p_filter(scores, top_p: float, warper, *, k: int = 1024, margin: float = 1e-5):
    """``warper(None, scores)`` for a ``transformers.TopPLogitsWarper``, without its full sort.

    The warper sorts every row of the vocabulary ascending and removes the tokens whose
    cumulative probability is <= ``1 - top_p`` (keeping the top token). Equivalently, the
    token of descending rank ``j`` is kept iff ``1 - (mass of the j more probable tokens)`` is
    above ``1 - top_p``, so only the ``k`` most probable tokens matter when they hold the
    nucleus. This computes that mass from ``topk`` in float64 and keeps a row's result only
    when it is certain: the boundary lies within the top ``k``, both boundary tokens are more
    than ``margin`` (probability) away from the threshold - far above the float32 rounding
    of the warper's own sum (~1e-7) - and the two boundary logits differ (a tie there is
    broken by the warper's unstable sort order). Every other row is passed to ``warper``
    itself. The result is therefore the warper's, bit for bit
    (``tests/test_prefix_cache.py`` compares them on real and adversarial logits).

    Args:
        scores: ``(rows, vocab)`` float logits (after temperature).
        top_p: the warper's ``top_p`` (BiasDora Appendix A: 0.95).
        warper: the ``TopPLogitsWarper`` (fallback, and ``filter_value``).

    Returns:
        ``(rows, vocab)`` scores with the removed tokens set to the warper's filter value.
    """
    import torch

    rows, vocab = scores.shape
    k = min(k, vocab)
    if rows == 0 or k < 2:
        return warper(None, scores)
    top, idx = scores.topk(k, dim=-1)  # descending
    probs = torch.softmax(scores.double(), dim=-1)
    top_probs = probs.gather(1, idx)
    above = torch.cumsum(top_probs, dim=-1) - top_probs  # mass of the strictly more probable tokens
    tail = 1.0 - above  # the warper's ascending cumulative probability at each token
    threshold = 1.0 - top_p
    removed = tail <= threshold
    removed[:, 0] = False  # min_tokens_to_keep = 1
    n_kept = (~removed).sum(dim=-1)  # kept tokens are a prefix of the descending order
    ok = n_kept < k
    j = n_kept.clamp(max=k - 1)
    r = torch.arange(rows)
    ok &= (tail[r, j - 1] - threshold > margin) & (threshold - tail[r, j] > margin)
    ok &= top[r, j - 1] != top[r, j]
    out = torch.full_like(scores, warper.filter_value)
    keep_mask = torch.arange(k).unsqueeze(0) < n_kept.unsqueeze(1)
    out.scatter_(1, idx, torch.where(keep_mask, top, torch.full_like(top, warper.filter_value)))
    if not bool(ok.all()):
        bad = (~ok).nonzero().flatten()
        out[bad] = warper(None, scores[bad])
    return out


def sample_rows(probs, states: Sequence[int], generators: Sequence) -> list[int]:
    """One draw per row from its own generator: ``torch.multinomial(probs[state], 1, generator=g)``.

    ATen's ``multinomial`` draws one sample as ``argmax(p / q)`` with ``q ~ Exp(1)`` filled from
    the generator (the exponential-race form of the Gumbel-max trick; its fast path for one
    sample). Doing the same here gives the identical index and leaves each generator in the
    identical state (``tests/test_prefix_cache.py`` checks both against ``torch.multinomial``),
    while the division and ``argmax`` run once for all rows instead of one ``multinomial``
    call (with its input checks) per row.

    Args:
        probs: ``(n_states, vocab)`` float probabilities (rows sum to 1; zeros allowed).
        states: per row, the index of its probability row.
        generators: per row, its ``torch.Generator``.

    Returns:
        The sampled token id per row.
    """
    import torch

    if not states:
        return []
    vocab = probs.shape[-1]
    q = torch.empty((len(states), vocab), dtype=probs.dtype)

    inference = torch.is_inference_mode_enabled()

    def fill(ks: range) -> None:
        with torch.inference_mode(inference):  # thread-local: the caller's mode
            for k in ks:
                q[k].exponential_(1, generator=generators[k])

    # each row's generator is its own, so rows fill in parallel (torch releases the GIL)
    workers = max(1, min(torch.get_num_threads(), len(states) // 8))
    if workers == 1:
        fill(range(len(states)))
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fill, [range(w, len(states), workers) for w in range(workers)]))
    return (probs[torch.tensor(list(states), dtype=torch.long)] / q).argmax(dim=-1).tolist()


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
    max_rows: int | None = None,
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
        batch_size: distinct prompts (prefills) per batch (at most).
        max_rows: requests per batch (at most; default ``8 * batch_size``: the runs of a
            prompt share its prefill and decode once per distinct state, so more rows per
            batch means fewer forward passes, each of which reads every weight once).
        on_batch: called with the number of rows of each finished batch.

    Returns:
        ``(text, finished)`` per request, in input order: the new text decoded with special
        tokens skipped; ``finished`` is False when the row stopped at its token budget
        without EOS or a satisfied stop predicate (the plain path's definition).

    Raises:
        ValueError: the lengths of the per-request arguments differ or ``batch_size < 1``.
    """
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
    # the plain path's processors (temperature, top-p below 1; none at temperature 0 = greedy),
    # without its per-row sampler: the rows' generators live here, across steps and batches
    processors = sampling_processors(temperature, top_p, [])
    rows = _Rows(
        tokenizer,
        seeds,
        max_new_tokens,
        stop_done,
        set(eos_ids),
        [p for p in processors if not isinstance(p, PerRowSampler)],
        len(processors) == 0,
        [None] * n,
    )
    for batch in plan_batches(distinct, batch_size, 8 * batch_size if max_rows is None else max_rows):
        _decode_batch(model, batch, pad_id, rows)
        if on_batch:
            on_batch(sum(len(rs) for _, rs in batch))  # the batch's rows (requests)
    return rows.results  # type: ignore[return-value]


@dataclass
class _Rows:
    """What decoding needs to know of every request (indexed by request) and where it ends up."""

    tokenizer: object
    seeds: Sequence[int]
    max_new_tokens: Sequence[int]
    stop_done: Sequence[Callable[[str], bool] | None]
    eos: set[int]
    warpers: list
    greedy: bool
    results: list[tuple[str, bool] | None]


def _prefill(model, seqs: list[tuple[int, ...]], pad_id: int):
    """Steps 1 and 2 of a batch: each group's shared prefix once, then each distinct sequence's
    suffix on it. Returns (the KV cache, its attention mask, the last logits as float32), one row
    per distinct sequence."""
    import torch
    from transformers import DynamicCache

    groups = group_by_prefix(seqs)
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
    suffixes = [seq[p:] for seq, p in zip(seqs, prefix_len, strict=True)]
    ids, smask = _left_pad(suffixes, pad_id)
    pos = (torch.tensor(prefix_len).unsqueeze(1) + smask.cumsum(-1) - 1).clamp(min=0)
    mask = torch.cat([mask, smask], dim=1)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1)
    return cache, mask, out.logits[:, -1, :].to(dtype=torch.float32)


def _decode_batch(model, batch, pad_id: int, rows: _Rows) -> None:
    """Prefill one batch, then 3. decode it. A *state* is (distinct sequence, tokens sampled so
    far); rows in one state have the same cache and logits, so each step runs the model once per
    state, not once per row: the runs of one prompt share every step until their draws differ.
    Each row still draws from its own generator. Fills ``rows.results`` for the batch's rows."""
    import torch
    from transformers import TopPLogitsWarper

    from models_inference.backends.cpu_share import adjust_threads

    with torch.inference_mode():
        cache, mask, logits = _prefill(model, [seq for seq, _ in batch], pad_id)
        state_of = {r: e for e, (_, rs) in enumerate(batch) for r in rs}
        gens = {r: torch.Generator().manual_seed(int(rows.seeds[r]) % (2**63)) for r in state_of}
        new: dict[int, list[int]] = {r: [] for r in state_of}
        active = list(state_of)
        while True:
            adjust_threads()  # threads for a shared machine: spinning ones only on the cores left free
            scores = logits
            for warp in rows.warpers:
                scores = top_p_filter(scores, warp.top_p, warp) if isinstance(warp, TopPLogitsWarper) else warp(None, scores)
            if rows.greedy:
                best = scores.argmax(dim=-1).tolist()
                picked = [best[state_of[r]] for r in active]
            else:
                probs = torch.softmax(scores, dim=-1)
                picked = sample_rows(probs, [state_of[r] for r in active], [gens[r] for r in active])
            active, parents, tokens = _next_states(active, picked, state_of, new, rows)
            if not active:
                break
            idx = torch.tensor(parents, dtype=torch.long)
            cache.reorder_cache(idx)
            mask = mask[idx]
            pos = mask.sum(-1, keepdim=True)
            mask = torch.cat([mask, torch.ones((len(parents), 1), dtype=torch.long)], dim=1)
            out = model(
                input_ids=torch.tensor(tokens, dtype=torch.long).unsqueeze(1),
                attention_mask=mask,
                position_ids=pos,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            logits = out.logits[:, -1, :].to(dtype=torch.float32)


def _next_states(active: list[int], picked: list[int], state_of: dict[int, int], new: dict[int, list[int]], rows: _Rows):
    """Append each active row's picked token; a row that stops (EOS, its stop rule, its budget)
    gets its result. Returns (the rows still active, each next state's parent state, its token);
    ``state_of`` is moved to the next states in place."""
    next_state: dict[tuple[int, int], int] = {}
    parents: list[int] = []
    tokens: list[int] = []
    keep = []
    for r, tok in zip(active, picked, strict=True):
        new[r].append(tok)
        key = (state_of[r], tok)
        # decode only when a stop rule needs the text (or the row ends)
        text = rows.tokenizer.decode(new[r], skip_special_tokens=True) if rows.stop_done[r] is not None else None
        stopped = tok in rows.eos or (text is not None and rows.stop_done[r](text))
        if stopped or len(new[r]) >= rows.max_new_tokens[r]:
            if text is None:
                text = rows.tokenizer.decode(new[r], skip_special_tokens=True)
            rows.results[r] = (text, stopped or len(new[r]) < rows.max_new_tokens[r])
            continue
        if key not in next_state:
            next_state[key] = len(parents)
            parents.append(key[0])
            tokens.append(tok)
        state_of[r] = next_state[key]
        keep.append(r)
    return keep, parents, tokens
