"""Leak scanning: stack traces and known secrets in responses and log lines.

``scan(texts, secrets)`` looks at ``(label, text)`` pairs — a response's head and body, a log
line — and returns one finding per text and problem, naming the label and never the secret
itself (a finding is printed, written to reports and read by people). ``scan_logs`` does the same
for the lines of the services' log files.

A stack trace is Python's header (``Traceback (most recent call last)``) or a frame line
(``File "...", line N``), also as it appears JSON-escaped inside a JSON log line. A secret is
found as sent, JSON-escaped and percent-encoded. Secrets shorter than ``MIN_SECRET_LENGTH`` are
ignored: hookbay refuses signing secrets, passwords and keys that short, and a short string would
match innocent text (a fuzzer sends many invalid, short "secrets" that are never stored).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

MIN_SECRET_LENGTH = 8
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_FRAME = re.compile(r'File \\?"[^"\n]{1,500}?\\?", line \d+')


def scan(texts: Iterable[tuple[str, str]], secrets: Iterable[str]) -> list[str]:
    """One finding per ``(label, text)`` and problem: ``"<label>: stack trace (...)"`` or
    ``"<label>: secret <masked> (...)"``; empty when every text is clean."""
    needles = _needles(secrets)
    findings: list[str] = []
    for label, text in texts:
        findings.extend(_scan_one(label, text, needles))
    return findings


def scan_logs(paths: Iterable[Path], secrets: Iterable[str]) -> list[str]:
    """``scan`` over every line of each file (labels ``<file name>:<line number>``); a file
    that does not exist is a finding too (a log the caller expected was never written)."""
    needles = _needles(secrets)
    findings: list[str] = []
    for path in paths:
        if not path.is_file():
            findings.append(f"{path}: no such log file")
            continue
        with path.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                findings.extend(_scan_one(f"{path.name}:{number}", line, needles))
    return findings


def redact(text: str, strings: Iterable[str]) -> str:
    """``text`` with each of ``strings`` (in every form ``scan`` looks for) replaced: for what a
    request itself sent outside a secret field (a name that happens to equal a secret sent
    elsewhere), which its answer may echo."""
    for form, _ in sorted(_needles(strings), key=lambda needle: -len(needle[0])):
        text = text.replace(form, "<sent in the request>")
    return text


def mask(secret: str) -> str:
    """How a finding names a secret: its first three characters and its length."""
    return f"{secret[:3]}...({len(secret)} chars)"


def _needles(secrets: Iterable[str]) -> list[tuple[str, str]]:
    """``(form, masked name)`` for each secret long enough, in each form it may take."""
    needles: dict[str, str] = {}
    for secret in secrets:
        if len(secret) < MIN_SECRET_LENGTH:
            continue
        name = mask(secret)
        for form in (secret, json.dumps(secret)[1:-1], quote(secret, safe="")):
            needles.setdefault(form, name)
    return list(needles.items())


def _scan_one(label: str, text: str, needles: list[tuple[str, str]]) -> list[str]:
    findings = []
    trace = _TRACEBACK.search(text) or _FRAME.search(text)
    if trace is not None:
        findings.append(f"{label}: stack trace ({trace.group(0)[:80]!r})")
    reported: set[str] = set()
    for form, name in needles:
        if name not in reported and form in text:
            reported.add(name)
            findings.append(f"{label}: secret {name} found")
    return findings
