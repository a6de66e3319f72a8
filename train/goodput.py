"""How much of a training run's wall time became model: ``python -m train.goodput SAVE_DIR [--json]``
reads ``<save_dir>/goodput.jsonl`` (``train.ledger``) and prints a short table, or one JSON object.
Everything is computed by :func:`summarize` from the list of records, so a ledger made by hand
gives known answers.

What it counts:

- an **attempt** is one rank-0 process (its records share an ``attempt`` id), in the order the
  ledger first names it. Its outcome is its ``exit`` record's reason; an attempt with no ``exit``
  was killed (SIGKILL, OOM, a lost node), except the ledger's last attempt when nothing follows
  it: that one is ``open`` (still running, or killed: the ledger cannot tell) and counts as
  neither. A **failure** is an attempt that did not end ``finished`` or ``preempted``.
- **wall time**: from the earliest process start (``start``'s ``process_start``) or launcher
  ``launch`` to the last record.
- **active training fraction** (Lambda's measure): the sum over attempts of their last ``train_s``
  (the attempt's step-loop seconds, each step with its logging and bookkeeping, less blocking
  saves and evaluations, which are not step time) over wall time.
- **ETTR** (Meta's and ByteDance's effective training time ratio): the seconds of the steps that
  survive into the final model over wall time. The lineage: the last attempt that restored keeps
  its steps (restored step, last step] (up to its newest checkpoint instead when it failed); the
  checkpoint it restored from was completed by the latest earlier attempt that checkpointed that
  step, whose steps (its restored step, that step] survive with the ``train_s`` of its
  ``checkpoint`` record there; and so back to a fresh start or ``init_from``. Attempts off the
  lineage contribute nothing.
- **steps lost** per failure: the last step the failed attempt reached minus the step the next
  attempt that restored restored from.
- **recovery** per failure: from the failed attempt's last record to the first step of the next
  attempt that made one, in parts: detection and restart (to that attempt's process start),
  process group (to ``start``), restore (to ``restored``), first step (to ``first_step``).
  Medians and 90th percentiles interpolate linearly between the sorted values.
- **checkpoint stall**: the seconds the step loop was blocked by saves (``checkpoint``'s
  ``blocked_s``), also as a fraction of the loop's seconds; the median seconds of an async save
  (``checkpoint_done``).
- **checkpoint interval** (Young/Daly): ``sqrt(2 * T_save * MTTF)`` with ``T_save`` the median
  blocked seconds per save and ``MTTF`` = wall / failures, in seconds and in steps (the median
  step seconds from heartbeats); the current interval is the most common step gap between an
  attempt's checkpoints. The ETTR Young/Daly predicts at an interval ``tau``:
  ``1 - T_save/tau - (tau/2 + R)/MTTF``, clamped to [0, 1], ``R`` the median recovery. No failure:
  no interval is recommended (none is needed beyond the current).

``--json`` keys (seconds as floats; null where the ledger cannot say):
``ledger``, ``records``, ``skipped_lines``, ``wall_s``, ``attempts``, ``failures``,
``preemptions``, ``finished`` (the last attempt exited ``finished``), ``last_outcome``,
``train_s``, ``active_fraction``, ``surviving_train_s``, ``ettr``, ``lineage`` (list of
``{attempt, from_step, to_step, train_s}``, oldest first), ``lineage_complete`` (false when a
restored checkpoint's maker is not in the ledger), ``steps_lost``, ``failure_list`` (list of
``{attempt, host, outcome, step, time, steps_lost, recovery_s, detection_restart_s,
process_group_s, restore_s, first_step_s}``), ``recovery_s`` and ``recovery_parts_s``
(``detection_restart``, ``process_group``, ``restore``, ``first_step``), each ``{count, median,
p90}``, ``checkpoints``, ``checkpoint_blocked_s``, ``checkpoint_blocked_median_s``,
``checkpoint_stall_fraction``, ``async_save_median_s``, ``step_s_median``, ``interval`` (``{current_steps,
current_s, t_save_s, mttf_s, recovery_s, recommended_s, recommended_steps,
ettr_predicted_current, ettr_predicted_recommended}``), ``stragglers`` (list of ``{rank, host,
score, step, count}``, worst first), ``preflight`` (list of ``{time, host, verdict, seconds,
failures}``), ``cordoned`` (list of ``{host, check, message}``), ``launches``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.ledger import LEDGER, read_ledger

SURVIVES = ("finished", "preempted")


def quantile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile of ``values``, interpolated linearly between the sorted values (None: no values)."""
    if not values:
        return None
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _stats(values: list[float]) -> dict[str, Any]:
    return {"count": len(values), "median": quantile(values, 0.5), "p90": quantile(values, 0.9)}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class Attempt:
    """What one rank-0 process wrote."""

    id: str
    host: str | None
    first_time: float
    last_time: float = 0.0
    process_start: float | None = None
    started: float | None = None  # the ``start`` record: process group ready
    restored_step: int | None = None
    restored_source: str | None = None
    restored_time: float | None = None
    first_step_time: float | None = None
    last_step: int | None = None
    train_s: float = 0.0
    exit: dict[str, Any] | None = None
    checkpoints: dict[int, dict[str, Any]] = field(default_factory=dict)  # step -> ``checkpoint`` record
    done: dict[int, float | None] = field(default_factory=dict)  # step -> seconds of ``checkpoint_done``
    beats: list[tuple[int, float]] = field(default_factory=list)  # (step, train_s) of heartbeats and checkpoints
    outcome: str = "killed"  # finished | preempted | error | hang | preflight | killed | open

    @property
    def began(self) -> float:
        return self.process_start if self.process_start is not None else self.first_time

    def reach(self, step: int | None) -> None:
        if step is not None and (self.last_step is None or step > self.last_step):
            self.last_step = step

    def train_s_at(self, step: int) -> float | None:
        """The loop's seconds when ``step`` was done: its checkpoint record's, else a heartbeat's."""
        record = self.checkpoints.get(step)
        if record is not None and _num(record.get("train_s")) is not None:
            return _num(record.get("train_s"))
        at = [s for st, s in self.beats if st == step]
        return at[-1] if at else None


def attempts_of(records: list[dict[str, Any]]) -> list[Attempt]:
    """The attempts in the order the ledger first names them, with their outcomes."""
    found: dict[str, Attempt] = {}
    for r in records:
        aid = r.get("attempt")
        if not isinstance(aid, str):
            continue
        t = float(r["time"])
        a = found.get(aid)
        if a is None:
            a = found[aid] = Attempt(aid, r.get("host"), first_time=t)
        a.last_time = max(a.last_time, t)
        event, step = r["event"], _int(r.get("step"))
        if event == "start":
            a.started = t
            a.process_start = _num(r.get("process_start"))
            a.host = r.get("host", a.host)
        elif event == "restored":
            a.restored_step, a.restored_source, a.restored_time = step or 0, r.get("source"), t
            a.reach(step)
        elif event == "first_step":
            a.first_step_time = t
            a.reach(step)
        elif event in ("heartbeat", "checkpoint"):
            a.reach(step)
            train_s = _num(r.get("train_s"))
            if train_s is not None:
                a.train_s = max(a.train_s, train_s)
                if step is not None:
                    a.beats.append((step, train_s))
            if event == "checkpoint" and step is not None:
                a.checkpoints[step] = r
        elif event == "checkpoint_done" and step is not None:
            a.done[step] = _num(r.get("seconds"))
        elif event == "exit":
            a.exit = r
            a.reach(step)
    # A standalone pre-flight (``python -m train.preflight``) that wrote with an attempt id trained nothing.
    events: dict[str, set[str]] = {}
    for r in records:
        if isinstance(r.get("attempt"), str):
            events.setdefault(r["attempt"], set()).add(r["event"])
    attempts = [a for a in found.values() if events[a.id] - {"preflight"}]
    last_time = max((float(r["time"]) for r in records), default=0.0)
    for i, a in enumerate(attempts):
        reason = a.exit.get("reason") if a.exit else None
        if isinstance(reason, str):
            a.outcome = reason
        elif i == len(attempts) - 1 and a.last_time >= last_time:
            a.outcome = "open"  # nothing after it: running, or killed with no one to say so
    return attempts


def lineage(attempts: list[Attempt]) -> tuple[list[dict[str, Any]], bool]:
    """The segments of steps that survive into the final model, oldest first, and whether the
    walk reached a fresh start (or ``init_from``) through attempts the ledger holds."""
    restored = [i for i, a in enumerate(attempts) if a.restored_step is not None]
    if not restored:
        return [], True
    segments: list[dict[str, Any]] = []
    i = restored[-1]
    end = attempts[i]
    if end.outcome in (*SURVIVES, "open"):
        if end.last_step is not None and end.restored_step is not None and end.last_step > end.restored_step:
            segments.append({"attempt": end.id, "from_step": end.restored_step, "to_step": end.last_step, "train_s": end.train_s})
    else:
        # It failed: the final model is its newest completed checkpoint, if it made one.
        steps = [s for s in end.done if end.restored_step is not None and s > end.restored_step]
        if steps:
            s = max(steps)
            segments.append({"attempt": end.id, "from_step": end.restored_step, "to_step": s, "train_s": end.train_s_at(s) or 0.0})
    step, source = end.restored_step or 0, end.restored_source
    complete = True
    while step > 0 and source == "resume":
        # The latest earlier attempt that completed that checkpoint (or began it: a resume from
        # it proves it complete, though a kill may have cut its ``checkpoint_done``).
        maker = next((j for j in range(i - 1, -1, -1) if step in attempts[j].done), None)
        if maker is None:
            maker = next((j for j in range(i - 1, -1, -1) if step in attempts[j].checkpoints), None)
        if maker is None or attempts[maker].restored_step is None:
            complete = False
            break
        i, a = maker, attempts[maker]
        segments.append({"attempt": a.id, "from_step": a.restored_step, "to_step": step, "train_s": a.train_s_at(step) or 0.0})
        step, source = a.restored_step or 0, a.restored_source
    return segments[::-1], complete


def _step_seconds(attempts: list[Attempt]) -> float | None:
    """The median seconds per step between consecutive heartbeats (and checkpoints) of an attempt."""
    rates = []
    for a in attempts:
        beats = sorted(set(a.beats))
        for (s0, t0), (s1, t1) in zip(beats, beats[1:]):
            if s1 > s0 and t1 >= t0:
                rates.append((t1 - t0) / (s1 - s0))
    return quantile(rates, 0.5)


def _current_interval(attempts: list[Attempt]) -> int | None:
    """The most common step gap between an attempt's checkpoints (from its restored step on; the
    checkpoint at its exit step, a preemption's or the last step's, is off the interval)."""
    gaps: Counter[int] = Counter()
    for a in attempts:
        exit_step = _int(a.exit.get("step")) if a.exit else None
        steps = sorted(s for s in a.checkpoints if s != exit_step)
        prev = a.restored_step
        for s in steps:
            if prev is not None and s > prev:
                gaps[s - prev] += 1
            prev = s
    if not gaps:
        return None
    return max(gaps.items(), key=lambda kv: (kv[1], kv[0]))[0]


def young_daly(t_save: float | None, mttf: float | None, recovery: float | None, tau: float | None) -> float | None:
    """The ETTR Young/Daly predicts at a checkpoint interval of ``tau`` seconds, clamped to [0, 1]."""
    if t_save is None or tau is None or tau <= 0:
        return None
    lost = t_save / tau + ((tau / 2 + (recovery or 0.0)) / mttf if mttf else 0.0)
    return min(1.0, max(0.0, 1.0 - lost))


def _failures(attempts: list[Attempt]) -> list[dict[str, Any]]:
    out = []
    for i, a in enumerate(attempts):
        if a.outcome in (*SURVIVES, "open"):
            continue
        later = attempts[i + 1 :]
        nxt = next((b for b in later if b.restored_step is not None), None)
        lost = None
        if nxt is not None:
            lost = max(0, (a.last_step if a.last_step is not None else nxt.restored_step or 0) - (nxt.restored_step or 0))
        rec = next((b for b in later if b.first_step_time is not None and b.first_step_time >= a.last_time), None)
        row: dict[str, Any] = {
            "attempt": a.id,
            "host": a.host,
            "outcome": a.outcome,
            "step": a.last_step,
            "time": a.last_time,
            "steps_lost": lost,
            "recovery_s": None,
            "detection_restart_s": None,
            "process_group_s": None,
            "restore_s": None,
            "first_step_s": None,
        }
        if rec is not None and rec.first_step_time is not None:
            row["recovery_s"] = rec.first_step_time - a.last_time
            row["detection_restart_s"] = rec.began - a.last_time
            if rec.started is not None:
                row["process_group_s"] = rec.started - rec.began
                if rec.restored_time is not None:
                    row["restore_s"] = rec.restored_time - rec.started
            if rec.restored_time is not None:
                row["first_step_s"] = rec.first_step_time - rec.restored_time
        out.append(row)
    return out


def _stragglers(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    worst: dict[tuple[Any, Any], dict[str, Any]] = {}
    for r in records:
        if r["event"] != "straggler":
            continue
        key = (r.get("rank"), r.get("host"))
        score = _num(r.get("score")) or 0.0
        w = worst.setdefault(key, {"rank": key[0], "host": key[1], "score": score, "step": r.get("step"), "count": 0})
        w["count"] += 1
        if score > w["score"]:
            w["score"], w["step"] = score, r.get("step")
    return sorted(worst.values(), key=lambda w: -w["score"])


def _cordoned(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    hosts: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["event"] == "cordon" and isinstance(r.get("host"), str):
            hosts.setdefault(r["host"], {"host": r["host"], "check": r.get("check"), "message": r.get("message")})
        elif r["event"] == "launch":
            for h in r.get("cordoned") or []:
                hosts.setdefault(str(h), {"host": str(h), "check": None, "message": None})
    return [hosts[h] for h in sorted(hosts)]


def _interval(attempts: list, step_s: float | None, t_save: float | None, mttf: float | None, recovery: float | None) -> dict[str, Any]:
    """The current checkpoint interval, Young/Daly's, and the ETTR their model predicts at each."""
    current_steps = _current_interval(attempts)
    current_s = current_steps * step_s if current_steps is not None and step_s is not None else None
    recommended_s = math.sqrt(2 * t_save * mttf) if t_save is not None and mttf is not None else None
    recommended_steps = None
    if recommended_s is not None and step_s:
        recommended_steps = max(1, round(recommended_s / step_s))
    return {
        "current_steps": current_steps,
        "current_s": current_s,
        "t_save_s": t_save,
        "mttf_s": mttf,
        "recovery_s": recovery,
        "recommended_s": recommended_s,
        "recommended_steps": recommended_steps,
        "ettr_predicted_current": young_daly(t_save, mttf, recovery, current_s),
        "ettr_predicted_recommended": young_daly(t_save, mttf, recovery, recommended_s),
    }


def _preflights(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("time", "host", "verdict", "seconds")
    return [{**{k: r.get(k) for k in keys}, "failures": r.get("failures") or []} for r in records if r["event"] == "preflight"]


def summarize(records: list[dict[str, Any]], skipped: int = 0, ledger: str | None = None) -> dict[str, Any]:
    """Every figure of the goodput report (the ``--json`` object) from a ledger's records."""
    attempts = attempts_of(records)
    times = [float(r["time"]) for r in records]
    starts = [a.process_start for a in attempts if a.process_start is not None]
    starts += [float(r["time"]) for r in records if r["event"] == "launch"]
    begin = min([*starts, *times], default=0.0)
    wall = max(times, default=0.0) - begin
    failures = _failures(attempts)
    segments, complete = lineage(attempts)
    train_s = sum(a.train_s for a in attempts)
    surviving = sum(s["train_s"] for s in segments)

    recoveries = [f["recovery_s"] for f in failures if f["recovery_s"] is not None]
    parts = {
        name: _stats([f[f"{name}_s"] for f in failures if f[f"{name}_s"] is not None])
        for name in ("detection_restart", "process_group", "restore", "first_step")
    }

    saves = [r for a in attempts for r in a.checkpoints.values()]
    blocked = [b for r in saves if (b := _num(r.get("blocked_s"))) is not None]
    async_done = [
        s
        for a in attempts
        for step, s in a.done.items()
        if s is not None and (step not in a.checkpoints or a.checkpoints[step].get("async", True))
    ]
    step_s = _step_seconds(attempts)
    t_save = quantile(blocked, 0.5)
    last = attempts[-1] if attempts else None
    return {
        "ledger": ledger,
        "records": len(records),
        "skipped_lines": skipped,
        "wall_s": wall,
        "attempts": len(attempts),
        "failures": len(failures),
        "preemptions": sum(a.outcome == "preempted" for a in attempts),
        "finished": last is not None and last.outcome == "finished",
        "last_outcome": last.outcome if last else None,
        "train_s": train_s,
        "active_fraction": train_s / wall if wall > 0 else None,
        "surviving_train_s": surviving,
        "ettr": surviving / wall if wall > 0 else None,
        "lineage": segments,
        "lineage_complete": complete,
        "steps_lost": sum(f["steps_lost"] or 0 for f in failures),
        "failure_list": failures,
        "recovery_s": _stats(recoveries),
        "recovery_parts_s": parts,
        "checkpoints": len(saves),
        "checkpoint_blocked_s": sum(blocked),
        "checkpoint_blocked_median_s": t_save,
        "checkpoint_stall_fraction": sum(blocked) / train_s if train_s > 0 else None,
        "async_save_median_s": quantile(async_done, 0.5),
        "step_s_median": step_s,
        "interval": _interval(attempts, step_s, t_save, wall / len(failures) if failures and wall > 0 else None, quantile(recoveries, 0.5)),
        "stragglers": _stragglers(records),
        "preflight": _preflights(records),
        "cordoned": _cordoned(records),
        "launches": sum(r["event"] == "launch" for r in records),
    }


# ---- text ---------------------------------------------------------------------------------------


def _s(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f} s"


def _hms(x: float) -> str:
    x = int(round(x))
    return f"{x // 3600}h{x // 60 % 60:02d}m{x % 60:02d}s"


def _frac(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _dist(d: dict[str, Any]) -> str:
    return "-" if not d["count"] else f"median {_s(d['median'])}, p90 {_s(d['p90'])} ({d['count']})"


def text(summary: dict[str, Any]) -> str:
    """The summary as a short aligned table."""
    s, iv = summary, summary["interval"]
    out: list[tuple[str, str]] = []
    out.append(("wall time", f"{_s(s['wall_s'])} ({_hms(s['wall_s'])})"))
    attempts = f"{s['attempts']} ({s['failures']} failed, {s['preemptions']} preempted; last: {s['last_outcome']})"
    out.append(("attempts", attempts))
    out.append(("active training fraction", f"{_frac(s['active_fraction'])} ({_s(s['train_s'])} in the step loop)"))
    lineage = "" if s["lineage_complete"] else "; lineage reaches a checkpoint the ledger did not make"
    out.append(("ETTR", f"{_frac(s['ettr'])} ({_s(s['surviving_train_s'])} of steps in the final model{lineage})"))
    per = ", ".join(str(f["steps_lost"]) for f in s["failure_list"] if f["steps_lost"] is not None)
    out.append(("steps lost", f"{s['steps_lost']}" + (f" (per failure: {per})" if per else "")))
    out.append(("recovery", _dist(s["recovery_s"])))
    names = {"detection_restart": "detection + restart", "process_group": "process group", "restore": "restore", "first_step": "first step"}
    for key, label in names.items():
        out.append((f"  {label}", _dist(s["recovery_parts_s"][key])))
    stall = f"{_s(s['checkpoint_blocked_s'], 2)} blocked in {s['checkpoints']} saves"
    if s["checkpoint_stall_fraction"] is not None:
        stall += f" ({100 * s['checkpoint_stall_fraction']:.2f}% of step time)"
    stall += f"; async save median {_s(s['async_save_median_s'], 2)}"
    out.append(("checkpoint stall", stall))
    out.append(("step time", f"median {_s(s['step_s_median'], 3)}"))
    cur = "-" if iv["current_steps"] is None else f"{iv['current_steps']} steps ({_s(iv['current_s'])})"
    out.append(("checkpoint interval", f"{cur}, predicted ETTR {_frac(iv['ettr_predicted_current'])}"))
    if iv["mttf_s"] is None:
        rec = "none needed beyond the current (no failure)"
    elif iv["recommended_s"] is None:
        rec = f"- (no checkpoint timed; MTTF {_s(iv['mttf_s'])})"
    else:
        steps = "" if iv["recommended_steps"] is None else f"{iv['recommended_steps']} steps, "
        rec = (
            f"{steps}{_s(iv['recommended_s'])} (T_save {_s(iv['t_save_s'], 2)}, MTTF {_s(iv['mttf_s'])}), "
            f"predicted ETTR {_frac(iv['ettr_predicted_recommended'])}"
        )
    out.append(("Young/Daly interval", rec))
    if s["stragglers"]:
        out.append(("stragglers", ", ".join(f"rank {w['rank']} on {w['host']} ({w['score']:.2f}x)" for w in s["stragglers"])))
    if s["preflight"]:
        verdicts = Counter(str(p["verdict"]) for p in s["preflight"])
        out.append(("preflight", ", ".join(f"{v} x{n}" for v, n in sorted(verdicts.items()))))
    if s["cordoned"]:
        out.append(("cordoned", ", ".join(c["host"] + (f" ({c['check']})" if c["check"] else "") for c in s["cordoned"])))
    if s["skipped_lines"]:
        out.append(("skipped lines", f"{s['skipped_lines']} (cut off or not a record)"))
    width = max(len(k) for k, _ in out)
    head = f"goodput: {s['ledger']} ({s['records']} records)"
    return "\n".join([head, *(f"  {k.ljust(width)}  {v}" for k, v in out)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.goodput", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("save_dir", help="the run's checkpoint.save_dir (or its goodput.jsonl)")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    path = Path(args.save_dir)
    if not path.is_file():
        path = path / LEDGER
    try:
        records = read_ledger(path)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        print(f"goodput: {path}: no ledger", file=sys.stderr)
        return 2
    if not records:
        print(f"goodput: {path}: no ledger (no records in it)", file=sys.stderr)
        return 2
    summary = summarize(records, records.skipped, str(path))
    print(json.dumps(summary, sort_keys=False) if args.json else text(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
