"""stratagem.heap: glibc's heap kept for reuse while simulating, unless the user says otherwise."""

from __future__ import annotations

import sys

import pytest

from stratagem.heap import OPT_OUT, keep_freed_memory


@pytest.mark.parametrize("variable", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", OPT_OUT])
def test_left_alone_where_the_environment_decides(monkeypatch, variable):
    monkeypatch.setenv(variable, "0")
    assert keep_freed_memory() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_tuned_on_glibc(monkeypatch):
    for variable in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", OPT_OUT):
        monkeypatch.delenv(variable, raising=False)
    import platform
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert keep_freed_memory() is True
