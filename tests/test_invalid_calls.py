"""A table of invalid calls to mathref's public API, by module (issue 16): each must raise a
ValueError or TypeError whose message names the offending argument, never return silently or
fail deep inside PyTorch.

Run as a script to count, per module, the calls that are clear (ValueError/TypeError naming
the argument) out of the total, e.g. against another checkout:
``PYTHONPATH=/path/to/checkout python tests/test_invalid_calls.py``.
"""
import math
import os
import sys
from collections import Counter

import pytest
import torch
from torch import nn

from mathref import attention as A
from mathref import calculus as C
from mathref import deep as DP
from mathref import efficient as E
from mathref import linear_regression as LR
from mathref import similarity as S
from mathref import transformer as TF
from mathref import data as D
from mathref import device as DV
from mathref import gpt as G
from mathref import losses as L
from mathref import nn as N
from mathref import norm as NO
from mathref import optim as O
from mathref import positions as P
from mathref import tokenizers as TK
from mathref import train as TR

NAN, INF = float("nan"), float("inf")


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _param():
    return [nn.Parameter(torch.ones(2))]


def _with_grad():
    p = nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    return [p]


def _gpt():
    torch.manual_seed(0)
    return G.GPT(G.GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16))


def _ids():
    return torch.arange(200) % 11


def _cfg(**kw):
    return TR.TrainConfig(**{**dict(max_steps=2, warmup_steps=1, batch_size=2, block_size=4,
                                    eval_batches=1, progress=False), **kw})


def _train(train_data=None, val_data=None, model=None, **kw):
    model = _gpt() if model is None else model
    train_data = _ids() if train_data is None else train_data
    val_data = _ids() if val_data is None else val_data
    return TR.train(model, train_data, val_data, _cfg(), **kw)


CHAR = TK.CharTokenizer.from_text("abc")
BPE = TK.BPETokenizer()

# (module, what, call, the argument name the message must contain)
CASES = [
    # ---- device
    ("device", "get_device('gpu')", lambda: DV.get_device("gpu"), "gpu"),
    ("device", "get_device('cuda:7')", lambda: DV.get_device("cuda:7"), "cuda:7"),
    ("device", "get_device(3)", lambda: DV.get_device(3), "prefer"),
    ("device", "autocast_dtype('gpu')", lambda: DV.autocast_dtype("gpu"), "device"),
    ("device", "describe_environment('tpu0')", lambda: DV.describe_environment("tpu0"), "device"),
    ("device", "seed_everything(1.5)", lambda: DV.seed_everything(1.5), "seed"),
    # ---- losses
    ("losses", "softmax dim=5", lambda: L.softmax(_x(2, 3), dim=5), "dim"),
    ("losses", "softmax temperature=0", lambda: L.softmax(_x(2, 3), temperature=0), "temperature"),
    ("losses", "softmax temperature=nan", lambda: L.softmax(_x(2, 3), temperature=NAN), "temperature"),
    ("losses", "softmax int tensor", lambda: L.softmax(torch.arange(3)), "x"),
    ("losses", "log_softmax dim=2", lambda: L.log_softmax(_x(2, 3), dim=2), "dim"),
    ("losses", "log_softmax dim='a'", lambda: L.log_softmax(_x(2, 3), dim="a"), "dim"),
    ("losses", "logsumexp dim=-3", lambda: L.logsumexp(_x(2, 3), dim=-3), "dim"),
    ("losses", "logsumexp list", lambda: L.logsumexp([1.0, 2.0]), "x"),
    ("losses", "cross_entropy float targets",
     lambda: L.cross_entropy(_x(4, 3), torch.tensor([0.0, 1.0, 2.0, 1.0])), "targets"),
    ("losses", "cross_entropy target 3 of V=3",
     lambda: L.cross_entropy(_x(2, 3), torch.tensor([0, 3])), "targets"),
    ("losses", "cross_entropy label_smoothing=nan",
     lambda: L.cross_entropy(_x(2, 3), torch.tensor([0, 1]), label_smoothing=NAN), "label_smoothing"),
    ("losses", "cross_entropy label_smoothing=1.5",
     lambda: L.cross_entropy(_x(2, 3), torch.tensor([0, 1]), label_smoothing=1.5), "label_smoothing"),
    ("losses", "cross_entropy ignore_index=0.5",
     lambda: L.cross_entropy(_x(2, 3), torch.tensor([0, 1]), ignore_index=0.5), "ignore_index"),
    ("losses", "cross_entropy reduction='avg'",
     lambda: L.cross_entropy(_x(2, 3), torch.tensor([0, 1]), reduction="avg"), "reduction"),
    ("losses", "bce target 2.0",
     lambda: L.binary_cross_entropy_with_logits(_x(3), torch.tensor([0.0, 1.0, 2.0])), "targets"),
    ("losses", "bce target -1",
     lambda: L.binary_cross_entropy_with_logits(_x(2), torch.tensor([-1.0, 1.0])), "targets"),
    ("losses", "bce target nan",
     lambda: L.binary_cross_entropy_with_logits(_x(2), torch.tensor([NAN, 1.0])), "targets"),
    ("losses", "mse shape mismatch", lambda: L.mse(_x(3), _x(4)), "targets"),
    ("losses", "entropy dim=3", lambda: L.entropy(torch.tensor([0.5, 0.5]), dim=3), "dim"),
    ("losses", "entropy nan entries", lambda: L.entropy(torch.tensor([NAN, 0.5])), "p"),
    ("losses", "kl_divergence dim=4",
     lambda: L.kl_divergence(torch.tensor([0.5, 0.5]), torch.tensor([0.5, 0.5]), dim=4), "dim"),
    ("losses", "kl_divergence negative q",
     lambda: L.kl_divergence(torch.tensor([0.5, 0.5]), torch.tensor([-0.5, 1.5])), "q"),
    ("losses", "perplexity nan", lambda: L.perplexity(NAN), "mean_nll"),
    ("losses", "bits_per_byte n_bytes=0", lambda: L.bits_per_byte(1.0, 0), "n_bytes"),
    ("losses", "ece float labels",
     lambda: L.expected_calibration_error(torch.tensor([[0.3, 0.7]]), torch.tensor([1.0])), "labels"),
    ("losses", "ece n_bins=True",
     lambda: L.expected_calibration_error(torch.tensor([[0.3, 0.7]]), torch.tensor([1]), n_bins=True),
     "n_bins"),
    # ---- nn
    ("nn", "Linear(0, 3)", lambda: N.Linear(0, 3), "in_features"),
    ("nn", "Linear(3, 2.0)", lambda: N.Linear(3, 2.0), "out_features"),
    ("nn", "Linear on wrong width", lambda: N.Linear(3, 2)(_x(2, 4)), "last dimension"),
    ("nn", "Linear on int input", lambda: N.Linear(3, 2)(torch.ones(2, 3, dtype=torch.long)), "x"),
    ("nn", "MLP([4])", lambda: N.MLP([4]), "sizes"),
    ("nn", "MLP activation", lambda: N.MLP([2, 2], activation="swish"), "activation"),
    ("nn", "count_parameters([3, 0])", lambda: N.count_parameters([3, 0]), "widths"),
    ("nn", "get_activation('elu')", lambda: N.get_activation("elu"), "activation"),
    ("nn", "mlp_forward missing W2", lambda: N.mlp_forward(_x(2, 3), {"W1": _x(3, 2), "b1": _x(2)}),
     "params"),
    # ---- norm
    ("norm", "layer_norm eps=-1", lambda: NO.layer_norm(_x(2, 4), 4, eps=-1.0), "eps"),
    ("norm", "layer_norm eps=nan", lambda: NO.layer_norm(_x(2, 4), 4, eps=NAN), "eps"),
    ("norm", "layer_norm shape 5 on width 4", lambda: NO.layer_norm(_x(2, 4), 5), "normalized_shape"),
    ("norm", "layer_norm normalized_shape=0", lambda: NO.layer_norm(_x(2, 4), [0]), "normalized_shape"),
    ("norm", "LayerNorm('4')", lambda: NO.LayerNorm(None), "normalized_shape"),
    ("norm", "rms_norm int x", lambda: NO.rms_norm(torch.ones(2, 4, dtype=torch.long), 4), "x"),
    ("norm", "rms_norm weight shape", lambda: NO.rms_norm(_x(2, 4), 4, weight=torch.ones(3)), "weight"),
    ("norm", "RMSNorm eps='a'", lambda: NO.RMSNorm(4, eps="a"), "eps"),
    ("norm", "BatchNorm1d(3) on (4, 5)", lambda: NO.BatchNorm1d(3)(_x(4, 5)), "x"),
    ("norm", "BatchNorm1d(0)", lambda: NO.BatchNorm1d(0), "num_features"),
    ("norm", "BatchNorm1d momentum=2", lambda: NO.BatchNorm1d(3, momentum=2.0), "momentum"),
    ("norm", "BatchNorm1d momentum=nan", lambda: NO.BatchNorm1d(3, momentum=NAN), "momentum"),
    ("norm", "batch_norm momentum=nan",
     lambda: NO.batch_norm(_x(4, 3), torch.zeros(3), torch.ones(3), momentum=NAN), "momentum"),
    ("norm", "batch_norm 4-D x", lambda: NO.batch_norm(_x(2, 3, 4, 5)), "x of shape"),
    # ---- optim
    ("optim", "SGD lr=nan", lambda: O.SGD(_param(), lr=NAN), "lr"),
    ("optim", "SGD lr=inf", lambda: O.SGD(_param(), lr=INF), "lr"),
    ("optim", "SGD lr=-1", lambda: O.SGD(_param(), lr=-1.0), "lr"),
    ("optim", "SGD momentum=nan", lambda: O.SGD(_param(), momentum=NAN), "momentum"),
    ("optim", "SGD weight_decay=nan", lambda: O.SGD(_param(), weight_decay=NAN), "weight_decay"),
    ("optim", "SGD lr='0.1'", lambda: O.SGD(_param(), lr="0.1"), "lr"),
    ("optim", "RMSProp alpha=nan", lambda: O.RMSProp(_param(), alpha=NAN), "alpha"),
    ("optim", "RMSProp eps=inf", lambda: O.RMSProp(_param(), eps=INF), "eps"),
    ("optim", "Adam betas=(nan, 0.9)", lambda: O.Adam(_param(), betas=(NAN, 0.9)), "betas"),
    ("optim", "Adam betas=(0.9, 1.0)", lambda: O.Adam(_param(), betas=(0.9, 1.0)), "betas"),
    ("optim", "Adam lr=nan", lambda: O.Adam(_param(), lr=NAN), "lr"),
    ("optim", "AdamW weight_decay=nan", lambda: O.AdamW(_param(), weight_decay=NAN), "weight_decay"),
    ("optim", "AdamW eps=nan", lambda: O.AdamW(_param(), eps=NAN), "eps"),
    ("optim", "Muon ns_steps=-1", lambda: O.Muon([nn.Parameter(torch.ones(2, 2))], ns_steps=-1),
     "ns_steps"),
    ("optim", "Muon ns_steps=2.5", lambda: O.Muon([nn.Parameter(torch.ones(2, 2))], ns_steps=2.5),
     "ns_steps"),
    ("optim", "Muon momentum=nan", lambda: O.Muon([nn.Parameter(torch.ones(2, 2))], momentum=NAN),
     "momentum"),
    ("optim", "newton_schulz steps=-1", lambda: O.newton_schulz(_x(3, 3), steps=-1), "steps"),
    ("optim", "newton_schulz int G", lambda: O.newton_schulz(torch.ones(2, 2, dtype=torch.long)), "G"),
    ("optim", "clip_grad_norm_ max_norm=nan", lambda: O.clip_grad_norm_(_with_grad(), NAN), "max_norm"),
    ("optim", "clip_grad_norm_ max_norm=0", lambda: O.clip_grad_norm_(_with_grad(), 0.0), "max_norm"),
    ("optim", "clip_grad_norm_ max_norm='1'", lambda: O.clip_grad_norm_(_with_grad(), "1"), "max_norm"),
    ("optim", "clip_grad_norm_ max_norm=-1 no grads", lambda: O.clip_grad_norm_(_param(), -1.0),
     "max_norm"),
    ("optim", "clip_grad_norm_ eps=nan", lambda: O.clip_grad_norm_(_with_grad(), 1.0, eps=NAN), "eps"),
    ("optim", "warmup_cosine lr_max=nan", lambda: O.warmup_cosine(5, 2, 10, NAN), "lr_max"),
    ("optim", "warmup_cosine lr_min=-1", lambda: O.warmup_cosine(5, 2, 10, 1.0, -1.0), "lr_min"),
    ("optim", "warmup_cosine step=-1", lambda: O.warmup_cosine(-1, 2, 10, 1.0), "step"),
    ("optim", "warmup_cosine warmup_steps=True", lambda: O.warmup_cosine(3, True, 10, 1.0), "warmup_steps"),
    ("optim", "inverse_sqrt lr_max=nan", lambda: O.inverse_sqrt(3, 2, NAN), "lr_max"),
    ("optim", "decay_param_groups weight_decay=nan",
     lambda: O.decay_param_groups(nn.Linear(2, 2), NAN), "weight_decay"),
    ("optim", "decay_param_groups weight_decay=-1",
     lambda: O.decay_param_groups(nn.Linear(2, 2), -1.0), "weight_decay"),
    ("optim", "optimize_path steps=1.5",
     lambda: O.optimize_path(lambda x: x * x, [1.0], lambda p: O.SGD(p, lr=0.1), 1.5), "steps"),
    # ---- tokenizers
    ("tokenizers", "CharTokenizer.decode([1.7])", lambda: CHAR.decode([1.7]), "ids"),
    ("tokenizers", "CharTokenizer.decode([True])", lambda: CHAR.decode([True]), "ids"),
    ("tokenizers", "CharTokenizer.decode('ab')", lambda: CHAR.decode("ab"), "ids"),
    ("tokenizers", "CharTokenizer.decode(float tensor)",
     lambda: CHAR.decode(torch.tensor([0.0, 1.0])), "ids"),
    ("tokenizers", "CharTokenizer.decode([5])", lambda: CHAR.decode([5]), "ids"),
    ("tokenizers", "CharTokenizer(5)", lambda: TK.CharTokenizer(5), "chars"),
    ("tokenizers", "CharTokenizer.encode(b'a')", lambda: CHAR.encode(b"a"), "text"),
    ("tokenizers", "BPE decode([2.5])", lambda: BPE.decode([2.5]), "ids"),
    ("tokenizers", "BPE decode([300])", lambda: BPE.decode([300]), "id"),
    ("tokenizers", "BPE decode(errors='bogus')", lambda: BPE.decode([65], errors="bogus"), "errors"),
    ("tokenizers", "BPE decode_bytes('AB')", lambda: BPE.decode_bytes("AB"), "ids"),
    ("tokenizers", "BPE token_bytes(1.5)", lambda: BPE.token_bytes(1.5), "ids"),
    ("tokenizers", "BPE.train vocab_size=300.0", lambda: TK.BPETokenizer.train("aaaa", 300.0),
     "vocab_size"),
    ("tokenizers", "BPE.train vocab_size=100", lambda: TK.BPETokenizer.train("aaaa", 100), "vocab_size"),
    ("tokenizers", "BPE.train special_tokens='<eos>'",
     lambda: TK.BPETokenizer.train("aaaa", 262, special_tokens="<eos>"), "special_tokens"),
    ("tokenizers", "BPETokenizer(special_tokens=[1])", lambda: TK.BPETokenizer(special_tokens=[1]),
     "special_tokens"),
    ("tokenizers", "BPETokenizer(pattern=3)", lambda: TK.BPETokenizer(pattern=3), "pattern"),
    ("tokenizers", "BPE encode(b'x')", lambda: BPE.encode(b"x"), "text"),
    ("tokenizers", "Embedding(0, 4)", lambda: TK.Embedding(0, 4), "num_embeddings"),
    ("tokenizers", "Embedding(4, -1)", lambda: TK.Embedding(4, -1), "dim"),
    ("tokenizers", "embed float ids", lambda: TK.embed(torch.tensor([0.0]), torch.ones(3, 2)), "ids"),
    # ---- positions
    ("positions", "sinusoidal_positions(-1, 8)", lambda: P.sinusoidal_positions(-1, 8), "T"),
    ("positions", "sinusoidal_positions(4, 0)", lambda: P.sinusoidal_positions(4, 0), "d"),
    ("positions", "sinusoidal_positions(4.5, 8)", lambda: P.sinusoidal_positions(4.5, 8), "T"),
    ("positions", "sinusoidal_positions base=nan", lambda: P.sinusoidal_positions(4, 8, base=NAN), "base"),
    ("positions", "sinusoidal_positions base=1", lambda: P.sinusoidal_positions(4, 8, base=1.0), "base"),
    ("positions", "sinusoidal_positions device='gpu'",
     lambda: P.sinusoidal_positions(4, 8, device="gpu"), "device"),
    ("positions", "rope_frequencies(0)", lambda: P.rope_frequencies(0), "d_head"),
    ("positions", "rope_frequencies(-4)", lambda: P.rope_frequencies(-4), "d_head"),
    ("positions", "rope_frequencies(8.0)", lambda: P.rope_frequencies(8.0), "d_head"),
    ("positions", "rope_frequencies base=0", lambda: P.rope_frequencies(8, base=0.0), "base"),
    ("positions", "rope_cache 2-D positions", lambda: P.rope_cache(torch.zeros(2, 2), 8), "positions"),
    ("positions", "rope_cache d_head=-2", lambda: P.rope_cache(torch.arange(3), -2), "d_head"),
    ("positions", "rope_cache device='gpu'", lambda: P.rope_cache(torch.arange(3), 8, device="gpu"),
     "device"),
    ("positions", "apply_rope int x", lambda: P.apply_rope(torch.ones(3, 4, dtype=torch.long)), "x"),
    ("positions", "apply_rope list", lambda: P.apply_rope([[1.0, 2.0]]), "x"),
    ("positions", "apply_rope base=nan", lambda: P.apply_rope(_x(3, 4), base=NAN), "base"),
    ("positions", "apply_rope layout", lambda: P.apply_rope(_x(3, 4), layout="interleaved"), "layout"),
    ("positions", "alibi_slopes(0)", lambda: P.alibi_slopes(0), "n_heads"),
    ("positions", "alibi_slopes(2.5)", lambda: P.alibi_slopes(2.5), "n_heads"),
    ("positions", "alibi_bias(4, -1)", lambda: P.alibi_bias(4, -1), "T"),
    ("positions", "alibi_bias(4, 5, S=3)", lambda: P.alibi_bias(4, 5, S=3), "S"),
    ("positions", "alibi_bias(0, 4)", lambda: P.alibi_bias(0, 4), "n_heads"),
    ("positions", "alibi_bias(4, 2.5)", lambda: P.alibi_bias(4, 2.5), "T"),
    ("positions", "alibi_bias device='gpu'", lambda: P.alibi_bias(2, 3, device="gpu"), "device"),
    ("positions", "position_interpolation scale=nan", lambda: P.position_interpolation([1, 2], NAN),
     "scale"),
    ("positions", "position_interpolation scale='2'", lambda: P.position_interpolation([1, 2], "2"),
     "scale"),
    ("positions", "ntk_scaled_base scale=nan", lambda: P.ntk_scaled_base(10000.0, NAN, 64), "scale"),
    ("positions", "ntk_scaled_base base=-1", lambda: P.ntk_scaled_base(-1.0, 2.0, 64), "base"),
    ("positions", "ntk_scaled_base d_head=64.0", lambda: P.ntk_scaled_base(10000.0, 2.0, 64.5), "d_head"),
    ("positions", "t5_relative_bucket num_buckets=2.5",
     lambda: P.t5_relative_bucket(torch.arange(3), num_buckets=2.5), "num_buckets"),
    ("positions", "t5_relative_bucket num_buckets=2",
     lambda: P.t5_relative_bucket(torch.arange(3), num_buckets=2), "num_buckets"),
    ("positions", "t5_relative_bucket max_distance=4",
     lambda: P.t5_relative_bucket(torch.arange(3), num_buckets=32, max_distance=4), "max_distance"),
    ("positions", "t5_relative_bucket float r", lambda: P.t5_relative_bucket(torch.tensor([1.0])),
     "relative_position"),
    # ---- attention
    ("attention", "causal_mask(2.5)", lambda: A.causal_mask(2.5), "T"),
    ("attention", "causal_mask(-1)", lambda: A.causal_mask(-1), "T"),
    ("attention", "causal_mask(3, S=2)", lambda: A.causal_mask(3, S=2), "S"),
    ("attention", "causal_mask(3, S=4.0)", lambda: A.causal_mask(3, S=4.0), "S"),
    ("attention", "causal_mask device='gpu'", lambda: A.causal_mask(3, device="gpu"), "device"),
    ("attention", "padding_mask float lengths", lambda: A.padding_mask([1.5, 2.0], 4), "lengths"),
    ("attention", "padding_mask length > S", lambda: A.padding_mask([5], 4), "lengths"),
    ("attention", "padding_mask negative length", lambda: A.padding_mask([-1], 4), "lengths"),
    ("attention", "padding_mask S=-1", lambda: A.padding_mask([1], -1), "S"),
    ("attention", "padding_mask 2-D lengths", lambda: A.padding_mask([[1, 2]], 4), "lengths"),
    ("attention", "to_additive_mask list", lambda: A.to_additive_mask([[True]]), "mask"),
    ("attention", "to_additive_mask int mask", lambda: A.to_additive_mask(torch.ones(2, 2, dtype=torch.long)),
     "mask"),
    ("attention", "repeat_kv n_rep=0", lambda: A.repeat_kv(_x(1, 2, 3, 4), 0), "n_rep"),
    ("attention", "repeat_kv n_rep=1.5", lambda: A.repeat_kv(_x(1, 2, 3, 4), 1.5), "n_rep"),
    ("attention", "attention_weights int q",
     lambda: A.attention_weights(torch.ones(2, 3, dtype=torch.long), _x(2, 3)), "q"),
    ("attention", "attention_weights scale=nan", lambda: A.attention_weights(_x(2, 3), _x(2, 3), scale=NAN),
     "scale"),
    ("attention", "attention_weights scale='1'", lambda: A.attention_weights(_x(2, 3), _x(2, 3), scale="1"),
     "scale"),
    ("attention", "sdpa dropout_p=1.5",
     lambda: A.scaled_dot_product_attention(_x(2, 3), _x(2, 3), _x(2, 3), dropout_p=1.5), "dropout_p"),
    ("attention", "sdpa dropout_p=nan",
     lambda: A.scaled_dot_product_attention(_x(2, 3), _x(2, 3), _x(2, 3), dropout_p=NAN), "dropout_p"),
    ("attention", "sdpa list q", lambda: A.scaled_dot_product_attention([[1.0]], _x(1, 1), _x(1, 1)), "q"),
    ("attention", "sdpa int v",
     lambda: A.scaled_dot_product_attention(_x(2, 3), _x(2, 3), torch.ones(2, 3, dtype=torch.long)), "v"),
    ("attention", "MultiHeadAttention(8, 0)", lambda: A.MultiHeadAttention(8, 0), "n_heads"),
    ("attention", "MultiHeadAttention(8, -2)", lambda: A.MultiHeadAttention(8, -2), "n_heads"),
    ("attention", "MultiHeadAttention(8, 2.0)", lambda: A.MultiHeadAttention(8, 2.0), "n_heads"),
    ("attention", "MultiHeadAttention(0, 2)", lambda: A.MultiHeadAttention(0, 2), "d_model"),
    ("attention", "MultiHeadAttention n_kv_heads=0", lambda: A.MultiHeadAttention(8, 2, n_kv_heads=0),
     "n_kv_heads"),
    ("attention", "MultiHeadAttention dropout=1.5", lambda: A.MultiHeadAttention(8, 2, dropout=1.5),
     "dropout"),
    ("attention", "MultiHeadAttention dropout=nan", lambda: A.MultiHeadAttention(8, 2, dropout=NAN),
     "dropout"),
    ("attention", "MultiHeadAttention on int x",
     lambda: A.MultiHeadAttention(8, 2)(torch.ones(1, 3, 8, dtype=torch.long)), "x"),
    ("attention", "MultiHeadAttention kv width",
     lambda: A.MultiHeadAttention(8, 2)(_x(1, 3, 8), kv=_x(1, 4, 6)), "kv"),
    ("attention", "MultiHeadAttention kv batch",
     lambda: A.MultiHeadAttention(8, 2)(_x(1, 3, 8), kv=_x(2, 4, 8)), "kv"),
    # ---- gpt
    ("gpt", "GPTConfig(n_head=0)", lambda: G.GPTConfig(n_head=0), "n_head"),
    ("gpt", "GPTConfig(n_head=-4)", lambda: G.GPTConfig(n_head=-4), "n_head"),
    ("gpt", "GPTConfig(n_layer=-1)", lambda: G.GPTConfig(n_layer=-1), "n_layer"),
    ("gpt", "GPTConfig(n_layer=0)", lambda: G.GPTConfig(n_layer=0), "n_layer"),
    ("gpt", "GPTConfig(n_layer=2.5)", lambda: G.GPTConfig(n_layer=2.5), "n_layer"),
    ("gpt", "GPTConfig(vocab_size=0)", lambda: G.GPTConfig(vocab_size=0), "vocab_size"),
    ("gpt", "GPTConfig(vocab_size=65.0)", lambda: G.GPTConfig(vocab_size=65.0), "vocab_size"),
    ("gpt", "GPTConfig(block_size=0)", lambda: G.GPTConfig(block_size=0), "block_size"),
    ("gpt", "GPTConfig(d_model=0)", lambda: G.GPTConfig(d_model=0), "d_model"),
    ("gpt", "GPTConfig(d_ff=-1)", lambda: G.GPTConfig(d_ff=-1), "d_ff"),
    ("gpt", "GPTConfig(n_kv_head=0)", lambda: G.GPTConfig(n_kv_head=0), "n_kv_head"),
    ("gpt", "GPTConfig(n_kv_head=3)", lambda: G.GPTConfig(n_kv_head=3), "n_kv_head"),
    ("gpt", "GPTConfig(dropout=1.0)", lambda: G.GPTConfig(dropout=1.0), "dropout"),
    ("gpt", "GPTConfig(dropout=-0.1)", lambda: G.GPTConfig(dropout=-0.1), "dropout"),
    ("gpt", "GPTConfig(dropout=nan)", lambda: G.GPTConfig(dropout=NAN), "dropout"),
    ("gpt", "GPTConfig(rope_base=nan)", lambda: G.GPTConfig(style="modern", rope_base=NAN), "rope_base"),
    ("gpt", "GPTConfig(norm_eps=-1)", lambda: G.GPTConfig(norm_eps=-1.0), "norm_eps"),
    ("gpt", "GPTConfig(activation='swish')", lambda: G.GPTConfig(activation="swish"), "activation"),
    ("gpt", "GPTConfig(bias='yes')", lambda: G.GPTConfig(bias="yes"), "bias"),
    ("gpt", "GPT(dict)", lambda: G.GPT({"vocab_size": 11}), "config"),
    ("gpt", "GPT forward id 11 of 11", lambda: _gpt()(torch.tensor([[1, 11]])), "idx"),
    ("gpt", "GPT forward id -1", lambda: _gpt()(torch.tensor([[-1, 2]])), "idx"),
    ("gpt", "GPT forward float idx", lambda: _gpt()(torch.tensor([[1.0, 2.0]])), "idx"),
    ("gpt", "GPT forward 1-D idx", lambda: _gpt()(torch.tensor([1, 2])), "idx"),
    ("gpt", "GPT forward target 11", lambda: _gpt()(torch.tensor([[1, 2]]), torch.tensor([[1, 11]])),
     "targets"),
    ("gpt", "GPT forward float targets",
     lambda: _gpt()(torch.tensor([[1, 2]]), torch.tensor([[1.0, 2.0]])), "targets"),
    ("gpt", "GPT forward targets shape",
     lambda: _gpt()(torch.tensor([[1, 2]]), torch.tensor([[1, 2, 3]])), "targets"),
    ("gpt", "flops_per_token(T=0)", lambda: _gpt().flops_per_token(T=0), "T"),
    ("gpt", "mfu peak_flops=0", lambda: _gpt().mfu(100.0, 0.0), "peak_flops"),
    ("gpt", "sample_next nan logits", lambda: G.sample_next(torch.tensor([[NAN, 0.0]])), "logits"),
    ("gpt", "sample_next temperature=nan", lambda: G.sample_next(_x(1, 3), temperature=NAN), "temperature"),
    ("gpt", "sample_next temperature=-1", lambda: G.sample_next(_x(1, 3), temperature=-1.0), "temperature"),
    ("gpt", "sample_next top_k=0", lambda: G.sample_next(_x(1, 3), top_k=0), "top_k"),
    ("gpt", "sample_next top_k=2.5", lambda: G.sample_next(_x(1, 3), top_k=2.5), "top_k"),
    ("gpt", "sample_next top_p=nan", lambda: G.sample_next(_x(1, 3), top_p=NAN), "top_p"),
    ("gpt", "sample_next top_p=0", lambda: G.sample_next(_x(1, 3), top_p=0.0), "top_p"),
    ("gpt", "sample_next int logits", lambda: G.sample_next(torch.ones(1, 3, dtype=torch.long)), "logits"),
    ("gpt", "generate max_new_tokens=-1", lambda: G.generate(_gpt(), torch.tensor([[1]]), -1),
     "max_new_tokens"),
    ("gpt", "generate max_new_tokens=2.5", lambda: G.generate(_gpt(), torch.tensor([[1]]), 2.5),
     "max_new_tokens"),
    ("gpt", "sample_next previous without the penalty",
     lambda: G.sample_next(_x(1, 3), previous=torch.tensor([[0]])), "previous"),
    ("gpt", "generate penalty_window without the penalty",
     lambda: G.generate(_gpt(), torch.tensor([[1]]), 2, penalty_window=4), "penalty_window"),
    ("gpt", "generate float idx", lambda: G.generate(_gpt(), torch.tensor([[1.0]]), 2), "idx"),
    ("gpt", "generate id 12", lambda: G.generate(_gpt(), torch.tensor([[12]]), 2), "idx"),
    ("gpt", "sequence_log_prob float idx",
     lambda: G.sequence_log_prob(_gpt(), torch.tensor([[1.0, 2.0, 3.0]]), 1), "idx"),
    ("gpt", "beam_search beam_width=0", lambda: G.beam_search(_gpt(), torch.tensor([[1]]), 2, 0),
     "beam_width"),
    ("gpt", "beam_search beam_width=1.5", lambda: G.beam_search(_gpt(), torch.tensor([[1]]), 2, 1.5),
     "beam_width"),
    # ---- train
    ("train", "TrainConfig(stop_at=-1)", lambda: TR.TrainConfig(stop_at=-1), "stop_at"),
    ("train", "TrainConfig(stop_at=0)", lambda: TR.TrainConfig(stop_at=0), "stop_at"),
    ("train", "TrainConfig(eval_interval=-1)", lambda: TR.TrainConfig(eval_interval=-1), "eval_interval"),
    ("train", "TrainConfig(checkpoint_interval=-1)", lambda: TR.TrainConfig(checkpoint_interval=-1),
     "checkpoint_interval"),
    ("train", "TrainConfig(grad_clip=-1)", lambda: TR.TrainConfig(grad_clip=-1.0), "grad_clip"),
    ("train", "TrainConfig(grad_clip=nan)", lambda: TR.TrainConfig(grad_clip=NAN), "grad_clip"),
    ("train", "TrainConfig(eval_batches=0)", lambda: TR.TrainConfig(eval_batches=0), "eval_batches"),
    ("train", "TrainConfig(eval_batch_size=0)", lambda: TR.TrainConfig(eval_batch_size=0),
     "eval_batch_size"),
    ("train", "TrainConfig(lr=nan)", lambda: TR.TrainConfig(lr=NAN), "lr"),
    ("train", "TrainConfig(lr=0)", lambda: TR.TrainConfig(lr=0.0), "lr"),
    ("train", "TrainConfig(lr=-1e-3)", lambda: TR.TrainConfig(lr=-1e-3), "lr"),
    ("train", "TrainConfig(min_lr=-1)", lambda: TR.TrainConfig(min_lr=-1.0), "min_lr"),
    ("train", "TrainConfig(min_lr > lr)", lambda: TR.TrainConfig(lr=1e-3, min_lr=1e-2), "min_lr"),
    ("train", "TrainConfig(warmup_steps=-1)", lambda: TR.TrainConfig(warmup_steps=-1), "warmup_steps"),
    ("train", "TrainConfig(warmup >= max_steps)", lambda: TR.TrainConfig(max_steps=50), "warmup_steps"),
    ("train", "TrainConfig(decay_steps=0)", lambda: TR.TrainConfig(decay_steps=0), "decay_steps"),
    ("train", "TrainConfig(weight_decay=-0.1)", lambda: TR.TrainConfig(weight_decay=-0.1), "weight_decay"),
    ("train", "TrainConfig(betas=(0.9,))", lambda: TR.TrainConfig(betas=(0.9,)), "betas"),
    ("train", "TrainConfig(betas=(0.9, 1.5))", lambda: TR.TrainConfig(betas=(0.9, 1.5)), "betas"),
    ("train", "TrainConfig(max_steps=10.5)", lambda: TR.TrainConfig(max_steps=10.5), "max_steps"),
    ("train", "TrainConfig(batch_size=0)", lambda: TR.TrainConfig(batch_size=0), "batch_size"),
    ("train", "TrainConfig(block_size='64')", lambda: TR.TrainConfig(block_size="64"), "block_size"),
    ("train", "TrainConfig(seed=1.5)", lambda: TR.TrainConfig(seed=1.5), "seed"),
    ("train", "TrainConfig(optimizer='sgd')", lambda: TR.TrainConfig(optimizer="sgd"), "optimizer"),
    ("train", "TrainConfig(autocast='yes')", lambda: TR.TrainConfig(autocast="yes"), "autocast"),
    ("train", "TrainConfig(checkpoint_path=5)", lambda: TR.TrainConfig(checkpoint_path=5),
     "checkpoint_path"),
    ("train", "train float data", lambda: _train(train_data=_ids().float()), "train_data"),
    ("train", "train id 11 of 11", lambda: _train(train_data=torch.cat([_ids(), torch.tensor([11])])),
     "train_data"),
    ("train", "train val id -1", lambda: _train(val_data=torch.cat([_ids(), torch.tensor([-1])])),
     "val_data"),
    ("train", "train 2-D data", lambda: _train(train_data=_ids().reshape(20, 10)), "train_data"),
    ("train", "train short val_data", lambda: _train(val_data=torch.arange(3)), "val_data"),
    ("train", "train device='gpu'", lambda: _train(device="gpu"), "device"),
    ("train", "train cfg=dict", lambda: TR.train(_gpt(), _ids(), _ids(), {"max_steps": 2}), "cfg"),
    ("train", "lr_at step=-1", lambda: TR.lr_at(-1, _cfg()), "step"),
    ("train", "configure_optimizer lr=nan", lambda: TR.configure_optimizer(_gpt(), NAN, 0.1), "lr"),
    ("train", "configure_optimizer optimizer", lambda: TR.configure_optimizer(_gpt(), 1e-3, 0.1,
                                                                            optimizer="sgd"), "optimizer"),
    # ---- data
    ("data", "get_batch float data", lambda: D.get_batch(torch.arange(100.0), 2, 4), "data"),
    ("data", "get_batch block_size=-1", lambda: D.get_batch(torch.arange(100), 2, -1), "block_size"),
    ("data", "get_batch block_size=0", lambda: D.get_batch(torch.arange(100), 2, 0), "block_size"),
    ("data", "get_batch block_size=2.5", lambda: D.get_batch(torch.arange(100), 2, 2.5), "block_size"),
    ("data", "get_batch batch_size=0", lambda: D.get_batch(torch.arange(100), 0, 4), "batch_size"),
    ("data", "get_batch batch_size=-2", lambda: D.get_batch(torch.arange(100), -2, 4), "batch_size"),
    ("data", "get_batch list data", lambda: D.get_batch(list(range(100)), 2, 4), "data"),
    ("data", "get_batch device='gpu'", lambda: D.get_batch(torch.arange(100), 2, 4, device="gpu"), "device"),
    ("data", "get_batch generator=0", lambda: D.get_batch(torch.arange(100), 2, 4, generator=0), "generator"),
    ("data", "train_val_split val_fraction=nan", lambda: D.train_val_split(torch.arange(10), NAN),
     "val_fraction"),
    ("data", "train_val_split val_fraction=1", lambda: D.train_val_split(torch.arange(10), 1.0),
     "val_fraction"),
    ("data", "train_val_split 2-D", lambda: D.train_val_split(torch.zeros(4, 4), 0.1), "ids"),
    # ---- similarity, calculus, linear_regression, deep, efficient, transformer
    ("similarity", "random_unit_vectors(0, 3)", lambda: S.random_unit_vectors(0, 3), "n"),
    ("similarity", "random_unit_vectors(True, 3)", lambda: S.random_unit_vectors(True, 3), "n"),
    ("similarity", "random_unit_vectors device='gpu'", lambda: S.random_unit_vectors(2, 3, device="gpu"),
     "device"),
    ("similarity", "concentration_experiment dims=[2.7]", lambda: S.concentration_experiment([2.7], 10),
     "dims"),
    ("similarity", "concentration_experiment n=True", lambda: S.concentration_experiment([2], True), "n"),
    ("similarity", "soft_lookup temperature=nan",
     lambda: S.soft_lookup(_x(3), _x(4, 3), _x(4, 2), temperature=NAN), "temperature"),
    ("similarity", "soft_lookup temperature=inf",
     lambda: S.soft_lookup(_x(3), _x(4, 3), _x(4, 2), temperature=INF), "temperature"),
    ("similarity", "max_inner_product_search k=True",
     lambda: S.max_inner_product_search(_x(3), _x(4, 3), k=True), "k"),
    ("calculus", "gradient_descent lr=inf", lambda: C.gradient_descent(lambda x: 2 * x, 1.0, INF, 3), "lr"),
    ("calculus", "gradient_descent lr=nan", lambda: C.gradient_descent(lambda x: 2 * x, 1.0, NAN, 3), "lr"),
    ("calculus", "gradient_descent grad_fn=3", lambda: C.gradient_descent(3, 1.0, 0.1, 3), "grad_fn"),
    ("calculus", "numerical_derivative f=2", lambda: C.numerical_derivative(2, 1.0), "f"),
    ("linear_regression", "fit_gradient_descent lr=inf",
     lambda: LR.fit_gradient_descent(_x(4, 2), _x(4), INF, 3), "lr"),
    ("linear_regression", "minibatch_sgd lr=nan",
     lambda: LR.minibatch_sgd(_x(4, 2), _x(4), NAN, 3, 2), "lr"),
    ("deep", "xavier_ gain=nan", lambda: DP.xavier_(torch.empty(3, 4), gain=NAN), "gain"),
    ("deep", "ResidualBlock(0)", lambda: DP.ResidualBlock(0), "width"),
    ("deep", "ResidualBlock alpha=nan", lambda: DP.ResidualBlock(4, alpha=NAN), "alpha"),
    ("deep", "DeepMLP depth=-1", lambda: DP.DeepMLP(2, 4, -1, 1), "depth"),
    ("deep", "DeepMLP width=2.5", lambda: DP.DeepMLP(2, 2.5, 1, 1), "width"),
    ("efficient", "online_softmax block=0", lambda: E.online_softmax(_x(8), block=0), "block"),
    ("efficient", "online_softmax block=2.5", lambda: E.online_softmax(_x(8), block=2.5), "block"),
    ("efficient", "online_softmax int x", lambda: E.online_softmax(torch.arange(4)), "x"),
    ("efficient", "flash_attention block_q=2.5",
     lambda: E.flash_attention(_x(4, 2), _x(4, 2), _x(4, 2), block_q=2.5), "block_q"),
    ("efficient", "flash_attention block_k=0",
     lambda: E.flash_attention(_x(4, 2), _x(4, 2), _x(4, 2), block_k=0), "block_k"),
    ("efficient", "flash_attention scale=nan",
     lambda: E.flash_attention(_x(4, 2), _x(4, 2), _x(4, 2), scale=NAN), "scale"),
    ("efficient", "linear_attention eps=nan",
     lambda: E.linear_attention(_x(4, 2), _x(4, 2), _x(4, 2), eps=NAN), "eps"),
    ("efficient", "kv_cache_bytes seq_len=nan", lambda: E.kv_cache_bytes(2, 1, 2, NAN, 64), "seq_len"),
    ("transformer", "FeedForward(0)", lambda: TF.FeedForward(0), "d_model"),
    ("transformer", "FeedForward d_ff=-1", lambda: TF.FeedForward(8, d_ff=-1), "d_ff"),
    ("transformer", "FeedForward dropout=2", lambda: TF.FeedForward(8, dropout=2.0), "dropout"),
    ("transformer", "key_padding_mask float ids",
     lambda: TF.key_padding_mask(torch.zeros(2, 3), 0), "ids"),
    ("transformer", "key_padding_mask pad_id=0.5",
     lambda: TF.key_padding_mask(torch.zeros(2, 3, dtype=torch.long), 0.5), "pad_id"),
    ("transformer", "shift_right float targets", lambda: TF.shift_right(torch.zeros(2, 3), 1), "targets"),
    ("transformer", "shift_right bos_id=1.5",
     lambda: TF.shift_right(torch.zeros(2, 3, dtype=torch.long), 1.5), "bos_id"),
    ("transformer", "Seq2SeqTransformer src_vocab=0", lambda: TF.Seq2SeqTransformer(0, 5), "src_vocab"),
    ("transformer", "Seq2SeqTransformer n_heads=0", lambda: TF.Seq2SeqTransformer(5, 5, n_heads=0),
     "n_heads"),
    ("transformer", "Seq2SeqTransformer max_len=-1", lambda: TF.Seq2SeqTransformer(5, 5, max_len=-1),
     "max_len"),
    ("transformer", "greedy_decode max_len=2.5",
     lambda: TF.greedy_decode(TF.Seq2SeqTransformer(5, 5, d_model=8, n_heads=2),
                              torch.ones(1, 3, dtype=torch.long), 1, 2, 2.5), "max_len"),
    ("transformer", "beam_search beam_size=1.5",
     lambda: TF.beam_search(TF.Seq2SeqTransformer(5, 5, d_model=8, n_heads=2),
                            torch.ones(3, dtype=torch.long), 1, 2, 4, beam_size=1.5), "beam_size"),
]


def _classify(call, name):
    """'clear' (ValueError/TypeError naming the argument), 'unclear' (any other error or a
    message without the name) or 'silent' (returned a result)."""
    try:
        call()
    except (ValueError, TypeError) as err:
        return "clear" if name.lower() in str(err).lower() else "unclear"
    except Exception:   # noqa: BLE001 - the point is to see what escapes
        return "unclear"
    return "silent"


@pytest.mark.parametrize("module, what, call, name", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_invalid_call_is_refused_naming_the_argument(module, what, call, name):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    assert name.lower() in str(err.value).lower(), f"{what}: {err.value}"


def test_the_table_is_large_and_covers_every_module():
    assert len(CASES) >= 130
    assert set(c[0] for c in CASES) >= {"device", "losses", "nn", "norm", "optim", "tokenizers",
                                        "positions", "attention", "gpt", "train", "data"}


def test_token_id_error_names_the_id_and_its_position():
    with pytest.raises(ValueError, match=r"idx holds id 11 at position \(0, 2\)"):
        _gpt()(torch.tensor([[1, 2, 11]]))
    with pytest.raises(ValueError, match=r"train_data holds id 99 at position 5"):
        _train(train_data=torch.cat([_ids()[:5], torch.tensor([99]), _ids()]))


def test_device_error_lists_the_available_devices():
    with pytest.raises(ValueError, match="available here: cpu"):
        DV.get_device("gpu")


def main():
    os.environ.setdefault("MATHREF_DATA", "")
    counts, totals, detail = Counter(), Counter(), Counter()
    for module, what, call, name in CASES:
        outcome = _classify(call, name)
        totals[module] += 1
        counts[module] += outcome == "clear"
        detail[outcome] += 1
    import mathref
    print(f"mathref from {os.path.dirname(mathref.__file__)}")
    for module in totals:
        print(f"{module:11s} {counts[module]:3d}/{totals[module]}")
    print(f"{'total':11s} {sum(counts.values()):3d}/{sum(totals.values())}  "
          f"({detail['unclear']} unclear, {detail['silent']} silent)")


if __name__ == "__main__":
    sys.exit(main())
