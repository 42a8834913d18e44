"""``--source debian:X.Y`` without the network: what apt's policy says is read, the suites asked follow the
system's release, and a spec that is not a series is one line (the fetch itself: tests/kernel/test_kernel_73.py)."""

from __future__ import annotations

import pytest

from lab.errors import LabError
from lab.kernel.debian_source import fetch, parse_policy, suites

# apt-cache policy linux-source-7.2 with numalab's private lists, 2026-11-28 (trixie-backports and sid)
POLICY_72 = """linux-source-7.2:
  Installed: (none)
  Candidate: 7.2.13-1
  Version table:
     7.2.13-1 500
        500 http://deb.debian.org/debian sid/main amd64 Packages
     7.2.12-1~bpo13+1 100
        100 http://deb.debian.org/debian trixie-backports/main amd64 Packages
     7.2.11-1~bpo13+1 100
        100 http://deb.debian.org/debian trixie-backports/main amd64 Packages
"""
POLICY_73 = """linux-source-7.3:
  Installed: (none)
  Candidate: 7.3.4-1~bpo13+1
  Version table:
     7.3.4-1~bpo13+1 100
        100 http://deb.debian.org/debian trixie-backports/main amd64 Packages
"""


def test_the_candidate_and_its_suite_are_read_from_apts_policy() -> None:
    assert parse_policy(POLICY_72, "linux-source-7.2") == ("7.2.13-1", "sid")
    assert parse_policy(POLICY_73, "linux-source-7.3") == ("7.3.4-1~bpo13+1", "trixie-backports")
    assert parse_policy("linux-source-9.9:\n  Installed: (none)\n  Candidate: (none)\n", "linux-source-9.9") is None
    assert parse_policy("", "linux-source-7.3") is None


def test_the_suites_asked_are_the_systems_release_and_the_later_ones() -> None:
    assert suites("bookworm") == ("bookworm", "trixie", "trixie-backports", "forky", "sid")
    assert suites("trixie") == ("trixie", "forky", "sid")
    assert suites("duke") == ("duke", "sid")  # (a release numalab does not know: its own and sid)


@pytest.mark.parametrize("spec", ["debian:7", "debian:seven", "debian:7.3.4", "debian:"])
def test_a_spec_that_is_not_a_series_is_one_line(spec: str) -> None:
    with pytest.raises(LabError, match=rf"^--source {spec}: not a Debian kernel series \(debian:7.3, "):
        fetch(spec, print)
