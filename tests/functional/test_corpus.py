"""Published AWS and NVIDIA model repositories through validate, package and the local endpoint.

The cases, their sources and their expectations are in `tests/corpus/cases.py`.
Each case is checked in three stages, one test each, so a known gap in one
stage (an `xfail(strict=True)` naming it) does not hide the others:

- validate: `deploy validate --json` finds 0 errors (and the warnings the case
  expects);
- package: `deploy package` writes an archive for every model folder;
- serve: the case's published client call, sent with boto3 to the shared local
  endpoint, answers what the model computes when run directly, or is refused
  with an error that names the reason (the backend that cannot run here...);
- sdk: the same inputs through `deploy.client.Endpoint` give the same answers.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from deploy.cli import app
from deploy.client import Endpoint
from tests.corpus.cases import CASES, Case
from tests.functional.local_models import runtime_client


def cases(stage: str) -> list[Any]:
    """One parameter per case; a known gap at `stage` is a strict xfail that names it."""
    return [
        pytest.param(
            case,
            id=case.name,
            marks=[pytest.mark.xfail(strict=True, reason=case.gaps[stage])]
            if stage in case.gaps
            else [],
        )
        for case in CASES
        if stage != "serve" or case.served
    ]


class Workspace:
    """Each case's repository copied out of the source tree with its stand-ins written (once)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._repos: dict[str, Path] = {}

    def repo(self, case: Case) -> Path:
        if case.name not in self._repos:
            partial = self.root / "partial" / case.name
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(case.repo, partial)
            for write in case.standins:
                write(partial)
            repo = self.root / "repos" / case.name
            repo.parent.mkdir(exist_ok=True)
            partial.rename(repo)
            self._repos[case.name] = repo
        return self._repos[case.name]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("corpus"))


def model_folders(repo: Path) -> set[str]:
    return {p.name for p in repo.iterdir() if p.is_dir()}


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    # stdout only: stderr carries the notes that repository code runs, and where.
    return result.exit_code, result.stdout


@pytest.mark.parametrize("case", cases("validate"))
def test_validate_finds_no_errors(case: Case, workspace: Workspace) -> None:
    repo = workspace.repo(case)
    instance = ("--instance", case.instance) if case.instance else ()
    code, output = run_cli("validate", str(repo), "--json", *instance)
    report = json.loads(output)
    errors = [d for d in report["diagnostics"] if d["severity"] == "error"]
    assert errors == [], f"{case.name}: {json.dumps(errors, indent=2)}"
    assert code == 0
    assert report["models"] == len(model_folders(repo))
    warnings = " ".join(
        f"{d['message']} {d['fix']}" for d in report["diagnostics"] if d["severity"] == "warning"
    ).lower()
    missing = [word for word in case.warnings if word.lower() not in warnings]
    assert missing == [], f"{case.name}: no warning names {missing}; warnings: {warnings!r}"


def package(case: Case, workspace: Workspace, out: Path) -> dict[str, Any]:
    code, output = run_cli("package", str(workspace.repo(case)), "--out", str(out))
    assert code == 0, f"{case.name}: deploy package exited {code}: {output}"
    document: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    return document


@pytest.mark.parametrize("case", cases("package"))
def test_package_writes_every_model(case: Case, workspace: Workspace) -> None:
    manifest = package(case, workspace, workspace.root / "packages" / case.name)
    assert set(manifest["models"]) == model_folders(workspace.repo(case))


def assert_same(name: str, actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != {expected.shape}"
    if expected.dtype == object:
        # BYTES: binary outputs come back as bytes, JSON ones as str
        actual_items = [v.encode() if isinstance(v, str) else bytes(v) for v in actual.ravel()]
        expected_items = [v.encode() if isinstance(v, str) else bytes(v) for v in expected.ravel()]
        if all(item.count(b":") >= 1 for item in expected_items):  # "score:index[:label]"
            for got, want in zip(actual_items, expected_items, strict=True):
                got_score, got_rest = got.split(b":", 1)
                want_score, want_rest = want.split(b":", 1)
                assert got_rest == want_rest, f"{name}: class {got!r} != {want!r}"
                assert float(got_score) == pytest.approx(float(want_score), rel=1e-5, abs=1e-6)
        else:
            assert actual_items == expected_items, f"{name}: {actual_items} != {expected_items}"
    elif np.issubdtype(expected.dtype, np.floating):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, err_msg=name)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=name)


def names(message: str, words: str) -> bool:
    """Whether one of `words` ("A|B") appears in `message` as a word, whatever its case."""
    return any(
        re.search(rf"(?<![A-Za-z0-9]){re.escape(word)}(?![A-Za-z0-9])", message, re.IGNORECASE)
        for word in words.split("|")
    )


def serve_params() -> list[Any]:
    """(case, channel) in case order, so each case's models load once and are unloaded after.

    `published` sends the case's published client call; `sdk` sends the same
    inputs through `deploy.client.Endpoint` (refusals are checked once, on the
    published call).
    """
    params = []
    for case in CASES:
        if not case.served:
            continue
        for channel in ("published",) if case.refused else ("published", "sdk"):
            stage = "serve" if channel == "published" else "sdk"
            marks = (
                [pytest.mark.xfail(strict=True, reason=case.gaps[stage])]
                if stage in case.gaps
                else []
            )
            params.append(pytest.param(case, channel, id=f"{case.name}-{channel}", marks=marks))
    return params


class Served:
    """A case packaged into the shared endpoint's store, and the calls its client made."""

    def __init__(self, case: Case, workspace: Workspace, endpoint: Any) -> None:
        prefix = f"corpus/{case.name}"
        self.store = endpoint.store_dir / prefix
        manifest = package(case, workspace, self.store)
        self.target_models = {
            name: f"{prefix}/{entry['target_model']}" for name, entry in manifest["models"].items()
        }
        self.calls: list[dict[str, Any]] | None = None

    def published_call(self, case: Case, endpoint: Any) -> list[dict[str, Any]]:
        client = importlib.import_module(f"tests.corpus.clients.{case.name}")
        runtime = runtime_client(endpoint.url)
        calls: list[dict[str, Any]] = client.run(
            runtime, endpoint.endpoint_name, self.target_models
        )
        assert calls, f"{case.name}: the client made no call"
        self.calls = calls
        return calls


@pytest.fixture(scope="module")
def served() -> dict[str, Served]:
    return {}


def check_outputs(case: Case, repo: Path, call: dict[str, Any], outputs: Any) -> None:
    expected = case.references[call["model"]](repo, call["inputs"], call.get("parameters", {}))
    for name in call["outputs"]:
        assert_same(
            f"{case.name}/{call['model']}/{name}", np.asarray(outputs[name]), expected[name]
        )


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize(("case", "channel"), serve_params())
def test_client_call(
    case: Case, channel: str, workspace: Workspace, local_endpoint: Any, served: dict[str, Served]
) -> None:
    if case.name not in served:
        served[case.name] = Served(case, workspace, local_endpoint)
    this = served[case.name]
    repo = workspace.repo(case)
    last = channel == "sdk" or bool(case.refused)
    try:
        if case.refused:
            with pytest.raises(ClientError) as refused:
                this.published_call(case, local_endpoint)
            message = str(refused.value)
            unnamed = [words for words in case.refused if not names(message, words)]
            assert unnamed == [], f"{case.name}: the refusal does not name {unnamed}: {message}"
            if case.refusal_fix:
                assert re.search(r"\bfix:", message, re.IGNORECASE), (
                    f"{case.name}: no fix: {message}"
                )
        elif channel == "published":
            for call in this.published_call(case, local_endpoint):
                check_outputs(case, repo, call, call["outputs"])
        else:
            calls = this.calls or this.published_call(case, local_endpoint)
            with Endpoint(
                local_endpoint.endpoint_name,
                endpoint_url=local_endpoint.url,
                manifest=this.store / "manifest.json",
                client=runtime_client(local_endpoint.url),
                retries=1,
            ) as sdk:
                for call in calls:
                    parameters = dict(call.get("parameters", {}))
                    class_count = parameters.pop("class_count", None)
                    result = sdk.infer(
                        call["model"],
                        call["inputs"],
                        list(call["outputs"]),
                        target_model=this.target_models[call["model"]],
                        class_count=class_count,
                        parameters=parameters or None,
                    )
                    check_outputs(case, repo, call, result)
    finally:
        if last:  # the endpoint is shared: leave no corpus model loaded
            for target in this.target_models.values():
                local_endpoint.endpoint.platform.unload(target)


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.name) for c in CASES if c.served_from_repository]
)
def test_deploy_serve_answers_straight_from_the_repository(
    case: Case, workspace: Workspace, tmp_path: Path
) -> None:
    """`deploy serve REPO` (the CLI, in its own process) on the published repository folder:
    the published client call and the SDK get the model's answers, as from a packaged store."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from deploy.local.state import read_state

    repo = workspace.repo(case)
    store, state_dir = tmp_path / "store", tmp_path / "state"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "deploy", "serve", str(repo), "--package-dir", str(store)),
            *("--port", "0", "--endpoint-name", "corpus-repo", "--state-dir", str(state_dir)),
        ],
        env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 180
        state = None
        while state is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.5)
            state = read_state("corpus-repo", state_dir)
        assert state is not None, process.stdout.read().decode() if process.stdout else ""
        manifest = json.loads((store / "manifest.json").read_text())
        targets = {name: entry["target_model"] for name, entry in manifest["models"].items()}
        client = importlib.import_module(f"tests.corpus.clients.{case.name}")
        calls = client.run(runtime_client(state.url), "corpus-repo", targets)
        assert calls, f"{case.name}: the client made no call"
        with Endpoint(
            "corpus-repo",
            endpoint_url=state.url,
            manifest=store / "manifest.json",
            client=runtime_client(state.url),
            retries=1,
        ) as sdk:
            for call in calls:
                check_outputs(case, repo, call, call["outputs"])
                # Every output is asked for: one that depends on an omitted optional input is
                # not produced (tut_identity's fp16_output), and the SDK must not insist on it.
                result = sdk.infer(call["model"], call["inputs"])
                check_outputs(case, repo, call, result)
    finally:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 0, output
