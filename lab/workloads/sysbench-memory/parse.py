"""sysbench memory's transfer line: MiB moved and MiB a second."""

from __future__ import annotations

import re

from lab.untrusted import to_float

_MIB_S = re.compile(r"^\s*(\S+)\s+MiB transferred\s+\((\S+)\s+MiB/sec\)\s*$", re.MULTILINE)


def parse(stdout: str) -> dict:
    rows = [(to_float(m), to_float(r)) for m, r in _MIB_S.findall(stdout)]
    if not rows or any(v is None or v < 0 for v in rows[-1]):
        return {"parse_error": "no sysbench 'N MiB transferred (R MiB/sec)' line in the workload output"}
    mib, rate = rows[-1]
    return {"sysbench_mib": mib, "sysbench_mib_per_s": rate}
