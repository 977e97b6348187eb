"""A requirements file from someone else reaches nothing of the user's, with the real pip.

GIVEN a package index of our own on a loopback port (wheels and a source
      distribution built here, whose build backend leaves a mark if it ever runs)
WHEN `deploy env build` / `deploy package` install a requirements file
THEN lines that name URLs, paths, pip options or `${VARS}` are refused before
     pip starts (a listener that would receive the secret receives nothing);
     pip installs wheels only, from the index the user chose, checks hashes,
     and runs without the user's AWS keys, PIP_* settings, pip.conf, HOME or
     credentialed proxies (read from the running pip's /proc/PID/environ).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import os
import socket
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.envs import build_environment, read_metadata
from deploy.errors import EnvBuildError

SECRET = "sekrit-AKIA-0000"


def wheel(folder: Path, name: str, version: str, *, module: str = "") -> Path:
    """A pure-Python wheel, written by hand (the format is a zip with three metadata files)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": module or f"__version__ = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    out = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return out


BACKEND = """
from pathlib import Path
Path({mark!r}).write_text("the build backend ran")
def build_wheel(*args, **kwargs):
    raise SystemExit("no")
build_sdist = build_wheel
"""


def buildable(folder: Path, name: str, mark: Path) -> Path:
    """A source tree whose in-tree build backend writes `mark` as soon as pip imports it."""
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(
        f'[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\n'
    )
    (folder / "backend.py").write_text(BACKEND.format(mark=str(mark)))
    return folder


def sdist(folder: Path, name: str, mark: Path, scratch: Path) -> Path:
    tree = buildable(scratch / f"{name}-1.0", name, mark)
    out = folder / f"{name}-1.0.tar.gz"
    with tarfile.open(out, "w:gz") as archive:
        archive.add(tree, arcname=tree.name)
    return out


@dataclass
class Index:
    """A PEP 503 simple index served over HTTP on a loopback port, recording each request."""

    root: Path
    port: int = 0
    paths: list[str] = field(default_factory=list)
    pip_environments: list[dict[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple"

    def add(self, *files: Path) -> None:
        for file in files:
            project = file.name.split("-")[0].replace("_", "-").lower()
            page = self.root / "simple" / project
            page.mkdir(parents=True, exist_ok=True)
            (self.root / "files").mkdir(exist_ok=True)
            file.replace(self.root / "files" / file.name)
            links = "".join(
                f'<a href="../../files/{f.name}">{f.name}</a>\n'
                for f in sorted((self.root / "files").iterdir())
                if f.name.split("-")[0].replace("_", "-").lower() == project
            )
            (page / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")


def _children_environments() -> list[dict[str, str]]:
    """The environments of this process's running pip children (pip, while it waits on us).

    Other children of the test process (a session's tritonserver, the CDK's node) are not
    pip: only processes running pip count."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != os.getpid():
                continue
            if b"pip" not in (stat.parent / "cmdline").read_bytes():
                continue
            raw = (stat.parent / "environ").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        pairs = [item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item]
        found.append({k.decode(): v.decode(errors="replace") for k, v in pairs})
    return found


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    served = Index(tmp_path / "index")
    (served.root / "simple").mkdir(parents=True)
    root = served.root

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def do_GET(self) -> None:
            served.paths.append(self.path)
            served.pip_environments.extend(_children_environments())
            super().do_GET()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # numpy is always installed beside the requirements: a stand-in wheel of it.
    served.add(wheel(tmp_path, "numpy", "1.0.0"), wheel(tmp_path, "demo", "1.0"))
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Listener:
    """A loopback TCP listener that records whatever connects to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(65536) or b"<connected>")
                except OSError:
                    self.received.append(b"<connected>")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    listening = Listener()
    try:
        yield listening
    finally:
        listening.close()


def env_build(requirements: Path, out: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app, ["env", "build", str(requirements), "--out", str(out), "--python", "3.10", *args]
    )
    return result.exit_code, result.output


def test_a_secret_in_a_url_is_refused_before_pip_runs(
    tmp_path: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("DEPLOY_CACHE_DIR", str(tmp_path / "cache"))
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        "six==1.17.0\n"
        f"x @ http://127.0.0.1:{listener.port}/${{AWS_SECRET_ACCESS_KEY}}/x-1.0-py3-none-any.whl\n"
    )
    code, output = env_build(requirements, tmp_path / "env.tar.gz")
    assert listener.received == []
    assert code == 1
    assert f"{requirements}: " in output and "line 2: " in output
    assert "${AWS_SECRET_ACCESS_KEY} is an environment variable" in output
    assert "Traceback" not in output and SECRET not in output
    assert not (tmp_path / "env.tar.gz").exists()


@pytest.mark.parametrize(
    "line", ["evil @ file://{tree}", "./evil", "-e ./evil", "evil @ ./evil", "{tree}"]
)
def test_paths_urls_and_editables_are_refused_and_nothing_is_built(
    line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = tmp_path / "backend-ran"
    buildable(tmp_path / "evil", "evil", mark)
    monkeypatch.chdir(tmp_path)  # where pip would look for ./evil
    monkeypatch.setenv("DEPLOY_CACHE_DIR", str(tmp_path / "cache"))
    requirements = tmp_path / "requirements.txt"
    line = line.format(tree=tmp_path / "evil")
    requirements.write_text(f"# from someone else\n{line}\n")
    code, output = env_build(requirements, tmp_path / "env.tar.gz")
    assert not mark.exists()
    assert code == 1
    assert f"{requirements}: " in output and f"line 2: '{line}'" in output
    assert "publish the package as a wheel" in output


def test_a_package_published_only_as_source_is_refused(tmp_path: Path, index: Index) -> None:
    mark = tmp_path / "backend-ran"
    index.add(sdist(tmp_path, "onlysdist", mark, tmp_path / "src"))
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("onlysdist==1.0\n")
    with pytest.raises(EnvBuildError) as caught:
        build_environment(
            requirements,
            tmp_path / "env.tar.gz",
            python="3.10",
            cache_dir=tmp_path / "cache",
            index=index.url,
        )
    assert "package onlysdist==1.0 has no wheel" in str(caught.value)
    assert "source distributions are never built" in str(caught.value)
    assert "/simple/onlysdist/" in index.paths  # pip saw the sdist on the index...
    assert not any(p.endswith(".tar.gz") for p in index.paths)  # ...and never fetched it
    assert not mark.exists()


def test_hashes_are_accepted_and_checked(tmp_path: Path, index: Index) -> None:
    def sha(name: str) -> str:
        return hashlib.sha256((index.root / "files" / name).read_bytes()).hexdigest()

    numpy_line = f"numpy==1.0.0 --hash=sha256:{sha('numpy-1.0.0-py3-none-any.whl')}"
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        f"demo==1.0 \\\n    --hash=sha256:{sha('demo-1.0-py3-none-any.whl')}\n{numpy_line}\n"
    )
    built = build_environment(
        requirements,
        tmp_path / "env.tar.gz",
        python="3.10",
        cache_dir=tmp_path / "c",
        index=index.url,
    )
    assert {"demo==1.0", "numpy==1.0.0"} <= set(read_metadata(built.path)["installed"])

    requirements.write_text(f"demo==1.0 --hash=sha256:{'0' * 64}\n{numpy_line}\n")
    with pytest.raises(EnvBuildError, match="hash"):
        build_environment(
            requirements,
            tmp_path / "bad.tar.gz",
            python="3.10",
            cache_dir=tmp_path / "c",
            index=index.url,
        )
    assert not (tmp_path / "bad.tar.gz").exists()


def test_pip_runs_with_the_users_index_and_nothing_else_of_the_users(
    tmp_path: Path, index: Index, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    elsewhere = f"http://127.0.0.1:{listener.port}/simple"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text(f"[global]\nindex-url = {elsewhere}\n")
    (home / "pip.conf").write_text(f"[global]\nextra-index-url = {elsewhere}\n")
    for name, value in {
        "HOME": str(home),
        "AWS_ACCESS_KEY_ID": "AKIA0000",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": SECRET,
        "GITHUB_TOKEN": SECRET,
        "PIP_INDEX_URL": elsewhere,
        "PIP_EXTRA_INDEX_URL": elsewhere,
        "PIP_FIND_LINKS": str(tmp_path),
        "PIP_CONFIG_FILE": str(home / "pip.conf"),
        "HTTP_PROXY": f"http://user:{SECRET}@127.0.0.1:{listener.port}",
        "https_proxy": f"http://user:{SECRET}@127.0.0.1:{listener.port}",
        "NO_PROXY": "example.invalid",
        "DEPLOY_PIP_INDEX_URL": index.url,  # the user's own choice, as deploy.toml would give
        "DEPLOY_CONFIG": str(tmp_path / "none.toml"),
    }.items():
        monkeypatch.setenv(name, value)
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("demo==1.0 ; python_version >= '3.8'\n")
    code, output = env_build(requirements, tmp_path / "env.tar.gz")
    assert code == 0, output
    assert "demo==1.0" in output

    assert listener.received == []  # neither the PIP_* index nor pip.conf's nor the proxy
    assert "/simple/demo/" in index.paths
    assert index.pip_environments, "pip was not seen while it fetched from the index"
    for seen in index.pip_environments:
        assert not [k for k in seen if k.startswith("AWS_")], seen
        assert [k for k in seen if k.upper().startswith("PIP_")] == ["PIP_CONFIG_FILE"]
        assert seen["PIP_CONFIG_FILE"] == os.devnull
        assert SECRET not in json.dumps(seen)
        assert seen["HOME"] != str(home) and not (Path(seen["HOME"]) / ".aws").exists()
        assert seen.get("NO_PROXY") == "example.invalid"  # plain settings still pass


def test_the_index_is_the_flag_or_the_setting_for_deploy_package(
    tmp_path: Path, index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "1" / "model.py").write_text("import demo\n")
    (repo / "m" / "config.pbtxt").write_text(
        'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [1] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [1] } ]\n'
    )
    (repo / "m" / "requirements.txt").write_text("demo==1.0\n")
    monkeypatch.setenv("DEPLOY_CACHE_DIR", str(tmp_path / "cache"))
    settings = tmp_path / "deploy.toml"
    settings.write_text(f'[default]\npip_index_url = "{index.url}"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(settings))

    store = tmp_path / "store"
    result = CliRunner().invoke(app, ["package", str(repo), "--out", str(store), "--json"])
    assert result.exit_code == 0, result.output
    assert "/simple/demo/" in index.paths
    archive = store / json.loads(result.output)["models"][0]["target_model"]
    with tarfile.open(archive) as tar:
        env = tar.extractfile("m/python-env.tar.gz").read()  # type: ignore[union-attr]
    with tarfile.open(fileobj=io.BytesIO(env)) as tar:
        assert "lib/python3.10/site-packages/demo/__init__.py" in tar.getnames()

    # The flag wins over the setting: an index with nothing on it fails, naming it.
    empty = tmp_path / "empty" / "simple"
    empty.mkdir(parents=True)
    (repo / "m" / "requirements.txt").write_text("demo==1.0\nsix\n")
    result = CliRunner().invoke(
        app, ["package", str(repo), "--out", str(store), "--index-url", empty.as_uri()]
    )
    assert result.exit_code == 1
    assert f"index {empty.as_uri()}" in result.output
