"""The distribution as a user gets it: built, checked, installed into a fresh venv
outside the checkout, and used in a new project with the checkout on no path.

`installed_deploy` (module scope) yields the venv and an empty project folder next
to it, with `run()` for commands in that venv; tests that need more of the installed
tool (serving, an emulated AWS) take it too. Dependencies are installed from a
wheelhouse under build/ (filled from the package index on first use), so later runs
are offline and take seconds per venv rather than minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.cdk]

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
EXTRAS = "local,infra,emulate"  # what the README's user path installs
WHEELHOUSE = ROOT / "build" / "test-wheelhouse"
PROJECT_NAME = "sentiment-api"  # the folder `deploy init` names the endpoint after


@dataclass
class InstalledDeploy:
    """A venv with the wheel installed, and a project folder outside the checkout."""

    venv: Path
    project: Path
    env: dict[str, str]  # PATH starts with the venv; no PYTHONPATH, DEPLOY_*, AWS credentials
    install_s: float = 0.0
    log: list[str] = field(default_factory=list)

    def executable(self, name: str) -> str:
        found = self.venv / "bin" / name
        return str(found) if found.exists() else name

    def run(
        self,
        *args: str | Path,
        cwd: Path | None = None,
        ok: bool = True,
        env: dict[str, str] | None = None,
        timeout: float = 900,
    ) -> subprocess.CompletedProcess[str]:
        """Run `args` (args[0] from the venv's bin/ when it is there) in the project."""
        command = [self.executable(str(args[0])), *map(str, args[1:])]
        done = subprocess.run(
            command,
            cwd=cwd or self.project,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        self.log.append(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
        if ok:
            assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
            assert "Traceback" not in done.stderr, done.stderr
        return done


def user_environment(venv: Path) -> dict[str, str]:
    """A user's shell with `venv` activated: nothing of the checkout, no AWS credentials."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DEPLOY_", "AWS_", "CDK_", "PYTHON", "VIRTUAL_ENV", "PIP_REQ"))
    }
    outside = [
        entry
        for entry in env.get("PATH", "").split(os.pathsep)
        if entry
        and not Path(entry).resolve().is_relative_to(ROOT.resolve())
        and not (Path(entry) / "deploy").exists()
    ]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *outside])
    env["VIRTUAL_ENV"] = str(venv)
    nowhere = str(venv / "no-such-aws-file")
    env.update(
        AWS_CONFIG_FILE=nowhere,
        AWS_SHARED_CREDENTIALS_FILE=nowhere,
        AWS_EC2_METADATA_DISABLED="true",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env


def _checkout_copy(target: Path) -> Path:
    """The checkout's files (tracked and new, not ignored) in `target`: what a release
    builds from, without the checkout's build/ or venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def distributions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel (built from the sdist), both accepted by `twine check`."""
    work = tmp_path_factory.mktemp("release")
    source = _checkout_copy(work / "source")
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return {"wheel": wheel, "sdist": sdist}


def _pip(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", *args],
        env=user_environment(venv),
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )


def install(venv: Path, wheel: Path) -> float:
    """A fresh venv at `venv` with `wheel[cli,infra]`; seconds the pip install took."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    requirement = f"{wheel}[{EXTRAS}]"
    started = time.monotonic()
    offline = ("install", "--no-index", "--find-links", str(WHEELHOUSE), requirement)
    done = _pip(venv, *offline)
    if done.returncode != 0:
        # First use (or new dependencies): fill the wheelhouse from the index.
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        fetched = _pip(venv, "download", "--dest", str(WHEELHOUSE), requirement)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        done = _pip(venv, *offline)
    assert done.returncode == 0, done.stdout + done.stderr
    return time.monotonic() - started


@pytest.fixture(scope="module")
def installed_deploy(
    distributions: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InstalledDeploy]:
    home = tmp_path_factory.mktemp("user")
    venv = home / "venvs" / "deploy"
    seconds = install(venv, distributions["wheel"])
    project = home / PROJECT_NAME
    project.mkdir()
    yield InstalledDeploy(venv, project, user_environment(venv), install_s=seconds)


def test_the_distributions_carry_the_app_the_lambda_and_the_licence(
    distributions: dict[str, Path],
) -> None:
    with zipfile.ZipFile(distributions["wheel"]) as wheel:
        names = set(wheel.namelist())
        info = f"triton_sagemaker_deploy-{VERSION}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
    for needed in (
        "deploy_infra/app.py",
        "deploy_infra/context.json",
        "deploy_infra/neuron/Dockerfile",
        "deploy_handlers/front_door/app.py",
        "deploy/scaffold/templates/deploy.toml.tmpl",
        f"{info}/licenses/LICENSE",
    ):
        assert needed in names, needed
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Programming Language :: Python :: 3.11" in metadata
    assert not [name for name in names if name.startswith(("tests/", "model_packages/"))]
    sizes = {kind: path.stat().st_size for kind, path in distributions.items()}
    print(f"sizes: wheel {sizes['wheel']} B, sdist {sizes['sdist']} B")  # shown by -rP


def test_a_new_project_runs_the_loop_with_only_the_installed_package(
    installed_deploy: InstalledDeploy,
) -> None:
    tool = installed_deploy
    print(f"pip install of the wheel[{EXTRAS}] into a fresh venv: {tool.install_s:.1f} s")
    # The modules are the venv's, not the checkout's.
    where = tool.run(
        "python",
        "-c",
        "import deploy, deploy_infra, deploy_handlers, json; print(json.dumps("
        "[deploy.__file__, deploy_infra.__file__, deploy_handlers.__file__]))",
    )
    for path in json.loads(where.stdout):
        assert Path(path).is_relative_to(tool.venv), path
    assert tool.run("deploy", "--version").stdout.strip() == f"deploy {VERSION}"

    init = tool.run("deploy", "init")
    assert "wrote" in init.stdout and "deploy validate models" in init.stdout
    assert (tool.project / "models" / "addsub" / "config.pbtxt").is_file()
    tool.run("deploy", "validate", "models")
    tool.run("deploy", "package", "models", "--out", "build/models")
    assert (tool.project / "build" / "models" / "manifest.json").is_file()

    # up --dry-run without credentials: this project's stage and models, named after
    # its folder, nothing of this repository's.
    plan = json.loads(tool.run("deploy", "up", "--dry-run", "--json").stdout)
    assert plan["dry_run"] is True
    assert plan["plan"]["endpoint"] == PROJECT_NAME
    assert [model["name"] for model in plan["plan"]["models"]] == ["addsub"]
    assert "no AWS credentials" in plan["plan"]["offline_reason"]
    assert "deploy-triton" not in json.dumps(plan)


def test_cdk_synth_runs_through_the_generated_cdk_json_from_two_venvs(
    installed_deploy: InstalledDeploy,
    distributions: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tool = installed_deploy
    if not (tool.project / "cdk.json").is_file():
        tool.run("deploy", "init")
    # `deploy cdk` finds (or installs, once) the pinned CLI and runs the project's cdk.json.
    first = tool.run("deploy", "cdk", "synth", "-q", "-c", "stage=prod", "-o", "out-a")
    assert (tool.project / "out-a" / f"{PROJECT_NAME}-prod-endpoint.template.json").is_file()
    assert "end-of-life" not in first.stderr

    # A teammate's venv at another path, activated: the same cdk.json works with the
    # CDK CLI run directly, as `cdk synth` is in the CDK's own documentation.
    elsewhere = tmp_path_factory.mktemp("teammate") / "opt" / "envs" / "py"
    install(elsewhere, distributions["wheel"])
    teammate = InstalledDeploy(elsewhere, tool.project, user_environment(elsewhere))
    cli = teammate.run("python", "-c", _CLI_PATH).stdout.strip()
    assert Path(cli).is_file(), cli
    teammate.run(
        cli, "synth", "-q", "-c", "stage=staging", "-o", "out-b",
        env={"JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"},
    )  # fmt: skip
    staging = tool.project / "out-b" / f"{PROJECT_NAME}-staging-endpoint.template.json"
    assert staging.is_file()
    assert str(tool.venv) not in (tool.project / "cdk.json").read_text()

    # And in a folder with no cdk.json, `deploy cdk` runs the packaged app itself.
    empty = tmp_path_factory.mktemp("no-cdk-json")
    listed = teammate.run("deploy", "cdk", "ls", "-c", "endpoint_name=bare", cwd=empty)
    assert "bare-dev-endpoint" in listed.stdout.split()


# The pinned CLI as the installed tool finds it (installing it on first use).
_CLI_PATH = (
    "from pathlib import Path; from deploy.lifecycle.cdk_toolkit import cdk_cli; "
    "print(cdk_cli(Path.cwd()))"
)


README = (ROOT / "README.md").read_text(encoding="utf-8")
USER_BLOCK = re.compile(r"<!-- readme-example: (user-[\w-]+) -->\n```bash\n(.*?)```", re.S)
USER_PATH = ["user-install", "user-loop", "user-serve", "user-invoke", "user-plan", "user-emulate"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.triton
@pytest.mark.moto
def test_the_readme_user_path_runs_as_printed(
    installed_deploy: InstalledDeploy,
    triton_cache_home: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Every block of "Use it in your project", as printed, in an empty folder, with the
    installed wheel. The install block itself is the one line not run: the wheel under
    test stands in for the package index (the extras it names are the ones installed)."""
    blocks = dict(USER_BLOCK.findall(README))
    assert list(blocks) == USER_PATH
    install_line = blocks["user-install"].splitlines()[1]
    assert install_line == f"pip install 'triton-sagemaker-deploy[{EXTRAS}]'"
    project = tmp_path_factory.mktemp("empty") / "fraud-scores"
    project.mkdir()
    port = _free_port()
    # The front door's pinned Lambda wheels, as a user's first synth leaves them in the
    # cache (pip below has no index: the wheel under test stands in for it).
    from deploy_infra.lambda_bundle import WHEELS, wheels_folder

    fetched, cached = wheels_folder(), triton_cache_home / "deploy" / "lambda-wheels"
    cached.mkdir(parents=True, exist_ok=True)
    for wheel in WHEELS:
        shutil.copy2(fetched / wheel.filename, cached / wheel.filename)
    env = {
        **installed_deploy.env,
        # tritonserver already fetched into this cache (one download per test session)
        "XDG_CACHE_HOME": str(triton_cache_home),
        # the machine is shared: the local endpoint's port, as `local_port` allows
        "DEPLOY_LOCAL_PORT": str(port),
        "PIP_NO_INDEX": "1",
    }

    def run(name: str, timeout: float = 900) -> str:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", blocks[name]],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{name}:\n{output}"
        assert "Traceback" not in output, output
        return output

    loop = run("user-loop")
    assert "0 error(s)" in loop and (project / "build" / "models" / "manifest.json").is_file()
    second_terminal = project.parent / "serve.out"
    with second_terminal.open("wb") as terminal:
        serve = subprocess.Popen(
            ["bash", "-c", blocks["user-serve"]],
            cwd=project,
            env=env,
            stdout=terminal,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        state = project / ".deploy" / "local" / "local.json"
        deadline = time.monotonic() + 300
        while not (state.exists() and json.loads(state.read_text()).get("url")):
            assert serve.poll() is None, second_terminal.read_text()
            assert time.monotonic() < deadline, "deploy serve did not start"
            time.sleep(0.5)
        invoked = run("user-invoke")
        assert "[1.0, 2.0, 3.0, 4.0]" in invoked  # OUTPUT0 = INPUT0 + INPUT1
        assert serve.wait(timeout=60) == 0  # `deploy down --local` stopped it
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    plan = run("user-plan")
    assert "fraud-scores" in plan
    assert (project / "cdk.out" / "fraud-scores-prod-endpoint.template.json").is_file()
    emulated = run("user-emulate", timeout=1500)
    assert "smoke" in emulated and "fraud-scores" in emulated
