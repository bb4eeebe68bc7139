"""Redaction of secrets in text a plugin writes (stderr lines, stray stdout).

Applied to everything hostd relays or quotes from a plugin: ``plugins/log``
messages, the stderr tail of start failures, offending stdout lines. It hides
authorization headers, bearer tokens, values of keys that look secret
(``api_key``, ``token``, ``secret``, ``password``...) and every value of the
manifest's ``backend.env`` (which is where plugins get their credentials).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "[REDACTED]"

_PATTERNS = (
    re.compile(r"(?i)(authorization\s*[:=]\s*)([^\r\n]+)"),
    re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{6,})"),
    re.compile(
        r"""(?ix)
        ((?:api[_-]?key|access[_-]?key|secret(?:[_-]?key)?|token|password|passwd|client[_-]?secret)
         ["']?\s*[:=]\s*["']?)
        ([^\s"',;&]+)
        """
    ),
    re.compile(r"\b(sk-)([A-Za-z0-9_-]{12,})"),
)


class Redactor:
    """Masks secrets in text; ``secrets`` are exact values to hide (length >= 4)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)
        self._exact = re.compile("|".join(re.escape(v) for v in values)) if values else None

    def __call__(self, text: str) -> str:
        """Return ``text`` with every known secret replaced by ``[REDACTED]``."""
        if self._exact is not None:
            text = self._exact.sub(MASK, text)
        for pattern in _PATTERNS:
            text = pattern.sub(lambda m: m.group(1) + MASK, text)
        return text
