"""mathref: the from-scratch reference implementations behind the course
"From x² to GPT: the mathematics of deep learning".

One module per idea; import the one a chapter needs, e.g. ``from mathref import calculus``.
Every function is tested against an independent oracle (PyTorch, autograd, a closed form or
finite differences) in ``tests/``.
"""

__version__ = "0.1.0"
