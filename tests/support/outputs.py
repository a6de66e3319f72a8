"""What a stage run leaves: its ``.done`` markers, and its outputs as bytes for two runs that
must agree byte for byte."""

from __future__ import annotations

from pathlib import Path

import orjson


def done_markers(directory: Path, recursive: bool = False) -> list[Path]:
    """The ``.done`` markers in a ``_done/<phase>`` directory (none while it does not exist)."""
    return list(directory.rglob("*.done") if recursive else directory.glob("*.done")) if directory.exists() else []


def stage_outputs(root: Path, marker_keys: tuple[str, ...] | None = None) -> dict[str, bytes]:
    """Every output and error file under a stage's output root, and each marker's record without
    its timing and fingerprint (which covers the destination), or only its ``marker_keys``; the
    manifest, the lock a killed run leaves and temporaries left out. Two runs that must agree byte
    for byte compare these."""
    files = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.startswith(".") and p.name not in ("_manifest.json", "_lock.json"):
            data = p.read_bytes()
            if p.suffix == ".done":
                rec = orjson.loads(data)
                if marker_keys is None:
                    rec.pop("seconds"), rec.pop("fingerprint"), rec.pop("outputs", None)
                else:
                    rec = {k: rec.get(k) for k in marker_keys}
                data = orjson.dumps(rec, option=orjson.OPT_SORT_KEYS)
            files[str(p.relative_to(root))] = data
    return files
