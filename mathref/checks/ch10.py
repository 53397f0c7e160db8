"""Checkers for chapter 10: tokenization and embeddings."""
import re

import torch
import torch.nn.functional as F

from mathref.checks.core import CheckFailure, exercise, expect, expect_callable, expect_tensor_close
from mathref import tokenizers

__all__ = ["check_ch10_merge_pair", "check_ch10_most_frequent_pair",
           "check_ch10_one_hot_embedding", "check_ch10_bpe_encode"]


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


_INDEXING = {torch.Tensor.__getitem__, torch.Tensor.index_select, torch.index_select,
             torch.Tensor.gather, torch.gather, torch.Tensor.take, torch.take, torch.embedding,
             F.embedding, F.embedding_bag, torch.Tensor.take_along_dim, torch.take_along_dim,
             torch.Tensor.unbind, torch.unbind, torch.Tensor.tolist, torch.Tensor.numpy,
             torch.Tensor.__iter__}


class _TableWithoutIndexing(torch.Tensor):
    """An embedding table that refuses every way of selecting rows by index, so that
    ``E[ids]`` and its cousins fail and only the one-hot product works."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in _INDEXING and any(isinstance(a, cls) for a in args):
            raise CheckFailure("the table was indexed (E[ids], index_select, gather, "
                               "F.embedding, ...): the exercise asks for the product "
                               "one_hot(ids) @ E, equation (ch10-one-hot)")
        return super().__torch_function__(func, types, args, kwargs or {})


def _no_indexing(E):
    return E.detach().clone().as_subclass(_TableWithoutIndexing)


def _plain(t):
    return t.as_subclass(torch.Tensor) if isinstance(t, torch.Tensor) else t


@exercise("ch10-one-hot-embedding")
def check_ch10_one_hot_embedding(embed_one_hot):
    """embed_one_hot(ids, E): one_hot(ids, V) @ E with V = E.shape[0], shape [..., d], computed
    without indexing E: the checker passes a table that refuses E[ids], index_select, gather,
    F.embedding and their cousins."""
    expect_callable(embed_one_hot, "embed_one_hot(ids, E)")
    gen = torch.Generator().manual_seed(10)
    E = torch.randn(12, 5, generator=gen, dtype=torch.float64)
    for ids, what in [(torch.tensor([3, 0, 3, 7]), "ids [3, 0, 3, 7]"),
                      (torch.tensor([[1, 2], [11, 4]]), "a batch of shape [2, 2] using the last row"),
                      (torch.tensor([2, 2, 5]), "ids that do not reach the last row")]:
        got = _plain(embed_one_hot(ids, _no_indexing(E)))
        expect_tensor_close(got, E[ids], f"{what}, against E[ids]",
                            rtol=1e-12, atol=1e-12, tensor_only=True)
    # the product must carry gradient to E: exactly the used rows, summed over repeats
    W = _no_indexing(E).requires_grad_(True)
    ids = torch.tensor([3, 0, 3])
    out = embed_one_hot(ids, W)
    expect(out.requires_grad, "the result should depend on E through autograd (use a product, "
                              "not a detached copy)")
    out.sum().backward()
    want = torch.zeros_like(E)
    want[0] = 1
    want[3] = 2
    expect(W.grad is not None and torch.allclose(_plain(W.grad), want), "the gradient with respect to E should be 1 in row 0, "
                                         "2 in row 3 (used twice) and 0 elsewhere")
    return "one_hot(ids) @ E = E[ids], and only the used rows get gradient"


def _refuse_library_encoder():
    """Replace mathref's BPE encoder by stubs that fail the check; returns a restore function."""
    cls = tokenizers.BPETokenizer
    saved = {name: getattr(cls, name) for name in ("encode", "encode_bytes", "_encode_chunk",
                                                    "encode_iterable")}

    def refuse(*args, **kwargs):
        raise CheckFailure("the exercise asks you to write the encoder: do not call "
                           "mathref's BPETokenizer.encode")
    for name in saved:
        setattr(cls, name, refuse)

    def restore():
        for name, fn in saved.items():
            setattr(cls, name, fn)
    return restore


_BPE_CORPUS = ("low low low low low lower lower newest newest newest newest newest newest "
               "widest widest widest. The king's speech; the kingdom, the kings! aaaa aaaaaa "
               "naïve naïve café café 2024 2024 ") * 3


@exercise("ch10-bpe-encode")
def check_ch10_bpe_encode(bpe_encode):
    """bpe_encode(text, merges): pre-tokenize with GPT2_SPLIT_PATTERN, start each chunk from
    its UTF-8 bytes, repeatedly apply the earliest-learned merge (merge r makes id 256 + r)
    present in the chunk, concatenate the chunks' ids. Compared with mathref's encoder (which
    is switched off while the answer runs) and with applying every merge in order."""
    expect_callable(bpe_encode, "bpe_encode(text, merges)")
    tok = tokenizers.BPETokenizer.train(_BPE_CORPUS, 256 + 40)
    # a merge list where rank order and position order disagree: (b, c) before (a, b)
    crafted = [(98, 99), (97, 98), (256, 100), (97, 257)]
    cases = [(tok.merges, " lowest", "' lowest' with merges learned from a toy corpus"),
             (tok.merges, "the newest kings", "'the newest kings': merges never cross words"),
             (tok.merges, "aaaaaaa", "a run of seven a's (overlapping pairs)"),
             (tok.merges, "naïve café, 東京 🙂", "non-ASCII text (multi-byte characters)"),
             (tok.merges, "", "the empty string"),
             (crafted, "abcd", "'abcd' with merges [(b,c), (a,b), (bc,d), (a,bcd)]"),
             (crafted, "abab abcd", "'abab abcd' with the same merges"),
             ([], "hello", "an empty merge list (bytes only)"),
             ([(97, 32), (32, 98)], "a b", "'a b' with merges [(a, ␣), (␣, b)]: (a, ␣) would "
              "cross the chunks 'a' | ' b'")]
    wants = [tokenizers.BPETokenizer(m).encode(t, allowed_special=False) for m, t, _ in cases]
    restore = _refuse_library_encoder()
    try:
        gots = []
        for (merges, text, what), want in zip(cases, wants):
            got = bpe_encode(text, [tuple(m) for m in merges])
            try:
                got = [int(x) for x in got]
            except TypeError:
                raise CheckFailure(f"{what}: expected a list of ids, got {type(got).__name__}") from None
            gots.append(got)
    finally:
        restore()
    for (merges, text, what), want, got in zip(cases, wants, gots):
        chunks = re.findall(tokenizers.GPT2_SPLIT_PATTERN, text)
        expect(got == want, f"{what}: expected {want}, got {got} (chunks {chunks})")
    return "pre-tokenize, then the earliest-learned merge first, inside each chunk"
