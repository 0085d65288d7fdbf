"""What text may reach a unit file, an env file or a command line (the one definition).

Used by the fleet file's schema, the unit and env-file writers and the archive's index
checks, so every layer refuses the same characters; it imports nothing of inferfleet.
"""

from __future__ import annotations

import unicodedata

# Bidirectional overrides make a value read differently from what runs ("Trojan Source").
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Control (C0, DEL, C1), surrogates (cannot be written as UTF-8), line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def unsafe_char(text: str) -> tuple[int, str] | None:
    """The first character no unit, env file or command line may carry: (index, U+XXXX name)."""
    for index, ch in enumerate(text):
        if unicodedata.category(ch) in _REFUSED_CATEGORIES or ch in _BIDI:
            label = unicodedata.name(ch, "") or _CONTROL_NAMES.get(ch, "control character")
            return index, f"U+{ord(ch):04X} {label.lower()}"
    return None


_CONTROL_NAMES = {
    "\0": "NUL",
    "\t": "tab",
    "\n": "line feed",
    "\v": "vertical tab",
    "\f": "form feed",
    "\r": "carriage return",
    "\x1b": "escape",
    "\x7f": "delete",
    "\x85": "next line",
}
