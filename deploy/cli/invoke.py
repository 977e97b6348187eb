"""`deploy invoke MODEL --input FILE`: one call through the client SDK, file to file.

Inputs: `.npz` (one array per input name) or `.json`, either Triton's v2
form `{"inputs": [{"name", "datatype", "shape", "data"}]}` or the shorthand
`{"NAME": nested list}` (datatypes then come from the manifest; strings are
BYTES, true/false BOOL). Outputs: `.npz` or `.json` (same v2 form); without
`--output` a table (or `--json`) goes to stdout.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from deploy.cli.flags import AWS_FLAGS, ProfileOption, RegionOption, StageOption, reject
from deploy.errors import DeployError

if TYPE_CHECKING:
    import numpy as np

    from deploy.aws.region import Region
    from deploy.client import InferResult, ModelInfo

LOCAL_ENDPOINT = "local"


class InvokeError(DeployError):
    """Reading inputs, calling the model or writing outputs failed."""


def register(app: typer.Typer) -> None:
    app.command("invoke")(invoke)


def invoke(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="Logical model name (or a TargetModel *.tar.gz).")],
    input_file: Annotated[
        Path, typer.Option("--input", "-i", help="Inputs: .npz or .json (v2 or NAME: list).")
    ],
    output_file: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write outputs to .npz or .json.")
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option("--endpoint", help="Endpoint name (default: settings; 'local' with --local)."),
    ] = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="Call the local endpoint (`deploy serve` or `deploy up --local`; if none is "
            "recorded here, 127.0.0.1 on the local_port setting).",
        ),
    ] = False,
    manifest: Annotated[
        str | None,
        typer.Option(
            "--manifest",
            help="manifest.json path or s3:// URL (default: the endpoint's; --local: served "
            "by the local endpoint).",
        ),
    ] = None,
    endpoint_url: Annotated[
        str | None, typer.Option("--endpoint-url", help="Runtime URL (local endpoint, proxies).")
    ] = None,
    target_model: Annotated[
        str | None, typer.Option("--target-model", help="Send this TargetModel as is.")
    ] = None,
    outputs: Annotated[
        list[str] | None, typer.Option("--output-name", help="Request only this output (repeat).")
    ] = None,
    class_count: Annotated[
        int | None, typer.Option("--class-count", min=1, help="Top-k classes per output.")
    ] = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    stage: StageOption = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per call.")] = 60.0,
    attempts: Annotated[
        int,
        typer.Option(
            "--attempts",
            min=1,
            help="Tries for throttling, cold loads and dropped connections (backoff between).",
        ),
    ] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    record_golden: Annotated[
        str | None,
        typer.Option(
            "--record-golden",
            metavar="NAME",
            help="Save the inputs and outputs as golden case NAME in the model's folder "
            "(<repository>/MODEL/golden/NAME.npz), checked by `deploy up` before release.",
        ),
    ] = None,
    repository: Annotated[
        Path | None,
        typer.Option(
            "--repository", help="Model repository of --record-golden (default: settings)."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Let --record-golden replace an existing case.")
    ] = False,
) -> None:
    """Call MODEL with the arrays in --input; write or print its outputs."""
    from deploy.cli.output import emit_json

    if (repository is not None or force) and record_golden is None:
        ctx.fail("--repository and --force go with --record-golden")
    aws: AwsCall | None = None
    if local:
        reject(ctx, AWS_FLAGS, because="to --local: the local endpoint runs on this machine")
        name, url, manifest_location = _local_target(endpoint, endpoint_url, manifest)
    else:
        aws = _aws_call(
            endpoint, stage=stage, region=region, profile=profile, endpoint_url=endpoint_url
        )
        name, url, manifest_location = aws.endpoint, endpoint_url, manifest
    sent: dict[str, Any] = {}
    result = run_invoke(
        model,
        input_file,
        endpoint=name,
        endpoint_url=url,
        manifest=manifest_location,
        region=aws.region.name if aws else None,
        timeout=timeout,
        target_model=target_model,
        outputs=outputs or None,
        class_count=class_count,
        attempts=attempts,
        session=aws.session() if aws else None,
        where=f"endpoint {name} in {aws.region.describe()}" if aws else None,
        sent=sent,
    )
    if record_golden is not None:
        from deploy.cli.golden import record_case

        recorded = record_case(model, record_golden, sent, result, repository, force=force)
        typer.echo(f"recorded golden case {recorded}", err=True)
    if output_file is not None:
        write_outputs(result, output_file)
    document = result_document(result, class_count=class_count)
    if as_json:
        emit_json(document)
    else:
        _render(document, output_file)


@dataclass(frozen=True)
class AwsCall:
    """Where a call to SageMaker goes: the endpoint, region (and its source), profile."""

    endpoint: str
    region: Region
    profile: str | None  # --profile (AWS_PROFILE is boto3's to read)

    def session(self) -> Any:
        import boto3

        from deploy.aws.region import describe_profile, resolve_profile
        from deploy.aws.session import aws_call

        where = describe_profile(resolve_profile(self.profile))
        with aws_call("opening an AWS session", where=where):
            return boto3.Session(profile_name=self.profile, region_name=self.region.name)


def _aws_call(
    endpoint: str | None,
    *,
    stage: str | None,
    region: str | None,
    profile: str | None,
    endpoint_url: str | None = None,
) -> AwsCall:
    """The endpoint (flag, else the name a local endpoint at `endpoint_url` gives itself,
    else the stage's settings) and the region, resolved as every AWS command resolves it
    (`deploy.aws.region`)."""
    from deploy.aws.region import resolve_profile, resolve_region
    from deploy.client import endpoint_name_at
    from deploy.config import load_settings

    chosen = resolve_region(region, profile=resolve_profile(profile), stage=stage)
    name = (
        endpoint
        or (endpoint_name_at(endpoint_url) if endpoint_url else None)
        or load_settings(stage=stage).endpoint_name
    )
    return AwsCall(name, chosen, profile)


def _local_target(
    endpoint: str | None, endpoint_url: str | None, manifest: str | None
) -> tuple[str, str | None, str | None]:
    """Endpoint name, runtime URL and manifest location for a call to the local endpoint."""
    from deploy.client import endpoint_name_at
    from deploy.config import load_settings
    from deploy.local.state import LOCAL_HOST, read_state

    name = endpoint or (endpoint_name_at(endpoint_url) if endpoint_url else None) or LOCAL_ENDPOINT
    if endpoint_url is None:
        # Started by `deploy serve` or `deploy up --local` in this folder, else the default port.
        state = read_state(name)
        endpoint_url = state.url if state else f"http://{LOCAL_HOST}:{load_settings().local_port}"
    # No manifest: the SDK reads the one the local endpoint serves.
    return name, endpoint_url, manifest


def run_invoke(
    model: str,
    input_file: Path,
    *,
    endpoint: str,
    endpoint_url: str | None,
    manifest: str | None,
    region: str | None,
    timeout: float,
    target_model: str | None = None,
    outputs: list[str] | None = None,
    class_count: int | None = None,
    attempts: int = 5,
    session: Any | None = None,
    where: str | None = None,
    sent: dict[str, Any] | None = None,
) -> InferResult:
    """Read the inputs, make the call, map SDK errors to the CLI's error tree.

    The SDK's messages name its keyword arguments (`manifest=`); here they name
    the flags that set them (`--manifest`). `where` (the endpoint and region)
    replaces the SDK's own when the SDK names only the endpoint. `sent`, when
    given, receives the inputs as read.
    """
    from deploy.client import ClientError, Endpoint

    try:
        with Endpoint(
            endpoint,
            region=region,
            endpoint_url=endpoint_url,
            manifest=manifest,
            timeout=timeout,
            retries=attempts,
            session=session,
        ) as client:
            inputs = read_inputs(input_file, client.model_info(model))
            if sent is not None:
                sent.update(inputs)
            return client.infer(
                model, inputs, outputs, target_model=target_model, class_count=class_count
            )
    except ClientError as exc:
        place = exc.where
        if where is not None and (place is None or place.startswith("endpoint")):
            place = where
        raise InvokeError(
            as_flags(exc.message),
            where=as_flags(place) if place else None,
            fix=as_flags(exc.fix) if exc.fix else None,
        ) from exc


# The SDK keyword each `deploy invoke` flag sets, as the SDK's messages spell them.
_SDK_KEYWORDS = {
    "manifest=": "--manifest",
    "target_model=": "--target-model",
    "region=": "--region",
    "session=": "--profile",
    "timeout=": "--timeout",
    "outputs=": "--output-name",
    "class_count=": "--class-count",
    "endpoint_url=": "--endpoint-url",
}
_KEYWORD_NAMES = "|".join(re.escape(keyword) for keyword in _SDK_KEYWORDS)
# A keyword, then its value if one follows: `<path ...>`, `[...]` or a word (`60.0s`).
_SDK_KEYWORD = re.compile(r"(?<![\w.-])(" + _KEYWORD_NAMES + r")(<[^>]*>|\[[^]]*\]|[^\s,;)]+)?")


_SDK_PHRASES = {"retries=RetryPolicy(max_attempts=...)": "--attempts N"}


def as_flags(text: str) -> str:
    """An SDK message in the CLI's words: `pass manifest=<path>` -> `pass --manifest <path>`."""

    def flag(match: re.Match[str]) -> str:
        value = match.group(2)
        return _SDK_KEYWORDS[match.group(1)] + (f" {value}" if value else "")

    for phrase, replacement in _SDK_PHRASES.items():
        text = text.replace(phrase, replacement)
    return _SDK_KEYWORD.sub(flag, text)


def read_inputs(path: Path, info: ModelInfo | None) -> dict[str, Any]:
    """Arrays by input name from a .npz or .json file."""
    import numpy as np

    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                return {name: archive[name] for name in archive.files}
        if suffix == ".json":
            document = json.loads(path.read_text(encoding="utf-8"))
            return _inputs_from_json(document, info, str(path))
    except (OSError, ValueError) as exc:
        raise InvokeError(f"cannot read inputs: {exc}", where=str(path)) from exc
    raise InvokeError(
        f"unknown input format {suffix!r}", where=str(path), fix="use a .npz or .json file"
    )


def _inputs_from_json(document: Any, info: ModelInfo | None, where: str) -> dict[str, Any]:
    from deploy.client import Tensor

    if not isinstance(document, dict):
        raise InvokeError("expected a JSON object of inputs", where=where)
    if isinstance(document.get("inputs"), list):
        tensors: dict[str, Any] = {}
        for index, entry in enumerate(document["inputs"]):
            here = f"{where}: inputs[{index}]"
            if not isinstance(entry, dict) or not {"name", "datatype", "data"} <= entry.keys():
                raise InvokeError("needs name, datatype and data", where=here)
            array = _array(entry["data"], entry["datatype"], here)
            if "shape" in entry:
                try:
                    array = array.reshape(entry["shape"])
                except (TypeError, ValueError) as exc:
                    raise InvokeError(f"data does not fit shape: {exc}", where=here) from exc
            tensors[str(entry["name"])] = Tensor(array, str(entry["datatype"]))
        return tensors
    declared = {spec.name: spec.datatype for spec in info.inputs} if info is not None else {}
    unknown = sorted(set(document) - set(declared)) if declared else []
    if unknown:
        raise InvokeError(
            f"the model has no input named {', '.join(map(repr, unknown))} "
            f"(its inputs: {', '.join(declared)})",
            where=where,
            fix='use {"NAME": nested list} with those names, '
            'or the v2 form {"inputs": [{"name", "datatype", "shape", "data"}]}',
        )
    return {
        name: _array(value, declared.get(name), f"{where}: {name}")
        for name, value in document.items()
    }


def _array(data: Any, datatype: str | None, where: str) -> np.ndarray[Any, Any]:
    import numpy as np

    if datatype is None:
        probe = np.asarray(data)
        if probe.dtype.kind in "bU":
            return probe.astype(object) if probe.dtype.kind == "U" else probe
        raise InvokeError(
            "numbers need a datatype and none is known for this input",
            where=where,
            fix='pass --manifest, or use {"inputs": [{"name", "datatype", "shape", "data"}]}',
        )
    from deploy.client.dtypes import DATATYPES, FIXED_DTYPES

    if datatype not in DATATYPES:
        raise InvokeError(f"unknown datatype {datatype!r}", where=where)
    try:
        if datatype == "BYTES":
            return np.asarray(data, dtype=object)
        if datatype == "BF16":  # float32, rounded to bfloat16 by the SDK
            return np.asarray(data, dtype=np.float32)
        return np.asarray(data, dtype=FIXED_DTYPES[datatype])
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvokeError(f"data is not {datatype}: {exc}", where=where) from exc


def _json_values(array: np.ndarray[Any, Any]) -> list[Any]:
    if array.dtype == object:
        return [
            item.decode("utf-8", "backslashreplace") if isinstance(item, bytes) else str(item)
            for item in array.reshape(-1).tolist()
        ]
    values: list[Any] = array.reshape(-1).tolist()
    return values


def result_document(result: InferResult, *, class_count: int | None = None) -> dict[str, Any]:
    """The v2-style JSON document for a result (what --json prints and .json holds)."""
    document: dict[str, Any] = {
        "model": result.model,
        "target_model": result.target_model,
        "outputs": [
            {
                "name": name,
                "datatype": result.datatypes.get(name),
                "shape": list(array.shape),
                "data": _json_values(array),
            }
            for name, array in result.items()
        ],
    }
    if class_count is not None:
        document["classes"] = {
            name: [[list(entry) for entry in row] for row in result.classes(name)]
            for name in result
        }
    return document


def write_outputs(result: InferResult, path: Path) -> None:
    """Write .npz or .json atomically (a temporary file renamed into place)."""
    import numpy as np

    suffix = path.suffix.lower()
    if suffix not in (".npz", ".json"):
        raise InvokeError(
            f"unknown output format {suffix!r}", where=str(path), fix="use .npz or .json"
        )
    temporary: Path | None = None
    try:
        with tempfile.NamedTemporaryFile(
            "wb", dir=path.parent, prefix=f".{path.name}.", suffix=suffix, delete=False
        ) as handle:
            temporary = Path(handle.name)
            if suffix == ".npz":
                # BYTES become fixed-width numpy bytes (npz cannot hold objects without pickle).
                arrays: dict[str, Any] = {
                    name: array.astype(bytes) if array.dtype == object else array
                    for name, array in result.items()
                }
                np.savez(handle, **arrays)
            else:
                handle.write(json.dumps(result_document(result), indent=2).encode("utf-8"))
        temporary.replace(path)
    except OSError as exc:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise InvokeError(f"cannot write outputs: {exc}", where=str(path)) from exc


def _render(document: dict[str, Any], output_file: Path | None) -> None:
    from rich.table import Table

    from deploy.cli.output import console

    table = Table(title=f"{document['model']} → {document['target_model'] or '(router)'}")
    for column in ("output", "datatype", "shape", "values"):
        table.add_column(column)
    for entry in document["outputs"]:
        preview = json.dumps(entry["data"][:8])[:80]
        if len(entry["data"]) > 8:
            preview += " …"
        table.add_row(entry["name"], str(entry["datatype"]), str(entry["shape"]), preview)
    out = console()
    out.print(table)
    for name, rows in document.get("classes", {}).items():
        for row in rows:
            text = ", ".join(f"{label or index} ({score:.3f})" for score, index, label in row)
            out.print(f"{name}: {text}")
    if output_file is not None:
        out.print(f"wrote {output_file}")
