"""Shortcuts by class (issue 34): each is a solution cell, written as a student would, that
reaches what its exercise refuses by a path a list of names misses. Every one must be refused
by the gate on what runs (mathref.checks.gate); GATE_RIGHT holds correct answers that the gate
must let through. tests/test_exercises_gate.py runs both; its summary counts per chapter."""

WRONG_ANSWERS = {}    # (this module adds no wrong answers to tests/test_exercises.py)

_MHA_ARGS = ("        q, k, k, q.shape[-1], H, w_in, None, None, None, False, 0.0, w_o, None,\n"
             "        training=False, key_padding_mask=kpm, need_weights=True,\n"
             "        average_attn_weights=False)\n")
_MHA_SOURCE = ("def _mha(q: torch.Tensor, k: torch.Tensor, w_in: torch.Tensor, w_o: torch.Tensor,\n"
               "         H: int, kpm: torch.Tensor):\n"
               "    return torch.nn.functional.multi_head_attention_forward(\n" + _MHA_ARGS)
_MHA_MODULE_SOURCE = ("class _MHA(torch.nn.Module):\n"
                      "    def forward(self, q: torch.Tensor, k: torch.Tensor, w_in: torch.Tensor,\n"
                      "                w_o: torch.Tensor, H: int, kpm: torch.Tensor):\n"
                      "        return torch.nn.functional.multi_head_attention_forward(\n"
                      + _MHA_ARGS.replace("\n        ", "\n            "))
_CROSS_ATTENTION_BY_MHA = (
    "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
    "    out, w = _mha(y.transpose(0, 1), memory.transpose(0, 1),\n"
    "                  torch.cat([W_q.T, W_k.T, W_v.T]), W_o.T, n_heads, ~src_allowed)\n"
    "    return out.transpose(0, 1), w\n")


def _as_cell(source, name):
    """A solution cell's top level that defines ``source`` the way a notebook cell does, its text
    kept in linecache (where TorchScript's compiler reads it)."""
    return ("import linecache, torch\n\n"
            f"_src = {source!r}\n"
            f"linecache.cache[{name!r}] = (len(_src), None, _src.splitlines(True), {name!r})\n"
            f"exec(compile(_src, {name!r}, 'exec'))\n")


GATE_SHORTCUTS = {
    # 1. answers that are not Python functions: builtins, op packets, callable objects, classes
    "not a function": [
        ("ch11-attention", "import torch.nn.functional as F\n"
                           "attention = F.scaled_dot_product_attention\n"),
        ("ch08-layer-norm", "import torch\n"
                            "layer_norm_rows = torch.ops.aten.layer_norm\n"),
        ("ch11-attention", "import torch\n\n"
                           "class Attention:\n"
                           "    def __call__(self, q, k, v, mask=None):\n"
                           "        return torch.nn.functional.scaled_dot_product_attention(\n"
                           "            q, k, v, attn_mask=mask)\n\n"
                           "attention = Attention()\n"),
        # a class that claims to be the grader's handle (chapter 10's second read: every rule
        # was skipped for it)
        ("ch11-attention", "import torch.nn.functional as F\n\n"
                           "class Remote:\n"
                           "    _mathref_remote = True\n"
                           "    def __call__(self, q, k, v, mask=None):\n"
                           "        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n\n"
                           "attention = Remote()\n"),
        ("ch05-logsumexp", "import functools, torch\n"
                           "stable_logsumexp = functools.partial(torch.logsumexp, dim=0)\n"),
        ("ch08-rms-norm", "import torch\n\n"
                          "class Norm:\n"
                          "    def run(self, x, gamma, eps=1e-5):\n"
                          "        return torch.rms_norm(x, (x.shape[-1],), gamma, eps)\n\n"
                          "rms_norm_rows = Norm().run\n"),
    ],
    # results whose code runs when the checker reads them, after the call (chapter 5's read,
    # L1): the check turns them into plain numbers and lists under the call's rules
    "read after the call": [
        ("ch05-logsumexp", "import torch\n\n"
                           "class Later(float):\n"
                           "    def __new__(cls, x):\n"
                           "        self = float.__new__(cls, 0.0)\n"
                           "        self.x = x\n"
                           "        return self\n"
                           "    def __float__(self):\n"
                           "        return float(torch.logsumexp(self.x, 0))\n\n"
                           "def stable_logsumexp(x):\n"
                           "    return Later(x)\n"),
        ("ch05-lm-loss", "import torch.nn.functional as F\n\n"
                         "class Later:\n"
                         "    def __init__(self, *args):\n"
                         "        self.args = args\n"
                         "    def __float__(self):\n"
                         "        logits, targets, pad_id = self.args\n"
                         "        return float(F.cross_entropy(logits.flatten(0, -2), "
                         "targets.flatten(), ignore_index=pad_id))\n\n"
                         "def lm_loss(logits, targets, pad_id):\n"
                         "    return Later(logits, targets, pad_id)\n"),
        # the same, its class claiming to be NumPy's (the delta read of chapter 5, L1)
        ("ch05-logsumexp", "import torch\n\n"
                           "class Later:\n"
                           "    __module__ = 'numpy'\n"
                           "    def __init__(self, x):\n"
                           "        self.x = x\n"
                           "    def __float__(self):\n"
                           "        return float(torch.logsumexp(self.x, 0))\n\n"
                           "def stable_logsumexp(x):\n"
                           "    return Later(x)\n"),
        # iterables that are not generators (chapter 1's read, M1): a map, an object whose
        # __iter__ runs what the exercise refuses
        ("ch01-gradient-descent-loop", "from mathref.calculus import gradient_descent\n\n"
                                       "def gradient_descent_1d(df, x0, lr, steps):\n"
                                       "    return map(lambda k: float(gradient_descent(\n"
                                       "        df, x0, lr, steps)[k]), range(steps + 1))\n"),
        ("ch01-gradient-descent-loop", "import torch\n\n"
                                       "class Path:\n"
                                       "    def __init__(self, *args):\n"
                                       "        self.args = args\n"
                                       "    def __iter__(self):\n"
                                       "        df, x0, lr, steps = self.args\n"
                                       "        x = torch.tensor(float(x0), requires_grad=True)\n"
                                       "        opt = torch.optim.SGD([x], lr=lr)\n"
                                       "        yield x0\n"
                                       "        for _ in range(steps):\n"
                                       "            x.grad = torch.tensor(float(df(x.item())))\n"
                                       "            opt.step()\n"
                                       "            yield x.item()\n\n"
                                       "def gradient_descent_1d(df, x0, lr, steps):\n"
                                       "    return Path(df, x0, lr, steps)\n"),
        ("ch04-topological-order", "def topo_sort(root):\n"
                                   "    from mathref.autograd import topological_order\n"
                                   "    yield from topological_order(root)\n"),
    ],
    # 2. other names for the same kernel: private twins, composites, _refs/_decomp, jit.script,
    # a backward kernel of a related function
    "another name": [
        ("ch08-rms-norm", "import torch\n\n"
                          "def rms_norm_rows(x, gamma, eps=1e-5):\n"
                          "    return torch.ops.aten.rms_norm(x, [x.shape[-1]], gamma, eps)\n"),
        ("ch11-attention", "import torch._refs as R\n\n"
                           "def attention(q, k, v, mask=None):\n"
                           "    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n"
                           "    return R.softmax(s if mask is None else s + mask, -1) @ v\n"),
        ("ch05-logsumexp", "import torch._refs as R\n\n"
                           "def stable_logsumexp(x):\n"
                           "    return R.logsumexp(x, 0)\n"),
        ("ch03-sigmoid-derivative", "import torch\n\n"
                                    "def sigmoid_derivative(z):\n"
                                    "    return torch.ops.aten.tanh_backward(\n"
                                    "        torch.ones_like(z), torch.tanh(z / 2)) / 4 + 0 * z\n"),
        ("ch08-layer-norm", "import torch\n\n"
                            "_traced = {}\n\n"
                            "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
                            "    key = (tuple(x.shape), x.dtype, eps)\n"
                            "    if key not in _traced:\n"
                            "        _traced[key] = torch.jit.trace(lambda a, g, b: torch.layer_norm(\n"
                            "            a, [a.shape[-1]], g, b, eps), (x, gamma, beta))\n"
                            "    return _traced[key](x, gamma, beta)\n"),
        ("ch05-logsumexp", "import torch\n\n"
                           "def stable_logsumexp(x):\n"
                           "    return torch.special.logsumexp(x, 0)\n"),
        ("ch09-soft-lookup", "import torch\n\n"
                             "def soft_lookup(query, keys, values, temperature):\n"
                             "    return torch.ops.aten._scaled_dot_product_attention_math(\n"
                             "        query[None, None] / temperature * keys.shape[-1] ** 0.5,\n"
                             "        keys[None], values[None])[0][0]\n"),
    ],
    # compiled TorchScript (chapter 13's read, M1): F.multi_head_attention_forward decomposes
    # into elementary operators, so its aten operators alone pass; @torch.jit.script works on a
    # notebook cell's own function, whose source IPython keeps in linecache as these forms do
    "TorchScript": [
        ("ch13-cross-attention", "import torch\n\n"
                                 f"_unit = torch.jit.CompilationUnit({_MHA_SOURCE!r})\n"
                                 "_mha = _unit._mha\n\n" + _CROSS_ATTENTION_BY_MHA),
        ("ch13-cross-attention", _as_cell(_MHA_SOURCE, "<cell 7>")
         + "_mha = torch.jit.script(_mha)\n\n" + _CROSS_ATTENTION_BY_MHA),
        ("ch13-cross-attention", _as_cell(_MHA_MODULE_SOURCE, "<cell 8>")
         + "_mha = torch.jit.script(_MHA())\n\n" + _CROSS_ATTENTION_BY_MHA),
        # chapter 13's fourth read, M1: a wrapper frame of torch's or the standard library's
        # between the answer and the compiled function, or is_exporting replaced around the call
        ("ch13-cross-attention", "import torch\n\n"
                                 f"_unit = torch.jit.CompilationUnit({_MHA_SOURCE!r})\n"
                                 "_mha = torch.no_grad()(_unit._mha)\n\n"
                                 + _CROSS_ATTENTION_BY_MHA),
        ("ch13-cross-attention", "import functools, torch\n\n"
                                 f"_unit = torch.jit.CompilationUnit({_MHA_SOURCE!r})\n"
                                 "_mha = functools.singledispatch(_unit._mha)\n\n"
                                 + _CROSS_ATTENTION_BY_MHA),
        ("ch13-cross-attention", "import torch\n\n"
                                 f"_unit = torch.jit.CompilationUnit({_MHA_SOURCE!r})\n\n"
                                 "def _mha(*args):\n"
                                 "    saved = torch.compiler.is_exporting\n"
                                 "    torch.compiler.is_exporting = lambda: False\n"
                                 "    try:\n"
                                 "        return _unit._mha(*args)\n"
                                 "    finally:\n"
                                 "        torch.compiler.is_exporting = saved\n\n"
                                 + _CROSS_ATTENTION_BY_MHA),
    ],
    # 3. threads: the modes hold in the calling thread only
    "threads": [
        ("ch08-layer-norm", "import threading, torch\n\n"
                            "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
                            "    out = []\n"
                            "    t = threading.Thread(target=lambda: out.append(torch.layer_norm(\n"
                            "        x, (x.shape[-1],), gamma, beta, eps)))\n"
                            "    t.start(); t.join()\n"
                            "    return out[0]\n"),
        ("ch08-layer-norm", "import concurrent.futures as cf, torch\n\n"
                            "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
                            "    with cf.ThreadPoolExecutor(1) as pool:\n"
                            "        return pool.submit(torch.layer_norm, x, (x.shape[-1],),\n"
                            "                           gamma, beta, eps).result()\n"),
        ("ch11-attention", "import _thread, time, torch\n\n"
                           "def attention(q, k, v, mask=None):\n"
                           "    out = []\n"
                           "    _thread.start_new_thread(lambda: out.append(\n"
                           "        torch.nn.functional.scaled_dot_product_attention(q, k, v, mask)), ())\n"
                           "    while not out:\n"
                           "        time.sleep(0.001)\n"
                           "    return out[0]\n"),
    ],
    # 4. torch.overrides.handle_torch_function and the mode switches
    "mode switches": [
        ("ch08-rms-norm", "import torch\nfrom torch.overrides import handle_torch_function\n\n"
                          "def rms_norm_rows(x, gamma, eps=1e-5):\n"
                          "    return handle_torch_function(torch.rms_norm, (x,), x,\n"
                          "                                 (x.shape[-1],), gamma, eps)\n"),
        ("ch11-attention", "import torch\nfrom torch.overrides import _pop_mode_temporarily\n\n"
                           "def attention(q, k, v, mask=None):\n"
                           "    with _pop_mode_temporarily():\n"
                           "        return torch.nn.functional.scaled_dot_product_attention(\n"
                           "            q, k, v, mask)\n"),
        ("ch08-rms-norm", "import torch\nfrom torch.utils._python_dispatch import "
                          "_disable_current_modes\n\n"
                          "def rms_norm_rows(x, gamma, eps=1e-5):\n"
                          "    with _disable_current_modes():\n"
                          "        return torch.rms_norm(x, (x.shape[-1],), gamma, eps)\n"),
        # both modes off, PyTorch's fused AdamW (chapter 16's seventh read, L6: the switch is a
        # @contextmanager, entered from contextlib's frame, and was not refused)
        ("ch16-adamw", "import torch\nfrom torch.utils._python_dispatch import "
                       "_disable_current_modes\n\n"
                       "def adamw_update(p, g, m, v, t, lr, betas, eps, weight_decay):\n"
                       "    p, m, v = p.clone(), m.clone(), v.clone()\n"
                       "    with _disable_current_modes(), torch._C.DisableTorchFunction():\n"
                       "        torch._fused_adamw_([p], [g], [m], [v], [], [torch.tensor(float(t))],\n"
                       "                            lr=lr, beta1=betas[0], beta2=betas[1],\n"
                       "                            weight_decay=weight_decay, eps=eps,\n"
                       "                            amsgrad=False, maximize=False)\n"
                       "    return p, m, v\n"),
    ],
    # 5. autograd where the statement says "without autograd"
    "autograd": [
        ("ch03-output-delta", "import torch\n\n"
                              "def output_delta(Y_hat, Y):\n"
                              "    with torch.inference_mode(False), torch.enable_grad():\n"
                              "        z = Y_hat.clone().requires_grad_()\n"
                              "        ((z - Y) ** 2).sum(1).mean().backward()\n"
                              "        return z.grad\n"),
        ("ch03-output-delta", "import torch\nfrom torch.autograd import Variable\n\n"
                              "def output_delta(Y_hat, Y):\n"
                              "    with torch.inference_mode(False), torch.enable_grad():\n"
                              "        z = Y_hat.clone().requires_grad_()\n"
                              "        loss = ((z - Y) ** 2).sum(1).mean()\n"
                              "        return Variable._execution_engine.run_backward(\n"
                              "            (loss,), (torch.ones_like(loss),), False, False, (z,),\n"
                              "            False)[0]\n"),
        ("ch04-silu-backward", "import torch\nimport torch.autograd.forward_ad as fwAD\n\n"
                               "def silu_backward(x, grad_y):\n"
                               "    with torch.inference_mode(False), fwAD.dual_level():\n"
                               "        d = torch._make_dual(x.clone(), torch.ones_like(x), 0)\n"
                               "        t = torch._unpack_dual(torch.nn.functional.silu(d), 0)[1]\n"
                               "    return grad_y * t\n"),
        ("ch04-silu-backward", "import torch\nfrom mathref.autograd import Value\n\n"
                               "def silu_backward(x, grad_y):\n"
                               "    out = []\n"
                               "    for a in x.flatten().tolist():\n"
                               "        v = Value(a)\n"
                               "        y = v * v.sigmoid()\n"
                               "        y.grad = 1.0\n"
                               "        for node in (y, *y._prev):\n"
                               "            node._backward()\n"
                               "        out.append(v.grad)\n"
                               "    return grad_y * torch.tensor(out, dtype=x.dtype).view_as(x)\n"),
    ],
    # 6. other libraries
    "other libraries": [
        # a NumPy ufunc handed tensors, or arrays from .numpy(): no Python code of NumPy's runs
        # (chapter 15's second read: np.logaddexp merged two softmax states unseen)
        ("ch05-logsumexp", "import numpy as np, torch\n\n"
                           "def stable_logsumexp(x):\n"
                           "    out = x[0]\n"
                           "    for v in x[1:]:\n"
                           "        out = torch.as_tensor(np.logaddexp(out, v), dtype=x.dtype)\n"
                           "    return out\n"),
        ("ch05-logsumexp", "import numpy as np, torch\n\n"
                           "def stable_logsumexp(x):\n"
                           "    a = x.numpy()\n"
                           "    out = a[0]\n"
                           "    for v in a[1:]:\n"
                           "        out = np.logaddexp(out, v)\n"
                           "    return torch.as_tensor(out, dtype=x.dtype)\n"),
        ("ch05-logsumexp", "import numpy as np, torch\n\n"
                           "def stable_logsumexp(x):\n"
                           "    return torch.tensor(np.logaddexp.reduce(np.array(x.tolist())),\n"
                           "                        dtype=x.dtype)\n"),
        ("ch06-newton-schulz", "import numpy as np, torch\n\n"
                               "def orthogonalize(G, steps):\n"
                               "    U, S, Vh = np.linalg.svd(np.array(G.tolist()), full_matrices=False)\n"
                               "    s = S / np.sqrt((S ** 2).sum())\n"
                               "    for _ in range(steps):\n"
                               "        s = 3.4445 * s - 4.7750 * s ** 3 + 2.0315 * s ** 5\n"
                               "    return torch.tensor((U * s) @ Vh, dtype=G.dtype)\n"),
        ("ch04-sigmoid-backward", "import cmath\n\n"
                                  "def sigmoid_backward(x, y, grad_y):\n"
                                  "    h = 1e-20\n"
                                  "    return grad_y * (1 / (1 + cmath.exp(-complex(x, h)))).imag / h\n"),
        ("ch04-sigmoid-backward", "import mpmath\n\n"
                                  "def sigmoid_backward(x, y, grad_y):\n"
                                  "    return grad_y * float(mpmath.diff(lambda t: 1 / (1 + mpmath.exp(-t)), x))\n"),
        ("ch04-sigmoid-backward", "import sympy\n\n"
                                  "def sigmoid_backward(x, y, grad_y):\n"
                                  "    t = sympy.Symbol('t')\n"
                                  "    return grad_y * float(sympy.diff(1 / (1 + sympy.exp(-t)), t).subs(t, x))\n"),
        ("ch07-inverted-dropout", "import torch\n\n"
                                  "def inverted_dropout(x, p):\n"
                                  "    mask = torch.distributions.Bernoulli(probs=torch.full_like(x, 1 - p)).sample()\n"
                                  "    return x * mask / (1 - p)\n"),
        ("ch04-topological-order", "import networkx as nx\n\n"
                                   "def topo_sort(root):\n"
                                   "    g, stack, seen = nx.DiGraph(), [root], {id(root)}\n"
                                   "    g.add_node(id(root), node=root)\n"
                                   "    while stack:\n"
                                   "        n = stack.pop()\n"
                                   "        for c in n._prev:\n"
                                   "            g.add_node(id(c), node=c)\n"
                                   "            g.add_edge(id(c), id(n))\n"
                                   "            if id(c) not in seen:\n"
                                   "                seen.add(id(c)); stack.append(c)\n"
                                   "    return [g.nodes[i]['node'] for i in nx.topological_sort(g)]\n"),
        ("ch11-attention", "from transformers.models.gpt2.modeling_gpt2 import eager_attention_forward\n"
                           "import torch\n\n"
                           "class _M(torch.nn.Module):\n"
                           "    is_causal = False\n"
                           "    training = False\n\n"
                           "def attention(q, k, v, mask=None):\n"
                           "    m = _M()\n"
                           "    m.config = type('C', (), {'scale_attn_weights': True})()\n"
                           "    m.scale_attn_by_inverse_layer_idx = False\n"
                           "    return eager_attention_forward(m, q, k, v, mask, dropout=0.0)[0].transpose(1, 2)\n"),
    ],
    # 7. copies made before the check
    "copies": [
        ("ch05-logsumexp", "import types, mathref.losses as L\n"
                           "_copy = types.FunctionType(L.logsumexp.__code__, L.logsumexp.__globals__, None,\n"
                           "                           L.logsumexp.__defaults__)\n\n"
                           "def stable_logsumexp(x):\n"
                           "    return _copy(x, 0)\n"),
        ("ch09-soft-lookup", "import importlib, mathref.similarity\n"
                             "_fresh = importlib.reload(mathref.similarity)\n\n"
                             "def soft_lookup(query, keys, values, temperature):\n"
                             "    return _fresh.soft_lookup(query, keys, values, temperature)\n"),
        ("ch05-logsumexp", "import inspect, torch, mathref.losses as L\n"
                           "_ns = dict(L.__dict__)\n"
                           "exec(inspect.getsource(L.logsumexp), _ns)\n\n"
                           "def stable_logsumexp(x):\n"
                           "    return _ns['logsumexp'](x, 0)\n"),
    ],
    # 8. the checkers' own oracles
    "oracles": [
        ("ch01-gradient-descent-loop", "from mathref.checks.ch01 import _descent as gradient_descent_1d\n"),
        ("ch01-steps-to-tolerance", "from mathref.checks.ch01 import _exact_steps as steps_to_tolerance\n"),
        ("ch12-rope-half", "from mathref.checks.ch12 import _rope_reference\n\n"
                           "def rope_half_split(x, positions, base):\n"
                           "    return _rope_reference(x, positions, base)\n"),
        ("ch06-clip-global-norm", "from mathref.checks.ch06 import _torch_clipped as clip_global_norm\n"),
    ],
}

# correct answers in forms the gate must let through
GATE_RIGHT = [
    ("ch11-attention", "import torch, math\n\n"
                       "class Attention:\n"
                       "    def __call__(self, q, k, v, mask=None):\n"
                       "        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                       "        return torch.softmax(s if mask is None else s + mask, -1) @ v\n\n"
                       "attention = Attention()\n"),
    ("ch05-logsumexp", "import math\n\n"
                       "def stable_logsumexp(x):\n"
                       "    values = x.tolist()\n"
                       "    m = max(values)\n"
                       "    if m == -math.inf:\n"
                       "        return x.new_tensor(m)\n"
                       "    return x.new_tensor(m + math.log(sum(math.exp(v - m) for v in values)))\n"),
    ("ch04-topological-order", "def topo_sort(root):\n"      # Kahn's algorithm
                               "    nodes, stack = [], [root]\n"
                               "    seen = {id(root)}\n"
                               "    while stack:\n"
                               "        n = stack.pop(); nodes.append(n)\n"
                               "        for c in n._prev:\n"
                               "            if id(c) not in seen:\n"
                               "                seen.add(id(c)); stack.append(c)\n"
                               "    parents = {id(n): 0 for n in nodes}\n"
                               "    for n in nodes:\n"
                               "        for c in n._prev:\n"
                               "            parents[id(c)] += 1\n"
                               "    ready = [root]; order = []\n"
                               "    while ready:\n"
                               "        n = ready.pop(); order.append(n)\n"
                               "        for c in n._prev:\n"
                               "            parents[id(c)] -= 1\n"
                               "            if parents[id(c)] == 0:\n"
                               "                ready.append(c)\n"
                               "    return order[::-1]\n"),
    # (the variance after a shift by the row's first entry: one pass over the squares, without
    # the cancellation of mean(x²) − μ² that the check now refuses, chapter 8's read, L3)
    ("ch08-layer-norm", "import torch\n\n"
                        "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
                        "    mu = x.mean(-1, keepdim=True)\n"
                        "    d = x - x[..., :1]\n"
                        "    var = (d * d).mean(-1, keepdim=True) - (mu - x[..., :1]) ** 2\n"
                        "    return (x - mu) / torch.sqrt(var + eps) * gamma + beta\n"),
    ("ch11-attention", "import math, torch\n\n"
                       "def attention(q, k, v, mask=None):\n"
                       "    print('shapes', tuple(q.shape), tuple(k.shape))   # a debugging print\n"
                       "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                       "    return torch.softmax(s if mask is None else s + mask, -1) @ v\n"),
    ("ch03-output-delta", "import torch\n\n"
                          "def output_delta(Y_hat, Y):\n"
                          "    with torch.no_grad():\n"
                          "        return 2 * (Y_hat - Y) / Y.shape[0]\n"),
    # a stable softmax of its own: exp(s − logsumexp s) (chapter 11's second read: refused before)
    ("ch11-attention", "import math, torch\n\n"
                       "def attention(q, k, v, mask=None):\n"
                       "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                       "    s = s if mask is None else s + mask\n"
                       "    return (s - s.logsumexp(-1, keepdim=True)).exp() @ v\n"),
]

# 9. the checker's own frames (an expected value computed before the call sits there)
GATE_SHORTCUTS["frames"] = [
    ("ch13-pre-norm-block", "import sys\n\n"
                            "def pre_norm_block(x, attn, ffn, norm1, norm2):\n"
                            "    return sys._getframe(1).f_back.f_locals['want'].clone()\n"),
    ("ch13-pre-norm-block", "import inspect\n\n"
                            "def pre_norm_block(x, attn, ffn, norm1, norm2):\n"
                            "    return inspect.currentframe().f_back.f_back.f_locals['want'].clone()\n"),
    ("ch13-pre-norm-block", "import inspect\n\n"
                            "def pre_norm_block(x, attn, ffn, norm1, norm2):\n"
                            "    for info in inspect.stack():\n"
                            "        if 'want' in info.frame.f_locals:\n"
                            "            return info.frame.f_locals['want'].clone()\n"),
]

# 11. the gate's own hooks: an answer that clears sys.setprofile (a second read of chapter 11
# found NumPy, the mode switches and autograd's engine unseen after it)
GATE_SHORTCUTS["hook switches"] = [
    ("ch11-causal-mask", "import sys\nimport numpy as np\nimport torch\n\n"
                         "def causal_additive_mask(T):\n"
                         "    sys.setprofile(None)\n"
                         "    return torch.from_numpy(np.triu(np.full((T, T), -np.inf), 1)).float()\n"),
    ("ch11-causal-mask", "import sys\nimport numpy as np\nimport torch\n\n"
                         "def causal_additive_mask(T):\n"
                         "    getattr(sys, 'set' + 'profile')(lambda *args: None)\n"
                         "    return torch.from_numpy(np.triu(np.full((T, T), -np.inf), 1)).float()\n"),
    ("ch11-causal-mask", "import sys, threading\nimport numpy as np\nimport torch\n\n"
                         "def causal_additive_mask(T):\n"
                         "    threading.setprofile(None)\n"
                         "    sys.settrace(None)\n"
                         "    return torch.from_numpy(np.triu(np.full((T, T), -np.inf), 1)).float()\n"),
]

# wrong answers the reads found accepted, each now exposed by an input (issue 34)
CLOSED_WRONG = [
    ("ch02-steepest-descent", "import torch\n\n"
                              "def steepest_descent_direction(g):\n"
                              "    return -g / max(1.0, float(g.norm()))\n"),
    ("ch05-perplexity", "import torch\n\n"
                        "def perplexity_from_nlls(nlls):\n"
                        "    return torch.prod(torch.exp(nlls)) ** (1 / len(nlls))\n"),
    ("ch05-lm-loss", "import torch\n\n"
                     "def lm_loss(logits, targets, pad_id):\n"
                     "    logp = torch.log(torch.softmax(logits, -1))\n"
                     "    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)\n"
                     "    real = targets != pad_id\n"
                     "    return nll[real].sum() / real.sum()\n"),
    ("ch09-mips-to-nn", "import torch\n\n"
                        "def mips_keys(keys):\n"
                        "    M = keys.norm(dim=-1).max()\n"
                        "    extra = torch.sqrt(M ** 2 - (keys * keys).sum(-1, keepdim=True))\n"
                        "    return torch.cat([keys, extra], -1)\n"),
    ("ch10-one-hot-embedding", "import torch\nimport torch.nn.functional as F\n\n"
                               "def one_hot_lookup(ids, E):\n"
                               "    out = (F.one_hot(ids, E.shape[0]).to(E.dtype) @ E).detach()\n"
                               "    return out.requires_grad_(E.requires_grad)\n"),
    ("ch11-attention", "import math, torch\n\n"
                       "def attention(q, k, v, mask=None):\n"
                       "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                       "    if mask is not None:\n"
                       "        s = s + mask\n"
                       "    e = torch.exp(s)\n"
                       "    return e / e.sum(-1, keepdim=True) @ v\n"),
    ("ch13-cross-attention", "import torch\n\n"
                             "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
                             "    B, T, d = y.shape\n"
                             "    S, dk = memory.shape[1], d // n_heads\n"
                             "    q = (y @ W_q).view(B, T, n_heads, dk).transpose(1, 2)\n"
                             "    k = (memory @ W_k).view(B, S, n_heads, dk).transpose(1, 2)\n"
                             "    v = (memory @ W_v).view(B, S, n_heads, dk).transpose(1, 2)\n"
                             "    lengths = src_allowed.sum(-1)\n"
                             "    allowed = torch.arange(S) < lengths[:, None]   # trailing padding\n"
                             "    s = q @ k.transpose(-2, -1) / dk ** 0.5\n"
                             "    s = s.masked_fill(~allowed[:, None, None, :], float('-inf'))\n"
                             "    w = torch.softmax(s, -1)\n"
                             "    return (w @ v).transpose(1, 2).reshape(B, T, d) @ W_o, w\n"),
    ("ch08-batch-norm-backward", "import torch\n\n"
                                 "def batch_norm_backward(dy, x, gamma, eps=1e-5):\n"
                                 "    eps = 1e-5                      # the argument ignored\n"
                                 "    n = x.shape[0]\n"
                                 "    mu = x.mean(0)\n"
                                 "    inv = 1 / torch.sqrt(((x - mu) ** 2).mean(0) + eps)\n"
                                 "    xhat = (x - mu) * inv\n"
                                 "    g = dy * gamma\n"
                                 "    dx = inv / n * (n * g - g.sum(0) - xhat * (g * xhat).sum(0))\n"
                                 "    return dx, (dy * xhat).sum(0), dy.sum(0)\n"),
    ("ch15-merge-softmax-states", "import torch\n\n"
                                  "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
                                  "    m = (m1 + m2) / 2 + (m1 - m2).abs() / 2     # max, by formula\n"
                                  "    a1, a2 = torch.exp(m1 - m), torch.exp(m2 - m)\n"
                                  "    return m, a1 * l1 + a2 * l2, a1 * acc1 + a2 * acc2\n"),
]
