"""How user text becomes numbers, names and sizes (pure): one strict rule for
every parser, so `1_0`, full-width digits and `2.0` for a count are refused
the same way everywhere (Python's int() and float() accept all three)."""
from __future__ import annotations

import math
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


# --- sizes, as nccl-tests takes them ---------------------------------------------

def parse_size(text) -> int:
    """'64K', '1.5M', '2G' (binary units, as nccl-tests) or a whole number;
    a float is refused as it is for every count (TOML's 1.5e6 too)."""
    bad = ValueError(f"size {shorten(repr(text))} is not a whole byte count like 65536, 64K, 1M or 1G")
    if isinstance(text, (bool, float)):
        raise bad
    if isinstance(text, int):
        value = text
    else:
        t = str(text).strip().upper().removesuffix("B")
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
        number = t[:-1] if scale > 1 else t
        if number.isascii() and number.isdigit():   # exactly, however large: a float rounds past 2**53
            value = int(number) * scale
        else:
            try:
                exact = to_float(number) * scale
            except ValueError:
                raise bad from None
            if not math.isfinite(exact) or exact != int(exact):
                raise bad
            value = int(exact)
    if value < 1:
        raise ValueError(f"size {shorten(repr(text))} must be at least 1 byte")
    return value


def size_name(n: int) -> str:
    """8388608 -> '8M', 65536 -> '64K', 1000 -> '1000': as -b and -e take them."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def sweep_length(begin: int, end: int, factor: float) -> int:
    """How many steps begin, begin*f, ... <= end takes (before repeats are
    dropped), without building them: a factor of 1.00000001 takes billions."""
    if begin >= end:
        return 1
    return math.floor(math.log(end / begin) / math.log(factor) + 1e-9) + 1


def size_sweep(begin: int, end: int, factor: float, limit: int | None = None) -> list[int]:
    """nccl-tests -b/-e/-f: begin, begin*f, ... up to end, each size once
    (a factor below 2 rounds small sizes to the same byte count); more
    than `limit` steps are refused before any is built."""
    if not math.isfinite(factor):
        raise ValueError(f"sweep factor must be a finite number, got {factor}")
    if begin > end:
        raise ValueError(f"sweep begins at {begin} bytes, after its end {end}")
    if factor <= 1 and begin != end:
        raise ValueError(f"sweep factor must be > 1, got {factor}")
    if limit is not None and begin != end and sweep_length(begin, end, factor) > limit:
        raise ValueError(f"must be 1 to {limit} sizes; the sweep from {begin} to {end} bytes by a factor "
                         f"of {factor:.12g} has {sweep_length(begin, end, factor):.3g}")
    sizes, s = [], begin
    while s <= end:
        if not sizes or int(s) != sizes[-1]:
            sizes.append(int(s))
        if factor <= 1:
            break
        s *= factor
    return sizes
