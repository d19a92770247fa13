"""TensorFlow logical GPUs -> NVML physical devices, from fixture device details.

The fixtures are what a 4-GPU machine gives: NVML's DeviceInfo list (NVML numbers devices
by PCI bus id) and, per TensorFlow logical GPU, the details gpudiag collects in the child
(``physical_device_desc`` carries the PCI bus id; get_device_details only name and
compute capability).
"""

from __future__ import annotations

import pytest

from gpudiag.nvml import (
    NOT_AVAILABLE,
    DeviceInfo,
    logical_by_physical,
    map_logical_to_physical,
    normalize_pci_bus_id,
    parse_cuda_visible_devices,
    pci_bus_id_from_desc,
)
from gpudiag.records.results import EnvResult
from gpudiag.verdicts import env as verdicts

GIB = 2**30

# NVML's view: four GPUs in PCI bus order, uppercase hex with an 8-digit domain.
PHYSICAL = [
    DeviceInfo(
        0,
        "NVIDIA A100-SXM4-40GB",
        "GPU-1a2b3c4d-0000-1111-2222-333344445555",
        "00000000:07:00.0",
        40 * GIB,
        400.0,
    ),
    DeviceInfo(
        1,
        "NVIDIA A100-SXM4-40GB",
        "GPU-5e6f7a8b-0000-1111-2222-333344445555",
        "00000000:0F:00.0",
        40 * GIB,
        400.0,
    ),
    DeviceInfo(
        2,
        "NVIDIA A100-SXM4-40GB",
        "GPU-9c0d1e2f-0000-1111-2222-333344445555",
        "00000000:47:00.0",
        40 * GIB,
        400.0,
    ),
    DeviceInfo(
        3,
        "NVIDIA A100-SXM4-40GB",
        "GPU-aabbccdd-0000-1111-2222-333344445555",
        "00000000:4E:00.0",
        40 * GIB,
        400.0,
    ),
]

# TensorFlow's physical_device_desc for CUDA_VISIBLE_DEVICES=2,0 (lowercase, 4-digit domain).
DESC_GPU0 = (
    "device: 0, name: NVIDIA A100-SXM4-40GB, pci bus id: 0000:47:00.0, compute capability: 8.0"
)
DESC_GPU1 = (
    "device: 1, name: NVIDIA A100-SXM4-40GB, pci bus id: 0000:07:00.0, compute capability: 8.0"
)


def test_pci_bus_id_formats_normalise_to_one_form() -> None:
    assert normalize_pci_bus_id("00000000:4E:00.0") == "0000:4e:00.0"
    assert normalize_pci_bus_id("0000:4e:00.0") == "0000:4e:00.0"
    assert normalize_pci_bus_id("4e:00.0") == "0000:4e:00.0"
    assert normalize_pci_bus_id("not a bus id") is None
    assert pci_bus_id_from_desc(DESC_GPU0) == "0000:47:00.0"
    assert pci_bus_id_from_desc("device: 0, name: x") is None


def test_pci_bus_id_match_is_exact_whatever_the_order() -> None:
    logical = [
        {
            "name": "/device:GPU:0",
            "physical_index": 0,
            "pci_bus_id": pci_bus_id_from_desc(DESC_GPU0),
        },
        {
            "name": "/device:GPU:1",
            "physical_index": 1,
            "pci_bus_id": pci_bus_id_from_desc(DESC_GPU1),
        },
    ]
    # Even a misleading CUDA_VISIBLE_DEVICES does not override a PCI match.
    out = map_logical_to_physical(logical, "0,1", PHYSICAL)
    assert [(m.nvml_index, m.method) for m in out] == [(2, "pci_bus_id"), (0, "pci_bus_id")]
    assert all(m.note is None for m in out)


def test_cuda_visible_devices_order_without_pci() -> None:
    logical = [
        {"name": "/device:GPU:0", "physical_index": 0},
        {"name": "/device:GPU:1", "physical_index": 1},
    ]
    out = map_logical_to_physical(logical, "2,0", PHYSICAL, cuda_device_order="PCI_BUS_ID")
    assert [(m.nvml_index, m.method, m.note) for m in out] == [
        (2, "cuda_visible_devices", None),
        (0, "cuda_visible_devices", None),
    ]
    # Without CUDA_DEVICE_ORDER=PCI_BUS_ID an index is CUDA's order: said in the note.
    out = map_logical_to_physical(logical, "2,0", PHYSICAL)
    assert [m.nvml_index for m in out] == [2, 0]
    assert all(m.note and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in m.note for m in out)


def test_cuda_visible_devices_by_uuid_prefix() -> None:
    logical = [{"name": "/device:GPU:0", "physical_index": 0}]
    out = map_logical_to_physical(logical, "GPU-aabbccdd", PHYSICAL)
    assert out[0].nvml_index == 3 and out[0].method == "cuda_visible_devices"
    assert out[0].note is None  # a UUID does not depend on CUDA's order
    ambiguous = map_logical_to_physical(logical, "GPU-", PHYSICAL)
    assert ambiguous[0].nvml_index is None and "matches 4" in str(ambiguous[0].note)


def test_split_gpu_many_logical_one_physical() -> None:
    # --virtual-gpus 3: three logical GPUs made from TensorFlow's physical GPU 0.
    logical = [{"name": f"/device:GPU:{i}", "physical_index": 0} for i in range(3)]
    out = map_logical_to_physical(logical, "1", PHYSICAL)
    assert {m.nvml_index for m in out} == {1}
    assert logical_by_physical(out) == {1: ["/device:GPU:0", "/device:GPU:1", "/device:GPU:2"]}


def test_unset_cuda_visible_devices_is_ordinal() -> None:
    logical = [
        {"name": "/device:GPU:0", "physical_index": 0},
        {"name": "/device:GPU:1", "physical_index": 1},
    ]
    out = map_logical_to_physical(logical, None, PHYSICAL, cuda_device_order="PCI_BUS_ID")
    assert [(m.nvml_index, m.method, m.note) for m in out] == [
        (0, "ordinal", None),
        (1, "ordinal", None),
    ]


def test_unresolvable_entries_say_why() -> None:
    logical = [
        {"name": "/device:GPU:0", "physical_index": 0, "pci_bus_id": "0000:99:00.0"},
        {"name": "/device:GPU:1", "physical_index": 1},
    ]
    out = map_logical_to_physical(logical, "7", PHYSICAL)
    first, second = out
    assert first.nvml_index is None and first.method == "unresolved"
    assert "0000:99:00.0 not among NVML's devices" in str(first.note)
    assert "names GPU 7, which NVML does not list" in str(first.note)
    assert second.nvml_index is None and "has no entry 1" in str(second.note)
    mig = map_logical_to_physical(logical[1:2], "MIG-1234,MIG-5678", PHYSICAL)
    assert mig[0].nvml_index is None and "MIG" in str(mig[0].note)
    # a MIG entry after an index ends the list (CUDA does not mix the forms)
    mixed = map_logical_to_physical(logical[1:2], "0,MIG-1234", PHYSICAL)
    assert mixed[0].nvml_index is None and "has no entry 1" in str(mixed[0].note)
    assert logical_by_physical(out) == {}


def test_cuda_visible_devices_parsing_follows_cuda() -> None:
    assert parse_cuda_visible_devices(None) is None
    assert parse_cuda_visible_devices("") == []  # set but empty: no GPU visible
    assert parse_cuda_visible_devices("-1") == []
    assert parse_cuda_visible_devices("0, 2") == ["0", "2"]
    # CUDA stops at the first invalid entry
    assert parse_cuda_visible_devices("1,abc,2") == ["1"]
    logical = [{"name": "/device:GPU:0", "physical_index": 0}]
    assert map_logical_to_physical(logical, "", PHYSICAL)[0].nvml_index is None


@pytest.mark.parametrize(
    ("value", "device_count", "expected"),
    [
        (None, None, None),  # unset: every device
        (None, 4, None),
        ("", None, []),  # set but empty: none
        ("-1", None, []),  # the usual way to hide every GPU
        ("-1", 4, []),
        ("0,2,-1,1", 4, ["0", "2"]),  # CUDA's own example: -1 ends the list
        ("2,1", 4, ["2", "1"]),  # order kept: device 2 becomes CUDA device 0
        ("1,abc,2", 4, ["1"]),  # a word ends the list
        ("0,,1", 4, ["0"]),  # so does an empty entry
        (" 1 , 0 ", 4, ["1", "0"]),  # spaces around entries do not matter
        ("1gpu,0", 4, ["1", "0"]),  # an entry is read as strtoul reads it
        ("0,1,0", 4, []),  # a repeated entry: no device at all
        ("0,9,1", 4, ["0"]),  # an index past the last GPU ends the list
        ("0,9,1", None, ["0", "9", "1"]),  # (unknown without the count)
        ("GPU-1a2b,GPU-5e6f", 4, ["GPU-1a2b", "GPU-5e6f"]),
        ("GPU-1a2b,0", 4, ["GPU-1a2b"]),  # no mixing of UUIDs and indices
        ("0,GPU-1a2b", 4, ["0"]),
        ("GPU-1a2b,GPU-1a2b", 4, []),
        ("MIG-GPU-1a2b/1/0", 4, ["MIG-GPU-1a2b/1/0"]),
    ],
)
def test_cuda_visible_devices_every_cuda_rule(
    value: str | None, device_count: int | None, expected: list[str] | None
) -> None:
    assert parse_cuda_visible_devices(value, device_count) == expected


def test_minus_one_makes_no_gpu_visible_for_the_env_verdicts() -> None:
    # verdicts.visible_count is a thin call of the same parser: they cannot disagree.
    assert verdicts.visible_count("-1", 2) == 0
    assert verdicts.visible_count("0,2,-1,1", 4) == 2
    assert verdicts.visible_count("0,0", 4) == 0
    for value in (None, "", "-1", "0", "1,0", "0,9,1", "GPU-1a2b", "7"):
        parsed = parse_cuda_visible_devices(value, 4)
        assert verdicts.visible_count(value, 4) == (4 if parsed is None else len(parsed))
    tf_info = EnvResult(
        tf_version="2.21.0", keras_version=None, build_info={"is_cuda_build": True},
        is_built_with_cuda=True, is_built_with_gpu_support=True, physical_devices=[],
        physical_gpus=[], logical_devices=[], soft_device_placement=True,
        env={"CUDA_VISIBLE_DEVICES": "-1"},
    )
    nvml_info = {"backend": "fake", "devices": [{"index": i, "name": "GPU", "pci_bus_id": "x"}
                                                for i in range(2)]}
    found = {f.id: f for f in verdicts.env_findings(tf_info, nvml_info, None, [])}
    hidden = found["env.cuda-visible-devices"]
    assert hidden.message == "CUDA_VISIBLE_DEVICES='-1' hides 2 of 2 GPU(s)"
    assert hidden.evidence["visible_by_cuda_visible_devices"] == 0


def test_physical_without_pci_or_uuid() -> None:
    na = NOT_AVAILABLE
    physical = [DeviceInfo(0, "GPU", na, na, na, na)]
    logical = [{"name": "/device:GPU:0", "physical_index": 0, "pci_bus_id": "0000:07:00.0"}]
    out = map_logical_to_physical(logical, "GPU-1a2b", physical)
    assert out[0].nvml_index is None
    out = map_logical_to_physical(logical, None, physical)
    assert out[0].nvml_index == 0 and out[0].method == "ordinal"
