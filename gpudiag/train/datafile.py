"""Check a ``--data`` file before any child starts, without TensorFlow.

The CLI process must not import TensorFlow, yet a missing, truncated or mistyped data
file should be a one-line error with exit 2 *before* minutes of training start. So:

- ``.npz``: opened with NumPy (``allow_pickle=False``); ``x_train`` and ``y_train`` must
  be there, with as many labels as images, images of rank 3 (N, H, W) or 4 (N, H, W, C),
  integer labels >= 0.
- anything else is read as a TFRecord file: the framing of every record is walked
  (``uint64 length``, ``uint32 masked crc32c(length)``, data, ``uint32 masked
  crc32c(data)``), every length checksum is verified, and the data checksum of the first
  records too. A truncated file, a file that is not a TFRecord, or a flipped length byte
  fails here. The child then parses every record through tf.data
  (gpudiag/train/data.py) and reports what this check cannot see (a record that is not
  a tf.train.Example with ``image_raw`` and ``label``).

The checksum is tensorboard's TF-free ``masked_crc32c`` (the one its ``RecordWriter``
frames event files with). tensorboard's TF-free record reader (``PyRecordReader_New``)
is not used for the walk: it checksums every record's data in pure Python (about 0.1 s
per MiB here, so minutes for a data set of a few GiB), where this walk seeks past the
data after the first DATA_CRC_CHECKED_RECORDS records.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import numpy as np
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

from gpudiag.errors import UsageError

NPZ_KEYS = ("x_train", "y_train")
DATA_CRC_CHECKED_RECORDS = 16


def is_npz(path: Path) -> bool:
    return path.suffix == ".npz" or zipfile.is_zipfile(path)


def check_data_file(path: Path) -> str:
    """Validate ``--data PATH``; returns its kind ("npz" or "tfrecord").

    Raises UsageError with a one-line message naming the file and what is wrong.
    """
    if not path.exists():
        raise UsageError(f"--data {path}: no such file")
    if not path.is_file():
        raise UsageError(f"--data {path}: not a regular file")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise UsageError(f"--data {path}: cannot be read ({exc.strerror})") from exc
    if is_npz(path):
        check_npz(path)
        return "npz"
    check_tfrecord_framing(path)
    return "tfrecord"


def check_npz(path: Path) -> None:
    """Keys, shapes and label values of a Keras-style .npz (x_train, y_train)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in NPZ_KEYS if k not in npz.files]
            if missing:
                raise UsageError(
                    f"--data {path}: .npz has no {', '.join(missing)} "
                    f"(found: {', '.join(npz.files) or 'nothing'}); "
                    "expected Keras-style x_train, y_train"
                )
            x, y = npz["x_train"], npz["y_train"]
    except UsageError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise UsageError(f"--data {path}: not a readable .npz file ({exc})") from exc
    check_arrays(x, y, str(path))


def check_arrays(x: np.ndarray, y: np.ndarray, where: str) -> None:
    """The shape and label rules shared by .npz files and in-memory arrays."""
    if x.ndim not in (3, 4):
        raise UsageError(
            f"--data {where}: x_train has shape {x.shape}; expected (N, H, W) or (N, H, W, C)"
        )
    if x.shape[0] == 0:
        raise UsageError(f"--data {where}: x_train is empty")
    if min(x.shape[1:3]) < 4:
        raise UsageError(f"--data {where}: images of {x.shape[1]}x{x.shape[2]} are too small")
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise UsageError(f"--data {where}: x_train has dtype {x.dtype}; expected numbers")
    if np.issubdtype(x.dtype, np.floating):
        bad = int(x.size - np.count_nonzero(np.isfinite(x)))
        if bad:
            raise UsageError(f"--data {where}: {bad} of {x.size} values in x_train are NaN "
                             "or infinite; training on them gives a NaN loss")
    labels = y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
    if labels.ndim != 1:
        raise UsageError(f"--data {where}: y_train has shape {y.shape}; expected (N,)")
    if labels.shape[0] != x.shape[0]:
        raise UsageError(
            f"--data {where}: {x.shape[0]} images but {labels.shape[0]} labels"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise UsageError(
            f"--data {where}: y_train has dtype {labels.dtype}; expected integer class ids"
        )
    if labels.min() < 0:
        raise UsageError(f"--data {where}: y_train has negative labels")
    if labels.max() < 1:
        raise UsageError(f"--data {where}: y_train has only one class")
    if labels.max() >= MAX_CLASSES:
        raise UsageError(f"--data {where}: y_train has label {int(labels.max())}; class ids "
                         f"must be 0..{MAX_CLASSES - 1} (one output per class)")


#: Class ids above this are taken for a mistake (one output unit per class).
MAX_CLASSES = 1000


def check_batch(n_train: int, global_batch: int, where: str) -> None:
    """A data set smaller than one global batch gives no full step: refuse, do not
    report "learned" on a few repeated examples."""
    if n_train < global_batch:
        raise UsageError(f"--data {where}: {n_train} training examples, fewer than one "
                         f"global batch of {global_batch}; use a larger data set or a smaller "
                         "--batch-per-device")


def check_tfrecord_framing(path: Path) -> int:
    """Walk the record framing of a TFRecord file; returns the number of records."""
    size = path.stat().st_size
    if size == 0:
        raise UsageError(f"--data {path}: empty file")
    count = 0
    offset = 0
    with path.open("rb") as f:
        while offset < size:
            header = f.read(12)
            if len(header) < 12:
                raise UsageError(
                    f"--data {path}: corrupt TFRecord (truncated header of record {count + 1} "
                    f"at byte {offset})"
                )
            (length,) = struct.unpack("<Q", header[:8])
            (length_crc,) = struct.unpack("<I", header[8:])
            if masked_crc32c(header[:8]) != length_crc:
                raise UsageError(
                    f"--data {path}: not a TFRecord file, or corrupt (bad length checksum "
                    f"of record {count + 1} at byte {offset})"
                )
            if offset + 12 + length + 4 > size:
                raise UsageError(
                    f"--data {path}: corrupt TFRecord (record {count + 1} at byte {offset} "
                    f"claims {length} bytes; the file ends first)"
                )
            if count < DATA_CRC_CHECKED_RECORDS:
                data = f.read(length)
                (data_crc,) = struct.unpack("<I", f.read(4))
                if masked_crc32c(data) != data_crc:
                    raise UsageError(
                        f"--data {path}: corrupt TFRecord (bad data checksum of record "
                        f"{count + 1} at byte {offset})"
                    )
            else:
                f.seek(length + 4, 1)
            offset += 12 + length + 4
            count += 1
    return count
