"""The verdicts a mix keeps per input file (mixers.verdicts): read back as written, the same bytes
on every write, and a damaged or foreign file read as none (the report then evaluates the rules)."""

from __future__ import annotations

import numpy as np

from dolma_pipe.filters import BatchResult, MixCounts
from mixers import verdicts


def _batch(lines: list[int], masks: list[int]) -> BatchResult:
    return BatchResult(out=b"", line_lengths=[], consumed=[], counts=MixCounts(), bad=[], matches=masks, lines=lines)


def test_round_trip_and_same_bytes(tmp_path):
    rec = verdicts.VerdictRecorder()
    rng = np.random.default_rng(0)
    lines = np.sort(rng.choice(np.arange(1, 200_000), 50_000, replace=False)).tolist()
    masks = rng.integers(0, 1 << 40, 50_000).tolist()
    rec.add(_batch(lines[:20_000], masks[:20_000]))
    rec.add(_batch(lines[20_000:], masks[20_000:]))
    path = str(tmp_path / "a" / "f.verdicts")
    rec.save(path)
    got = verdicts.load(path)
    assert got is not None
    assert got[0].tolist() == lines and got[1].tolist() == masks
    first = (tmp_path / "a" / "f.verdicts").read_bytes()
    rec.save(path)
    assert (tmp_path / "a" / "f.verdicts").read_bytes() == first


def test_an_empty_file_has_no_verdicts(tmp_path):
    path = str(tmp_path / "e.verdicts")
    verdicts.VerdictRecorder().save(path)
    got = verdicts.load(path)
    assert got is not None and len(got[0]) == 0 and len(got[1]) == 0


def test_damaged_or_missing_files_read_as_none(tmp_path):
    path = tmp_path / "d.verdicts"
    rec = verdicts.VerdictRecorder()
    rec.add(_batch([1, 2, 5], [0, 3, 1]))
    rec.save(str(path))
    good = path.read_bytes()
    assert verdicts.load(str(tmp_path / "missing.verdicts")) is None
    for bad in (good[:-3], good[:10], b"PK\x03\x04" + good[4:], good[:-1] + bytes([good[-1] ^ 0xFF])):
        path.write_bytes(bad)
        assert verdicts.load(str(path)) is None
