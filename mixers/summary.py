"""The end-of-run summary of a mix: per stream (or source), documents and bytes (and tokens) in,
kept, removed by each filter rule and by ``min_text_length``, spans replaced, shards written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mixers.rules import StreamRules


@dataclass
class GroupTotals:
    """Counts of one stream or source, summed over its files."""

    files: int = 0
    docs: int = 0
    kept: int = 0
    removed_include: int = 0
    removed_exclude: list[int] = field(default_factory=list)
    removed_short: int = 0
    spans_replaced: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    tokens: int = 0

    def add(self, counts: dict[str, Any]) -> None:
        self.files += 1
        for key in ("docs", "kept", "removed_include", "removed_short", "spans_replaced", "bytes_in", "bytes_out", "tokens"):
            setattr(self, key, getattr(self, key) + int(counts.get(key, 0)))
        ex = list(counts.get("removed_exclude", []))
        if len(self.removed_exclude) < len(ex):
            self.removed_exclude += [0] * (len(ex) - len(self.removed_exclude))
        self.removed_exclude = [a + (ex[i] if i < len(ex) else 0) for i, a in enumerate(self.removed_exclude)]

    def as_dict(self, rules: StreamRules) -> dict[str, Any]:
        return {
            "files": self.files,
            "docs_in": self.docs,
            "bytes_in": self.bytes_in,
            "kept": self.kept,
            "bytes_kept": self.bytes_out,
            "removed_by_rule": {
                **({"include (none matched)": self.removed_include} if rules.include else {}),
                **{f"exclude {i}: {label}": n for i, (label, n) in enumerate(zip(rules.exclude_labels, self.removed_exclude))},
                **({"min_text_length": self.removed_short} if rules.min_text_length else {}),
            },
            "spans_replaced": self.spans_replaced,
            **({"tokens_kept": self.tokens} if self.tokens else {}),
        }


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def render(kind: str, rows: dict[str, dict[str, Any]], extra: dict[str, str] | None = None) -> str:
    """One block per stream/source from :meth:`GroupTotals.as_dict` results (plus an ``extra`` line each)."""
    lines = [f"mix summary ({kind}):"]
    for name, t in rows.items():
        share = f" ({t['kept'] / t['docs_in']:.1%})" if t["docs_in"] else ""
        tokens = f", {t['tokens_kept']:,} tokens" if t.get("tokens_kept") else ""
        lines.append(
            f"  {name}: {t['files']:,} files, {t['docs_in']:,} documents in ({_mb(t['bytes_in'])}), "
            f"{t['kept']:,} kept{share}{tokens} ({_mb(t['bytes_kept'])} of JSON)"
        )
        removed = t["removed_by_rule"]
        if removed:
            lines.append("    removed: " + "; ".join(f"{label} {n:,}" for label, n in removed.items()))
        lines.append(f"    spans replaced: {t['spans_replaced']:,}")
        if extra and name in extra:
            lines.append(f"    {extra[name]}")
    return "\n".join(lines)
