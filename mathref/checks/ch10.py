"""Checkers for chapter 10: tokenization and embeddings."""
import contextlib
import gc
import os
import re
import sys
import types

import torch

from mathref.checks.core import integer, rng, _stub_code
from mathref.checks.core import CheckFailure, exercise, expect, expect_callable, expect_tensor_close
from mathref import tokenizers
from mathref.checks.remote import grads_where_run, remote_apply

__all__ = ["check_ch10_merge_pair", "check_ch10_most_frequent_pair",
           "check_ch10_one_hot_embedding", "check_ch10_bpe_encode"]


@exercise("ch10-merge-pair", forbid=("mathref.tokenizers.merge_pair",),
          because="the exercise asks you to write the merge step")
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
    gen = rng(1)
    drawn = torch.randint(0, 4, (integer(gen, 5, 40),), generator=gen).tolist()
    cases.append((drawn, (drawn[0], drawn[1]), 256 + integer(gen, 0, 1000), f"ids {drawn}"))
    for ids, pair, new_id, what in cases:
        original, given = list(ids), list(ids)
        got = merge_pair(given, pair, new_id)
        expect(given == original, f"{what}: your function changed the list ids it was given "
                                  f"({original} became {given}): build and return a new list")
        expect(isinstance(got, list), f"{what}: expected a new list of ids, got "
                                      f"{type(got).__name__}")
        try:
            got = [int(x) for x in got]
        except TypeError:
            raise CheckFailure(f"{what}: expected a list of ids, got {type(got).__name__}") from None
        want = tokenizers.merge_pair(list(original), tuple(pair), new_id)
        expect(got == want, f"{what}: merging {pair} → {new_id} in {original} should give "
                            f"{want}, got {got}")
    return "left to right, non-overlapping, as BPE encoding applies a merge"


@exercise("ch10-most-frequent-pair",
          forbid=("mathref.tokenizers.most_frequent_pair", "mathref.tokenizers.pair_counts",
                  "mathref.tokenizers.BPETokenizer.train"),
          because="the exercise asks you to count the pairs and break the ties yourself")
def check_ch10_most_frequent_pair(most_frequent_pair):
    """most_frequent_pair(chunks): the adjacent pair occurring most often inside the chunks
    (never across two chunks); ties go to the smallest pair (a, b)."""
    expect_callable(most_frequent_pair, "most_frequent_pair(chunks)")
    cases = [([[1, 2, 3], [1, 2], [2, 3, 4]], "(1, 2) and (2, 3) tie: the smaller pair wins"),
             ([[5, 5, 5, 5], [1, 2]], "a run of four 5s has three (5, 5) pairs"),
             ([[3, 3, 3], [4, 5], [4, 5]], "[3, 3, 3] has two overlapping (3, 3) pairs (equation "
              "ch10-pair-count counts every position i), tying with (4, 5): the smaller (3, 3) wins"),
             ([[1, 9], [2, 9], [2, 9], [2, 5], [5, 6]], "(9, 2) only occurs across chunks, so it does not count"),
             ([[7, 8], [7, 8], [3, 1, 2], [1, 2]], "(7, 8) twice and (1, 2) twice: the tie goes to (1, 2)"),
             ([[1, 3], [1, 2]], "(1, 3) and (1, 2) tie and share their first id: lexicographic "
              "order then compares the second ids, so (1, 2) wins whatever order the pairs were "
              "seen in"),
             ([[1, 9], [2, 3]], "(1, 9) and (2, 3) tie: lexicographic order compares the first "
              "ids, so (1, 9) wins (not the pair with the smallest sum a + b)"),
             ([list(b" low"), list(b" lower"), list(b" newest"), list(b" widest")],
              "bytes of four words")]
    gen = rng(1)
    drawn = [torch.randint(0, 6, (integer(gen, 1, 12),), generator=gen).tolist()
             for _ in range(integer(gen, 2, 8))]
    if any(len(c) > 1 for c in drawn):
        cases.append((drawn, f"chunks {drawn}"))
    for chunks, what in cases:
        got = most_frequent_pair([list(c) for c in chunks])
        expect(isinstance(got, tuple), f"{what}: expected the pair as a tuple (a, b), got "
                                       f"{type(got).__name__} {got!r}")
        try:
            got = tuple(int(x) for x in got)
        except TypeError:
            raise CheckFailure(f"{what}: expected a pair (a, b), got {got!r}") from None
        want = tokenizers.most_frequent_pair(tokenizers.pair_counts(chunks))
        expect(got == want, f"{what}: in {chunks} expected {want}, got {got}")
    return "counts inside chunks, ties to the smallest pair"


# Selecting rows by index, however it is spelled: E[ids] (and torch.eye(V)[ids]) is aten.index,
# and the functions below. Refused by name, so the rule also holds in the grader's worker.
_ONE_HOT_SHORTCUTS = (
    "mathref.tokenizers.embed_one_hot", "mathref.tokenizers.embed",
    "mathref.tokenizers.Embedding.forward", "torch.nn.functional.embedding", "torch.embedding",
    "torch.nn.functional.embedding_bag", "torch.index_select", "torch.Tensor.index_select",
    "torch.gather", "torch.Tensor.gather", "torch.take", "torch.Tensor.take",
    "torch.take_along_dim", "torch.Tensor.take_along_dim", "torch.ops.aten.index",
    "torch.ops.aten.index_select", "torch.ops.aten.gather", "torch.ops.aten.take",
    "torch.ops.aten.embedding", "torch.ops.aten._embedding_bag",
    # the private forms of E[ids] (aten.index without bounds checks, and its masked variant);
    # writing with index_put (one_hot[rows, ids] = 1) builds one-hot vectors and stays allowed
    "torch.ops.aten._unsafe_index", "torch.ops.aten._unsafe_masked_index",
    # ... and taking rows or slices out of a tensor one at a time: E[i] with an int (aten.select),
    # E[i:i + 1] and E.narrow (aten.slice), E.unbind(0) and iterating over a tensor (aten.unbind),
    # E.split / E.chunk (aten.split), as_strided views and masked_select. A rule refuses by
    # name, whatever tensor the operator is applied to, so these are refused on ids as well:
    # the statement asks for all one-hot vectors at once (F.one_hot, or ids compared with
    # torch.arange(V)), which needs none of them (a full slice such as ids[..., None] or
    # x[:, None] dispatches no aten.slice).
    # (split, chunk and narrow by their Python names: torch.ops.aten.split is composite, and
    # standing in for it by name crashes torch's own Tensor.split)
    "torch.ops.aten.select", "torch.ops.aten.slice", "torch.ops.aten.unbind",
    "torch.ops.aten.split_with_sizes", "torch.ops.aten.unsafe_split",
    "torch.ops.aten.unsafe_split_with_sizes", "torch.ops.aten.as_strided",
    "torch.ops.aten.masked_select", "torch.Tensor.split", "torch.split", "torch.Tensor.chunk",
    "torch.chunk", "torch.Tensor.tensor_split", "torch.tensor_split", "torch.Tensor.narrow",
    "torch.narrow",
    # ... and two detours around that rule. Padding: a negative pad crops, so F.pad(E, (0, 0,
    # -i, -(V - 1 - i))) is E[i:i + 1] under another name (aten.constant_pad_nd, which F.pad,
    # torch.constant_pad_nd and nn.ConstantPad*d all run; the other pad modes are not
    # elementary). Tensor.tolist: the table as Python lists, indexed in Python (inside an
    # autograd.Function whose backward the student writes, it even passes the gradient test).
    # The one-hot construction needs neither.
    "torch.ops.aten.constant_pad_nd", "torch.ops.aten.pad", "torch.Tensor.tolist")


_SHAPES = re.compile(r"\((\d+)x(\d+) and (\d+)x(\d+)\)")


def _embed_with(embed_one_hot, ids, E, what):
    """The student's embeddings of ``ids`` with the table E; a dtype clash between the one-hot
    vectors and E, one-hot vectors of the wrong width, or a product with E.T instead of E, is
    reported as such."""
    V, d = E.shape
    try:
        got = embed_one_hot(ids, E)
    except RuntimeError as err:
        if isinstance(err, NotImplementedError):
            raise
        first = (str(err).splitlines() or [""])[0]
        if "dtype" in str(err) or "Double" in str(err) or "Float" in str(err):
            raise CheckFailure(f"{what}: with a {str(E.dtype).replace('torch.', '')} table your "
                               f"code raised RuntimeError: {first}; cast the "
                               f"one-hot vectors to E.dtype (.to(E.dtype)), not to a fixed dtype "
                               f"such as .double() or .float()") from None
        if "cannot be multiplied" in str(err) or "size mismatch" in str(err) \
                or "must match the size" in str(err) or "Expected size" in str(err):
            shapes = _SHAPES.search(str(err))
            if shapes is not None and int(shapes[2]) == V and (int(shapes[3]), int(shapes[4])) == (d, V):
                cause = (f"the one-hot vectors have the right width V = {V}, but they were "
                         f"multiplied by E.T (shape [{d}, {V}]; F.linear(x, W) computes x @ W.T): the "
                         f"product is one_hot @ E, with "
                         f"E of shape [V, d] = [{V}, {d}]")
            elif shapes is not None and int(shapes[2]) != V:
                cause = (f"the one-hot vectors need V = E.shape[0] = {V} entries, not "
                         f"{shapes[2]} (F.one_hot(ids) alone makes them as wide as the largest "
                         f"id + 1: pass num_classes)")
            else:
                cause = (f"the product is one_hot @ E with one-hot vectors of width "
                         f"V = E.shape[0] = {V} (pass num_classes to F.one_hot) and E itself, of "
                         f"shape [V, d] = [{V}, {d}], not E.T")
            raise CheckFailure(f"{what}: your code raised RuntimeError: {first}; {cause}") from None
        raise
    expect(isinstance(got, torch.Tensor), f"{what}: expected a tensor, got {type(got).__name__}")
    expect(got.dtype == E.dtype, f"{what}: the table E is {E.dtype} and the embeddings should be "
                                 f"too, got {got.dtype}: cast the one-hot vectors to E.dtype, not "
                                 f"to a fixed dtype")
    return got


def _expect_rows(got, E, ids, what, rtol, atol):
    """``got`` equals E[ids]; a result that is right only to a lower precision's digits and
    exactly representable in it was computed in that precision (a cast, then back), which the
    message says: a wrong formula computed in E's dtype is not told so."""
    want = E[ids]
    try:
        expect_tensor_close(got, want, f"{what}, against E[ids]", rtol=rtol, atol=atol,
                            tensor_only=True)
    except CheckFailure as failure:
        if tuple(got.shape) != tuple(want.shape):
            raise
        g = got.detach().to("cpu")
        # (bfloat16 before float16: a bfloat16 number of this size is a float16 number too)
        for low, digits, tol in ((torch.float32, "about 7 digits, float32's precision", 1e-6),
                                 (torch.bfloat16, "2 or 3 digits, bfloat16's precision", 1e-2),
                                 (torch.float16, "about 3 digits, float16's precision", 1e-2)):
            if torch.finfo(low).eps > torch.finfo(E.dtype).eps and torch.equal(
                    g.to(low).to(g.dtype), g) and torch.allclose(
                    g.double(), want.double(), rtol=tol, atol=tol):
                name, table = str(low).removeprefix("torch."), str(E.dtype).removeprefix("torch.")
                raise CheckFailure(
                    f"{what}, against E[ids]: your result agrees with E[ids] only to {digits}, "
                    f"and every entry is a {name} number, so the product was computed in {name} "
                    f"(a cast, then back to {table}?); cast the one-hot vectors to E.dtype and "
                    f"multiply in E's dtype") from None
        raise


@exercise("ch10-one-hot-embedding", forbid=_ONE_HOT_SHORTCUTS,
          because="the exercise multiplies one-hot vectors by E instead of selecting rows by index "
                  "(E[ids], torch.eye(V)[ids], index_select, gather, F.embedding) or one at a "
                  "time (E[i], slices, narrow, unbind, split, iterating over a tensor, F.pad, "
                  "whose negative pads crop, and tolist; refused on ids too: build all one-hot "
                  "vectors at once); F.one_hot is allowed")
def check_ch10_one_hot_embedding(embed_one_hot):
    """embed_one_hot(ids, E): one_hot(ids, V) @ E with V = E.shape[0], shape [..., d] and E's
    dtype (float64 and float32 tables), computed without indexing: advanced indexing
    (aten.index), index_select, gather, F.embedding, the operators that take one row or
    slice at a time (select, slice, narrow, unbind, split, as_strided, masked_select), padding
    (a negative pad crops) and Tensor.tolist (rows picked from Python lists) are refused while
    the answer runs. Not refused: other routes to Python numbers, such as item() of a
    reduction. The gradient of sum(G ⊙ result) with respect to E, for a random G, must be
    one_hot(ids)ᵀ G; under the grader, whose channel returns outputs without their graph, it
    is computed in the student's process and compared here."""
    expect_callable(embed_one_hot, "embed_one_hot(ids, E)")
    gen = rng(10)
    E = torch.randn(12, 5, generator=gen, dtype=torch.float64)
    for ids, what in [(torch.tensor([3, 0, 3, 7]), "ids [3, 0, 3, 7]"),
                      (torch.tensor([[1, 2], [11, 4]]), "a batch of shape [2, 2] using the last row"),
                      (torch.tensor([2, 2, 5]), "ids that do not reach the last row")]:
        got = _embed_with(embed_one_hot, ids, E, what)
        _expect_rows(got, E, ids, what, rtol=1e-12, atol=1e-12)
    E32 = torch.randn(9, 4, generator=gen)
    ids = torch.tensor([[8, 0], [3, 3]])
    got = _embed_with(embed_one_hot, ids, E32, "a float32 table of shape [9, 4]")
    _expect_rows(got, E32, ids, "a float32 table of shape [9, 4]", rtol=1e-6, atol=1e-7)
    # the product must carry gradient to E: G's rows added into the rows they used. Under the
    # grader the answer runs in another process and its output comes back as data, without a
    # graph, so the gradient is computed there (mathref.checks.remote.grads_where_run, sent as code by
    # mathref.grade.rpc.apply) and compared here; in the notebook it is computed here.
    ids = torch.tensor([3, 0, 3])
    probe = torch.randn(3, E.shape[1], generator=gen, dtype=torch.float64)
    W = E.detach().clone().requires_grad_(True)
    build = lambda leaves: (ids, leaves[0])     # noqa: E731 (sent to the worker as code)
    apply = remote_apply(embed_one_hot)
    if apply is not None:
        out, grads = apply(grads_where_run, [W], build, probe, False)
    else:
        out, grads = grads_where_run(embed_one_hot, [W], build, probe, False)
    expect(grads != "no graph", "the result should depend on E through autograd (use a product, "
                                "not a detached copy)")
    expect(grads != "leaf", "your result requires grad but has no history (a detached copy "
                            "marked requires_grad): the gradient must reach E, so compute the "
                            "product from E itself")
    expect(isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(probe.shape)
           and isinstance(grads, list) and len(grads) == 1,
           f"ids [3, 0, 3]: expected shape {tuple(probe.shape)}, got "
           f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
    grad = grads[0]
    want = torch.zeros_like(E)
    want.index_add_(0, ids, probe)
    expect(isinstance(grad, torch.Tensor) and grad.shape == want.shape
           and torch.allclose(grad.double(), want, rtol=1e-9, atol=1e-12),
           "ids [3, 0, 3]: for a random G of the result's shape, the gradient of "
           "sum(G ⊙ result) with respect to E should be one_hot(ids)ᵀ G: row 0 gets G's row 1, "
           "row 3 the sum of G's rows 0 and 2 (3 is used twice), and every other row 0"
           + ("" if isinstance(grad, torch.Tensor) else " (your result does not depend on E)"))
    return "one_hot(ids) @ E = E[ids], and only the used rows get gradient"


_BPE_CORPUS = ("low low low low low lower lower newest newest newest newest newest newest "
               "widest widest widest. The king's speech; the kingdom, the kings! aaaa aaaaaa "
               "naïve naïve café café 2024 2024 ") * 3

# Merges learned WITHOUT pre-tokenization from text full of what GPT2_SPLIT_PATTERN cuts
# (contractions, digits next to letters, runs of spaces, punctuation runs, underscores,
# newlines): they cross chunk boundaries, so a home-made split gives other ids.
_PRETOKENIZATION_CORPUS = ("We'll see: it's 2024, they've got 3 cats!!  Really?! x_y__z  \n\n"
                           "ok... I'm abc123 don't  stop \t 99 bottles;; the END'S here  abc123 "
                           "x2 ") * 3
_PRETOKENIZATION_TEXTS = ["We'll see: it's 2024, they've got 3 cats!!", "a  b   c  ",
                          "x_y__z ok... I'm", "abc123 don't  stop \t 99 bottles;;",
                          "the END'S here  \n\nok"]

_BPE_ENCODERS = tuple(f"mathref.tokenizers.BPETokenizer.{name}" for name in (
    "encode", "encode_bytes", "_encode_chunk", "encode_iterable", "_encode_safe_prefix"))


def _describe_merges(merges):
    """'[(b,c), (a,b), (bc,d), (a,bcd)]': each merge with the text of its two tokens."""
    text = {i: chr(i) for i in range(256)}
    parts = []
    for r, (a, b) in enumerate(merges):
        parts.append(f"({text[a]},{text[b]})")
        text[256 + r] = text[a] + text[b]
    return "[" + ", ".join(parts) + "]"


@contextlib.contextmanager
def _refusing_stale_encoders():
    """While in effect, every function object with the code of one of BPETokenizer's encoders
    that is not the current class's own method refuses, under the encoder's forbidden name: the
    methods of a class imported before ``importlib.reload(mathref.tokenizers)``, copies made
    with ``types.FunctionType(f.__code__, ...)``, the methods of a second load of tokenizers.py.
    The exercise's rule refuses the current class's methods by name; these others live in
    mathref.tokenizers' file too, which the exercise allows (for its pattern and merge_pair),
    so the gate does not see them. Found among the objects alive when the check starts."""
    current = {id(getattr(tokenizers.BPETokenizer, name.rsplit(".", 1)[1]))
               for name in _BPE_ENCODERS}
    path = os.path.abspath(tokenizers.__file__)
    refused = {f"BPETokenizer.{name.rsplit('.', 1)[1]}": name for name in _BPE_ENCODERS}
    saved = []
    for obj in gc.get_objects():
        if type(obj) is types.FunctionType and id(obj) not in current:
            code = obj.__code__
            name = refused.get(code.co_qualname)
            if name is not None and os.path.abspath(code.co_filename) == path:
                saved.append((obj, code))
                obj.__code__ = _stub_code(len(code.co_freevars), name)
    try:
        yield
    finally:
        for obj, code in saved:
            obj.__code__ = code


# ---- the random cases of ch10-bpe-encode: texts on which common wrong encoders go wrong ----
def _chunk_ids(text):
    return [list(c.encode("utf-8")) for c in re.findall(tokenizers.GPT2_SPLIT_PATTERN, text)]


def _bpe_by_position(latest):
    """Merges the leftmost pair that is a merge (latest=False), or the latest-learned one
    present (latest=True), instead of the earliest-learned one."""
    def encode(text, merges):
        ranks = {tuple(m): r for r, m in enumerate(merges)}
        out = []
        for ids in _chunk_ids(text):
            while True:
                pairs = [p for p in zip(ids, ids[1:]) if p in ranks]
                if not pairs:
                    break
                pair = max(pairs, key=ranks.get) if latest else pairs[0]
                ids = tokenizers.merge_pair(ids, pair, 256 + ranks[pair])
            out += ids
        return out
    return encode


def _bpe_greedy_longest(text, merges):
    """The longest known piece from the left of each chunk (WordPiece-style matching)."""
    tok = tokenizers.BPETokenizer(merges)
    vocab = {tok.token_bytes(i): i for i in range(256 + len(merges))}
    out = []
    for ids in _chunk_ids(text):
        data, i = bytes(ids), 0
        while i < len(data):
            j = max(k for k in range(i + 1, len(data) + 1) if data[i:k] in vocab)
            out.append(vocab[data[i:j]])
            i = j
    return out


def _bpe_split_by(pattern):
    """Right BPE after another pre-tokenization: none (pattern None), or a home-made split."""
    return lambda text, merges: tokenizers.BPETokenizer(merges, pattern=pattern).encode(
        text, allowed_special=False)


_WRONG_BPE_ENCODERS = (_bpe_by_position(False), _bpe_by_position(True), _bpe_greedy_longest,
                       _bpe_split_by(None), _bpe_split_by(r" ?\w+| ?[^\s\w]+|\s+"),
                       _bpe_split_by(r"\S+|\s+"))
_SEPARATORS = (" ", " ", " ", "  ", ", ", "!  ", "'s ", "'ll ", "_", "... ", "\n")


def _drawn_bpe_cases(gen, attempts=60):
    """Cases (merges, text, what) drawn from ``gen``: 40 merges learned without pre-tokenization
    (so some cross GPT2_SPLIT_PATTERN's chunks) from a random corpus of words of six random
    letters, digit runs, spaces, contractions, punctuation and underscores; then texts drawn
    like the corpus, each kept if one of _WRONG_BPE_ENCODERS not yet caught (the leftmost pair
    first, the latest merge first, the longest known piece, no pre-tokenization, a \\w-based
    split, a split at whitespace) gives other ids than BPE on it, until all are caught (over 3,000
    generators: 1 to 4 texts kept, at most 27 drawn). Only the texts are returned: no right ids stay
    in the frame that calls the answer."""
    pool = "abdeilnorstuyé"                                 # é: two bytes in UTF-8
    letters = [pool[i] for i in torch.randperm(len(pool), generator=gen)[:6].tolist()]

    def word():
        return "".join(letters[integer(gen, 0, 6)] for _ in range(integer(gen, 2, 9)))

    def piece():
        if integer(gen, 0, 6) == 0:
            return "".join(str(integer(gen, 0, 10)) for _ in range(integer(gen, 1, 4)))
        return word()

    vocab = []
    while len(vocab) < 20:                                  # 20 distinct frequent words
        new = word()
        if new not in vocab:
            vocab.append(new)
    corpus = " " + "".join((vocab[integer(gen, 0, 20)] if integer(gen, 0, 2) else piece())
                           + _SEPARATORS[integer(gen, 0, len(_SEPARATORS))] for _ in range(300))
    merges = tokenizers.BPETokenizer.train(corpus, 256 + 40, pattern=None).merges
    right = tokenizers.BPETokenizer(merges)
    left, texts = list(_WRONG_BPE_ENCODERS), []
    for _ in range(attempts):
        text = "".join((vocab[integer(gen, 0, 20)] if integer(gen, 0, 3) == 0 else piece())
                       + _SEPARATORS[integer(gen, 0, len(_SEPARATORS))]
                       for _ in range(integer(gen, 3, 10)))
        want = right.encode(text, allowed_special=False)
        caught = [w for w in left if w(text, merges) != want]
        if caught:
            texts.append(text)
            left = [w for w in left if w not in caught]
        if not left:
            break
    if not texts:
        texts.append(text)
    return [(merges, text, f"{text!r} with {len(merges)} merges learned from a random corpus")
            for text in texts]


@exercise("ch10-bpe-encode", forbid=_BPE_ENCODERS,
          because="bpe_encode is the encoder the exercise asks you to write (merge_pair is "
                  "allowed)")
def check_ch10_bpe_encode(bpe_encode):
    """bpe_encode(text, merges): pre-tokenize with GPT2_SPLIT_PATTERN, start each chunk from
    its UTF-8 bytes, repeatedly apply the earliest-learned merge (merge r makes id 256 + r)
    present in the chunk, concatenate the chunks' ids. Compared with mathref's encoder
    ``BPETokenizer(merges).encode`` (which the answer may not call, nor a copy of it, nor the
    encoder of a class from before a reload of mathref.tokenizers, nor reload the module while
    it runs); merges learned without pre-tokenization separate GPT2_SPLIT_PATTERN from
    home-made splits. Every input depends on the check's generator (the grader's secret
    seed): the fixed cases' letters and digits are renamed by a permutation drawn from it
    (_renaming: each case refuses the same wrong encoders as before, see there), so a table of
    the answers seen in one run misses them in another and the wrong encoder behind it meets
    them; the random cases (a corpus, its merges and texts, drawn until each common wrong
    encoder of _WRONG_BPE_ENCODERS is caught on one of them) add texts no table holds. Not
    refused: code that runs while a module of the student's own is imported inside the answer
    (the gate leaves import-time code alone); a table written against this source that undoes
    the renaming (matching a text to a fixed one letter by letter), with a wrong encoder for
    the rest, is refused only by the drawn texts, which are sure to catch the encoders of
    _WRONG_BPE_ENCODERS and not others."""
    with _refusing_stale_encoders():
        return _check_bpe_encode(bpe_encode)


# ---- the fixed cases of ch10-bpe-encode, renamed: the same cases on every run could be answered
# from a table; with their letters and digits renamed they cannot, and they test the same thing
_KEPT_LETTERS = "dlmrstveDLMRSTVE"    # the letters of the contractions 's 'd 'm 't 'll 've 're,
                                      # in both cases ("END'S" is not a contraction: case matters)


def _renaming(gen):
    """A renaming drawn from ``gen``, as a str.translate table of code points: the lowercase
    ASCII letters permuted among themselves, the uppercase ones among themselves, except the
    letters of GPT2_SPLIT_PATTERN's contractions in either case (_KEPT_LETTERS), which stay;
    the digits among themselves. Every other character stays. GPT2_SPLIT_PATTERN cuts a renamed text where it
    cut the original, and the renamed letters are one byte each, so BPE commutes with the
    renaming: encoding the renamed text with the renamed merges gives the original ids with
    their byte ids renamed (the merges' ids 256 + r stay). So does every wrong encoder that
    treats letters alike (an order of merging, a split by character classes), which is why a
    renamed case refuses what the original refused."""
    groups = ("".join(c for c in "abcdefghijklmnopqrstuvwxyz" if c not in _KEPT_LETTERS),
              "".join(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in _KEPT_LETTERS),
              "0123456789")
    table = {}
    for group in groups:
        for c, p in zip(group, torch.randperm(len(group), generator=gen).tolist()):
            table[ord(c)] = ord(group[p])
    return table


def _fixed_bpe_cases(name):
    """The fixed cases (merges, text, what, crossing), renamed by ``name`` (from _renaming);
    ``crossing``: the merges cross GPT2_SPLIT_PATTERN's chunks."""
    def text(s):
        return s.translate(name)

    def renamed(merges):
        return [tuple(name.get(i, i) for i in m) for m in merges]

    toy = renamed(tokenizers.BPETokenizer.train(_BPE_CORPUS, 256 + 40).merges)
    crossing = renamed(tokenizers.BPETokenizer.train(_PRETOKENIZATION_CORPUS, 256 + 80,
                                                     pattern=None).merges)
    # a merge list where rank order and position order disagree: (b, c) before (a, b)
    crafted = renamed([(98, 99), (97, 98), (256, 100), (97, 258)])
    greedy = renamed([(98, 99), (256, 100), (97, 98)])
    a, b, abcd = text("a"), text("b"), text("abcd")
    cases = [(toy, text(" lowest"), "with merges learned from a toy corpus (letters renamed)"),
             (toy, text("the newest kings"), "with the toy corpus's merges: merges never cross "
              "words"),
             (toy, text("aaaaaaa"), f"a run of seven {a}'s (overlapping pairs)"),
             (toy, text("naïve café, 東京 🙂"), "non-ASCII text (multi-byte characters)"),
             (toy, "", "the empty string"),
             (crafted, abcd, f"with merges {_describe_merges(crafted)}"),
             (crafted, text("abab abcd"), "with the same merges"),
             # the longest known piece from the left ('ab') is not what the merges make
             (greedy, abcd, f"with merges {_describe_merges(greedy)}: the earliest merge "
              f"{_describe_merges(greedy[:1])[1:-1]} comes first, so {text('ab')!r} is never "
              f"formed (taking the longest known piece from the left, {text('ab')!r}, is not "
              f"BPE)"),
             ([], text("hello"), "an empty merge list (bytes only)"),
             (renamed([(97, 32), (32, 98)]), f"{a} {b}", f"with merges [({a}, ␣), (␣, {b})]: "
              f"({a}, ␣) would cross the chunks {a!r} | ' {b}'")]
    cases = [(m, t, f"{t!r} {what}" if what.startswith("with") else what, False)
             for m, t, what in cases]
    cases += [(crossing, text(t), f"{text(t)!r} with merges that cross chunk boundaries", True)
              for t in _PRETOKENIZATION_TEXTS]
    return cases


def _check_bpe_encode(bpe_encode):
    expect_callable(bpe_encode, "bpe_encode(text, merges)")
    # the random cases: a corpus, the merges learned from it and the texts, all drawn from
    # the generator (the grader's secretly seeded one), so that no table of answers made in
    # advance covers them; the texts are drawn until each common wrong encoder has given
    # other ids on one of them
    drawn = [(merges, text, what, False) for merges, text, what in _drawn_bpe_cases(rng(2))]
    # the fixed cases, with their letters and digits renamed by a permutation drawn from the
    # same generator: a table of the answers seen in one run misses them in another, and
    # they still refuse what they were written to refuse (see _renaming)
    cases = _fixed_bpe_cases(_renaming(rng(3))) + drawn
    for merges, text, what, crossing in cases:
        # the answer first: an expected value computed before the call could be read from
        # this frame by the answer (sys._getframe(1).f_locals)
        module, cls = sys.modules.get("mathref.tokenizers"), tokenizers.BPETokenizer
        got = bpe_encode(text, [tuple(m) for m in merges])
        expect(sys.modules.get("mathref.tokenizers") is module and tokenizers.BPETokenizer is cls,
               "your solution called importlib.reload on mathref.tokenizers (or replaced its "
               "BPETokenizer) while it ran, a fresh copy of its encoder, which ch10-bpe-encode "
               "does not allow: bpe_encode is the encoder the exercise asks you to write")
        want = tokenizers.BPETokenizer(merges).encode(text, allowed_special=False)
        try:
            got = [int(x) for x in got]
        except TypeError:
            raise CheckFailure(f"{what}: expected a list of ids, got {type(got).__name__}") from None
        chunks = re.findall(tokenizers.GPT2_SPLIT_PATTERN, text)
        hint = (f" (chunks {chunks})" if not crossing else
                f": GPT2_SPLIT_PATTERN cuts it into {chunks}; a home-made split cuts "
                f"contractions, digits, spaces or punctuation elsewhere, and these merges then "
                f"give other ids (use re.findall(GPT2_SPLIT_PATTERN, text))")
        expect(got == want, f"{what}: expected {want}, got {got}{hint}")
    return "pre-tokenize, then the earliest-learned merge first, inside each chunk"
