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
])
def test_one_hot_embedding_names_the_cause(wrong, cause):
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch10_one_hot_embedding(wrong)
    assert cause in failure.value.message, failure.value.message


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
    assert "'ab' is never formed" in failure.value.message, failure.value.message
