"""The number-aware output comparison (tests/output_compare.py) behind `make nbval`.

Each rule of the module docstring is tested both ways: what must pass (platform noise) and
what must fail (a real change). The last test runs nbval itself on a small notebook, so the
plugin hook is tested too, not only the function.
"""
import json
import subprocess
import sys

import pytest

from tests.output_compare import ROUNDING_LEVEL, Tolerance, compare, split

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def same(stored, fresh, tags=()):
    return compare(stored, fresh, Tolerance.from_tags(tags)) is None


# 1. last printed digit of deterministic math
@pytest.mark.parametrize("stored, fresh", [
    ("loss 0.6522", "loss 0.6523"),
    ("loss 0.6522", "loss 0.6521"),
    ("x_k = 1.2e+03", "x_k = 1.3e+03"),
    ("mean 12.35 (std 0.1)", "mean 12.34 (std 0.1)"),
    ("0.1", "0.1001"),       # '.4g' drops trailing zeros: the more precise number decides
    ("10", "9.999"),         # '.4g' crossing a decade prints an integer
])
def test_last_digit_differences_pass(stored, fresh):
    assert same(stored, fresh)


@pytest.mark.parametrize("stored, fresh", [
    ("loss 0.6522", "loss 0.6532"),
    ("loss 0.6522", "loss 0.6520"),
    ("x_k = 1.2e+03", "x_k = 1.4e+03"),
    ("x_k = 1.2e+03", "x_k = 1.2e+04"),
    ("1", "1.9"),
    ("0.5", "-0.5"),
])
def test_real_changes_of_a_deterministic_value_fail(stored, fresh):
    assert not same(stored, fresh)


# 2. rounding-level magnitudes are one class
@pytest.mark.parametrize("stored, fresh", [
    ("max |diff| = 2.22e-16", "max |diff| = 1.11e-16"),
    ("max |diff| = 0.0e+00", "max |diff| = 1.1e-16"),
    ("RᵀR − I = 0.0e+00", "RᵀR − I = 1.1e-08"),          # float32
    ("flash vs naive 3.9e-07", "flash vs naive 4.2e-07"),
    ("error 0", "error 8.9e-06"),
    ("tensor([ 0.0000, 1.0000])", "tensor([-0.0000, 1.0000])"),  # re-padded column
])
def test_rounding_level_magnitudes_are_equal(stored, fresh):
    assert same(stored, fresh)


@pytest.mark.parametrize("stored, fresh", [
    ("max |diff| = 1e-03", "max |diff| = 1e-16"),
    ("max |diff| = 2.2e-16", "max |diff| = 3.0e-04"),
    ("error 0", "error 2e-05"),
])
def test_a_real_error_is_not_rounding(stored, fresh):
    assert ROUNDING_LEVEL == 1e-5
    assert not same(stored, fresh)


# 3. counts, booleans, shapes and words
@pytest.mark.parametrize("stored, fresh", [
    ("24 matrices", "25 matrices"),
    ("steps: 1000", "steps: 999"),
    ("torch.Size([2, 3, 4])", "torch.Size([2, 4, 3])"),
    ("shape (16, 64)", "shape (16, 65)"),
    ("converged: True", "converged: False"),
    ("the mask allows the past", "the mask allows the future"),
    ("loss 0.6522", "loss 0.6522 nan"),
    ("a\nb", "a\nc"),
])
def test_counts_booleans_shapes_and_words_fail(stored, fresh):
    assert not same(stored, fresh)


def test_identifiers_and_versions_are_text_not_numbers():
    pieces, numbers = split("float32 ch06 sm80 v2.13.0 x2 1e-3 -4")
    assert [n.text for n in numbers] == ["1e-3", "-4"]
    assert not same("dtype float32", "dtype float64")
    assert not same("torch 2.13.0", "torch 2.13.1")


def test_white_space_is_folded_but_not_dropped_between_words():
    assert same("a  b\n c", "a b c")
    assert not same("ab", "a b c")


# 4. declared tolerance for training results
def test_declared_relative_tolerance():
    tags = ["nbval-tolerance-0.01"]
    assert same("held-out loss 1.781", "held-out loss 1.783", tags)
    assert not same("held-out loss 1.781", "held-out loss 1.783")
    assert not same("held-out loss 1.781", "held-out loss 1.85", tags)
    assert same("step 320", "step 322", tags)            # integers too, in a declared cell
    assert not same("held-out loss 1.781", "validation loss 1.781", tags)  # text stays exact


def test_declared_absolute_tolerance():
    tags = ["nbval-tolerance-abs-0.05"]
    assert same("accuracy 0.994", "accuracy 0.998", tags)
    assert not same("accuracy 0.994", "accuracy 0.9", tags)


@pytest.mark.parametrize("tag", ["nbval-tolerance-", "nbval-tolerance-five",
                                 "nbval-tolerance-abs-", "nbval-tolerance--0.1",
                                 "nbval-tolerance-nan"])
def test_a_malformed_tag_is_an_error(tag):
    with pytest.raises(ValueError, match="tolerance tag"):
        Tolerance.from_tags([tag])


def test_unrelated_tags_are_ignored():
    assert Tolerance.from_tags(["solution", "nbval-ignore-output"]) == Tolerance()


# 5. a readable diff naming what moved
def test_report_names_the_number_that_moved_and_its_line():
    report = compare("epoch 1\nloss 0.6522 acc 0.9\n", "epoch 1\nloss 0.6532 acc 0.9\n")
    assert "number 2 on line 2 moved: stored 0.6522, fresh 0.6532" in report
    assert "stored line: loss 0.6522 acc 0.9" in report
    assert "fresh line:  loss 0.6532 acc 0.9" in report


def test_report_names_the_text_that_changed():
    report = compare("ok: True\n", "ok: False\n")
    assert "text changed" in report and "True" in report and "False" in report


# The hook inside nbval: a notebook whose stored outputs differ from a fresh run by noise,
# by a declared tolerance, and (in the second run) by a real change.
def _notebook(cells):
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3",
                                                        "display_name": "Python 3",
                                                        "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def _cell(i, source, stored, tags=()):
    return {"cell_type": "code", "id": f"c{i}", "execution_count": i + 1,
            "metadata": {"tags": list(tags)}, "source": source,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": stored}]}


def _run_nbval(tmp_path, cells):
    path = tmp_path / "probe.ipynb"
    path.write_text(json.dumps(_notebook(cells)))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.nbval_conftest", "--nbval",
         "--nbval-current-env", "-q", "-p", "no:cacheprovider", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_nbval_uses_the_number_aware_comparison(tmp_path):
    cells = [
        _cell(0, "print(f'{2**-52:.2e}')", "1.11e-16\n"),
        _cell(1, "print(round(0.65226, 4))", "0.6522\n"),
        _cell(2, "print('loss', 1.783)", "loss 1.781\n", ["nbval-tolerance-0.01"]),
    ]
    result = _run_nbval(tmp_path, cells)
    assert result.returncode == 0, result.stdout + result.stderr

    cells.append(_cell(3, "print('loss', 0.6532)", "loss 0.6522\n"))
    result = _run_nbval(tmp_path, cells)
    assert result.returncode == 1
    assert "moved: stored 0.6522, fresh 0.6532" in result.stdout
