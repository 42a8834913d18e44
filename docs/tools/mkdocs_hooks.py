"""mkdocs hooks: parts of the docs generated from the code at build time, so they cannot drift.

``<!-- generated: record-files -->`` in a page becomes the table of every run-record file from
``lab.record_files.ALL`` (name, who writes it, what it holds); ``<!-- generated: manifest-shape -->``
the manifest's top-level keys with their types and fields, from the golden file of its shape
(``tests/golden/record/manifest.shape``, which tests/unit/test_golden_record.py keeps true).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # docs/tools/ -> the repository
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


def manifest_shape_table() -> str:
    shape = ROOT / "tests" / "golden" / "record" / "manifest.shape"
    types: dict[str, str] = {}
    fields: dict[str, list[str]] = {}
    for line in shape.read_text().splitlines():
        path, _, kind = line.partition(": ")
        if path == ".":
            continue
        top, _, rest = path.partition(".")
        top = re.sub(r"\[\]$", "", top)
        if not rest:
            if path.endswith("[]"):
                types[top] = f"array of {kind}s"
            else:
                types.setdefault(top, kind)
            continue
        child = re.split(r"[.\[]", rest)[0]
        if child not in fields.setdefault(top, []):
            fields[top].append(child)
    rows = ["| key | type | its fields |", "|---|---|---|"]
    for top, kind in types.items():
        rows.append(f"| `{top}` | {kind} | {', '.join(f'`{f}`' for f in fields.get(top, []))} |")
    return "\n".join(rows) + "\n"


GENERATED = {
    "<!-- generated: record-files -->": record_files_table,
    "<!-- generated: manifest-shape -->": manifest_shape_table,
}


def on_page_markdown(markdown: str, **_: object) -> str:
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
