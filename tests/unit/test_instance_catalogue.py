"""The instance catalogue against botocore's enum, with spot values from AWS's tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.catalogue.instances import (
    INFERENCE_COMPONENTS,
    MULTI_MODEL,
    describe,
    hourly_price,
    max_gpus,
    sources,
)
from deploy.instance_types import hosting_instance_types
from deploy.neuron.instances import NEURON_CORES
from deploy.validation import validate_repository
from deploy.validation.instances import MAX_GPUS, gpu_count


def test_every_type_of_the_pinned_botocore_enum_is_classified() -> None:
    unknown = sorted(t for t in hosting_instance_types() if not describe(t).known)
    assert unknown == [], f"classify these in deploy/catalogue/instances.json: {unknown}"
    assert len(hosting_instance_types()) >= 277


def test_botocore_is_pinned_where_make_install_reads_it() -> None:
    import botocore

    constraints = (Path(__file__).resolve().parents[2] / "constraints.txt").read_text()
    assert f"botocore=={botocore.__version__}" in constraints


def test_current_gpu_families_are_gpus_with_the_right_counts_and_memory() -> None:
    p5e = describe("ml.p5e.48xlarge")
    assert (p5e.gpus, p5e.accelerator and p5e.accelerator.model) == (8, "H200")
    assert p5e.gpu_memory_gib == 141
    assert p5e.architecture == "x86_64" and p5e.local_nvme
    assert describe("ml.p5en.48xlarge").gpus == 8
    assert describe("ml.p4de.24xlarge").gpu_memory_gib == 80
    b200 = describe("ml.p6-b200.48xlarge")
    assert b200.gpus == 8 and b200.accelerator and b200.accelerator.compute_capability == (10, 0)
    assert describe("ml.p5.4xlarge").gpus == 1
    assert describe("ml.g7e.48xlarge").gpus == 8
    assert describe("ml.g6e.xlarge").memory_gib == 32


@pytest.mark.parametrize(
    "size", ["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"]
)
def test_g4dn_has_compute_capability_7_5(size: str) -> None:
    accelerator = describe(f"ml.g4dn.{size}").accelerator
    assert accelerator is not None and accelerator.compute_capability == (7, 5)


def test_hosts_and_accelerators_that_are_not_x86_nvidia() -> None:
    grace = describe("ml.p6e-gb200.36xlarge")
    assert (grace.architecture, grace.accelerator_kind, grace.gpus) == ("arm64", "nvidia-gpu", 4)
    graviton = describe("ml.c7g.xlarge")
    assert (graviton.architecture, graviton.accelerator_kind) == ("arm64", "none")
    assert describe("ml.inf2.48xlarge").accelerator_kind == "inferentia"
    assert describe("ml.trn2.48xlarge").accelerator_kind == "trainium"
    assert describe("ml.dl1.24xlarge").accelerator_kind == "gaudi"
    assert describe("ml.inf2.48xlarge").gpus == 0
    assert NEURON_CORES["ml.inf1.6xlarge"] == 16 and NEURON_CORES["ml.inf1.24xlarge"] == 64


def test_cpu_sizes_follow_aws_tables() -> None:
    assert (describe("ml.m5.xlarge").vcpus, describe("ml.m5.xlarge").memory_gib) == (4, 16)
    assert (describe("ml.c5.9xlarge").vcpus, describe("ml.c5.9xlarge").memory_gib) == (36, 72)
    assert describe("ml.r7i.48xlarge").memory_gib == 1536
    assert describe("ml.c8g.medium").vcpus == 1
    assert describe("ml.m5d.large").local_nvme and not describe("ml.m5.large").local_nvme


def test_documented_hosting_modes() -> None:
    assert MULTI_MODEL in describe("ml.m5.xlarge").modes  # every CPU type
    assert MULTI_MODEL in describe("ml.g5.2xlarge").modes  # listed single-GPU size
    assert MULTI_MODEL not in describe("ml.inf1.xlarge").modes
    assert INFERENCE_COMPONENTS in describe("ml.g6.12xlarge").modes
    assert INFERENCE_COMPONENTS not in describe("ml.inf1.xlarge").modes


def test_an_unknown_type_is_never_silently_cpu() -> None:
    future = describe("ml.g9.xlarge")
    assert not future.known and future.gpus == 1
    assert future.assumption and "ml.g9.xlarge" in future.assumption
    assert "NVIDIA GPU" in future.assumption
    odd_size = describe("ml.g5.3xlarge")
    assert not odd_size.known and odd_size.gpus == 1 and "g5" in (odd_size.assumption or "")
    with pytest.raises(ValueError, match=r"ml\.<family>\.<size>"):
        describe("g5.xlarge")


def test_gpu_counts_for_validation_come_from_the_catalogue() -> None:
    assert gpu_count("ml.p5e.48xlarge") == 8
    assert gpu_count("ml.p6-b200.48xlarge") == 8
    assert gpu_count("ml.inf1.xlarge") == 0
    assert gpu_count("not-a-type") is None
    # p2.16xlarge has 16 K80s, which no Triton image runs on.
    assert max_gpus() == 16 and MAX_GPUS == 8


def test_gpu_4_on_a_p5e_is_no_longer_a_false_error(tmp_path: Path) -> None:
    model = tmp_path / "repo" / "net"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (model / "config.pbtxt").write_text(
        'name: "net"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "X" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [1] }]\n'
        "instance_group [{ kind: KIND_GPU gpus: [4] }]\n"
    )
    for instance in ("ml.p5e.48xlarge", "ml.p6-b200.48xlarge", "ml.p5en.48xlarge"):
        errors = validate_repository(tmp_path / "repo", instance_type=instance).errors
        assert errors == [], (instance, errors)
    errors = validate_repository(tmp_path / "repo", instance_type="ml.g5.xlarge").errors
    assert [e.field for e in errors] == ["instance_group[0].gpus"]


def test_prices_are_read_from_the_catalogue_and_sources_are_cited() -> None:
    assert hourly_price("ml.g5.xlarge", "us-east-1") == pytest.approx(1.408)
    assert hourly_price("ml.g5.xlarge", "xx-nowhere-1") is None
    assert any("aws.amazon.com/ec2/instance-types" in s for s in sources())
