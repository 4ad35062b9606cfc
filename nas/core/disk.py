"""Writing torch's archives (``torch.save``, ``torch.export.save``, ``torch.jit.save``) so
that a failed write is the file system's ``OSError``, not a crash.

Torch's zip writer (``PyTorchStreamWriter``) given a path and a disk that fills up throws
from its destructor, and the C++ runtime ends the process: ``terminate called ... unexpected
pos``, exit 134, a screen of C++ frames and no word of the disk (``nas export`` onto a full
disk did this). Given a Python file, the writer's every write succeeds as far as it knows;
``torch_file`` keeps the first failure and raises it once the writer is done, with the path,
so a full disk reads as one (ENOSPC), and removes the partial file.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
