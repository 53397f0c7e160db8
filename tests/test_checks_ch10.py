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
