"""Training data files checked without TensorFlow (gpudiag.train.datafile, the parent's
check): Keras-style .npz and TFRecord files, and bad files, written here. The child's full
read with TensorFlow: tests/e2e/test_train_data_e2e.py."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import digit_images as images

from gpudiag.errors import UsageError
from gpudiag.train import datafile

# ----------------------------------------------------------------- TF-free checks


def test_crc32c_matches_the_published_check_value() -> None:
    # the TF-free CRC-32C that datafile's masked_crc32c (tensorboard's) is built on
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c

    assert crc32c(b"123456789") == 0xE3069283  # CRC-32C check value (RFC 3720)


def test_npz_check_accepts_keras_layout_and_names_what_is_wrong(tmp_path) -> None:
    x, y = images(20)
    good = tmp_path / "good.npz"
    np.savez(good, x_train=x, y_train=y)
    assert datafile.check_data_file(good) == "npz"
    cases = {
        "nokeys.npz": ({"a": x}, "has no x_train, y_train"),
        "lengths.npz": ({"x_train": x, "y_train": y[:5]}, "20 images but 5 labels"),
        "floatlabels.npz": ({"x_train": x, "y_train": y.astype(float)}, "expected integer"),
        "rank.npz": ({"x_train": x[0], "y_train": y}, r"expected \(N, H, W\)"),
        "oneclass.npz": ({"x_train": x, "y_train": np.zeros(20, np.int64)}, "only one class"),
        "somenan.npz": ({"x_train": _with(x.astype(np.float32), 3, np.nan), "y_train": y},
                        "1 of 15680 values in x_train are NaN or infinite"),
        "allnan.npz": ({"x_train": np.full(x.shape, np.nan, np.float32), "y_train": y},
                       "15680 of 15680 values in x_train are NaN or infinite"),
        "inf.npz": ({"x_train": _with(x.astype(np.float32), 0, np.inf), "y_train": y},
                    "NaN or infinite"),
        "hugelabel.npz": ({"x_train": x, "y_train": _with(y, 0, 10**6)},
                          "y_train has label 1000000; class ids must be 0..999"),
    }
    for name, (arrays, message) in cases.items():
        path = tmp_path / name
        np.savez(path, **arrays)
        with pytest.raises(UsageError, match=message):
            datafile.check_data_file(path)


def _with(a: np.ndarray, index: int, value: float) -> np.ndarray:
    out = a.copy()
    out.flat[index] = value
    return out


def test_missing_and_unreadable_files(tmp_path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        datafile.check_data_file(tmp_path / "absent.tfrecord")
    with pytest.raises(UsageError, match="not a regular file"):
        datafile.check_data_file(tmp_path)
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.raises(UsageError, match="empty file"):
        datafile.check_data_file(tmp_path / "empty.tfrecord")
    broken_zip = tmp_path / "broken.npz"
    broken_zip.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(UsageError, match=r"not a readable \.npz"):
        datafile.check_data_file(broken_zip)
