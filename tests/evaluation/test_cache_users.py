"""A cache no one else can steer (issue #36): another local user plants links
and swaps folders where the cache is; the launcher, the child and the check
reach every file through the cache folder opened without following a link,
tested on its descriptor. Run as root, the other user is ``nobody`` (a forked
child that drops to it); elsewhere these tests skip."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._evaluation import cache as _cache
from rocm_hwq_autoset._evaluation.cache import Cache, open_cache
from rocm_hwq_autoset._model import Config
from tests.fake_child import INPUTS, SETTINGS
from tests.helpers import check_lines

from .children import answer, child

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="another uid needs root")

NOBODY = 65534
RECIPE = ["--module", "my_recipes", "--config", "dense_tp2"]


def as_other_user(work: Callable[[], None]) -> None:
    """Run ``work`` in a forked child that is another user (``nobody``)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            work()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user can write (sticky, as /tmp is)."""
    folder = Path(tempfile.mkdtemp(prefix="rocm-hwq-shared-", dir="/tmp"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def test_a_link_another_user_plants_is_never_followed(
    shared: Path, request: pytest.FixtureRequest
) -> None:
    """Was: the owner test followed the link (``os.stat``): a link to a folder
    of the victim's was taken for the cache, its files the cache's."""
    mine = shared / "mine"
    mine.mkdir(mode=0o700)
    as_other_user(lambda: (shared / "cache").symlink_to(mine))
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(shared / "cache")})
    assert cache is None and problem.split(": ")[0] == str(shared / "cache")
    check_lines(request, [("a link planted as the cache", problem)], shared)
    assert os.listdir(mine) == []


@pytest.mark.parametrize(
    "where", ["a link of theirs", "a link of mine in their folder",
              "a link of mine in a folder all can write, not sticky",
              "a link of mine to theirs", "a link of mine to theirs, absolute",
              "a link of mine to theirs by ./, // and ..",
              "a link of mine to theirs, the 40th on the way"],
)  # fmt: skip
def test_a_link_on_the_way_another_user_could_make_is_never_followed(
    shared: Path, request: pytest.FixtureRequest, where: str
) -> None:
    """Was: only the folder itself was opened without following a link; a link
    on the way to it, to a folder of the victim's, made the cache there (found
    by a new user's try)."""
    mine = shared / "mine"
    mine.mkdir(mode=0o700)
    theirs = shared / "way"
    if "theirs" in where:
        as_other_user(lambda: theirs.symlink_to(mine))
    if where == "a link of theirs":
        way = theirs
    elif where.startswith("a link of mine to theirs"):
        (shared / "own").mkdir(mode=0o755)
        (shared / "x").mkdir()
        way = shared / "own" / "via"
        if where.endswith("absolute"):
            way.symlink_to(theirs)
        elif "./" in where:
            way.symlink_to("./../x//../way")
        elif "40th" in where:  # 39 of mine, then theirs: as many as Linux follows
            for n in range(38):
                (shared / "own" / f"l{n}").symlink_to(f"l{n + 1}")
            (shared / "own" / "l38").symlink_to("../way")
            way = shared / "own" / "l0"
        else:
            way.symlink_to("../way")
    elif where == "a link of mine in their folder":
        as_other_user(lambda: (shared / "theirs").mkdir())
        way = shared / "theirs" / "way"
        way.symlink_to(mine)
    else:
        (shared / "open").mkdir()
        (shared / "open").chmod(0o777)
        way = shared / "open" / "way"
        way.symlink_to(mine)
    inside = "cache" if where == "a link of theirs" else "deeper/cache"
    path = way / inside
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(path)})
    assert cache is None and problem.split(": ")[0] == str(path)
    check_lines(request, [(where, problem)], shared)
    assert os.listdir(mine) == []
    (mine / inside).mkdir(mode=0o700, parents=True)
    with pytest.raises(ConfigError) as raised:  # the child's own opening
        Cache(str(path))
    assert f"{path}: {raised.value}; not used" == problem


def test_a_loop_of_links_on_the_way_is_the_kernel_s_error(shared: Path) -> None:
    (shared / "a").symlink_to("b")
    (shared / "b").symlink_to("a")
    path = shared / "a" / "cache"
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(path)})
    assert (cache, problem) == (None, f"{path}: {os.strerror(errno.ELOOP)}")


def test_a_link_of_root_s_on_the_way_is_followed_for_another_user(
    shared: Path,
) -> None:
    """``/home`` a link to ``/data/home``: root's links are every user's."""
    home = shared / "their-home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    (shared / "own").mkdir(mode=0o755)
    (shared / "own" / "home").symlink_to(home)

    def use() -> None:
        path = str(shared / "own" / "home" / "cache")
        cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": path})
        assert cache is not None and problem == ""

    as_other_user(use)


@pytest.mark.parametrize(
    "where", ["in a folder of mine", "in a sticky folder all can write",
              "a link to that link"],
)  # fmt: skip
def test_a_link_on_the_way_only_its_user_could_make_is_followed(
    shared: Path, where: str
) -> None:
    mine = shared / "mine"
    mine.mkdir(mode=0o700)
    folder = shared if "sticky" in where else shared / "own"
    folder.mkdir(mode=0o755, exist_ok=True)
    (folder / "way").symlink_to(mine)
    if where == "a link to that link":
        (folder / "again").symlink_to("../own/way")
    way = folder / ("again" if "that link" in where else "way")
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(way / "cache")})
    assert (cache is not None, problem) == (True, "")
    assert os.listdir(mine) == ["cache"]


def test_the_child_tests_the_folder_it_is_given(
    world: dict[str, str], shared: Path
) -> None:
    """The link switched to the other user's own folder (0777) while the
    victim's child runs: the child evaluates as without a cache, and writes
    nothing there. Was: the child tested nothing, and stored its entry, lock
    and answer in the other user's folder."""
    theirs = shared / "theirs"

    def plant() -> None:
        theirs.mkdir()
        theirs.chmod(0o777)
        (shared / "cache").symlink_to(theirs)

    as_other_user(plant)
    world = {**world, "CACHE": str(shared / "cache")}
    assert answer(child(world, RECIPE))["how"] == "evaluated"
    assert os.listdir(theirs) == []


def test_an_entry_is_no_entry_under_another_name(tmp_path: Path) -> None:
    """Was: an entry renamed to another launch's key gave that launch its Q."""
    cache = Cache(str(tmp_path))
    cache.store("a" * 32, Config(INPUTS, SETTINGS), _NO_DEPS)
    os.rename(tmp_path / f"{'a' * 32}.json", tmp_path / f"{'b' * 32}.json")
    assert cache.lookup("b" * 32, {}) == (None, _cache.OTHER_LAUNCH)


_NO_DEPS: dict[str, object] = {"env": {}, "files": [], "dirs": [], "lists": []}


def test_a_lock_file_that_is_a_link_is_never_followed(tmp_path: Path) -> None:
    """Was: the node's lock was opened with ``O_CREAT`` and no
    ``O_NOFOLLOW``: a link in its place created a file where it pointed."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    cache = Cache(str(folder))
    outside = tmp_path / "outside"
    (folder / cache.lock_file("k" * 32)).symlink_to(outside)
    assert cache.lock(cache.lock_file("k" * 32), wait=False)  # alone
    assert not outside.exists()


def test_a_folder_swapped_after_it_was_opened_is_not_used(tmp_path: Path) -> None:
    """The launcher's cache, opened again after it let go of it, must be the
    same folder."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    cache = Cache(str(folder))
    cache.close()
    folder.rename(tmp_path / "was")
    folder.mkdir(mode=0o700)
    with pytest.raises(_cache.ConfigError, match="replaced since it was opened"):
        cache.store("k", Config(INPUTS, SETTINGS), _NO_DEPS)


def test_folders_are_made_private_whatever_the_umask(tmp_path: Path) -> None:
    """Was: under ``umask 000`` ``os.makedirs`` made ``~/.cache`` 0777."""
    was = os.umask(0)
    try:
        cache, _ = open_cache({"XDG_CACHE_HOME": str(tmp_path / "home" / ".cache")})
    finally:
        os.umask(was)
    assert cache is not None
    for folder in (tmp_path / "home", tmp_path / "home" / ".cache", Path(cache.path)):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
