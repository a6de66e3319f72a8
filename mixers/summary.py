"""The end-of-run summary of a mix: per stream (or source), documents and bytes (and tokens) in,
kept, what each filter rule matched and removed, removed by ``min_text_length``, spans replaced,
shards written.

Two counts per filter rule, as the manifest holds them:

* ``matched_by_rule``: the documents each rule matches, of every document read: every rule is
  evaluated on every document, whatever the others decided;
* ``removed_by_rule``: the documents each rule removed. A removed document counts once, against
  the rule that decided, as Dolma evaluates them: ``include (none matched)`` when no include
  rule matched it, else the first exclude rule that matched it. So an exclude rule after another
  that matches the same documents removes fewer than it matches (0 when the earlier one matches
  them all), and the removed counts add up to the documents removed.

``failed_by_rule`` (only when not empty): documents on which a rule failed (a jq error) where it
did not decide, so Dolma would not have evaluated it there; they count as not matched.
"""

from __future__ import annotations

from typing import Any

from dolma_pipe.filters import MixCounts
from mixers.rules import StreamRules

NO_INCLUDE = "include (none matched)"


def group_summary(counts: MixCounts, rules: StreamRules) -> dict[str, Any]:
    """One stream's or source's summed counts as the manifest and the table hold them."""

    def per_rule(values: list[int], i: int) -> int:
        return values[i] if i < len(values) else 0

    inc = [f"include {i}: {label}" for i, label in enumerate(rules.include_labels)]
    exc = [f"exclude {i}: {label}" for i, label in enumerate(rules.exclude_labels)]
    known = not counts.unmatched_files
    failed = {
        **{k: per_rule(counts.failed_include, i) for i, k in enumerate(inc)},
        **{k: per_rule(counts.failed_exclude, i) for i, k in enumerate(exc)},
    }
    return {
        "files": counts.files,
        "docs_in": counts.docs,
        "bytes_in": counts.bytes_in,
        "kept": counts.kept,
        "bytes_kept": counts.bytes_out,
        "removed_by_rule": {
            **({NO_INCLUDE: counts.removed_include} if rules.include else {}),
            **{k: per_rule(counts.removed_exclude, i) for i, k in enumerate(exc)},
            **({"min_text_length": counts.removed_short} if rules.min_text_length else {}),
        },
        # None: not counted (some files' counts come from an earlier version's task records).
        "matched_by_rule": {
            **{k: per_rule(counts.matched_include, i) if known else None for i, k in enumerate(inc)},
            **{k: per_rule(counts.matched_exclude, i) if known else None for i, k in enumerate(exc)},
        },
        **({"failed_by_rule": {k: n for k, n in failed.items() if n}} if any(failed.values()) else {}),
        "spans_replaced": counts.spans_replaced,
        **({"tokens_kept": counts.tokens} if counts.tokens else {}),
    }


def _rule_lines(t: dict[str, Any]) -> list[str]:
    """The filter rules' block: per rule, what it matched and what it removed."""
    removed: dict[str, int] = t["removed_by_rule"]
    matched: dict[str, int | None] = t.get("matched_by_rule", {})
    failed: dict[str, int] = t.get("failed_by_rule", {})
    rows: list[tuple[str, str, str, str]] = []  # rule, matched, removed, label
    for key, n in matched.items():
        rule, label = key.split(": ", 1)
        if rule.startswith("exclude") and NO_INCLUDE in removed and not any(r[0] == "no include" for r in rows):
            rows.append(("no include", "", f"{removed[NO_INCLUDE]:,}", "(documents no include rule matched)"))
        note = f"  [failed on {failed[key]:,} documents where it did not decide: counted as not matched]" if key in failed else ""
        rows.append((rule, "not counted" if n is None else f"{n:,}", f"{removed[key]:,}" if key in removed else "", label + note))
    if NO_INCLUDE in removed and not any(r[0] == "no include" for r in rows):
        rows.append(("no include", "", f"{removed[NO_INCLUDE]:,}", "(documents no include rule matched)"))
    if not rows:
        return []
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    w[1], w[2] = max(w[1], len("matched")), max(w[2], len("removed"))
    lines = [
        f"    filter rules (matched: of all {t['docs_in']:,} documents in, every rule evaluated on each; removed: each",
        "      removed document once, against the rule that decided: no include matched, else the first exclude that matched)",
        f"      {'rule':<{w[0]}}  {'matched':>{w[1]}}  {'removed':>{w[2]}}  rule as written",
    ]
    lines += [f"      {a:<{w[0]}}  {b:>{w[1]}}  {c:>{w[2]}}  {label}".rstrip() for a, b, c, label in rows]
    if any(n is None for n in matched.values()):
        lines.append("      (matched: not counted, as task records of an earlier version were reused; --force counts them)")
    return lines


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def render(kind: str, rows: dict[str, dict[str, Any]], extra: dict[str, str] | None = None) -> str:
    """One block per stream/source from :func:`group_summary` results (plus an ``extra`` line each)."""
    lines = [f"mix summary ({kind}):"]
    for name, t in rows.items():
        share = f" ({t['kept'] / t['docs_in']:.1%})" if t["docs_in"] else ""
        tokens = f", {t['tokens_kept']:,} tokens" if t.get("tokens_kept") else ""
        lines.append(
            f"  {name}: {t['files']:,} files, {t['docs_in']:,} documents in ({_mb(t['bytes_in'])}), "
            f"{t['kept']:,} kept{share}{tokens} ({_mb(t['bytes_kept'])} of JSON)"
        )
        removed = t["removed_by_rule"]
        if "matched_by_rule" in t:
            lines += _rule_lines(t)
            if "min_text_length" in removed:
                lines.append(f"    removed by min_text_length: {removed['min_text_length']:,}")
        elif removed:  # a summary an earlier version stored
            lines.append("    removed: " + "; ".join(f"{label} {n:,}" for label, n in removed.items()))
        lines.append(f"    spans replaced: {t['spans_replaced']:,}")
        if extra and name in extra:
            lines.append(f"    {extra[name]}")
    return "\n".join(lines)
