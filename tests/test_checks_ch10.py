"""Chapter 10's checkers reject the wrong answers an independent read found, and say why."""
import pytest
import torch

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from tests.exercises import ch10


@pytest.mark.parametrize("wrong, cause", [
    (ch10.pair_tie_by_first_id, "compares the second ids, so (1, 2) wins"),
    (ch10.pair_tie_by_sum, "not the pair with the smallest sum"),
])
def test_most_frequent_pair_rejects_wrong_tie_rules(wrong, cause):
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch10_most_frequent_pair(wrong)
    assert cause in failure.value.message, failure.value.message


def test_most_frequent_pair_accepts_lexicographic_ties():
    def top_pair(chunks):
        counts = {}
        for ids in chunks:
            for p in zip(ids, ids[1:]):
                counts[p] = counts.get(p, 0) + 1
        best = max(counts.values())
        return min(p for p, c in counts.items() if c == best)
    checks.check_ch10_most_frequent_pair(top_pair)


@pytest.mark.parametrize("op", ["_unsafe_index", "_unsafe_masked_index"])
def test_one_hot_embedding_refuses_private_indexing(op):
    def via_private_op(ids, E):
        if op == "_unsafe_index":
            return torch.ops.aten._unsafe_index(E, [ids])
        mask = torch.ones(*ids.shape, 1, dtype=torch.bool)
        return torch.ops.aten._unsafe_masked_index(E, mask, [ids], 0.0)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch10_one_hot_embedding(via_private_op)
    assert f"torch.ops.aten.{op}" in failure.value.message, failure.value.message
    assert "selecting rows by index" in failure.value.message, failure.value.message


def test_one_hot_embedding_accepts_the_product():
    checks.check_ch10_one_hot_embedding(
        lambda ids, E: torch.nn.functional.one_hot(ids, E.shape[0]).to(E.dtype) @ E)


# The statement says what the check enforces ("not by indexing"): a dense formula over the V axis
# with the product's rows and gradient passes, the masked sum (which is the product) and the masked
# maximum (which the statement names) alike
@pytest.mark.parametrize("reduce", ["sum", "amax"])
def test_one_hot_embedding_accepts_a_masked_reduction_over_the_vocabulary(reduce):
    def masked(ids, E):
        hit = torch.nn.functional.one_hot(ids, E.shape[0]).bool()[..., None]
        fill = 0.0 if reduce == "sum" else float("-inf")
        return getattr(torch.where(hit, E, fill), reduce)(-2)
    checks.check_ch10_one_hot_embedding(masked)


def _one_hot_by_broadcast(ids, E):
    a, b = torch.broadcast_tensors(ids[..., None], torch.arange(E.shape[0]))
    return (a == b).to(E.dtype) @ E


def _one_hot_by_meshgrid(ids, E):
    flat = ids.reshape(-1)
    a, b = torch.meshgrid(flat, torch.arange(E.shape[0]), indexing="ij")
    return ((a == b).to(E.dtype) @ E).reshape(*ids.shape, E.shape[1])


@pytest.mark.parametrize("answer", [_one_hot_by_broadcast, _one_hot_by_meshgrid])
def test_one_hot_embedding_accepts_a_one_hot_built_by_broadcasting(answer):
    # the eighth read's L2: broadcast_tensors and meshgrid are views, elementary operations
    checks.check_ch10_one_hot_embedding(answer)


@pytest.mark.parametrize("product", [
    lambda one_hot, E: torch.nn.functional.linear(one_hot, E.T),   # a linear layer without bias
    lambda one_hot, E: torch.inner(one_hot, E.T),
])
def test_one_hot_embedding_accepts_linear_and_inner(product):
    checks.check_ch10_one_hot_embedding(
        lambda ids, E: product(torch.nn.functional.one_hot(ids, E.shape[0]).to(E.dtype), E))


@pytest.mark.parametrize("wrong, cause", [
    (lambda ids, E: torch.nn.functional.one_hot(ids, E.shape[0]).to(E.dtype) @ E.T,
     "multiplied by E.T"),
    (lambda ids, E: torch.nn.functional.one_hot(ids).to(E.dtype) @ E, "pass num_classes"),
    (lambda ids, E: (torch.nn.functional.one_hot(ids, E.shape[0]).float() @ E.float()).to(E.dtype),
     "computed in float32"),
    # the seventh read's N7: half precision got no cause
    (lambda ids, E: (torch.nn.functional.one_hot(ids, E.shape[0]).half() @ E.half()).to(E.dtype),
     "computed in float16"),
    (lambda ids, E: (torch.nn.functional.one_hot(ids, E.shape[0]).bfloat16() @ E.bfloat16())
     .to(E.dtype), "computed in bfloat16"),
    # and N6: a sparse one-hot matrix, which the statement now says is not allowed
    (lambda ids, E: torch.sparse.mm(torch.sparse_coo_tensor(
        torch.stack([torch.arange(ids.numel()), ids.reshape(-1)]),
        torch.ones(ids.numel(), dtype=E.dtype), (ids.numel(), E.shape[0])), E)
     .reshape(*ids.shape, E.shape[1]), "sparse_coo_tensor"),
])
def test_one_hot_embedding_names_the_cause(wrong, cause):
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch10_one_hot_embedding(wrong)
    assert cause in failure.value.message, failure.value.message


@pytest.mark.parametrize("wrong", [        # the eighth read's L1: wrong in float64, not a dtype
    lambda ids, E: 1.004 * (torch.nn.functional.one_hot(ids, E.shape[0]).to(E.dtype) @ E),
    lambda ids, E: 0.003 + torch.nn.functional.one_hot(ids, E.shape[0]).to(E.dtype) @ E,
    lambda ids, E: (0.999 * torch.nn.functional.one_hot(ids, E.shape[0]).to(E.dtype)
                    + 0.001 / E.shape[0]) @ E,
])
def test_one_hot_embedding_blames_no_precision_for_a_wrong_float64_answer(wrong):
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch10_one_hot_embedding(wrong)
    message = failure.value.message
    assert "computed in" not in message, message


def test_bpe_encode_refuses_the_encoder_of_a_class_from_before_a_reload():
    import importlib
    import mathref.tokenizers as T
    stale = T.BPETokenizer                      # as `from mathref.tokenizers import ...` keeps it
    saved = dict(vars(T))
    importlib.reload(T)
    try:
        assert T.BPETokenizer is not stale
        with pytest.raises(ExerciseCheckFailed) as failure:
            checks.check_ch10_bpe_encode(
                lambda text, merges: stale(merges).encode(text, allowed_special=False))
        assert "BPETokenizer.encode" in failure.value.message, failure.value.message
        # the stale class works again after the check
        assert stale([]).encode("ab", allowed_special=False) == [97, 98]
    finally:
        vars(T).update(saved)                   # the module's original objects, for other tests


def test_bpe_encode_rejects_greedy_longest_match_by_its_values():
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch10_bpe_encode(ch10.bpe_greedy_longest)
    assert "is never formed" in failure.value.message, failure.value.message


class _RowsFromLists(torch.autograd.Function):
    """The fourth read's L5: rows picked from E.tolist(), with a hand-written backward that
    gets the gradient right (the gradient test runs it outside the rule)."""

    @staticmethod
    def forward(ctx, E, ids):
        ctx.save_for_backward(ids)
        ctx.V = E.shape[0]
        rows = E.detach().tolist()
        flat = [rows[i] for i in ids.reshape(-1).tolist()]
        return torch.tensor(flat, dtype=E.dtype).reshape(*ids.shape, E.shape[1])

    @staticmethod
    def backward(ctx, g):
        ids, = ctx.saved_tensors
        return g.new_zeros(ctx.V, g.shape[-1]).index_add_(
            0, ids.reshape(-1), g.reshape(-1, g.shape[-1])), None


def _ints_by_products(ids):
    """The ids as Python ints without tolist: each read by a product with a position one-hot."""
    flat = ids.reshape(-1)
    return [int((flat * (torch.arange(flat.numel()) == k)).sum().item()) for k in range(flat.numel())]


def _cropped_rows(crop):
    def lookup(ids, E):
        V = E.shape[0]
        rows = [crop(E, i, V) for i in _ints_by_products(ids)]
        return torch.cat(rows).reshape(*ids.shape, E.shape[1])
    return lookup


@pytest.mark.parametrize("wrong, refused", [
    (lambda ids, E: _RowsFromLists.apply(E, ids), "torch.Tensor.tolist"),
    # a negative pad crops (the fourth read's L4), by F.pad, torch.constant_pad_nd or after a roll
    (_cropped_rows(lambda E, i, V: torch.nn.functional.pad(E, (0, 0, -i, -(V - 1 - i)))),
     "torch.ops.aten.constant_pad_nd"),
    (_cropped_rows(lambda E, i, V: torch.constant_pad_nd(E, (0, 0, -i, -(V - 1 - i)))),
     "torch.ops.aten.constant_pad_nd"),
    (_cropped_rows(lambda E, i, V: torch.nn.functional.pad(torch.roll(E, -i, 0), (0, 0, 0, -(V - 1)))),
     "torch.ops.aten.constant_pad_nd"),
    (_cropped_rows(lambda E, i, V: torch.nn.ConstantPad1d((-i, -(V - 1 - i)), 0.0)(E.T).T),
     "torch.ops.aten.constant_pad_nd"),
], ids=["tolist-in-autograd-function", "negative-F.pad", "constant_pad_nd", "roll-then-pad",
        "ConstantPad1d"])
def test_one_hot_embedding_refuses_rows_taken_by_padding_or_from_lists(wrong, refused):
    ids = torch.tensor([[3, 0], [3, 7]])
    E = torch.randn(9, 4, dtype=torch.float64)
    torch.testing.assert_close(wrong(ids, E), E[ids])          # right values outside the rule
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch10_one_hot_embedding(wrong)
    assert refused in failure.value.message, failure.value.message


def _right_bpe(text, merges):
    """BPE by applying every merge once, in training order, inside each chunk (section 10.2)."""
    out = []
    for ids in ch10._chunks(text):
        for r, pair in enumerate(merges):
            ids = ch10._merge(ids, tuple(pair), 256 + r)
        out += ids
    return out


def _recorded_answers():
    """The checker's inputs as the notebook runs them, with right ids: {repr((text, merges)): ids}
    and the first case's merges (from the toy corpus)."""
    table, given = {}, []

    def recording(text, merges):
        given.append([tuple(m) for m in merges])
        table[repr((text, given[-1]))] = ids = _right_bpe(text, merges)
        return ids
    checks.check_ch10_bpe_encode(recording)
    return table, given[0]


def _bpe_table_answer():
    """The tenth read's M2: a bpe_encode that calls no encoder. Its tables hold the answers to
    the checker's inputs as the notebook runs them (recorded here by a right encoder), and the
    ids of every chunk of the random case as it was (words drawn from a fixed list, encoded
    with the fixed toy merges)."""
    table, toy = _recorded_answers()
    words = " lowest newest widest low kings the aaa café".split(" ")
    chunks = {c: _right_bpe(c, toy) for w in words for c in (w, " " + w)}
    return ("def bpe_encode(text, merges):\n"
            "    import re\n\n"
            "    from mathref.tokenizers import GPT2_SPLIT_PATTERN\n"
            f"    TABLE = {table!r}\n"
            f"    CHUNKS = {chunks!r}\n"
            "    key = repr((text, [tuple(m) for m in merges]))\n"
            "    if key in TABLE:\n"
            "        return list(TABLE[key])\n"
            "    return [i for c in re.findall(GPT2_SPLIT_PATTERN, text)\n"
            "            for i in CHUNKS.get(c, [])]\n")


def _bpe_table_and_greedy_answer():
    """The delta read's N1 (/tmp/d10/tablegreedy_src.py): the table of the notebook's answers,
    and for any other input the longest known piece from the left (not BPE)."""
    return _table_answer_then(
            "    pieces = {bytes([i]): i for i in range(256)}\n"
            "    made = {i: bytes([i]) for i in range(256)}\n"
            "    for r, (a, b) in enumerate(merges):\n"
            "        made[256 + r] = made[a] + made[b]\n"
            "        pieces[made[256 + r]] = 256 + r\n"
            "    out = []\n"
            "    for chunk in re.findall(GPT2_SPLIT_PATTERN, text):\n"
            "        data, i = chunk.encode('utf-8'), 0\n"
            "        while i < len(data):\n"
            "            j = max(k for k in range(i + 1, len(data) + 1) if data[i:k] in pieces)\n"
            "            out.append(pieces[data[i:j]])\n"
            "            i = j\n"
            "    return out\n")


def _table_answer_then(rest):
    """A solution cell's source: bpe_encode answers from the table of the notebook's answers,
    and runs ``rest`` (the body's remaining lines) for any other input."""
    table, _ = _recorded_answers()
    return ("def bpe_encode(text, merges):\n"
            "    import re\n\n"
            "    from mathref.tokenizers import GPT2_SPLIT_PATTERN\n"
            f"    TABLE = {table!r}\n"
            "    key = repr((text, [tuple(m) for m in merges]))\n"
            "    if key in TABLE:\n"
            "        return list(TABLE[key])\n" + rest)


def _bpe_table_and_once_answer():
    """The eleventh read's M1 (table + `once`): the table of the notebook's answers, and for
    any other input every merge applied once, to its first occurrence only (not BPE)."""
    return _table_answer_then(
            "    out = []\n"
            "    for chunk in re.findall(GPT2_SPLIT_PATTERN, text):\n"
            "        ids = list(chunk.encode('utf-8'))\n"
            "        for r, (a, b) in enumerate(merges):\n"
            "            for i in range(len(ids) - 1):\n"
            "                if (ids[i], ids[i + 1]) == (a, b):\n"
            "                    ids = ids[:i] + [256 + r] + ids[i + 2:]\n"
            "                    break\n"
            "        out += ids\n"
            "    return out\n")


def _table_then(wrong):
    """The notebook's answers from a table, and the wrong encoder ``wrong`` for other inputs."""
    table, _ = _recorded_answers()

    def bpe_encode(text, merges):
        key = repr((text, [tuple(m) for m in merges]))
        return list(table[key]) if key in table else wrong(text, merges)
    return bpe_encode


def _solution(source):
    namespace = {}
    exec(compile(source, "<solution bpe_encode>", "exec"), namespace)
    return namespace["bpe_encode"]


_GENERATORS = range(20)


def _renamed_from(text, original):
    """Whether ``text`` is ``original`` with its letters and digits renamed as the checker's
    _renaming does (one bijection, inside each class of characters)."""
    from mathref.checks.ch10 import _KEPT_LETTERS

    def kind(c):
        if c in _KEPT_LETTERS or not c.isascii() or not c.isalnum():
            return c                            # a character the renaming keeps
        return "digit" if c.isdigit() else "lower" if c.islower() else "upper"
    if len(text) != len(original):
        return False
    forward, backward = {}, {}
    for a, b in zip(original, text):
        if kind(a) != kind(b) or forward.setdefault(a, b) != b or backward.setdefault(b, a) != a:
            return False
    return True


def _fixed_right_then(wrong):
    """Right ids on the fixed cases however they are renamed (a table that undoes the
    renaming, as an answer written against the checker's source could hold), and the wrong
    encoder ``wrong`` on every other input: only the drawn texts can refuse it."""
    from mathref.checks.ch10 import _fixed_bpe_cases
    fixed = [text for _, text, _, _ in _fixed_bpe_cases({})]

    def bpe_encode(text, merges):
        if any(_renamed_from(text, t) for t in fixed):
            return _right_bpe(text, merges)
        return wrong(text, merges)
    return bpe_encode


@pytest.mark.parametrize("wrong", [ch10.bpe_greedy_longest, ch10.bpe_first_position,
                                   ch10.bpe_latest_first, ch10.bpe_no_pretokenization,
                                   ch10.bpe_split_words_punct, ch10.bpe_split_nonspace],
                         ids=["greedy", "leftmost", "latest", "no-split", "w-split", "S-split"])
def test_bpe_encode_random_cases_refuse_a_table_plus_a_wrong_encoder(wrong):
    """The delta read's N1: the one random case often gave the same ids under greedy longest
    match or leftmost-pair merging as under BPE, and never caught a missing or \\w-based split,
    so a table of the fixed cases plus such an encoder passed about half of the grader's
    seeds. The random texts are now drawn until each of these encoders is caught: even with
    every fixed case answered right, however it is renamed, the drawn texts refuse them."""
    answer = _fixed_right_then(wrong)
    for seed in _GENERATORS:
        with pytest.raises(ExerciseCheckFailed) as failure:
            checks.check_ch10_bpe_encode(answer, generator=torch.Generator().manual_seed(seed))
        assert "random corpus" in failure.value.message, (seed, failure.value.message)


def test_bpe_encode_reader_table_and_greedy_fails_in_process():
    answer = _solution(_bpe_table_and_greedy_answer())
    answer("abcd", [(98, 99), (256, 100), (97, 98)])          # the source runs
    for seed in _GENERATORS:
        with pytest.raises(ExerciseCheckFailed):
            checks.check_ch10_bpe_encode(answer, generator=torch.Generator().manual_seed(seed))


def test_bpe_encode_reader_table_and_once_fails_in_process():
    answer = _solution(_bpe_table_and_once_answer())
    assert answer("aaaaa", [(97, 97), (256, 256)]) == [256, 97, 97, 97]   # the source runs
    for seed in _GENERATORS:
        with pytest.raises(ExerciseCheckFailed):
            checks.check_ch10_bpe_encode(answer, generator=torch.Generator().manual_seed(seed))


def test_bpe_encode_renamed_fixed_cases_refuse_what_the_originals_refuse():
    """Renaming the fixed cases' letters and digits keeps what each one tests: on every case,
    the wrong encoders of tests/exercises/ch10.py that give other ids than BPE are the same
    before and after the renaming, and BPE's ids are the original ones with the byte ids
    renamed."""
    from mathref import tokenizers
    from mathref.checks.ch10 import _fixed_bpe_cases, _renaming
    wrong = [w for w in ch10.WRONG_ANSWERS["ch10-bpe-encode"] if w is not ch10.bpe_library]

    def caught(cases):
        found = []
        for merges, text, _, _ in cases:
            want = tokenizers.BPETokenizer(merges).encode(text, allowed_special=False)
            found.append({i for i, w in enumerate(wrong) if w(text, merges) != want})
        return found
    original = _fixed_bpe_cases({})
    assert all(caught(original)[i] for i in (2, 5, 6, 7)), caught(original)   # runs, crafted
    for seed in range(5):
        name = _renaming(torch.Generator().manual_seed(seed))
        renamed = _fixed_bpe_cases(name)
        assert [t for _, t, _, _ in renamed] != [t for _, t, _, _ in original]
        assert caught(renamed) == caught(original), seed
        for (m0, t0, _, _), (m1, t1, _, _) in zip(original, renamed):
            ids = tokenizers.BPETokenizer(m0).encode(t0, allowed_special=False)
            assert [name.get(i, i) for i in ids] == tokenizers.BPETokenizer(m1).encode(
                t1, allowed_special=False)


def test_bpe_encode_right_answers_pass_on_the_same_generators(capsys):
    from tests.notebooks import ROOT, read, reference_answer
    reference = reference_answer(read(ROOT / "notebooks" / "10_tokenization.ipynb"),
                                 "ch10-bpe-encode")
    for answer in [reference] + [_solution(s) for s in ch10.RIGHT_ANSWERS["ch10-bpe-encode"]]:
        for seed in _GENERATORS:
            checks.check_ch10_bpe_encode(answer, generator=torch.Generator().manual_seed(seed))


_OFF_LIST = [ch10.bpe_once_per_merge, ch10.bpe_right_to_left, ch10.bpe_split_no_contractions]


@pytest.mark.parametrize("wrong", _OFF_LIST, ids=["once", "right-to-left", "no-contractions"])
def test_bpe_encode_fixed_cases_refuse_a_table_plus_an_off_list_encoder(wrong):
    """The eleventh read's M1: the fixed cases were the same on every run, so a table of their
    answers (taken from the notebook's run) plus a wrong encoder that _WRONG_BPE_ENCODERS does
    not list passed whenever the drawn texts missed its slip (the read: once per merge 28 of 60
    generators, right to left 22, GPT-2's pattern without contractions 21). The fixed cases'
    letters and digits are now renamed by a permutation drawn from the check's generator, so
    the table misses them and they refuse the encoder whatever the drawn texts are."""
    answer = _table_then(wrong)
    for seed in _GENERATORS:
        with pytest.raises(ExerciseCheckFailed):
            checks.check_ch10_bpe_encode(answer, generator=torch.Generator().manual_seed(seed))
