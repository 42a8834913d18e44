"""The HTML report: built from real run records, checked in a real headless Chromium.

The browser is driven over the Chrome DevTools Protocol on a pipe
(``--remote-debugging-pipe``: JSON messages ending in NUL on fds 3 and 4), so
no Python package beyond the standard library is needed. The page is loaded
from file:// with every network request recorded: a request that is not
``file:`` or ``data:`` fails the test, as does any console message of level
error or any uncaught exception. A full-page screenshot is written next to the
report (``report.png``) for a person to look at.

Run records: the ones checked in under ``tests/data/runs/`` (copied next to the report); missing ones fail.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from common import REPO, needs_setup_package

from lab.report.html import render_html
from lab.report.report_model import build_report
from lab.report.svg import dot_plot, heatmap, line_chart, nice_ticks
from lab.report.svg_topology import grid_shape, topology_graph

DATA_RUNS = REPO / "tests" / "data" / "runs"
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
SECTIONS = ("summary", "topology", "runs", "compare")


def _run_dirs() -> list[Path]:
    dirs = sorted(p for p in DATA_RUNS.iterdir() if (p / "manifest.json").exists())
    assert dirs, f"no run records in {DATA_RUNS}: they are part of the repository (see its README)"
    return dirs


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A report of the real run records, in a scratch directory (the records are copied next to it)."""
    out = tmp_path_factory.mktemp("report")
    runs = out / "runs"
    for d in _run_dirs():
        shutil.copytree(d, runs / d.name)
    paths = build_report(sorted(runs.iterdir()), out / "report.html")
    return paths.html


# --- structure, without a browser --------------------------------------------------------


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.tags: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        for k in ("src", "href"):
            if a.get(k):
                self.urls.append(a[k])


def test_report_is_one_self_contained_file(built: Path) -> None:
    text = built.read_text()
    p = _Collect()
    p.feed(text)
    assert set(SECTIONS) <= p.ids
    assert "script" not in p.tags and "link" not in p.tags and "img" not in p.tags
    assert p.tags.count("svg") >= 8
    # Every link is relative (raw files, Perfetto JSON) or in-page; nothing to fetch.
    for u in p.urls:
        assert not re.match(r"^[a-z]+://", u) and not u.startswith("//"), u
        if not u.startswith("#"):
            assert (built.parent / u).exists(), u
    assert "@import" not in text and "url(" not in text


def test_report_shows_accelerator_and_each_run(built: Path) -> None:
    report = json.loads(built.with_suffix(".json").read_text())
    text = built.read_text()
    accels = {r["accelerator"]["name"] for r in report["runs"]}
    if "tcg" in accels:
        assert 'id="accel-banner"' in text and ">TCG<" in text
    for r in report["runs"]:
        assert r["run_id"] in text
        assert f'id="run-{r["run_id"]}"' in text
    assert 'class="ab"' in text  # the A/B table of the on/off comparison


def test_render_html_escapes_and_survives_a_failed_run() -> None:
    run = {
        "run_id": "r<1>",
        "status": "panic",
        "reason": "Kernel panic - not syncing: <boom> & more",
        "console_tail": ["[ 1.0] <script>alert(1)</script>", "end Kernel panic"],
        "topology": {"name": "t&t", "distances": [[10]], "node_cpus": [[0]], "memory_mib": [512], "links": []},
        "kernel": {"name": "mine", "patches": ["0001-sched-numa-<x>.patch"]},
        "workload": {"name": "numa01"},
        "accelerator": {"name": "kvm"},
        "metrics": {},
    }
    out = render_html({"runs": [run], "groups": [], "notes": ["a <note>"], "generated": "now"}, [])
    assert "<script>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "Kernel panic - not syncing: &lt;boom&gt; &amp; more" in out
    assert "0001-sched-numa-&lt;x&gt;.patch" in out
    assert 'id="run-r-1-"' in out
    for s in SECTIONS:
        assert f'id="{s}"' in out


def test_empty_comparison_says_why(built: Path) -> None:
    report = json.loads(built.with_suffix(".json").read_text())
    out = render_html(report, [])
    assert "No A/B comparison" in out


def test_each_event_has_one_colour_in_every_chart(built: Path) -> None:
    """The heatmap, the rate chart's legend and the stick-reason bars of a kind all draw its one colour
    (lab.report.colors, keyed by lab.events' short words); no other event colour appears."""
    from lab.events import MIGRATE_PAGES, NUMA_DECISIONS, STICK_NUMA
    from lab.report.colors import EVENT_COLORS

    assert set(EVENT_COLORS) == {ev.short for ev in (*NUMA_DECISIONS, MIGRATE_PAGES)}
    assert len(set(EVENT_COLORS.values())) == len(EVENT_COLORS)
    text = built.read_text()
    for kind, colour in EVENT_COLORS.items():
        # The chart legends: a swatch of the kind's colour right before its name.
        assert re.search(rf'fill="{colour}"/><text [^>]*>{kind}</text>', text) or kind == MIGRATE_PAGES.short, kind
        assert text.count(colour) > 3, kind
    heat = re.findall(r'<svg [^>]*class="chart heatmap".*?</svg>', text)
    assert heat, "no node-move heatmaps in the report"
    for h in heat:
        kind = re.search(r"<title>(\w+)</title>", h).group(1)
        # The busiest cell is drawn in the kind's colour itself (an all-zero matrix has none).
        if re.search(r'<rect [^>]*fill="(?!#f5f7fa)', h):
            assert f'fill="{EVENT_COLORS[kind]}"' in h, kind
    stick_bars = re.findall(r'<svg [^>]*class="chart bars".*?</svg>', text)
    assert stick_bars and all(f'fill="{EVENT_COLORS[STICK_NUMA.short]}"' in b for b in stick_bars)
    migrate = [c for c in re.findall(r"<svg .*?</svg>", text) if f"{MIGRATE_PAGES.name} calls per second" in c]
    assert migrate and all(f'fill="{EVENT_COLORS[MIGRATE_PAGES.short]}"' in c for c in migrate)


# --- the SVG helpers ----------------------------------------------------------------------


def test_svg_helpers_are_deterministic_and_escaped() -> None:
    h = heatmap([[0, 3], [1, 0]], ["0", "1"], title="move <x>")
    assert h == heatmap([[0, 3], [1, 0]], ["0", "1"], title="move <x>")
    assert h.startswith("<svg") and 'viewBox="' in h and "move &lt;x&gt;" in h
    assert ">3<" in h and ">4<" in h  # a cell and the total
    lc = line_chart([0, 1, 2], {"a": [1, None, 3]}, title="t")
    assert lc.count("<circle") == 2  # the gap splits the line
    assert "<polyline" not in lc
    dp = dot_plot([("base", [1.0, 2.0], "#000000"), ("new", [], "#111111")], title="d")
    assert dp.count("<circle") == 2 and "no value" in dp
    tg = topology_graph([["node 0"], ["node 1"]], [(0, 1, "20")])
    assert tg.count("<circle") == 2 and ">20<" in tg
    assert grid_shape(8, [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (6, 7), (0, 4), (1, 5), (2, 6), (3, 7)]) == (2, 4)
    assert grid_shape(4, [(0, 1), (1, 2), (2, 3), (3, 0)]) is None  # a ring stays a circle
    mesh = topology_graph([[f"node {i}"] for i in range(4)], [(a, b, "20") for a in range(4) for b in range(a + 1, 4)])
    assert "every link: 20" in mesh and ">20<" not in mesh  # a crowded uniform mesh says its distance once
    assert nice_ticks(0, 97) == [0, 20, 40, 60, 80, 100]


# --- a real browser ------------------------------------------------------------------------


class CDP:
    """Chrome DevTools Protocol over --remote-debugging-pipe (fd 3: commands in, fd 4: replies out)."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        self._log_file = log.open("wb")
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()

        def child() -> None:
            # Move both ends out of the way first, then onto 3 and 4 (inheritable; the rest is close-on-exec).
            a, b = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            for src, dst in ((a, 3), (b, 4)):
                os.dup2(src, dst)
                os.set_inheritable(dst, True)

        self.proc = subprocess.Popen(
            argv,
            close_fds=False,
            preexec_fn=child,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=self._log_file,
        )
        os.close(cmd_r)
        os.close(out_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out_r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._out_r, 1 << 20)
            if not chunk:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"chromium closed the DevTools pipe; its log ends with:\n{tail}")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self._id += 1
        msg: dict = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        for ev in self.events:
            if ev.get("method") == method:
                return ev
        while True:
            ev = self._read_message(deadline)
            self.events.append(ev)
            if ev.get("method") == method:
                return ev

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)
        os.close(self._out_r)
        self._log_file.close()


def browser_argv(profile: str) -> list[str]:
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--mute-audio",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--remote-debugging-pipe",
        "about:blank",
    ]


DOM_PROBE = """(() => {
  const q = (s) => document.querySelectorAll(s);
  const drawn = (s) => [...q(s)].filter(el => el.getBoundingClientRect().width > 100).length;
  const sec = {};
  for (const id of %s) {
    const el = document.getElementById(id);
    sec[id] = el ? {svgs: el.querySelectorAll('svg').length, height: el.getBoundingClientRect().height,
                    text: el.innerText.length} : null;
  }
  const svgs = [...q('svg')].map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; });
  return JSON.stringify({sections: sec, svgs, title: document.title,
                         banner: (document.getElementById('accel-banner') || {}).innerText || '',
                         better: q('td.better').length, worse: q('td.worse').length,
                         views: {strips: drawn('svg.strip'), stripRects: q('svg.strip rect.res').length,
                                 stripMarks: q('svg.strip [class^=mark-]').length,
                                 nodeMemory: drawn('.node-memory svg'),
                                 nodeMemoryLines: q('.node-memory svg polyline').length,
                                 overlays: drawn('.ab-overlays svg.band'),
                                 bands: q('.ab-overlays polygon.band').length},
                         betterColor: q('td.better').length ? getComputedStyle(q('td.better')[0]).color : '',
                         scripts: q('script').length});
})()"""


ELEMENT_RECT = """(() => {
  const el = document.querySelector(%s);
  if (!el) return null;
  el.scrollIntoView();
  const r = el.getBoundingClientRect();
  return JSON.stringify({x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height});
})()"""


def load_in_chromium(
    html: Path, screenshot: Path | None = None, width: int = 1280, elements: dict[str, Path] | None = None
) -> dict:
    """Load the page from file:// and report console errors, exceptions, network requests and the DOM.
    ``elements``: CSS selector -> a PNG of the first element it selects, as drawn (the docs' screenshots)."""
    profile = tempfile.mkdtemp(prefix="numalab-chromium-")
    cdp = CDP(browser_argv(profile), Path(profile) / "chromium.log")
    try:
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            cdp.send(f"{domain}.enable", session=session)
        cdp.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        cdp.send("Page.navigate", {"url": html.resolve().as_uri()}, session=session)
        cdp.wait_for("Page.loadEventFired", timeout=60)
        probe = cdp.send(
            "Runtime.evaluate",
            {"expression": DOM_PROBE % json.dumps(list(SECTIONS)), "returnByValue": True},
            session=session,
        )
        dom = json.loads(probe["result"]["value"])
        if screenshot is not None:
            size = cdp.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            shot = cdp.send(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1},
                },
                session=session,
                timeout=60,
            )
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        for selector, png in (elements or {}).items():
            probe = {"expression": ELEMENT_RECT % json.dumps(selector), "returnByValue": True}
            rect = cdp.send("Runtime.evaluate", probe, session=session)["result"].get("value")
            if not rect:
                continue
            shot = cdp.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                       "clip": json.loads(rect) | {"scale": 1}},
                            session=session, timeout=60)  # fmt: skip
            png.write_bytes(base64.b64decode(shot["data"]))
        errors, requests = [], []
        for ev in cdp.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(f"console.{p['type']}: {p.get('args')}")
            elif m == "Runtime.exceptionThrown":
                errors.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif m == "Network.requestWillBeSent":
                requests.append(p["request"]["url"])
        return {"dom": dom, "errors": errors, "requests": requests}
    finally:
        cdp.close()
        shutil.rmtree(profile, ignore_errors=True)


browser = needs_setup_package(CHROMIUM is not None, "chromium", "chromium")


@pytest.mark.browser
@browser
def test_report_in_headless_chromium(built: Path) -> None:
    shot = built.with_suffix(".png")
    res = load_in_chromium(built, shot)
    assert res["errors"] == []
    # The page itself is the only request: no fonts, scripts, images or anything remote.
    assert [u for u in res["requests"] if not u.startswith(("file:", "data:"))] == []
    assert res["requests"] == [built.resolve().as_uri()]
    dom = res["dom"]
    assert dom["scripts"] == 0
    for s in SECTIONS:
        assert dom["sections"][s] is not None, s
        assert dom["sections"][s]["height"] > 50 and dom["sections"][s]["text"] > 50, s
    assert dom["sections"]["topology"]["svgs"] >= 1
    assert dom["sections"]["runs"]["svgs"] >= 3 * 2  # heatmaps and timelines per run
    assert dom["sections"]["compare"]["svgs"] >= 1
    assert all(w > 50 and h > 30 for w, h in dom["svgs"]), dom["svgs"]  # every picture actually drawn
    report = json.loads(built.with_suffix(".json").read_text())
    if any(r["accelerator"]["name"] == "tcg" for r in report["runs"]):
        assert "TCG" in dom["banner"]
    if dom["better"]:
        assert dom["betterColor"] != "rgb(31, 41, 51)"  # coloured, not the body ink
    assert shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
