"""How a run ends: its manifest's totals and last write, the summary it prints, and the error it raises.

:func:`refresh_totals` sums the phases' records into the manifest's totals, errors, warnings and
failures (after each phase, and at the end); :func:`finalise` sets the run's status and timings and
writes the manifest a last time; :class:`RunSummary` is what :func:`dolma_pipe.runner.run_stage`
returns and prints (:meth:`RunSummary.render`); :class:`RunFailed` is what it raises when the run
did not finish every task.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from dolma_pipe import storage
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.manifest import Manifest, TaskRecord


class RunFailed(DolmaPipeError, RuntimeError):
    """The run ended without finishing every task; the message says why."""


@dataclass
class RunSummary:
    """The end of a run: its manifest, and the table the stage asked to print."""

    manifest: Manifest
    root: str
    seconds: float
    table: str | None = None

    @property
    def stage(self) -> str:
        return self.manifest.stage

    @property
    def status(self) -> str:
        return self.manifest.status

    @property
    def results(self) -> list[TaskRecord]:
        return [r for p in self.manifest.phases for r in p.tasks.values()]

    @property
    def totals(self) -> dict[str, int]:
        return self.manifest.totals

    @property
    def errors(self) -> dict[str, int]:
        return self.manifest.errors

    def render(self) -> str:
        m = self.manifest
        rows: list[tuple[str, str]] = []
        single = len(m.phases) == 1
        idle = 0
        never = [p.name for p in m.phases if p.status == "pending"]
        for p in m.phases:
            if p.status == "pending":
                continue  # a stopped run never reached it: said once below, not as idle
            done = sum(1 for r in p.tasks.values() if not r.skipped)
            skipped = len(p.tasks) - done
            # a stage's only phase named for what each task reads ("files", pdf's "groups") says just that
            label = p.name if single and p.name in ("files", "groups") else f"{p.name} tasks"
            not_run = f", {len(p.not_run):,} not run" if p.not_run else ""
            total = len(p.tasks) + len(p.failures) + len(p.not_run)
            if total == 0 and not single:
                # Phases a run did not need (dedup's scaled-out clustering below its budget, its
                # star steps after the graph settled): one line, not one each.
                idle += 1
                continue
            rows.append((label, f"{total:,} ({done:,} processed, {skipped:,} already done, {len(p.failures):,} failed{not_run})"))
        if idle:
            rows.append(("idle phases", f"{idle:,} planned no task (listed in the manifest)"))
        if never:
            shown = ", ".join(never[:3]) + (f" and {len(never) - 3:,} more" if len(never) > 3 else "")
            rows.append(("not reached", f"{len(never):,} phase(s) after the stop ({shown})"))
        if self.table is None:
            # A stage's own table says what it did; without one, the counts it summed say it.
            # (Either way they are all in the manifest's totals.)
            for key in sorted(m.totals):
                rows.append((key.replace("_", " "), f"{m.totals[key]:,}"))
        err_total = sum(m.errors.values())
        if err_total:
            kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(m.errors.items(), key=lambda kv: (-kv[1], kv[0])))
            rows.append(("bad records", f"{err_total:,} ({kinds}); see {storage.join(self.root, '_errors')}/"))
        else:
            rows.append(("bad records", "0"))
        if m.redone:
            rows.append(("redone", f"{len(m.redone):,} finished task(s) whose files were missing or damaged (the manifest's redone)"))
        if m.warnings:
            noted = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in sorted(m.warnings.items()))
            rows.append(("warnings", f"{noted} (not errors; see the manifest's task records)"))
        docs = sum(r.docs_in for r in m.phases[0].tasks.values() if not r.skipped) if m.phases else 0
        rate = docs / self.seconds if self.seconds > 0 else 0.0
        rows.append(("time", f"{self.seconds:,.2f} s ({rate:,.0f} docs/s)"))
        width = max(len(k) for k, _ in rows)
        lines = [f"dolma-pipe {m.stage}: {m.status} -> {self.root}"]
        lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
        for key, msg in sorted(m.failures.items()):
            lines.append(f"  FAILED {key}: {msg}")
        return "\n".join(lines)


def refresh_totals(manifest: Manifest) -> None:
    """The manifest's totals, errors, warnings and failures, summed over its phases (a failure is
    keyed ``<phase>:<key>`` when there are several)."""
    totals: dict[str, int] = {}
    errors: dict[str, int] = {}
    warnings: dict[str, int] = {}
    failures: dict[str, str] = {}
    single = len(manifest.phases) == 1
    for p in manifest.phases:
        for k, v in p.totals().items():
            totals[k] = totals.get(k, 0) + v
        for k, v in p.errors().items():
            errors[k] = errors.get(k, 0) + v
        for k, v in p.warnings().items():
            warnings[k] = warnings.get(k, 0) + v
        for key, msg in p.failures.items():
            failures[key if single else f"{p.name}:{key}"] = msg
    manifest.totals, manifest.errors, manifest.warnings, manifest.failures = totals, errors, warnings, failures


def finalise(manifest: Manifest, seconds: float, root: str, save: bool = True) -> None:
    """Totals, status, timings; then the manifest's last write."""
    refresh_totals(manifest)
    manifest.status = "complete" if all(p.status == "complete" for p in manifest.phases) else "failed"
    manifest.finished = datetime.now(timezone.utc).isoformat()
    manifest.results = manifest.phases[-1].step if manifest.phases else {}
    manifest.timings = {
        "wall_seconds": round(seconds, 3),
        "task_seconds": round(sum(r.seconds for p in manifest.phases for r in p.tasks.values() if not r.skipped), 3),
        **{f"{p.name}_seconds": round(p.seconds, 3) for p in manifest.phases if len(manifest.phases) > 1},
    }
    if save:
        manifest.write(root)
