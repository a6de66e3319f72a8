"""The goodput ledger (``train.ledger``) and its report (``train.goodput``): the writer's lines stay
whole with two writers appending at once, heartbeats are rate-limited, a save_dir that fills up or
turns read-only warns once and never raises; the report's numbers on ledgers made by hand whose
answers are worked out here (no failure; two SIGKILLs mid-interval; an attempt killed before its
first checkpoint, off the lineage; a preemption; a cut-off line), the Young/Daly interval, the
command's text and JSON, and its error when there is no ledger. No torch process is started."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.namespaces import can_unshare_mount
from tests.support.repo import REPO_ROOT
from train import goodput
from train.ledger import LEDGER, Ledger, new_attempt_id, parse_ledger, process_start_time, read_ledger


class Book:
    """A ledger made by hand: records appended in order, each with its time."""

    def __init__(self) -> None:
        self.records: list[dict] = []

    def add(self, event: str, time: float, attempt: str | None = None, host: str = "h0", **fields) -> None:
        record = {"event": event, "time": float(time), "host": host, **({"attempt": attempt} if attempt else {}), **fields}
        self.records.append(record)

    def attempt(self, aid, *, begin, ready, restored_at, restored, first_at, host="h0", source=None):
        """process start, ``start`` (process group ready), ``restored``, ``first_step``."""
        self.add("start", ready, aid, host, process_start=float(begin), world_size=2, nodes=1, restart=0, job=None, launch_attempt=None)
        self.add("restored", restored_at, aid, host, step=restored, source=source or ("resume" if restored else "fresh"))
        self.add("first_step", first_at, aid, host, step=restored + 1)

    def beat(self, aid, time, step, train_s, host="h0"):
        self.add("heartbeat", time, aid, host, step=step, train_s=float(train_s))

    def save(self, aid, time, step, train_s, blocked, done_after, host="h0"):
        self.add("checkpoint", time, aid, host, step=step, train_s=float(train_s), blocked_s=float(blocked), **{"async": True})
        self.add("checkpoint_done", time + done_after, aid, host, step=step, seconds=float(done_after))

    def write(self, save_dir: Path) -> Path:
        save_dir.mkdir(parents=True, exist_ok=True)
        path = save_dir / LEDGER
        path.write_text("".join(json.dumps(r) + "\n" for r in self.records))
        return path


# ---- hand-made ledgers ------------------------------------------------------------------------


def _no_failure() -> Book:
    # One attempt, 1 s per step, a save every 10 steps blocking the loop 0.5 s (inside train_s).
    b = Book()
    b.attempt("a", begin=1000, ready=1010, restored_at=1015, restored=0, first_at=1020)
    b.beat("a", 1025, 5, 5)
    b.save("a", 1030, 10, 10.5, 0.5, 3)
    b.beat("a", 1036, 15, 15.5)
    b.save("a", 1041, 20, 21, 0.5, 2)
    b.beat("a", 1041, 20, 21)
    b.add("exit", 1120, "a", step=20, reason="finished", status=0)
    return b


def test_no_failure_ettr_and_active_fraction_are_exact():
    s = goodput.summarize(_no_failure().records)
    assert s["wall_s"] == 120.0  # process start 1000 to the exit at 1120
    assert s["attempts"] == 1 and s["failures"] == 0 and s["preemptions"] == 0 and s["finished"]
    assert s["active_fraction"] == 21 / 120 and s["ettr"] == 21 / 120
    assert s["lineage"] == [{"attempt": "a", "from_step": 0, "to_step": 20, "train_s": 21.0}] and s["lineage_complete"]
    assert s["steps_lost"] == 0 and s["failure_list"] == [] and s["recovery_s"] == {"count": 0, "median": None, "p90": None}
    assert s["checkpoints"] == 2 and s["checkpoint_blocked_s"] == 1.0 and s["checkpoint_stall_fraction"] == 1.0 / 21
    assert s["async_save_median_s"] == 2.5
    # No failure: no MTTF, no recommended interval; the prediction at the current one is the stall alone.
    iv = s["interval"]
    assert iv["mttf_s"] is None and iv["recommended_s"] is None and iv["recommended_steps"] is None
    assert iv["current_steps"] == 10  # the save at the exit step (20) is off the interval
    assert s["step_s_median"] == pytest.approx(1.1)  # 1.1, 1.0, 1.1 s a step between steps 5, 10, 15 and 20
    assert iv["current_s"] == pytest.approx(11.0) and iv["ettr_predicted_current"] == pytest.approx(1 - 0.5 / 11)


def _two_kills() -> Book:
    """Three attempts, 1 s a step, a save every 10 steps: A is SIGKILLed at step 15 (last save 10),
    B restores 10 and is SIGKILLed at 27 (last save 20), C restores 20 and finishes at 40."""
    b = Book()
    b.attempt("A", begin=0, ready=2, restored_at=3, restored=0, first_at=5)
    b.beat("A", 9, 5, 5)
    b.save("A", 15, 10, 10, 0.5, 2)
    b.beat("A", 20, 15, 15)  # the last thing A wrote: killed here
    b.attempt("B", begin=26, ready=28, restored_at=30, restored=10, first_at=33, host="h1")
    b.beat("B", 37, 15, 5, host="h1")
    b.save("B", 43, 20, 10, 0.5, 2, host="h1")
    b.beat("B", 50, 27, 17, host="h1")  # killed here
    b.attempt("C", begin=60, ready=63, restored_at=66, restored=20, first_at=70)
    b.beat("C", 75, 25, 5)
    b.save("C", 80, 30, 10, 0.5, 2)
    b.save("C", 89.5, 40, 20, 0.5, 0.5)  # the final save, at the exit step
    b.beat("C", 90, 40, 20)
    b.add("exit", 91, "C", step=40, reason="finished", status=0)
    return b


def test_two_sigkills_steps_lost_lineage_and_recovery():
    s = goodput.summarize(_two_kills().records)
    assert s["wall_s"] == 91.0 and s["attempts"] == 3 and s["failures"] == 2 and s["finished"]
    assert [f["outcome"] for f in s["failure_list"]] == ["killed", "killed"]
    assert [(f["attempt"], f["host"], f["step"]) for f in s["failure_list"]] == [("A", "h0", 15), ("B", "h1", 27)]
    # Steps lost: A reached 15, B restored 10; B reached 27, C restored 20.
    assert [f["steps_lost"] for f in s["failure_list"]] == [5, 7] and s["steps_lost"] == 12
    # The lineage: C's (20, 40], B's (10, 20] as of its save at 20, A's (0, 10] as of its save at 10.
    assert s["lineage"] == [
        {"attempt": "A", "from_step": 0, "to_step": 10, "train_s": 10.0},
        {"attempt": "B", "from_step": 10, "to_step": 20, "train_s": 10.0},
        {"attempt": "C", "from_step": 20, "to_step": 40, "train_s": 20.0},
    ]
    assert s["surviving_train_s"] == 40.0 and s["ettr"] == 40 / 91
    assert s["train_s"] == 15 + 17 + 20 and s["active_fraction"] == 52 / 91
    # Recovery: A's last record at 20 to B's first step at 33 (13 s); B's at 50 to C's at 70 (20 s).
    a, b = s["failure_list"]
    assert (a["recovery_s"], a["detection_restart_s"], a["process_group_s"], a["restore_s"], a["first_step_s"]) == (13, 6, 2, 2, 3)
    assert (b["recovery_s"], b["detection_restart_s"], b["process_group_s"], b["restore_s"], b["first_step_s"]) == (20, 10, 3, 3, 4)
    assert s["recovery_s"]["count"] == 2 and s["recovery_s"]["median"] == 16.5
    assert s["recovery_s"]["p90"] == pytest.approx(13 + 0.9 * 7)
    parts = s["recovery_parts_s"]
    assert parts["detection_restart"]["median"] == 8 and parts["process_group"]["median"] == 2.5
    assert parts["restore"]["median"] == 2.5 and parts["first_step"]["median"] == 3.5
    assert parts["first_step"]["p90"] == pytest.approx(3.9)
    assert s["checkpoints"] == 4 and s["checkpoint_blocked_s"] == 2.0 and s["checkpoint_blocked_median_s"] == 0.5
    assert s["checkpoint_stall_fraction"] == 2 / 52 and s["async_save_median_s"] == 2.0


def test_young_daly_by_hand():
    iv = goodput.summarize(_two_kills().records)["interval"]
    # T_save: the median blocked time, 0.5 s; MTTF: 91 s of wall over 2 failures; R: median recovery 16.5 s.
    assert iv["t_save_s"] == 0.5 and iv["mttf_s"] == 45.5 and iv["recovery_s"] == 16.5
    assert iv["recommended_s"] == pytest.approx(math.sqrt(45.5)) and iv["recommended_s"] == pytest.approx(6.7454, abs=1e-4)
    assert iv["recommended_steps"] == 7  # at the median step time, 1 s
    assert iv["current_steps"] == 10 and iv["current_s"] == 10.0
    # 1 - T_save/tau - (tau/2 + R)/MTTF
    assert iv["ettr_predicted_current"] == pytest.approx(1 - 0.05 - 21.5 / 45.5) and iv["ettr_predicted_current"] == pytest.approx(
        0.47747, abs=1e-5
    )
    tau = math.sqrt(45.5)
    assert iv["ettr_predicted_recommended"] == pytest.approx(1 - 0.5 / tau - (tau / 2 + 16.5) / 45.5)
    assert iv["ettr_predicted_recommended"] == pytest.approx(0.48911, abs=1e-5)
    # Clamped to [0, 1]: a failure every 10 s with a 16.5 s recovery predicts nothing useful.
    assert goodput.young_daly(0.5, 10.0, 16.5, 10.0) == 0.0 and goodput.young_daly(0.0, None, None, 5.0) == 1.0


def test_an_attempt_killed_before_its_first_checkpoint_is_off_the_lineage():
    b = Book()
    b.attempt("A", begin=0, ready=1, restored_at=2, restored=0, first_at=3)
    b.save("A", 12, 10, 10, 0.5, 1)
    b.beat("A", 17, 15, 15)  # killed at step 15
    b.attempt("B", begin=20, ready=21, restored_at=22, restored=10, first_at=23)
    b.beat("B", 29, 17, 7)  # killed at 17, before its save at 20
    b.attempt("C", begin=35, ready=36, restored_at=37, restored=10, first_at=38)
    b.save("C", 47, 20, 10, 0.5, 1)
    b.save("C", 57, 30, 20, 0.5, 1)
    b.add("exit", 58, "C", step=30, reason="finished", status=0)
    s = goodput.summarize(b.records)
    assert [(seg["attempt"], seg["from_step"], seg["to_step"]) for seg in s["lineage"]] == [("A", 0, 10), ("C", 10, 30)]
    assert s["surviving_train_s"] == 30.0 and s["ettr"] == 30 / 58 and s["lineage_complete"]
    assert [f["steps_lost"] for f in s["failure_list"]] == [5, 7] and s["failures"] == 2
    assert s["active_fraction"] == (15 + 7 + 20) / 58
    # A's recovery ends at B's first step, B's at C's.
    assert [f["recovery_s"] for f in s["failure_list"]] == [23 - 17, 38 - 29]


def test_a_preemption_is_not_a_failure():
    b = Book()
    b.attempt("A", begin=0, ready=1, restored_at=2, restored=0, first_at=3)
    b.save("A", 12, 10, 10, 0.5, 1)
    b.save("A", 16, 14, 14, 0.5, 1)  # SIGTERM: every rank saves step 14 and stops
    b.add("exit", 18, "A", step=14, reason="preempted", status=0)
    b.attempt("B", begin=40, ready=41, restored_at=42, restored=14, first_at=43)
    b.save("B", 49, 20, 6, 0.5, 1)
    b.add("exit", 50, "B", step=20, reason="finished", status=0)
    s = goodput.summarize(b.records)
    assert s["attempts"] == 2 and s["preemptions"] == 1 and s["failures"] == 0 and s["steps_lost"] == 0
    assert [(seg["attempt"], seg["from_step"], seg["to_step"], seg["train_s"]) for seg in s["lineage"]] == [
        ("A", 0, 14, 14.0),
        ("B", 14, 20, 6.0),
    ]
    assert s["ettr"] == 20 / 50 and s["recovery_s"]["count"] == 0
    assert s["interval"]["mttf_s"] is None and s["interval"]["recommended_s"] is None
    assert "none needed beyond the current" in goodput.text(s)


def test_a_last_attempt_with_nothing_after_it_is_open_and_one_the_launcher_outlived_was_killed():
    b = _two_kills()
    b.records = [r for r in b.records if r.get("attempt") != "C"]
    s = goodput.summarize(b.records)
    assert s["last_outcome"] == "open" and s["failures"] == 1  # B may still be running
    assert s["lineage"][-1] == {"attempt": "B", "from_step": 10, "to_step": 27, "train_s": 17.0}
    b.add("launch_exit", 55, launch_attempt=1, status=137, reason="killed")
    s = goodput.summarize(b.records)
    assert s["last_outcome"] == "killed" and s["failures"] == 2
    assert [f["steps_lost"] for f in s["failure_list"]] == [5, None]  # no attempt restored after B
    # B failed: the final model is its newest checkpoint, step 20.
    assert s["lineage"][-1] == {"attempt": "B", "from_step": 10, "to_step": 20, "train_s": 10.0}


def test_launcher_records_stragglers_preflight_and_cordons(tmp_path):
    b = Book()
    b.add("launch", 0, launch_attempt=0, nodes=["h0", "h1", "h2"], cordoned=[])
    b.add("cordon", 5, host="h2", check="matmul", message="wrong result")
    b.add("launch_exit", 6, launch_attempt=0, status=76, reason="cordon")
    b.add("launch", 8, launch_attempt=1, nodes=["h0", "h1"], cordoned=["h2"])
    b.attempt("A", begin=9, ready=10, restored_at=11, restored=0, first_at=12)
    b.add("preflight", 10.5, "A", seconds=0.4, failures=[], verdict="ok")
    b.add("straggler", 20, "A", step=10, rank=1, host="h1", score=1.8)
    b.add("straggler", 30, "A", step=20, rank=1, host="h1", score=2.4)
    b.add("exit", 40, "A", step=30, reason="finished", status=0)
    b.add("preflight", 41, "check-only", seconds=0.3, failures=[], verdict="ok")  # `python -m train.preflight` alone
    s = goodput.summarize(b.records)
    assert s["wall_s"] == 41.0 and s["launches"] == 2 and s["attempts"] == 1 and s["failures"] == 0
    assert s["stragglers"] == [{"rank": 1, "host": "h1", "score": 2.4, "step": 20, "count": 2}]
    assert s["cordoned"] == [{"host": "h2", "check": "matmul", "message": "wrong result"}]
    assert [p["verdict"] for p in s["preflight"]] == ["ok", "ok"] and s["last_outcome"] == "finished"
    out = goodput.text(s)
    assert "rank 1 on h1 (2.40x)" in out and "h2 (matmul)" in out and "ok x2" in out


# ---- reading ----------------------------------------------------------------------------------


def test_a_cut_off_line_is_skipped(tmp_path):
    path = _two_kills().write(tmp_path / "run")
    whole = read_ledger(path)
    data = path.read_bytes()
    path.write_bytes(data[:-25])  # the exit record, cut by a kill mid-write
    cut = read_ledger(path)
    assert cut.skipped == 1 and len(cut) == len(whole) - 1 and cut[-1] == whole[-2]
    # A cut line a later record ran into: the later record is still read.
    lines = data.splitlines(keepends=True)
    joined = b"".join([*lines[:-2], lines[-2][:-30], lines[-1], b"not json\n", b"[1, 2]\n"])
    records = parse_ledger(joined)
    assert records.skipped == 3 and records[-1] == whole[-1] and len(records) == len(whole) - 1
    s = goodput.summarize(cut, cut.skipped)
    assert s["skipped_lines"] == 1 and s["last_outcome"] == "open"


# ---- the command ------------------------------------------------------------------------------


def test_cli_text_and_json(tmp_path, capsys):
    book = _two_kills()
    path = book.write(tmp_path / "run")
    assert goodput.main([str(tmp_path / "run")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"goodput: {path} ({len(book.records)} records)"
    # A label, then every value starting in one column.
    col = lines[1].index("91.0 s")
    assert all(line[col - 2 : col] == "  " and line[col] != " " for line in lines[1:])
    rows = {line[:col].strip(): line[col:] for line in lines[1:]}
    assert {"wall time", "attempts", "active training fraction", "ETTR", "steps lost", "recovery", "checkpoint stall"} <= set(rows)
    assert "91.0 s (0h01m31s)" in rows["wall time"] and "3 (2 failed, 0 preempted; last: finished)" in rows["attempts"]
    assert f"{40 / 91:.3f}" in rows["ETTR"] and f"{52 / 91:.3f}" in rows["active training fraction"]
    assert "12 (per failure: 5, 7)" in rows["steps lost"] and "median 16.5 s, p90 19.3 s (2)" in rows["recovery"]
    assert "7 steps, 6.7 s (T_save 0.50 s, MTTF 45.5 s), predicted ETTR 0.489" in rows["Young/Daly interval"]
    assert goodput.main([str(tmp_path / "run"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == json.loads(json.dumps(goodput.summarize(read_ledger(path), 0, str(path))))
    assert data["ettr"] == 40 / 91 and data["failures"] == 2 and data["steps_lost"] == 12


def test_cli_without_a_ledger(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "train.goodput", str(tmp_path)], capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"goodput: {tmp_path / LEDGER}: no ledger\n"


# ---- writing ----------------------------------------------------------------------------------

_WRITER = """
import sys
from train.ledger import Ledger
ledger = Ledger(sys.argv[1], attempt=sys.argv[2], heartbeat_interval=0)
for i in range(int(sys.argv[3])):
    ledger.write("heartbeat", step=i, train_s=float(i), pad="x" * 2000)
"""


def test_two_writers_append_whole_lines(tmp_path):
    n = 1500
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), name, str(n)], cwd=REPO_ROOT) for name in ("rank0", "launcher")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    records = read_ledger(tmp_path / LEDGER)
    assert records.skipped == 0 and len(records) == 2 * n
    for name in ("rank0", "launcher"):
        assert [r["step"] for r in records if r["attempt"] == name] == list(range(n))
    assert all(r["host"] and isinstance(r["time"], float) for r in records)


def test_heartbeats_are_rate_limited_and_disabled_ranks_write_nothing(tmp_path):
    ledger = Ledger(tmp_path, attempt="x", heartbeat_interval=3600)
    for step in range(1, 6):
        ledger.heartbeat(step, float(step))
    ledger.heartbeat(6, 6.0, force=True)
    assert [(r["step"], r["train_s"]) for r in read_ledger(ledger.path)] == [(1, 1.0), (6, 6.0)]
    every = Ledger(tmp_path / "every", heartbeat_interval=0)
    for step in range(1, 6):
        every.heartbeat(step, float(step))
    assert [r["step"] for r in read_ledger(every.path)] == [1, 2, 3, 4, 5] and "attempt" not in read_ledger(every.path)[0]
    other = Ledger(tmp_path / "rank1", enabled=False, attempt="x")
    other.write("start", world_size=2)
    other.heartbeat(1, 1.0, force=True)
    assert not (tmp_path / "rank1").exists()


def test_records_are_strict_json_and_ids_name_the_process(tmp_path):
    ledger = Ledger(tmp_path, attempt=new_attempt_id("hx"), host="hx")
    ledger.write("straggler", step=3, score=float("inf"), rank=1, extra={"nan": float("nan")})
    (record,) = read_ledger(ledger.path)
    assert record["score"] is None and record["extra"] == {"nan": None} and list(record)[:4] == ["event", "time", "host", "attempt"]
    assert "NaN" not in ledger.path.read_text() and "Infinity" not in ledger.path.read_text()
    host, pid, start_ns = record["attempt"].rsplit("-", 2)
    assert host == "hx" and int(pid) == os.getpid() and new_attempt_id("hx") == record["attempt"]
    started = process_start_time()
    assert int(start_ns) == int(started * 1e9) and started <= record["time"] + 1  # boot time in whole seconds


def test_a_full_disk_warns_once_and_later_records_are_written(tmp_path, capsys):
    (tmp_path / LEDGER).symlink_to("/dev/full")  # every write: ENOSPC
    ledger = Ledger(tmp_path, attempt="x", heartbeat_interval=0)
    for step in range(3):
        ledger.heartbeat(step, float(step))
    err = capsys.readouterr().err
    assert err.count("goodput ledger: cannot write") == 1 and "No space left" in err and ledger.failed_writes == 3
    (tmp_path / LEDGER).unlink()  # room again
    ledger.heartbeat(3, 3.0)
    assert [r["step"] for r in read_ledger(ledger.path)] == [3] and capsys.readouterr().err == ""


_READ_ONLY = """
import sys
from train.ledger import Ledger
ledger = Ledger(sys.argv[1], attempt="x", heartbeat_interval=0)
for step in range(3):
    ledger.heartbeat(step, float(step))
ledger.write("exit", step=2, reason="finished", status=0)
print("still here", ledger.failed_writes)
"""


def test_a_read_only_save_dir_warns_once_and_does_not_raise(tmp_path):
    save_dir = tmp_path / "ro"
    save_dir.mkdir()
    code = textwrap.dedent(_READ_ONLY)
    if os.geteuid() != 0:
        save_dir.chmod(0o555)
        cmd = [sys.executable, "-c", code, str(save_dir)]
    elif can_unshare_mount():
        # root writes through permissions: a read-only bind mount in a namespace of its own
        mount = f"mount --bind {save_dir} {save_dir} && mount -o remount,bind,ro {save_dir}"
        cmd = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f'{mount} && exec "$0" -c "$1" "$2"',
            sys.executable,
            code,
            str(save_dir),
        ]
    else:
        pytest.skip("root without unshare(1): no way to make a folder read-only")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "still here 4\n", proc.stderr
    assert proc.stderr.count("goodput ledger: cannot write") == 1
    assert "Read-only file system" in proc.stderr or "Permission denied" in proc.stderr
    assert not (save_dir / LEDGER).exists()


def test_the_ledger_and_its_report_import_no_torch():
    # The launcher writes the ledger and the report reads it: neither may pay for torch (or numpy).
    code = "import sys, train.goodput, train.ledger; print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "[]\n", proc.stderr
