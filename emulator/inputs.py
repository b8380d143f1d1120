"""How user input becomes bytes, numbers, names and sizes (pure): one strict
rule for every parser, so `1_0`, full-width digits and `2.0` for a count are
refused the same way everywhere (Python's int() and float() accept all
three), and one reader of the user's files: regular files only, up to a
size limit, so that a named pipe or a device is refused instead of waiting
or reading forever."""
from __future__ import annotations

import math
import os
import re
import stat

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE)
# a name that may become part of a path: no separators, no leading dot
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,63}")
MAX_ECHO = 600   # characters of user input an error message repeats
MAX_DIGITS = 40  # a whole number written with more digits is refused, not converted (Python's limit is 4300)
MAX_CALL_BYTES = 1 << 32   # 4 GiB: the most one call or one op of a workload moves (a typo must not start a week-long run)
MAX_BYTES = 1 << 56   # the largest byte count of anything (64 PiB; exact, far from int64's end): a collective, a message


# --- the user's files -------------------------------------------------------------------

MAX_INPUT_BYTES = 64 << 20    # a file a person writes: experiment, workload, sweep, calibration, imported traces
MAX_TABLE_BYTES = 1 << 30     # a results folder's table (links.csv of a long run is hundreds of MB)


class InputError(ValueError):
    """A user's file that cannot be read: its message names the file and why."""


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_bytes(path: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a user's input file. Only a regular file, checked before
    it is opened (a named pipe would wait for a writer, /dev/zero never
    ends), and at most `limit` bytes (also a file that grows while it is
    read, or /proc's that say they are empty); InputError otherwise."""
    if "\0" in str(path):
        raise InputError(f"{shorten(repr(path))}: cannot read it: its name holds a NUL character")
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"{path}: cannot read it: it is {_kind(mode)}, not a file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)   # swapped for a pipe since: opening does not wait
    except OSError as e:
        raise InputError(f"{path}: cannot read it: {e.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"{path}: cannot read it: it is {_kind(mode)}, not a file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise InputError(f"{path}: cannot read it: {e.strerror}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise InputError(f"{path}: cannot read it: larger than {size_name(limit)}B, the most a file of this kind "
                         "may hold")
    return b"".join(chunks)


def read_text(path: str, limit: int = MAX_INPUT_BYTES) -> str:
    """read_bytes() as UTF-8 text; InputError names the line of a byte that is not UTF-8."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise InputError(f"{path}: line {line}: not UTF-8 text (byte {data[e.start]:#04x}): not a text file, "
                         "or one not saved as UTF-8") from None


# --- numbers -------------------------------------------------------------------------------


def to_int(value) -> int:
    """An integer from an int (not a bool) or ASCII decimal digits; ValueError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INT.fullmatch(value.strip()):
        if len(value.strip().lstrip("+-")) > MAX_DIGITS:
            raise ValueError(f"{shorten(repr(value), 60)} has more than {MAX_DIGITS} digits: far too large")
        return int(value)
    raise ValueError(f"{shorten(repr(value))} is not a whole number (ASCII digits 0-9)")


def to_float(value) -> float:
    """A number from an int or float (not a bool) or ASCII decimal text
    (inf and nan too: the range checks then say what is allowed); ValueError otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:   # an int past 1.8e308: as far out of range as infinity
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str) and _FLOAT.fullmatch(value.strip()):
        return float(value)
    raise ValueError(f"{shorten(repr(value))} is not a number (ASCII digits 0-9)")


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
        if number.isascii() and number.isdigit():   # exactly: a float rounds past 2**53
            if len(number) > MAX_DIGITS:
                raise ValueError(f"size {shorten(repr(text), 60)} has more than {MAX_DIGITS} digits: far above "
                                 f"{MAX_BYTES} bytes ({MAX_BYTES >> 50} PiB), the largest size")
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
    if value > MAX_BYTES:
        raise ValueError(f"size {shorten(repr(text), 60)} is above {MAX_BYTES} bytes ({MAX_BYTES >> 50} PiB), the "
                         "largest size")
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
