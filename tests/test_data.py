"""mathref.data: resolution order, checksum verification, clear errors."""
import hashlib
import io

import pytest

from mathref import data


def test_tiny_shakespeare_from_mathref_data(shakespeare_dir, monkeypatch):
    monkeypatch.setenv("MATHREF_DATA", str(shakespeare_dir))
    text = data.tiny_shakespeare(download=False)
    assert len(text.encode("utf-8")) == 1_115_394
    assert text.startswith("First Citizen:")
    assert hashlib.sha256(text.encode()).hexdigest() == data.TINY_SHAKESPEARE_SHA256


def test_mismatch_names_path_and_both_digests(tmp_path, monkeypatch):
    bad = tmp_path / "tinyshakespeare.txt"
    bad.write_text("not shakespeare")
    monkeypatch.setenv("MATHREF_DATA", str(tmp_path))
    actual = hashlib.sha256(b"not shakespeare").hexdigest()
    with pytest.raises(data.DataChecksumError) as err:
        data.tiny_shakespeare(download=False)
    message = str(err.value)
    assert str(bad) in message and actual in message and data.TINY_SHAKESPEARE_SHA256 in message


def test_cache_is_used_when_mathref_data_is_unset(tmp_path, monkeypatch, shakespeare_dir):
    monkeypatch.delenv("MATHREF_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "mathref").mkdir()
    (tmp_path / "mathref" / "tinyshakespeare.txt").write_bytes(
        (shakespeare_dir / "tinyshakespeare.txt").read_bytes())
    assert data.tiny_shakespeare_path(download=False).parent == tmp_path / "mathref"


def _fake_urlopen(payload):
    class Response(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    return lambda url, timeout=None: Response(payload)


def test_download_is_verified_and_cached(tmp_path, monkeypatch, shakespeare_dir):
    monkeypatch.delenv("MATHREF_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    payload = (shakespeare_dir / "tinyshakespeare.txt").read_bytes()
    monkeypatch.setattr(data.urllib.request, "urlopen", _fake_urlopen(payload))
    path = data.tiny_shakespeare_path()
    assert path == tmp_path / "mathref" / "tinyshakespeare.txt"
    assert path.read_bytes() == payload


def test_corrupt_download_is_rejected_and_not_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("MATHREF_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(data.urllib.request, "urlopen", _fake_urlopen(b"truncated"))
    with pytest.raises(data.DataChecksumError, match=hashlib.sha256(b"truncated").hexdigest()):
        data.tiny_shakespeare_path()
    assert list((tmp_path / "mathref").iterdir()) == []


def test_missing_file_without_download_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("MATHREF_DATA", raising=False)   # (a set MATHREF_DATA: test_faults.py)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match="download=False"):
        data.tiny_shakespeare(download=False)


def test_sha256_of_matches_the_fips_test_vector(tmp_path):
    path = tmp_path / "abc.txt"
    path.write_bytes(b"abc")                 # FIPS 180-2's example message
    assert data.sha256_of(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
