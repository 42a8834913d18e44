"""mkdocs hooks: parts of the docs generated from the code at build time, so they cannot drift.

``<!-- generated: record-files -->`` in a page becomes the table of every run-record file from
``lab.record_files.ALL`` (name, who writes it, what it holds).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SIDES = {
    "host": "host",
    "readback": "guest, before the workload (`readback.tar`)",
    "results": "guest, after the workload (`results.tar`)",
}


def record_files_table() -> str:
    from lab.record_files import ALL

    rows = ["| file | written by | what it holds |", "|---|---|---|"]
    for f in ALL:
        rows.append(f"| `{f.name}` | {SIDES.get(f.side, f.side)} | {f.about.replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"


GENERATED = {"<!-- generated: record-files -->": record_files_table}


def on_page_markdown(markdown: str, **_: object) -> str:
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
