"""Chapter 14's checkers: right answers in the forms the course teaches pass, and a failure
names its cause."""
import pytest

from mathref.checks import CHECKS, ExerciseCheckFailed
from tests.exercises import ch14
from tests.notebooks import NOTEBOOKS, read, reference_answer

CHAPTER = read(next(path for path in NOTEBOOKS if path.name == "14_gpt.ipynb"))
LABEL = "ch14-rope-decode-step"


@pytest.mark.parametrize("body", [ch14.COMPLEX_ROPE_DECODE, ch14.VIEW_AS_COMPLEX_ROPE_DECODE,
                                  ch14.IMAG_ROPE_DECODE, ch14.ANGLE_ROPE_DECODE],
                         ids=["complex-polar", "view_as_complex", "torch.imag", "angle"])
def test_rope_as_a_complex_product_passes(body, capsys):
    """The eighth read's M1: RoPE written with torch.complex/polar or view_as_complex (chapter
    12's method, and the checker's own reference) was refused as 'ran aten.complex'. The delta
    read's N-M1: the parts taken as torch.imag(z), or as |z| and z.angle() after
    z.conj_physical(), were still refused ('ran torch imag')."""
    CHECKS[LABEL](reference_answer(CHAPTER, LABEL, body))
    assert f"✅ {LABEL}: passed" in capsys.readouterr().out


def test_complex_numbers_do_not_open_the_attention_shortcut():
    with pytest.raises(ExerciseCheckFailed, match="scaled_dot_product_attention"):
        CHECKS[LABEL](reference_answer(CHAPTER, LABEL, ch14.COMPLEX_ROPE_SDPA))


def test_adjacent_pairs_written_with_complex_numbers_get_the_layout_hint():
    """Before M1's fix this wrong answer failed on the refused operator, not on its mistake."""
    with pytest.raises(ExerciseCheckFailed, match="adjacent pairs") as failure:
        CHECKS[LABEL](ch14.rope_decode_adjacent)
    assert "does not allow" not in failure.value.message


@pytest.mark.parametrize("wrong, cause", [
    (ch14.decode_caches_unrotated_keys, "the new key went into the cache unrotated"),
    (ch14.decode_without_offset, "the new key went into the cache unrotated: rotate it at its "
                                 "position S = 1"),
    (ch14.decode_rerotates_the_cache, "the keys already in the cache changed"),
    (ch14.decode_offset_one_too_far, "(your new key is rotated as at position 1, but it is at "
                                     "position S = 0)"),
    (ch14.decode_rotated_twice, "(your new key is rotated as at position 2, but it is at "
                                "position S = 1)"),
    (ch14.decode_base_1000, "(the new key, at position S = 1, is rotated by the wrong angles"),
    (ch14.decode_theta_without_2, "(the new key, at position S = 1, is rotated by the wrong "
                                  "angles: pair (x_i, x_(i+d/2)) turns by S·θ_i, θ_i = "
                                  "10000^(−2i/d), once)"),
], ids=["cached-unrotated", "at-position-0", "cache-rotated-again", "position-S+1",
        "rotated-twice", "base-1000", "theta-without-2"])
def test_a_wrong_cache_is_named_for_its_mistake(wrong, cause):
    """The eighth read's L4: keys cached unrotated, and the cache rotated again at every step,
    were both told '(the new key is at position S = 1)', though the position was right. The
    delta read's N-L2: so were a wrong base, a wrong θ_i and the new key rotated twice at S;
    the position is named only where a rotation at another position explains the new key."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS[LABEL](wrong)
    assert "k_cache must hold the keys rotated" in failure.value.message
    assert cause in failure.value.message, failure.value.message


NUMPY_PPL_BPB = ("import numpy as np\n\n"
                 "def perplexity_and_bpb(total_nll_nats, n_tokens, n_bytes):\n"
                 "    t = total_nll_nats\n"
                 "    return float(np.exp(t / n_tokens)), t / (np.log(2) * n_bytes)\n")
NUMPY_PAIRS = ("import torch\n\n"
               "def next_token_pairs(ids):\n"
               "    a = ids.numpy()\n"
               "    return torch.from_numpy(a[:, :-1].copy()), torch.from_numpy(a[:, 1:].copy())\n")


@pytest.mark.parametrize("label, body", [("ch14-perplexity-bpb", NUMPY_PPL_BPB),
                                         ("ch14-next-token-pairs", NUMPY_PAIRS)],
                         ids=["ufuncs-on-numbers", "tensor-as-array"])
def test_numpy_is_refused_in_every_exercise(label, body):
    """The eighth read's L3: 'no NumPy' held in exercise 1 (ids.numpy()) but np.exp and np.log
    on plain numbers passed exercise 2, unseen by the gate. Both are refused now."""
    with pytest.raises(ExerciseCheckFailed, match="no NumPy"):
        CHECKS[label](reference_answer(CHAPTER, label, body))


BEAM = "ch14-beam-search"


@pytest.mark.parametrize("wrong, cause", [
    (ch14.beam_greedy, "that is greedy decoding's sequence"),
    (ch14.beam_exhaustive, "that is the most likely sequence of all; a beam of width 2"),
    (ch14.beam_ranked_by_last_token, "(that is what ranking the candidates by the new token's "
                                     "log-probability alone gives"),
    (ch14.beam_probability_score, "over the new tokens"),
    (ch14.beam_without_prompt, "prompt included"),
], ids=["greedy", "exhaustive", "last-token", "probability", "no-prompt"])
def test_a_wrong_beam_search_is_named_for_its_mistake(wrong, cause):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS[BEAM](wrong)
    assert cause in failure.value.message, failure.value.message
    assert "; or " not in failure.value.message     # the first case tells these mistakes apart


@pytest.mark.parametrize("seed", range(6))
def test_the_beam_checker_agrees_with_brute_force_and_with_mathref(seed):
    """The checker's reference beam (Python lists) is exhaustive at width V^(n−1), where it
    must equal an enumeration of all V^n continuations written here; and at every width it
    equals mathref.gpt.beam_search run on the same table as a model."""
    import itertools
    import types

    import torch

    from mathref.checks import ch14 as check
    from mathref.gpt import beam_search

    g = torch.Generator().manual_seed(seed)
    V, n, prompt = 4, 4, [1, 2]
    table = check._beam_table(g, V, n, prompt)
    best = max((sum(float(table[i - 2, s[i - 2], s[i - 1], s[i]]) for i in range(2, 2 + n)), s)
               for s in ([*prompt, *tail] for tail in itertools.product(range(V), repeat=n)))
    score, seq = check._beam_reference(table, prompt, n, V ** (n - 1))
    assert seq == best[1] and abs(score - best[0]) < 1e-12

    class Table(torch.nn.Module):
        config = types.SimpleNamespace(block_size=100)

        def forward(self, idx):
            return table[idx.shape[1] - 2, idx[:, -2], idx[:, -1]][:, None, :], None

    for width in (1, 2, 3, V ** (n - 1)):
        score, seq = check._beam_reference(table, prompt, n, width)
        course, course_score = beam_search(Table(), torch.tensor([prompt]), n, beam_width=width)
        assert course[0].tolist() == seq and abs(course_score - score) < 1e-9, width
