"""mathref.tokenizers: exact round trips (hypothesis), the BPE hand trace, training against a
from-scratch oracle, save/load, and the embedding lookup against nn.Embedding."""
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from torch import nn

from mathref import tokenizers as tk
from mathref.tokenizers import BPETokenizer, ByteFallbackTokenizer, CharTokenizer

# Hypothesis keeps caches in ./.hypothesis by default; keep the checkout clean (pytest would
# otherwise warn about that folder on every later run).
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "mathref-hypothesis")

TRACE_TEXT = ("low low low low low lower lower newest newest newest newest newest newest "
              "widest widest widest")
SAMPLE = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"
          "First Citizen:\nYou are all resolved rather to die than to famish?\n") * 3


@pytest.fixture(scope="module")
def trained():
    return BPETokenizer.train(SAMPLE + "naïve café, 東京 🙂 " * 3, 256 + 60,
                              special_tokens=("<|bos|>", "<|eos|>", "<|pad|>"))


def naive_train(text, num_merges, pattern=tk.GPT2_SPLIT_PATTERN):
    """Oracle: recount every pair from scratch before each merge, apply merges to every chunk."""
    chunks = [list(m.encode("utf-8")) for m in re.findall(pattern, text)]
    merges, merged_counts = [], []
    for r in range(num_merges):
        counts = Counter()
        for ids in chunks:
            for i in range(len(ids) - 1):
                counts[(ids[i], ids[i + 1])] += 1
        best = max(sorted(counts), key=lambda p: counts[p])  # first in sorted order wins ties
        merges.append(best)
        merged_counts.append(counts[best])
        new_chunks = []
        for ids in chunks:
            out, i = [], 0
            while i < len(ids):
                if i + 1 < len(ids) and (ids[i], ids[i + 1]) == best:
                    out.append(256 + r)
                    i += 2
                else:
                    out.append(ids[i])
                    i += 1
            new_chunks.append(out)
        chunks = new_chunks
    return merges, merged_counts


def apply_merges_in_order(data, merges):
    """Oracle for encoding: apply each merge, in training order, to every chunk."""
    ids = []
    for m in re.findall(tk.GPT2_SPLIT_PATTERN, data.decode("utf-8", "surrogateescape")):
        chunk = list(m.encode("utf-8", "surrogateescape"))
        for r, (a, b) in enumerate(merges):
            chunk = tk.merge_pair(chunk, (a, b), 256 + r)
        ids += chunk
    return ids


def test_hand_trace_of_bpe_training():
    # Counted by hand in chapter 10: e+s and s+t both occur 9 times (ties go to the smaller
    # pair, 'e' < 's'), then es+t (9), l+o (7, tied with o+w), lo+w (7), then ' '+n (6, the
    # smallest of five pairs tied at 6).
    tok = BPETokenizer.train(TRACE_TEXT, 256 + 5)
    assert [tok.token_bytes(256 + r) for r in range(5)] == [b"es", b"est", b"lo", b"low", b" n"]
    assert tok.merges[:2] == [(ord("e"), ord("s")), (256, ord("t"))]
    ids = tok.encode(" lowest")
    assert [tok.token_bytes(i) for i in ids] == [b" ", b"low", b"est"]


def test_pair_counts_and_most_frequent_pair_by_hand():
    chunks = [[1, 2, 3], [1, 2], [3, 1]]
    assert tk.pair_counts(chunks) == Counter({(1, 2): 2, (2, 3): 1, (3, 1): 1})
    assert tk.pair_counts(chunks, [1, 5, 7]) == Counter({(1, 2): 6, (2, 3): 1, (3, 1): 7})
    assert tk.most_frequent_pair(Counter({(5, 1): 3, (2, 9): 3, (1, 1): 2})) == (2, 9)
    assert tk.merge_pair([7, 7, 7], (7, 7), 9) == [9, 7]
    assert tk.merge_pair([1, 2, 1, 2, 3], (1, 2), 9) == [9, 9, 3]
    with pytest.raises(ValueError, match="no pairs"):
        tk.most_frequent_pair(Counter())


@pytest.mark.parametrize("text, merges", [(TRACE_TEXT, 12), (SAMPLE, 40),
                                          ("aaaaaaa bbb aaaa ab ab abab", 6)])
def test_incremental_training_equals_recounting_from_scratch(text, merges):
    tok = BPETokenizer.train(text, 256 + merges)
    assert (tok.merges, tok.merge_counts) == naive_train(text, merges)


def test_encoding_applies_merges_in_training_order(trained):
    for text in [SAMPLE, "the lowest widest resolved speak", "naïve 東京 🙂", "x" * 17]:
        data = text.encode("utf-8")
        assert trained.encode_bytes(data) == apply_merges_in_order(data, trained.merges)


# Random text drawn mostly from the training alphabet, so that the merges actually apply (and
# chains of merges, overlapping runs and chunk boundaries occur), plus arbitrary text.
_MERGE_ALPHABET = sorted(set(SAMPLE + "naïve café, 東京 🙂 <|eos|>"))


@settings(max_examples=200, deadline=None, database=None)
@given(st.one_of(st.text(alphabet=st.sampled_from(_MERGE_ALPHABET), max_size=80), st.text()))
def test_encoding_applies_merges_in_training_order_on_random_text(text):
    data = text.encode("utf-8")
    assert BPE_FOR_PROPERTY.encode_bytes(data) == apply_merges_in_order(data, BPE_FOR_PROPERTY.merges)


def test_split_pattern_covers_every_character():
    text = "Hello, world!  It's 2024\t\n\n naïve_snake 東京🙂 \x00\u2028"
    assert "".join(re.findall(tk.GPT2_SPLIT_PATTERN, text)) == text


@settings(max_examples=200, deadline=None, database=None)
@given(st.text())
def test_bpe_round_trip_of_any_str(text):
    tok = BPE_FOR_PROPERTY
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode(text, allowed_special=False)) == text


@settings(max_examples=200, deadline=None, database=None)
@given(st.binary())
def test_bpe_round_trip_of_any_bytes(data):
    assert BPE_FOR_PROPERTY.decode_bytes(BPE_FOR_PROPERTY.encode_bytes(data)) == data


@settings(max_examples=100, deadline=None, database=None)
@given(st.text(min_size=1, max_size=200))
def test_char_tokenizer_round_trip_of_any_str(text):
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert len(ids) == len(text) and max(ids) < tok.vocab_size
    assert tok.decode(ids) == text


def hf_byte_fallback(chars):
    """Oracle: the Hugging Face tokenizers library's BPE with byte_fallback=True, no merges, and
    the vocabulary laid out as ByteFallbackTokenizer's (the characters, then <0x00> … <0xFF>)."""
    from tokenizers import Tokenizer, models

    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({f"<0x{b:02X}>": len(chars) + b for b in range(256)})
    return Tokenizer(models.BPE(vocab=vocab, merges=[], byte_fallback=True))


BYTE_FALLBACK_ALPHABET = sorted(set(SAMPLE))
HF_BYTE_FALLBACK = hf_byte_fallback(BYTE_FALLBACK_ALPHABET)


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(max_size=100))
def test_byte_fallback_matches_hugging_face_and_utf8(text):
    tok = ByteFallbackTokenizer(BYTE_FALLBACK_ALPHABET)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    if text:                                   # the library returns no ids for the empty string
        assert ids == HF_BYTE_FALLBACK.encode(text).ids
    # independently of both: a known character is one id, any other its UTF-8 bytes (str.encode)
    expected = []
    for c in text:
        if c in BYTE_FALLBACK_ALPHABET:
            expected.append(BYTE_FALLBACK_ALPHABET.index(c))
        else:
            expected.extend(len(BYTE_FALLBACK_ALPHABET) + b for b in c.encode("utf-8"))
    assert ids == expected
    assert max(ids, default=0) < tok.vocab_size == len(BYTE_FALLBACK_ALPHABET) + 256


def test_byte_fallback_by_hand_and_a_cut_character():
    tok = ByteFallbackTokenizer("ab ")
    assert tok.encode("a κ") == [0, 2, 3 + 0xCE, 3 + 0xBA]        # κ is U+03BA = CE BA in UTF-8
    assert tok.encode("東") == [3 + 0xE6, 3 + 0x9D, 3 + 0xB1]
    assert tok.decode([0, 3 + 0xE6, 3 + 0x9D, 1]) == "a\ufffdb"    # a character cut in two
    assert tok.decode([3 + 0xE6, 3 + 0x9D], errors="ignore") == ""
    with pytest.raises(UnicodeDecodeError):
        tok.decode([3 + 0xE6], errors="strict")
    with pytest.raises(ValueError, match="out of range"):
        tok.decode([3 + 256])
    with pytest.raises(TypeError):
        tok.encode(b"ab")


@settings(max_examples=50, deadline=None, database=None)
@given(st.text(min_size=2, max_size=300), st.integers(1, 30))
def test_bpe_trained_on_any_text_round_trips_it(text, merges):
    try:
        tok = BPETokenizer.train(text, 256 + merges)
    except ValueError as err:  # a text too short for that many merges
        assert "allows only" in str(err)
        return
    assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode(text)) <= len(text.encode("utf-8"))


BPE_FOR_PROPERTY = BPETokenizer.train(SAMPLE + "naïve café, 東京 🙂 <|eos|>", 256 + 50,
                                      special_tokens=("<|bos|>", "<|eos|>"))


def test_special_tokens(trained):
    bos, eos, pad = (trained.special_tokens[s] for s in ("<|bos|>", "<|eos|>", "<|pad|>"))
    assert (bos, eos, pad) == (316 - 3, 316 - 2, 316 - 1) and trained.vocab_size == 316
    ids = trained.encode("<|bos|>Speak, speak.<|eos|>")
    assert ids[0] == bos and ids[-1] == eos and bos not in ids[1:-1]
    assert trained.decode(ids) == "<|bos|>Speak, speak.<|eos|>"
    plain = trained.encode("<|bos|>", allowed_special=False)
    assert bos not in plain and trained.decode(plain) == "<|bos|>"


def test_save_load_round_trip(trained, tmp_path):
    path = tmp_path / "bpe.json"
    trained.save(path)
    loaded = BPETokenizer.load(path)
    assert loaded.merges == trained.merges and loaded.special_tokens == trained.special_tokens
    assert loaded.vocab == trained.vocab
    for text in [SAMPLE, "naïve café <|eos|> 🙂"]:
        assert loaded.encode(text) == trained.encode(text)
    (tmp_path / "other.json").write_text('{"type": "something else"}')
    with pytest.raises(ValueError, match="not a saved"):
        BPETokenizer.load(tmp_path / "other.json")


def test_tiny_shakespeare_prefix_compresses_and_round_trips(shakespeare_dir):
    text = (shakespeare_dir / "tinyshakespeare.txt").read_text(encoding="utf-8")
    tok = BPETokenizer.train(text[:100_000], 256 + 200)
    held_out = text[-20_000:]
    ids = tok.encode(held_out)
    assert tok.decode(ids) == held_out
    assert len(held_out.encode("utf-8")) / len(ids) > 1.6  # 200 merges: about 1.7 bytes/token
    assert tok.encode(" the") == [tok.encode(" the")[0]]  # a single token, space included


def test_bad_inputs_raise_clear_errors(trained):
    with pytest.raises(ValueError, match="vocab_size"):
        BPETokenizer.train("abc", 255)
    with pytest.raises(ValueError, match="allows only"):
        BPETokenizer.train("ab", 256 + 3)
    with pytest.raises(TypeError, match="str"):
        trained.encode(b"bytes")
    with pytest.raises(ValueError, match="out of range"):
        trained.decode([trained.vocab_size])
    with pytest.raises(ValueError, match="alphabet"):
        CharTokenizer.from_text("abc").encode("abd")
    with pytest.raises(ValueError, match="does not exist"):
        BPETokenizer([(300, 1)])


def test_embedding_lookup_equals_one_hot_product_and_nn_embedding(float64_device):
    gen = torch.Generator().manual_seed(0)
    table = nn.Embedding(11, 5, dtype=torch.float64).to(float64_device)
    ids = torch.randint(0, 11, (3, 7), generator=gen).to(float64_device)
    torch.testing.assert_close(tk.embed(ids, table.weight), table(ids), rtol=0, atol=0)
    torch.testing.assert_close(tk.embed_one_hot(ids, table.weight), table(ids))
    ours = tk.Embedding(11, 5, device=float64_device, dtype=torch.float64)
    ours.weight.data.copy_(table.weight.data)
    torch.testing.assert_close(ours(ids), F.embedding(ids, table.weight))


def test_embedding_gradients_match_nn_embedding(float64_device):
    gen = torch.Generator().manual_seed(1)
    W = torch.randn(9, 4, generator=gen, dtype=torch.float64).to(float64_device)
    ids = torch.tensor([[2, 5, 2], [7, 2, 0]], device=float64_device)
    up = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64).to(float64_device)
    grads = []
    for f in (tk.embed, tk.embed_one_hot, lambda i, w: F.embedding(i, w)):
        w = W.clone().requires_grad_(True)
        (f(ids, w) * up).sum().backward()
        grads.append(w.grad)
    torch.testing.assert_close(grads[0], grads[2])
    torch.testing.assert_close(grads[1], grads[2])
    # only the used rows get gradient, and row 2 (used three times) gets the sum
    used = torch.zeros(9, dtype=torch.bool, device=float64_device)
    used[ids.flatten()] = True
    assert (grads[0][~used] == 0).all() and (grads[0][used].abs().sum(-1) > 0).all()
    torch.testing.assert_close(grads[0][2], up[0, 0] + up[0, 2] + up[1, 1])
    assert torch.autograd.gradcheck(lambda w: tk.embed_one_hot(ids, w),
                                    (W.clone().requires_grad_(True),))


def test_embedding_accepts_int32_ids_like_nn_embedding():
    """int32 ids pass the ids check, so both lookups must take them (F.one_hot takes int64
    only); oracle: F.embedding on the same int32 ids, and the int64 result."""
    gen = torch.Generator().manual_seed(2)
    W = torch.randn(7, 3, generator=gen, dtype=torch.float64)
    ids64 = torch.randint(0, 7, (2, 5), generator=gen)
    ids32 = ids64.to(torch.int32)
    expected = F.embedding(ids32, W)
    torch.testing.assert_close(tk.embed(ids32, W), expected, rtol=0, atol=0)
    torch.testing.assert_close(tk.embed_one_hot(ids32, W), expected)
    torch.testing.assert_close(tk.embed_one_hot(ids32, W), tk.embed_one_hot(ids64, W), rtol=0, atol=0)
    assert tk.Embedding(7, 3, dtype=torch.float64)(ids32).shape == (2, 5, 3)


def test_embedding_rejects_ids_outside_the_table():
    W = torch.randn(5, 3)
    with pytest.raises(IndexError, match="num_embeddings must exceed the largest id"):
        tk.embed(torch.tensor([0, 5]), W)
    with pytest.raises(IndexError, match=r"\[0, 5\)"):
        tk.Embedding(5, 3)(torch.tensor([-1]))
    with pytest.raises(TypeError, match="integer tensor"):
        tk.embed_one_hot(torch.tensor([0.0, 1.0]), W)


def test_training_treats_special_tokens_as_boundaries():
    """Special tokens are cut out of the corpus before pairs are counted: no merge is built
    from their characters, and no pair spans them. Oracle: a from-scratch trainer on
    the chunks of each document, pre-tokenized separately, learns the same merges."""
    docs = ["the cat sat", "the cat ran", "a cat sat on the mat"] * 20
    specials = ("<|endoftext|>",)
    corpus = "<|endoftext|>".join(docs)
    tok = BPETokenizer.train(corpus, 256 + 15 + 1, special_tokens=specials)
    learned = [tok.token_bytes(256 + r) for r in range(len(tok.merges))]
    assert not any(b"<" in t or b"|" in t or b">" in t for t in learned), learned
    # the oracle: pre-tokenize each document separately, then train from scratch
    words = [w for d in docs for w in re.findall(tk.GPT2_SPLIT_PATTERN, d)]
    naive, _ = naive_train_chunks(words, 15)
    assert tok.merges == naive
    # without declaring the special token, its characters do get merged
    plain = BPETokenizer.train(corpus, 256 + 25)
    assert any(b"|" in plain.token_bytes(256 + r) for r in range(25))
    assert tok.encode("cat<|endoftext|>mat") == tok.encode("cat") + [tok.special_tokens[specials[0]]] + tok.encode("mat")


def naive_train_chunks(words, num_merges):
    """Oracle trainer on a given list of chunks (one entry per occurrence)."""
    chunks = [list(w.encode("utf-8")) for w in words]
    merges, counts_out = [], []
    for r in range(num_merges):
        counts = Counter()
        for ids in chunks:
            counts.update(zip(ids, ids[1:]))
        best = max(sorted(counts), key=lambda p: counts[p])
        merges.append(best)
        counts_out.append(counts[best])
        chunks = [tk.merge_pair(ids, best, 256 + r) for ids in chunks]
    return merges, counts_out


def test_tie_break_goes_to_the_smallest_pair():
    tok = BPETokenizer.train("cd ab cd ab", 256 + 1, pattern=None)
    # pairs (c,d), (d,␣), (␣,a), (a,b) all occur twice: the smallest, (␣, a) = (32, 97), wins
    assert tok.merges[0] == (32, 97)
    counts = Counter({(99, 100): 2, (97, 98): 2, (98, 32): 1})
    assert tk.most_frequent_pair(counts) == (97, 98)
    assert "smallest pair" in BPETokenizer.train.__doc__


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", " ", "\n", "\n\n", "  ", "'", "ll", "'s", ".", "!",
                                 "é", "東", "<|eos|>", "<|e", "os|>", "<", "|", "x y", "\t"]),
                max_size=40),
       st.lists(st.integers(0, 40), max_size=8), st.booleans())
def test_encode_iterable_equals_encoding_the_joined_text(trained, pieces, cuts, allowed):
    text = "".join(pieces)
    cuts = sorted({min(c, len(text)) for c in cuts})
    lines = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]
    got = list(trained.encode_iterable(iter(lines), allowed_special=allowed))
    assert got == trained.encode(text, allowed_special=allowed)


def test_encode_iterable_streams_a_file_with_bounded_memory(trained, tmp_path):
    path = tmp_path / "big.txt"
    path.write_text(SAMPLE * 40, encoding="utf-8")
    with open(path, encoding="utf-8") as f:
        stream = trained.encode_iterable(f)
        first = [next(stream) for _ in range(5)]          # ids arrive before the end of the file
        rest = list(stream)
    assert first + rest == trained.encode(SAMPLE * 40)
    # the buffer never holds more than a line plus a short tail
    longest = [0]
    original = trained._encode_safe_prefix

    def spy(text, specials):
        longest[0] = max(longest[0], len(text))
        return original(text, specials)

    trained._encode_safe_prefix = spy
    try:
        list(trained.encode_iterable((SAMPLE * 40).splitlines(keepends=True)))
    finally:
        del trained._encode_safe_prefix
    assert longest[0] < 200
    with pytest.raises(TypeError, match="str"):
        list(trained.encode_iterable([b"bytes"]))


def test_encode_iterable_refuses_a_lone_surrogate_as_encode_does(trained):
    # the tenth read's L7: the streamed chunks were encoded with surrogateescape, so a lone
    # surrogate (which encode refuses) came out as the byte 0x80
    text = "\udc80 ab cd ef gh\n"
    with pytest.raises(UnicodeEncodeError):
        trained.encode(text)
    with pytest.raises(UnicodeEncodeError):
        list(trained.encode_iterable([text, "x"]))
