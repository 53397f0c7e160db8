"""Typical wrong answers to chapter 15's exercises: each must fail its checker."""
import math

import torch


def kv_without_factor_two(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):
    return n_layers * batch * n_kv_heads * seq_len * d_head * bytes_per_element   # keys only


def kv_without_bytes_per_element(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):
    return 2 * n_layers * batch * n_kv_heads * seq_len * d_head   # elements, not bytes


def scale_floor_halved(scale, good_steps, found_inf, growth_interval):
    if found_inf:
        return scale // 2, 0          # exact only on the powers of two above 1: 1 -> 0, 3 -> 1
    good_steps += 1
    return (scale * 2.0, 0) if good_steps == growth_interval else (scale, good_steps)


def kv_in_bits(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):
    return 2 * n_layers * batch * n_kv_heads * seq_len * d_head * bytes_per_element * 8


def kv_without_batch(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):
    return 2 * n_layers * n_kv_heads * seq_len * d_head * bytes_per_element


def kv_two_bytes_hard_coded(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):
    return 2 * n_layers * batch * n_kv_heads * seq_len * d_head * 2     # fp16 only


def crossover_always_6d(d, d_ff):
    return 6 * d


def crossover_multiply_adds_mixed(d, d_ff):
    return 4 * d + 2 * d_ff      # matrices in FLOPs, attention in multiply-adds


def crossover_ffn_only(d, d_ff):
    return d_ff


def crossover_ffn_as_one_matrix(d, d_ff):
    return 2 * d + d_ff / 2      # 8Td² + 2Td·d_ff = 4T²d


def crossover_two_projections(d, d_ff):
    return d + d_ff              # 4Td² + 4Td·d_ff = 4T²d


def flops_forward_only(n_params, n_layer, d_model, T):
    return 2 * n_params + 4 * n_layer * d_model * T


def flops_without_attention(n_params, n_layer, d_model, T):
    return 6 * n_params


def flops_attention_forward_only(n_params, n_layer, d_model, T):
    return 6 * n_params + 4 * n_layer * d_model * T


def flops_kaplan(n_params, n_layer, d_model, T):
    return 6 * n_params + 6 * n_layer * d_model * T     # Kaplan et al.'s half attention term


def merge_without_rescaling(m1, l1, acc1, m2, l2, acc2):
    return torch.maximum(torch.as_tensor(m1), torch.as_tensor(m2)), l1 + l2, acc1 + acc2


def merge_sign_flipped(m1, l1, acc1, m2, l2, acc2):
    m = torch.maximum(torch.as_tensor(m1), torch.as_tensor(m2))
    a, b = torch.exp(m - m1), torch.exp(m - m2)
    return m, a * l1 + b * l2, a * acc1 + b * acc2


def merge_acc_not_rescaled(m1, l1, acc1, m2, l2, acc2):
    m = torch.maximum(torch.as_tensor(m1), torch.as_tensor(m2))
    a, b = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, a * l1 + b * l2, acc1 + acc2


def merge_in_float32(m1, l1, acc1, m2, l2, acc2):    # right formulas, computed in float32
    m1, l1, acc1, m2, l2, acc2 = (torch.as_tensor(t).float() for t in (m1, l1, acc1, m2, l2, acc2))
    m = torch.maximum(m1, m2)
    a, b = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, a * l1 + b * l2, a * acc1 + b * acc2


def merge_in_float32_cast_back(*args):                # float32 inside, float64 outside
    return tuple(t.double() for t in merge_in_float32(*args))


def merge_relative_to_first(m1, l1, acc1, m2, l2, acc2):   # overflows when m2 ≫ m1
    m = torch.maximum(m1, m2)
    l_rel = l1 + torch.exp(m2 - m1) * l2
    return m, torch.exp(torch.log(l_rel) + m1 - m), (acc1 + torch.exp(m2 - m1) * acc2) * torch.exp(m1 - m)


def merge_relative_to_first_nan(m1, l1, acc1, m2, l2, acc2):   # inf · 0 when m2 ≫ m1
    m = torch.maximum(m1, m2)
    c = torch.exp(m1 - m)
    return m, (l1 + torch.exp(m2 - m1) * l2) * c, (acc1 + torch.exp(m2 - m1) * acc2) * c


def scale_no_reset_on_overflow(scale, good_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, good_steps
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * 2.0, 0
    return scale, good_steps


def scale_grows_one_step_late(scale, good_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, 0
    if good_steps == growth_interval:
        return scale * 2.0, 0
    return scale, good_steps + 1


def scale_never_backs_off(scale, good_steps, found_inf, growth_interval):
    if found_inf:
        return scale, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * 2.0, 0
    return scale, good_steps


def _tile_scores(q, k_tile, scale=True):
    return q @ k_tile.T / (q.shape[-1] ** 0.5 if scale else 1.0)


def tile_acc_not_rescaled(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile)
    m_new = torch.maximum(m, s.max(-1).values)
    p = torch.exp(s - m_new[:, None])
    return m_new, l * torch.exp(m - m_new) + p.sum(-1), acc + p @ v_tile


def tile_without_scale(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile, scale=False)
    m_new = torch.maximum(m, s.max(-1).values)
    c, p = torch.exp(m - m_new), torch.exp(s - m_new[:, None])
    return m_new, l * c + p.sum(-1), acc * c[:, None] + p @ v_tile


def tile_max_of_tile_only(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile)
    m_new = s.max(-1).values                   # forgets the earlier tiles' maximum
    c, p = torch.exp(m - m_new), torch.exp(s - m_new[:, None])
    return m_new, l * c + p.sum(-1), acc * c[:, None] + p @ v_tile


def tile_rescale_sign_flipped(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile)
    m_new = torch.maximum(m, s.max(-1).values)
    c, p = torch.exp(m_new - m).nan_to_num(0.0, posinf=0.0), torch.exp(s - m_new[:, None])
    return m_new, l * c + p.sum(-1), acc * c[:, None] + p @ v_tile


def tile_no_max_subtracted(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile)               # exp(s) without the running max: overflows at 1000
    return torch.maximum(m, s.max(-1).values), l + torch.exp(s).sum(-1), acc + torch.exp(s) @ v_tile


def tile_in_float32(q, k_tile, v_tile, m, l, acc):    # right formulas, computed in float32
    q, k_tile, v_tile, m, l, acc = (t.float() for t in (q, k_tile, v_tile, m, l, acc))
    s = q @ k_tile.T / math.sqrt(q.shape[-1])
    m_new = torch.maximum(m, s.max(dim=-1).values)
    c, p = torch.exp(m - m_new), torch.exp(s - m_new[:, None])
    return m_new, l * c + p.sum(-1), acc * c[:, None] + p @ v_tile


def tile_in_float32_cast_back(q, k_tile, v_tile, m, l, acc):   # float32 inside, float64 outside
    return tuple(t.double() for t in tile_in_float32(q, k_tile, v_tile, m, l, acc))


WRONG_ANSWERS = {
    "ch15-kv-cache-bytes": [kv_without_factor_two, kv_in_bits, kv_without_batch,
                            kv_two_bytes_hard_coded],
    "ch15-crossover-length": [crossover_always_6d, crossover_multiply_adds_mixed,
                              crossover_ffn_only, crossover_ffn_as_one_matrix,
                              crossover_two_projections],
    "ch15-flops-per-token": [flops_forward_only, flops_without_attention,
                             flops_attention_forward_only, flops_kaplan],
    "ch15-merge-softmax-states": [merge_without_rescaling, merge_sign_flipped,
                                  merge_acc_not_rescaled, merge_in_float32,
                                  merge_in_float32_cast_back, merge_relative_to_first,
                                  merge_relative_to_first_nan],
    "ch15-loss-scale-update": [scale_floor_halved, scale_no_reset_on_overflow,
                               scale_grows_one_step_late, scale_never_backs_off],
    "ch15-flash-tile-step": [tile_acc_not_rescaled, tile_without_scale, tile_max_of_tile_only,
                             tile_rescale_sign_flipped, tile_no_max_subtracted, tile_in_float32,
                             tile_in_float32_cast_back],
}


MERGE_NUMPY_ON_FLOATS = (
    "import math\nimport sys\n\nimport numpy as np\nimport torch\n\n"
    "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
    "    z1 = float(m1) + math.log(float(l1)) if float(l1) > 0 else -math.inf\n"
    "    z2 = float(m2) + math.log(float(l2)) if float(l2) > 0 else -math.inf\n"
    "    L = float({logaddexp}(z1, z2))\n"
    "    m = torch.maximum(m1, m2)\n"
    "    l = torch.exp(torch.tensor(L, dtype=torch.float64) - m)\n"
    "    a1 = acc1 / l1 if float(l1) > 0 else acc1 * 0\n"
    "    a2 = acc2 / l2 if float(l2) > 0 else acc2 * 0\n"
    "    return m, l, l * (math.exp(z1 - L) * a1 + math.exp(z2 - L) * a2)\n")

TILE_NUMPY_ON_FLOATS = (
    "import math\nimport sys\n\nimport numpy as np\nimport torch\n\n"
    "def flash_tile_step(q, k_tile, v_tile, m, l, acc):\n"
    "    s = q @ k_tile.T / math.sqrt(q.shape[-1])\n"
    "    m_new = torch.maximum(m, s.max(dim=-1).values)\n"
    "    out_l, out_acc = [], []\n"
    "    for i in range(s.shape[0]):\n"
    "        old = float(m[i]) + math.log(float(l[i])) if float(l[i]) > 0 else -math.inf\n"
    "        lse = old\n"
    "        for j in range(s.shape[1]):\n"
    "            lse = float({logaddexp}(lse, float(s[i, j])))   # folded entry by entry\n"
    "        li = math.exp(lse - float(m_new[i]))\n"
    "        kept = acc[i] / l[i] * math.exp(old - lse) if float(l[i]) > 0 else acc[i] * 0\n"
    "        out_l.append(li)\n"
    "        out_acc.append(li * (kept + torch.exp(s[i] - lse) @ v_tile))\n"
    "    return m_new, torch.tensor(out_l, dtype=s.dtype), torch.stack(out_acc)\n")

# NumPy's log-add-exp kept where the name scan did not look (the fourth read's L1), called only
# where it raises no floating-point flag (a log-add-exp of values 700 apart is their max)
HOLDERS = ("import torch\nH = [np.logaddexp]\nHOLD = lambda a, b: H[0](a, b)\n",
           "import torch\nH = {0: np.logaddexp}\nHOLD = lambda a, b: H[0](a, b)\n",
           "import torch\nimport types\nH = types.SimpleNamespace(f=np.logaddexp)\n"
           "HOLD = lambda a, b: H.f(a, b)\n",
           "import torch\nclass K:\n    f = np.logaddexp\nHOLD = lambda a, b: K.f(a, b)\n",
           "import torch\nHOLD = np.logaddexp.__call__\n",
           # the seventh read's L1: an instance attribute, a callable instance, a deque, a
           # function attribute, an iterator of itertools'
           "import torch\nclass Box:\n    pass\nBOX = Box()\nBOX.f = np.logaddexp\n"
           "HOLD = lambda a, b: BOX.f(a, b)\n",
           "import torch\nclass Box:\n    def __call__(self, a, b):\n        return self.f(a, b)\n"
           "HOLD = Box()\nHOLD.f = np.logaddexp\n",
           "import torch\nimport collections\nH = collections.deque([np.logaddexp])\n"
           "HOLD = lambda a, b: H[0](a, b)\n",
           "import torch\ndef HOLDER():\n    pass\nHOLDER.f = np.logaddexp\n"
           "HOLD = lambda a, b: HOLDER.f(a, b)\n",
           "import torch\nimport itertools\nIT = itertools.repeat(np.logaddexp)\n"
           "HOLD = lambda a, b: next(IT)(a, b)\n")
GUARD = ("def LAE(a, b):\n"
         "    if a == -math.inf:\n        return b\n"
         "    if b == -math.inf:\n        return a\n"
         "    if abs(a - b) > 700:\n        return max(a, b)\n"
         "    return float(HOLD(a, b))\n")
IN_A_CONTEXT = ("import torch\nimport contextvars\n"
                "LAE = lambda a, b: contextvars.Context().run(__import__('nu' + 'mpy').logaddexp, a, b)\n")

# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch15-kv-cache-bytes": [
        "from mathref.efficient import kv_cache_bytes as size\n\n"
        "def kv_cache_size(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):\n"
        "    return size(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element)\n",
        "import mathref.efficient as E\n\n"
        "def kv_cache_size(*args):\n"
        "    return E.kv_cache_bytes(*args)\n",
    ],
    "ch15-crossover-length": [
        "from mathref.efficient import layer_flops\n\n"
        "def crossover_length(d, d_ff):\n"
        "    per_token = layer_flops(1, d, d_ff)      # attention grows with T, the rest does not\n"
        "    return (per_token['projections'] + per_token['ffn']) / per_token['attention']\n",
        "from mathref.transformer import block_flops\n"
        "from mathref.efficient import attention_flops\n\n"
        "def crossover_length(d, d_ff):\n"
        "    matrices = block_flops(d, 1, d_ff) - attention_flops(1, d)\n"
        "    return matrices / attention_flops(1, d)\n",
    ],
    "ch15-flops-per-token": [
        "from types import SimpleNamespace\n"
        "from mathref.gpt import GPT\n\n"
        "def flops_per_token(n_params, n_layer, d_model, T):\n"
        "    model = SimpleNamespace(config=SimpleNamespace(n_layer=n_layer, d_model=d_model),\n"
        "                            matmul_parameters=lambda: n_params)\n"
        "    return GPT.flops_per_token(model, T)\n",
        "from types import SimpleNamespace\n"
        "import mathref.gpt\n\n"
        "def flops_per_token(n_params, n_layer, d_model, T):\n"
        "    model = SimpleNamespace(config=SimpleNamespace(n_layer=n_layer, d_model=d_model),\n"
        "                            matmul_parameters=lambda: n_params)\n"
        "    model.flops_per_token = lambda T: mathref.gpt.GPT.flops_per_token(model, T)\n"
        "    return mathref.gpt.GPT.mfu(model, 1.0, 1.0, T)\n",
    ],
    "ch15-merge-softmax-states": [
        "import torch\n\n"
        "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
        "    lse1, lse2 = m1 + l1.log(), m2 + l2.log()\n"
        "    lse = torch.logaddexp(lse1, lse2)        # log of the merged sum, stable\n"
        "    m = torch.maximum(m1, m2)\n"
        "    l = torch.exp(lse - m)\n"
        "    return m, l, l * (torch.exp(lse1 - lse) * acc1 / l1 + torch.exp(lse2 - lse) * acc2 / l2)\n",
        "import torch\n\n"
        "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
        "    lse = torch.stack([m1 + l1.log(), m2 + l2.log()]).logsumexp(0)\n"
        "    m = torch.maximum(m1, m2)\n"
        "    return m, torch.exp(lse - m), torch.exp(m1 - m) * acc1 + torch.exp(m2 - m) * acc2\n",
        # the independent read's bypass: a log-sum-exp under another name, weights from softmax
        "import torch\n\n"
        "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
        "    z = torch.stack([m1 + l1.log(), m2 + l2.log()])\n"
        "    lse = torch.logcumsumexp(z, 0)[-1]\n"
        "    w = torch.softmax(z, 0)\n"
        "    m = torch.maximum(m1, m2)\n"
        "    l = torch.exp(lse - m)\n"
        "    return m, l, l * (w[0] * acc1 / l1 + w[1] * acc2 / l2)\n",
        # softmax alone: 1 / its largest weight is the merged sum
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
        "    w = F.softmax(torch.stack([m1 + l1.log(), m2 + l2.log()]), 0)\n"
        "    m = torch.maximum(m1, m2)\n"
        "    l = 1 / w.max() * (l1 if m1 >= m2 else l2)\n"
        "    return m, l, l * (w[0] * acc1 / l1 + w[1] * acc2 / l2)\n",
        # the third read's M1: NumPy's log-sum-exp on Python floats (a ufunc call, which the
        # gate's profile hook does not see): refused by what the code names
        MERGE_NUMPY_ON_FLOATS.format(logaddexp="np.logaddexp"),
        # the same reached through a string: refused by NumPy's underflow report (and through
        # sys.modules, a dict that holds numpy, by name)
        MERGE_NUMPY_ON_FLOATS.format(logaddexp="__import__('nu' + 'mpy').logaddexp"),
        MERGE_NUMPY_ON_FLOATS.format(logaddexp="sys.modules['nu' + 'mpy'].logaddexp"),
        # the fourth read's L1: NumPy held in a container, a class attribute or a bound
        # __call__, guarded where it would underflow: refused by what the code names
        *(MERGE_NUMPY_ON_FLOATS.format(logaddexp="LAE").replace("import torch\n", holder + GUARD)
          for holder in HOLDERS),
        # the fourth read's M1: a fresh contextvars.Context, where NumPy's error state is its
        # default and the underflow goes unreported: refused where the code names contextvars
        MERGE_NUMPY_ON_FLOATS.format(logaddexp="LAE").replace("import torch\n", IN_A_CONTEXT),
    ],
    "ch15-loss-scale-update": [
        "from mathref.efficient import DynamicLossScaler\n\n"
        "def update_scale(scale, good_steps, found_inf, growth_interval):\n"
        "    scaler = DynamicLossScaler(scale, growth_interval=growth_interval)\n"
        "    scaler.good_steps, scaler.found_inf = good_steps, found_inf\n"
        "    return scaler.update(), scaler.good_steps\n",
        "import torch\n\n"
        "def update_scale(scale, good_steps, found_inf, growth_interval):\n"
        "    s = torch.tensor([scale])\n"
        "    tracker = torch.tensor([good_steps], dtype=torch.int32)\n"
        "    torch._amp_update_scale_(s, tracker, torch.tensor([float(found_inf)]), 2.0, 0.5,\n"
        "                             growth_interval)\n"
        "    return s.item(), int(tracker)\n",
    ],
    "ch15-flash-tile-step": [
        "import torch\n"
        "from mathref.efficient import flash_attention\n\n"
        "def flash_tile_step(q, k_tile, v_tile, m, l, acc):\n"
        "    out, lse = flash_attention(q, k_tile, v_tile, return_lse=True)   # this tile alone\n"
        "    m_new = torch.maximum(m, (q @ k_tile.T / q.shape[-1] ** 0.5).amax(-1))\n"
        "    l_tile, c = torch.exp(lse - m_new), torch.exp(m - m_new)\n"
        "    return m_new, l * c + l_tile, acc * c[:, None] + l_tile[:, None] * out\n",
        "import torch\n\n"
        "def flash_tile_step(q, k_tile, v_tile, m, l, acc):\n"
        "    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(\n"
        "        q[None, None], k_tile[None, None], v_tile[None, None])[:2]\n"
        "    out, lse = out[0, 0], lse[0, 0]\n"
        "    m_new = torch.maximum(m, (q @ k_tile.T / q.shape[-1] ** 0.5).amax(-1))\n"
        "    l_tile, c = torch.exp(lse - m_new), torch.exp(m - m_new)\n"
        "    return m_new, l * c + l_tile, acc * c[:, None] + l_tile[:, None] * out\n",
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def flash_tile_step(q, k_tile, v_tile, m, l, acc):\n"
        "    s = q @ k_tile.T / q.shape[-1] ** 0.5\n"
        "    out = F.scaled_dot_product_attention(q, k_tile, v_tile)\n"
        "    m_new = torch.maximum(m, s.amax(-1))\n"
        "    l_tile, c = torch.exp(s - m_new[:, None]).sum(-1), torch.exp(m - m_new)\n"
        "    return m_new, l * c + l_tile, acc * c[:, None] + l_tile[:, None] * out\n",
        "import torch\n\n"
        "def flash_tile_step(q, k_tile, v_tile, m, l, acc):\n"
        "    s = q @ k_tile.T / q.shape[-1] ** 0.5\n"
        "    m_new = torch.maximum(m, s.amax(-1))\n"
        "    lse = torch.logaddexp(m + l.log(), s.logsumexp(-1))     # old and new sums, in logs\n"
        "    c = torch.exp(m - m_new)\n"
        "    return m_new, torch.exp(lse - m_new), acc * c[:, None] + torch.exp(s - m_new[:, None]) @ v_tile\n",
        # the independent read's bypass: the old state as one extra pseudo-score, merged in log space
        "import torch\n\n"
        "def flash_tile_step(q, k_tile, v_tile, m, l, acc):\n"
        "    s = q @ k_tile.T / q.shape[-1] ** 0.5\n"
        "    z = torch.cat([(m + l.log())[:, None], s], dim=1)    # old state first, then the tile\n"
        "    lse = torch.logcumsumexp(z, dim=1)[:, -1]\n"
        "    w = torch.softmax(z, dim=1)\n"
        "    m_new = torch.maximum(m, s.amax(-1))\n"
        "    l_new = torch.exp(lse - m_new)\n"
        "    old = torch.where(l[:, None] > 0, acc / l[:, None], torch.zeros_like(acc))\n"
        "    return m_new, l_new, l_new[:, None] * (w[:, :1] * old + w[:, 1:] @ v_tile)\n",
        # the same with log_softmax: z − log_softmax(z) is the log-sum-exp
        "import torch\n\n"
        "def flash_tile_step(q, k_tile, v_tile, m, l, acc):\n"
        "    s = q @ k_tile.T / q.shape[-1] ** 0.5\n"
        "    z = torch.cat([(m + l.log())[:, None], s], dim=1)\n"
        "    w = z.log_softmax(dim=1)                            # z − lse\n"
        "    m_new = torch.maximum(m, s.amax(-1))\n"
        "    l_new = torch.exp((z - w)[:, 1] - m_new)\n"
        "    old = torch.where(l[:, None] > 0, acc / l[:, None], torch.zeros_like(acc))\n"
        "    return m_new, l_new, l_new[:, None] * (w[:, :1].exp() * old + w[:, 1:].exp() @ v_tile)\n",
        # the third read's M1, in the tile: refused by name, and through a string by NumPy's
        # underflow report (the tiles with scores near 1000)
        TILE_NUMPY_ON_FLOATS.format(logaddexp="np.logaddexp"),
        TILE_NUMPY_ON_FLOATS.format(logaddexp="__import__('nu' + 'mpy').logaddexp"),
        TILE_NUMPY_ON_FLOATS.format(logaddexp="getattr(sys.modules['nu' + 'mpy'], 'logaddexp')"),
        *(TILE_NUMPY_ON_FLOATS.format(logaddexp="LAE").replace("import torch\n", holder + GUARD)
          for holder in HOLDERS),
        TILE_NUMPY_ON_FLOATS.format(logaddexp="LAE").replace("import torch\n", IN_A_CONTEXT),
    ],
}

MERGE_TWO_WAY_SOFTMAX = (
    "import torch\n\n"
    "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
    "    if float(l1) == 0:\n"
    "        return m2, l2, acc2\n"
    "    if float(l2) == 0:\n"
    "        return m1, l1, acc1\n"
    "    z1, z2 = m1 + torch.log(l1), m2 + torch.log(l2)\n"
    "    w1, w2 = {w1}, {w2}\n"
    "    m = torch.maximum(m1, m2)\n"
    "    z, w = (z1, w1) if z1 >= z2 else (z2, w2)\n"
    "    l = torch.exp(z - torch.log(w) - m)           # log(l1 e^m1 + l2 e^m2) = z_max − log w_max\n"
    "    return m, l, l * (w1 * acc1 / l1 + w2 * acc2 / l2)\n")

TILE_SCORES_BY = (
    "import math\nimport torch\nimport torch.nn.functional as F\n\n"
    "def flash_tile_step(q, k_tile, v_tile, m, l, acc):\n"
    "    s = {scores} / math.sqrt(q.shape[-1])\n"
    "    m_new = torch.maximum(m, s.amax(dim=-1))\n"
    "    c, p = torch.exp(m - m_new), torch.exp(s - m_new[:, None])\n"
    "    l_new, acc_new = l * c + p.sum(-1), acc * c[:, None] + p @ v_tile\n"
    "    return {back}\n")

# Correct solutions in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch15-kv-cache-bytes": [
        "import math\n\n"
        "def kv_cache_size(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):\n"
        "    per_token = 2 * n_kv_heads * d_head * bytes_per_element     # K and V, one layer\n"
        "    return math.prod([n_layers, batch, seq_len]) * per_token\n",
    ],
    "ch15-crossover-length": [
        "def crossover_length(d, d_ff):\n"
        "    return (8 * d * d + 4 * d * d_ff) / (4 * d)     # 4T²d = 8Td² + 4Td·d_ff, divided by 4Td\n",
    ],
    "ch15-flops-per-token": [
        "def flops_per_token(n_params, n_layer, d_model, T):\n"
        "    return 6 * n_params + 12 * n_layer * d_model * T\n",
    ],
    "ch15-merge-softmax-states": [
        "import torch\n\n"
        "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
        "    if m1 >= m2:\n"
        "        c = torch.exp(m2 - m1)\n"
        "        return m1, l1 + c * l2, acc1 + c * acc2\n"
        "    c = torch.exp(m1 - m2)\n"
        "    return m2, c * l1 + l2, c * acc1 + acc2\n",
        # in Python floats and math, returning a list
        "import math\nimport torch\n\n"
        "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
        "    m = max(float(m1), float(m2))\n"
        "    c1, c2 = math.exp(float(m1) - m), math.exp(float(m2) - m)\n"
        "    return [torch.tensor(m, dtype=torch.float64), c1 * l1 + c2 * l2, c1 * acc1 + c2 * acc2]\n",
        # the two-way softmax σ(z1 − z2) of z_a = m_a + log ℓ_a (the statement allows it), and
        # the same through tanh: σ(x) = (1 + tanh(x/2))/2
        MERGE_TWO_WAY_SOFTMAX.format(w1="torch.sigmoid(z1 - z2)", w2="torch.sigmoid(z2 - z1)"),
        MERGE_TWO_WAY_SOFTMAX.format(w1="(1 + torch.tanh((z1 - z2) / 2)) / 2",
                                     w2="(1 + torch.tanh((z2 - z1) / 2)) / 2"),
        # the empty state tested with NumPy's constant -np.inf, a Python float (the fourth
        # read's L2: it was refused as "called NumPy")
        "import numpy as np\nimport torch\n\n"
        "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
        "    if float(m1) == -np.inf:\n"
        "        return m2, l2, acc2\n"
        "    m = torch.maximum(m1, m2)\n"
        "    c1, c2 = torch.exp(m1 - m), torch.exp(m2 - m)\n"
        "    return m, c1 * l1 + c2 * l2, c1 * acc1 + c2 * acc2\n",
    ],
    "ch15-loss-scale-update": [
        "def update_scale(scale, good_steps, found_inf, growth_interval):\n"
        "    if found_inf:\n"
        "        return scale / 2, 0\n"
        "    grown, good_steps = divmod(good_steps + 1, growth_interval)\n"
        "    return scale * 2 ** grown, good_steps\n",
        "def update_scale(scale, good_steps, found_inf, growth_interval):\n"
        "    if found_inf:\n"
        "        return [scale / 2, 0]                   # a list is a pair too\n"
        "    good_steps += 1\n"
        "    return [scale * 2, 0] if good_steps == growth_interval else [scale, good_steps]\n",
    ],
    "ch15-flash-tile-step": [
        "import torch\n\n"
        "def flash_tile_step(q, k_tile, v_tile, m, l, acc):\n"
        "    s = torch.einsum('qd,kd->qk', q, k_tile) * q.shape[-1] ** -0.5\n"
        "    m_new = torch.max(torch.stack([m, s.amax(dim=-1)]), dim=0).values\n"
        "    p = torch.exp(s - m_new.unsqueeze(-1))\n"
        "    c = torch.exp(m - m_new)\n"
        "    return m_new, c * l + p.sum(-1), c.unsqueeze(-1) * acc + torch.einsum('qk,kd->qd', p, v_tile)\n",
        # q kᵀ as F.linear(q, k) and torch.inner(q, k) (the third read's L1), a list returned
        TILE_SCORES_BY.format(scores="F.linear(q, k_tile)", back="(m_new, l_new, acc_new)"),
        TILE_SCORES_BY.format(scores="torch.inner(q, k_tile)", back="[m_new, l_new, acc_new]"),
    ],
}
