"""What a `requirements.txt` may say: requirement specifiers and their hashes, nothing else.

pip's requirements format is a small command language. A line can name a URL
or a folder to build (`x @ file://dir`, `./dir`, `-e .`), another file (`-r`,
`-c`), an index (`--index-url`), and pip replaces `${VAR}` with the
environment variable. A file from someone else could then make pip fetch
`https://host/${AWS_SECRET_ACCESS_KEY}/x.whl`, or run a package's build
backend as the user. So a requirements file here holds PEP 508 requirements
(name, extras, version specifiers, markers; read with `packaging`) and
`--hash` options only; everything else is refused with its line and the fix.
The package index is the user's setting (`pip_index_url`), never the file's.

    parsed = parse_requirements(text, where="m/requirements.txt")
    parsed.refusals        # (Refusal(line=3, text="-e .", message=..., fix=...), ...)
    parsed.pip_lines()     # normalised lines for pip: 'six==1.17.0 --hash=sha256:...'

`deploy validate` reports the refusals; `deploy.envs.build` raises them.
This module reads text and runs nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from deploy.errors import EnvBuildError

# pip: a comment starts the line or follows whitespace (`req/req_file.py` COMMENT_RE).
_COMMENT = re.compile(r"(^|\s+)#.*$")
_VARIABLE = re.compile(r"\$\{[^}]*\}?")
# pip's hash-checking mode takes these (`utils/hashes.py` STRONG_HASHES).
_HASH_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
_HASH = re.compile(r"^(sha256|sha384|sha512):([0-9a-fA-F]+)$")
# File names pip installs from the disk when a line looks like one (`is_archive_file`).
_ARCHIVES = (
    *(".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz"),
    *(".tlz", ".tar.lz", ".tar.lzma"),
)

SPECIFIER_HELP = "name[extras]<version specifiers>; <markers>, e.g. numpy==1.26.4"
_INDEX_FIX = (
    "remove it: the package index is yours to choose, not the file's; set pip_index_url "
    "in deploy.toml (or DEPLOY_PIP_INDEX_URL, or --index-url) for a mirror"
)
_WHEEL_FIX = "publish the package as a wheel on your index and list it by name, e.g. {name}==1.0"
_OPTION_FIXES = {
    "-r": "copy the requirements of that file into this one",
    "--requirement": "copy the requirements of that file into this one",
    "-c": "pin the versions in this file itself (name==version)",
    "--constraint": "pin the versions in this file itself (name==version)",
    "-e": _WHEEL_FIX.format(name="package"),
    "--editable": _WHEEL_FIX.format(name="package"),
    "-i": _INDEX_FIX,
    "--index-url": _INDEX_FIX,
    "--extra-index-url": _INDEX_FIX,
    "--no-index": _INDEX_FIX,
    "-f": _INDEX_FIX,
    "--find-links": _INDEX_FIX,
    "--trusted-host": _INDEX_FIX,
}
_OTHER_OPTION_FIX = (
    "remove it: deploy runs pip with its own options (binary wheels only, the index from "
    "pip_index_url, hashes checked when lines carry --hash)"
)


@dataclass(frozen=True)
class Refusal:
    """A line pip would read as more than a requirement."""

    line: int  # 1-based, the first physical line of a continued one
    text: str
    message: str
    fix: str


@dataclass(frozen=True)
class Specifier:
    """One accepted requirement and the hashes its files must have."""

    line: int
    requirement: Requirement
    hashes: tuple[str, ...]  # "sha256:<hex>", as pip's --hash takes them

    @property
    def name(self) -> str:
        return canonical_name(self.requirement.name)

    def pip_line(self) -> str:
        return " ".join((str(self.requirement), *(f"--hash={h}" for h in self.hashes)))


@dataclass(frozen=True)
class RequirementsFile:
    where: str
    specifiers: tuple[Specifier, ...]
    refusals: tuple[Refusal, ...]

    @property
    def hashed(self) -> bool:
        return any(s.hashes for s in self.specifiers)

    def names(self) -> set[str]:
        return {s.name for s in self.specifiers}

    def pip_lines(self) -> tuple[str, ...]:
        return tuple(s.pip_line() for s in self.specifiers)


def canonical_name(name: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_requirements(path: Path) -> RequirementsFile:
    """`path` parsed; an unreadable or non-UTF-8 file is an `EnvBuildError`."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise EnvBuildError(
            f"cannot read it ({exc.strerror or exc})",
            where=str(path),
            fix="pass a readable requirements.txt",
        ) from None
    except UnicodeDecodeError as exc:
        raise EnvBuildError(
            f"is not UTF-8 text (byte {exc.start})",
            where=str(path),
            fix="save the file as UTF-8",
        ) from None
    return parse_requirements(text, where=str(path))


def require_specifiers(path: Path) -> RequirementsFile:
    """`path` parsed, or an `EnvBuildError` naming every refused line."""
    parsed = read_requirements(path)
    if parsed.refusals:
        raise refusal_error(parsed)
    return parsed


def refusal_error(parsed: RequirementsFile) -> EnvBuildError:
    lines = [f"line {r.line}: {r.text!r}: {r.message}" for r in parsed.refusals]
    fixes = [f"line {r.line}: {r.fix}" for r in parsed.refusals]
    return EnvBuildError(
        "lists what is not a requirement specifier; nothing was installed:\n  "
        + "\n  ".join(lines),
        where=parsed.where,
        fix="; ".join(fixes),
    )


def parse_requirements(text: str, *, where: str) -> RequirementsFile:
    specifiers: list[Specifier] = []
    refusals: list[Refusal] = []
    for number, logical in _logical_lines(text):
        if _VARIABLE.search(logical):
            variable = _VARIABLE.search(logical)
            assert variable is not None
            refusals.append(
                Refusal(
                    number,
                    _shown(logical),
                    f"{variable.group(0)} is an environment variable, which pip would "
                    "replace with its value (a secret, for example) before reading the line",
                    "write the value itself; requirement files here take no variables",
                )
            )
            continue
        content = _COMMENT.sub("", logical).strip()
        if not content:
            continue
        found = _parse_line(number, content)
        if isinstance(found, Refusal):
            refusals.append(found)
        else:
            specifiers.append(found)
    refusals.extend(_hash_mode(specifiers))
    return RequirementsFile(where, tuple(specifiers), tuple(refusals))


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """pip's line joining: a line ending in `\\` continues on the next, unless it is a comment."""
    joined: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        # `${` anywhere (comments included) is refused, so it is kept for the check.
        if line.endswith("\\") and not _COMMENT.search(line):
            if not pending:
                start = number
            pending.append(line[:-1])
            continue
        if pending:
            pending.append(line)
            joined.append((start, " ".join(pending)))
            pending = []
        else:
            joined.append((number, line))
    if pending:
        joined.append((start, " ".join(pending)))
    return joined


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:117] + "..."


def _parse_line(number: int, content: str) -> Specifier | Refusal:
    tokens = content.split()
    split = next((i for i, t in enumerate(tokens) if t.startswith("-")), len(tokens))
    requirement_text, options = " ".join(tokens[:split]), tokens[split:]
    shown = _shown(content)
    if not requirement_text:
        option = options[0].split("=", 1)[0]
        return Refusal(
            number,
            shown,
            f"{option} is a pip option; a requirements file here lists requirement specifiers only",
            _OPTION_FIXES.get(option, _OTHER_OPTION_FIX),
        )
    try:
        hashes = _hashes(options)
    except _RefusedError as refused:
        return Refusal(number, shown, refused.message, refused.fix)
    path_like = (
        "/" in requirement_text
        or "\\" in requirement_text
        or requirement_text.startswith((".", "~"))
        or requirement_text.lower().endswith(_ARCHIVES)
    )
    if "://" in requirement_text or (
        not path_like and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", requirement_text)
    ):
        return Refusal(
            number,
            shown,
            "names a URL: pip would download it, and build it with its build backend "
            "(running its code as you) when it is not a wheel",
            _WHEEL_FIX.format(name=_leading_name(requirement_text)),
        )
    if path_like:
        return Refusal(
            number,
            shown,
            "names a file or folder: pip would install it from this disk, building a folder "
            "or source archive with its build backend (running its code as you)",
            _WHEEL_FIX.format(name=_leading_name(requirement_text)),
        )
    try:
        requirement = Requirement(requirement_text)
    except InvalidRequirement as exc:
        return Refusal(
            number,
            shown,
            f"is not a requirement specifier ({str(exc).splitlines()[0]})",
            f"write {SPECIFIER_HELP}",
        )
    if requirement.url is not None:
        return Refusal(
            number,
            shown,
            f"names {requirement.name} @ {requirement.url}: pip would fetch that instead "
            "of the index, and build it with its build backend (running its code as you) "
            "when it is not a wheel",
            _WHEEL_FIX.format(name=requirement.name),
        )
    return Specifier(number, requirement, hashes)


class _RefusedError(Exception):
    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


def _hashes(options: list[str]) -> tuple[str, ...]:
    """The `--hash` values of a line; any other option is refused."""
    found: list[str] = []
    index = 0
    while index < len(options):
        option = options[index]
        if option == "--hash" and index + 1 < len(options):
            value = options[index + 1]
            index += 2
        elif option.startswith("--hash="):
            value = option.removeprefix("--hash=")
            index += 1
        else:
            name = option.split("=", 1)[0]
            raise _RefusedError(
                f"{name} is a pip option; after a requirement only --hash=<algorithm>:<hex> "
                "may follow",
                _OPTION_FIXES.get(name, _OTHER_OPTION_FIX),
            )
        match = _HASH.match(value)
        if match is None or len(match.group(2)) != _HASH_LENGTHS[match.group(1)]:
            raise _RefusedError(
                f"--hash {value!r} is not <algorithm>:<hex digest> of sha256, sha384 or sha512",
                "copy the hash as pip download or pip-compile --generate-hashes prints it, "
                "e.g. --hash=sha256:<64 hex digits>",
            )
        found.append(f"{match.group(1)}:{match.group(2).lower()}")
    return tuple(found)


def _leading_name(text: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*@", text)
    return match.group(1) if match else "package"


def _hash_mode(specifiers: list[Specifier]) -> list[Refusal]:
    """pip checks hashes of every package once one line has them: each must be pinned and
    hashed, numpy included (the environment always gets numpy for the backend's stub)."""
    hashed = [s for s in specifiers if s.hashes]
    if not hashed:
        return []
    refusals = []
    for specifier in specifiers:
        pinned = len(specifier.requirement.specifier) == 1 and next(
            iter(specifier.requirement.specifier)
        ).operator in ("==", "===")
        if not specifier.hashes or not pinned:
            refusals.append(
                Refusal(
                    specifier.line,
                    str(specifier.requirement),
                    "other lines carry --hash, so pip checks hashes of every package, and "
                    "this one is not pinned with == and hashed",
                    f"pin it ({specifier.name}==<version>) and add its --hash=sha256:... "
                    "(pip-compile --generate-hashes writes both)",
                )
            )
    if "numpy" not in {s.name for s in specifiers}:
        refusals.append(
            Refusal(
                hashed[0].line,
                hashed[0].pip_line()[:120],
                "lines carry --hash, so pip checks every package it installs, and the "
                "environment always gets numpy (below 2, for the python backend's stub), "
                "which this file does not list with its hash",
                "add numpy==<1.x version> with its --hash=sha256:... lines",
            )
        )
    return refusals
