"""Bytes and seconds as text."""

from __future__ import annotations

from stratagem.report.units import format_bytes, format_delta, format_seconds


def test_formats_pick_readable_units():
    assert format_bytes(1.5 * 2 ** 30) == "1.50 GiB" and format_bytes(2048) == "2.00 KiB"
    assert format_seconds(0.0123) == "12.3 ms" and format_seconds(2.5) == "2.5 s" and format_seconds(4e-6) == "4 us"
    assert format_delta(1.0, 1.5) == "+500 ms (+50.0%)" and format_delta(2.0, 1.0).startswith("-1 s")
