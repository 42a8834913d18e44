"""The small HTML pieces every section of the report is made of.

Kept apart from the sections so that each section module holds only what it
says and the pieces (escaping, numbers, tables, badges) look the same in every
part of the page. Cells and bodies given to these helpers are already HTML;
plain text goes through :func:`e` first.
"""

from __future__ import annotations

import re
from html import escape

from lab.untrusted import term_safe


def e(v: object) -> str:
    """Plain text as HTML: escaped, and its control characters shown (ESC as ``\\x1b``), as on a terminal: a
    run record's guest strings (its release, the reason, console lines) may hold any (lab.untrusted)."""
    return escape(term_safe("" if v is None else v, newlines=True))


def anchor(run_id: str) -> str:
    return "run-" + re.sub(r"[^A-Za-z0-9_-]", "-", run_id)


def num(v: object, digits: int = 2) -> str:
    """A table number: integers with thousands separators, floats rounded, None as a dash."""
    if v is None or v == "":
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.0f}" if v.is_integer() and abs(v) >= 1000 else f"{v:,.{digits}f}"
    return e(v)


def get(d: dict | None, *path: str, default: object = None) -> object:
    """A value deep in the report model, or ``default``: a failed or older run's model lacks whole parts."""
    node: object = d
    for p in path:
        if not isinstance(node, dict) or p not in node:
            return default
        node = node[p]
    return node


def accel_name(run: dict) -> str:
    return str(get(run, "accelerator", "name", default="?")).upper()


def accel_badge(run: dict) -> str:
    a = accel_name(run)
    cls = "tcg" if a == "TCG" else "kvm" if a == "KVM" else "plain"
    return f'<span class="badge {cls}" title="{e(get(run, "accelerator", "reason", default=""))}">{e(a)}</span>'


def wrap_id(run_id: str) -> str:
    """A run id that may break after its date and time (20261121-042335-ring-4-...)."""
    m = re.match(r"^(\d{8}-\d{6})-(.+)$", run_id)
    return f"{e(m.group(1))}-<wbr>{e(m.group(2))}" if m else e(run_id)


def status_badge(status: str) -> str:
    cls = "ok" if status == "ok" else "warn" if status == "topology-mismatch" else "bad"
    return f'<span class="badge {cls}">{e(status)}</span>'


def table(head: list[str], rows: list[list[str]], cls: str = "", num_cols: tuple[int, ...] = ()) -> str:
    """Cells are already HTML; num_cols are right-aligned."""

    def cell(tag: str, i: int, v: str) -> str:
        c = ' class="num"' if i in num_cols else ""
        return f"<{tag}{c}>{v}</{tag}>"

    th = "".join(cell("th", i, h) for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    c = f' class="{cls}"' if cls else ""
    return f'<div class="scroll"><table{c}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def kv_table(pairs: list[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in pairs if v not in (None, ""))
    return f'<table class="kv">{rows}</table>'


def box(kind: str, title: str, items: list[str] | None = None, body: str = "") -> str:
    lis = "<ul>" + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul>" if items else ""
    return f'<div class="box {kind}"><h4>{e(title)}</h4>{lis}{body}</div>'


def figure(svg_text: str, caption: str = "") -> str:
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return f"<figure>{svg_text}{cap}</figure>"
