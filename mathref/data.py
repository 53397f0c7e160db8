"""Data for the course: Tiny Shakespeare, found locally or downloaded once and verified.

Resolution order for ``tiny_shakespeare()``:
  1. ``$MATHREF_DATA/tinyshakespeare.txt`` (what tests and CI use); when MATHREF_DATA is set,
     this is the only place looked at: a folder without the file is an error, never a silent
     fallback to a cached or downloaded copy,
  2. the user cache ``$XDG_CACHE_HOME/mathref`` (default ``~/.cache/mathref``),
  3. a download from the canonical public URL into the cache.
Whichever file is found, its sha256 must match: a mismatch is an error, never a silent use.
"""
import hashlib
import os
import tempfile
import urllib.request
from pathlib import Path

import torch

from mathref._validation import check_int, check_number, check_tensor, resolve_device

__all__ = ["TINY_SHAKESPEARE_URL", "TINY_SHAKESPEARE_SHA256", "DataChecksumError",
           "tiny_shakespeare_path", "tiny_shakespeare", "sha256_of", "train_val_split", "get_batch"]

TINY_SHAKESPEARE_URL = ("https://raw.githubusercontent.com/karpathy/char-rnn/master/"
                        "data/tinyshakespeare/input.txt")
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TINY_SHAKESPEARE_FILE = "tinyshakespeare.txt"
CONNECT_TIMEOUT = 10      # seconds: a network that never answers fails fast, not after a minute


class DataChecksumError(RuntimeError):
    """A data file's sha256 is not the one the course expects."""


def sha256_of(path):
    """Hex sha256 digest of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify(path, expected):
    actual = sha256_of(path)
    if actual != expected:
        raise DataChecksumError(
            f"{path} has sha256 {actual}, but the course expects {expected}. "
            f"The file is corrupt or a different text: delete it (or fix $MATHREF_DATA) and "
            f"let mathref download it again.")
    return Path(path)


def _cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mathref"


def _download(url, target, expected):
    """Download to a temporary file next to ``target``, verify, then move it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, \
                urllib.request.urlopen(url, timeout=CONNECT_TIMEOUT) as response:
            out.write(response.read())
        _verify(tmp, expected)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return target


def tiny_shakespeare_path(download=True):
    """Path of a verified copy of Tiny Shakespeare (1,115,394 bytes), downloading it if needed."""
    env = os.environ.get("MATHREF_DATA", "").strip()
    if env:
        path = Path(env).expanduser() / TINY_SHAKESPEARE_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"MATHREF_DATA={env!r} is set but {path} does not exist. Put "
                f"{TINY_SHAKESPEARE_FILE} there, fix the path, or unset MATHREF_DATA to use the "
                f"cache ({_cache_dir()}) or a download.")
        return _verify(path, TINY_SHAKESPEARE_SHA256)
    candidates = []
    cached = _cache_dir() / TINY_SHAKESPEARE_FILE
    candidates.append(cached)
    for path in candidates:
        if path.is_file():
            return _verify(path, TINY_SHAKESPEARE_SHA256)
    if not download:
        raise FileNotFoundError(
            f"Tiny Shakespeare not found (looked in {', '.join(map(str, candidates))}) and "
            f"download=False")
    try:
        return _download(TINY_SHAKESPEARE_URL, cached, TINY_SHAKESPEARE_SHA256)
    except OSError as err:   # URLError, timeouts, refused connections: all OSError
        reason = getattr(err, "reason", None) or err
        message = (f"Tiny Shakespeare not found (looked in {', '.join(map(str, candidates))}) "
                   f"and the download from {TINY_SHAKESPEARE_URL} failed ({reason}). Put the "
                   f"file in one of those places or set MATHREF_DATA to the folder that holds "
                   f"{TINY_SHAKESPEARE_FILE}.")
    raise FileNotFoundError(message) from None   # short: no chained network traceback


def tiny_shakespeare(download=True):
    """The Tiny Shakespeare text as one string (40,000 lines of plays, 65 distinct characters)."""
    return tiny_shakespeare_path(download=download).read_text(encoding="utf-8")


# ---- batching for language models (chapter 14) --------------------------------------------
def train_val_split(ids, val_fraction=0.1):
    """Split a 1-D token tensor into a training head and a held-out tail (no shuffling, so
    no validation text leaks into training)."""
    check_tensor("ids", ids, dims=1)
    check_number("val_fraction", val_fraction, min=0.0, max=1.0, min_open=True, max_open=True)
    n_train = int(len(ids) * (1 - val_fraction))
    return ids[:n_train], ids[n_train:]


def get_batch(data, batch_size, block_size, generator=None, device=None):
    """Random windows of a 1-D token tensor: x = data[i : i+T], y = data[i+1 : i+T+1] (the
    targets are the inputs shifted by one). Returns two [B, T] int64 tensors."""
    check_tensor("data", data, kind="int")
    if data.dim() != 1:
        raise ValueError(f"data must be a 1-D tensor of token ids, got shape {tuple(data.shape)}")
    batch_size = check_int("batch_size", batch_size, min=1)
    block_size = check_int("block_size", block_size, min=1)
    device = resolve_device(device)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got "
                        f"{type(generator).__name__}")
    if len(data) <= block_size:
        raise ValueError(f"data has {len(data)} tokens, need more than block_size={block_size}")
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    offsets = torch.arange(block_size)
    x = data[starts[:, None] + offsets].long()
    y = data[starts[:, None] + offsets + 1].long()
    if device is not None:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    return x, y
