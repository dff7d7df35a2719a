"""Shared-prefix generation: same tokens as the plain ``model.generate`` path."""

import pytest

from models_inference.backends.base import GenerationRequest, SamplingParams
from models_inference.backends.prefix_cache import common_prefix_len, group_by_prefix, plan_batches
from models_inference.probes.biasdora.prompts import render_t2t_prompt

PREFIXES = [
    ("An alcoholic person is", "singular"),
    ("This alcoholic person is", "verb"),
    ("This child is a/an", "noun"),  # 'a' / 'an' by letter: two sub-prefixes in one group
]


def test_plan_batches_and_groups():
    seqs = {(1, 2, 3, 4): [0, 1], (1, 2, 3, 5): [2], (1, 2, 9): [3, 4, 5], (7, 8): [6]}
    batches = plan_batches(seqs, batch_size=3)
    assert [[rows for _, rows in b] for b in batches] == [[[0, 1], [2]], [[3, 4, 5]], [[6]]]
    assert sorted(r for b in batches for _, rows in b for r in rows) == list(range(7))
    big = plan_batches({(1, 2): list(range(5))}, batch_size=2)  # one prompt x 5 runs
    assert [len(rows) for b in big for _, rows in b] == [2, 2, 1]
    groups = group_by_prefix([(1, 2, 3, 4), (1, 2, 3, 5), (1, 2, 9), (7, 8)])
    assert groups == [(2, [0, 1, 2]), (1, [3])]
    assert group_by_prefix([(5,)]) == [(0, [0])]  # one token: no prefix, the whole sequence is the suffix
    assert common_prefix_len((1, 2, 3), (1, 2)) == 2
    with pytest.raises(ValueError):
        plan_batches(seqs, batch_size=0)


@pytest.mark.slow
def test_shared_prefix_gives_the_plain_paths_tokens(smollm2):
    reqs = []
    for prefix, setting in PREFIXES:
        for c in "abem":
            for run in (1, 2):
                reqs.append(
                    GenerationRequest(
                        render_t2t_prompt(prefix, setting, c, "completion"), seed=hash((setting, c, run)) % 2**62, max_new_tokens=6, stop="word"
                    )
                )
    # mixed in the same call: long chat-style generations stopping at EOS or a bracket
    for k, c in enumerate("b"):
        reqs.append(GenerationRequest(render_t2t_prompt("An old person is", "singular", c, "chat"), seed=77 + k, max_new_tokens=8, stop="eos"))
        reqs.append(GenerationRequest(render_t2t_prompt("An old person is", "singular", c, "chat"), seed=99 + k, max_new_tokens=8, stop="bracket"))
    before = smollm2.batch_size
    try:
        smollm2.batch_size = 16  # several batches, groups split over batches
        smollm2.prefix_cache = False
        plain = smollm2.generate(reqs, SamplingParams())
        smollm2.prefix_cache = True
        ticks = []
        fast = smollm2.generate(reqs, SamplingParams(), on_batch=ticks.append)
    finally:
        smollm2.batch_size, smollm2.prefix_cache = before, True
    assert sum(ticks) == len(reqs)
    same = sum(a == b for a, b in zip(fast, plain, strict=True))
    # documented tolerance (prefix_cache.py): float rounding of the split prefill may flip a
    # draw on a sampling boundary; measured identical on every benchmark run so far
    assert same >= 0.95 * len(reqs), [(a, b) for a, b in zip(fast, plain, strict=True) if a != b]
    # per-row seeds: a row alone gives what it gave in the batch, the runs of a prompt differ
    alone = smollm2.generate([reqs[5]], SamplingParams())[0]
    assert alone == fast[5]
    texts = [r.text for r in fast[:8]]
    assert len(set(texts)) > 3
    # budgets are per row: no chat row beyond its budget, 'finished' false only at the budget
    for r, out in zip(reqs, fast, strict=True):
        n = len(smollm2.tokenizer(out.text, add_special_tokens=False)["input_ids"])
        assert n <= r.max_new_tokens + 1  # decode/re-encode may split one token


def test_plan_batches_caps_distinct_prompts_and_rows():
    # 4 prompts x 3 runs: at most 2 distinct prompts and 5 rows per batch
    seqs = {(1, k): [3 * k, 3 * k + 1, 3 * k + 2] for k in range(4)}
    batches = plan_batches(seqs, batch_size=2, max_rows=5)
    assert [[rows for _, rows in b] for b in batches] == [[[0, 1, 2]], [[3, 4, 5]], [[6, 7, 8]], [[9, 10, 11]]]
    batches = plan_batches(seqs, batch_size=2, max_rows=6)
    assert [len(b) for b in batches] == [2, 2]
    assert sorted(r for b in batches for _, rows in b for r in rows) == list(range(12))
    with pytest.raises(ValueError):
        plan_batches(seqs, batch_size=2, max_rows=0)


def test_sample_rows_is_torch_multinomial_draw_for_draw():
    import torch

    from models_inference.backends.prefix_cache import sample_rows

    vocab = 49152  # SmolLM2's vocabulary
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(3, vocab) * 3, dim=-1)
    probs[1][probs[1] < probs[1].quantile(0.999)] = 0  # a top-p-like sparse row
    probs[1] /= probs[1].sum()
    states = [0, 1, 2, 1, 1, 0, 2, 2, 0, 1, 0, 2, 1, 0, 2, 1, 0]  # 17 rows: the threaded fill
    ref = [torch.Generator().manual_seed(100 + k) for k in range(len(states))]
    ours = [torch.Generator().manual_seed(100 + k) for k in range(len(states))]
    for _ in range(4):  # several steps: each generator must end in the same state
        expected = [int(torch.multinomial(probs[s], 1, generator=g)) for s, g in zip(states, ref, strict=True)]
        with torch.inference_mode():
            assert sample_rows(probs, states, ours) == expected
    assert sample_rows(probs, [], []) == []


@pytest.mark.slow
def test_top_p_filter_is_the_warper_bit_for_bit():
    import torch
    from transformers import TopPLogitsWarper

    from models_inference.backends.prefix_cache import top_p_filter

    warper = TopPLogitsWarper(0.95)
    cases = []
    for seed in range(40):
        g = torch.Generator().manual_seed(seed)
        scores = torch.randn(6, 49152, generator=g) * (1 + seed % 7)
        if seed % 4 == 0:
            scores = scores * 40  # peaked: a nucleus of a few tokens (the fast path)
        if seed % 5 == 0:
            scores[:, :3] = scores.max() + 2  # ties at the top
        cases.append(scores / 0.7)
    flat = torch.zeros(2, 49152)  # the whole vocabulary in the nucleus: falls back to the warper
    tie = torch.full((1, 1000), -50.0)
    tie[0, :20] = 5.0  # 20 tied tokens straddle the 0.95 boundary: falls back
    cases += [flat, tie]
    fast = 0
    for scores in cases:
        expected = warper(None, scores)
        got = top_p_filter(scores, 0.95, warper)
        assert torch.equal(got, expected)
        fast += int((expected > -float("inf")).sum(-1).max() < 1024)
    assert fast > 5  # the fast path itself was exercised, not only the fallback
