"""Where the archive is (``JURY_ARCHIVE``) and how a run's copy is written: whole, private, no leftovers."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError, StoreError
from orchestrator.store.archive import ArchivedRun, DirectoryArchive, archive_from


def test_a_path_or_a_file_url_names_a_directory(tmp_path: Path) -> None:
    assert archive_from(None) is None and archive_from("") is None
    by_path = archive_from(str(tmp_path / "a"))
    by_url = archive_from((tmp_path / "a").as_uri())
    assert isinstance(by_path, DirectoryArchive) and isinstance(by_url, DirectoryArchive)
    assert by_path.root == by_url.root == tmp_path / "a"


@pytest.mark.parametrize("value", ["s3://bucket/runs", "https://host/runs", "relative/dir", "file://host/x"])
def test_anything_else_is_refused_by_name(value: str) -> None:
    with pytest.raises(ConfigError, match="JURY_ARCHIVE"):
        archive_from(value)


def test_a_copy_is_written_whole_private_and_replaced(tmp_path: Path) -> None:
    archive = DirectoryArchive(tmp_path / "archive")
    run = ArchivedRun(slug="r-1", entries=[("1-0", b'{"eid":"a"}')], artifacts={"p/x.txt": b"\x00\xff"})
    archive.put("r-1", run.encode())
    archive.put("r-1", run.encode())
    files = list((tmp_path / "archive").iterdir())
    assert [f.name for f in files] == ["r-1.run.zz"]  # no temporary file left beside it
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "archive").stat().st_mode) == 0o700
    assert ArchivedRun.decode("r-1", archive.get("r-1") or b"") == run
    assert archive.get("r-2") is None


def test_a_damaged_or_foreign_copy_is_an_error(tmp_path: Path) -> None:
    blob = ArchivedRun(slug="r-1", entries=[]).encode()
    with pytest.raises(StoreError, match="unreadable"):
        ArchivedRun.decode("r-2", blob)
    with pytest.raises(StoreError, match="unreadable"):
        ArchivedRun.decode("r-1", blob[:-3])
