"""Durable storage that cannot be written: an error naming the path and the OS error, nothing
half-written, and the same storage works again once the cause is gone."""

from __future__ import annotations

import errno
import os
import subprocess
import uuid

import pytest

from streamtable.errors import StorageError, StreamsError
from streamtable.state.persistence import FileTaskStatePersistence
from streamtable.storage.local import LocalStorage


def test_a_file_in_the_way_names_the_path_and_the_os_error(tmp_path):
    storage = LocalStorage(str(tmp_path / "state"))
    storage.write("tasks/0/0/a.delta", b"old")
    (tmp_path / "state" / "tasks" / "1").write_text("not a directory")
    with pytest.raises(StorageError) as info:
        storage.write("tasks/1/0/b.delta", b"new")
    message = str(info.value)
    assert message.startswith(f"cannot write {tmp_path}/state/tasks/1/0/b.delta: ")
    assert "Not a directory" in message or "File exists" in message
    assert isinstance(info.value, StreamsError) and isinstance(info.value, OSError)
    os.remove(tmp_path / "state" / "tasks" / "1")  # the fix
    storage.write("tasks/1/0/b.delta", b"new")
    assert storage.read("tasks/1/0/b.delta") == b"new"
    assert storage.read("tasks/0/0/a.delta") == b"old"


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs (needs the right to mount; skipped without)."""
    mount = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_during_a_task_state_commit(tiny_tmpfs):
    persistence = FileTaskStatePersistence(str(tiny_tmpfs / "tasks"))
    state = persistence.checkout(0, 0, -1)
    for i in range(10):
        state.store("counts").put(f"k{i}", (i, 0))
    persistence.commit(state, 0)
    persistence.checkin(state)
    state = persistence.checkout(0, 0, 0)
    for i in range(200):  # incompressible: fills the 64 KiB
        state.store("counts").put(f"big{i}", (os.urandom(600).hex(), 0))
    with pytest.raises(StorageError) as info:
        persistence.commit(state, 1)
    assert f"cannot write {tiny_tmpfs}/tasks/" in str(info.value)
    assert info.value.errno == errno.ENOSPC and "No space left on device" in str(info.value)
    assert not [n for n in os.listdir(tiny_tmpfs / "tasks" / "0" / "0") if ".tmp-" in n]
    # batch 0's state is intact: a restart replays batch 1 from it
    again = FileTaskStatePersistence(str(tiny_tmpfs / "tasks")).checkout(0, 0, 0)
    assert dict(again.store("counts").items()) == {f"k{i}": (i, 0) for i in range(10)}
