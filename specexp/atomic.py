"""Files written whole or not at all: the content goes to a temporary file beside the target, is
flushed to the disk, and only then renamed over it. A full disk, an I/O error or a missing permission
leaves the previous file (or none), never a truncated one that a resume or a reader would take for
the truth (a 0-byte plot, half a results.json)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; it replaces ``path`` when the block ends
    without an error, and is removed otherwise."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        with tmp.open("rb+") as f:
            os.fsync(f.fileno())  # a delayed allocation's ENOSPC shows here, not at the rename
        tmp.replace(path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename in (None, str(tmp)):  # named by the file meant
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def write_text(path: Path, text: str, errors: str | None = None) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text, errors=errors)


@contextlib.contextmanager
def folder(path: Path) -> Iterator[Path]:
    """A temporary folder to write a set of files to (plots); each is moved into ``path`` once all
    were written, so ``path`` never holds a file written halfway."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        path.mkdir(parents=True, exist_ok=True)
        for item in sorted(tmp.iterdir()):
            with item.open("rb+") as f:
                os.fsync(f.fileno())
            item.replace(path / item.name)
    except OSError as exc:
        if exc.filename is None:  # a writer that names no file: the folder it was writing
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EACCES, errno.EPERM, errno.EROFS}


def is_write_error(exc: BaseException) -> bool:
    """A file that could not be written for the disk's sake (full, failing, read-only, not ours)."""
    return isinstance(exc, OSError) and exc.errno in WRITE_ERRORS and exc.filename is not None


def reason(exc: OSError) -> str:
    """A failed write in words: the file and the system's message (``No space left on device``)."""
    what = exc.strerror or str(exc) or type(exc).__name__
    return f"could not write {exc.filename}: {what}" if exc.filename else f"could not write: {what}"
