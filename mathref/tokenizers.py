"""Tokenizers and embedding lookups: text → token ids → vectors. See chapter 10.

- ``CharTokenizer``: one token per character of a fixed alphabet.
- ``ByteFallbackTokenizer``: the same alphabet plus the 256 bytes; a character outside the
  alphabet is written as its UTF-8 bytes (SentencePiece's byte fallback), so every ``str``
  encodes.
- ``BPETokenizer``: byte-level byte-pair encoding. Training counts adjacent pairs of token
  ids, merges the most frequent pair into a new id, and repeats; encoding applies the learned
  merges in the order they were learned. Ids 0..255 are the 256 single bytes, so every byte
  string (and every ``str``, through UTF-8) can be encoded and decoded back exactly.
- ``embed``, ``embed_one_hot`` and ``Embedding``: the lookup E[ids], which equals
  one_hot(ids) E.
"""
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import torch
from torch import nn

from mathref._validation import check_choice, check_int, check_tensor

__all__ = ["GPT2_SPLIT_PATTERN", "CharTokenizer", "ByteFallbackTokenizer", "BPETokenizer",
           "pair_counts", "merge_pair", "most_frequent_pair", "embed", "embed_one_hot", "Embedding"]

# Pre-tokenization in the style of GPT-2: text is cut into chunks (a word with its leading
# space, a number, a run of punctuation, whitespace) and merges never cross a chunk boundary.
# GPT-2 uses \p{L} and \p{N} (the `regex` module); Python's re has neither, and [^\W\d_] and \d
# come close but not exactly: [^\W\d_] also matches non-decimal numerals such as ², ½ and Ⅻ
# (re.findall on "x²" gives ['x²'], GPT-2's pattern ['x', '²']). The alternatives cover every
# character, so the chunks always concatenate back to the text.
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""


class CharTokenizer:
    """One token per character: ids 0..V−1 index the sorted alphabet. See chapter 10.

    ``CharTokenizer.from_text(text)`` builds the alphabet from a text; characters outside it
    cannot be encoded (a ValueError names them).
    """

    def __init__(self, chars):
        if not isinstance(chars, (str, list, tuple)):
            raise TypeError(f"chars must be a str or a list of characters, got "
                            f"{type(chars).__name__}")
        chars = list(chars)
        if len(set(chars)) != len(chars) or any(not isinstance(c, str) or len(c) != 1
                                                 for c in chars):
            raise ValueError("chars must be distinct single characters")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, text):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        unknown = sorted(set(text) - self.stoi.keys())
        if unknown:
            raise ValueError(f"characters not in the alphabet: {unknown[:10]}")
        return [self.stoi[c] for c in text]

    def decode(self, ids):
        ids = _id_list(ids, "ids")
        bad = [i for i in ids if not 0 <= i < len(self.chars)]
        if bad:
            raise ValueError(f"ids out of range [0, {len(self.chars)}): {bad[:10]}")
        return "".join(self.chars[i] for i in ids)


class ByteFallbackTokenizer(CharTokenizer):
    """A character vocabulary with byte fallback, as SentencePiece's ``byte_fallback`` option
    does (the library is Kudo and Richardson 2018's; the option came later). See chapter 10.

    Ids 0..V−1 are the V characters of the alphabet (as in ``CharTokenizer``; ``from_text``
    sorts them) and ids V..V+255 the 256 byte values (SentencePiece's ``<0x00>`` … ``<0xFF>``).
    A character of the alphabet is one token; any other character is written as the byte tokens
    of its UTF-8 encoding, so every str encodes and decodes back exactly, and an unknown
    character costs as many tokens as it has UTF-8 bytes (1 to 4).
    """

    @property
    def vocab_size(self):
        return len(self.chars) + 256

    def encode(self, text):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        first_byte, ids = len(self.chars), []
        for c in text:
            i = self.stoi.get(c)
            if i is None:
                ids.extend(first_byte + b for b in c.encode("utf-8"))
            else:
                ids.append(i)
        return ids

    def decode(self, ids, errors="replace"):
        """The text of a sequence of ids. Consecutive byte tokens are decoded together as UTF-8;
        a run that is not valid UTF-8 (a character cut in two) follows ``errors`` (U+FFFD by
        default)."""
        check_choice("errors", errors, ("strict", "replace", "ignore", "backslashreplace"))
        ids = _id_list(ids, "ids")
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids out of range [0, {self.vocab_size}): {bad[:10]}")
        first_byte, out, run = len(self.chars), [], bytearray()
        for i in ids:
            if i >= first_byte:
                run.append(i - first_byte)
                continue
            if run:
                out.append(run.decode("utf-8", errors=errors))
                run.clear()
            out.append(self.chars[i])
        if run:
            out.append(run.decode("utf-8", errors=errors))
        return "".join(out)


def pair_counts(chunks, counts=None):
    """Occurrences of each adjacent pair (a, b) inside each chunk, never across chunks.
    ``chunks`` is a list of id sequences; ``counts`` gives each chunk a weight (default 1).
    See chapter 10."""
    result = Counter()
    for k, ids in enumerate(chunks):
        weight = 1 if counts is None else counts[k]
        for pair in zip(ids, ids[1:]):
            result[pair] += weight
    return result


def most_frequent_pair(counts):
    """The pair with the largest count; ties go to the smallest pair (a, b) in lexicographic
    order, so training is deterministic. See chapter 10."""
    if not counts:
        raise ValueError("no pairs to merge: every chunk has a single token")
    return max(counts.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))[0]


def merge_pair(ids, pair, new_id):
    """Replace every occurrence of ``pair`` in ``ids`` by ``new_id``, scanning left to right
    (so (a, a) in [a, a, a] gives [new, a]). See chapter 10."""
    a, b = pair
    out, i, n = [], 0, len(ids)
    while i < n:
        if i + 1 < n and ids[i] == a and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class BPETokenizer:
    """Byte-level byte-pair encoding (Gage 1994; Sennrich et al. 2016; GPT-2). See chapter 10.

    Ids 0..255 are single bytes, id 256 + r is the token made by merge r, and special tokens
    (BOS, EOS, PAD, ...) come last. ``vocab_size`` counts all of them.
    """

    def __init__(self, merges=(), special_tokens=(), pattern=GPT2_SPLIT_PATTERN):
        if isinstance(special_tokens, str) or any(not isinstance(t, str) for t in special_tokens):
            raise TypeError(f"special_tokens must be a list of strings, got {special_tokens!r}")
        if pattern is not None and not isinstance(pattern, str):
            raise TypeError(f"pattern must be a regular expression string or None, got "
                            f"{type(pattern).__name__}")
        self.pattern = pattern
        self._split = re.compile(pattern) if pattern is not None else None
        self.merges = [tuple(int(x) for x in m) for m in merges]
        self.ranks = {}
        self.vocab = {i: bytes([i]) for i in range(256)}
        for r, (a, b) in enumerate(self.merges):
            if not (a < 256 + r and b < 256 + r):
                raise ValueError(f"merge {r} = {(a, b)} uses an id that does not exist yet")
            self.ranks[(a, b)] = r
            self.vocab[256 + r] = self.vocab[a] + self.vocab[b]
        first = 256 + len(self.merges)
        self.special_tokens = {s: first + k for k, s in enumerate(special_tokens)}
        if len(self.special_tokens) != len(special_tokens) or "" in self.special_tokens:
            raise ValueError(f"special tokens must be distinct non-empty strings, got "
                             f"{list(special_tokens)}")
        self.special_ids = {i: s for s, i in self.special_tokens.items()}
        self._special_split = (re.compile("(" + "|".join(map(re.escape, sorted(
            self.special_tokens, key=len, reverse=True))) + ")") if self.special_tokens else None)
        self._cache = {}
        self.merge_counts = None  # set by train(): how often each merged pair occurred

    # ---------------------------------------------------------------- training
    @classmethod
    def train(cls, text, vocab_size, special_tokens=(), pattern=GPT2_SPLIT_PATTERN):
        """Learn vocab_size − 256 − len(special_tokens) merges from ``text`` (str or bytes).

        Repeat: count adjacent pairs inside every chunk (weighted by how often the chunk
        occurs), merge the most frequent pair into a new id. Only the chunks that contain the
        merged pair are updated, and their pair counts adjusted incrementally.

        Special tokens are document boundaries, not text: the corpus is first cut at every
        occurrence of their strings (which are dropped), so no merge is ever learned from
        them (no (``<``, ``|``)) and no pair crosses them.

        Tie-break rule: when several pairs have the same largest count, the merge is the
        smallest pair (a, b) in lexicographic order of the ids (``most_frequent_pair``). Other
        implementations differ (GPT-2 style code often takes the pair seen first, some the
        lexicographically largest pair of *bytes*), so merge lists learned from the same text
        can differ in the order of tied merges.
        """
        if isinstance(special_tokens, str):
            raise TypeError(f"special_tokens must be a list of strings, got the str "
                            f"{special_tokens!r}")
        special_tokens = tuple(special_tokens)
        vocab_size = check_int("vocab_size", vocab_size)
        num_merges = vocab_size - 256 - len(special_tokens)
        if num_merges < 0:
            raise ValueError(f"vocab_size must be an integer ≥ 256 + {len(special_tokens)} "
                             f"special tokens, got {vocab_size!r}")
        data = _as_bytes(text, "text")
        split = re.compile(pattern) if pattern else None
        words = Counter()
        for part in _split_on_specials(data, special_tokens):
            words.update(_split_bytes(part, split))
        chunks = [list(w) for w in words]
        freq = list(words.values())
        counts = pair_counts(chunks, freq)
        where = defaultdict(set)  # pair → indices of the chunks that contain it
        for k, ids in enumerate(chunks):
            for pair in zip(ids, ids[1:]):
                where[pair].add(k)
        merges, merge_counts = [], []
        for r in range(num_merges):
            if not counts:
                raise ValueError(f"the text allows only {r} merges, but vocab_size asks for "
                                 f"{num_merges}")
            pair = most_frequent_pair(counts)
            new_id = 256 + r
            merges.append(pair)
            merge_counts.append(counts[pair])
            for k in where.pop(pair):
                old = chunks[k]
                new = merge_pair(old, pair, new_id)
                if len(new) == len(old):
                    continue
                for p in zip(old, old[1:]):
                    counts[p] -= freq[k]
                    if counts[p] == 0:
                        del counts[p]
                for p in zip(new, new[1:]):
                    counts[p] += freq[k]
                    where[p].add(k)
                chunks[k] = new
            counts.pop(pair, None)
        tokenizer = cls(merges, special_tokens, pattern)
        tokenizer.merge_counts = merge_counts
        return tokenizer

    # ---------------------------------------------------------------- encoding
    @property
    def vocab_size(self):
        return 256 + len(self.merges) + len(self.special_tokens)

    def _encode_chunk(self, chunk):
        cached = self._cache.get(chunk)
        if cached is not None:
            return cached
        ids = list(chunk)
        while len(ids) >= 2:
            # the earliest-learned merge present in the chunk is the next one to apply
            pair = min(zip(ids, ids[1:]), key=lambda p: self.ranks.get(p, float("inf")))
            if pair not in self.ranks:
                break
            ids = merge_pair(ids, pair, 256 + self.ranks[pair])
        if len(self._cache) < 200_000:
            self._cache[chunk] = ids
        return ids

    def encode_bytes(self, data):
        """Token ids of a byte string (special tokens are never recognized in bytes)."""
        ids = []
        for chunk in _split_bytes(_as_bytes(data, "data"), self._split):
            ids.extend(self._encode_chunk(chunk))
        return ids

    def encode(self, text, allowed_special=True):
        """Token ids of a str (UTF-8 bytes). With ``allowed_special``, occurrences of the
        special tokens' strings become their ids; otherwise they are ordinary text."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__} (use "
                            f"encode_bytes for bytes)")
        if not (allowed_special and self._special_split):
            return self.encode_bytes(text.encode("utf-8"))
        ids = []
        for k, part in enumerate(self._special_split.split(text)):
            if k % 2:
                ids.append(self.special_tokens[part])
            elif part:
                ids.extend(self.encode_bytes(part.encode("utf-8")))
        return ids

    def encode_iterable(self, lines, allowed_special=True):
        """Yield the token ids of the concatenation of ``lines`` (an iterable of str, e.g. an
        open text file), holding only a short tail of text in memory.

        The ids are exactly those of ``encode("".join(lines))``, and a text that ``encode``
        refuses (a lone surrogate, which UTF-8 cannot encode) raises the same
        UnicodeEncodeError. After each line, the text is encoded up to a point that more text
        cannot change: through the last complete special token, then every pre-tokenization
        chunk except the last two (whose extent can still change with the next characters) and
        except a suffix that could still grow into a special token. The rest waits for the next
        line.
        """
        specials = self._special_split if allowed_special else None
        buffer = ""
        for line in lines:
            if not isinstance(line, str):
                raise TypeError(f"lines must yield str, got {type(line).__name__}")
            buffer += line
            ids, buffer = self._encode_safe_prefix(buffer, specials)
            yield from ids
        if buffer:
            yield from self.encode(buffer, allowed_special=allowed_special)

    def _encode_safe_prefix(self, text, specials):
        """(ids of the part of ``text`` that appending text cannot change, the rest)."""
        ids, start, hold = [], 0, len(text)
        if specials is not None:
            for m in specials.finditer(text):
                start = m.end()
            if start:
                ids = self.encode(text[:start])        # ends with a complete special token
            for s in self.special_tokens:              # a suffix that may become a special
                for n in range(min(len(s) - 1, len(text) - start), 0, -1):
                    if text.endswith(s[:n]):
                        hold = min(hold, len(text) - n)
                        break
        if self._split is None:                        # no chunks: merges may span it all
            return ids, text[start:]
        chunks = list(self._split.finditer(text[start:hold]))
        if len(chunks) < 3:
            return ids, text[start:]
        for m in chunks[:-2]:
            ids.extend(self._encode_chunk(m.group().encode("utf-8")))   # strict, as encode
        return ids, text[start + chunks[-2].start():]

    def decode_bytes(self, ids):
        """The bytes of a sequence of ids (special tokens as their UTF-8 strings)."""
        ids = _id_list(ids, "ids")
        out = []
        for i in ids:
            i = int(i)
            if i in self.vocab:
                out.append(self.vocab[i])
            elif i in self.special_ids:
                out.append(self.special_ids[i].encode("utf-8"))
            else:
                raise ValueError(f"token id {i} is out of range [0, {self.vocab_size})")
        return b"".join(out)

    def decode(self, ids, errors="replace"):
        """The text of a sequence of ids. A sequence cut inside a multi-byte character is not
        valid UTF-8; ``errors="replace"`` shows it as U+FFFD instead of failing."""
        check_choice("errors", errors, ("strict", "replace", "ignore", "backslashreplace",
                                        "surrogateescape"))
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def token_bytes(self, i):
        """The bytes that token id ``i`` stands for."""
        return self.decode_bytes([i])

    # ---------------------------------------------------------------- files
    def save(self, path):
        """Write the tokenizer as JSON: the split pattern, the merges in order, the specials."""
        state = {"type": "mathref.BPETokenizer", "version": 1, "pattern": self.pattern,
                 "merges": [list(m) for m in self.merges],
                 "special_tokens": list(self.special_tokens)}
        Path(path).write_text(json.dumps(state), encoding="utf-8")

    @classmethod
    def load(cls, path):
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        if state.get("type") != "mathref.BPETokenizer":
            raise ValueError(f"{path} is not a saved mathref.BPETokenizer")
        return cls(state["merges"], state["special_tokens"], state["pattern"])


def _id_list(ids, name):
    """A sequence of token ids as Python ints; floats (1.7) and bools are refused, not cut."""
    if isinstance(ids, torch.Tensor):
        check_tensor(name, ids, dims=(0, 1), kind="int")
        return ids.reshape(-1).tolist()
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of integer token ids, got "
                        f"{type(ids).__name__}")
    return [check_int(f"{name}[{k}]", i) for k, i in enumerate(ids)]


def _as_bytes(data, name):
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    raise TypeError(f"{name} must be str or bytes, got {type(data).__name__}")


def _split_on_specials(data, special_tokens):
    """The parts of ``data`` between occurrences of the special tokens' strings (dropped)."""
    if not special_tokens:
        return [data]
    pattern = re.compile(b"|".join(re.escape(s.encode("utf-8")) for s in sorted(
        special_tokens, key=len, reverse=True)))
    return pattern.split(data)


def _split_bytes(data, split):
    """Cut bytes into chunks with the split pattern. Bytes that are not valid UTF-8 travel
    through the str regex as lone surrogates (errors="surrogateescape") and come back exact."""
    if split is None:
        return [data] if data else []
    text = data.decode("utf-8", errors="surrogateescape")
    return [m.encode("utf-8", errors="surrogateescape") for m in split.findall(text)]


# -------------------------------------------------------------------- embeddings
def _check_ids(ids, num_embeddings):
    if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"ids must be an integer tensor (int64 or int32), got "
                        f"{getattr(ids, 'dtype', type(ids).__name__)}")
    if ids.numel() and (ids.min() < 0 or ids.max() >= num_embeddings):
        raise IndexError(f"token ids must lie in [0, {num_embeddings}) for a table of "
                         f"{num_embeddings} rows, got ids from {ids.min().item()} to "
                         f"{ids.max().item()}: num_embeddings must exceed the largest id")


def embed(ids, weight):
    """The embedding lookup E[ids]: row ids[i] of the table for each id. See chapter 10."""
    _check_ids(ids, weight.shape[0])
    return weight[ids]


def embed_one_hot(ids, weight):
    """The same lookup as a matrix product, one_hot(ids) E, with one_hot of width V = rows
    of E. Costs V times more than indexing; shown to make the gradient obvious. See chapter 10.
    """
    _check_ids(ids, weight.shape[0])
    one_hot = torch.nn.functional.one_hot(ids.long(), weight.shape[0])   # one_hot takes int64 only
    return one_hot.to(weight.dtype) @ weight


class Embedding(nn.Module):
    """A learned table E of shape [num_embeddings, dim], initialized N(0, 1) like
    ``nn.Embedding``; forward(ids) = E[ids]. See chapter 10."""

    def __init__(self, num_embeddings, dim, device=None, dtype=None):
        super().__init__()
        num_embeddings = check_int("num_embeddings", num_embeddings, min=1)
        dim = check_int("dim", dim, min=1)
        self.weight = nn.Parameter(torch.randn(num_embeddings, dim, device=device, dtype=dtype))

    def forward(self, ids):
        return embed(ids, self.weight)
