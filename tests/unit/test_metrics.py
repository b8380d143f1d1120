"""Unit tests of bandwidth arithmetic, sizes and the table (emulator/records/metrics.py)."""
from __future__ import annotations

import pytest

from emulator.records.metrics import TABLE_HEADER, algbw_mbps, busbw_mbps, payload_efficiency, table_row
from emulator.inputs import parse_size, size_sweep

K, M, G = 1 << 10, 1 << 20, 1 << 30


# --- algbw / busbw ---------------------------------------------------------------

def test_algbw_one_mib_per_second():
    assert algbw_mbps(M, 1.0) == pytest.approx(8.388608, rel=1e-12)


def test_algbw_scales_with_size_and_time():
    assert algbw_mbps(1_000_000, 0.5) == pytest.approx(16.0)
    assert algbw_mbps(125_000, 1.0) == pytest.approx(1.0)
    assert algbw_mbps(2 * M, 2.0) == pytest.approx(algbw_mbps(M, 1.0))


@pytest.mark.parametrize("collective, ranks, factor", [
    ("allreduce", 8, 1.75),
    ("allreduce", 2, 1.0),
    ("allreduce", 32, 62 / 32),
    ("reduce-scatter", 8, 0.875),
    ("allgather", 4, 0.75),
    ("all-to-all", 8, 0.875),
    ("broadcast", 8, 1.0),
    ("parameter-server", 8, 1.0),
    ("incast", 8, 7.0),
])
def test_busbw_factor(collective, ranks, factor):
    assert busbw_mbps(collective, ranks, M, 1.0) == pytest.approx(8.388608 * factor, rel=1e-12)


def test_busbw_allreduce_hand_value():
    # 8 MB in 0.5 s: algbw 128 Mbit/s (10^6 bytes); busbw 128 * 1.75 = 224
    assert algbw_mbps(8_000_000, 0.5) == pytest.approx(128.0)
    assert busbw_mbps("allreduce", 8, 8_000_000, 0.5) == pytest.approx(224.0)


def test_busbw_unknown_collective_raises():
    with pytest.raises(ValueError, match="bogus"):
        busbw_mbps("bogus", 8, M, 1.0)


# --- payload efficiency -------------------------------------------------------------

def test_payload_efficiency_mtu_1500():
    assert payload_efficiency(1500) == pytest.approx(1448 / 1514)
    assert payload_efficiency(1500) == pytest.approx(0.956, abs=5e-4)   # the README's 95.6 %


def test_payload_efficiency_jumbo_is_higher():
    assert payload_efficiency(9000) == pytest.approx(8948 / 9014)
    assert payload_efficiency(576) < payload_efficiency(1500) < payload_efficiency(9000) < 1


# --- parse_size ----------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("64K", 64 * K), ("64k", 64 * K), (" 64K ", 64 * K), ("64KB", 64 * K),
    ("1M", M), ("16M", 16 * M), ("1G", G), ("2G", 2 * G),
    ("1.5K", 1536), ("0.5M", 512 * K),
    ("100B", 100), ("100", 100), ("1", 1),
    (65536, 65536), (1, 1),
])
def test_parse_size(text, want):
    got = parse_size(text)
    assert got == want
    assert type(got) is int


@pytest.mark.parametrize("text", ["1X", "abc", "", "K", "MB", "M1", "1..5K", "nan"])
def test_parse_size_not_a_number(text):
    with pytest.raises(ValueError, match="byte count"):
        parse_size(text)


@pytest.mark.parametrize("text", ["0.0001K", "1.5", 2.5])
def test_parse_size_fraction_of_a_byte(text):
    with pytest.raises(ValueError, match="whole byte count"):
        parse_size(text)


@pytest.mark.parametrize("text", [0, -1, "0", "-1K", "0K"])
def test_parse_size_below_one_byte(text):
    with pytest.raises(ValueError, match="at least 1 byte"):
        parse_size(text)


def test_parse_size_infinite_is_value_error():
    with pytest.raises(ValueError):
        parse_size("inf")


def test_parse_size_rejects_bool():
    with pytest.raises(ValueError):
        parse_size(True)


@pytest.mark.parametrize("text", ["1.5", 1.5, "100.7"])
def test_parse_size_rejects_fractional_bytes(text):
    with pytest.raises(ValueError):
        parse_size(text)


# --- size_sweep (nccl-tests -b/-e/-f) -----------------------------------------------------

def test_sweep_1m_to_8m_factor_2():
    assert size_sweep(M, 8 * M, 2) == [M, 2 * M, 4 * M, 8 * M]


def test_sweep_end_not_on_grid_stops_below_end():
    assert size_sweep(M, 10 * M, 2) == [M, 2 * M, 4 * M, 8 * M]
    assert size_sweep(M, 8 * M, 3) == [M, 3 * M]


def test_sweep_begin_equals_end_is_one_size():
    assert size_sweep(4 * M, 4 * M, 2) == [4 * M]
    assert size_sweep(4 * M, 4 * M, 1) == [4 * M]     # factor irrelevant for one size


def test_sweep_float_factor_gives_ints():
    sizes = size_sweep(1024, 4096, 1.5)
    assert sizes == [1024, 1536, 2304, 3456]
    assert all(type(s) is int for s in sizes)


@pytest.mark.parametrize("factor", [1, 0.5, 0, -2])
def test_sweep_factor_at_most_one_rejected(factor):
    with pytest.raises(ValueError, match="factor"):
        size_sweep(M, 8 * M, factor)


def test_sweep_begin_after_end_rejected():
    with pytest.raises(ValueError, match="after its end"):
        size_sweep(8 * M, M, 2)


# --- table ----------------------------------------------------------------------------

def test_table_row_contains_the_numbers():
    row = table_row(1048576, 0.3140, 26.72, 46.75, 0.2512)
    fields = row.split()
    assert fields == ["1048576", "314.0", "26.72", "46.75", "251.2", "1.25"]


def test_table_row_without_model_has_dashes():
    fields = table_row(65536, 0.0262, 20.02, 35.04, None).split()
    assert fields == ["65536", "26.2", "20.02", "35.04", "-", "-"]


def test_table_row_aligned_with_header():
    # the size column ends where the header's "size" ends
    row = table_row(1048576, 0.314, 26.72, 46.75, 0.3)
    assert len(row) == len(table_row(1, 1.0, 1.0, 1.0, 1.0))
    names, units = TABLE_HEADER.splitlines()
    assert row.index("1048576") + len("1048576") == names.index("size") + len("size") == units.index("(B)") + 3
    for name, unit in (("time", "(ms)"), ("algbw", "(Mb/s)"), ("busbw", "(Mb/s)"), ("model", "(ms)")):
        end = names.index(f" {name} " if name != "model" else " model ") + len(name) + 1
        assert units[:end].endswith(unit), (name, unit)   # each unit right under its name
    assert names.endswith("meas/model") and len(names) == len(row)


def test_sweep_with_a_factor_below_2_never_repeats_a_size():
    """-b 1 -e 16 -f 1.1: 1, 1.1, 1.21, ... round to 1 several times; each size comes once."""
    sizes = size_sweep(1, 16, 1.1)
    assert sizes == sorted(set(sizes)) and sizes[:4] == [1, 2, 3, 4] and sizes[-1] <= 16


def test_sweep_longer_than_the_limit_is_refused_before_it_is_built():
    with pytest.raises(ValueError, match="must be 1 to 64 sizes.*2.22e\\+09"):
        size_sweep(1, 1 << 32, 1.00000001, 64)
    assert len(size_sweep(1, 1 << 32, 2, 64)) == 33


def test_a_whole_size_as_text_is_exact_past_float_precision():
    assert parse_size("9007199254740993") == 9007199254740993 == parse_size(9007199254740993)
