"""Training data read by the probe's child with TensorFlow (gpudiag.train.data): the
synthetic set, Keras-style .npz and TFRecord files, and bad files, written here; the
parent's TF-free check (gpudiag.train.datafile) on the same files agrees with the read.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from helpers import digit_images as images

from gpudiag.errors import UsageError
from gpudiag.train import datafile

tf = pytest.importorskip("tensorflow")
from gpudiag.train import data as data_mod  # noqa: E402


def write_tfrecord(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """Write uint8 images (N, H, W[, C]) and labels in the format ``load_tfrecord`` reads:
    the records a user's own writer makes (tf.train.Example with image_raw, label, height,
    width, depth)."""
    images = images if images.ndim == 4 else images[..., None]
    with tf.io.TFRecordWriter(str(path)) as writer:
        for image, label in zip(images, labels, strict=True):
            h, w, d = image.shape

            def i64(v: int) -> tf.train.Feature:
                return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))

            feature = {
                "image_raw": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[image.astype(np.uint8).tobytes()])
                ),
                "label": i64(label),
                "height": i64(h),
                "width": i64(w),
                "depth": i64(d),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


@pytest.fixture
def tfrecord(tmp_path) -> tuple[Path, np.ndarray, np.ndarray]:
    x, y = images(50, seed=1)
    path = tmp_path / "train.tfrecord"
    write_tfrecord(path, x, y)
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


def test_test_labels_outside_the_training_classes(tmp_path) -> None:
    x, y = images(20)
    path = tmp_path / "split.npz"
    np.savez(path, x_train=x, y_train=y % 3, x_test=x[:4], y_test=np.array([0, 1, 2, 7]))
    with pytest.raises(UsageError, match="y_test has label 7, a class the training labels "
                                         r"\(0..2\) never show"):
        data_mod.load_npz(path)
