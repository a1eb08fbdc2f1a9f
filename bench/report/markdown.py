"""BENCHMARKS.md: the machine, a summary of every target, each section's table, then the prose."""

from __future__ import annotations

from bench.harness.session import Scale
from bench.report.analysis import Facts, analysis
from bench.report.table import Row, Section

COLUMNS = (
    "| measurement | value (median) | min – max | ratio to | ratio | ratio min – max | target | met |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
)


def merged_facts(sections: list[Section]) -> Facts:
    return {k: v for s in sections for k, v in s.facts.items()}


def _header(scale: Scale, command: str, backend: str, minutes: float) -> list[str]:
    return [
        "# Benchmarks",
        "",
        "Produced by `bench/run` (see `bench/README.md`; `bench/run --help`). Every figure is "
        "measured against its reference **in the same run** on this shared machine: "
        f"median of {scale.runs} run(s), min – max beside it; ratios are per-run ratios, then "
        "their median. Regenerate with `bench/run` (about 15 minutes; `--quick` ≈ 3 minutes "
        "with smaller data and one run).",
        "",
        f"Run: `{command}` — backend "
        f"{'Postgres' if backend == 'postgres' else 'SQLite + filesystem'} for figures 1–6, "
        f"{'quick (smaller data, 1 run)' if scale.quick else 'full'}; took {minutes:.1f} min.",
        "",
    ]


def _targets(sections: list[Section]) -> list[str]:
    """Every row with a target, one table: the page's summary."""
    summary: list[tuple[str, Row]] = [
        (sec.title.split(" ", 1)[0] if sec.title[0].isdigit() else sec.title, r)
        for sec in sections
        for r in sec.rows
        if r.met
    ]
    if not summary:
        return []
    lines = [
        "## Targets",
        "",
        "| figure | measurement | ratio / value | target | met |",
        "| --- | --- | --- | --- | --- |",
    ]
    for fig, r in summary:
        shown = r.ratio if r.ratio and "×" in r.target else r.value
        lines.append(
            f"| {fig} | {r.what}{' vs ' + r.ratio_to if r.ratio_to else ''} | {shown} | {r.target} | {r.met} |"
        )
    lines.append("")
    return lines


def _section(sec: Section) -> list[str]:
    lines = [f"## {sec.title}", ""]
    if sec.unavailable:
        lines += [f"not available: {sec.unavailable}", ""]
    if sec.rows:
        lines += COLUMNS
        for r in sec.rows:
            cells = [
                r.what,
                r.value,
                r.spread,
                r.ratio_to,
                r.ratio,
                r.ratio_spread,
                r.target,
                r.met,
            ]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    if sec.extra_md:
        lines += [sec.extra_md, ""]
    for n in sec.notes:
        lines += [n, ""]
    return lines


def render(
    sections: list[Section],
    scale: Scale,
    machine: dict[str, str],
    command: str,
    backend: str,
    minutes: float,
) -> str:
    """The whole page; ``sections`` in report order."""
    lines = _header(scale, command, backend, minutes)
    lines += ["| machine | |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in machine.items()]
    lines.append("")
    lines += _targets(sections)
    for sec in sections:
        lines += _section(sec)
    prose = analysis(merged_facts(sections), scale)
    if prose:
        lines += ["## Why, where a target is missed, and what would reach it", ""]
        lines += [f"- {a}" for a in prose]
        lines.append("")
    return "\n".join(lines)
