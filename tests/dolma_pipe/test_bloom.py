"""Tests for the Rust Bloom filter through its Python face (`dolma_pipe.bloom`): sizing math,
argument checking, measured false-positive rate, atomic test-and-set across threads and
processes sharing one filter, the file format (round trip, corruption refused), and the
shared/sealed life cycle. Everything is made on the fly under tmp_path; the file runs in a few
seconds on 2 cores.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import pickle
import random
import threading

import pytest

from dolma_pipe.bloom import (
    DEFAULT_SEED,
    MAX_HASHES,
    BloomFileError,
    BloomFilter,
    BloomParameters,
    false_positive_rate,
    optimal_parameters,
)
from dolma_pipe.errors import DolmaPipeError

HEADER = 8192  # header page + lock page; the bit array starts here


def random_keys(n: int, seed: int, size: int = 16) -> list[bytes]:
    blob = random.Random(seed).randbytes(n * size)
    return [blob[i : i + size] for i in range(0, n * size, size)]


# --- sizing -------------------------------------------------------------------------------


@pytest.mark.parametrize("n,p", [(1, 0.5), (1000, 0.01), (1_000_000, 0.01), (10**9, 1e-6), (50, 1e-4)])
def test_optimal_parameters_follow_the_textbook_formulas(n, p):
    params = optimal_parameters(n, p)
    m = math.ceil(-n * math.log(p) / math.log(2) ** 2)
    assert params == BloomParameters(m, min(max(round(m / n * math.log(2)), 1), MAX_HASHES))
    assert params.size_bytes == math.ceil(m / 64) * 8
    # At the optimum the predicted rate is the requested one, up to the rounding of k (and of
    # m, which only ever rounds up, so tiny n do better than asked).
    predicted = false_positive_rate(params.num_bits, params.num_hashes, n)
    assert predicted <= p * 1.1
    if n >= 1000:
        assert predicted == pytest.approx(p, rel=0.1)


def test_sizing_numbers_and_clamping():
    assert optimal_parameters(1_000_000, 0.01) == (9_585_059, 7)
    assert optimal_parameters(10, 1e-300).num_hashes == MAX_HASHES == 32
    assert optimal_parameters(1000, 0.9).num_hashes == 1
    bf = BloomFilter(1_000_000, 0.01)
    assert (bf.num_bits, bf.num_hashes) == optimal_parameters(1_000_000, 0.01)
    assert bf.size_bytes == 1_198_136 and bf.seed == DEFAULT_SEED
    # A shape given directly; k derived from m and n when only those are given.
    assert (BloomFilter(num_bits=1000, num_hashes=3).num_bits, BloomFilter(num_bits=1000, num_hashes=3).num_hashes) == (1000, 3)
    assert BloomFilter(100, num_bits=1000).num_hashes == round(10 * math.log(2))


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, 1.5, float("nan"), float("inf")])
def test_fp_rate_outside_open_unit_interval_is_refused(p):
    with pytest.raises(ValueError, match="fp_rate"):
        optimal_parameters(100, p)
    with pytest.raises(ValueError, match="fp_rate"):
        BloomFilter(100, p)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(expected_items=0, fp_rate=0.01), "expected_items must be >= 1"),
        (dict(expected_items=-5, fp_rate=0.01), "expected_items must be >= 0"),
        (dict(), "give expected_items and fp_rate"),
        (dict(expected_items=10), "give expected_items and fp_rate"),
        (dict(fp_rate=0.01), "needs expected_items"),
        (dict(num_bits=0, num_hashes=3), "num_bits"),
        (dict(num_bits=100, num_hashes=0), "num_hashes"),
        (dict(num_bits=100, num_hashes=33), "num_hashes"),
        (dict(num_bits=100), "needs num_hashes"),
        (dict(expected_items=10, fp_rate=0.1, num_bits=100), "not both"),
        (dict(expected_items=10, fp_rate=0.1, num_hashes=3), "num_hashes goes with num_bits"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BloomFilter(**kwargs)


def test_n_zero_in_sizing_helper():
    with pytest.raises(ValueError):
        optimal_parameters(0, 0.01)


def test_keys_must_be_str_or_bytes():
    bf = BloomFilter(100, 0.01)
    with pytest.raises(TypeError, match="str or bytes, not int"):
        bf.insert(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not NoneType"):
        bf.insert_many(["a", None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="single str"):
        bf.insert_many("abc")  # a str is one key, not three
    with pytest.raises(UnicodeEncodeError):
        bf.insert("\ud800")  # a lone surrogate has no UTF-8 encoding


# --- behaviour ----------------------------------------------------------------------------


def test_insert_reports_presence_and_batches_keep_order():
    bf = BloomFilter(1000, 0.001)
    assert bf.insert("a") is False
    assert bf.insert("a") is True
    assert "a" in bf and bf.contains(b"a"), "a str is hashed as its UTF-8 bytes"
    assert bf.insert_many(["b", b"c", "b", "a", "\u00e9t\u00e9", "\u00e9t\u00e9".encode()]) == [False, False, True, True, False, True]
    assert bf.contains_many(iter(["a", "b", "zz"])) == [True, True, False]
    assert bf.insert_many([]) == [] and bf.contains_many(()) == []
    assert bf.count == 4
    assert bf.estimated_count() == pytest.approx(4, abs=1)
    assert 0 < bf.current_fp_rate() < 1e-6


def test_batches_larger_than_one_chunk():
    keys = [f"k{i}" for i in range(150_000)]  # > 2 chunks of 65,536
    bf = BloomFilter(len(keys), 1e-6)
    out = bf.insert_many(k for k in keys)
    assert out.count(True) <= 3 and bf.count == len(keys) - out.count(True)
    assert all(bf.contains_many(keys))


@pytest.mark.parametrize("p", [0.01, 0.001])
def test_measured_false_positive_rate_on_a_million_keys(p):
    n = 1_000_000
    bf = BloomFilter(n, p)
    inserted = random_keys(n, seed=1)
    bf.insert_many(inserted)
    assert all(bf.contains_many(inserted)), "a Bloom filter has no false negatives"
    queries = random_keys(n, seed=2)
    measured = sum(bf.contains_many(queries)) / n
    assert p / 1.5 <= measured <= p * 1.5, f"measured {measured} for configured {p}"


def test_concurrent_threads_have_one_winner_per_key():
    # Batches run without the GIL, so these threads really insert at the same time.
    keys = [f"key-{i}" for i in range(100_000)]
    bf = BloomFilter(len(keys), 1e-9)
    results: list[list[bool]] = [[] for _ in range(4)]
    barrier = threading.Barrier(4)

    def work(slot: int) -> None:
        barrier.wait()
        for start in range(0, len(keys), 500):
            results[slot].extend(not seen for seen in bf.insert_many(keys[start : start + 500]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(sum(r[i] for r in results) == 1 for i in range(len(keys)))
    assert bf.count == len(keys)


# --- concurrent processes on one shared file ----------------------------------------------

N_SHARED_KEYS = 200_000


def _shared_worker(bf: BloomFilter, worker: int, barrier, start_offset: int) -> bytes:
    """Inserts every key (rotated so workers start at different places and meet head-on),
    in small batches so that the processes interleave; returns a 0/1 "was new" byte per key."""
    keys = [f"shared-{i}" for i in range(N_SHARED_KEYS)]
    order = list(range(start_offset, N_SHARED_KEYS)) + list(range(start_offset))
    new = bytearray(N_SHARED_KEYS)
    barrier.wait()
    for s in range(0, N_SHARED_KEYS, 256):
        idx = order[s : s + 256]
        for i, present in zip(idx, bf.insert_many([keys[i] for i in idx])):
            new[i] = not present
    bf.close()
    return bytes(new)


def test_concurrent_processes_have_exactly_one_winner_per_key(tmp_path):
    path = tmp_path / "shared.bloom"
    # fp_rate so low that no key is a false positive before it is inserted: every key must be
    # new for exactly one worker.
    bf = BloomFilter.create_shared(path, N_SHARED_KEYS, 1e-9)
    workers = 4
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(workers)
        # Two workers start at key 0 (racing in lock step), two in the middle.
        offsets = [0, 0, N_SHARED_KEYS // 2, N_SHARED_KEYS // 2]
        with ctx.Pool(workers) as pool:
            # The filter pickles as "reopen this path" in the worker.
            outs = pool.starmap(_shared_worker, [(bf, w, barrier, offsets[w]) for w in range(workers)])
    wins = [sum(o[i] for o in outs) for i in range(N_SHARED_KEYS)]
    bad = [i for i, w in enumerate(wins) if w != 1]
    assert not bad, f"{len(bad)} keys were new for 0 or >1 workers, e.g. key {bad[0]}: {wins[bad[0]]}"
    per_worker = [sum(o) for o in outs]
    assert sum(per_worker) == N_SHARED_KEYS and bf.count == N_SHARED_KEYS
    # Several workers won keys, so they really inserted into the same filter at the same time.
    # (Not every one: on a loaded 2-core machine one of two lock-step racers may always lose.)
    assert sum(w > 0 for w in per_worker) >= 2, per_worker
    bf.seal()
    bf.close()
    loaded = BloomFilter.load(path)
    assert all(loaded.contains_many([f"shared-{i}" for i in range(N_SHARED_KEYS)]))


# --- files --------------------------------------------------------------------------------


def make_saved(tmp_path, name="f.bloom"):
    bf = BloomFilter(5000, 0.01, seed=7)
    keys = [f"doc-{i}" for i in range(5000)]
    bf.insert_many(keys)
    path = tmp_path / name
    bf.save(path)
    return bf, keys, path


def test_save_load_round_trip(tmp_path):
    bf, keys, path = make_saved(tmp_path)
    loaded = BloomFilter.load(str(path))  # str and PathLike both work
    assert (loaded.num_bits, loaded.num_hashes, loaded.seed, loaded.count) == (bf.num_bits, bf.num_hashes, 7, bf.count)
    assert all(loaded.contains_many(keys))
    assert loaded.contains_many(random_keys(2000, 3)) == bf.contains_many(random_keys(2000, 3))
    assert not loaded.is_shared and loaded.path is None
    # Saving again gives the identical file; the temp file is gone.
    loaded.save(tmp_path / "again.bloom")
    assert (tmp_path / "again.bloom").read_bytes() == path.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.bloom", "f.bloom"]
    # A loaded filter keeps working.
    assert loaded.insert("new key") is False and loaded.insert("doc-1") is True


def test_hashing_and_layout_are_stable(tmp_path):
    # Pinned: changing the hash, the position mapping or the layout breaks saved filters.
    bf = BloomFilter(num_bits=256, num_hashes=4, seed=12345)
    bf.insert_many(["hello", b"world", "paragraph \u00e9"])
    bf.save(tmp_path / "g.bloom")
    raw = (tmp_path / "g.bloom").read_bytes()
    assert raw[:8] == b"DPBLOOM\0" and len(raw) == HEADER + 32
    bits = raw[HEADER:]
    assert [i for i in range(256) if bits[i // 8] >> (i % 8) & 1] == [13, 47, 114, 171, 178, 180, 183, 185, 193, 219, 237, 244]


def refused(path, match):
    with pytest.raises(BloomFileError, match=match) as info:
        BloomFilter.load(path)
    assert str(path) in str(info.value), "the error names the file"
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, DolmaPipeError), "the CLI reports it as a user error"
    # Raised in worker processes, it must cross back to the parent.
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is BloomFileError and str(again) == str(info.value)
    return info.value


def test_flipped_bit_is_a_checksum_error(tmp_path):
    _, _, path = make_saved(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[HEADER + 100] ^= 0x04
    path.write_bytes(raw)
    refused(path, "checksum mismatch")
    with pytest.raises(BloomFileError, match="checksum mismatch"):
        BloomFilter.open_shared(path, readonly=True)
    # Knowingly skipping verification still works.
    assert BloomFilter.load(path, verify=False).num_hashes == 7


def test_wrong_magic_is_refused(tmp_path):
    _, _, path = make_saved(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[:4] = b"PK\x03\x04"
    path.write_bytes(raw)
    refused(path, "bad magic bytes")
    other = tmp_path / "notes.txt"
    other.write_text("hello, this is not a filter")
    refused(other, "not a dolma-pipe Bloom filter")
    empty = tmp_path / "empty.bloom"
    empty.write_bytes(b"")
    refused(empty, "empty")


@pytest.mark.parametrize("keep", [3, 100, HEADER - 1, HEADER + 17, -8])
def test_truncated_file_is_refused(tmp_path, keep):
    _, _, path = make_saved(tmp_path)
    raw = path.read_bytes()
    path.write_bytes(raw[:keep])
    refused(path, "truncated")


def test_trailing_bytes_and_corrupted_header_are_refused(tmp_path):
    _, _, path = make_saved(tmp_path)
    good = path.read_bytes()
    path.write_bytes(good + b"\0" * 8)
    refused(path, "trailing bytes")
    bad = bytearray(good)
    bad[16] ^= 1  # num_bits
    path.write_bytes(bad)
    refused(path, "header checksum mismatch")
    bad = bytearray(good)
    bad[8] = 99  # format version
    path.write_bytes(bad)
    refused(path, "format version 99 is not supported")


def test_os_errors_keep_their_python_types(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        BloomFilter.load(tmp_path / "missing.bloom")
    assert info.value.filename == str(tmp_path / "missing.bloom")
    with pytest.raises(FileNotFoundError):
        BloomFilter.open_shared(tmp_path / "missing.bloom")
    with pytest.raises(FileNotFoundError):
        BloomFilter(10, 0.1).save(tmp_path / "no" / "such" / "dir.bloom")


# --- shared filters -----------------------------------------------------------------------


def test_shared_filter_life_cycle(tmp_path):
    path = tmp_path / "s.bloom"
    a = BloomFilter.create_shared(path, 10_000, 0.001, seed=3)
    with pytest.raises(FileExistsError):
        BloomFilter.create_shared(path, 10_000, 0.001)
    b = BloomFilter.open_shared(path)
    assert (b.num_bits, b.num_hashes, b.seed, b.path, b.is_shared) == (a.num_bits, a.num_hashes, 3, str(path), True)
    assert a.insert("x") is False
    assert b.insert("x") is True, "b sees a's insert through the shared mapping"
    assert b.insert_many(["y", "x"]) == [False, True]
    assert a.count == b.count == 2

    # Not sealed yet: load() cannot verify it and says why.
    with pytest.raises(BloomFileError, match="not sealed"):
        BloomFilter.load(path)
    assert BloomFilter.load(path, verify=False).contains("y")
    a.seal()
    assert a.sealed and b.sealed
    assert BloomFilter.load(path).contains_many(["x", "y", "z"]) == [True, True, False]

    # A reader cannot write; a writer's insert unseals the file for everyone.
    r = BloomFilter.open_shared(path, readonly=True)
    assert r.readonly and r.contains("x")
    with pytest.raises(ValueError, match="read-only"):
        r.insert("z")
    with pytest.raises(ValueError, match="read-only"):
        r.insert_many(["z"])
    b.insert("z")
    assert not a.sealed and r.contains("z")

    # Pickling a shared filter reopens the same file.
    c = pickle.loads(pickle.dumps(b))
    assert c.path == str(path) and c.contains("z") and c.count == 3
    rr = pickle.loads(pickle.dumps(r))
    assert rr.readonly

    for f in (a, b, c, r, rr):
        f.close()
    with BloomFilter.create_shared(path, 100, 0.1, overwrite=True) as fresh:
        assert fresh.count == 0 and not fresh.contains("x")
    assert fresh.closed


def test_closed_filter_raises_value_error(tmp_path):
    bf = BloomFilter(100, 0.01)
    with bf:
        bf.insert("a")
    assert bf.closed and repr(bf) == "<BloomFilter closed>"
    for call in (lambda: bf.insert("a"), lambda: bf.contains_many(["a"]), lambda: bf.count, lambda: bf.save(tmp_path / "x")):
        with pytest.raises(ValueError, match="closed"):
            call()
    bf.close()  # idempotent


def test_private_filter_is_not_picklable():
    with pytest.raises(TypeError, match="create_shared"):
        pickle.dumps(BloomFilter(10, 0.1))


def test_repr():
    bf = BloomFilter(num_bits=640, num_hashes=3)
    bf.insert("a")
    assert repr(bf) == "<BloomFilter num_bits=640 num_hashes=3 count=1>"


def test_huge_filter_is_refused_before_allocating():
    with pytest.raises(ValueError, match="limit"):
        BloomFilter(10**15, 1e-9)
    with pytest.raises(ValueError, match="num_bits"):
        BloomFilter(num_bits=2**50, num_hashes=3)


@pytest.mark.skipif(os.name != "posix", reason="file permissions")
def test_open_shared_readonly_on_a_read_only_file(tmp_path):
    _, keys, path = make_saved(tmp_path)
    path.chmod(0o444)
    try:
        if os.geteuid() != 0:  # root ignores permissions
            with pytest.raises(PermissionError):
                BloomFilter.open_shared(path)
        r = BloomFilter.open_shared(path, readonly=True)
        assert all(r.contains_many(keys)) and r.sealed
    finally:
        path.chmod(0o644)
