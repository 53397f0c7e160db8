"""The grader's trusted side (issue 33), piece by piece: what crosses the channel, what the
trusted side decodes, and what the policy refuses before anything runs. The same attacks
through the real CLI are in tests/test_grade.py."""
import io
import os
import re
import threading
import zipfile

import nbformat
import pytest
import torch

from mathref.grade import policy, rpc
from tests.notebooks import NOTEBOOKS, read


def _tags(item, seen=None):
    """Every tag of an encoded value."""
    seen = set() if seen is None else seen
    if isinstance(item, tuple) and item and isinstance(item[0], str):
        seen.add(item[0])
    if isinstance(item, (tuple, list)):
        for x in item:
            _tags(x, seen)
    return seen


def _through(value, sender, receiver):
    """``value`` encoded by ``sender``, saved and loaded as a message is, decoded by
    ``receiver``."""
    buffer = io.BytesIO()
    torch.save({"v": sender.encode(value)}, buffer)
    return receiver.decode(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)["v"])


def test_the_grader_sends_its_modules_and_functions_as_data_never_as_handles():
    """Finding 1: ch13-pre-norm-block's four modules and a checker's lambda reach the worker
    as data and are rebuilt there; the worker's copy computes what the grader's does, and comes
    back as the grader's own object."""
    from mathref.transformer import EncoderBlock
    grader = rpc.Endpoint(None, None, trusted=True)
    worker = rpc.Endpoint(None, None, trusted=False)
    torch.manual_seed(0)
    block = EncoderBlock(8, 2, 16, norm_first=True).double().eval()
    parts = [block.self_attn, block.ffn, block.norm1, block.norm2]
    scale = 3.0
    f = lambda t: scale * torch.tanh(t) ** 3   # noqa: E731 - a checker's test function
    encoded = grader.encode([parts, f])
    assert "h" not in _tags(encoded) and {"obj", "fn"} <= _tags(encoded)
    rebuilt, g = _through([parts, f], grader, worker)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    with torch.no_grad():
        for mine, theirs in zip(parts, rebuilt):
            assert type(theirs) is type(mine) and theirs is not mine
            assert torch.equal(theirs(x), mine(x))
    assert torch.equal(g(x), f(x))
    back = _through(rebuilt, worker, grader)       # the worker returns what it was given
    assert all(a is b for a, b in zip(back, parts))


def test_the_grader_serves_no_request():
    """Finding 1: whatever the worker asks about (getattr, iter, getitem, call on an id), the
    grader answers nothing and ends the exchange."""
    grader_r, worker_w = os.pipe()
    worker_r, grader_w = os.pipe()
    grader = rpc.Endpoint(grader_r, grader_w, trusted=True)
    grader.encode(lambda: 0)        # the grader has sent something: id 1 exists
    for op in ("getattr", "iter", "getitem", "call", "len"):
        rpc.write_message(worker_w, {"kind": "request", "op": op, "id": 1,
                                     "payload": [("v", "gi_frame"), ("t", []), ("d", [], False)]})
        with pytest.raises(rpc.ChannelClosed, match="serves none"):
            grader.wait_reply()
    assert not grader.handles
    for fd in (grader_r, worker_w, worker_r, grader_w):
        os.close(fd)


def test_decoding_counts_shared_parts_once_and_stops_at_its_budget(monkeypatch):
    """Finding 6: a reply whose sub-object is referenced 250 times decodes to one object, not
    250 copies; past the item or element budget the reply is refused."""
    grader = rpc.Endpoint(None, None, trusted=True)
    shared = ("l", [("v", float(i)) for i in range(10_000)])
    buffer = io.BytesIO()
    torch.save(("l", [shared] * 250), buffer)
    assert len(buffer.getvalue()) < 400_000
    value = grader.decode(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    assert len(value) == 250 and all(v is value[0] for v in value) and len(value[0]) == 10_000
    monkeypatch.setattr(rpc, "MAX_ITEMS", 5_000)
    with pytest.raises(rpc.ChannelClosed, match="too large"):
        grader.decode(("l", [("v", float(i)) for i in range(6_000)]))
    monkeypatch.setattr(rpc, "MAX_TOTAL_ELEMENTS", 1_000)
    with pytest.raises(rpc.ChannelClosed, match="too many tensor elements"):
        grader.decode(("l", [("T", torch.zeros(400), False) for _ in range(3)]))


def test_a_compressed_message_is_refused_before_it_is_unpacked():
    """A deflated torch.save archive: 5 KB that torch.load would unpack to 40 MB."""
    buffer = io.BytesIO()
    torch.save({"kind": "reply", "value": ("T", torch.zeros(10 ** 7), False)}, buffer)
    packed = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as src, \
            zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as dst:
        for entry in src.infolist():
            dst.writestr(entry.filename, src.read(entry.filename))
    data = packed.getvalue()
    assert len(data) < 100_000
    assert torch.load(io.BytesIO(data), weights_only=True)["value"][1].numel() == 10 ** 7
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: os.write(w, len(data).to_bytes(8, "little") + data))
    writer.start()
    with pytest.raises(rpc.ChannelClosed, match="compressed"):
        rpc.read_message(r)
    writer.join()
    os.close(r)
    os.close(w)


REFUSED = [
    ("g = (v for v in [1])\nrun = g.gi_frame.f_builtins['exec']", "gi_frame"),      # finding 1
    ("import sys\nwant = sys._getframe(1).f_locals", "import sys"),               # finding 1
    ("sys.modules['__main__'].WorkerEndpoint.call_local = None", "sys"),           # finding 2
    ("x = ().__class__.__mro__", "__class__"),
    ("getattr(torch, 'ov' + 'errides')", "computed attribute name"),
    ("getattr(torch, '_C')", "_C"),
    ("eval('1')", "eval"),
    ("exec('1')", "exec"),
    ("f = compile('1', 'x', 'eval')", "compile"),
    ("__import__('os')", "__import__"),
    ("g = globals()", "globals"),
    ("v = vars(torch)", "vars"),
    ("import gc", "import gc"),
    ("import ctypes", "import ctypes"),
    ("import inspect", "import inspect"),
    ("import importlib", "import importlib"),
    ("import threading", "import threading"),
    ("from multiprocessing import Process", "multiprocessing"),
    ("import torch.multiprocessing", "multiprocessing"),
    ("m = torch.sys.modules", "sys"),
    ("t = torch.load('table.pt', weights_only=False)", "load"),
    ("torch.optim.Adam.step = None", "`self` only"),
    ("opt = torch.optim\nopt.Adam = None", "`self` only"),                   # through an alias
    ("def f(m):\n    m.svd = None\nf(torch.linalg)", "`self` only"),       # through a call
    ("setattr(torch.linalg, 'svd', None)", "other than `self`"),
    ("del torch.Tensor.backward", "`self` only"),
    ("from torch.overrides import TorchFunctionMode", "overrides"),
    ("import mathref.checks.core", "checks"),
    ("checks.core.CHECKS.clear()", "the checkers"),
    ("from mathref.grade import worker", "grade"),
    ("n = '__globals__'", "dunder"),
    ("p = open('/etc/passwd').read()", "open"),
    # red team of issue 33, H1: library routines that get or set attributes by a given name
    ("import functools\nfunctools.update_wrapper(x, f, assigned=(n,), updated=())",
     "`functools.update_wrapper` is not available"),
    ("from functools import update_wrapper", "update_wrapper"),
    ("from functools import wraps", "wraps"),
    ("w = wraps(f)", "`wraps` is not available"),       # as the setup cell might bind it
    ("import functools\nft = functools\nw = ft.wraps", "only available as `functools.name`"),
    ("import functools as ft\nw = ft.wraps(f)", "`functools.wraps` is not available"),
    ("from operator import attrgetter", "operator"),
    ("import copy", "import copy"),
    ("from fractions import Decimal", "`from fractions import Decimal` is not available"),
    ("import fractions\nd = fractions.Decimal", "`fractions.Decimal` is not available"),
    ("import collections\nT = collections.namedtuple('T', n)", "namedtuple"),
    ("class Grab:\n    def __setattr__(self, name, value):\n        pass", "`__setattr__`"),
    ("class Grab:\n    def __getattr__(self, name):\n        pass", "`__getattr__`"),
    ("class R:\n    def __reduce__(self):\n        pass", "`__reduce__`"),
    ("class Grab:\n    __setattr__ = print", "binding a dunder name"),
    ("class M(type):\n    pass\nclass A(metaclass=M):\n    pass", "metaclass"),
    ("A = type('A', (), {n: f})", "`type` with more than one argument"),
    ("s = fmt.format(f)", "`.format` of anything but a string literal"),
    ("s = '{0.x}'.format(f)", "attribute or item field"),
    ("s = '{0[k]}'.format(d)", "attribute or item field"),
    ("s = '{0:{1.x}}'.format(1, f)", "attribute or item field"),
    ("m = str.format", "`.format` of anything but a string literal"),
    ("s = '{a}'.format_map(d)", "format_map"),
    # H2: a class pattern reads attributes by the names it lists
    ("match f:\n    case object(__globals__=g):\n        pass", "class patterns"),
    ("match f:\n    case object(x=g):\n        pass", "class patterns"),
    # H3: `self` is only a method's first parameter
    ("self = torch.optim\nself.Adam = None", "binding the name `self`"),
    ("for self in [torch.optim]:\n    self.Adam = None", "binding the name `self`"),
    ("with torch.no_grad() as self:\n    pass", "binding the name `self`"),
    ("import torch.optim as self", "binding the name `self`"),
    ("x = [self for self in [torch]]", "binding the name `self`"),
    ("if (self := torch.optim):\n    pass", "binding the name `self`"),
    ("def f(self):\n    self.svd = None\nf(torch.linalg)", "parameter named `self`"),
    ("f = lambda self: 0", "parameter named `self`"),
    ("class A:\n    @staticmethod\n    def f(self):\n        self.svd = None",
     "parameter named `self`"),
    ("class A:\n    def f(self, v):\n        self.svd = v\nA.f(torch.linalg, None)",
     "through its instances"),
    ("class A:\n    def f(self, v):\n        self.svd = v\nB = A\nB.f(torch.linalg, None)",
     "only available to create instances"),
    ("class A:\n    def f(self, v):\n        self.svd = v\ntype(A()).f(torch.linalg, None)",
     "attributes of `type(...)`"),
    ("torch.nn.Module.__init__(torch.linalg)", "`super().__init__`"),
    # the grader's fifth attack, H1: library routines that run code they are handed
    ("from numpy.lib.format import read_array", "read_array"),
    ("import numpy\na = numpy.lib.format.read_array(f, allow_pickle=True)", "format"),
    ("import numpy\na = numpy.load(f, allow_pickle=True)", "load"),
    ("a = g(f, allow_pickle=True)", "keyword argument `allow_pickle`"),
    ("from torch.utils.benchmark import Timer", "benchmark"),
    ("t = torch.utils.benchmark.Timer(stmt=s).timeit(1)", "benchmark"),
    ("import numpy.f2py", "f2py"),
    ("x = torch.testing.assert_close", "testing"),
    # H2: a cell too long to parse cheaply
    ("x = (" + "1," * 60_000 + ")", "at most 100000 are read"),
]


@pytest.mark.parametrize("source, why", REFUSED)
def test_the_policy_refuses_what_no_honest_solution_needs(source, why):
    with pytest.raises(policy.Refused, match=r"line \d+: .*") as refused:
        policy.check("import torch\n" + source, modules={"torch", "sys", "math"})
    assert why in str(refused.value), str(refused.value)
    assert refused.value.line >= 2      # the line of the cell (after the added import)


def test_the_policy_lets_an_honest_class_set_its_own_attributes():
    policy.check("import torch\nclass Adam:\n    def __init__(self, lr):\n        self.lr = lr\n"
                 "        setattr(self, 'state', {})\n    def step(self):\n        self.t += 1\n"
                 "        super().__init__()\n", modules={"torch"})


def test_the_policy_lets_honest_code_through():
    """What the tighter rules (red team H1-H3) still allow."""
    policy.check("import torch\nimport functools\nfrom functools import partial, reduce\n"
                 "from collections import Counter\nimport heapq\n"
                 "class Net(torch.nn.Module):\n    def __init__(self, d):\n"
                 "        super().__init__()\n        self.w = torch.nn.Linear(d, d)\n"
                 "    def forward(self, x):\n        return self.w(x)\n"
                 "    def __call__(self, x):\n        return self.forward(x)\n"
                 "net = Net(3)\nf = functools.partial(max, 0)\ns = '{0:.3f} {name}'.format(1.0, "
                 "name='x')\nt = f'{net}'\nh = []\nheapq.heappush(h, 1)\n"
                 "total = reduce(lambda a, b: a + b, [1, 2])\nok = isinstance(net, Net)\n"
                 "match h:\n    case [x]:\n        pass\n", modules={"torch"})


def test_every_reference_solution_passes_the_policy():
    """The policy against the course: every solution cell of every chapter (the cells
    ``make student`` blanks out), with the names its setup cell imports."""
    from mathref.student import make_student_notebook
    checked = 0
    for path in NOTEBOOKS:
        nb = read(path)
        setup = next(c.source for c in nb.cells if c.cell_type == "code")
        modules = policy.imported_names(setup)
        student = make_student_notebook(nb)
        solutions = [c for c in nb.cells
                     if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])]
        blanks = [c for c in student.cells
                  if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])]
        assert len(solutions) == len(blanks) >= 4, path
        for cell in solutions + blanks:
            policy.check(cell.source, modules)
            checked += 1
    assert checked >= 2 * 4 * len(NOTEBOOKS)


def test_names_never_become_paths():
    """Finding 4: a student's row gives a file name of [A-Za-z0-9_-] only; names that NFKC
    turns into a path are refused."""
    from mathref.grade.collect import file_label, path_like, student_name
    for name in ("\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fsubs\uff0falice.ipynb",
                 "\uff0fwork\uff0fnotebooks\uff0f01_gradient_descent.ipynb", "..\uff3cx.ipynb",
                 "\uff0e\uff0e.ipynb"):
        assert path_like(name), name
        label = file_label(student_name(name))
        assert "/" not in label and "." not in label and label.strip("_-"), label
    assert file_label("ada") == "ada" and path_like("ada.ipynb") is None
    assert file_label("zoe [name clash: x]") != file_label("zoe [name clash: y]")
    assert all(ch.isalnum() or ch in "_-" for ch in file_label("../../etc/passwd"))


def test_the_student_snapshot_has_no_checkers(tmp_path):
    """Finding 5: what the sandbox imports as mathref has no checkers (their reference
    computations stay with the grader); check calls there only say so."""
    from mathref.grade.execute import _Session
    from mathref.grade.selftest import selftest_assignment
    nbformat.write(selftest_assignment(False), tmp_path / "a.ipynb")
    from mathref.grade import load_assignment
    session, other = (_Session(load_assignment(tmp_path / "a.ipynb")) for _ in range(2))
    try:
        checks = session.student_lib / "mathref" / "checks"
        # the rules, the gate and the allowances the student's process applies; no checker
        assert sorted(p.name for p in checks.iterdir()) == [
            "__init__.py", "allowances.py", "core.py", "gate.py"]
        assert not any(re.search(r"^(@exercise\(|def check_ch)", p.read_text(), re.M)
                       for p in checks.iterdir())
        assert (session.lib / "mathref" / "checks" / "ch01.py").exists()
        assert session.seed != other.seed          # each run draws its own inputs
    finally:
        session.close()
        other.close()


def test_the_worker_cannot_put_its_objects_into_the_checkers_arguments():
    """In-place changes come back as data only: a handle never replaces one of the checker's
    values (it could answer every later question as it likes)."""
    handle = rpc.Handle(None, 1, "float", "")
    xs = [1.0, 2.0, [3.0]]
    rpc.write_back(xs, [handle, 2.0, [3.0]])
    assert xs == [1.0, 2.0, [3.0]]
    rpc.write_back(xs, [1.0, 5.0, [4.0]])
    assert xs == [1.0, 5.0, [4.0]]
    t = torch.zeros(3)
    rpc.write_back(t, torch.ones(3))
    assert torch.equal(t, torch.ones(3))


def test_the_worker_cannot_be_traced_by_what_the_student_starts():
    """Defence in depth behind the policy: the worker makes itself non-dumpable before any
    student code runs, so a process of the same user in the sandbox cannot ptrace it or write
    its memory through /proc/PID/mem."""
    import subprocess
    import sys
    probe = ("import ctypes\nfrom mathref.grade.worker import _not_dumpable\n"
             "libc = ctypes.CDLL(None)\nbefore = libc.prctl(3, 0, 0, 0, 0)\n"
             "_not_dumpable()\nprint(before, libc.prctl(3, 0, 0, 0, 0))\n")   # PR_GET_DUMPABLE
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True, env=dict(os.environ))
    assert run.stdout.split() == ["1", "0"], run.stdout


class _FakeWorker:
    """A worker whose solution is ``print``, for the verifier's own logic."""
    def ask(self, message, deadline):
        return None if message["kind"] == "setup" else ([print], {})

    def close(self):
        pass


def test_the_worker_cannot_read_the_secret_or_the_inputs_seed_from_the_rng_state(monkeypatch):
    """Red team H6: the worker gets the global generators' state with each call; that state
    is seeded from an HMAC of the run's secret, so reading it (the first 8 bytes of
    torch.get_rng_state() are the seed) tells neither the secret nor the seed of the checker's
    ``generator=``, nor the next exercise's."""
    from mathref.grade import selftest, verify
    seen = []

    def checker(f, generator=None):
        state = torch.get_rng_state()[:8].tolist()
        seen.append((generator.initial_seed(), sum(b << (8 * i) for i, b in enumerate(state))))

    monkeypatch.setitem(selftest.CHECKS, "zz-probe", checker)
    secret = 123456789
    job = {"setup": "", "exercise_timeout": 5, "seed": secret,
           "exercises": [{"label": "zz-probe", "number": n, "solution": "", "check": "",
                          "checker": "x"} for n in (0, 1)]}
    verdicts = []
    verify.verify(job, lambda *v: verdicts.append(v), connect=lambda exercise: _FakeWorker())
    assert [v[1] for v in verdicts] == ["pass", "pass"], verdicts
    (gen0, leak0), (gen1, leak1) = seen
    assert len({gen0, gen1, leak0, leak1, secret}) == 5
    assert leak0 == verify.derived_seed(secret, "global", 0)
    assert gen0 == verify.derived_seed(secret, "generator", 0)


def test_a_forbidden_function_is_looked_up_as_it_was_before_the_solution_ran(monkeypatch):
    """Red team H3, defence in depth: the worker resolves an exercise's forbidden names in a
    snapshot taken after the setup cell, so rebinding ``mathref.optim.warmup_cosine`` to a decoy
    (were the policy to let it through) leaves the real function guarded."""
    import mathref.optim
    from mathref.checks import core
    from mathref.grade import worker
    real = mathref.optim.warmup_cosine
    monkeypatch.setattr(worker, "_MODULES", {})
    monkeypatch.setattr(worker, "_CLASSES", {})
    worker._snapshot()
    monkeypatch.setattr(core, "_resolve", worker._resolve)
    monkeypatch.setattr(mathref.optim, "warmup_cosine", lambda *a, **k: 0.0)
    monkeypatch.setattr(torch.Tensor, "backward", lambda *a, **k: None)
    assert worker._resolve("mathref.optim.warmup_cosine") is real
    assert worker._resolve("torch.Tensor.backward") is not torch.Tensor.backward
    rule = core.Forbidden(["mathref.optim.warmup_cosine"], "ch06-x")
    with pytest.raises(BaseException), rule:
        real(5, 4, 20, 1.0, 0.0)
    assert rule.hits
    assert real(5, 4, 20, 1.0, 0.0) > 0          # restored after the rule


def _slow_message(n):
    """A stored torch.save archive whose pickle builds ``n`` empty dicts: ~2n bytes that take
    the weights-only unpickler seconds per megabyte (red team H5)."""
    buffer = io.BytesIO()
    torch.save(None, buffer)
    packed = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as src, \
            zipfile.ZipFile(packed, "w", zipfile.ZIP_STORED) as dst:
        for entry in src.infolist():
            data = src.read(entry.filename)
            if entry.filename.endswith("data.pkl"):
                data = b"\x80\x02]" + b"}a" * n + b"."
            dst.writestr(zipfile.ZipInfo(entry.filename), data)
    return packed.getvalue()


def test_a_message_is_decoded_within_the_exercise_deadline():
    """Red team H5: decoding stops at the deadline (the verifier's whole exercise), however
    long the message would take to unpickle; without a deadline the same message loads."""
    import time
    data = _slow_message(500_000)
    assert len(torch.load(io.BytesIO(data), weights_only=True)) == 500_000
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: os.write(w, len(data).to_bytes(8, "little") + data))
    writer.start()
    start = time.monotonic()
    with pytest.raises(rpc.ChannelTimeout):
        rpc.read_message(r, start + 0.2)
    assert time.monotonic() - start < 1.0
    writer.join()
    os.close(r)
    os.close(w)


def test_the_verifier_has_its_own_memory_limit():
    """Red team H5: the trusted verifier runs outside the submission's memory cgroup, under an
    address-space limit of its own, well below this machine's memory."""
    from mathref.grade import sandbox
    assert sandbox.VERIFIER_LIMITS["as"] <= 4 * 2 ** 30
    assert rpc.MAX_MESSAGE <= 64 * 2 ** 20


def test_a_checkers_message_reaches_the_report_whole(monkeypatch):
    """A checker's refusal names what ran, what the exercise allows and a hint: the verifier
    passes it on whole (it was cut at 300 characters, mid-sentence), while an error's text is
    still cut short."""
    from mathref.checks.core import ExerciseCheckFailed
    from mathref.grade import selftest, verify
    long = "your solution ran torch foo; " + "this exercise allows x. " * 40 + "END"

    def refusing(f, generator=None):
        raise ExerciseCheckFailed("zz-long", long)

    def crashing(f, generator=None):
        raise RuntimeError("x" * 1000)

    monkeypatch.setitem(selftest.CHECKS, "zz-long", refusing)
    monkeypatch.setitem(selftest.CHECKS, "zz-crash", crashing)
    job = {"setup": "", "exercise_timeout": 5, "seed": 1,
           "exercises": [{"label": label, "number": n, "solution": "", "check": "",
                          "checker": "x"} for n, label in enumerate(["zz-long", "zz-crash"])]}
    verdicts = []
    verify.verify(job, lambda *v: verdicts.append(v), connect=lambda exercise: _FakeWorker())
    assert verdicts[0] == ("zz-long", "fail", long), verdicts[0]
    assert verdicts[1][1] == "error" and len(verdicts[1][2]) == 300, verdicts[1]
