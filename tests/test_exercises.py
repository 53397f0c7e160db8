"""Every exercise of the book, checked in both directions.

For each exercise label found in the notebooks: a checker exists; the notebook's own reference
solution passes it; every typical wrong answer in tests/exercises/chNN.py fails it (at least
two per exercise); and a student's exception or unfinished stub is reported as one readable
line, not a crash.
"""
import importlib
import re
import pkgutil

import pytest
import torch

from mathref import checks
from mathref.checks import CHECKS, ExerciseCheckFailed
from mathref.checks.core import CheckFailure
from tests import exercises
from tests.notebooks import all_exercises, checker_name, read, reference_answer

EXERCISES = all_exercises()
WRONG = {}
for module in pkgutil.iter_modules(exercises.__path__):
    WRONG.update(importlib.import_module(f"tests.exercises.{module.name}").WRONG_ANSWERS)

LABELS = [label for _, label in EXERCISES]
WRONG_CASES = [(label, i) for label in LABELS for i in range(len(WRONG.get(label, [])))]


def test_every_exercise_has_a_checker_and_wrong_answers():
    assert LABELS, "no exercises found in the notebooks"
    for label in LABELS:
        assert label in CHECKS, f"no checker registered for {label}"
        assert hasattr(checks, checker_name(label)), f"mathref.checks.{checker_name(label)} missing"
        assert len(WRONG.get(label, [])) >= 2, f"{label} needs at least two wrong answers"
    assert not set(WRONG) - set(LABELS), f"wrong answers for unknown exercises {set(WRONG) - set(LABELS)}"


@pytest.mark.parametrize("path, label", EXERCISES, ids=LABELS)
def test_reference_solution_passes(path, label, capsys):
    answer = reference_answer(read(path), label)
    CHECKS[label](answer)
    assert f"✅ {label}: passed" in capsys.readouterr().out


@pytest.mark.parametrize("label, index", WRONG_CASES, ids=[f"{l}-wrong{i}" for l, i in WRONG_CASES])
def test_wrong_answer_fails(label, index, capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS[label](WRONG[label][index])
    assert failure.value.label == label and failure.value.message
    assert "✅" not in capsys.readouterr().out


@pytest.mark.parametrize("label", LABELS)
def test_student_exceptions_are_readable(label):
    def unfinished(*args, **kwargs):
        raise NotImplementedError()

    def crashing(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    with pytest.raises(ExerciseCheckFailed, match="not attempted yet") as err:
        CHECKS[label](unfinished)
    assert err.value._render_traceback_() == [f"❌ {label}: {err.value.message}"]
    with pytest.raises(ExerciseCheckFailed, match="your code raised ZeroDivisionError"):
        CHECKS[label](crashing)


def test_not_implemented_inside_torch_is_not_called_unattempted():
    """A NotImplementedError that PyTorch raises (an operator it lacks under the checker's
    dispatch modes, or here an nn.Module without forward) is the student's attempt failing, not
    the stub: the message says where it came from."""
    def attempted(*args, **kwargs):
        return torch.nn.Module()(torch.zeros(1))     # Module.forward raises NotImplementedError

    with pytest.raises(ExerciseCheckFailed, match="raised NotImplementedError inside torch") as err:
        CHECKS[LABELS[0]](attempted)
    assert "not attempted" not in err.value.message


def test_not_a_function_is_reported():
    with pytest.raises(ExerciseCheckFailed, match="pass the function itself"):
        CHECKS[LABELS[0]](42)


def test_expect_tensor_close_is_torch_isclose_entry_by_entry():
    import torch

    from mathref.checks.core import CheckFailure, as_tensor, expect_tensor_close
    want = torch.tensor([[1.0, -2.0], [float("-inf"), 4.0]], dtype=torch.float64)
    expect_tensor_close(want.clone().tolist(), want, "a list")               # lists are accepted
    expect_tensor_close(want * (1 + 1e-9), want, "within rtol", rtol=1e-8)   # -inf == -inf
    cases = [(want[:1], "expected shape (2, 2), got (1, 2) (hint)", dict(shape_hint=" (hint)")),
             (want.masked_fill(want == 4.0, float("nan")), "nan or inf (why)", dict(nan_hint=" (why)")),
             (want * torch.tensor([[1.0, 2.0], [1.0, 1.0]]), "at index [0, 1] expected -2, got -4 (ratio 2)", {}),
             (want.tolist(), "expected a torch.Tensor, got list", dict(tensor_only=True))]
    for got, message, options in cases:
        with pytest.raises(CheckFailure, match=re.escape(message)):
            expect_tensor_close(got, want, "x", **options)
    with pytest.raises(CheckFailure, match="expected a torch.Tensor, got dict"):
        as_tensor({}, "x")


def test_a_float64_result_made_in_float32_is_named_by_its_values():
    """A float64 result whose every entry is a float32 number was computed in float32 and cast
    back: the message says so. A float64 miss of the same size is not blamed on float32, and
    neither are whole numbers (every one of which is a float32 number)."""
    from mathref.checks.core import CheckFailure, expect_tensor_close

    want = torch.linspace(0.1, 2.0, 7, dtype=torch.float64).exp()
    cast_back = want.float().double()
    float64_miss = want + (cast_back - want).abs().max()
    for got, named in [(cast_back, True), (float64_miss, False),
                       (want.round() + 1, False)]:
        with pytest.raises(CheckFailure) as failure:
            expect_tensor_close(got, want, "x", rtol=1e-12)
        assert ("every entry of your result is a float32 number" in str(failure.value)) == named


def test_without_autograd_refuses_each_autograd_entry_point():
    """The wrapper behind every "without autograd" exercise: a hand-written gradient passes,
    and each way of asking autograd fails with a message that says why."""
    from mathref.checks.core import without_autograd

    x = torch.tensor([1.0, -2.0], dtype=torch.float64)

    def by_hand(t):
        return 2 * t

    def by_backward(t):
        t = t.detach().clone().requires_grad_()
        (t ** 2).sum().backward()
        return t.grad

    def by_grad(t):
        t = t.detach().clone().requires_grad_()
        return torch.autograd.grad((t ** 2).sum(), t)[0]

    def by_enable_grad(t):
        with torch.enable_grad():
            t = t.detach().clone().requires_grad_()
            return torch.autograd.grad((t ** 2).sum(), t)[0]

    def by_micrograd(t):                         # the course's own reverse mode (chapter 4)
        from mathref.autograd import Value
        leaves = [Value(float(a)) for a in t]
        sum((v * v for v in leaves), Value(0.0)).backward()
        return torch.tensor([v.grad for v in leaves], dtype=t.dtype)

    assert torch.equal(without_autograd(by_hand)(x), 2 * x)
    for cheat in (by_backward, by_grad, by_enable_grad, by_micrograd):
        with pytest.raises(CheckFailure, match="without autograd"):
            without_autograd(cheat)(x)
        assert torch.equal(cheat(x), 2 * x)  # autograd is back once the call returns


def test_forbidden_calls_are_refused_however_they_are_reached():
    """The mechanism behind every "write it yourself" rule (checks.core.Forbidden): a call
    refused by name, alias, tensor method, torch.ops operator (composite or not), and even when
    the solution catches the refusal; everything works again once the call returns."""
    import mathref.losses
    from mathref.checks.core import ForbiddenCall, forbidding
    from mathref.losses import logsumexp as aliased

    names = ("torch.logsumexp", "torch.Tensor.logsumexp", "torch.ops.aten.logsumexp",
             "mathref.losses.logsumexp", "torch.ops.aten.dropout")
    x = torch.tensor([1.0, -2.0, 0.5])

    def by_hand(t):
        m = t.max()
        return m + (t - m).exp().sum().log()

    def swallowed(t):
        try:
            return torch.logsumexp(t, 0)
        except BaseException:
            return by_hand(t)

    cheats = [lambda t: torch.logsumexp(t, 0), lambda t: t.logsumexp(0),
              lambda t: aliased(t, 0), lambda t: mathref.losses.logsumexp(t, 0),
              lambda t: torch.ops.aten.logsumexp(t, [0]), swallowed,
              lambda t: torch.ops.aten.dropout.default(t, 0.5, True).sum()]
    want = torch.logsumexp(x, 0)
    assert torch.allclose(forbidding(by_hand, names, "ch00-x")(x), want)
    for cheat in cheats:
        with pytest.raises(ForbiddenCall, match=r"your solution called (torch|mathref)\S+, which "
                                                r"ch00-x does not allow"):
            forbidding(cheat, names, "ch00-x")(x)
    for cheat in cheats[:5]:                       # restored: each works again
        assert torch.allclose(cheat(x), want)
    assert torch.ops.aten.dropout(x, 0.0, True).shape == x.shape


def test_a_complex_answer_is_not_read_as_its_real_part(capsys):
    # the grader's fifth attack, H3: cos + 5j passed ch09-cosine-from-dot, the imaginary part
    # dropped when the answer was read as float64
    path = dict((label, path) for path, label in EXERCISES)["ch09-cosine-from-dot"]
    right = reference_answer(read(path), "ch09-cosine-from-dot")

    def complex_answer(*args, **kwargs):
        return right(*args, **kwargs) + 5j

    with pytest.raises(ExerciseCheckFailed, match="complex"):
        CHECKS["ch09-cosine-from-dot"](complex_answer)
    assert "✅" not in capsys.readouterr().out
