"""Benchmark `deploy up`'s upload and its incremental re-runs against the moto server; JSON.

Upload (one archive of --mb MiB to S3): deploy's uploader (parallel parts with
a SHA-256 checksum each, resumable) against boto3's own `upload_file`
(S3Transfer defaults, no checksum; and with ChecksumAlgorithm=SHA256), then
an upload interrupted half-way and resumed. `deploy up` (stage-level,
opaque archives, no smoke test): the first run (synth + every stack + every
archive), a re-run with nothing changed, a re-run with one model changed.
Targets: uploader >= 0.8x boto3's throughput; a one-model re-run <= 1/3 of
the first run and no stack update.

`--quick` (16 MiB, one round, two small models) checks only that the
benchmark runs (tests/functional/test_bench_quick.py runs it).

    python bench/lifecycle.py [--mb 64] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import socket
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
from boto3.s3.transfer import TransferConfig  # noqa: E402

from deploy.aws.s3 import ModelStore  # noqa: E402
from deploy.aws.session import AwsSession  # noqa: E402
from deploy.config import load_settings  # noqa: E402
from deploy.lifecycle.aws_provider import AwsProvider  # noqa: E402
from deploy.lifecycle.progress import SilentReporter  # noqa: E402
from deploy.lifecycle.up import UpOptions, up  # noqa: E402

PART = 8 * 1024 * 1024


def start_moto() -> Any:
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ.update(
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    # What `cdk bootstrap` leaves: the version parameter and the file-asset bucket (the
    # endpoint stack's Lambda functions are file assets).
    boto3.client("ssm").put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String"
    )
    account = boto3.client("sts").get_caller_identity()["Account"]
    boto3.client("s3").create_bucket(Bucket=f"cdk-hnb659fds-assets-{account}-us-east-1")
    return server


def timed(action: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def bench_upload(work: Path, mb: int, rounds: int) -> dict[str, Any]:
    data = os.urandom(mb * 1024 * 1024)
    path = work / "archive.tar.gz"
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="bench-uploads")
    store = ModelStore(AwsSession("us-east-1"), "bench-uploads")
    config = TransferConfig(multipart_chunksize=PART, max_concurrency=4)
    methods = {
        "deploy_uploader": lambda n: store.upload_file(
            f"ours{n}", path, sha, part_size=PART, workers=4
        ),
        "baseline_boto3_upload_file": lambda n: s3.upload_file(
            str(path), "bench-uploads", f"plain{n}", Config=config
        ),
        "baseline_boto3_upload_file_sha256": lambda n: s3.upload_file(
            str(path),
            "bench-uploads",
            f"checked{n}",
            Config=config,
            ExtraArgs={"ChecksumAlgorithm": "SHA256"},
        ),
    }
    store.put_bytes("warmup", b"x", content_type="text/plain")  # connections, bucket
    times: dict[str, list[float]] = {name: [] for name in methods}
    for round_ in range(rounds):  # interleaved: a shared machine drifts
        for name, method in methods.items():
            times[name].append(timed(lambda m=method, n=round_: m(n))[0])
    ours, plain, checked = (statistics.median(times[name]) for name in methods)

    class StopError(Exception):
        pass

    half = (mb * 1024 * 1024 // PART) // 2 + 1

    def interrupt(number: int) -> None:
        if number == half:
            raise StopError

    with contextlib.suppress(StopError):
        store.upload_file("resumed", path, sha, part_size=PART, workers=1, before_part=interrupt)
    resumed, outcome = timed(lambda: store.upload_file("resumed", path, sha, part_size=PART))
    assert store.get_bytes("resumed") == data
    mib = len(data) / 2**20
    return {
        "mib": mib,
        "rounds": rounds,
        "median_of_rounds": True,
        "deploy_uploader_s": round(ours, 3),
        "deploy_uploader_mib_s": round(mib / ours, 1),
        "baseline_boto3_upload_file_s": round(plain, 3),
        "baseline_boto3_upload_file_sha256_s": round(checked, 3),
        "ratio_vs_boto3": round(plain / ours, 2),
        "ratio_vs_boto3_sha256": round(checked / ours, 2),
        "resume_after_half_s": round(resumed, 3),
        "resume_parts_reused": outcome.parts_reused,
        "resume_parts_sent": outcome.parts_sent,
    }


def write_package(folder: Path, models: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, data in models.items():
        digest = hashlib.sha256(data).hexdigest()
        target = f"{name}-{digest[:16]}.tar.gz"
        (folder / target).write_bytes(data)
        entries[name] = {
            "name": name,
            "target_model": target,
            "sha256": digest,
            "bytes": len(data),
            "source_digest": digest,
            "kind": "model",
            "backend": "python",
            "platform": "",
            "max_batch_size": 0,
            "inputs": [],
            "outputs": [],
            "contains": [name],
        }
    document = {"format": 1, "hosting": "multi-model", "models": entries}
    (folder / "manifest.json").write_text(json.dumps(document))


def bench_up(work: Path, count: int, model_bytes: int) -> dict[str, Any]:
    for service, call in (
        (
            "application-autoscaling",
            lambda c: c.describe_scalable_targets(ServiceNamespace="sagemaker"),
        ),
        ("cloudwatch", lambda c: c.describe_alarms()),
        ("sns", lambda c: c.list_topics()),
    ):
        call(boto3.client(service))
    package = work / "package"
    models = {f"model{i}": os.urandom(model_bytes) for i in range(count)}
    write_package(package, models)
    # The benchmark's own stage: the project's deploy.toml stages do not apply here.
    config = work / "deploy.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(
        stage="bench",
        config_file=config,
        instance_type="ml.m5.xlarge",
        repository=work,
        package_dir=package,
        infra={"api": False},
    )

    def run() -> Any:
        provider = AwsProvider(settings, template_cache=work / "templates", poll_s=0.05)
        return up(
            settings,
            provider,
            repository=work,
            package_dir=package,
            options=UpOptions(skip_package=True, skip_smoke=True),
            reporter=SilentReporter(),
        )

    first_s, first = timed(run)
    again_s, again = timed(run)
    models[f"model{count // 2}"] = os.urandom(model_bytes)
    write_package(package, models)
    one_s, one = timed(run)
    return {
        "models": len(models),
        "first_up_s": round(first_s, 2),
        "first_up_uploads": len(first.uploads),
        "rerun_unchanged_s": round(again_s, 2),
        "rerun_unchanged_uploads": len(again.uploads),
        "one_model_changed_s": round(one_s, 2),
        "one_model_changed_uploads": len(one.uploads),
        "one_model_changed_infra_action": one.plan.infra_action,
        "one_model_vs_first": round(one_s / first_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="16 MiB, one round (a smoke run)")
    args = parser.parse_args()
    mb, rounds, count, model_bytes = (16, 1, 2, 64 * 1024) if args.quick else (args.mb, 3, 8, 2**21)
    warnings.simplefilter("ignore")  # moto's notes on resource types it skips
    server = start_moto()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-lifecycle-") as tmp:
            work = Path(tmp)
            result = {
                "upload": bench_upload(work, mb, rounds),
                "up": bench_up(work, count, model_bytes),
            }
    finally:
        server.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
