"""Writing the user's files: whole or not at all, with the permissions the umask gives, through
symbolic links, and refused before any work when the path cannot be written."""

from __future__ import annotations

import json
import os
import stat

import pytest

from stratagem.errors import ConfigError
from stratagem.files import atomic_write_json, atomic_write_text, writable_directory, writable_output


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_a_new_file_gets_the_permissions_of_the_umask(tmp_path, umask_022):
    path = tmp_path / "plan.json"
    atomic_write_json(path, {"a": 1})
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert json.loads(path.read_text()) == {"a": 1}


def test_an_existing_file_keeps_its_permissions(tmp_path, umask_022):
    path = tmp_path / "plan.json"
    path.write_text("{}")
    path.chmod(0o640)
    atomic_write_text(path, "new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_text() == "new"


def test_writing_over_a_symbolic_link_writes_through_it(tmp_path):
    target = tmp_path / "real" / "plan.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "plan.json"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_dangling_link_is_written_through_to_its_target(tmp_path):
    link = tmp_path / "plan.json"
    link.symlink_to(tmp_path / "made" / "plan.json")
    atomic_write_text(link, "x")
    assert link.is_symlink() and (tmp_path / "made" / "plan.json").read_text() == "x"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "plan.json"
    path.write_text("old")
    monkeypatch.setattr(os, "replace", lambda *_: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(ConfigError, match="cannot be written: got No space left on device"):
        atomic_write_text(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


@pytest.mark.parametrize("where, message", [
    ("/proc/plan.json", "cannot be written"),
    ("{tmp}", "is a directory"),
    ("{tmp}/file.txt/plan.json", "cannot be created"),
])
def test_an_output_that_cannot_be_written_is_refused(tmp_path, where, message):
    (tmp_path / "file.txt").write_text("")
    with pytest.raises(ConfigError, match=message):
        writable_output(where.format(tmp=tmp_path), "plan file")


def test_an_output_in_directories_yet_to_make_is_accepted_and_nothing_is_left(tmp_path):
    writable_output(tmp_path / "a" / "b" / "plan.json", "plan file")
    assert list(tmp_path.iterdir()) == []


def test_a_picture_with_a_suffix_its_writer_cannot_make_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="unsupported suffix: expected .png or .pdf"):
        writable_output(tmp_path / "x.txt", "picture", (".png", ".pdf"))


def test_a_checkpoint_directory_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match="is not a directory"):
        writable_directory(tmp_path / "f", "checkpoint directory")
