"""Writing files and folders whole or not at all: a full disk or an interrupted run leaves the
previous content (or nothing), never a truncated file or a half-written folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomic", "replace_dir"]


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it onto ``path``.

    Raises ``OSError`` naming ``path`` when it is a directory, its folder is missing or not a
    folder, or the write fails (no space, no permission); the temporary file is removed then."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, "is a directory, not a file", str(path))
    folder = path.parent
    if not folder.is_dir():
        what = "does not exist" if not folder.exists() else "is not a directory"
        raise NotADirectoryError(20, f"cannot write here: {folder} {what}", str(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        os.chmod(fd, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def replace_dir(path: Path, fill: Callable[[Path], None]) -> None:
    """Build a folder with ``fill(tmp)`` in a temporary folder beside ``path``, then put it in
    ``path``'s place (removing what was there). If ``fill`` fails, ``path`` is left as it was
    and the temporary folder is removed."""
    path = Path(path)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        fill(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not exc.filename:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
