"""Training data for the probe: synthetic by default, or a user's .npz / TFRecord file.

Synthetic data (the default) is a deterministic, *learnable* 28x28x1, 10-class image set:
each class has a fixed prototype (a few Gaussian blobs at class-specific places); an
example is its class prototype, shifted by up to two pixels, scaled, plus Gaussian
noise. A classifier that learns anything gets well above chance within tens of steps,
so a run that stays at loss ln(10) = 2.3026 and accuracy 0.10 is broken, not unlucky.

Files (``--data PATH``):

- Keras-style .npz: ``x_train`` (N, H, W) or (N, H, W, C), uint8 (scaled by 1/255) or
  float, and integer ``y_train``; ``x_test``/``y_test`` are the evaluation set when
  present, otherwise the last 10% of the training set is held out.
- TFRecord of tf.train.Example with ``image_raw`` (bytes: the uint8 pixels, row-major
  H x W x C) and ``label`` (int64); optional int64 ``height``, ``width``, ``depth``
  (default: a square single-channel image, 784 bytes = 28x28x1). The first 10% of the
  records (at most 1024) are held out for evaluation.

Either way the training stream is a tf.data pipeline: shuffle, repeat, batch (the global
batch, remainder dropped so every tower gets an equal slice), prefetch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from gpudiag.errors import UsageError
from gpudiag.records.training import DataInfo
from gpudiag.train.datafile import MAX_CLASSES, check_arrays, check_data_file

SYNTHETIC_SHAPE = (28, 28, 1)
SYNTHETIC_CLASSES = 10
SYNTHETIC_TRAIN = 8192
SYNTHETIC_EVAL = 1024
PROTOTYPE_SEED = 1234
SHUFFLE_BUFFER = 4096
EVAL_FRACTION = 0.1
MAX_EVAL = 1024


@dataclass(frozen=True)
class ProbeData:
    info: DataInfo
    eval_x: np.ndarray  # float32 [n_eval, H, W, C]
    eval_y: np.ndarray  # int64 [n_eval]
    _train_arrays: tuple[np.ndarray, np.ndarray] | None = None
    _tfrecord: Path | None = None

    def train_dataset(self, global_batch: int, seed: int = 0) -> tf.data.Dataset:
        """Endless (x, y) batches of ``global_batch`` examples, shuffled and prefetched."""
        if self._train_arrays is not None:
            ds = tf.data.Dataset.from_tensor_slices(self._train_arrays)
        else:
            assert self._tfrecord is not None
            ds = (
                tf.data.TFRecordDataset(str(self._tfrecord))
                .skip(self.info.n_eval)
                .map(_parser(self.info.input_shape), num_parallel_calls=tf.data.AUTOTUNE)
                .cache()
            )
        return (
            ds.shuffle(min(SHUFFLE_BUFFER, self.info.n_train), seed=seed)
            .repeat()
            .batch(global_batch, drop_remainder=True)
            .prefetch(tf.data.AUTOTUNE)
        )


def class_prototypes(num_classes: int = SYNTHETIC_CLASSES) -> np.ndarray:
    """The fixed class prototypes [classes, 28, 28]: a few Gaussian blobs per class, peak 1.
    The cluster probe (gpudiag/train/cluster_data.py) draws its examples from the same."""
    height, width, _ = SYNTHETIC_SHAPE
    proto_rng = np.random.default_rng(PROTOTYPE_SEED)
    yy, xx = np.mgrid[0:height, 0:width]
    prototypes = np.zeros((num_classes, height, width), np.float32)
    for c in range(num_classes):
        for _ in range(3):
            cy, cx = proto_rng.uniform(4, height - 4), proto_rng.uniform(4, width - 4)
            sigma = proto_rng.uniform(1.5, 3.5)
            prototypes[c] += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * sigma**2))
        prototypes[c] /= prototypes[c].max()
    return prototypes


def synthetic_arrays(
    n: int, seed: int, num_classes: int = SYNTHETIC_CLASSES
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` synthetic examples; prototypes are fixed, ``seed`` picks the examples."""
    height, width, _ = SYNTHETIC_SHAPE
    prototypes = class_prototypes(num_classes)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, n)
    shifts = rng.integers(-2, 3, (n, 2))
    images = np.empty((n, height, width), np.float32)
    for i in range(n):
        images[i] = np.roll(prototypes[labels[i]], tuple(shifts[i]), axis=(0, 1))
    images = images * rng.uniform(0.5, 1.0, (n, 1, 1)).astype(np.float32)
    images += rng.normal(0.0, 0.35, images.shape).astype(np.float32)
    return np.clip(images, 0.0, 1.0)[..., None], labels.astype(np.int64)


def synthetic(n_train: int = SYNTHETIC_TRAIN, n_eval: int = SYNTHETIC_EVAL) -> ProbeData:
    x, y = synthetic_arrays(n_train, seed=0)
    ex, ey = synthetic_arrays(n_eval, seed=1)
    info = DataInfo("synthetic", "synthetic", n_train, n_eval, SYNTHETIC_SHAPE, SYNTHETIC_CLASSES)
    return ProbeData(info, ex, ey, _train_arrays=(x, y))


def load(path: Path | None) -> ProbeData:
    """The synthetic set for ``None``, else the file (npz or TFRecord); UsageError if bad."""
    if path is None:
        return synthetic()
    kind = check_data_file(path)
    return load_npz(path) if kind == "npz" else load_tfrecord(path)


def _as_images(x: np.ndarray) -> np.ndarray:
    if x.ndim == 3:
        x = x[..., None]
    if np.issubdtype(x.dtype, np.integer):
        return (x.astype(np.float32) / 255.0).astype(np.float32)
    return x.astype(np.float32)


def load_npz(path: Path) -> ProbeData:
    with np.load(path, allow_pickle=False) as npz:
        x, y = npz["x_train"], npz["y_train"]
        test = (npz["x_test"], npz["y_test"]) if {"x_test", "y_test"} <= set(npz.files) else None
    check_arrays(x, y, str(path))
    x, y = _as_images(x), y.reshape(-1).astype(np.int64)
    if test is not None:
        check_arrays(test[0], test[1], f"{path} (x_test, y_test)")
        ex, ey = _as_images(test[0]), test[1].reshape(-1).astype(np.int64)
        if int(ey.max()) > int(y.max()):
            raise UsageError(f"--data {path}: y_test has label {int(ey.max())}, a class the "
                             f"training labels (0..{int(y.max())}) never show")
        if ex.shape[1:] != x.shape[1:]:
            raise UsageError(
                f"--data {path}: x_test images {ex.shape[1:]} != x_train {x.shape[1:]}"
            )
    else:
        n_eval = max(1, min(MAX_EVAL, math.ceil(len(x) * EVAL_FRACTION)))
        if len(x) - n_eval < 1:
            raise UsageError(f"--data {path}: too few examples ({len(x)}) to train and evaluate")
        x, ex, y, ey = x[:-n_eval], x[-n_eval:], y[:-n_eval], y[-n_eval:]
    num_classes = int(max(y.max(), ey.max())) + 1
    shape = tuple(int(d) for d in x.shape[1:])
    info = DataInfo(str(path), "npz", len(x), len(ex), shape, num_classes)  # type: ignore[arg-type]
    return ProbeData(info, ex, ey, _train_arrays=(x, y))


TFRECORD_FEATURES = {
    "image_raw": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}
_SHAPE_FEATURES = {
    "height": tf.io.FixedLenFeature([], tf.int64, default_value=0),
    "width": tf.io.FixedLenFeature([], tf.int64, default_value=0),
    "depth": tf.io.FixedLenFeature([], tf.int64, default_value=0),
}


def _parser(shape: tuple[int, int, int]):
    def parse(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        example = tf.io.parse_single_example(record, TFRECORD_FEATURES)
        image = tf.io.decode_raw(example["image_raw"], tf.uint8)
        image = tf.cast(tf.reshape(image, shape), tf.float32) / 255.0
        return image, example["label"]

    return parse


def load_tfrecord(path: Path) -> ProbeData:
    """One pass over every record: count, shape, labels; the eval records kept in memory."""
    features = {**TFRECORD_FEATURES, **_SHAPE_FEATURES}
    shape: tuple[int, int, int] | None = None
    count, max_label = 0, -1
    eval_images: list[np.ndarray] = []
    eval_labels: list[int] = []
    try:
        for record in tf.data.TFRecordDataset(str(path)):
            ex = tf.io.parse_single_example(record, features)
            raw = ex["image_raw"].numpy()
            label = int(ex["label"].numpy())
            h, w, d = (int(ex[k].numpy()) for k in ("height", "width", "depth"))
            rec_shape = _image_shape(len(raw), h, w, d, path, count + 1)
            if shape is None:
                shape = rec_shape
            elif rec_shape != shape:
                raise UsageError(
                    f"--data {path}: record {count + 1} is {rec_shape}, earlier ones {shape}"
                )
            if label < 0:
                raise UsageError(f"--data {path}: record {count + 1} has label {label} < 0")
            max_label = max(max_label, label)
            if len(eval_images) < MAX_EVAL:
                eval_images.append(np.frombuffer(raw, np.uint8).reshape(rec_shape))
                eval_labels.append(label)
            count += 1
    except tf.errors.DataLossError as exc:
        raise UsageError(
            f"--data {path}: corrupt TFRecord ({exc.message.splitlines()[0]})"
        ) from exc
    except tf.errors.InvalidArgumentError as exc:
        raise UsageError(
            f"--data {path}: record {count + 1} is not a tf.train.Example with "
            "image_raw (bytes) and label (int64)"
        ) from exc
    if shape is None:
        raise UsageError(f"--data {path}: the TFRecord file holds no records")
    n_eval = max(1, min(MAX_EVAL, math.ceil(count * EVAL_FRACTION)))
    if count - n_eval < 1:
        raise UsageError(f"--data {path}: too few records ({count}) to train and evaluate")
    if max_label < 1:
        raise UsageError(f"--data {path}: every record has label 0; need at least two classes")
    if max_label >= MAX_CLASSES:
        raise UsageError(f"--data {path}: a record has label {max_label}; class ids must be "
                         f"0..{MAX_CLASSES - 1} (one output per class)")
    ex_arr = np.stack(eval_images[:n_eval]).astype(np.float32) / 255.0
    ey_arr = np.asarray(eval_labels[:n_eval], np.int64)
    info = DataInfo(str(path), "tfrecord", count - n_eval, n_eval, shape, max_label + 1)
    return ProbeData(info, ex_arr, ey_arr, _tfrecord=path)


def _image_shape(
    n_bytes: int, h: int, w: int, d: int, path: Path, record: int
) -> tuple[int, int, int]:
    if h and w:
        shape = (h, w, d or 1)
        if h * w * (d or 1) != n_bytes:
            raise UsageError(
                f"--data {path}: record {record} says {h}x{w}x{d or 1} but has {n_bytes} bytes"
            )
        return shape
    side = math.isqrt(n_bytes)
    if side * side != n_bytes or side < 4:
        raise UsageError(
            f"--data {path}: record {record} has {n_bytes} image bytes, not a square "
            "single-channel image; add int64 height/width/depth features"
        )
    return (side, side, 1)
