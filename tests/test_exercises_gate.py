"""The gate on what runs during a check (mathref.checks.gate), class by class: every shortcut
of tests/exercises/gate.py is refused in-process with a message that says what ran, and every
right answer there passes. ``python -m tests.test_exercises_gate`` prints the count per chapter.

A table of answers for the notebook's fixed inputs (class 9 of issue 34) is a shortcut too: it
passes under the default inputs and fails under any other generator (last test)."""
import collections

import pytest
import torch

from mathref.checks import CHECKS, ExerciseCheckFailed
from tests.exercises.gate import CLOSED_WRONG, GATE_RIGHT, GATE_SHORTCUTS
from tests.notebooks import all_exercises, read, reference_answer

PATHS = {label: path for path, label in all_exercises()}
CASES = [(kind, label, source) for kind, forms in GATE_SHORTCUTS.items()
         for label, source in forms]


def _answer(label, source):
    return reference_answer(read(PATHS[label]), label, source)


def test_every_class_has_three_forms():
    assert all(len(forms) >= 3 for forms in GATE_SHORTCUTS.values())


@pytest.mark.parametrize("kind, label, source", CASES,
                         ids=[f"{kind.replace(' ', '-')}-{i}-{label}"
                              for i, (kind, label, _) in enumerate(CASES)])
def test_a_shortcut_is_refused(kind, label, source, capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS[label](_answer(label, source))
    message = failure.value.message
    assert any(word in message for word in ("your solution ran", "your solution called",
                                            "without autograd")), message
    assert "✅" not in capsys.readouterr().out


@pytest.mark.parametrize("label, source", GATE_RIGHT,
                         ids=[f"right-{i}-{label}" for i, (label, _) in enumerate(GATE_RIGHT)])
def test_a_right_answer_passes(label, source, capsys):
    CHECKS[label](_answer(label, source))
    assert f"✅ {label}: passed" in capsys.readouterr().out


@pytest.mark.parametrize("label, source", CLOSED_WRONG,
                         ids=[f"closed-{i}-{label}" for i, (label, _) in enumerate(CLOSED_WRONG)])
def test_a_wrong_answer_the_reads_found_now_fails(label, source, capsys):
    with pytest.raises(ExerciseCheckFailed):
        CHECKS[label](_answer(label, source))
    assert "✅" not in capsys.readouterr().out


def test_not_a_callable_is_reported():
    for label in ("ch11-attention", "ch05-logsumexp"):
        with pytest.raises(ExerciseCheckFailed, match="pass the function itself"):
            CHECKS[label](torch.zeros(3))


def test_a_refusal_inside_a_library_function_names_the_function_called():
    """flex_attention reaches torch.distributions: the message names flex_attention (the
    seventh read of chapter 14 found only torch.distributions named); a refused function the
    answer calls itself is named alone."""
    flex = ("import torch\nfrom torch.nn.attention.flex_attention import flex_attention\n\n"
            "def rope_decode_step(q_new, k_new, v_new, k_cache, v_cache):\n"
            "    k_cache = torch.cat([k_cache, k_new], dim=-2)\n"
            "    v_cache = torch.cat([v_cache, v_new], dim=-2)\n"
            "    return flex_attention(q_new, k_cache, v_cache), k_cache, v_cache\n")
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch14-rope-decode-step"](_answer("ch14-rope-decode-step", flex))
    assert "ran torch.nn.attention.flex_attention.flex_attention, which ran " in \
        failure.value.message, failure.value.message
    assert "torch.distributions (ready-made probability distributions)" in failure.value.message
    direct = ("import torch._refs as R\n\n"
              "def stable_logsumexp(x):\n"
              "    return R.logsumexp(x, 0)\n")
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch05-logsumexp"](_answer("ch05-logsumexp", direct))
    assert "your solution ran logsumexp (from torch._refs" in failure.value.message, \
        failure.value.message


def test_a_table_of_answers_fails_under_another_generator():
    """Class 9: answers recorded for the notebook's inputs pass there and nowhere else."""
    label = "ch05-logsumexp"
    reference = _answer(label, None)
    table = {}

    def recording(x):
        table[tuple(x.flatten().tolist()), x.dtype] = reference(x)
        return table[tuple(x.flatten().tolist()), x.dtype]

    CHECKS[label](recording)

    def lookup(x):
        return table[tuple(x.flatten().tolist()), x.dtype]

    CHECKS[label](lookup)                                     # the notebook's inputs: passes
    with pytest.raises(ExerciseCheckFailed):
        CHECKS[label](lookup, generator=torch.Generator().manual_seed(2026))


def summary():
    per_chapter = collections.Counter(label[:4] for _, label, _ in CASES)
    return (f"gate table: {len(CASES)} shortcuts in {len(GATE_SHORTCUTS)} classes, "
            f"{len(GATE_RIGHT)} right answers; per chapter "
            + ", ".join(f"{ch} {n}" for ch, n in sorted(per_chapter.items())))


if __name__ == "__main__":
    print(summary())


# copies of a forbidden function that lives in a mathref module the exercise allows
# (ch11-gqa-backward allows mathref.attention for repeat_kv and attention_weights, but refuses
# its softmax_backward): the third read of chapter 11 found both accepted in the notebook
_GQA_WITH = ("import math\nimport mathref.attention as A\n\n{copy}\n"
             "def gqa_attention_backward(q, k, v, G_O):\n"
             "    B, H, T, d = q.shape\n"
             "    g = H // k.shape[1]\n"
             "    K, V = A.repeat_kv(k, g), A.repeat_kv(v, g)\n"
             "    P = A.attention_weights(q, K, is_causal=True)\n"
             "    G_S = sb(P, G_O @ V.transpose(-2, -1))\n"
             "    c = 1 / math.sqrt(d)\n"
             "    G_K = (c * G_S.transpose(-2, -1) @ q).view(B, -1, g, T, d).sum(2)\n"
             "    G_V = (P.transpose(-2, -1) @ G_O).view(B, -1, g, T, G_O.shape[-1]).sum(2)\n"
             "    return c * G_S @ K, G_K, G_V\n")
_ALLOWED_MODULE_COPIES = [
    "import types\n"
    "sb = types.FunctionType(A.softmax_backward.__code__, A.softmax_backward.__globals__, 'sb')\n",
    "def sb(p, grad_p):\n    pass\n\nsb.__code__ = A.softmax_backward.__code__\n",
]


@pytest.mark.parametrize("copy", _ALLOWED_MODULE_COPIES, ids=["FunctionType", "code-swap"])
def test_a_copy_of_a_forbidden_function_in_an_allowed_module_is_refused(copy, capsys):
    label = "ch11-gqa-backward"
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS[label](_answer(label, _GQA_WITH.format(copy=copy)))
    assert "a copy of a function this exercise refuses" in failure.value.message
    assert "✅" not in capsys.readouterr().out


def test_the_same_answer_with_its_own_softmax_backward_passes(capsys):
    """The control: the answer above with the derived G_S passes (only the copy is refused)."""
    label = "ch11-gqa-backward"
    own = "def sb(p, grad_p):\n    return p * (grad_p - (grad_p * p).sum(-1, keepdim=True))\n"
    CHECKS[label](_answer(label, _GQA_WITH.format(copy=own)))
    assert f"✅ {label}: passed" in capsys.readouterr().out


@pytest.mark.parametrize("label", ["ch01-gradient-descent-loop", "ch01-steps-to-tolerance",
                                   "ch01-best-constant-step", "ch06-adam-step", "ch06-adamw-step"])
@pytest.mark.parametrize("decorator", [torch.no_grad, torch.inference_mode])
def test_a_right_answer_under_a_grad_mode_decorator_passes(label, decorator, capsys):
    """Chapter 1's ninth read, M1: mathref's SGD.step and Adam.step, which these exercises refuse,
    are decorated with torch.no_grad(); the decorator's wrapper code, shared by every decorated
    function, was taken for theirs, so a right answer decorated the same way was refused as 'a
    copy of a function this exercise refuses'."""
    CHECKS[label](decorator()(_answer(label, None)))
    assert f"✅ {label}: passed" in capsys.readouterr().out


def _served(start):
    """A solution cell whose attention hands scaled_dot_product_attention to a thread running
    _serve, which the source ``start`` starts, and waits for the result."""
    return ("import functools, queue, threading, time, torch\n\n"
            "_jobs, _done = queue.Queue(), queue.Queue()\n\n"
            "def _serve():\n"
            "    while (job := _jobs.get()) is not None:\n"
            "        _done.put(job())\n\n"
            + start + "\n"
            "def attention(q, k, v, mask=None):\n"
            "    _jobs.put(lambda: torch.nn.functional.scaled_dot_product_attention(\n"
            "        q, k, v, attn_mask=mask))\n"
            "    return _done.get()\n")


def _refused_while_served(answer, capsys):
    try:
        with pytest.raises(ExerciseCheckFailed) as failure:
            CHECKS["ch11-attention"](answer)
    finally:
        answer.__globals__["_jobs"].put(None)          # the thread ends
    assert "a thread started from the notebook's code is still running" in failure.value.message
    assert "✅" not in capsys.readouterr().out


@pytest.mark.parametrize("server", [
    "threading.Thread(target=_serve, daemon=True)",
    # chapter 2's delta read, N2: the target behind a partial, and a Timer's function
    "threading.Thread(target=functools.partial(_serve), daemon=True)",
    "threading.Timer(0, _serve)"])
def test_work_handed_to_a_thread_started_before_the_check_is_refused(server, capsys):
    """Chapter 2's read, P2: the gate holds in the calling thread only, so a thread the solution
    cell started before the check could do the refused work for the answer, which hands it over
    and waits. A thread running the answer's code when the check starts is refused."""
    answer = _answer("ch11-attention", _served(f"_server = {server}\n_server.start()\n"))
    _refused_while_served(answer, capsys)
    answer.__globals__["_server"].join(10)
    CHECKS["ch11-attention"](_answer("ch11-attention", None))    # once it has ended: passes
    assert "✅ ch11-attention: passed" in capsys.readouterr().out


@pytest.mark.parametrize("start", [
    "import concurrent.futures\n_pool = concurrent.futures.ThreadPoolExecutor(1)\n"
    "_pool.submit(_serve)\n",
    "import _thread\n_thread.start_new_thread(_serve, ())\n",
    "threading.Thread(target=exec, args=('_serve()', globals()), daemon=True).start()\n",
    "threading.Thread(target=_serve.__call__, daemon=True).start()\n"])
def test_a_thread_with_the_answers_code_on_its_stack_is_refused_however_started(start, capsys):
    """Chapter 2's fifth read, M1: threads whose function the gate could not read (a pool's
    worker, _thread, exec, a method-wrapper) served the refused work; each is found by the
    answer's code on its stack."""
    _refused_while_served(_answer("ch11-attention", _served(start + "time.sleep(0.05)\n")),
                          capsys)


def test_a_finalizer_on_the_rule_runs_after_the_verdict(capsys):
    """Chapter 2's fifth read, M2: a finalizer on the check's rule ran when the rule was dropped,
    after the rules and before the comparison, and zeroed the checker's expected values; an
    answer of zeros then passed. The rules that end during a check live until its verdict."""
    source = ("import sys, weakref, torch\n"
              "from mathref.checks import core\n\n"
              "def ridge_svd(X, y, lams):\n"
              "    def zero_the_expected():\n"
              "        frame = sys._getframe()\n"
              "        while frame is not None:\n"
              "            if isinstance(frame.f_locals.get('want'), torch.Tensor):\n"
              "                frame.f_locals['want'].zero_()\n"
              "            frame = frame.f_back\n"
              "    weakref.finalize(core.ACTIVE[0], zero_the_expected)\n"
              "    return torch.zeros(len(lams), X.shape[1], dtype=X.dtype)\n")
    with pytest.raises(ExerciseCheckFailed):
        CHECKS["ch02-ridge-svd"](_answer("ch02-ridge-svd", source))
    assert "✅" not in capsys.readouterr().out


def test_a_result_written_after_the_check_is_not_what_the_checker_reads(capsys):
    """Chapter 2's read, P3: an answer returned zeros and hung a finalizer on the check's own rule
    object, which filled in the float64 lstsq solution once the rule was freed, after its modes
    had exited. The checker reads a copy made inside the rule."""
    source = ("import weakref, torch\n"
              "from mathref.checks import core\n\n"
              "def solve_least_squares(X, y):\n"
              "    w = torch.zeros(X.shape[1], dtype=X.dtype)\n"
              "    b = torch.zeros((), dtype=X.dtype)\n"
              "    def fill():\n"
              "        Xt = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], 1)\n"
              "        s = torch.linalg.lstsq(Xt.double(), y.double()[:, None]).solution[:, 0]\n"
              "        w.copy_(s[:-1])\n"
              "        b.copy_(s[-1])\n"
              "    weakref.finalize(core.ACTIVE[0], fill)\n"
              "    return w, b\n")
    with pytest.raises(ExerciseCheckFailed):
        CHECKS["ch02-least-squares"](_answer("ch02-least-squares", source))
    assert "✅" not in capsys.readouterr().out


def test_a_mode_switch_written_as_a_context_manager_is_refused_by_name(capsys):
    # chapter 16's seventh read, L6: torch's _disable_current_modes is a @contextmanager, so its
    # body runs from contextlib's __enter__; the gate now looks past contextlib for the caller
    source = next(source for label, source in GATE_SHORTCUTS["mode switches"]
                  if label == "ch16-adamw")
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch16-adamw"](_answer("ch16-adamw", source))
    assert "your solution ran _disable_current_modes" in failure.value.message


def test_a_library_callback_the_collector_runs_during_a_check_is_not_the_answers(capsys):
    """CI of faf117a: a ThreadPoolExecutor an earlier test had left in a reference cycle was
    freed by a garbage collection that started during chapter 1's check of a right answer; the
    pool's weakref callback (standard-library concurrent code) was taken for the answer's and
    refused. A collection can start anywhere, so a student's pool from an earlier cell would do
    the same in a notebook."""
    import concurrent.futures
    import gc
    import weakref
    reference = _answer("ch01-central-difference", None)
    gc.disable()                 # (so that the pool is freed during the check, not before)
    try:
        pool = concurrent.futures.ThreadPoolExecutor(1)
        pool.submit(int).result()    # its worker waits, holding the weakref whose callback ends it
        freed = weakref.ref(pool)
        cycle = [pool]
        cycle.append(cycle)          # freed by the collector only
        del pool, cycle

        def central_difference(f, x, h):
            gc.collect()
            return reference(f, x, h)
        assert freed() is not None
        CHECKS["ch01-central-difference"](central_difference)
        assert freed() is None
    finally:
        gc.enable()
    assert "✅ ch01-central-difference: passed" in capsys.readouterr().out


def test_a_library_function_handed_to_a_finalizer_is_still_refused(capsys):
    """What such a callback calls is judged: an answer that hands a refused function to
    weakref.finalize and collects gains nothing."""
    source = ("import concurrent.futures, gc, weakref\n\n"
              "class _Box:\n"
              "    pass\n\n"
              "def central_difference(f, x, h):\n"
              "    box = _Box()\n"
              "    box.cycle = box\n"
              "    weakref.finalize(box, concurrent.futures.ThreadPoolExecutor, 1)\n"
              "    del box\n"
              "    gc.collect()\n"
              "    return (f(x + h) - f(x - h)) / (2 * h)\n")
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch01-central-difference"](_answer("ch01-central-difference", source))
    assert "concurrent" in failure.value.message
    assert "✅" not in capsys.readouterr().out


@pytest.mark.parametrize("call", ["gc.get_objects()", "gc.get_referrers(f)", "gc.get_referents(f)"])
def test_the_collectors_view_of_the_checkers_objects_is_refused(call, capsys):
    """Chapter 16's ninth read, L-A: gc.get_objects() reaches every live object, the checker's
    expected values and mathref's optimizer state among them (an AdamW answer returned
    mathref's own moment tensors, which mathref's step then brought to the compared values)."""
    source = ("import gc\n\n"
              "def central_difference(f, x, h):\n"
              f"    {call}\n"
              "    return (f(x + h) - f(x - h)) / (2 * h)\n")
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch01-central-difference"](_answer("ch01-central-difference", source))
    assert "gc: the checker's objects" in failure.value.message
    assert "✅" not in capsys.readouterr().out
