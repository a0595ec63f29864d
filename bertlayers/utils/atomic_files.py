"""Files and folders that appear complete or not at all, and survive a full disk and a rival writer.

Every file or folder the library writes (backups, records, exports, journals, configs) goes
through here:

- it is written under a staging name beside its final place and renamed into place in one
  step, so a kill at any instant leaves the old version or the new one, never a torn one;
- a full disk (ENOSPC, EDQUOT) becomes a `DiskFullError` naming the file, after the staging
  copy is removed; what was there before is untouched;
- staging names carry the writer's process id (`.partial-<pid>-<random>-<name>`), so cleanup
  (`remove_orphaned_staging`) removes only what a dead writer left, never the staging area of
  a writer that still runs;
- HDF5 files (Keras weights) are built in memory and written by Python: h5py writing straight
  to a full disk fails its close and then crashes the interpreter as it exits (a segmentation
  fault after the OSError, seen with h5py 3 under Keras 3.15).

This module imports nothing of bertlayers': everything else may import it.
"""

import contextlib
import errno
import fcntl
import io
import json
import logging
import os
import re
import shutil
import time
import uuid
import zipfile

logger = logging.getLogger(__name__)

STAGING_PREFIX = ".partial-"
_STAGING = re.compile(r"\.partial-(\d+)-[0-9a-f]{8}-")
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(OSError):
    """No space left (or over quota) while writing a file; the previous version is intact."""


class FolderBusyError(RuntimeError):
    """Another live process holds the folder's lock."""


def is_disk_full(error):
    """Whether `error` is a full disk or quota, also when TensorFlow reports it as text."""
    if isinstance(error, OSError) and error.errno in _DISK_FULL:
        return True
    return "No space left on device" in str(error) or "Disk quota exceeded" in str(error)


def disk_full_error(path):
    """A `DiskFullError` naming `path` (what the full disk stopped from being written)."""
    full = DiskFullError(
        errno.ENOSPC,
        f"No space left on the device while writing {path}; nothing was replaced (the previous "
        f"version, if any, is intact). Free some space and run the same command again.",
    )
    full.path = path
    return full


def staging_name(name):
    """A staging name for `name` owned by this process (see `remove_orphaned_staging`)."""
    return f"{STAGING_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}-{name}"


def _writer_is_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _remove_dead_staging_of(directory, name):
    """What a killed writer of `name` left beside it (a whole staged folder of save_huggingface's,
    a model file): removed before the next writer of that name stages its own."""
    mine = re.compile(_STAGING.pattern + re.escape(name))
    for entry in os.listdir(directory):
        match = mine.fullmatch(entry)
        if match and not _writer_is_alive(int(match.group(1))):
            _remove(os.path.join(directory, entry))


def remove_orphaned_staging(directory):
    """Remove the staging files and folders in `directory` whose writer is no longer running.

    Only names this module made are touched (`.partial-<pid>-<8 hex>-...`); a live writer's
    staging area, and anything else in the folder, stay.
    """
    if not os.path.isdir(directory):
        return []
    removed = []
    for name in os.listdir(directory):
        match = _STAGING.match(name)
        if match and not _writer_is_alive(int(match.group(1))):
            _remove(os.path.join(directory, name))
            removed.append(name)
    return removed


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


_MADE = []  # the folders this process created with make_folder, in order


def make_folder(directory):
    """`os.makedirs(directory, exist_ok=True)`, remembering the folders it created, so that a run
    failing on its input can take them away again (`remove_new_empty_folders`)."""
    missing, path = [], os.path.abspath(directory)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    _MADE.extend(reversed(missing))


def remove_new_empty_folders():
    """Remove the folders this process created that hold nothing but its lock files (deepest
    first): what a run stopped by a user's mistake would otherwise leave behind. Returns them."""
    removed = []
    for folder in reversed(_MADE):
        if os.path.isdir(folder) and all(name.endswith(".lock") for name in os.listdir(folder)):
            for key in [k for k in _CLAIMS if os.path.dirname(k) == folder]:
                release(key)
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    _MADE.clear()
    return removed


@contextlib.contextmanager
def atomic_path(path):
    """Yield a staging path beside `path` (a file or a folder); on success rename it to `path`.

    The staging name keeps `path`'s name as its suffix (Keras checks extensions). On any
    failure the staging copy is removed; a full disk is raised as `DiskFullError`.
    """
    directory, name = os.path.split(os.path.abspath(path))
    make_folder(directory)
    _remove_dead_staging_of(directory, name)
    temporary = os.path.join(directory, staging_name(name))
    try:
        yield temporary
        os.replace(temporary, path)
    except Exception as error:
        if is_disk_full(error) and not isinstance(error, DiskFullError):
            raise disk_full_error(path) from error
        raise
    finally:
        _remove(temporary)


def _write_synced(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_bytes(path, data):
    """Write `data` to `path` atomically (synced to disk before the rename)."""
    with atomic_path(path) as temporary:
        _write_synced(temporary, data)


def write_text(path, text):
    """Write the string `text` to `path` (UTF-8), atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path, value, indent=None):
    """Write `value` as JSON to `path`, atomically."""
    write_text(path, json.dumps(value, indent=indent))


class _NamedBuffer(io.BytesIO):
    """An in-memory file that Keras's `save` and `save_weights` accept: they check the name's
    extension (`str(path)`) and write a `BytesIO` as a file object."""

    def __init__(self, name):
        super().__init__()
        self._name = name

    def __str__(self):
        return self._name


def save_weights(model, path):
    """`model.save_weights(path)` (a `.weights.h5`), built in memory and written atomically."""
    buffer = _NamedBuffer(os.path.basename(path))
    model.save_weights(buffer)
    write_bytes(path, buffer.getvalue())


def save_model(model, path, extra_members=None):
    """`model.save(path)` (a `.keras` archive), built in memory and written atomically, with
    `extra_members` ({name: str or bytes}) added to the archive (Keras reads only its own)."""
    buffer = _NamedBuffer(os.path.basename(path))
    model.save(buffer)
    if extra_members:
        with zipfile.ZipFile(buffer, "a") as archive:
            for name, data in extra_members.items():
                archive.writestr(name, data)
    write_bytes(path, buffer.getvalue())


_CLAIMS = {}


def claim(directory, what, lock_name=".lock"):
    """Take `directory`'s lock for the rest of this process (see `locked`), or raise
    `FolderBusyError` when another live process holds it. Claiming it again is a no-op."""
    key = os.path.join(os.path.abspath(directory), lock_name)
    if key not in _CLAIMS:
        context = locked(directory, what, wait=False, lock_name=lock_name)
        context.__enter__()
        _CLAIMS[key] = context
    return key


def release(key):
    """Give back a lock taken with `claim`."""
    context = _CLAIMS.pop(key, None)
    if context is not None:
        context.__exit__(None, None, None)


@contextlib.contextmanager
def locked(directory, what="write into", wait=True, lock_name=".lock"):
    """Hold an exclusive lock on `directory` (its file `lock_name`) for the block.

    Writers that stage, commit and clean up in one folder take this, so a second writer waits
    for the first (`wait`) or is refused with a `FolderBusyError` instead of removing or racing
    its work. The lock is the kernel's (`flock`): a killed holder releases it at once.
    """
    make_folder(directory)
    handle = open(os.path.join(directory, lock_name), "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                handle.close()
                raise FolderBusyError(
                    f"Another process is using {directory} ({what}); wait for it to end or use another folder."
                ) from None
            logger.info(f"Waiting for another process to finish its {what} {directory} ...")
            started = time.time()
            fcntl.flock(handle, fcntl.LOCK_EX)
            logger.info(f"... waited {time.time() - started:.0f} s.")
        yield
    finally:
        if not handle.closed:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
