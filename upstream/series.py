"""Builds the onnx patch series from its sources and writes it, or checks that it is up to date.

The sources are the files the series adds to onnx (``upstream/onnx/``, laid out as in onnx), the
edits of onnx's own files (``upstream/edits/*.diff``) and the list of series and commits
(``upstream/series.toml``). ``write`` unpacks onnx's source distribution (``upstream/BASE``) into a
git repository, makes each commit (copy its files, ``git apply`` its edits) and writes every
series to ``upstream/patches/<series>/`` with ``git format-patch``. ``check`` does the same into a
temporary folder and fails when a patch differs from what is committed (a patch edited by hand or
a source changed without ``write``), then checks that each series applies with ``git am`` on the
source distribution with only the series it ``requires``.

Usage: ``python upstream/series.py write|check [--sdist onnx-X.tar.gz]``.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "onnx"
PATCHES = HERE / "patches"
MANIFEST = HERE / "series.toml"
CACHE = Path(os.environ.get("ONNX_UPSTREAM_CACHE", Path.home() / ".cache" / "onnx-masked-rnn-upstream"))
BASE_MESSAGE = "onnx {version} (source distribution)"
BASE_DATE = "2000-01-01T00:00:00+00:00"


@dataclass
class Commit:
    message: str
    adds: list[str] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)


@dataclass
class Series:
    name: str
    requires: list[str]
    commits: list[Commit]


class SeriesError(Exception):
    """A source, edit or series that cannot be built or applied; the message says which."""


def read_manifest(path: Path = MANIFEST) -> tuple[str, str, list[Series]]:
    """The author, date and series of ``path``, each checked against the sources it names."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    series = []
    for entry in data["series"]:
        commits = [
            Commit(c["message"].strip() + "\n", list(c.get("adds", [])), list(c.get("edits", [])))
            for c in entry["commits"]
        ]
        for commit in commits:
            for name in commit.adds:
                if not (path.parent / "onnx" / name).is_file():
                    raise SeriesError(
                        f"{path.name}: series {entry['name']} adds {name}, not in upstream/onnx/"
                    )
            for name in commit.edits:
                if not (path.parent / name).is_file():
                    raise SeriesError(
                        f"{path.name}: series {entry['name']} applies {name}, which does not exist"
                    )
        names = [s.name for s in series]
        for required in entry.get("requires", []):
            if required not in names:
                raise SeriesError(
                    f"{path.name}: series {entry['name']} requires {required}, not listed before it"
                )
        series.append(Series(entry["name"], list(entry.get("requires", [])), commits))
    listed = {name for s in series for c in s.commits for name in c.adds}
    present = {
        p.relative_to(path.parent / "onnx").as_posix()
        for p in (path.parent / "onnx").rglob("*")
        if p.is_file()
    }
    if present - listed:
        raise SeriesError(
            f"{path.name}: files under upstream/onnx/ that no commit adds: {sorted(present - listed)}"
        )
    return data["author"], data["date"], series


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Runs git in ``repo`` without the user's or system's configuration."""
    full_env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_COMMITTER_NAME": "onnx-masked-rnn series",
        "GIT_COMMITTER_EMAIL": "series@localhost",
        **(env or {}),
    }
    result = subprocess.run(
        ["git", "-C", str(repo), "-c", "commit.gpgsign=false", *args],
        capture_output=True,
        text=True,
        env=full_env,
        check=False,
    )
    if result.returncode:
        raise SeriesError(f"git {' '.join(args)} failed in {repo}:\n{result.stdout}{result.stderr}")
    return result.stdout


def sdist_path(version: str) -> Path:
    """onnx's source distribution of ``version``, downloaded from the package index if not cached."""
    path = CACHE / "sdist" / f"onnx-{version}.tar.gz"
    if not path.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", "onnx"]
            + [f"onnx=={version}", "-d", str(path.parent)],
            check=True,
        )
    return path


def unpack(sdist: Path, repo: Path, version: str) -> None:
    """``sdist`` unpacked into ``repo`` as a git repository of one commit, tagged ``base``."""
    repo.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        archive.extractall(repo.parent / "unpacked", filter="tar")
    (repo.parent / "unpacked" / top).rename(repo)
    (repo.parent / "unpacked").rmdir()
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    commit(repo, BASE_MESSAGE.format(version=version), "onnx <onnx@localhost>", BASE_DATE)
    git(repo, "tag", "base")


def commit(repo: Path, message: str, author: str, date: str) -> None:
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    git(repo, "commit", "-q", "--allow-empty-message", f"--author={author}", "-m", message, env=env)


def build(repo: Path, author: str, date: str, series: list[Series]) -> None:
    """Makes every commit of ``series`` on top of ``repo``'s HEAD, tagging each series' last."""
    for s in series:
        for c in s.commits:
            for name in c.adds:
                target = repo / name
                if target.exists():
                    raise SeriesError(f"series {s.name} adds {name}, which onnx already has: make it an edit")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(SOURCES / name, target)
            for name in c.edits:
                try:
                    git(repo, "apply", "--whitespace=nowarn", str(HERE / name))
                except SeriesError as error:
                    raise SeriesError(f"series {s.name}: {name} does not apply:\n{error}") from None
            git(repo, "add", "-A")
            commit(repo, f"{c.message}\nSigned-off-by: {author}\n", author, date)
        git(repo, "tag", s.name)


def format_patches(repo: Path, series: list[Series], out: Path) -> None:
    """Writes each series as ``out/<series>/NNNN-<subject>.patch``."""
    previous = "base"
    for s in series:
        target = out / s.name
        target.mkdir(parents=True)
        git(
            repo,
            "format-patch",
            "-q",
            "--zero-commit",
            "--no-signature",
            "--full-index",
            "--numbered",
            "-o",
            str(target),
            f"{previous}..{s.name}",
        )
        previous = s.name


def write_series(sdist: Path, version: str, out: Path, work: Path) -> list[Series]:
    author, date, series = read_manifest()
    repo = work / "onnx"
    unpack(sdist, repo, version)
    build(repo, author, date, series)
    format_patches(repo, series, out)
    return series


def stale(written: Path, committed: Path) -> list[str]:
    """The patches that differ between two patch folders, missing from either included."""
    names = {p.relative_to(written).as_posix() for p in written.rglob("*.patch")}
    names |= {p.relative_to(committed).as_posix() for p in committed.rglob("*.patch")}
    return sorted(
        name
        for name in names
        if not ((written / name).exists() and (committed / name).exists())
        or not filecmp.cmp(written / name, committed / name, shallow=False)
    )


def check_bases(repo: Path, series: list[Series], patches: Path) -> None:
    """Applies each series with ``git am`` on the sdist (``repo``'s tag ``base``) with only the
    series it requires."""
    for s in series:
        git(repo, "checkout", "-q", "--detach", "base")
        git(repo, "clean", "-q", "-fdx")
        for name in [*s.requires, s.name]:
            files = sorted(str(p) for p in (patches / name).glob("*.patch"))
            try:
                git(repo, "am", "-q", *files, env={"GIT_AUTHOR_DATE": BASE_DATE})
            except SeriesError as error:
                on = ", ".join(["the sdist", *s.requires])
                raise SeriesError(f"series {s.name} does not apply on {on} ({name}):\n{error}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["write", "check"])
    parser.add_argument(
        "--sdist", type=Path, help="onnx's source distribution (default: upstream/BASE's, cached)"
    )
    args = parser.parse_args(argv)
    version = (HERE / "BASE").read_text().strip()
    sdist = args.sdist or sdist_path(version)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            written = work / "patches"
            series = write_series(sdist, version, written, work)
            if args.command == "write":
                shutil.rmtree(PATCHES, ignore_errors=True)
                shutil.copytree(written, PATCHES)
                count = sum(1 for _ in PATCHES.rglob("*.patch"))
                print(f"wrote {count} patches in {len(series)} series to {PATCHES}")
                return 0
            differing = stale(written, PATCHES)
            if differing:
                print(
                    "upstream/patches is stale (a patch edited by hand, or a source changed without "
                    "`python upstream/series.py write`): " + ", ".join(differing),
                    file=sys.stderr,
                )
                return 1
            check_bases(work / "onnx", series, PATCHES)
            print(f"upstream/patches is up to date; each of the {len(series)} series applies on its base")
            return 0
    except SeriesError as error:
        print(f"series.py: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
