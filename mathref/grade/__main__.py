"""``python -m mathref.grade``: see :mod:`mathref.grade`."""
import sys

from mathref.grade import main

sys.exit(main())
