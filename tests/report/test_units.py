"""Memory sizes from text; bytes and seconds as text."""

from __future__ import annotations

import pytest

from stratagem.errors import ConfigError
from stratagem.report.units import format_bytes, format_delta, format_seconds, parse_bytes


@pytest.mark.parametrize("text, expected", [("16GB", 16e9), ("14.5GiB", 14.5 * 2 ** 30), ("2e10", 2e10),
                                            ("512 MiB", 512 * 2 ** 20), ("1kb", 1e3), ("100", 100.0)])
def test_sizes_parse_in_decimal_and_binary_units(text, expected):
    assert parse_bytes(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["16 GX", "lots", "-3GB", ""])
def test_a_size_that_cannot_be_read_says_what_would_do(text):
    with pytest.raises(ConfigError, match="e.g. 16GB, 14.5GiB"):
        parse_bytes(text)


def test_a_size_must_be_positive():
    with pytest.raises(ConfigError, match="positive"):
        parse_bytes("0GB")


def test_formats_pick_readable_units():
    assert format_bytes(1.5 * 2 ** 30) == "1.50 GiB" and format_bytes(2048) == "2.00 KiB"
    assert format_seconds(0.0123) == "12.3 ms" and format_seconds(2.5) == "2.5 s" and format_seconds(4e-6) == "4 us"
    assert format_delta(1.0, 1.5) == "+500 ms (+50.0%)" and format_delta(2.0, 1.0).startswith("-1 s")
