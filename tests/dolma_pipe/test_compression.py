"""One vocabulary of compressions (file names, Dolma's config names, extensions, members) and one
mapping of the errors that stop a file's reading to quarantine kinds, whichever reader met them."""

from __future__ import annotations

import gzip
import io
import zlib

import pytest
import zstandard

from dolma_pipe.compression import CONFIG_NAMES, Codec, decompressed, gzip_member
from dolma_pipe.documents import compression_of, read_documents
from dolma_pipe.quarantine import FILE_KINDS, Quarantine
from mixers.reading import mix_file
from mixers.rules import StreamRules


@pytest.mark.parametrize(
    "name,codec",
    [
        ("a.jsonl", Codec.NONE),
        ("a.json.GZ", Codec.GZIP),
        ("a.jsonl.zst", Codec.ZSTD),
        ("a.jsonl.zstd", Codec.ZSTD),
        ("a.parquet", Codec.NONE),
    ],
)
def test_a_file_name_says_its_codec(name, codec):
    assert Codec.of_path(name) is codec
    assert compression_of(name) == ("parquet" if name.endswith(".parquet") else codec.value)


def test_config_names_are_dolmas():
    assert {name: Codec.named(name) for name in CONFIG_NAMES} == {"gz": Codec.GZIP, "zst": Codec.ZSTD, "zstd": Codec.ZSTD, "": Codec.NONE}
    assert Codec.named(Codec.ZSTD) is Codec.ZSTD
    with pytest.raises(ValueError, match="unknown compression 'gzip'"):
        Codec.named("gzip")
    assert [c.extension for c in Codec] == [".gz", ".zst", ""]


@pytest.mark.parametrize("codec", list(Codec))
def test_members_are_deterministic_and_join_into_one_stream(codec):
    a, b = b'{"id":"a"}\n' * 100, b'{"id":"b"}\n' * 50
    joined = codec.compress(a) + codec.compress(b, level=1) + codec.compress(b"")
    assert codec.compress(a) == codec.compress(a)
    assert b"".join(decompressed(io.BytesIO(joined), "x", codec)) == a + b
    if codec is Codec.GZIP:
        assert gzip.decompress(joined) == a + b  # any gzip reader reads the members as one stream
        assert gzip_member(a) == codec.compress(a, level=6)


def _broken_files(tmp_path):
    good = b"".join(b'{"id": "d%d", "text": "document %d"}\n' % (i, i) for i in range(40))
    packed = gzip.compress(good, mtime=0)
    frames = zstandard.ZstdCompressor().compress(good)
    files = {
        "cut.jsonl.gz": packed[: len(packed) // 2],
        "junk.jsonl.gz": packed + b"trailing junk",
        "zlib.jsonl.gz": zlib.compress(good)[:-9],  # a zlib stream under a .gz name, cut
        "cut.jsonl.zst": frames[:-7],
        "empty.jsonl.gz": b"",
        "blank.jsonl": b"\n  \n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return [tmp_path / name for name in files] + [tmp_path / "missing.jsonl"]


def test_every_reader_quarantines_a_broken_file_alike(tmp_path):
    """``read_documents`` and the mixer's line blocks quarantine a truncated or corrupt archive, an
    empty file and a missing one as the same kind, with the same message where the decoder is the
    same (gzip is inflated by zlib-rs in the mixer: it may recover fewer lines and word its errors
    otherwise, but a truncation is ``truncated_archive`` in both)."""
    rules = StreamRules(attribute_sets=())
    for path in _broken_files(tmp_path):
        by_documents, by_mixer = Quarantine(), Quarantine()
        list(read_documents(str(path), by_documents))
        mix_file(rules, str(path), by_mixer, lambda result: None)
        ours, theirs = ([r for r in q.records if r.kind in FILE_KINDS] for q in (by_documents, by_mixer))
        assert len(ours) == 1 and [r.kind for r in theirs] == [ours[0].kind], path.name
        assert ours[0].kind == EXPECTED[path.name]
        if path.name == "cut.jsonl.gz":
            assert ours[0].message == theirs[0].message == f"{path}: truncated gzip archive (stream ended early)"
        elif not path.name.endswith(".gz"):
            assert [(r.line, r.kind, r.message) for r in theirs] == [(r.line, r.kind, r.message) for r in ours], path.name
        assert by_mixer.notes == by_documents.notes


EXPECTED = {
    "cut.jsonl.gz": "truncated_archive",
    "junk.jsonl.gz": "corrupt_archive",
    "zlib.jsonl.gz": "truncated_archive",
    "cut.jsonl.zst": "truncated_archive",
    "empty.jsonl.gz": "empty_file",
    "blank.jsonl": "empty_file",
    "missing.jsonl": "unreadable",
}
