"""Checkers for chapter 10: tokenization and embeddings."""
import torch
import torch.nn.functional as F

from mathref.checks.core import CheckFailure, exercise, expect, expect_callable, expect_tensor_close
from mathref import tokenizers

__all__ = ["check_ch10_merge_pair", "check_ch10_most_frequent_pair",
           "check_ch10_one_hot_embedding", "check_ch10_tied_logits"]


@exercise("ch10-merge-pair")
def check_ch10_merge_pair(merge_pair):
    """merge_pair(ids, pair, new_id): every occurrence of pair, left to right, becomes new_id."""
    expect_callable(merge_pair, "merge_pair(ids, pair, new_id)")
    cases = [([1, 2, 3, 1, 2], (1, 2), 9, "two separate occurrences"),
             ([5, 6, 7], (6, 7), 256, "a pair at the end"),
             ([4, 4, 4], (4, 4), 300, "an overlapping run [4, 4, 4]"),
             ([4, 4, 4, 4], (4, 4), 300, "a run of four"),
             ([1, 2], (2, 1), 7, "a pair that does not occur"),
             ([3], (3, 3), 8, "a single token"),
             ([], (1, 2), 8, "an empty list"),
             (list(b"the theme"), (ord("t"), ord("h")), 256, "the bytes of 'the theme'")]
    for ids, pair, new_id, what in cases:
        original = list(ids)
        got = merge_pair(list(ids), pair, new_id)
        try:
            got = [int(x) for x in got]
        except TypeError:
            raise CheckFailure(f"{what}: expected a list of ids, got {type(got).__name__}") from None
        want = tokenizers.merge_pair(list(original), tuple(pair), new_id)
        expect(got == want, f"{what}: merging {pair} → {new_id} in {original} should give "
                            f"{want}, got {got}")
    return "left to right, non-overlapping, as BPE encoding applies a merge"


@exercise("ch10-most-frequent-pair")
def check_ch10_most_frequent_pair(most_frequent_pair):
    """most_frequent_pair(chunks): the adjacent pair occurring most often inside the chunks
    (never across two chunks); ties go to the smallest pair (a, b)."""
    expect_callable(most_frequent_pair, "most_frequent_pair(chunks)")
    cases = [([[1, 2, 3], [1, 2], [2, 3, 4]], "(1, 2) and (2, 3) tie: the smaller pair wins"),
             ([[5, 5, 5, 5], [1, 2]], "a run of four 5s has three (5, 5) pairs"),
             ([[1, 9], [2, 9], [2, 9], [2, 5], [5, 6]], "(9, 2) only occurs across chunks, so it does not count"),
             ([[7, 8], [7, 8], [3, 1, 2], [1, 2]], "(7, 8) twice and (1, 2) twice: the tie goes to (1, 2)"),
             ([list(b" low"), list(b" lower"), list(b" newest"), list(b" widest")],
              "bytes of four words")]
    for chunks, what in cases:
        got = most_frequent_pair([list(c) for c in chunks])
        try:
            got = tuple(int(x) for x in got)
        except TypeError:
            raise CheckFailure(f"{what}: expected a pair (a, b), got {got!r}") from None
        want = tokenizers.most_frequent_pair(tokenizers.pair_counts(chunks))
        expect(got == want, f"{what}: in {chunks} expected {want}, got {got}")
    return "counts inside chunks, ties to the smallest pair"


@exercise("ch10-one-hot-embedding")
def check_ch10_one_hot_embedding(embed_one_hot):
    """embed_one_hot(ids, E): one_hot(ids, V) @ E with V = E.shape[0], shape [..., d]."""
    expect_callable(embed_one_hot, "embed_one_hot(ids, E)")
    gen = torch.Generator().manual_seed(10)
    E = torch.randn(12, 5, generator=gen, dtype=torch.float64)
    for ids, what in [(torch.tensor([3, 0, 3, 7]), "ids [3, 0, 3, 7]"),
                      (torch.tensor([[1, 2], [11, 4]]), "a batch of shape [2, 2] using the last row"),
                      (torch.tensor([2, 2, 5]), "ids that do not reach the last row")]:
        expect_tensor_close(embed_one_hot(ids, E), E[ids], f"{what}, against E[ids]",
                            rtol=1e-12, atol=1e-12, tensor_only=True)
    # the product must carry gradient to E: exactly the used rows, summed over repeats
    W = E.clone().requires_grad_(True)
    ids = torch.tensor([3, 0, 3])
    out = embed_one_hot(ids, W)
    expect(out.requires_grad, "the result should depend on E through autograd (use a product, "
                              "not a detached copy)")
    out.sum().backward()
    want = torch.zeros_like(E)
    want[0] = 1
    want[3] = 2
    expect(torch.allclose(W.grad, want), "the gradient with respect to E should be 1 in row 0, "
                                         "2 in row 3 (used twice) and 0 elsewhere")
    return "one_hot(ids) @ E = E[ids], and only the used rows get gradient"


@exercise("ch10-tied-logits")
def check_ch10_tied_logits(tied_logits):
    """tied_logits(h, E): logits = h Eᵀ for hidden states h [..., d] and the embedding E [V, d]."""
    expect_callable(tied_logits, "tied_logits(h, E)")
    gen = torch.Generator().manual_seed(11)
    E = torch.randn(9, 4, generator=gen, dtype=torch.float64)
    for shape in [(4,), (3, 4), (2, 5, 4)]:
        h = torch.randn(*shape, generator=gen, dtype=torch.float64)
        expect_tensor_close(tied_logits(h, E), F.linear(h, E), f"h of shape {shape}, against h Eᵀ",
                            rtol=1e-10, atol=1e-12, tensor_only=True,
                            shape_hint=" (one logit per vocabulary entry)")
    # logit of token j for h = E[j] is ‖E[j]‖²: the token's own embedding scores itself highly
    return "logits = h Eᵀ, the same matrix as the input lookup"
