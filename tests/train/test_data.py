"""Token-shard dataset: instances, the seeded global order, rank slices, resume, fingerprints."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.train

from train.data import DataError, GlobalOrder, TokenDataset, check_fingerprint, eval_indices, token_dtype, validate_shards  # noqa: E402
from train.testing import write_shard  # noqa: E402


def shards(tmp_path, sizes=(50, 70, 33), dtype=np.uint16):
    for i, n in enumerate(sizes):
        # one document per shard: tokens 1000*i + 1 .. (EOS appended by write_shard)
        write_shard(
            tmp_path / "d" / f"part-{i:05d}.npy", [list(range(1000 * i + 1, 1000 * i + n))], eos_id=0, vocab_size=2**16, dtype=dtype
        )
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
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "part-00000.npy").write_bytes(bytes(51))  # odd byte count
    with pytest.raises(DataError, match="not a multiple"):
        TokenDataset([str(tmp_path / "odd")], 16, np.uint16)
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
    write_shard(tmp_path / "b" / "d" / "part-00001.npy", [list(range(2, 71))], eos_id=0, vocab_size=2**16)  # new content
    changed = TokenDataset([str(tmp_path / "b" / "d")], 16, np.uint16).fingerprint()
    assert changed != a.fingerprint()
    with pytest.raises(DataError, match="allow_fingerprint_mismatch"):
        check_fingerprint(a.fingerprint(), changed, allow_mismatch=False)
    assert "accepted" in check_fingerprint(a.fingerprint(), changed, allow_mismatch=True)
    assert check_fingerprint(a.fingerprint(), a.fingerprint(), allow_mismatch=False) is None


def test_eval_indices_cover_every_instance_on_any_rank_count():
    """Every rank gets the same number of slots (FSDP needs every rank in every forward); the
    ranks short of it get -1 slots (masked out of the loss); no instance is left out."""
    for n, world in [(11, 1), (11, 2), (11, 3), (11, 4), (12, 4), (3, 4)]:
        parts = [eval_indices(n, 100, r, world) for r in range(world)]
        assert {len(p) for p in parts} == {-(-n // world)}, (n, world)
        flat = np.concatenate(parts)
        assert sorted(flat[flat >= 0].tolist()) == list(range(n)), (n, world)
        assert (flat < 0).sum() == len(flat) - n
    assert eval_indices(11, 100, 1, 4).tolist() == [1, 5, 9]
    assert eval_indices(11, 100, 3, 4).tolist() == [3, 7, -1]
    assert eval_indices(11, 4, 0, 2).tolist() == [0, 2]  # val_max_instances caps it


def test_order_is_uint32_and_cached_once_as_a_file(tmp_path, monkeypatch):
    n, seed = 1000, 7
    reference = [np.random.default_rng([seed, e]).permutation(n) for e in range(3)]  # the int64 original
    mem = GlobalOrder(n, seed)
    assert mem.perm(0).dtype == np.uint32 and np.array_equal(mem.perm(0), reference[0])
    barriers = []
    cached = GlobalOrder(n, seed, cache_dir=tmp_path / "c", barrier=lambda: barriers.append(1))
    got = cached.global_indices(0, 3 * n)
    assert got.dtype == np.int64 and np.array_equal(got, np.concatenate(reference))
    assert len(barriers) == 3  # once per epoch, not per step
    files = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert files == [f"order-seed7-epoch{e}-n1000.uint32" for e in (1, 2)]  # epoch 0 pruned (< 2 - 1)
    assert (tmp_path / "c" / files[-1]).stat().st_size == 4 * n
    # a reader (not the writer rank) or a restarted run maps the file and never reshuffles
    monkeypatch.setattr(GlobalOrder, "_compute", lambda self, e: pytest.fail("recomputed"))
    reader = GlobalOrder(n, seed, cache_dir=tmp_path / "c", is_writer=False)
    assert isinstance(reader.perm(2), np.memmap) and np.array_equal(reader.global_indices(2 * n + 5, 10), reference[2][5:15])
    with pytest.raises(DataError, match="missing or truncated"):
        GlobalOrder(n, seed + 1, cache_dir=tmp_path / "c", is_writer=False).perm(0)


def test_token_ids_and_sidecars_are_checked_once_per_dataset(tmp_path, monkeypatch):
    import train.data as data

    root = shards(tmp_path)  # token ids up to 2032
    ds = TokenDataset([root], 16, np.uint16)
    with pytest.raises(DataError, match=r"part-00002.npy: token id 2032 >= model.vocab_size 2000"):
        validate_shards(ds, 2000)
    validate_shards(ds, 2033, cache_dir=tmp_path / "cache")
    assert len(list((tmp_path / "cache").glob("shard-checks-*.json"))) == 1
    # cached by the dataset fingerprint: a restart reads no shard, a new vocab is still checked
    monkeypatch.setattr(data, "scan_shard", lambda *a: pytest.fail("rescanned"))
    validate_shards(ds, 2033, cache_dir=tmp_path / "cache")
    with pytest.raises(DataError, match="token id 2032"):
        validate_shards(ds, 2032, cache_dir=tmp_path / "cache")
    monkeypatch.undo()
    # two ranks (threads with a real all_gather) split the shards and share the results
    import threading

    barrier, slots, scanned = threading.Barrier(2), [None, None], {0: [], 1: []}
    real_scan = data.scan_shard

    def rank_main(rank):
        def all_gather(obj):
            slots[rank] = obj
            barrier.wait()
            out = list(slots)
            barrier.wait()
            return out

        validate_shards(TokenDataset([root], 16, np.uint16), 2033, tmp_path / "cache2", rank, 2, all_gather)

    monkeypatch.setattr(data, "scan_shard", lambda p, *a: scanned[int(threading.current_thread().name)].append(p.name) or real_scan(p, *a))
    threads = [threading.Thread(target=rank_main, args=(r,), name=str(r)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert scanned == {0: ["part-00000.npy", "part-00002.npy"], 1: ["part-00001.npy"]}
    monkeypatch.undo()
    # sidecars: a row past the shard's end, a gap, rows that stop short, garbage, or none at all
    side = tmp_path / "d" / "part-00001.csv.gz"
    with gzip.open(side, "wt") as f:
        f.write("0,60,a,test,0\n60,71,b,test,1\n")
    with pytest.raises(DataError, match=r"part-00001.npy: part-00001.csv.gz row 2: document \[60, 71\) is outside"):
        validate_shards(TokenDataset([root], 16, np.uint16), 4000)
    with gzip.open(side, "wt") as f:
        f.write("0,60,a,test,0\n61,70,b,test,1\n")
    with pytest.raises(DataError, match=r"row 2: document \[61, 70\) does not start where the previous one ends"):
        validate_shards(TokenDataset([root], 16, np.uint16), 4000)
    with gzip.open(side, "wt") as f:
        f.write("0,60,a,test,0\n")
    with pytest.raises(DataError, match=r"cover tokens \[0, 60\) but the shard has 70"):
        validate_shards(TokenDataset([root], 16, np.uint16), 4000)
    with gzip.open(side, "wt") as f:
        f.write("zero,ten\n")
    with pytest.raises(DataError, match="line 1: expected start,end"):
        validate_shards(TokenDataset([root], 16, np.uint16), 4000)
    side.unlink()
    with pytest.raises(DataError, match="part-00001.csv.gz is missing"):
        validate_shards(TokenDataset([root], 16, np.uint16), 4000)


def _big_shard(root, n=12_000, bad_at=None, bad=1500):
    """One uint16 shard of ``n`` tokens (ids 1..499 then EOS): past the first and last 4 KiB,
    so a change in the middle is outside what a head/tail fingerprint reads."""
    tokens = [1 + i % 499 for i in range(n - 1)]
    if bad_at is not None:
        tokens[bad_at] = bad
    write_shard(root / "part-00000.npy", [tokens], eos_id=0, vocab_size=2**16, dtype=np.uint16)
    return str(root)


def _poke(path, pos, value):
    """Rewrite one token in place (as a bad copy or a fix by hand would)."""
    m = np.memmap(path, dtype=np.uint16, mode="r+")
    m[pos] = value
    m.flush()
    del m


def test_shard_check_cache_sees_a_shard_fixed_in_the_middle(tmp_path):
    root = _big_shard(tmp_path / "d", bad_at=6000)
    ds = TokenDataset([root], 16, np.uint16)
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match=r"part-00000.npy: token id 1500 >= model.vocab_size 512") as first:
        validate_shards(ds, 512, cache_dir=cache)
    assert str(cache) not in str(first.value)  # a fresh scan: nothing to say about a cache
    # the same shard again, unchanged: the failure comes from the cache, and says where it is
    (cache_file,) = cache.glob("shard-checks-*.json")
    with pytest.raises(DataError, match="token id 1500") as again:
        validate_shards(TokenDataset([root], 16, np.uint16), 512, cache_dir=cache)
    assert str(cache_file) in str(again.value) and "\n" not in str(again.value)
    # fixed in the middle (the first and last 4 KiB and the size are unchanged): checked again
    _poke(tmp_path / "d" / "part-00000.npy", 6000, 7)
    validate_shards(TokenDataset([root], 16, np.uint16), 512, cache_dir=cache)


def test_shard_check_cache_sees_a_shard_corrupted_in_the_middle(tmp_path, monkeypatch):
    import train.data as data

    root = _big_shard(tmp_path / "d")
    cache = tmp_path / "cache"
    validate_shards(TokenDataset([root], 16, np.uint16), 512, cache_dir=cache)  # clean, cached
    scans = []
    real_scan = data.scan_shard
    monkeypatch.setattr(data, "scan_shard", lambda *a: scans.append(a[0]) or real_scan(*a))
    validate_shards(TokenDataset([root], 16, np.uint16), 512, cache_dir=cache)
    assert scans == []  # unchanged: a restart reads no shard
    _poke(tmp_path / "d" / "part-00000.npy", 6000, 1500)
    with pytest.raises(DataError, match=r"part-00000.npy: token id 1500 >= model.vocab_size 512"):
        validate_shards(TokenDataset([root], 16, np.uint16), 512, cache_dir=cache)
    assert len(scans) == 1


def test_a_token_outside_the_vocabulary_is_a_data_error_when_read(tmp_path):
    """A shard changed after the start-up check fails as a data error naming the shard, not as
    an IndexError in the embedding."""
    root = _big_shard(tmp_path / "d")
    ds = TokenDataset([root], 16, np.uint16, vocab_size=512)
    ds.batch(np.arange(ds.n_instances))  # all fine
    _poke(tmp_path / "d" / "part-00000.npy", 6000, 1500)
    ds = TokenDataset([root], 16, np.uint16, vocab_size=512)
    ds.batch(np.array([0, 1]))  # instances that do not hold it are still read
    with pytest.raises(DataError, match=r"part-00000.npy: token id 1500 at token 6000 >= model.vocab_size 512"):
        ds.batch(np.array([0, 6000 // 16]))


def test_trainer_start_up_catches_a_shard_corrupted_after_a_clean_run(tmp_path, monkeypatch):
    """The start-up check of a real (one-rank, in-process) trainer: a clean start caches the
    results in save_dir; a token rewritten in the middle of a shard afterwards is a data error
    at the next start, not an IndexError in the embedding later."""
    from tests.support.train_launcher import one_rank_trainer
    from train.testing import tiny_config

    data = {"train": _big_shard(tmp_path / "train"), "val": _big_shard(tmp_path / "val", n=500)}
    raw = tiny_config(tmp_path / "run", data, train={"max_steps": 1})
    one_rank_trainer(monkeypatch, raw).close()
    assert len(list((tmp_path / "run" / "data_cache").glob("shard-checks-*.json"))) == 2
    _poke(tmp_path / "train" / "part-00000.npy", 6000, 1500)
    with pytest.raises(DataError, match=r"part-00000.npy: token id 1500 >= model.vocab_size 512"):
        one_rank_trainer(monkeypatch, raw)
