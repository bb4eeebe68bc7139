"""Code points a person cannot see: the allowlist's other half for every human-facing rendering (issue 29).

The class (issue 29, found item 7): a deny-list of "hiding" characters (zero-width space, bidi controls,
BOM) left out others that render as nothing: the word joiner U+2060, the tag characters U+E0000-E007F (which
spell text only a model reads), the Arabic letter mark U+061C, variation selectors, the Hangul fillers...
:func:`invisible` is the rule instead of a list: Unicode general categories Cc (controls), Cf (format), Co
(private use), Cn (unassigned), Cs (surrogates), Zl/Zp (line and paragraph separators), plus every
``Default_Ignorable_Code_Point`` (Unicode DerivedCoreProperties.txt; some are letters or marks by category).
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["escape_invisible", "has_invisible", "invisible"]

#: Default_Ignorable_Code_Point (Unicode 15.1, DerivedCoreProperties.txt), as inclusive ranges.
_DEFAULT_IGNORABLE: Final = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_CATEGORIES: Final = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp"})


def invisible(character: str) -> bool:
    """Whether the one ``character`` renders as nothing (or moves text around): see the module docstring."""
    if unicodedata.category(character) in _CATEGORIES:
        return True
    code = ord(character)
    return any(low <= code <= high for low, high in _DEFAULT_IGNORABLE)


def has_invisible(text: str, *, allowed: str = "\n\t\r") -> bool:
    """Whether ``text`` holds an :func:`invisible` character other than those in ``allowed``."""
    if text.isascii() and text.isprintable():
        return False
    return any(c not in allowed and invisible(c) for c in text)


def _escape(character: str) -> str:
    """``\\uXXXX`` (a JSON escape too); above U+FFFF the UTF-16 surrogate pair, as JSON writes it."""
    code = ord(character)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def escape_invisible(text: str, *, kept: str = "") -> str:
    """``text`` with every :func:`invisible` character but those in ``kept`` written as its JSON escape."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(c) if c not in kept and invisible(c) else c for c in text)
