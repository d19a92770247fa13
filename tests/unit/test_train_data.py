"""Training data: the synthetic set, Keras-style .npz and TFRecord files, and bad files.

The TF-free parent check (gpudiag.train.datafile) and the child's full read
(gpudiag.train.data) are both exercised on real files written here.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from gpudiag.errors import UsageError
from gpudiag.train import datafile


def images(n: int, side: int = 28, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (n, side, side), dtype=np.uint8),
            rng.integers(0, 10, n).astype(np.int64))


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


def test_test_labels_outside_the_training_classes(tmp_path) -> None:
    x, y = images(20)
    path = tmp_path / "split.npz"
    np.savez(path, x_train=x, y_train=y % 3, x_test=x[:4], y_test=np.array([0, 1, 2, 7]))
    from gpudiag.train import data as data_mod

    with pytest.raises(UsageError, match="y_test has label 7, a class the training labels "
                                         r"\(0..2\) never show"):
        data_mod.load_npz(path)


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


# ----------------------------------------------------------------- with TensorFlow

tf = pytest.importorskip("tensorflow")
from gpudiag.train import data as data_mod  # noqa: E402


@pytest.fixture
def tfrecord(tmp_path) -> tuple[Path, np.ndarray, np.ndarray]:
    x, y = images(50, seed=1)
    path = tmp_path / "train.tfrecord"
    data_mod.write_tfrecord(path, x, y)
    return path, x, y


def test_synthetic_set_is_deterministic_balanced_and_learnable() -> None:
    a = data_mod.synthetic(n_train=2000, n_eval=500)
    b = data_mod.synthetic(n_train=2000, n_eval=500)
    x, y = a._train_arrays
    np.testing.assert_array_equal(x, b._train_arrays[0])
    assert x.shape == (2000, 28, 28, 1) and x.dtype == np.float32
    assert x.min() >= 0.0 and x.max() <= 1.0
    assert set(np.unique(y)) == set(range(10))
    assert a.info.num_classes == 10 and a.info.input_shape == (28, 28, 1)
    assert not np.array_equal(a.eval_x[:10], x[:10])  # the eval set is other examples
    # Learnable: the nearest class mean on the training set classifies held-out
    # examples far above chance (10 %).
    means = np.stack([x[y == c].reshape(-1, 784).mean(0) for c in range(10)])
    ex = a.eval_x.reshape(-1, 784)
    predicted = np.argmin(((ex[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (predicted == a.eval_y).mean() > 0.6


def test_npz_with_and_without_test_split(tmp_path) -> None:
    x, y = images(40)
    plain = tmp_path / "plain.npz"
    np.savez(plain, x_train=x, y_train=y)
    probe = data_mod.load(plain)
    assert probe.info.kind == "npz" and probe.info.input_shape == (28, 28, 1)
    assert probe.info.n_eval == 4 and probe.info.n_train == 36  # last 10 % held out
    np.testing.assert_allclose(probe.eval_x[..., 0], x[-4:] / 255.0, rtol=1e-6)
    split = tmp_path / "split.npz"
    tx, ty = images(8, seed=5)
    np.savez(split, x_train=x, y_train=y, x_test=tx, y_test=ty)
    probe = data_mod.load(split)
    assert probe.info.n_train == 40 and probe.info.n_eval == 8
    xb, yb = next(iter(probe.train_dataset(global_batch=16)))
    assert xb.shape == (16, 28, 28, 1) and yb.shape == (16,) and xb.dtype == tf.float32
    assert float(tf.reduce_max(xb)) <= 1.0


def test_tfrecord_roundtrip_through_tf_data(tfrecord) -> None:
    path, x, y = tfrecord
    assert datafile.check_data_file(path) == "tfrecord"
    assert datafile.check_tfrecord_framing(path) == 50
    probe = data_mod.load(path)
    assert probe.info.kind == "tfrecord" and probe.info.input_shape == (28, 28, 1)
    assert probe.info.n_eval == 5 and probe.info.n_train == 45
    np.testing.assert_allclose(probe.eval_x[..., 0], x[:5] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(probe.eval_y, y[:5])
    seen = set()
    for xb, yb in probe.train_dataset(global_batch=9).take(5):  # one pass over 45
        assert xb.shape == (9, 28, 28, 1)
        for image, label in zip(xb.numpy(), yb.numpy(), strict=True):
            seen.add((int(label), round(float(image[0, 0, 0]) * 255)))
    expected = {(int(label), int(img[0, 0])) for img, label in zip(x[5:], y[5:], strict=True)}
    assert seen == expected  # every training record once per pass, none of the eval ones


def test_corrupt_tfrecords_fail_with_one_line_errors(tfrecord, tmp_path) -> None:
    path, _, _ = tfrecord
    raw = path.read_bytes()
    truncated = tmp_path / "truncated.tfrecord"
    truncated.write_bytes(raw[:-100])
    flipped = tmp_path / "flipped.tfrecord"
    data = bytearray(raw)
    data[12 + 40] ^= 0xFF  # inside the first record's data
    flipped.write_bytes(bytes(data))
    garbage = tmp_path / "garbage.tfrecord"
    garbage.write_bytes(b"this is not a tfrecord file at all, just text\n" * 20)
    for bad, message in ((truncated, "corrupt TFRecord"), (flipped, "bad data checksum"),
                         (garbage, "not a TFRecord file")):
        with pytest.raises(UsageError, match=message) as exc:
            datafile.check_data_file(bad)
        assert "\n" not in str(exc.value)
        with pytest.raises(UsageError, match=str(bad.name)):
            data_mod.load_tfrecord(bad)  # the child's full read fails the same way


def test_records_that_are_not_examples_fail_in_the_full_read(tmp_path) -> None:
    path = tmp_path / "strings.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(5):
            writer.write(f"record {i}".encode())
    assert datafile.check_data_file(path) == "tfrecord"  # framing is fine
    with pytest.raises(UsageError, match=r"not a tf\.train\.Example with image_raw"):
        data_mod.load(path)


def test_tfrecord_with_wrong_image_size(tmp_path) -> None:
    path = tmp_path / "odd.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for label in (0, 1, 2):
            feature = {
                "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x" * 30])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            ex = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(ex.SerializeToString())
    with pytest.raises(UsageError, match="30 image bytes, not a square"):
        data_mod.load(path)


def test_framing_header_fields(tmp_path) -> None:
    """A hand-built record proves the framing walk reads TFRecord's layout."""
    payload = b"hello"
    header = struct.pack("<Q", len(payload))
    record = (header + struct.pack("<I", datafile.masked_crc32c(header)) + payload
              + struct.pack("<I", datafile.masked_crc32c(payload)))
    path = tmp_path / "one.tfrecord"
    path.write_bytes(record * 3)
    assert datafile.check_tfrecord_framing(path) == 3
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == [payload] * 3
