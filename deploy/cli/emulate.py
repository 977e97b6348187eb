"""`deploy emulate`: moto and a local data plane, for `deploy up` without an AWS account."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command("emulate")(emulate)


def emulate(
    port: Annotated[
        int, typer.Option("--port", help="The control plane's (moto's) port; 0: a free one.")
    ] = 0,
    data_port: Annotated[
        int, typer.Option("--data-port", help="The data plane's (local endpoint's) port.")
    ] = 0,
    region: Annotated[str, typer.Option("--region", help="The emulated region.")] = "us-east-1",
    bucket: Annotated[
        str, typer.Option("--bucket", help="The model-store bucket `deploy up` creates.")
    ] = "deploy-emulated-model-store",
    env_file: Annotated[
        Path | None,
        typer.Option(
            "--env-file",
            help="Also write the variables here (KEY=VALUE), once both planes are ready.",
        ),
    ] = None,
) -> None:
    """Run an emulated AWS on 127.0.0.1 until Ctrl-C, and print the variables to export.

    With them, `deploy up`, `status`, `invoke --endpoint-url` and `down` need no AWS account.

    moto is the control plane; a local endpoint serving the store in moto's S3, the data plane.
    """
    from deploy._files import atomic_write_bytes
    from deploy.extras import require

    require("emulate")
    require("local")
    from deploy.lifecycle.emulator import emulated_aws
    from deploy.local.triton.install import prepare_runtime

    prepare_runtime()
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with emulated_aws(port=port, data_port=data_port, region=region, bucket=bucket) as aws:
            sys.stdout.write(aws.shell())
            sys.stdout.flush()
            if env_file is not None:
                atomic_write_bytes(env_file, aws.dotenv().encode())
            print(
                f"deploy: emulated AWS: control plane {aws.control_url}, data plane "
                f"{aws.data_url}; export the variables "
                "above, then run `deploy up`. Ctrl-C stops both.",
                file=sys.stderr,
                flush=True,
            )
            stop.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if env_file is not None:
            env_file.unlink(missing_ok=True)
