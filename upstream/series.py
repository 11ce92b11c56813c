"""Builds a patch series from its sources and writes it, or checks that it is up to date.

A series root (``upstream/`` for onnx, ``upstream/tf2onnx/`` for tf2onnx) holds the list of series
and commits (``series.toml``, whose ``package`` names the project, onnx by default), the pinned
version (``BASE``), the files the series add (``<package>/``, laid out as in the project) and the
edits of the project's own files (``edits/*.diff``). ``write`` unpacks the project's source
distribution of ``BASE`` into a git repository, makes each commit (copy its files, ``git apply``
its edits) and writes every series to ``patches/<series>/`` with ``git format-patch``. ``check``
does the same into a temporary folder and fails when a patch differs from what is committed (a
patch edited by hand or a source changed without ``write``), then checks that each series applies
with ``git am`` on the source distribution with only the series it ``requires``.

Usage: ``python upstream/series.py write|check [--root DIR] [--sdist PACKAGE-X.tar.gz]``.
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
CACHE = Path(os.environ.get("ONNX_UPSTREAM_CACHE", Path.home() / ".cache" / "onnx-masked-rnn-upstream"))
BASE_MESSAGE = "{package} {version} (source distribution)"
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


@dataclass
class Manifest:
    """A series root's ``series.toml``: the project, the commits' author and date, the series."""

    root: Path
    package: str
    author: str
    date: str
    series: list[Series]

    @property
    def sources(self) -> Path:
        return self.root / self.package


class SeriesError(Exception):
    """A source, edit or series that cannot be built or applied; the message says which."""


def read_manifest(path: Path = HERE / "series.toml") -> Manifest:
    """The manifest ``path``, each series checked against the sources it names."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    package = data.get("package", "onnx")
    sources = path.parent / package
    series = []
    for entry in data["series"]:
        commits = [
            Commit(c["message"].strip() + "\n", list(c.get("adds", [])), list(c.get("edits", [])))
            for c in entry["commits"]
        ]
        for commit in commits:
            for name in commit.adds:
                if not (sources / name).is_file():
                    raise SeriesError(f"{path.name}: series {entry['name']} adds {name}, not in {sources}/")
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
    present = {p.relative_to(sources).as_posix() for p in sources.rglob("*") if p.is_file()}
    if present - listed:
        raise SeriesError(
            f"{path.name}: files under {sources}/ that no commit adds: {sorted(present - listed)}"
        )
    return Manifest(path.parent, package, data["author"], data["date"], series)


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


def sdist_path(version: str, package: str = "onnx") -> Path:
    """``package``'s source distribution of ``version``, downloaded from the package index if not
    cached."""
    path = CACHE / "sdist" / f"{package}-{version}.tar.gz"
    if not path.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", package]
            + [f"{package}=={version}", "-d", str(path.parent)],
            check=True,
        )
    return path


def unpack(sdist: Path, repo: Path, package: str, version: str) -> None:
    """``sdist`` unpacked into ``repo`` as a git repository of one commit, tagged ``base``."""
    repo.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        archive.extractall(repo.parent / "unpacked", filter=_owned_by_us)
    (repo.parent / "unpacked" / top).rename(repo)
    (repo.parent / "unpacked").rmdir()
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    message = BASE_MESSAGE.format(package=package, version=version)
    commit(repo, message, f"{package} <{package}@localhost>", BASE_DATE)
    git(repo, "tag", "base")


def _owned_by_us(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
    """The "tar" extraction filter, with the files owned by this process: git refuses a repository
    owned by another user, which the archive's owner (tf2onnx's: uid 1001) is when root unpacks it."""
    member = tarfile.tar_filter(member, path)
    return member.replace(uid=os.getuid(), gid=os.getgid(), uname=None, gname=None, deep=False)


def commit(repo: Path, message: str, author: str, date: str) -> None:
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    git(repo, "commit", "-q", "--allow-empty-message", f"--author={author}", "-m", message, env=env)


def build(repo: Path, manifest: Manifest) -> None:
    """Makes every commit of the manifest on top of ``repo``'s HEAD, tagging each series' last."""
    author, date = manifest.author, manifest.date
    for s in manifest.series:
        for c in s.commits:
            for name in c.adds:
                target = repo / name
                if target.exists():
                    raise SeriesError(
                        f"series {s.name} adds {name}, which {manifest.package} already has: make it an edit"
                    )
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(manifest.sources / name, target)
            for name in c.edits:
                try:
                    git(repo, "apply", "--whitespace=nowarn", str(manifest.root / name))
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


def write_series(manifest: Manifest, sdist: Path, version: str, out: Path, work: Path) -> Path:
    """Builds the manifest's commits on ``sdist`` in ``work`` and writes its patches to ``out``;
    the repository built."""
    repo = work / manifest.package
    unpack(sdist, repo, manifest.package, version)
    build(repo, manifest)
    format_patches(repo, manifest.series, out)
    return repo


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
        "--root", type=Path, default=HERE, help="the series root (default: upstream/, onnx's series)"
    )
    parser.add_argument(
        "--sdist", type=Path, help="the project's source distribution (default: BASE's, cached)"
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    patches = root / "patches"
    try:
        manifest = read_manifest(root / "series.toml")
        series = manifest.series
        version = (root / "BASE").read_text().strip()
        sdist = args.sdist or sdist_path(version, manifest.package)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            written = work / "patches"
            repo = write_series(manifest, sdist, version, written, work)
            if args.command == "write":
                shutil.rmtree(patches, ignore_errors=True)
                shutil.copytree(written, patches)
                count = sum(1 for _ in patches.rglob("*.patch"))
                print(f"wrote {count} patches in {len(series)} series to {patches}")
                return 0
            differing = stale(written, patches)
            if differing:
                print(
                    f"{patches} is stale (a patch edited by hand, or a source changed without "
                    "`python upstream/series.py write`): " + ", ".join(differing),
                    file=sys.stderr,
                )
                return 1
            check_bases(repo, series, patches)
            print(f"{patches} is up to date; each of the {len(series)} series applies on its base")
            return 0
    except SeriesError as error:
        print(f"series.py: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
