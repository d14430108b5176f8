"""Bounded, non-blocking reads of whatever a path names."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from rocm_hwq_autoset import ConfigError
from rocm_hwq_autoset._config import read_open, read_small_file

from ..helpers import check_lines


def test_regular_file(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 100)
    assert read_small_file(str(tmp_path / "a"), 100) == b"x" * 100


def test_too_big_is_refused_without_reading(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(64 << 20)  # sparse: 64 MiB that cost nothing to make
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="more than the 1048576"):
        read_small_file(str(big), 1 << 20)
    assert time.perf_counter() - start < 0.1


def test_fifo_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="FIFO"):
        read_small_file(str(fifo), 1 << 20)


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/dev/zero", "/dev/zero: not a regular file (a character device)"),
        ("/", "/: not a regular file (a directory)"),
        ("", "empty path"),
    ],
)
def test_not_regular(path: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_small_file(path, 1 << 20)
    assert str(caught.value) == said


def test_each_kind_of_file_is_named(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as caught:
        read_small_file(str(fifo), 1 << 20)
    assert str(caught.value).startswith(f"{fifo}: ")  # the file, and its kind
    check_lines(request, [("a FIFO", str(caught.value))], tmp_path)
    devices = [p for p in Path("/dev").iterdir() if p.is_block_device()]
    if not devices:
        pytest.skip("no block device in /dev here")
    with pytest.raises(ConfigError) as caught:
        read_small_file(str(devices[0]), 1 << 20)
    said = str(caught.value)  # its kind, or one without a medium: ENXIO
    assert said.startswith(f"{devices[0]}: ")
    assert said.endswith(("(a block device)", os.strerror(errno.ENXIO)))


def test_missing_and_loop(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file"):
        read_small_file(str(tmp_path / "nope"), 10)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(ConfigError, match="symbolic links"):
        read_small_file(str(tmp_path / "loop"), 10)


def test_proc_file_with_zero_size_is_bounded() -> None:
    # /proc files report size 0 and still have content: the read is bounded anyway.
    with pytest.raises(ConfigError, match="more than the 16 bytes"):
        read_small_file("/proc/self/status", 16)


def test_a_file_that_says_it_is_empty_is_read_no_further_than_the_limit() -> None:
    """/proc files report size 0 and have content: the reader stops one byte
    past the limit (a file that grows after its stat is caught the same way)."""
    fd = os.open("/proc/self/status", os.O_RDONLY)
    try:
        assert os.fstat(fd).st_size == 0
        with pytest.raises(ConfigError) as caught:
            read_open(fd, 10)
        assert "10" in str(caught.value).split()  # the limit, named
        assert os.lseek(fd, 0, os.SEEK_CUR) == 11
    finally:
        os.close(fd)


def test_an_os_error_is_said_as_the_os_says_it() -> None:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)  # no longer open
    with pytest.raises(ConfigError) as caught:
        read_open(fd, 10)
    assert str(caught.value) == "Bad file descriptor"
