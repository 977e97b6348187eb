"""requirements.txt holds PEP 508 requirements and --hash options; every other line is refused.

Each refusal names the line and the fix; `deploy validate` reports them as
errors of the model, without running anything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deploy.envs.requirements import parse_requirements, require_specifiers
from deploy.errors import EnvBuildError
from deploy.validation import validate_repository

SHA_A = "a" * 64
SHA_B = "B" * 64

ACCEPTED = [
    ("six==1.17.0", "six==1.17.0"),
    ("Scikit_Learn>=1.5,<2  # the pip name", "Scikit_Learn<2,>=1.5"),
    ("requests[socks] ; python_version >= '3.8'", 'requests[socks]; python_version >= "3.8"'),
    ("torch", "torch"),
]


@pytest.mark.parametrize(("line", "normalised"), ACCEPTED)
def test_specifiers_are_accepted_and_normalised(line: str, normalised: str) -> None:
    parsed = parse_requirements(f"# header\n\n{line}\n", where="r.txt")
    assert parsed.refusals == ()
    assert [s.line for s in parsed.specifiers] == [3]
    assert parsed.pip_lines() == (normalised,)


REFUSED = [
    # (line, words of the message, words of the fix)
    ("name @ https://host/${AWS_SECRET_ACCESS_KEY}/x.whl", "${AWS_SECRET_ACCESS_KEY}", "value"),
    ("six==1.0  # ${HOME}", "${HOME}", "variables"),
    ("x @ file:///tmp/dir", "names a URL", "x==1.0"),
    ("x @ https://example.invalid/x-1.0-py3-none-any.whl", "names a URL", "x==1.0"),
    ("git+https://example.invalid/x/y", "names a URL", "wheel"),
    ("./dir", "file or folder", "wheel"),
    ("x @ ./dir", "file or folder", "x==1.0"),
    ("/abs/dir", "file or folder", "wheel"),
    ("x-1.0-py3-none-any.whl", "file or folder", "wheel"),
    ("x-1.0.tar.gz", "file or folder", "wheel"),
    ("-e .", "-e is a pip option", "wheel"),
    ("--editable=.", "--editable is a pip option", "wheel"),
    ("-r other.txt", "-r is a pip option", "copy the requirements"),
    ("-c constraints.txt", "-c is a pip option", "pin"),
    ("--index-url https://example.invalid/simple", "--index-url", "pip_index_url"),
    ("-i https://example.invalid/simple", "-i is a pip option", "pip_index_url"),
    ("--extra-index-url=https://example.invalid/simple", "--extra-index-url", "pip_index_url"),
    ("-f https://example.invalid/links", "-f is a pip option", "pip_index_url"),
    ("--find-links /tmp", "--find-links", "pip_index_url"),
    ("--trusted-host example.invalid", "--trusted-host", "pip_index_url"),
    ("--no-index", "--no-index", "pip_index_url"),
    ("--pre", "--pre is a pip option", "binary wheels only"),
    ("--no-binary :all:", "--no-binary", "binary wheels only"),
    ("six --install-option=--x", "--install-option is a pip option", "remove it"),
    ("six --config-settings x=y", "--config-settings", "remove it"),
    ('six; os_name == " --global-option=x"', "--global-option is a pip option", "remove it"),
    ("six==1.0 --hash=md5:abcd", "sha256, sha384 or sha512", "sha256"),
    ("six==1.0 --hash=sha256:abc", "sha256, sha384 or sha512", "sha256"),
    ("not a name!", "is not a requirement specifier", "name[extras]"),
]


@pytest.mark.parametrize(("line", "message", "fix"), REFUSED)
def test_anything_but_a_specifier_is_refused_with_its_line_and_fix(
    line: str, message: str, fix: str
) -> None:
    parsed = parse_requirements(f"six==1.17.0\n{line}\n", where="m/requirements.txt")
    assert [s.pip_line() for s in parsed.specifiers] == ["six==1.17.0"]
    [refusal] = parsed.refusals
    assert refusal.line == 2
    assert message in refusal.message
    assert fix in refusal.fix


def test_continued_lines_and_pip_compile_hashes_are_read(tmp_path: Path) -> None:
    # What `pip-compile --generate-hashes` writes.
    text = (
        "#\n#    pip-compile --generate-hashes\n#\n"
        f"numpy==1.26.4 \\\n    --hash=sha256:{SHA_A}\n    # via -r requirements.in\n"
        f"six==1.17.0 \\\n    --hash=sha256:{SHA_A} \\\n    --hash sha256:{SHA_B}\n"
    )
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    parsed = require_specifiers(path)
    assert parsed.hashed
    assert [s.line for s in parsed.specifiers] == [4, 7]
    assert parsed.pip_lines()[1] == (
        f"six==1.17.0 --hash=sha256:{SHA_A} --hash=sha256:{SHA_B.lower()}"
    )


def test_hashed_files_pin_and_hash_every_line_numpy_included() -> None:
    parsed = parse_requirements(f"six==1.17.0 --hash=sha256:{SHA_A}\nrequests>=2\n", where="r")
    messages = {r.line: r.message for r in parsed.refusals}
    assert "not pinned with == and hashed" in messages[2]
    assert "numpy" in messages[1]


def test_the_build_error_lists_every_refused_line(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("six\n-e .\nx @ file:///tmp/x\n")
    with pytest.raises(EnvBuildError) as caught:
        require_specifiers(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ")
    assert "line 2: '-e .'" in text and "line 3: 'x @ file:///tmp/x'" in text
    assert "fix: line 2: " in text


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_bytes(b"six\n\xff\n")
    with pytest.raises(EnvBuildError, match="not UTF-8"):
        require_specifiers(path)


CONFIG = """
name: "m"
backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [1] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [1] } ]
"""


def test_validate_reports_each_refused_line_as_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("import six\n")
    (folder / "config.pbtxt").write_text(CONFIG)
    (folder / "requirements.txt").write_text(
        "six==1.17.0\nname @ https://h/${AWS_SECRET_ACCESS_KEY}/x.whl\n-e .\n"
    )
    report = validate_repository(tmp_path)
    assert [(d.file, d.severity) for d in report.diagnostics] == [
        (f"{folder / 'requirements.txt'}:2", "error"),
        (f"{folder / 'requirements.txt'}:3", "error"),
    ]
    assert "${AWS_SECRET_ACCESS_KEY}" in report.errors[0].message
    assert "-e is a pip option" in report.errors[1].message
    assert report.errors[1].fix.startswith("publish the package as a wheel")


def test_validating_requirements_starts_no_process_and_reads_no_network(tmp_path: Path) -> None:
    """An audit hook in a fresh interpreter fails on any process start or socket."""
    folder = tmp_path / "m"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("import six\n")
    (folder / "config.pbtxt").write_text(CONFIG)
    (folder / "requirements.txt").write_text("six==1.17.0\nx @ https://h/x.whl\n")
    code = (
        "import sys\n"
        "def hook(event, args):\n"
        "    if event in ('subprocess.Popen', 'os.system', 'os.posix_spawn', 'os.fork',\n"
        "                 'os.exec', 'socket.__new__', 'socket.connect'):\n"
        "        raise SystemExit(f'validation did {event}')\n"
        "from pathlib import Path\nfrom deploy.validation import validate_repository\n"
        "sys.addaudithook(hook)\n"
        "report = validate_repository(Path(sys.argv[1]))\n"
        "print(len(report.errors))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr
