"""Exercise checkers: ``check_<label>(answer)`` prints ``✅ label: passed`` or fails its cell with
one readable line saying what is wrong. One module per chapter; ``CHECKS`` maps every
exercise label to its checker.
"""
from mathref.checks.core import CHECKS, CheckFailure, ExerciseCheckFailed, exercise
from mathref.checks.ch01 import *  # noqa: F401,F403
from mathref.checks.ch02 import *  # noqa: F401,F403
from mathref.checks.ch03 import *  # noqa: F401,F403
from mathref.checks.ch04 import *  # noqa: F401,F403
from mathref.checks.ch05 import *  # noqa: F401,F403
from mathref.checks.ch06 import *  # noqa: F401,F403
from mathref.checks.ch07 import *  # noqa: F401,F403
from mathref.checks.ch08 import *  # noqa: F401,F403
from mathref.checks.ch09 import *  # noqa: F401,F403
from mathref.checks.ch10 import *  # noqa: F401,F403
from mathref.checks.ch11 import *  # noqa: F401,F403
from mathref.checks.ch12 import *  # noqa: F401,F403
from mathref.checks.ch13 import *  # noqa: F401,F403
from mathref.checks.ch14 import *  # noqa: F401,F403
from mathref.checks.ch15 import *  # noqa: F401,F403
from mathref.checks.ch16 import *  # noqa: F401,F403
