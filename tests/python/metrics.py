"""Reads one counter from placerd's /metrics, to see what the daemon itself recorded."""

from __future__ import annotations

import re
import urllib.request


def requests_total(metrics_port: int, rpc: str, code: str) -> int:
    """placer_requests_total{code=...,rpc=...}: calls that reached placerd's handler."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as page:
        text = page.read().decode()
    pattern = rf'^placer_requests_total\{{code="{code}",rpc="{rpc}"\}} (\d+)'
    found = re.search(pattern, text, re.MULTILINE)
    return int(found.group(1)) if found else 0
