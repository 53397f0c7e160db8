"""The channel between the grader's checker (the trusted verifier) and a student's worker.

Every message is ``torch.save`` of nested tuples, lists, dicts, strings, numbers and tensors,
read back with ``torch.load(weights_only=True)`` (never arbitrary pickle), from a zip archive
whose entries are stored, not compressed, so a message cannot unpack to more than its size.

The two ends are not alike, because only one of them is trusted:

- the **worker** (untrusted, in the sandbox) keeps its objects (the student's functions, what
  they return) and sends *handles*: the grader's :class:`Handle` forwards calls, attribute
  reads, ``len``, iteration and indexing to the worker, which answers them;
- the **grader** never lets the worker reach one of its objects: it serves no request at all.
  What its checker passes to a student's function travels as data: plain values and tensors;
  an instance of a course or PyTorch class (an ``nn.Module``, an autograd ``Value``) as its
  class name and its attributes, rebuilt in the worker; a checker's own function (a test
  function such as ``lambda x: x ** 3``) as its compiled code and the values it closes over,
  rebuilt in the worker too (so a checker must not pass a function that closes over an
  expected answer); a library function or class by its name. An object the worker rebuilt
  comes back as a reference to the grader's original, so identity (``order[-1] is root``)
  survives the trip. The grader decodes what it receives within a budget: shared references
  decoded once, at most :data:`MAX_ITEMS` values and :data:`MAX_TOTAL_ELEMENTS` tensor
  elements per message, of at most :data:`MAX_MESSAGE` bytes (the course's largest message,
  chapter 11's large derive-the-backward cases, is about 1.3 MB), and
  unpickled before the exercise's deadline (red team H5).

The grader may also have the worker run one of the checker's own functions (sent as code, as
above) on one of the worker's objects (:func:`apply`), for what cannot cross the channel, such
as autograd through a student's output; the result comes back as data.

While the grader waits for a reply, the worker may only reply: a request from it ends the
exchange (:class:`ChannelClosed`). The worker, waiting for the grader, answers the grader's
requests about its objects as they come.
"""
import builtins
import collections
import contextlib
import importlib
import io
import marshal
import math
import os
import select
import signal
import struct
import threading
import time
import types
import zipfile

import torch

MAX_MESSAGE = 16 * 2 ** 20    # bytes: a larger message is refused (the course's: about 1.3 MB)
MAX_ITEMS = 1_000_000         # elements of one container, and of an iteration
MAX_DEPTH = 64                # nesting of containers
MAX_ELEMENTS = 2 ** 26        # elements of one tensor or array (256 MiB of float32)
MAX_TOTAL_ELEMENTS = 2 ** 27  # tensor elements in one message (shared tensors counted once)
# where the classes and functions the grader sends by name or rebuilds may come from
_LIBRARIES = ("torch", "mathref", "math", "cmath", "numpy", "collections", "functools",
              "operator", "builtins", "random")


class ChannelClosed(BaseException):
    """The other process ended (or broke the protocol). A BaseException, so that no checker's
    ``except Exception`` can turn it into an ordinary verdict."""


class ChannelTimeout(BaseException):
    """The other process did not answer before the deadline."""


class RemoteError(Exception):
    """An exception raised on the other side; ``remote_type`` is its class name."""

    remote_type = "Exception"


_SAFE_BUILTIN_ERRORS = {cls.__name__: cls for cls in (
    ValueError, TypeError, RuntimeError, IndexError, KeyError, AttributeError, NameError,
    ZeroDivisionError, OverflowError, ArithmeticError, AssertionError, NotImplementedError,
    RecursionError, LookupError, UnboundLocalError, StopIteration, MemoryError)}


def remote_exception(type_name, message):
    """An exception to raise locally for one raised on the other side. Built-in error types
    are rebuilt as themselves (so ``NotImplementedError`` still means "not attempted"); any
    other name, KeyboardInterrupt and SystemExit included, becomes an ordinary Exception with
    that name, which no checker can mistake for a control-flow signal."""
    type_name = "".join(ch for ch in str(type_name)[:80] if ch.isalnum() or ch == "_") or "Error"
    message = str(message)[:2000]
    if type_name in ("CheckFailure", "ForbiddenCall"):
        from mathref.checks import core
        return getattr(core, type_name)(message)
    if type_name in _SAFE_BUILTIN_ERRORS:
        return _SAFE_BUILTIN_ERRORS[type_name](message)
    cls = type(type_name, (RemoteError,), {"remote_type": type_name})
    return cls(message)


# ---------------------------------------------------------------------------------- framing

def _read_exactly(fd, n, deadline):
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout()
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise ChannelTimeout()
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise ChannelClosed("the other process closed the channel")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_message(fd, deadline=None):
    (size,) = struct.unpack("<Q", _read_exactly(fd, 8, deadline))
    if size > MAX_MESSAGE:
        raise ChannelClosed(f"a message of {size} bytes (more than {MAX_MESSAGE})")
    data = _read_exactly(fd, size, deadline)
    try:
        _stored_only(data)
        with _until(deadline):
            return torch.load(io.BytesIO(data), weights_only=True)
    except ChannelClosed:
        raise
    except Exception as err:
        raise ChannelClosed(f"an unreadable message ({type(err).__name__})") from None


@contextlib.contextmanager
def _until(deadline):
    """Raise ChannelTimeout in the block once ``deadline`` passes (red team H5: a small
    message can take minutes to unpickle). Only in the main thread (SIGALRM); elsewhere, or
    without a deadline, no limit but the message's size."""
    if deadline is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise ChannelTimeout()

    def on_alarm(signum, frame):
        raise ChannelTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, left)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _stored_only(data):
    """Refuse an archive whose entries are compressed or add up to more than its size: torch
    reads deflated entries too, and 5 KB can then unpack to gigabytes."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        entries = archive.infolist()
        if len(entries) > 10_000 or any(e.compress_type != zipfile.ZIP_STORED or
                                        e.file_size != e.compress_size for e in entries) \
                or sum(e.file_size for e in entries) > len(data):
            raise ChannelClosed("a compressed or inflated message")


def write_message(fd, message):
    buffer = io.BytesIO()
    torch.save(message, buffer)
    data = buffer.getvalue()
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"the value is too large to send ({len(data)} bytes)")
    view = memoryview(struct.pack("<Q", len(data)) + data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        raise ChannelClosed("the other process closed the channel") from None


# --------------------------------------------------------------------------------- encoding

class Handle:
    """A proxy for an object that lives in the other process."""

    __slots__ = ("_endpoint", "_id", "_type", "_name", "__weakref__")
    # (mathref.checks.core.is_remote knows it by its type: rules travel with calls to it)

    def __init__(self, endpoint, ident, type_name, name):
        object.__setattr__(self, "_endpoint", endpoint)
        object.__setattr__(self, "_id", ident)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_name", name)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._endpoint.request("getattr", self._id, name)

    def __setattr__(self, name, value):
        raise AttributeError("objects of the other process cannot be modified from here")

    def __len__(self):
        return self._endpoint.request("len", self._id)

    def __iter__(self):
        return iter(self._endpoint.request("iter", self._id))

    def __getitem__(self, key):
        return self._endpoint.request("getitem", self._id, key)

    def __repr__(self):
        return f"<{self._type} {self._name}>" if self._name else f"<{self._type}>"


class CallableHandle(Handle):
    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return self._endpoint.request("call", self._id, args, kwargs)

    @property
    def __name__(self):
        return self._name or self._type


def checked_tensor(t):
    """``t`` if it is a plain tensor whose every element has storage of its own, else
    ChannelClosed. ``torch.load`` keeps a saved view's sizes and strides, so without this a
    1.5 KB message could carry an expanded (stride 0) tensor of billions of elements that the
    first arithmetic on it would make real in the trusted process."""
    if t.layout != torch.strided or t.is_quantized or t.is_nested or t.numel() > MAX_ELEMENTS:
        raise ChannelClosed(f"a tensor the grader does not accept ({t.layout}, {t.numel()} elements)")
    if t.numel() == 0:
        return t
    dims = sorted((st, n) for n, st in zip(t.shape, t.stride()) if n > 1)
    reach = 0                        # the furthest element offset of the dims taken so far
    for stride, size in dims:        # no stride tricks: each dim steps past all smaller ones
        if stride <= reach:
            raise ChannelClosed("a tensor whose elements overlap in storage (an expanded view)")
        reach += (size - 1) * stride
    if (t.storage_offset() + reach + 1) * t.element_size() > t.untyped_storage().nbytes():
        raise ChannelClosed("a tensor larger than its storage")
    return t


def _is_numpy(value):
    return type(value).__module__ == "numpy"


def _library(module):
    """Whether a class or function of ``module`` may be sent by name (never the checkers)."""
    return isinstance(module, str) and module.split(".")[0] in _LIBRARIES and \
        not module.startswith("mathref.checks")


def _global_names(code):
    """The global names a code object (and the code nested in it) may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


class Endpoint:
    """One end of the channel: reads from ``rfd``, writes to ``wfd``. ``trusted`` is the
    grader's end (it sends its objects as data and serves nothing); the worker's end sends
    handles and serves requests about its objects. ``deadline`` (a time.monotonic() value or
    None) bounds every wait for the other side."""

    def __init__(self, rfd, wfd, trusted):
        self.rfd, self.wfd = rfd, wfd
        self.trusted = trusted
        # id -> one of this side's objects that the other side may refer to: on the worker,
        # an object it sent a handle to; on the grader, an object it sent by value
        self.objects = {}
        self.sent = {}           # id(object) -> its id in self.objects
        self.handles = {}        # id -> Handle to an object of the other side (grader only)
        self.origin = {}         # worker: id(rebuilt object) -> (object, the grader's id)
        self.next_id = 1
        self.deadline = None
        self.context_out = None  # () -> dict sent with each call (rng state...)
        self.context_in = None   # (dict) -> None, applied when a call arrives

    def _ident(self, value):
        ident = self.sent.get(id(value))
        if ident is None or self.objects.get(ident) is not value:
            ident = self.next_id
            self.next_id += 1
            self.objects[ident] = value
            self.sent[id(value)] = ident
        return ident

    # encoding
    def encode(self, value, depth=0, memo=None):
        memo = {} if memo is None else memo
        if depth > MAX_DEPTH * 4:
            raise ValueError("the value is nested too deeply to send")
        if value is None or type(value) in (bool, int, str, float):
            return ("v", value)
        if isinstance(value, Handle) and value._endpoint is self:
            return ("r", value._id)
        if isinstance(value, torch.Tensor):
            if not self.trusted and type(value) not in (torch.Tensor, torch.nn.Parameter):
                raise ValueError(f"a {type(value).__name__[:60]} (a subclass of torch.Tensor, "
                                 "whose methods are the student's code) cannot be sent: return "
                                 "a plain torch.Tensor")
            if not self.trusted and any(hasattr(torch.Tensor, k) for k in vars(value)):
                raise ValueError("a tensor with methods of the student's own (instance "
                                 "attributes) cannot be sent: return a plain torch.Tensor")
            if value.is_sparse or value.device.type == "meta":
                raise ValueError("sparse and meta tensors cannot be sent")
            t = value.detach().to("cpu")
            with torch.inference_mode(False):
                t = t.clone() if not t.is_inference() else torch.empty_like(t).copy_(t)
            return ("T", t, bool(value.requires_grad), isinstance(value, torch.nn.Parameter))
        if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
            if isinstance(value, complex):
                return ("c", value.real, value.imag)
            return ("v", int(value) if isinstance(value, int) else float(value))
        if _is_numpy(value):
            import numpy as np
            if isinstance(value, np.ndarray):
                if value.dtype.kind in "biufc":
                    return ("np", torch.from_numpy(np.ascontiguousarray(value)).clone())
            elif isinstance(value, np.generic):
                return self.encode(value.item(), depth + 1, memo)
        if isinstance(value, torch.Size):
            return ("S", [int(x) for x in value])
        if isinstance(value, torch.dtype):
            return ("dt", str(value).replace("torch.", ""))
        if isinstance(value, torch.device):
            return ("dev", str(value))
        if isinstance(value, slice):
            return ("sl",) + tuple(self.encode(x, depth + 1, memo)
                                   for x in (value.start, value.stop, value.step))
        if type(value) in (list, tuple, set, frozenset):
            if len(value) > MAX_ITEMS:
                raise ValueError("a container too large to send")
            tag = {list: "l", tuple: "t", set: "set", frozenset: "fset"}[type(value)]
            return (tag, [self.encode(v, depth + 1, memo) for v in value])
        if type(value) is dict or (isinstance(value, dict) and type(value).__module__ == "collections"):
            if len(value) > MAX_ITEMS:
                raise ValueError("a container too large to send")
            return ("d", [(self.encode(k, depth + 1, memo), self.encode(v, depth + 1, memo))
                          for k, v in value.items()],
                    isinstance(value, collections.OrderedDict))
        if type(value) is range:
            return ("rg", value.start, value.stop, value.step)
        if self.trusted:
            return self._by_value(value, depth, memo)
        entry = self.origin.get(id(value))
        if entry is not None and entry[0] is value:   # rebuilt here from the grader's object
            return ("r", entry[1])
        ident = self._ident(value)    # the same object always gets the same handle
        name = getattr(value, "__name__", "") if callable(value) else ""
        return ("h", ident, bool(callable(value)), type(value).__name__[:60],
                name if isinstance(name, str) else "")

    def _by_value(self, value, depth, memo):
        """The grader's object as data the worker rebuilds (see the module's docstring)."""
        if isinstance(value, types.ModuleType):
            if _library(value.__name__):
                return ("mod", value.__name__)
            raise ValueError(f"the module {value.__name__} cannot be sent")
        named = isinstance(value, (type, types.BuiltinFunctionType)) or (
            isinstance(value, types.FunctionType) and "<locals>" not in value.__qualname__
            and _library(value.__module__))
        if named:
            module = getattr(value, "__module__", None) or getattr(
                getattr(value, "__self__", None), "__name__", None)
            if _library(module) and isinstance(getattr(value, "__qualname__", None), str):
                return ("name", module, value.__qualname__)
            raise ValueError(f"{value!r:.80} cannot be sent to the student's process")
        if isinstance(value, types.MethodType):
            return ("meth", self.encode(value.__self__, depth + 1, memo), value.__func__.__name__)
        ident = self._ident(value)
        if ident in memo:                      # already in this message: the same object
            return ("same", ident)
        memo[ident] = True
        if isinstance(value, types.FunctionType):   # a checker's own function: its code
            code = value.__code__
            cells = [self.encode(c.cell_contents, depth + 1, memo) if _filled(c) else None
                     for c in (value.__closure__ or ())]
            names = [(name, self._optional(value.__globals__[name], depth, memo))
                     for name in sorted(_global_names(code)) if name in value.__globals__]
            names = [(name, encoded) for name, encoded in names if encoded is not None]
            return ("fn", ident, marshal.dumps(code), value.__name__, names, cells,
                    self.encode(value.__defaults__, depth + 1, memo),
                    self.encode(value.__kwdefaults__, depth + 1, memo))
        cls = type(value)
        if not _library(cls.__module__) or "<locals>" in cls.__qualname__ \
                or not hasattr(value, "__dict__"):
            raise ValueError(f"a {cls.__name__} cannot be sent to the student's process")
        attrs = [(k, self._optional(v, depth, memo)) for k, v in vars(value).items()]
        return ("obj", ident, cls.__module__, cls.__qualname__,
                [(k, v) for k, v in attrs if v is not None])

    def _optional(self, value, depth, memo):
        """The encoding of an attribute or global, or None where it cannot be sent (it is
        then left out; the rebuilt object has what its class gives it)."""
        trial = dict(memo)
        try:
            encoded = self.encode(value, depth + 1, trial)
        except ValueError:
            return None
        memo.update(trial)
        return encoded

    def decode(self, item):
        """The value ``item`` (a received message's part) stands for. Shared parts are decoded
        once; the grader's end stops at MAX_ITEMS values and MAX_TOTAL_ELEMENTS elements."""
        return self._decode(item, 0, {"memo": {}, "made": {}, "items": 0, "elements": 0})

    def _decode(self, item, depth, state):
        key = id(item)
        if key in state["memo"]:
            return state["memo"][key][1]
        value = self._decode_new(item, depth, state)
        state["memo"][key] = (item, value)   # item kept alive: its id stays its own
        return value

    def _decode_new(self, item, depth, state):
        state["items"] += 1
        if depth > MAX_DEPTH * 4 or not isinstance(item, tuple) or not item \
                or state["items"] > MAX_ITEMS:
            raise ChannelClosed("a malformed or too large value")
        tag = item[0]
        sub = lambda x: self._decode(x, depth + 1, state)  # noqa: E731
        if tag == "v":
            value = item[1]
            if value is None or type(value) in (bool, int, float, str):
                return value
        elif tag == "T" and isinstance(item[1], torch.Tensor):
            t = checked_tensor(item[1])
            state["elements"] += t.numel()
            if state["elements"] > MAX_TOTAL_ELEMENTS:
                raise ChannelClosed("a message with too many tensor elements")
            if not self.trusted and len(item) > 3 and item[3]:
                return torch.nn.Parameter(t, requires_grad=bool(item[2]))
            if item[2] and (t.is_floating_point() or t.is_complex()):
                t = t.requires_grad_()
            return t
        elif tag == "c":
            return complex(float(item[1]), float(item[2]))
        elif tag == "np" and isinstance(item[1], torch.Tensor):
            t = checked_tensor(item[1])
            state["elements"] += t.numel()
            if state["elements"] > MAX_TOTAL_ELEMENTS:
                raise ChannelClosed("a message with too many tensor elements")
            return t.numpy()
        elif tag == "S":
            return torch.Size([int(x) for x in item[1]])
        elif tag == "dt":
            dtype = getattr(torch, str(item[1]), None)
            if isinstance(dtype, torch.dtype):
                return dtype
        elif tag == "dev":
            return torch.device(str(item[1]))
        elif tag == "sl" and len(item) == 4:
            return slice(*(sub(x) for x in item[1:4]))
        elif tag in ("l", "t", "set", "fset") and isinstance(item[1], list):
            values = [sub(x) for x in item[1]]
            return {"l": list, "t": tuple, "set": set, "fset": frozenset}[tag](values)
        elif tag == "d" and isinstance(item[1], list):
            kind = collections.OrderedDict if not self.trusted and item[2:3] == (True,) else dict
            return kind((sub(k), sub(v)) for k, v in item[1])
        elif tag == "rg":
            return range(int(item[1]), int(item[2]), int(item[3]))
        elif tag == "r":
            if item[1] in self.objects:
                return self.objects[item[1]]
            raise ChannelClosed("a reference to an unknown object")
        elif tag == "h" and len(item) == 5 and self.trusted:
            ident = int(item[1])
            if ident not in self.handles:
                cls = CallableHandle if item[2] else Handle
                self.handles[ident] = cls(self, ident, str(item[3])[:60], str(item[4])[:60])
            return self.handles[ident]
        elif not self.trusted:
            return self._rebuild(item, sub, state)
        raise ChannelClosed(f"a malformed value (tag {str(tag)[:20]!r})")

    def _rebuild(self, item, sub, state):
        """Worker side: an object, function, class or module the grader sent as data."""
        tag = item[0]
        if tag == "mod":
            return importlib.import_module(item[1])
        if tag == "name":
            value = importlib.import_module(item[1])
            for part in item[2].split("."):
                value = getattr(value, part)
            return value
        if tag == "same":
            return state["made"][item[1]]
        if tag == "meth":
            return getattr(sub(item[1]), str(item[2]))
        if tag == "obj":
            _, ident, module, qualname, attrs = item
            cls = self._rebuild(("name", module, qualname), sub, state)
            value = cls.__new__(cls)
            state["made"][ident] = value
            self.origin[id(value)] = (value, ident)
            for key, encoded in attrs:
                object.__setattr__(value, key, sub(encoded))
            return value
        if tag == "fn":
            _, ident, code, name, names, cells, defaults, kwdefaults = item
            scope = {"__builtins__": builtins}
            closure = tuple(types.CellType() for _ in cells)
            value = types.FunctionType(marshal.loads(code), scope, name, None, closure)
            state["made"][ident] = value
            self.origin[id(value)] = (value, ident)
            for cell, encoded in zip(closure, cells):
                if encoded is not None:
                    cell.cell_contents = sub(encoded)
            scope.update((key, sub(encoded)) for key, encoded in names)
            value.__defaults__, value.__kwdefaults__ = sub(defaults), sub(kwdefaults)
            return value
        raise ChannelClosed(f"a malformed value (tag {str(tag)[:20]!r})")

    # requests
    def request(self, op, ident, *payload):
        message = {"kind": "request", "op": op, "id": ident,
                   "payload": [self.encode(p) for p in payload]}
        if self.context_out is not None:
            message["context"] = self.context_out()
        write_message(self.wfd, message)
        return self.wait_reply(payload if op == "call" else None)

    def wait_reply(self, call_payload=None):
        while True:
            message = read_message(self.rfd, self.deadline)
            if not isinstance(message, dict):
                raise ChannelClosed("a malformed message")
            kind = message.get("kind")
            if kind == "request":
                if self.trusted:   # the grader's objects stay its own: nothing is served
                    raise ChannelClosed("a request to the grader, which serves none")
                self.serve(message)
                continue
            if kind != "reply":
                raise ChannelClosed("a malformed message")
            if message.get("context") is not None and self.context_in is not None:
                self.context_in(message["context"])
            if call_payload is not None and message.get("args_after") is not None:
                args, kwargs = call_payload
                after_args, after_kwargs = self.decode(message["args_after"])
                for old, new in zip(args, after_args):
                    write_back(old, new)
                for key, old in kwargs.items():
                    if key in after_kwargs:
                        write_back(old, after_kwargs[key])
            if "error" in message:
                type_name, text = message["error"]
                raise remote_exception(type_name, text)
            return self.decode(message["value"])

    def serve(self, message):
        """Worker side: answer one request of the grader about one of this side's objects."""
        assert not self.trusted
        reply = {"kind": "reply"}
        args_after = None
        try:
            op, ident = message.get("op"), message.get("id")
            if ident not in self.objects:
                raise LookupError("an unknown object")
            target = self.objects[ident]
            payload = [self.decode(p) for p in message.get("payload", [])]
            if self.context_in is not None and message.get("context") is not None:
                self.context_in(message["context"])
            if op == "call":
                args, kwargs = payload
                value = self.call_local(target, args, kwargs)
                args_after = (args, kwargs)
            elif op == "apply":      # the grader's own function, run here on the object
                fn, args, kwargs = payload
                if not isinstance(fn, types.FunctionType) or self.origin.get(id(fn), (None,))[0] is not fn:
                    raise ValueError("apply runs a function the grader sent")
                # (the rules hold around the student's object, as where the checker calls it
                # itself: the checker's own code, such as autograd through the output, runs after)
                value = fn(lambda *a, **k: self.call_local(target, a, k), *args, **kwargs)
            elif op in _READS:    # runs the object's own code, so under the rules as a call
                value = self.read_local(_READS[op], (target, *payload))
            else:
                raise ValueError(f"unknown request {op!r}")
            reply["value"] = self.encode(value)
            if args_after is not None:
                try:
                    reply["args_after"] = self.encode(args_after)
                except Exception:
                    pass
        except (ChannelClosed, ChannelTimeout):
            raise
        except BaseException as err:  # noqa: B036 - a student's KeyboardInterrupt is an answer too
            reply.pop("value", None)
            reply["error"] = (type(err).__name__, str(err))
        if self.context_out is not None:
            reply["context"] = self.context_out()
        write_message(self.wfd, reply)

    def call_local(self, target, args, kwargs):
        return target(*args, **kwargs)

    def read_local(self, read, args):
        return read(*args)


def _read_attribute(target, name):
    name = str(name)
    if name.startswith("__"):
        raise AttributeError(f"{name} cannot be read from the other process")
    return getattr(target, name)


def _iterate(target):
    items = []
    for item in target:
        items.append(item)
        if len(items) > MAX_ITEMS:
            raise ValueError("an iteration too long to send")
    return items


# the reads of an object the other side may request (each runs the object's own code)
_READS = {"getattr": _read_attribute, "len": len, "iter": _iterate,
          "getitem": lambda target, key: target[key]}


def apply(handle, fn, *args, **kwargs):
    """``fn(target, *args, **kwargs)`` run in the worker, ``target`` the object ``handle`` stands
    for and ``fn`` a checker's plain function (sent as its code, like any the checker passes):
    what must happen where the student's objects live, such as autograd through a student's
    output, whose graph never crosses the channel. The result comes back as data."""
    return handle._endpoint.request("apply", handle._id, fn, args, kwargs)


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _plain(value, depth=0):
    """Whether ``value`` is data only (no handle, no object): what may be written back."""
    if value is None or type(value) in (bool, int, float, complex, str) \
            or isinstance(value, torch.Tensor):
        return True
    if depth < MAX_DEPTH and type(value) in (list, tuple):
        return all(_plain(v, depth + 1) for v in value)
    if depth < MAX_DEPTH and type(value) is dict:
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


def write_back(old, new):
    """Copy the other side's in-place changes of an argument into the local original: data
    only (a handle never replaces a value of the checker's)."""
    if not _plain(new):
        return
    try:
        if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor):
            if old.shape == new.shape and old.dtype == new.dtype:
                if not torch.equal(old.detach(), new.detach()):
                    with torch.no_grad():
                        old.copy_(new)
        elif type(old) is list and type(new) is list:
            if len(old) == len(new):
                for i, (a, b) in enumerate(zip(old, new)):
                    if isinstance(a, (torch.Tensor, list, dict)) and type(a) is type(b):
                        write_back(a, b)
                    elif a is not b and not _same(a, b):
                        old[i] = b
            else:
                old[:] = new
        elif type(old) is dict and type(new) is dict:
            for key in list(old):
                if key not in new:
                    del old[key]
            for key, b in new.items():
                a = old.get(key, None)
                if key in old and isinstance(a, (torch.Tensor, list, dict)) and type(a) is type(b):
                    write_back(a, b)
                elif key not in old or not _same(a, b):
                    old[key] = b
    except Exception:
        pass


def _same(a, b):
    try:
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False
