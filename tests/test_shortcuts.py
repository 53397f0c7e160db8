"""The shortcut table: every exercise refuses the call that would answer it for the student.

``tests/exercises/chNN.py`` holds, beside its typical wrong answers, ``SHORTCUTS``: for every
exercise at least one solution cell, written as a student would write it, that calls the
mathref function the exercise re-derives or the PyTorch built-in that does the same job (or
autograd where the statement says to derive). Each must fail its checker with a message that
names what was called. ``RIGHT_ANSWERS`` holds correct solutions in other forms than the
reference (float32 where float32 is legitimate, an equivalent formula): each must pass.
``python -m tests.test_shortcuts`` prints the table's summary line.
"""
import importlib
import pkgutil

import pytest

from mathref.checks import CHECKS, ExerciseCheckFailed
from tests import exercises
from tests.notebooks import all_exercises, read, reference_answer

EXERCISES = dict((label, path) for path, label in all_exercises())
TABLES = {"SHORTCUTS": {}, "WRONG_ANSWERS": {}, "RIGHT_ANSWERS": {}}
for _module in pkgutil.iter_modules(exercises.__path__):
    _loaded = importlib.import_module(f"tests.exercises.{_module.name}")
    for _name, _table in TABLES.items():
        _table.update(getattr(_loaded, _name, {}))
SHORTCUTS, RIGHT = TABLES["SHORTCUTS"], TABLES["RIGHT_ANSWERS"]
# what a refusal says: a forbidden call is named; autograd where the gradient is to be derived
REFUSALS = ("your solution called", "your solution ran", "without autograd")

SHORTCUT_CASES = [(label, i) for label in EXERCISES for i in range(len(SHORTCUTS.get(label, [])))]
RIGHT_CASES = [(label, i) for label in EXERCISES for i in range(len(RIGHT.get(label, [])))]


def test_every_exercise_has_a_shortcut_in_the_table():
    missing = sorted(set(EXERCISES) - set(SHORTCUTS))
    assert not missing, f"no shortcut submission for {missing}"
    unknown = sorted(set(SHORTCUTS) - set(EXERCISES)) + sorted(set(RIGHT) - set(EXERCISES))
    assert not unknown, f"table entries for unknown exercises {unknown}"


@pytest.mark.parametrize("label, index", SHORTCUT_CASES,
                         ids=[f"{label}-shortcut{i}" for label, i in SHORTCUT_CASES])
def test_a_shortcut_is_refused_with_a_message_naming_the_call(label, index, capsys):
    answer = reference_answer(read(EXERCISES[label]), label, SHORTCUTS[label][index])
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS[label](answer)
    assert any(refusal in failure.value.message for refusal in REFUSALS), failure.value.message
    assert "✅" not in capsys.readouterr().out


@pytest.mark.parametrize("label, index", RIGHT_CASES,
                         ids=[f"{label}-right{i}" for label, i in RIGHT_CASES])
def test_a_right_answer_in_another_form_passes(label, index, capsys):
    answer = reference_answer(read(EXERCISES[label]), label, RIGHT[label][index])
    CHECKS[label](answer)
    assert f"✅ {label}: passed" in capsys.readouterr().out


def summary():
    """The table's one-line summary."""
    return (f"shortcut table: {len(EXERCISES)} exercises, {len(SHORTCUT_CASES)} shortcuts and "
            f"{sum(len(TABLES['WRONG_ANSWERS'].get(label, [])) for label in EXERCISES)} wrong "
            f"answers that must fail, {len(RIGHT_CASES)} right answers in other forms that must "
            f"pass; {len(set(SHORTCUTS) & set(EXERCISES))} of {len(EXERCISES)} exercises covered")


if __name__ == "__main__":
    print(summary())
