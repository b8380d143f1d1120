"""How user text becomes numbers and names (pure): one strict rule for
every parser, so `1_0`, full-width digits and `2.0` for a count are refused
the same way everywhere (Python's int() and float() accept all three)."""
from __future__ import annotations

import re

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE)
# a name that may become part of a path: no separators, no leading dot
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,63}")
MAX_ECHO = 600   # characters of user input an error message repeats


def to_int(value) -> int:
    """An integer from an int (not a bool) or ASCII decimal digits; ValueError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INT.fullmatch(value.strip()):
        return int(value)
    raise ValueError(f"{shorten(repr(value))} is not a whole number")


def to_float(value) -> float:
    """A number from an int or float (not a bool) or ASCII decimal text
    (inf and nan too: the range checks then say what is allowed); ValueError otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and _FLOAT.fullmatch(value.strip()):
        return float(value)
    raise ValueError(f"{shorten(repr(value))} is not a number")


def is_name(text) -> bool:
    """True for a short name that is safe as part of a file name."""
    return isinstance(text, str) and bool(_NAME.fullmatch(text))


def as_name(text: str) -> str:
    """`text` made safe as part of a file name (other characters become '-')."""
    safe = re.sub(r"[^A-Za-z0-9_.+=-]", "-", text).lstrip(".-")[:64]
    return safe or "run"


def shorten(text: str, limit: int = MAX_ECHO) -> str:
    """`text` with its middle cut out when it is longer than `limit`: the
    start names the key, the end often the values allowed."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]} ...[{len(text) - 2 * keep} characters cut]... {text[-keep:]}"
