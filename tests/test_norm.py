"""mathref.norm against PyTorch's own normalization layers (float64) and gradcheck."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mathref import norm

F64 = torch.float64


def randn(*shape, device, seed=0, scale=1.0, shift=0.0):
    gen = torch.Generator().manual_seed(seed)
    return (shift + scale * torch.randn(*shape, generator=gen, dtype=F64)).to(device)


# ---------------------------------------------------------------- LayerNorm
@pytest.mark.parametrize("shape, normalized", [((2, 2, 3), (3,)), ((5, 7), (7,)),
                                               ((3, 4, 2, 5), (2, 5))])
def test_layer_norm_matches_F_layer_norm(float64_device, shape, normalized):
    x = randn(*shape, device=float64_device, scale=3.0, shift=2.0)
    w = randn(*normalized, device=float64_device, seed=1)
    b = randn(*normalized, device=float64_device, seed=2)
    for weight, bias in ((None, None), (w, None), (w, b)):
        want = F.layer_norm(x, normalized, weight, bias, eps=1e-5)
        for manual in (False, True):
            got = norm.layer_norm(x, normalized, weight, bias, eps=1e-5, manual_backward=manual)
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_layer_norm_module_matches_nn_layer_norm_with_gradients(float64_device):
    x = randn(4, 6, 8, device=float64_device)
    ref = nn.LayerNorm(8, dtype=F64, device=float64_device)
    with torch.no_grad():
        ref.weight.copy_(randn(8, device=float64_device, seed=3))
        ref.bias.copy_(randn(8, device=float64_device, seed=4))
    for manual in (False, True):
        ours = norm.LayerNorm(8, manual_backward=manual, dtype=F64, device=float64_device)
        ours.load_state_dict(ref.state_dict())
        upstream = randn(4, 6, 8, device=float64_device, seed=5)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ref.zero_grad()
        (ref(xa) * upstream).sum().backward()
        (ours(xb) * upstream).sum().backward()
        torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(ours.bias.grad, ref.bias.grad, rtol=1e-10, atol=1e-12)


def test_layer_norm_with_two_features_maps_tokens_to_plus_minus_one(float64_device):
    x = torch.tensor([[3.0, 1.0], [-100.0, 50.0], [0.01, 0.02]], dtype=F64, device=float64_device)
    y = norm.layer_norm(x, 2, eps=0.0)
    want = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [-1.0, 1.0]], dtype=F64, device=float64_device)
    torch.testing.assert_close(y, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("weight, bias", [(False, False), (True, False), (True, True)])
def test_layer_norm_function_gradcheck(float64_device, weight, bias):
    x = randn(3, 5, device=float64_device, scale=2.0).requires_grad_()
    w = randn(5, device=float64_device, seed=1).requires_grad_() if weight else None
    b = randn(5, device=float64_device, seed=2).requires_grad_() if bias else None
    assert torch.autograd.gradcheck(lambda x, w, b: norm.LayerNormFunction.apply(x, w, b, 1e-5),
                                    (x, w, b))


# ---------------------------------------------------------------- RMSNorm
@pytest.mark.parametrize("shape, normalized", [((2, 2, 3), (3,)), ((5, 7), (7,)),
                                               ((3, 4, 2, 5), (2, 5))])
def test_rms_norm_matches_F_rms_norm(float64_device, shape, normalized):
    x = randn(*shape, device=float64_device, scale=3.0, shift=1.0)
    w = randn(*normalized, device=float64_device, seed=1)
    for weight in (None, w):
        for eps in (1e-5, 0.5):
            want = F.rms_norm(x, normalized, weight, eps=eps)
            for manual in (False, True):
                got = norm.rms_norm(x, normalized, weight, eps=eps, manual_backward=manual)
                torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_module_matches_nn_rms_norm_with_gradients(float64_device, affine):
    x = randn(4, 6, 8, device=float64_device, shift=0.5)
    ref = nn.RMSNorm(8, eps=1e-5, elementwise_affine=affine, dtype=F64, device=float64_device)
    if affine:
        with torch.no_grad():
            ref.weight.copy_(randn(8, device=float64_device, seed=3))
    for manual in (False, True):
        ours = norm.RMSNorm(8, eps=1e-5, elementwise_affine=affine, manual_backward=manual,
                            dtype=F64, device=float64_device)
        ours.load_state_dict(ref.state_dict())
        upstream = randn(4, 6, 8, device=float64_device, seed=5)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ref.zero_grad()
        (ref(xa) * upstream).sum().backward()
        (ours(xb) * upstream).sum().backward()
        torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-10, atol=1e-12)
        if affine:
            torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("weight", [False, True])
def test_rms_norm_function_gradcheck(float64_device, weight):
    x = randn(3, 5, device=float64_device, scale=2.0).requires_grad_()
    w = randn(5, device=float64_device, seed=1).requires_grad_() if weight else None
    assert torch.autograd.gradcheck(lambda x, w: norm.RMSNormFunction.apply(x, w, 1e-5), (x, w))


# ---------------------------------------------------------------- BatchNorm
@pytest.mark.parametrize("shape", [(16, 5), (6, 5, 4)])
@pytest.mark.parametrize("momentum", [0.1, 0.3, None])
def test_batch_norm_module_tracks_nn_batchnorm1d_over_several_steps(float64_device, shape,
                                                                     momentum):
    ref = nn.BatchNorm1d(5, momentum=momentum, dtype=F64, device=float64_device)
    with torch.no_grad():
        ref.weight.copy_(randn(5, device=float64_device, seed=3))
        ref.bias.copy_(randn(5, device=float64_device, seed=4))
    for manual in (False, True):
        ours = norm.BatchNorm1d(5, momentum=momentum, manual_backward=manual, dtype=F64,
                                device=float64_device)
        ref_copy = copy.deepcopy(ref)
        ours.load_state_dict(ref_copy.state_dict())
        for step in range(5):
            x = randn(*shape, device=float64_device, seed=10 + step, scale=2.0, shift=3.0)
            xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
            upstream = randn(*shape, device=float64_device, seed=20 + step)
            ref_copy.train(), ours.train()
            ya, yb = ref_copy(xa), ours(xb)
            torch.testing.assert_close(yb, ya, rtol=1e-12, atol=1e-12)
            (ya * upstream).sum().backward()
            (yb * upstream).sum().backward()
            torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-10, atol=1e-12)
            torch.testing.assert_close(ours.running_mean, ref_copy.running_mean, rtol=1e-12, atol=1e-14)
            torch.testing.assert_close(ours.running_var, ref_copy.running_var, rtol=1e-12, atol=1e-14)
            assert int(ours.num_batches_tracked) == int(ref_copy.num_batches_tracked) == step + 1
        torch.testing.assert_close(ours.weight.grad, ref_copy.weight.grad, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(ours.bias.grad, ref_copy.bias.grad, rtol=1e-10, atol=1e-12)
        ref_copy.eval(), ours.eval()
        x = randn(1, *shape[1:], device=float64_device, seed=99)   # batch of one is fine in eval
        torch.testing.assert_close(ours(x), ref_copy(x), rtol=1e-12, atol=1e-12)


def test_batch_norm_without_running_stats_matches_pytorch(float64_device):
    ref = nn.BatchNorm1d(3, affine=False, track_running_stats=False, dtype=F64, device=float64_device)
    ours = norm.BatchNorm1d(3, affine=False, track_running_stats=False)
    x = randn(7, 3, device=float64_device, shift=1.0)
    for mode in (True, False):
        ref.train(mode), ours.train(mode)
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-12, atol=1e-12)


def test_batch_norm_running_variance_is_unbiased(float64_device):
    x = randn(4, 2, device=float64_device)
    rm = torch.zeros(2, dtype=F64, device=float64_device)
    rv = torch.zeros(2, dtype=F64, device=float64_device)
    norm.batch_norm(x, rm, rv, training=True, momentum=1.0)
    torch.testing.assert_close(rm, x.mean(0))
    torch.testing.assert_close(rv, x.var(0, unbiased=True))


@pytest.mark.parametrize("shape, weight", [((6, 3), True), ((6, 3), False), ((3, 2, 4), True)])
def test_batch_norm_function_gradcheck(float64_device, shape, weight):
    x = randn(*shape, device=float64_device, scale=2.0).requires_grad_()
    C = shape[1]
    w = randn(C, device=float64_device, seed=1).requires_grad_() if weight else None
    b = randn(C, device=float64_device, seed=2).requires_grad_() if weight else None
    assert torch.autograd.gradcheck(lambda x, w, b: norm.BatchNormFunction.apply(x, w, b, 1e-5),
                                    (x, w, b))


# ---------------------------------------------------------------- GroupNorm
@pytest.mark.parametrize("shape, groups", [((4, 6, 5), 3), ((2, 8, 3, 3), 2), ((3, 4), 4),
                                           ((2, 6, 2, 2, 2), 1)])
def test_group_norm_matches_F_group_norm_with_gradients(float64_device, shape, groups):
    x = randn(*shape, device=float64_device, scale=3.0, shift=1.5).requires_grad_()
    C = shape[1]
    weight = randn(C, device=float64_device, seed=1).requires_grad_()
    bias = randn(C, device=float64_device, seed=2).requires_grad_()
    ours = norm.group_norm(x, groups, weight, bias)
    theirs = F.group_norm(x, groups, weight, bias)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    g = randn(*shape, device=float64_device, seed=3)
    torch.testing.assert_close(torch.autograd.grad(ours, (x, weight, bias), g),
                               torch.autograd.grad(theirs, (x, weight, bias), g),
                               rtol=1e-10, atol=1e-12)


def test_group_norm_with_one_group_is_layer_norm_and_with_c_groups_instance_norm(float64_device):
    x = randn(3, 4, 5, 2, device=float64_device, scale=2.0, shift=-1.0)
    torch.testing.assert_close(norm.group_norm(x, 1), F.layer_norm(x, x.shape[1:]),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(norm.group_norm(x, 4), F.instance_norm(x), rtol=1e-12, atol=1e-12)


def test_group_norm_rejects_bad_groups():
    with pytest.raises(ValueError, match="must divide the 6 channels"):
        norm.group_norm(torch.randn(2, 6, 3), 4)
    with pytest.raises(ValueError, match="positive int"):
        norm.group_norm(torch.randn(2, 6, 3), 0)
    with pytest.raises(ValueError, match=r"\(N, C, \*\)"):
        norm.group_norm(torch.randn(6), 1)
    with pytest.raises(ValueError, match="weight must have shape"):
        norm.group_norm(torch.randn(2, 6, 3), 2, weight=torch.ones(3))


# ---------------------------------------------------------------- errors
def test_bad_input_raises_clear_errors():
    x = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"\(2, 3, 4\).*normalized_shape \(5,\)"):
        norm.layer_norm(x, 5)
    with pytest.raises(ValueError, match="weight must have shape"):
        norm.layer_norm(x, 4, weight=torch.ones(3))
    with pytest.raises(ValueError, match="rms_norm"):
        norm.rms_norm(x, (2, 4))
    with pytest.raises(TypeError, match="floating-point"):
        norm.layer_norm(torch.arange(6).reshape(2, 3), 3)
    with pytest.raises(TypeError, match="torch.Tensor"):
        norm.rms_norm([1.0, 2.0], 2)
    with pytest.raises(ValueError, match="eps"):
        norm.layer_norm(x, 4, eps=-1.0)
    with pytest.raises(ValueError, match=r"\(N, C\) or \(N, C, L\)"):
        norm.batch_norm(torch.randn(5), training=True)
    with pytest.raises(ValueError, match="more than one value"):
        norm.BatchNorm1d(3)(torch.randn(1, 3))
    with pytest.raises(ValueError, match="running_mean must have shape"):
        norm.batch_norm(torch.randn(4, 3), torch.zeros(2), torch.ones(3))
    with pytest.raises(ValueError, match="eval mode"):
        norm.batch_norm(torch.randn(4, 3), training=False)
    with pytest.raises(ValueError, match="num_features"):
        norm.BatchNorm1d(0)


@pytest.mark.parametrize("cls, kwargs", [(norm.LayerNorm, {}), (norm.LayerNorm, {"bias": False}),
                                         (norm.RMSNorm, {}), (norm.RMSNorm, {"elementwise_affine": False})])
def test_fused_fast_path_equals_the_readable_one(float64_device, cls, kwargs):
    torch.manual_seed(0)
    readable = cls(12, **kwargs).double().to(float64_device)
    fused = cls(12, fused=True, **kwargs).double().to(float64_device)
    with torch.no_grad():
        for p in readable.parameters():
            p.uniform_(0.5, 1.5)
    fused.load_state_dict(readable.state_dict())
    x = torch.randn(3, 5, 12, dtype=torch.float64, device=float64_device, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    a, b = readable(x), fused(x2)
    torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)
    g = torch.randn_like(a)
    a.backward(g)
    b.backward(g)
    torch.testing.assert_close(x.grad, x2.grad, atol=1e-12, rtol=1e-12)


def test_fused_rms_norm_takes_bf16_input_with_a_float32_gain():
    """Under bf16 autocast a bf16 activation meets a float32 gain (QK-norm after a bf16 matmul):
    the fused path casts γ to the input's dtype, so the kernel is used (no 'Mismatch dtype'
    warning), the output stays bf16, and it equals the float64 reference to bf16 precision;
    γ's gradient comes back in float32."""
    import warnings
    x = randn(4, 6, 32, device="cpu", shift=0.5)
    w = randn(32, device="cpu", seed=3)
    want = F.rms_norm(x, (32,), w, eps=1e-5)
    module = norm.RMSNorm(32, eps=1e-5, fused=True)
    with torch.no_grad():
        module.weight.copy_(w.float())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = module(x.bfloat16().requires_grad_())
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=2e-2)
    got.float().sum().backward()
    assert module.weight.grad.dtype == torch.float32 and torch.isfinite(module.weight.grad).all()
