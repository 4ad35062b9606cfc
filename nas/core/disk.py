"""Writing torch's archives (``torch.save``, ``torch.export.save``, ``torch.jit.save``) so
that a failed write is the file system's ``OSError``, not a crash.

Torch's zip writer (``PyTorchStreamWriter``) given a path and a disk that fills up throws
from its destructor, and the C++ runtime ends the process: ``terminate called ... unexpected
pos``, exit 134, a screen of C++ frames and no word of the disk (``nas export`` onto a full
disk did this). Given a Python file, the writer's every write succeeds as far as it knows;
``torch_file`` keeps the first failure and raises it once the writer is done, with the path,
so a full disk reads as one (ENOSPC), and removes the partial file.

``new_file`` is how a command writes a file the user named (an export, scores): into a
temporary file that takes the name only when complete, never over a file already there.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nas.core.errors import NasError

# A write that found no room: a full disk, a user's quota, a file over the size limit (ulimit
# -f, FAT32's 4 GiB). Not the user's input: `nas` exits 1 (``nas.cli.main``).
NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


class _FirstFailureKept(io.RawIOBase):
    """A binary file whose writes never raise: the first ``OSError`` is kept in ``error``
    and later writes are dropped."""

    def __init__(self, path: Path):
        super().__init__()
        # Unbuffered: a write fails in write(), not later in a flush that seek() or close()
        # would raise.
        self._file = open(path, "wb", buffering=0)  # noqa: SIM115 -- closed by close()
        self.error: OSError | None = None

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, data) -> int:
        left = memoryview(data).cast("B")
        while left and self.error is None:
            try:
                left = left[self._file.write(left) :]  # an unbuffered write may be partial
            except OSError as err:
                self.error = err
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


@contextmanager
def torch_file(path: str | Path) -> Iterator[io.RawIOBase]:
    """``path`` opened for one of torch's archive writers. Raises the first failed write's
    ``OSError`` (naming ``path``) after the block; on any failure the file is removed."""
    path = Path(path)
    file = _FirstFailureKept(path)
    try:
        yield file
        file.close()
        if file.error is not None:
            err = file.error
            raise OSError(err.errno, err.strerror, str(path)) from None
    except BaseException:
        file.close()
        path.unlink(missing_ok=True)
        raise


@contextmanager
def new_file(path: Path) -> Iterator[Path]:
    """A temporary path to write the new file ``path`` into; leaving the block without an
    error gives it the name ``path`` (its missing folders made then), never over a file
    made there meanwhile (``NasError``). The temporary file is removed in any case."""
    existing = next(p for p in path.absolute().parents if p.exists())
    tmp = existing / f".{path.name}.tmp-{os.getpid()}"
    try:
        yield tmp
        path.parent.mkdir(parents=True, exist_ok=True)
        made = NasError(f"{path} was made while it was written; nothing is overwritten")
        try:
            os.link(tmp, path)  # fails where ``path`` exists, unlike a rename
        except FileExistsError:
            raise made from None
        except OSError as err:  # another file system, or one without hard links
            if err.errno not in (errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP):
                raise
            if path.exists():
                raise made from None
            shutil.move(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
