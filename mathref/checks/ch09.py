"""Checkers for chapter 9: similarity and high-dimensional geometry."""
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from mathref.checks.ch13 import ATTENTION_CALLS
from mathref.checks.core import FLOAT32_CAST_BACK, cast_back_from_float32, is_remote, rng
from mathref.checks.remote import remote_apply
from mathref.checks.core import (CheckFailure, as_tensor, exercise, expect, expect_callable,
                                 expect_close, expect_tensor_close)

__all__ = ["check_ch09_cosine_from_dot", "check_ch09_unit_distance", "check_ch09_mips_to_nn",
           "check_ch09_soft_lookup"]


_LOW_PRECISION = (torch.float32, torch.float16, torch.bfloat16)


def _dtype_hint(got, inputs_dtype=torch.float64):
    """A hint naming the dtype when the answer is a lower-precision tensor than the inputs."""
    if isinstance(got, torch.Tensor) and got.dtype in _LOW_PRECISION and inputs_dtype == torch.float64:
        return (f" (your result is {got.dtype}, but the inputs are torch.float64: compute in "
                f"their dtype: float32 keeps only about 7 significant digits)")
    return ""


def _expect_tensor_close(got, want, what, rtol=1e-9, atol=1e-12, **kwargs):
    try:
        expect_tensor_close(got, want, what, rtol=rtol, atol=atol, **kwargs)
    except CheckFailure as failure:
        # (one hint about the dtype: this one, which names it, in place of core's general one)
        message, hint = str(failure), _dtype_hint(got)
        if hint:
            message = message.split(". A difference this small")[0]
        raise CheckFailure(f"{message}{hint}") from None


def _on_copies(fn, args, names, what, **kwargs):
    """fn on copies of the tensor arguments, failing if it changed any of them in place (the
    comparison that follows uses the arguments as given, so a changed input would otherwise
    show up as a wrong value)."""
    copies = [a.clone() for a in args]
    out = fn(*copies, **kwargs)
    for name, given, original in zip(names, copies, args):
        expect(given.shape == original.shape and torch.equal(given, original),
               f"{what}: your function modified its argument {name} in place (an in-place "
               f"operation such as /=, .div_() or .zero_() on an argument); leave the inputs "
               f"unchanged and build new tensors instead")
    return out


_COSINE_BUILTINS = ("torch.nn.functional.cosine_similarity", "torch.cosine_similarity",
                    "torch.nn.functional.normalize", "mathref.similarity.cosine_similarity",
                    "mathref.similarity.pairwise_cosine_similarity",
                    "torch.ops.aten.cosine_similarity")


@exercise("ch09-cosine-from-dot", forbid=_COSINE_BUILTINS,
          because="cosine builds the cosine from the dot product and the clamped norms itself")
def check_ch09_cosine_from_dot(cosine):
    """cosine(a, b, eps=1e-8): a·b / (max(‖a‖, ε) max(‖b‖, ε)) along the last dimension."""
    expect_callable(cosine, "cosine(a, b, eps=1e-8)")
    gen = rng(9)
    a = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    b = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    got = _on_copies(cosine, (a, b), "ab", "cosine of six random pairs in ℝ⁵")
    # ε added instead of clamped shifts every result by about 1e-8, which core's message would
    # blame on float32 (the read at 81f456b, L3: ε added to each norm was; its delta read, N2:
    # ε added under the square root was): each form is named
    dot, na, nb = (a * b).sum(-1), a.norm(dim=-1), b.norm(dim=-1)
    under_root = dot / (((a * a).sum(-1) + 1e-8).sqrt() * ((b * b).sum(-1) + 1e-8).sqrt())
    for eps_added, form in [(dot / (na * nb + 1e-8), "‖a‖‖b‖ + ε"),
                            (dot / ((na + 1e-8) * (nb + 1e-8)), "(‖a‖ + ε)(‖b‖ + ε)"),
                            (under_root, "√(‖a‖² + ε)·√(‖b‖² + ε)")]:
        expect(not (isinstance(got, torch.Tensor) and got.shape == eps_added.shape
                    and torch.allclose(got.double(), eps_added, rtol=1e-13, atol=0)),
               f"cosine of six random pairs in ℝ⁵: your denominator is {form}, which shifts "
               f"every result slightly; clamp each norm from below instead (.clamp_min(eps))")
    _expect_tensor_close(got, F.cosine_similarity(a, b, dim=-1), "cosine of six random pairs in ℝ⁵")
    e1 = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    cases = [(3 * e1, torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64), "parallel-ish vectors"),
             (torch.zeros(3, dtype=torch.float64), e1, "a zero vector (expected 0, not nan)"),
             (1e-5 * e1, 1e-5 * e1, "two tiny equal vectors (‖a‖ = ‖b‖ = 1e-5, above ε)"),
             (1e-12 * e1, e1, "a vector shorter than ε")]
    for x, y, what in cases:
        got = as_tensor(_on_copies(cosine, (x, y), "ab", what), what)
        expect(got.numel() == 1, f"{what}: expected one number for two vectors, got shape "
                                 f"{tuple(got.shape)}")
        want = F.cosine_similarity(x, y, dim=0).item()
        if what.startswith("two tiny") and not math.isclose(got.item(), want, rel_tol=1e-9,
                                                           abs_tol=1e-12):
            # the hint names the mistakes the value shows (the read at 18a970c, L6: √(‖a‖² + ε²)
            # was blamed on clamping the product; the read at 81f456b, L2: two clamps give each
            # value below). The product ‖a‖‖b‖ clamped at ε, and each ‖a‖² clamped at ε (not ε²),
            # both give 1e-10/ε = 0.01; the product ‖a‖²‖b‖² clamped at ε gives 1e-10/√ε = 1e-6
            if math.isclose(got.item(), 1e-10 / 1e-8, rel_tol=1e-6):
                hint = (": your denominator is ε, not ‖a‖‖b‖ = 1e-10: the product ‖a‖‖b‖ clamped "
                        "at ε, or each squared norm ‖a‖² at ε instead of ε²; clamp each norm, "
                        "not their product, at ε")
            elif math.isclose(got.item(), 1e-10 / math.sqrt(1e-8), rel_tol=1e-6):
                hint = (": your denominator is √ε = 1e-4, not ‖a‖‖b‖ = 1e-10: the product of the "
                        "squared norms ‖a‖²‖b‖² clamped at ε; clamp each norm at ε (‖a‖ ≥ ε is "
                        "‖a‖² ≥ ε²), then multiply")
            else:
                hint = (": a norm above ε must stay exactly ‖a‖; clamp it from below "
                        "(.clamp_min(eps)), do not smooth it")
            raise CheckFailure(f"{what}: expected {want:.6g}, got {got.item():.6g}{hint}")
        expect_close(got.item(), want, what, rtol=1e-9, atol=1e-12)
    what = "a vector of norm 1e-12 against e₁ with eps=1e-3"
    got = as_tensor(_on_copies(cosine, (1e-12 * e1, e1), "ab", what, eps=1e-3), what)
    expect_close(got.item(), 1e-9, what, rtol=1e-9, atol=1e-15)
    return "matches F.cosine_similarity, including zero and tiny vectors"


# (each kernel's torch.ops.aten twin and pdist too: named, so that the refusal says which; the
# gate's operator allowlist refuses the rest, in the notebook and in the grader's worker)
_DISTANCES = ("torch.norm", "torch.Tensor.norm", "torch.linalg.norm", "torch.linalg.vector_norm",
              "torch.dist", "torch.Tensor.dist", "torch.cdist", "torch.nn.functional.pairwise_distance",
              "torch.pdist", "torch.nn.functional.pdist",
              "torch.ops.aten.cdist", "torch.ops.aten.pdist", "torch.ops.aten.pairwise_distance",
              "torch.ops.aten.linalg_vector_norm", "torch.ops.aten.linalg_norm",
              "torch.ops.aten.norm", "torch.ops.aten.dist",
              "torch.hypot", "torch.Tensor.hypot", "mathref.similarity.euclidean_distance",
              "mathref.similarity.pairwise_euclidean_distance", "torch.Tensor.tolist",
              # singular values of each [d, 1] difference (the tenth read, L1: nuclear_norm and
              # svdvals passed under the grader): every SVD reaches this kernel
              "torch.nuclear_norm", "torch.linalg.svdvals", "torch.ops.aten._linalg_svd")


def _meter_counts(unit_distances, U, V):
    """What the meter sees of unit_distances(U, V), as data: (operations run, numbers they
    return together, whether the result is computed from U and V). Under the grader this runs
    where the answer runs (sent there as code by mathref.grade.rpc.apply, the only place its
    tensor operations can be seen; the read at 81f456b, L6), so the meter's class is defined
    here: the checkers' own names are never sent to the student's process."""

    class _OpMeter(TorchDispatchMode):
        """Counts the aten operators a call runs and the elements all of them return together:
        how the check tells one matrix product (a few operators, each no larger than [n, m],
        [n, d] or [m, d]) from a loop over pairs, rows or coordinates (operators that grow with n
        or d) or the broadcast difference u_i − v_j ([n, m, d] numbers, whether built at once or
        in pieces). It also follows which tensors are computed from the inputs, so that a result
        built from Python numbers (the entries read out, the distances computed in Python and
        put back with torch.tensor) is told from one computed by tensor operations."""

        def __init__(self, inputs):
            super().__init__()
            self.calls, self.total = 0, 0
            self._derived = list(inputs)            # kept alive, so that their ids stay theirs
            self.derived = {id(t) for t in inputs}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.calls += 1
            outs = out if isinstance(out, (tuple, list)) else (out,)
            # (a view of an input computes nothing: only outputs that are new tensors or written
            # ones count, so einsum's reshapes around its bmm do not; a broadcast difference,
            # whole, in pieces or written into a buffer (in place, out=: an alias that writes,
            # the read at 81f456b, L1), still makes its n·m·d numbers)
            returns = func._schema.returns
            for i, t in enumerate(outs):
                alias = returns[i].alias_info if i < len(returns) else None
                if isinstance(t, torch.Tensor) and (alias is None or alias.is_write):
                    self.total += t.numel()
            # (plain loops: a generator expression's code would run as a function of this
            # module inside the answer's call, which the gate refuses; only dunder methods are
            # let through)
            for t in tree_flatten((args, kwargs or {}))[0]:
                if isinstance(t, torch.Tensor) and id(t) in self.derived:
                    for o in outs:
                        if isinstance(o, torch.Tensor):
                            self._derived.append(o)
                            self.derived.add(id(o))
                    break
            return out

    U, V = U.clone(), V.clone()
    meter = _OpMeter((U, V))
    with meter:
        got = unit_distances(U, V)
    return meter.calls, meter.total, isinstance(got, torch.Tensor) and id(got) in meter.derived


def _exact_distances(U, V):
    """‖u_i − v_j‖ of the given (rounded) vectors, from their differences in float64."""
    return (U.double()[:, None, :] - V.double()[None, :, :]).pow(2).sum(-1).sqrt()


_CLAMP_HINT = (" (a cosine computed by rounding can come out a few units in the last place above "
               "1, as in section 9.2, so 2 − 2u·v can be slightly negative and its square root "
               "nan: clamp it at 0 before the square root)")


@exercise("ch09-unit-distance", forbid=_DISTANCES,
          because="the distances come from the matrix of dot products U Vᵀ and ‖u − v‖² = 2 − 2u·v, "
                  "not from measuring each pair")
def check_ch09_unit_distance(unit_distances):
    """unit_distances(U, V): all distances ‖u_i − v_j‖ between the unit rows of U [n, d] and
    V [m, d], as an [n, m] matrix √(max(2 − 2 U Vᵀ, 0)) built from one matrix product: no loop
    over pairs or rows, no [n, m, d] difference, finite where rounding pushes a cosine above 1."""
    expect_callable(unit_distances, "unit_distances(U, V)")
    gen = rng(3)

    def unit(n, d, dtype=torch.float64):
        return F.normalize(torch.randn(n, d, generator=gen, dtype=torch.float64), dim=-1).to(dtype)

    d = 16
    U_small, V_small, U_big, V_big = unit(4, d), unit(5, d), unit(40, d), unit(50, d)
    cases = [(U_small, V_small, "4 × 5 random unit vectors in ℝ¹⁶ (float64)", 1e-9, 1e-7)]
    U = unit(30, 8)
    cases.append((U, U, "30 unit vectors in ℝ⁸ against themselves (float64; the diagonal is 0)",
                  1e-9, 1e-7))
    # float32: the rounded cosine of some vectors with themselves exceeds 1, and near-duplicate
    # pairs (b = a + 1e-4·noise) cancel in 2 − 2u·v; the matrix-product form is then good only to
    # about √(a few float32 ulps) ≈ 1e-3 near distance 0, which the tolerance allows
    A = unit(200, 64, torch.float32)
    B = F.normalize(A + 1e-4 * torch.randn(200, 64, generator=gen).to(torch.float32), dim=-1)
    assert (A @ A.T).diagonal().max() > 1                 # the test needs cosines above 1
    cases.append((A, A, "200 float32 unit vectors in ℝ⁶⁴ against themselves", 1e-5, 2e-3))
    cases.append((A, B, "200 float32 unit vectors against near-duplicates at distance ≈ 8e-4",
                  1e-5, 2e-3))
    # float64 near-duplicates at distance ≈ 4e-5: there 2 − 2u·v is accurate to a few float64
    # ulps, so √(2 − 2u·v) is good to about 1e-11, and an answer that rounds small distances
    # to 0 (or to any floor) fails
    A64 = unit(50, 16)
    B64 = F.normalize(A64 + 1e-5 * torch.randn(50, 16, generator=gen, dtype=torch.float64), dim=-1)
    cases.append((A64, B64, "50 float64 unit vectors in ℝ¹⁶ against near-duplicates at distance "
                            "≈ 4e-5", 1e-5, 1e-9))
    # under the grader the meter runs in the answer's process (the read at 81f456b, L6: it ran
    # only in the notebook, and the grader let the value cases alone decide)
    apply = remote_apply(unit_distances)
    remote = apply is None and (getattr(unit_distances, "remote", False) or is_remote(unit_distances))
    for k, (U, V, what, rtol, atol) in enumerate(cases):
        if k == 1 and not remote:
            _expect_one_matrix_product(unit_distances, apply, unit, U_small, V_small, U_big,
                                       V_big, d)
        raw = _on_copies(unit_distances, (U, V), "UV", what)
        got = as_tensor(raw, what)
        want = _exact_distances(U, V)
        expect(tuple(got.shape) == tuple(want.shape),
               f"{what}: expected shape {tuple(want.shape)} (one distance per pair), got "
               f"{tuple(got.shape)}")
        got = got.double()
        expect(bool(torch.isfinite(got).all()), f"{what}: your result contains nan or inf"
                                                 f"{_CLAMP_HINT}")
        bad = ~torch.isclose(got, want, rtol=rtol, atol=atol)
        if bad.any():
            i = tuple(bad.nonzero()[0].tolist())
            g, w = got[i].item(), want[i].item()
            hint = _dtype_hint(raw, U.dtype) or _float32_inside(got, U.dtype) \
                or _unit_distance_diagnosis(g, w)
            raise CheckFailure(f"{what}: at index {list(i)} expected {w:.6g}, got {g:.6g}{hint}")
    if remote:
        return "‖u − v‖ = √(2 − 2 u·v), finite and accurate near distance 0 (values only)"
    return "‖u − v‖ = √(2 − 2 u·v) from one matrix product, clamped where rounding pushes u·v above 1"


def _expect_one_matrix_product(unit_distances, apply, unit, U_small, V_small, U_big, V_big, d):
    """How the distances are computed, checked after the first (small) case and before the large
    ones, so that a per-pair Python loop is refused in milliseconds, not after 40,000 pairs.
    ``apply``: the grader's way to run the meter where the answer runs, or None (run it here)."""
    # how the distances are computed: the same function on 4 × 5 and on 40 × 50 pairs, d = 16
    def measure(U, V):
        calls, total, from_inputs = (apply(_meter_counts, U, V) if apply is not None
                                     else _meter_counts(unit_distances, U, V))
        return SimpleNamespace(calls=calls, total=total, from_inputs=from_inputs)

    small, big = measure(U_small, V_small), measure(U_big, V_big)
    wide = measure(unit(4, 4 * d), unit(5, 4 * d))
    # 40 × 50 pairs in ℝ¹²⁸: the matrix-product form returns a few tensors of n·m, n·d or m·d
    # numbers (about 2 (nm + nd + md) in all for the reference); any form of the broadcast
    # difference returns at least n·m·d = 256,000, built at once, by halves of the rows or in
    # chunks of the coordinates. The bound, 8 (nm + nd + md) = 108,160, lies between the two
    # and is not shown in the message (the read at 18a970c, finding 3: the largest single tensor was
    # measured before, and a difference split in two passed)
    n, m, deep_d = 40, 50, 128
    expect(small.from_inputs and big.from_inputs,
           "4 × 5 pairs in ℝ¹⁶: your result is not computed from U and V by tensor operations "
           "(it was built from Python numbers, e.g. with torch.tensor from a list): compute "
           "every u_i·v_j with one matrix product U @ V.T and use ‖u − v‖² = 2 − 2u·v")
    expect(big.calls <= small.calls + 3,
           f"your function runs {small.calls} tensor operations for 4 × 5 pairs but {big.calls} "
           f"for 40 × 50: it loops over pairs or rows. Compute every u_i·v_j at once with one "
           f"matrix product U @ V.T")
    expect(wide.calls <= small.calls + 3,
           f"your function runs {small.calls} tensor operations for 4 × 5 pairs in ℝ¹⁶ but "
           f"{wide.calls} in ℝ⁶⁴: it loops over the coordinates. Compute every u_i·v_j at once "
           f"with one matrix product U @ V.T")
    deep = measure(unit(n, deep_d), unit(m, deep_d))
    expect(deep.total <= 8 * (n * m + n * deep_d + m * deep_d),
           "40 × 50 pairs in ℝ¹²⁸: your function's operations produce far more numbers than the "
           "distances and the inputs hold, as many as one or more per pair and coordinate: it "
           "works on all pairs coordinate by coordinate (u_i − v_j or u_i * v_j, at once or in "
           "pieces). Compute every u_i·v_j with one matrix product U @ V.T and use "
           "‖u − v‖² = 2 − 2u·v")


def _float32_inside(got, inputs_dtype):
    """A hint when a float64 result holds only float32 numbers: computed in float32, cast back
    (the distance of a vector to itself is then √(2·2⁻²⁴)-sized, not a clamp's floor)."""
    if inputs_dtype == torch.float64 and cast_back_from_float32(got):
        return f" ({FLOAT32_CAST_BACK})"
    return ""


def _unit_distance_diagnosis(got, want):
    """The likely mistake behind a wrong distance ``got`` where ``want`` is right."""
    if want == 0 and 0 < got < 1e-3:
        return (" (a vector's distance to itself should be 0: clamp 2 − 2u·v at 0 (clamp_min(0)), "
                "not at a positive floor, before the square root)")
    if 0 < want < 1e-3 and got < want:
        return (" (for near-duplicates 2 − 2u·v is small but accurate in float64: keep it, clamp "
                "only its negative rounding errors at 0, and take the square root)")
    c = 1 - want * want / 2
    for formula, value, why in [
            ("2 − 2c", 2 - 2 * c, "that is the squared distance ‖u − v‖²: take its square root"),
            ("√(2 + 2c)", math.sqrt(max(2 + 2 * c, 0.0)),
             "the cross term of ‖u − v‖² = ‖u‖² + ‖v‖² − 2u·v has a minus sign"),
            ("√(1 − c)", math.sqrt(max(1 - c, 0.0)), "both ‖u‖² and ‖v‖² are 1, so the constant "
                                                     "is 2, and the cross term is −2c"),
            ("1 − c", 1 - c, "expand ‖u − v‖² = ‖u‖² + ‖v‖² − 2u·v with ‖u‖ = ‖v‖ = 1, then take "
                             "the square root")]:
        if abs(got - value) <= 1e-4 * abs(value) + 1e-12:
            return f" (your value is {formula} with c = u·v: {why})"
    return (" (expand ‖u − v‖² = ‖u‖² + ‖v‖² − 2u·v with ‖u‖ = ‖v‖ = 1, then take the square "
            "root)")


@exercise("ch09-mips-to-nn",
          forbid=("mathref.similarity.max_inner_product_search", "torch.topk", "torch.Tensor.topk",
                  "torch.cdist", "mathref.similarity.pairwise_euclidean_distance"),
          because="mips_keys only builds the augmented keys; the searches that test them are the "
                  "check's job")
def check_ch09_mips_to_nn(mips_keys):
    """mips_keys(keys): keys [m, d] → [m, d + 1], each key k_j with the extra coordinate
    √(M² − ‖k_j‖²), M = max_j ‖k_j‖, so that every augmented key has norm M and
    ‖(q, 0) − k̃_j‖² = ‖q‖² + M² − 2 q·k_j: the nearest augmented key is the MIPS winner."""
    expect_callable(mips_keys, "mips_keys(keys)")
    gen = rng(19)
    for m, d, what in [(5, 2, "five keys in the plane"), (200, 16, "200 keys in ℝ¹⁶")]:
        keys = torch.randn(m, d, generator=gen, dtype=torch.float64)
        keys = keys * (0.2 + 3 * torch.rand(m, 1, generator=gen, dtype=torch.float64))
        original = keys.clone()
        raw = mips_keys(keys)
        got = as_tensor(raw, f"{what}: mips_keys(keys)")
        expect(torch.equal(keys, original), f"{what}: mips_keys must not modify its input")
        expect(not _dtype_hint(raw), f"{what}: the augmented keys{_dtype_hint(raw)}")
        expect(tuple(got.shape) == (m, d + 1),
               f"{what}: expected shape {(m, d + 1)} (one extra coordinate), got {tuple(got.shape)}")
        got = got.to(torch.float64)
        _expect_tensor_close(got[:, :d], keys, f"{what}: the first d coordinates should be the keys "
                                               f"themselves (scaling them changes the dot products)")
        M = keys.norm(dim=-1).max()
        norms = got.norm(dim=-1)
        expect(torch.allclose(norms, M.expand_as(norms), rtol=1e-9, atol=1e-12),
               f"{what}: every augmented key should have the same norm M = max‖k‖ = {M.item():.4g}; "
               f"yours range from {norms.min().item():.4g} to {norms.max().item():.4g}")
        q = torch.randn(500, d, generator=gen, dtype=torch.float64)
        q_aug = torch.cat([q, torch.zeros(500, 1, dtype=torch.float64)], dim=-1)
        dist2 = torch.cdist(q_aug, got) ** 2
        _expect_tensor_close(dist2, (q * q).sum(-1, keepdim=True) + M ** 2 - 2 * q @ keys.T,
                             f"{what}: ‖(q, 0) − k̃_j‖² should equal ‖q‖² + M² − 2q·k_j", rtol=1e-8,
                             atol=1e-9)
        nearest, best = dist2.argmin(-1), (q @ keys.T).argmax(-1)
        expect(torch.equal(nearest, best),
               f"{what}: the nearest augmented key differs from the largest dot product for "
               f"{int((nearest != best).sum())} of 500 queries")
    # M² − ‖k‖² of the longest key is 0 only up to rounding: a few units in the last place
    # below 0 in about one key set in five, where an unclamped square root gives nan
    for trial in range(20):
        keys = torch.randn(50, 8, generator=gen, dtype=torch.float64) * 3
        got = as_tensor(mips_keys(keys.clone()), "mips_keys(keys)")
        expect(bool(torch.isfinite(got).all()),
               f"50 keys in ℝ⁸ (key set {trial + 1} of 20): your extra coordinate is nan for the "
               "longest key: M² − ‖k‖² can come out slightly negative by rounding; clamp it at "
               "0 before the square root")
    return "one extra coordinate √(M² − ‖k‖²) puts every key on a sphere: MIPS becomes nearest-neighbour search"


def _soft_lookup(q, K, V, tau):
    return torch.softmax(q @ K.T / tau, dim=-1) @ V


# (the tenth read, M1: under the grader only these names reach the worker, and mathref's
# FlashAttention and the quantizable MultiheadAttention passed: so every attention chapter 13
# refuses, too)
_SOFT_LOOKUP_BUILTINS = ATTENTION_CALLS + (
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.ops.aten.scaled_dot_product_attention",
    "torch.ops.aten._scaled_dot_product_attention_math",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "torch.ops.aten._scaled_dot_product_flash_attention",
    "torch.ops.aten._scaled_dot_product_efficient_attention",
    "torch.ops.aten._scaled_dot_product_cudnn_attention",
    "mathref.similarity.soft_lookup", "mathref.attention.scaled_dot_product_attention",
    "mathref.attention.attention_weights", "mathref.attention.AttentionFunction.forward",
    "torch.nn.attention.flex_attention.flex_attention")

_OVERFLOW = (" (exp(score / τ) overflows for a small τ: subtract the largest score of each row "
             "before exp, as in equation (ch09-soft-argmax-limit), or use torch.softmax)")


_ROW_MAX = (" in some rows: subtract the largest score of each row (s.max(dim=-1, keepdim=True)), "
            "not the largest of the whole batch: for a row whose best score lies far below the "
            "batch's maximum, exp(s − max) is 0 for every key and its weights are 0 / 0")


@exercise("ch09-soft-lookup", forbid=_SOFT_LOOKUP_BUILTINS,
          because="soft_lookup writes the softmax-weighted average itself (torch.softmax is "
                  "allowed)")
def check_ch09_soft_lookup(soft_lookup):
    """soft_lookup(query, keys, values, temperature): softmax(q Kᵀ / τ) V for one query [d]
    or a batch of queries [n, d]."""
    expect_callable(soft_lookup, "soft_lookup(query, keys, values, temperature)")
    gen = rng(11)
    K = torch.randn(7, 4, generator=gen, dtype=torch.float64)
    V = torch.randn(7, 3, generator=gen, dtype=torch.float64)
    q = torch.randn(4, generator=gen, dtype=torch.float64)

    def call(query, keys, values, tau, what):
        """soft_lookup on copies of the inputs, failing if it changed any of them."""
        args = [query.clone(), keys.clone(), values.clone()]
        out = soft_lookup(*args, tau)
        for name, given, original in zip(("query", "keys", "values"), args, (query, keys, values)):
            expect(torch.equal(given, original),
                   f"{what}: your function modified its {name} in place (an in-place operation "
                   f"such as /= or .div_() on an argument); leave the inputs unchanged and build "
                   f"new tensors instead")
        return out

    for tau in (1.0, 0.5, 3.0):
        what = f"output for one query with temperature {tau}"
        _expect_tensor_close(call(q, K, V, tau, what), _soft_lookup(q, K, V, tau), what)
    Q = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    what = "output for a batch of 5 queries (softmax over the keys)"
    _expect_tensor_close(call(Q, K, V, 2.0, what), _soft_lookup(Q, K, V, 2.0), what)
    what = "a tiny temperature (τ = 1e-3) should return the value of the best key"
    expect_tensor_close(call(q, K, V, 1e-3, what), V[(K @ q).argmax()], what,
                        rtol=1e-6, atol=1e-8, nan_hint=_OVERFLOW)
    # τ = 1e-2 with scores near 10 that differ by about 0.01: s/τ ≈ 1000 overflows exp, yet the
    # weights are far from one-hot, so neither the plain formula nor the best key's value is right
    u = q / q.norm()
    K_close = torch.randn(7, 4, generator=gen, dtype=torch.float64)
    K_close = K_close - (K_close @ u)[:, None] * u                       # orthogonal to q ...
    offsets = 0.01 * (2 * torch.rand(7, generator=gen, dtype=torch.float64) - 1)   # in ±0.01
    K_close = K_close + ((10 + offsets) / q.norm())[:, None] * u        # ... plus q·k = 10 + offset
    want = _soft_lookup(q, K_close, V, 1e-2)
    assert torch.softmax(K_close @ q / 1e-2, -1).max() < 0.6      # at most e²/(e² + 6): not one-hot
    what = ("τ = 1e-2 with scores near 10 that differ by about 0.01 (exp(s/τ) overflows, but "
            "the weights are far from one-hot)")
    _expect_tensor_close(call(q, K_close, V, 1e-2, what), want, what, nan_hint=_OVERFLOW)
    # a batch at τ = 1e-3 whose queries have norms 1 to 1000: the best score of each row is far
    # below the batch's largest, so subtracting the maximum of the whole batch (not of each row)
    # sends every exponent of the short queries' rows to −∞: exp gives 0 / 0 = nan there
    Q = torch.randn(4, 4, generator=gen, dtype=torch.float64)
    Q = Q / Q.norm(dim=-1, keepdim=True) * torch.tensor([[1.0], [10.0], [100.0], [1000.0]],
                                                         dtype=torch.float64)
    want = _soft_lookup(Q, K, V, 1e-3)
    assert torch.allclose(want, V[(Q @ K.T).argmax(-1)], rtol=1e-6, atol=1e-8)   # one-hot rows
    what = ("a batch of 4 queries of norms 1, 10, 100 and 1000 at τ = 1e-3 (each row should "
            "return the value of its own best key)")
    expect_tensor_close(call(Q, K, V, 1e-3, what), want, what, rtol=1e-6, atol=1e-8,
                        nan_hint=_ROW_MAX)
    return "a soft argmax over inner products: attention for one query"
