"""Bad cluster files give errors that name the file and the field."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from stratagem.cluster import load
from stratagem.cluster.loader import PRESET_DIR
from stratagem.errors import ConfigError


@pytest.fixture
def good():
    return yaml.safe_load((PRESET_DIR / "v100-2x8.yaml").read_text())


def write(tmp_path, data, suffix=".yaml"):
    path = tmp_path / f"cluster{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    return path


def test_yaml_and_json_copies_of_a_preset_load_alike(tmp_path, good):
    a, b = load(write(tmp_path, good)), load(write(tmp_path, good, ".json"))
    assert a.collective_time_s("all_reduce", 1 << 20, range(16)) == b.collective_time_s(
        "all_reduce", 1 << 20, range(16)) == load("v100-2x8").collective_time_s("all_reduce", 1 << 20, range(16))


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["device"].pop("memory_bytes"), "device.memory_bytes"),
    (lambda d: d["device"].update(memory_bandwidth_bytes_per_s="fast"), "device.memory_bandwidth_bytes_per_s"),
    (lambda d: d["device"].update(launch_overhead_s=-1), "device.launch_overhead_s"),
    (lambda d: d.update(nodes=0), "nodes"),
    (lambda d: d.update(colour="blue"), "colour"),
    (lambda d: d["fabrics"][0]["pairs"].append([0, 9, 1]), "fabrics[0].pairs[16]"),
    (lambda d: d["fabrics"][0].update(type="torus"), "fabrics[0].type"),
    (lambda d: d["fabrics"][1]["link"].pop("bandwidth_bytes_per_s"), "fabrics[1].link.bandwidth_bytes_per_s"),
    (lambda d: d["network"].update(attach=["pcie.sw9"]), "network.attach[0]"),
    (lambda d: d.pop("network"), "network"),
    (lambda d: d["device"].update(matrix_efficiency=[[1e9, 0.5], [1e6, 0.9]]), "device.matrix_efficiency"),
    (lambda d: d["device"].update(unaligned_gemm_factor=8), "device.unaligned_gemm_factor"),
    (lambda d: d["device"].update(unaligned_gemm_factor=0), "device.unaligned_gemm_factor"),
    (lambda d: d["device"].update(fused_kernels="rms_norm"), "device.fused_kernels"),
    (lambda d: d["host"].pop("optimizer_bytes_per_s"), "host.optimizer_bytes_per_s"),
    (lambda d: d["host"]["link"].update(bandwidth_bytes_per_s=0), "host.link.bandwidth_bytes_per_s"),
    (lambda d: d["host"].update(memory_bytes="lots"), "host.memory_bytes"),
    (lambda d: d["host"].update(nvme=True), "host.nvme"),
])
def test_bad_fields_are_named(tmp_path, good, edit, field):
    data = copy.deepcopy(good)
    edit(data)
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as error:
        load(path)
    assert f"'{field}'" in str(error.value) and str(path) in str(error.value)


def test_a_host_section_prices_copies_to_host_memory_and_without_one_they_are_refused(tmp_path, good):
    cluster = load(write(tmp_path, good))
    host = cluster.spec.host
    assert host.memory_bytes == 512 * 2**30 and host.optimizer_bytes_per_s == 12e9
    assert cluster.concurrent_collective_time_s("host_to_device", 12e6, ((0,), (1,))) == \
        pytest.approx(host.link.latency_s + 1e-3)
    assert cluster.collective_time_s("device_to_host", 0, (3,)) == 0.0
    hostless = copy.deepcopy(good)
    hostless.pop("host")
    with pytest.raises(ConfigError, match="has no host section"):
        load(write(tmp_path, hostless)).host_transfer_time_s(1e6)


def test_unparseable_and_missing_files(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("nodes: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML.* at line 2, column 1"):
        load(broken)
    with pytest.raises(ConfigError, match="no such cluster file"):
        load(tmp_path / "absent.json")


def test_yaml_floats_without_exponent_sign_are_numbers(tmp_path, good):
    text = yaml.safe_dump(good).replace("900000000000.0", "900.0e9")
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert load(path).spec.device.memory_bandwidth_bytes_per_s == 900e9
