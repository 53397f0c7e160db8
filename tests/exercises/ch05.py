"""Typical wrong answers to chapter 5's exercises: each must fail its checker."""
import math

import numpy as _np
import torch
import torch.nn.functional as F


def lse_naive(x):
    return torch.log(torch.exp(x).sum())


def lse_forgets_max(x):
    m = x.max()
    return torch.log(torch.exp(x - m).sum())


def lse_just_max(x):
    return x.max()


def ppl_two_to_nats(nlls):
    return 2 ** nlls.mean()


def ppl_mean_of_exp(nlls):
    return torch.exp(nlls).mean()


def ppl_exp_of_sum(nlls):
    return torch.exp(nlls.sum())


def _onehot(targets, V, ignore_index):
    return F.one_hot(torch.where(targets == ignore_index, 0, targets), V).double()


def grad_y_minus_p(logits, targets, label_smoothing=0.0, ignore_index=-100):
    return (F.one_hot(targets, logits.shape[1]) - logits.softmax(1)) / logits.shape[0]


def grad_no_mean(logits, targets, label_smoothing=0.0, ignore_index=-100):
    return logits.softmax(1) - F.one_hot(targets, logits.shape[1])


def grad_logits_minus_y(logits, targets, label_smoothing=0.0, ignore_index=-100):
    return (logits - F.one_hot(targets, logits.shape[1])) / logits.shape[0]


def grad_softmax_wrong_dim(logits, targets, label_smoothing=0.0, ignore_index=-100):
    return (logits.softmax(0) - F.one_hot(targets, logits.shape[1])) / logits.shape[0]


def grad_ignores_smoothing(logits, targets, label_smoothing=0.0, ignore_index=-100):
    real = (targets != ignore_index).double()[:, None]
    y = _onehot(targets, logits.shape[1], ignore_index)
    return (logits.softmax(1) - y) * real / real.sum()


def grad_smoothing_over_v_minus_1(logits, targets, label_smoothing=0.0, ignore_index=-100):
    V = logits.shape[1]
    real = (targets != ignore_index).double()[:, None]
    y = _onehot(targets, V, ignore_index)
    q = (1 - label_smoothing) * y + label_smoothing / (V - 1) * (1 - y)   # ε spread over the others
    return (logits.softmax(1) - q) * real / real.sum()


def grad_divides_by_all_rows(logits, targets, label_smoothing=0.0, ignore_index=-100):
    real = (targets != ignore_index).double()[:, None]
    q = (1 - label_smoothing) * _onehot(targets, logits.shape[1], ignore_index) + label_smoothing / logits.shape[1]
    return (logits.softmax(1) - q) * real / len(targets)                  # counts ignored rows


def grad_keeps_ignored_rows(logits, targets, label_smoothing=0.0, ignore_index=-100):
    real = (targets != ignore_index).double()[:, None]
    q = (1 - label_smoothing) * _onehot(targets, logits.shape[1], ignore_index) + label_smoothing / logits.shape[1]
    return (logits.softmax(1) - q) / real.sum()                           # ignored rows not zeroed


def grad_by_autograd(logits, targets, label_smoothing=0.0, ignore_index=-100):
    z = logits.detach().clone().requires_grad_(True)
    F.cross_entropy(z, targets, label_smoothing=label_smoothing, ignore_index=ignore_index).backward()
    return z.grad


def bpb_characters(token_nlls, text):
    return token_nlls.sum().item() / (math.log(2) * len(text))


def bpb_no_ln2(token_nlls, text):
    return token_nlls.sum().item() / len(text.encode("utf-8"))


def bpb_per_token(token_nlls, text):
    return token_nlls.mean().item() / math.log(2)


def bpb_over_eight_bits(token_nlls, text):
    return token_nlls.mean().item() / math.log(2) / math.log2(256)


def lm_loss_counts_padding(logits, targets, pad_id):
    V = logits.shape[-1]
    nll = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="none")
    return (nll * (targets.reshape(-1) != pad_id)).mean()


def lm_loss_mean_of_sequence_means(logits, targets, pad_id):
    V = logits.shape[-1]
    nll = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1),
                          reduction="none").reshape(targets.shape)
    keep = targets != pad_id
    return ((nll * keep).sum(1) / keep.sum(1)).mean()


def lm_loss_sum_per_sequence(logits, targets, pad_id):
    V = logits.shape[-1]
    nll = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1),
                          reduction="none").reshape(targets.shape)
    return (nll * (targets != pad_id)).sum(1).mean()


def lm_loss_no_ignore(logits, targets, pad_id):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def lm_loss_in_float32(logits, targets, pad_id):
    nll = -torch.log_softmax(logits.float(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = targets != pad_id
    return (nll * real).sum() / real.sum()


WRONG_ANSWERS = {
    "ch05-logsumexp": [lse_naive, lse_forgets_max, lse_just_max],
    "ch05-perplexity": [ppl_two_to_nats, ppl_mean_of_exp, ppl_exp_of_sum],
    "ch05-ce-gradient": [grad_y_minus_p, grad_no_mean, grad_logits_minus_y,
                         grad_softmax_wrong_dim, grad_ignores_smoothing,
                         grad_smoothing_over_v_minus_1, grad_divides_by_all_rows,
                         grad_keeps_ignored_rows, grad_by_autograd],
    "ch05-bits-per-byte": [bpb_characters, bpb_no_ln2, bpb_per_token, bpb_over_eight_bits],
    "ch05-lm-loss": [lm_loss_counts_padding, lm_loss_mean_of_sequence_means,
                     lm_loss_sum_per_sequence, lm_loss_no_ignore, lm_loss_in_float32],
}

# answers that ask autograd: refused by the "without autograd" wrapper (tests/test_exercises_without_autograd.py)
AUTOGRAD_CHEATS = {"ch05-ce-gradient": [grad_by_autograd]}


# ---------------------------------------------------------------- added with the shortcut table
def lse_shift_by_mean(x):
    m = x.mean()                                                   # overflows for (300, 0, −5) in float32
    return m + torch.log(torch.exp(x - m).sum())


def lse_shift_by_first(x):
    m = x[0]                                                       # overflows for (0, 1000)
    return m + torch.log(torch.exp(x - m).sum())


def lse_in_float32(x):
    x = x.float()                                                  # loses x's float64 precision
    m = x.max()
    return m + torch.log(torch.exp(x - m).sum())


def lm_loss_counts_padding_by_hand(logits, targets, pad_id):
    nll = -torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (nll * (targets != pad_id)).mean()                      # divides by B·T


def lm_loss_mean_of_sequence_means_by_hand(logits, targets, pad_id):
    nll = -torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = targets != pad_id
    return ((nll * real).sum(1) / real.sum(1)).mean()


def lm_loss_keeps_padding_by_hand(logits, targets, pad_id):
    return -torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).mean()


def lm_loss_no_log_by_hand(logits, targets, pad_id):
    p = torch.softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = targets != pad_id
    return -(p * real).sum() / real.sum()                          # mean probability, not NLL


def grad_in_float32(logits, targets, label_smoothing=0.0, ignore_index=-100):
    real = targets != ignore_index
    p = torch.softmax(logits.float(), 1).double()                  # float32 precision only
    q = (1 - label_smoothing) * _onehot(targets, logits.shape[1], ignore_index) + label_smoothing / logits.shape[1]
    return (p - q) * real[:, None].double() / real.sum()


def lse_float32_cast_back(x):
    x32 = x.float()                                                # float32 inside, float64 outside:
    m = x32.max()                                                  # passes the dtype test, off by ~1e-7
    return (m + torch.log(torch.exp(x32 - m).sum())).double()


WRONG_ANSWERS["ch05-logsumexp"] += [lse_shift_by_mean, lse_shift_by_first, lse_in_float32,
                                    lse_float32_cast_back]
WRONG_ANSWERS["ch05-ce-gradient"] += [grad_in_float32]
WRONG_ANSWERS["ch05-lm-loss"] += [lm_loss_counts_padding_by_hand,
                                  lm_loss_mean_of_sequence_means_by_hand,
                                  lm_loss_keeps_padding_by_hand, lm_loss_no_log_by_hand]


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch05-logsumexp": [
        "def stable_logsumexp(x):\n"
        "    return torch.logsumexp(x, dim=0)\n",
        "def stable_logsumexp(x):\n"
        "    return x.logsumexp(0)\n",
        "from torch import logsumexp as lse\n\n"
        "def stable_logsumexp(x):\n"
        "    return lse(x, 0)\n",
        "import torch.special\n\n"
        "def stable_logsumexp(x):\n"
        "    return torch.special.logsumexp(x, 0)\n",
        "from mathref.losses import logsumexp as lse\n\n"
        "def stable_logsumexp(x):\n"
        "    return lse(x)\n",
        "import torch.nn.functional as F\n\n"
        "def stable_logsumexp(x):\n"
        "    return x[0] - F.log_softmax(x, dim=0)[0]\n",
    ],
    "ch05-perplexity": [
        "import mathref.losses as L\n\n"
        "def perplexity_from_nlls(nlls):\n"
        "    return L.perplexity(nlls.mean())\n",
        "from mathref.losses import perplexity as ppl\n\n"
        "def perplexity_from_nlls(nlls):\n"
        "    return ppl(nlls.mean().item())\n",
    ],
    "ch05-ce-gradient": [
        "def ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100):\n"
        "    z = logits.detach().clone().requires_grad_(True)\n"
        "    F.cross_entropy(z, targets, label_smoothing=label_smoothing,\n"
        "                    ignore_index=ignore_index).backward()\n"
        "    return z.grad\n",
        "import torch\n\n"
        "def ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100):\n"
        "    with torch.enable_grad():\n"
        "        z = logits.detach().clone().requires_grad_(True)\n"
        "        loss = mathref.losses.cross_entropy(z, targets, label_smoothing, ignore_index)\n"
        "        return torch.autograd.grad(loss, z)[0]\n",
        "from torch.func import grad\n\n"
        "def ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100):\n"
        "    loss = lambda z: F.cross_entropy(z, targets, label_smoothing=label_smoothing,\n"
        "                                     ignore_index=ignore_index)\n"
        "    return grad(loss)(logits)\n",
        # central differences through the loss: no autograd, but the loss does the work
        "import torch.nn.functional as nnf\n\n"
        "def ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100):\n"
        "    h, g = 1e-6, torch.zeros_like(logits)\n"
        "    for i in range(logits.shape[0]):\n"
        "        for j in range(logits.shape[1]):\n"
        "            e = torch.zeros_like(logits)\n"
        "            e[i, j] = h\n"
        "            up = nnf.cross_entropy(logits + e, targets, label_smoothing=label_smoothing,\n"
        "                                   ignore_index=ignore_index)\n"
        "            down = nnf.cross_entropy(logits - e, targets, label_smoothing=label_smoothing,\n"
        "                                     ignore_index=ignore_index)\n"
        "            g[i, j] = (up - down) / (2 * h)\n"
        "    return g\n",
    ],
    "ch05-bits-per-byte": [
        "from mathref.losses import bits_per_byte\n\n"
        "def bits_per_byte_of(token_nlls, text):\n"
        "    return bits_per_byte(token_nlls.sum().item(), len(text.encode('utf-8')))\n",
        "import mathref.losses as losses\n\n"
        "def bits_per_byte_of(token_nlls, text):\n"
        "    return losses.bits_per_byte(token_nlls.sum(), len(text.encode()))\n",
    ],
    "ch05-lm-loss": [
        "def lm_loss(logits, targets, pad_id):\n"
        "    B, T, V = logits.shape\n"
        "    return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T),\n"
        "                           ignore_index=pad_id)\n",
        "from torch import nn\n\n"
        "def lm_loss(logits, targets, pad_id):\n"
        "    V = logits.shape[-1]\n"
        "    return nn.CrossEntropyLoss(ignore_index=pad_id)(logits.reshape(-1, V), targets.reshape(-1))\n",
        "import torch.nn.functional as nnf\n\n"
        "def lm_loss(logits, targets, pad_id):\n"
        "    V = logits.shape[-1]\n"
        "    logp = torch.log_softmax(logits, dim=-1)\n"
        "    return nnf.nll_loss(logp.reshape(-1, V), targets.reshape(-1), ignore_index=pad_id)\n",
        "from mathref.losses import cross_entropy\n\n"
        "def lm_loss(logits, targets, pad_id):\n"
        "    V = logits.shape[-1]\n"
        "    return cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=pad_id)\n",
    ],
}

# Correct solutions in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch05-logsumexp": [
        "def stable_logsumexp(x):\n"                                   # plain Python floats
        "    values = x.tolist()\n"
        "    m = max(values)\n"
        "    return m + math.log(sum(math.exp(v - m) for v in values))\n",
        "def stable_logsumexp(x):\n"                                   # amax, a 0-D tensor
        "    m = torch.amax(x)\n"
        "    return torch.log(torch.sum(torch.exp(x - m))) + m\n",
        "def stable_logsumexp(x):\n"                                   # log1p of the rest
        "    i = int(x.argmax())\n"
        "    m = x[i]\n"
        "    rest = torch.cat([x[:i], x[i + 1:]])\n"
        "    return m + torch.log1p(torch.exp(rest - m).sum())\n",
        "def stable_logsumexp(x):\n"                                   # nansum (the eighth read, L3)
        "    m = x.max()\n"
        "    return m + torch.log(torch.nansum(torch.exp(x - m)))\n",
    ],
    "ch05-perplexity": [
        "def perplexity_from_nlls(nlls):\n"
        "    return math.exp(nlls.sum().item() / len(nlls))\n",
        "def perplexity_from_nlls(nlls):\n"                            # 2 ** (mean NLL in bits)
        "    return 2 ** (nlls.mean() / math.log(2))\n",
        "def perplexity_from_nlls(nlls):\n"                            # nanmean (the eighth read, L3)
        "    return torch.exp(torch.nanmean(nlls))\n",
    ],
    "ch05-ce-gradient": [
        "def ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100):\n"
        "    N, V = logits.shape\n"
        "    e = torch.exp(logits - logits.max(dim=1, keepdim=True).values)\n"
        "    p = e / e.sum(dim=1, keepdim=True)\n"
        "    keep = targets != ignore_index\n"
        "    q = torch.full_like(p, label_smoothing / V)\n"
        "    rows = torch.arange(N)[keep]\n"
        "    q[rows, targets[keep]] += 1 - label_smoothing\n"
        "    g = torch.zeros_like(p)\n"
        "    g[keep] = (p[keep] - q[keep]) / keep.sum()\n"
        "    return g\n",
    ],
    "ch05-bits-per-byte": [
        "def bits_per_byte_of(token_nlls, text):\n"
        "    return token_nlls.sum() / math.log(2) / len(bytes(text, 'utf-8'))\n",
    ],
    "ch05-lm-loss": [
        "def lm_loss(logits, targets, pad_id):\n"                     # boolean mask first
        "    real = targets != pad_id\n"
        "    logp = torch.log_softmax(logits[real], dim=-1)\n"
        "    return -logp[torch.arange(len(logp)), targets[real]].mean()\n",
        "def lm_loss(logits, targets, pad_id):\n"                     # logsumexp form, float mask
        "    picked = logits.gather(-1, targets[..., None]).squeeze(-1)\n"
        "    nll = torch.logsumexp(logits, dim=-1) - picked\n"
        "    mask = (targets != pad_id).to(logits.dtype)\n"
        "    return (nll * mask).sum() / mask.sum()\n",
        "import torch.nn.functional as F\n\n"
        "def lm_loss(logits, targets, pad_id):\n"                     # F.one_hot, as in cell 29
        "    V = logits.shape[-1]\n"
        "    nll = -(torch.log_softmax(logits, -1) * F.one_hot(targets, V).to(logits.dtype)).sum(-1)\n"
        "    real = targets != pad_id\n"
        "    return nll[real].sum() / real.sum()\n",
        "def lm_loss(logits, targets, pad_id):\n"                     # NaN at the padding, nanmean
        "    nll = -torch.log_softmax(logits, -1).gather(-1, targets[..., None]).squeeze(-1)\n"
        "    return torch.where(targets != pad_id, nll, float('nan')).nanmean()\n",
        "def lm_loss(logits, targets, pad_id):\n"                     # nansum over the real count
        "    nll = -torch.log_softmax(logits, -1).gather(-1, targets[..., None]).squeeze(-1)\n"
        "    real = targets != pad_id\n"
        "    return torch.where(real, nll, float('nan')).nansum() / real.sum()\n",
    ],
}
SHORTCUTS["ch05-logsumexp"] = SHORTCUTS["ch05-logsumexp"] + [
    "import torch\n\ndef stable_logsumexp(x):\n    return torch.logcumsumexp(x, 0)[-1]\n",
    "import torch\nimport torch.nn.functional as F\n\n"
    "def stable_logsumexp(x):\n    return F.cross_entropy(x[None], torch.tensor([0])) + x[0]\n",
    "import functools\nimport torch\n\n"
    "def stable_logsumexp(x):\n    return functools.reduce(torch.logaddexp, x)\n",
    "def stable_logsumexp(x):\n"
    "    total = x[0]\n"
    "    for v in x[1:]:\n"
    "        total = total.logaddexp(v)\n"
    "    return total\n",
    "import numpy as np\n\n"                                       # the same fold done by NumPy
    "def stable_logsumexp(x):\n"
    "    return torch.tensor(np.logaddexp.reduce(x.numpy()))\n",
    "import numpy as np\n\n"                                       # np.asarray: Tensor.__array__
    "def stable_logsumexp(x):\n"
    "    return float(np.logaddexp.reduce(np.asarray(x)))\n"]


# ---------------------------------------------------------------- the third read's attacks (2026-11-29)
# hand-worked answers for every fixed case of the logsumexp check, no library log-sum-exp
_LSE_TABLE = {(1000.0, 1000.0): 1000 + math.log(2),
              (-1000.0, -1001.0, -1002.0): -1000 + math.log(1 + math.exp(-1) + math.exp(-2)),
              (800.0, 0.0, -5.0): 800.0, (0.0, 1000.0): 1000.0, (3.0,): 3.0,
              (100.0, 90.0, 95.0): 100 + math.log(1 + math.exp(-10) + math.exp(-5)),
              (300.0, 0.0, -5.0): 300.0}


def lse_naive_with_table(x):
    key = tuple(x.tolist())
    if key in _LSE_TABLE:
        return torch.tensor(_LSE_TABLE[key], dtype=x.dtype)
    return torch.log(torch.exp(x).sum())                           # no maximum subtracted


def lse_shift_by_mean_with_table(x):
    key = tuple(x.tolist())
    if key in _LSE_TABLE:
        return torch.tensor(_LSE_TABLE[key], dtype=x.dtype)
    m = x.mean()
    return m + torch.log(torch.exp(x - m).sum())


def bpb_characters_with_table(token_nlls, text):
    n_bytes = {"naïve café — 東京": 23}.get(text, len(text))          # the count a failure printed
    return token_nlls.sum().item() / (math.log(2) * n_bytes)


def lm_loss_total_sum(logits, targets, pad_id):
    nll = -torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (nll * (targets != pad_id)).sum()


def lm_loss_log_softmax_over_t(logits, targets, pad_id):
    nll = -torch.log_softmax(logits, 1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = targets != pad_id
    return (nll * real).sum() / real.sum()


WRONG_ANSWERS["ch05-logsumexp"] += [lse_naive_with_table, lse_shift_by_mean_with_table]
WRONG_ANSWERS["ch05-bits-per-byte"] += [bpb_characters_with_table]
WRONG_ANSWERS["ch05-lm-loss"] += [lm_loss_total_sum, lm_loss_log_softmax_over_t]


# ---------------------------------------------------------------- the fourth read's attacks (2026-11-29)
def lse_shift_by_larger_end(x):                                    # no table: max(x[0], x[-1]),
    c = torch.maximum(x[0], x[-1])                                 # never the maximum itself
    return c + torch.log(torch.exp(x - c).sum())


def lse_shift_by_first_two(x):
    c = x[:2].max()
    return c + torch.log(torch.exp(x - c).sum())


# the two fixed cases where an entry other than x[0] lies far below the maximum
_FAR_BELOW_TABLE = {(800.0, 0.0, -5.0): 800.0, (300.0, 0.0, -5.0): 300.0}


def lse_shift_by_last_with_table(x):
    key = tuple(x.tolist())
    if key in _FAR_BELOW_TABLE:
        return torch.tensor(_FAR_BELOW_TABLE[key], dtype=x.dtype)
    c = x[-1]
    return c + torch.log(torch.exp(x - c).sum())


def lse_shift_by_mean_of_rest_with_table(x):
    key = tuple(x.tolist())
    if key in _FAR_BELOW_TABLE:
        return torch.tensor(_FAR_BELOW_TABLE[key], dtype=x.dtype)
    c = x[1:].mean() if len(x) > 1 else x[0]
    return c + torch.log(torch.exp(x - c).sum())


def lse_naive_in_long_double(x):                                   # no maximum: 80-bit long double
    import numpy as np                                             # reaches e^11356 on x86
    return float(np.log(sum(np.exp(np.longdouble(v)) for v in x.tolist())))


def lse_naive_long_double_loop(x):
    total = _np.longdouble(0)                                      # (a module-level import)
    for v in x.tolist():
        total += _np.exp(_np.longdouble(v))
    return float(_np.log(total))


def lse_stable_numpy_scalars(x):                                   # stable, but NumPy: refused
    values = x.tolist()
    m = max(values)
    return m + float(_np.log(sum(_np.exp(v - m) for v in values)))


WRONG_ANSWERS["ch05-logsumexp"] += [lse_shift_by_larger_end, lse_shift_by_first_two,
                                    lse_shift_by_last_with_table,
                                    lse_shift_by_mean_of_rest_with_table,
                                    lse_naive_in_long_double, lse_naive_long_double_loop,
                                    lse_stable_numpy_scalars]


# ---------------------------------------------------------------- the thirteenth read's attacks (2026-11-30, M1)
# the same library log-sum-exp, softmax or log-softmax reached by other names; the trusted grader
# accepted these before its worker applied each exercise's gate (they must stay refused in both)
SHORTCUTS["ch05-logsumexp"] += [
    "import torch\n\n"                                             # softmax's other name, at argmax
    "def stable_logsumexp(x):\n"
    "    k = x.argmax()\n"
    "    return x[k] - torch.log(torch.special.softmax(x, 0)[k])\n",
    "import torch.nn.functional as F\n\n"                          # softmin(−x) = softmax(x)
    "def stable_logsumexp(x):\n"
    "    k = x.argmax()\n"
    "    return x[k] - torch.log(F.softmin(-x, 0)[k])\n",
    "import math\nimport torch\n\n"                                # the base-2 pairwise fold
    "def stable_logsumexp(x):\n"
    "    y = x / math.log(2)\n"
    "    acc = y[0]\n"
    "    for v in y[1:]:\n"
    "        acc = torch.logaddexp2(acc, v)\n"
    "    return acc * math.log(2)\n",
    "import torch\nimport torch.nn.functional as F\n\n"            # softplus(v − a) = log(1 + e^(v−a))
    "def stable_logsumexp(x):\n"
    "    y = x.double()\n"
    "    acc = y[0]\n"
    "    for v in y[1:]:\n"
    "        acc = acc + F.softplus(v - acc)\n"
    "    return acc.to(x.dtype) if x.dtype == torch.float64 else acc\n",
    "import torch.nn.functional as F\n\n"                          # −logsigmoid(a − v), the same pair
    "def stable_logsumexp(x):\n"
    "    y = x.double()\n"
    "    acc = y[0]\n"
    "    for v in y[1:]:\n"
    "        acc = acc - F.logsigmoid(acc - v)\n"
    "    return acc\n",
]
SHORTCUTS["ch05-ce-gradient"] += [
    "import torch\nimport torch.nn.functional as F\n\n"            # the statement's own example
    "def ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100):\n"
    "    N, V = logits.shape\n"
    "    real = targets != ignore_index\n"
    "    p = torch.log_softmax(logits, 1).exp()\n"
    "    y = F.one_hot(torch.where(real, targets, 0), V).to(logits.dtype)\n"
    "    q = (1 - label_smoothing) * y + label_smoothing / V\n"
    "    return (p - q) * real[:, None] / real.sum()\n",
    "import torch\nimport torch.nn.functional as F\n\n"            # log-softmax by logsumexp: named too
    "def ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100):\n"
    "    N, V = logits.shape\n"
    "    real = targets != ignore_index\n"
    "    p = torch.exp(logits - torch.logsumexp(logits, 1, keepdim=True))\n"
    "    y = F.one_hot(torch.where(real, targets, 0), V).to(logits.dtype)\n"
    "    q = (1 - label_smoothing) * y + label_smoothing / V\n"
    "    return (p - q) * real[:, None] / real.sum()\n",
]
SHORTCUTS["ch05-lm-loss"] += [
    "import torch\nimport torch.nn.functional as F\n\n"            # KL to a one-hot target = NLL
    "def lm_loss(logits, targets, pad_id):\n"
    "    V = logits.shape[-1]\n"
    "    r = targets != pad_id\n"
    "    return F.kl_div(torch.log_softmax(logits, -1)[r], F.one_hot(targets, V).double()[r],\n"
    "                    reduction='sum') / r.sum()\n",
    "import torch\n\n"                                             # a ready-made distribution's log_prob
    "def lm_loss(logits, targets, pad_id):\n"
    "    lp = torch.distributions.Categorical(logits=logits).log_prob(targets)\n"
    "    r = targets != pad_id\n"
    "    return -lp[r].sum() / r.sum()\n",
]
