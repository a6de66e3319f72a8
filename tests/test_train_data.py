"""Token-shard dataset: instances, the seeded global order, rank slices, resume, fingerprints."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.train

from train.data import DataError, GlobalOrder, TokenDataset, check_fingerprint, eval_indices, token_dtype, write_shard  # noqa: E402


def shards(tmp_path, sizes=(50, 70, 33), dtype=np.uint16):
    for i, n in enumerate(sizes):
        # one document per shard: tokens 1000*i + 1 .. (EOS appended by write_shard)
        write_shard(tmp_path / "d" / f"part-{i:05d}.npy", [list(range(1000 * i + 1, 1000 * i + n))], eos_id=0, dtype=dtype)
    return str(tmp_path / "d")


def test_format_instances_and_sidecar(tmp_path):
    root = shards(tmp_path)
    ds = TokenDataset([root], seq_len=16, dtype=np.uint16, eos_id=0)
    assert [s.n_tokens for s in ds.shards] == [50, 70, 33]
    assert ds.n_instances == 3 + 4 + 2  # tails shorter than seq_len are dropped
    assert ds.instance(0).tolist() == list(range(1, 17))
    assert ds.instance(3).tolist() == list(range(1001, 1017))  # first window of shard 1
    assert ds.instance(8).tolist() == list(range(2017, 2033))
    raw = np.fromfile(tmp_path / "d" / "part-00000.npy", dtype=np.uint16)  # headerless memmap
    assert raw[-1] == 0 and len(raw) == 50
    rows = gzip.open(tmp_path / "d" / "part-00000.csv.gz", "rt").read().split()
    assert rows[0].split(",")[:2] == ["0", "50"]


def test_wrong_dtype_or_missing_eos_is_refused(tmp_path):
    root = shards(tmp_path, sizes=(51,), dtype=np.uint8)  # odd byte count
    with pytest.raises(DataError, match="not a multiple"):
        TokenDataset([root], 16, np.uint16)
    write_shard(tmp_path / "e" / "part-00000.npy", [[5] * 40], eos_id=9, dtype=np.uint32)
    assert TokenDataset([str(tmp_path / "e")], 16, np.uint32, eos_id=9).n_instances == 2
    with pytest.raises(DataError, match="EOS"):  # uint32 shard read as uint16: ends in EOS's high half
        TokenDataset([str(tmp_path / "e")], 16, np.uint16, eos_id=9)
    with pytest.raises(DataError, match="does not exist"):
        TokenDataset([str(tmp_path / "nope")], 16, np.uint16)
    assert token_dtype("auto", 50280) == np.uint16 and token_dtype("auto", 100278) == np.uint32


def test_order_is_seeded_permutation_per_epoch():
    o = GlobalOrder(10, seed=3)
    first = o.global_indices(0, 10)
    assert sorted(first.tolist()) == list(range(10))
    second = o.global_indices(10, 10)
    assert sorted(second.tolist()) == list(range(10)) and not np.array_equal(first, second)
    assert np.array_equal(GlobalOrder(10, 3).global_indices(0, 25), np.concatenate([first, second, o.perm(2)[:5]]))
    assert not np.array_equal(GlobalOrder(10, 4).global_indices(0, 10), first)


def test_ranks_partition_the_global_batch():
    o = GlobalOrder(100, seed=0)
    per_rank = [o.rank_indices(start=16, global_batch=8, rank=r, world=4) for r in range(4)]
    assert np.array_equal(np.concatenate(per_rank), o.global_indices(16, 8))
    with pytest.raises(DataError, match="divisible"):
        o.rank_indices(0, 6, 0, 4)


def test_resume_with_a_different_global_batch_sees_each_instance_once():
    n = 37
    o = GlobalOrder(n, seed=1)
    seen, start = [], 0
    for batch in [4, 4, 4, 6, 6, 2, 8, 3]:  # batch size changes at "resume" points
        seen += o.global_indices(start, batch).tolist()
        start += batch
    assert seen == GlobalOrder(n, 1).global_indices(0, start).tolist()
    assert sorted(seen[:n]) == list(range(n))


def test_fingerprint_tracks_the_data_not_its_location(tmp_path):
    a = TokenDataset([shards(tmp_path / "a")], 16, np.uint16)
    b = TokenDataset([shards(tmp_path / "b")], 16, np.uint16)
    assert a.fingerprint() == b.fingerprint()  # same shards in another folder
    assert TokenDataset([str(tmp_path / "a" / "d")], 8, np.uint16).fingerprint() != a.fingerprint()
    write_shard(tmp_path / "b" / "d" / "part-00001.npy", [list(range(2, 71))], eos_id=0)  # same size, new content
    changed = TokenDataset([str(tmp_path / "b" / "d")], 16, np.uint16).fingerprint()
    assert changed != a.fingerprint()
    with pytest.raises(DataError, match="allow_fingerprint_mismatch"):
        check_fingerprint(a.fingerprint(), changed, allow_mismatch=False)
    assert "accepted" in check_fingerprint(a.fingerprint(), changed, allow_mismatch=True)
    assert check_fingerprint(a.fingerprint(), a.fingerprint(), allow_mismatch=False) is None


def test_eval_indices_are_equal_per_rank_and_disjoint():
    parts = [eval_indices(11, 100, r, 2) for r in range(2)]
    assert len(parts[0]) == len(parts[1]) == 5
    assert sorted(np.concatenate(parts).tolist()) == list(range(10))
    assert len(eval_indices(11, 4, 0, 2)) == 2
