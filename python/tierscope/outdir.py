"""Output directories: claiming, locking, staging and committing what tierscope writes.

Every command that writes a directory (`run`, `validate`, `tune --out`, `repro`, `sweep`,
`report`) and every single output file (`report --out FILE`, `trace convert SRC DST`)
goes through this module, so that tierscope never deletes or replaces a file it did not
write:

- **Ours.** A directory tierscope writes carries `tierscope-manifest.json`: the tool and
  its version, the command, the kind of output and every file it wrote there (relative
  paths). Only a directory holding a valid manifest is ours. An absent or empty target is
  created or used; an existing non-empty one without a manifest is refused, whatever the
  flags; an earlier output (with a manifest) is refused unless `force` is given, and then
  only the files its manifest names are removed or replaced: anything else in it is kept.
  Resumable outputs (sweep stores) continue an earlier output of their own kind instead.
- **Lock.** `.NAME.tierscope.lock` beside the target (so the target need not exist yet),
  an `fcntl.flock` taken before any run starts and held until the commit, then removed
  (unlinked while still held; a taker checks it locked the file that is at the path). A
  second writer of the same target is refused at once, naming the holder's pid. Nested
  claims of one target within a process share the lock.
- **Staging.** Files are written into a temporary sibling `.NAME.tierscope-stage-XXXXXXXX`
  holding a marker file that names the target, then moved in: a new target is the staging
  directory renamed (atomic); into an existing one the manifest is first rewritten to name
  the union of the old and the new files, the old files being replaced are moved aside
  (`.NAME.tierscope-old-XXXXXXXX`, marked too), the new ones moved in and the final manifest
  written last, so a kill at any point never loses track of which files are ours; an error
  on the way puts the old files back. A killed writer's marked temporaries are removed by
  the next writer of the same target while it holds the lock; nothing without our marker
  is ever removed (an unmarked directory of our naming only if it is empty).
- **Errors.** An OSError while writing (full disk, read-only file system, permission, a
  file where a directory should be) becomes `OutputError("cannot write DIR: reason")`, one
  line, and what was staged is removed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

#: The manifest naming every file tierscope wrote in a directory.
MANIFEST = "tierscope-manifest.json"
#: The marker file inside our temporary directories (JSON: the target's name, our pid).
MARKER = ".tierscope-temporary"
#: Temporary siblings are `.NAME` + this + `stage-` or `old-` + mkdtemp's 8 characters.
TEMP_INFIX = ".tierscope-"
LOCK_SUFFIX = ".tierscope.lock"


class OutputError(Exception):
    """An output cannot be written: it is not ours, another tierscope is writing it, or
    the operating system refused (the message is one line)."""


_command: list[str] | None = None


def set_command(argv: Sequence[str]) -> None:
    """Records the command line for the manifests this process writes (the CLI)."""
    global _command
    _command = ["tierscope", *argv]


def command_args() -> list[str] | None:
    """The command line `set_command` recorded (without "tierscope"), None when none was:
    a sweep's worker processes record their caller's (tierscope.sweep.processes)."""
    return None if _command is None else _command[1:]


def cannot_write(display: str, e: OSError) -> OutputError:
    """The one-line error for an OSError while writing `display`."""
    reason = e.strerror or str(e) or type(e).__name__
    return OutputError(f"cannot write {display}: {reason}")


# --- the lock --------------------------------------------------------------------------


class _Held:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.count = 1


#: Locks this process holds, by the lock file's path: nested claims of one target share it.
_held: dict[str, _Held] = {}


def lock_path(target: Path) -> Path:
    """The lock file of `target` (an absolute path), beside it."""
    return target.parent / f".{target.name}{LOCK_SUFFIX}"


def _holder(fd: int) -> str:
    """The pid written in a lock file by its holder (who writes it just after locking)."""
    for _ in range(40):
        with contextlib.suppress(OSError, ValueError):
            return str(int(os.pread(fd, 32, 0).decode().strip()))
        time.sleep(0.005)
    return "unknown"


def _acquire(path: Path, display: str) -> int:
    for _ in range(100):
        # Never through a symbolic link (nor into a file linked elsewhere): the lock file
        # is truncated, and it may sit in a directory others can write.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        st = os.fstat(fd)
        if st.st_nlink == 0:  # unlinked by its holder just now: open the new one
            os.close(fd)
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            os.close(fd)
            raise OutputError(f"{display}: its lock file {path} is not a plain file; remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            raise OutputError(
                f"{display}: another tierscope (pid {pid}) is writing it; wait for it to "
                "finish or write elsewhere"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # Its holder unlinks the file before unlocking: make sure we locked the file that
        # is at the path now, not one removed under us.
        try:
            mine = os.fstat(fd)
            there = os.stat(path)
            same = (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)
    raise OutputError(f"{display}: could not take its lock {path}")


@contextlib.contextmanager
def locked(target: Path, display: str) -> Iterator[bool]:
    """Holds the lock of `target` (absolute; its parent must exist). Yields True when this
    call took it, False when this process already held it (a nested claim)."""
    path = lock_path(target)
    key = os.path.join(os.path.realpath(path.parent), path.name)
    held = _held.get(key)
    if held is not None:
        held.count += 1
        try:
            yield False
        finally:
            held.count -= 1
        return
    try:
        fd = _acquire(path, display)
    except OSError as e:
        raise cannot_write(display, e) from e
    _held[key] = _Held(fd)
    try:
        yield True
    finally:
        del _held[key]
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


# --- manifests -------------------------------------------------------------------------


def _safe_relative(p: Any) -> bool:
    """A manifest entry: a relative path inside the directory (no `..`, not absolute)."""
    if not isinstance(p, str) or not p or "\0" in p or p.startswith("/"):
        return False
    parts = PurePosixPath(p).parts
    return str(PurePosixPath(p)) == p and all(x not in ("", ".", "..") for x in parts)


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of `directory` when it holds a valid one (ours), else None."""
    path = directory / MANIFEST
    try:
        if path.is_symlink() or not path.is_file():
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("tool") != "tierscope":
        return None
    for key in ("files", "directories"):
        entries = doc.get(key, [])
        if not isinstance(entries, list) or not all(_safe_relative(f) for f in entries):
            return None
    return doc


def manifest_document(
    kind: str, files: Sequence[str], directories: Sequence[str] = ()
) -> dict[str, Any]:
    """A manifest: tool, version, kind, command, files (sorted) and, for a sweep store,
    the directories whose whole content tierscope writes."""
    from tierscope._core import __version__

    doc: dict[str, Any] = {
        "tool": "tierscope",
        "version": __version__,
        "kind": kind,
        "command": _command or ["python", "-c", "import tierscope"],
        "files": sorted(set(files)),
    }
    if directories:
        doc["directories"] = sorted(set(directories))
    return doc


def write_manifest(directory: Path, kind: str) -> None:
    """Writes the manifest of a directory built inside a staging directory (a run
    directory within a validate output), naming every file in it."""
    doc = manifest_document(kind, _staged_files(directory))
    (directory / MANIFEST).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _write_json_into(directory: Path, name: str, doc: dict[str, Any], scratch: Path) -> None:
    """Writes `doc` to directory/name atomically, through a file in `scratch` (a marked
    temporary directory on the same file system)."""
    tmp = scratch / f".{name}.next"
    with tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps(doc, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / name)


# --- temporaries -----------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_dir(target: Path, what: str) -> Path:
    """A marked temporary sibling of `target`: `.NAME.tierscope-WHAT-XXXXXXXX`."""
    d = Path(tempfile.mkdtemp(prefix=f".{target.name}{TEMP_INFIX}{what}-", dir=target.parent))
    d.chmod(0o777 & ~_umask())  # mkdtemp makes it private; outputs are shared
    (d / MARKER).write_text(
        json.dumps({"target": target.name, "pid": os.getpid()}) + "\n", encoding="utf-8"
    )
    return d


def _marked_for(directory: Path, name: str) -> bool:
    try:
        doc = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("target") == name


def clean_stale(target: Path) -> list[Path]:
    """Removes the temporaries a killed writer of `target` left beside it: directories of
    our naming holding our marker for this target (an unmarked one only if empty). Call it
    holding the lock. Returns what it removed."""
    pattern = re.compile(
        rf"\.{re.escape(target.name)}{re.escape(TEMP_INFIX)}(stage|old)-[a-z0-9_]{{8}}"
    )
    removed = []
    try:
        siblings = list(target.parent.iterdir())
    except OSError:
        return removed
    for p in siblings:
        if not pattern.fullmatch(p.name) or p.is_symlink() or not p.is_dir():
            continue
        if _marked_for(p, target.name):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
        else:
            with contextlib.suppress(OSError):
                p.rmdir()  # killed between mkdtemp and the marker: empty
                removed.append(p)
    return removed


def _make_parents(directory: Path) -> list[Path]:
    """Creates `directory` and its missing parents; returns those created, innermost first."""
    created = [p for p in [directory, *directory.parents] if not os.path.lexists(p)]
    for p in [directory, *directory.parents]:
        if os.path.lexists(p):
            if not p.is_dir():  # a file where a directory should be
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(p))
            break
    directory.mkdir(parents=True, exist_ok=True)
    return created


def _remove_empty(created: Sequence[Path]) -> None:
    for p in created:  # innermost first: only directories we made, and only if empty
        try:
            p.rmdir()
        except OSError:
            break


def _staged_files(staging: Path) -> list[str]:
    """Every file under `staging` (relative, POSIX), the marker and manifest drafts left out."""
    files = []
    for root, _dirs, names in os.walk(staging):
        rel = Path(root).relative_to(staging)
        for n in names:
            if rel == Path(".") and (n in (MARKER, MANIFEST) or n.startswith(f".{MANIFEST}")):
                continue
            files.append((rel / n).as_posix())
    return sorted(files)


def _absolute(out: str | os.PathLike[str], display: str) -> Path:
    target = Path(os.path.abspath(out))
    if target.parent == target or not target.name:
        raise OutputError(f"cannot write {display}: the root directory cannot be an output")
    return target


# --- claims ----------------------------------------------------------------------------


class Claim:
    """An output directory claimed for writing (see `claim`): `stage()` gives a temporary
    directory whose files are moved in when its block ends."""

    def __init__(
        self,
        target: Path,
        display: str,
        kind: str | None,
        *,
        force: bool,
        resume: bool,
        add: bool,
        directories: Sequence[str],
    ) -> None:
        self.target = target
        self.display = display
        self.kind = kind
        self.force = force
        self.resume = resume
        self.add = add
        self.directories = tuple(directories)
        #: A resumable output's target this claim created, or whose first manifest it
        #: wrote into an empty directory: undone if the claim fails with nothing else
        #: written.
        self.created = False
        self.fresh = False
        #: After a first commit, later ones keep what it wrote.
        self.committed = False

    # The state of the target when claimed ------------------------------------------

    def _not_ours(self) -> OutputError:
        return OutputError(
            f"{self.display}: exists and was not written by tierscope (no {MANIFEST}); "
            "refusing to touch it, choose another --out"
        )

    def check(self, adopt: Callable[[Path], list[str] | None] | None) -> None:
        t, display = self.target, self.display
        if t.is_symlink() or (t.exists() and not t.is_dir()):
            raise OutputError(f"{display}: exists and is not a directory; choose another --out")
        if not t.exists():
            if self.add:
                raise OutputError(f"{display}: no such directory")
            if self.resume:
                t.mkdir()
                self.created = self.fresh = True
                self._write_manifest(manifest_document(self._kind(), [], self.directories))
            return
        manifest = read_manifest(t)
        if manifest is None:
            if self.add or not any(t.iterdir()):
                if self.resume:
                    self.fresh = True
                    self._write_manifest(manifest_document(self._kind(), [], self.directories))
                return
            adopted = adopt(t) if adopt is not None and self.resume else None
            if adopted is None:
                raise self._not_ours()
            # An output written before manifests existed, recognised by its caller.
            self._write_manifest(manifest_document(self._kind(), adopted, self.directories))
            return
        if self.add:
            pass
        elif self.resume:
            if manifest.get("kind") != self.kind:
                raise OutputError(
                    f"{display}: holds a tierscope {manifest.get('kind')} output, not a "
                    f"{self.kind}; choose another --out"
                )
        elif manifest.get("directories"):
            # A store: its rows are not listed file by file, so it is never replaced.
            raise OutputError(
                f"{display}: holds a tierscope {manifest.get('kind')} store; choose another --out"
            )
        elif not self.force:
            raise OutputError(
                f"{display}: holds an earlier tierscope output; give --force to replace it "
                "(only the files tierscope wrote there), or choose another --out"
            )
        # A writer killed just after renaming its staging directory into place.
        with contextlib.suppress(OSError):
            (t / MARKER).unlink()

    def _kind(self) -> str:
        return self.kind or "files"

    def _write_manifest(self, doc: dict[str, Any]) -> None:
        scratch = _temp_dir(self.target, "stage")
        try:
            _write_json_into(self.target, MANIFEST, doc, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    # Staging and committing -------------------------------------------------------

    @contextlib.contextmanager
    def stage(self) -> Iterator[Path]:
        """A temporary directory beside the target to write files into; when the block
        ends they are moved into the target (see the module comment), and on an error
        (OSError: one-line `OutputError`) or interrupt the directory is removed."""
        try:
            staging = _temp_dir(self.target, "stage")
        except OSError as e:
            raise cannot_write(self.display, e) from e
        try:
            yield staging
            self._commit(staging)
        except OSError as e:
            raise cannot_write(self.display, e) from e
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def put(self, name: str, data: bytes) -> None:
        """Writes one file (a relative path) into the target, as `stage` does."""
        with self.stage() as s:
            (s / name).parent.mkdir(parents=True, exist_ok=True)
            (s / name).write_bytes(data)

    def _inside(self, rel: str) -> None:
        """Refuses a path whose parents inside the target are not plain directories (a
        symbolic link there would lead our writes, or removals, out of it)."""
        here = self.target
        for part in PurePosixPath(rel).parts[:-1]:
            here = here / part
            if here.is_symlink() or (os.path.lexists(here) and not here.is_dir()):
                raise OutputError(
                    f"{self.display}: {here.relative_to(self.target)} is not a directory "
                    "tierscope wrote; refusing to write through it, choose another --out"
                )

    def _commit(self, staging: Path) -> None:
        t = self.target
        files = _staged_files(staging)
        if not os.path.lexists(t):
            _write_json_into(
                staging,
                MANIFEST,
                manifest_document(self._kind(), files, self.directories),
                staging,
            )
            os.rename(staging, t)
            with contextlib.suppress(OSError):
                (t / MARKER).unlink()
            self.committed = True
            return
        if t.is_symlink() or not t.is_dir():
            raise OutputError(
                f"{self.display}: exists and is not a directory; choose another --out"
            )
        old = read_manifest(t)
        if old is None and not self.add and any(p.name != MARKER for p in t.iterdir()):
            raise self._not_ours()  # something appeared since the claim
        old_files = set(old["files"]) if old else set()
        directories = sorted(set(self.directories) | set((old or {}).get("directories", [])))

        def ours(f: str) -> bool:
            return f in old_files or any(f.startswith(f"{d}/") for d in directories)

        for f in files:
            self._inside(f)
            dest = t / f
            if os.path.lexists(dest) and (
                dest.is_dir() or not (ours(f) or (self.add and self.force))
            ):
                raise OutputError(
                    f"{self.display}: {f} exists and was not written by tierscope; "
                    "refusing to replace it, choose another --out"
                )
        keep_old = self.resume or self.add or self.committed
        removing = sorted(old_files - set(files)) if not keep_old else []
        for f in removing:
            self._inside(f)
        kind = (old or {}).get("kind") if keep_old and old else self._kind()
        if old is not None or not self.add:
            # First the union: whatever happens next, every file of ours is named.
            union = manifest_document(kind, sorted(old_files | set(files)), directories)
            _write_json_into(t, MANIFEST, union, staging)
        final_files = sorted((old_files if keep_old else set()) | set(files))
        backup: Path | None = None
        backed: list[str] = []
        moved: list[str] = []
        made: list[Path] = []
        try:
            aside = [f for f in [*files, *removing] if os.path.lexists(t / f)]
            if aside:
                backup = _temp_dir(t, "old")
            for f in aside:
                assert backup is not None
                (backup / f).parent.mkdir(parents=True, exist_ok=True)
                os.replace(t / f, backup / f)
                backed.append(f)
            for f in files:
                dest = t / f
                for d in reversed(dest.relative_to(t).parents[:-1]):
                    if not os.path.lexists(t / d):
                        (t / d).mkdir()
                        made.append(t / d)
                os.replace(staging / f, dest)
                moved.append(f)
            if old is not None or not self.add:
                final = manifest_document(kind, final_files, directories)
                _write_json_into(t, MANIFEST, final, staging)
        except BaseException:
            # Put the old output back as it was.
            for f in moved:
                with contextlib.suppress(OSError):
                    os.unlink(t / f)
            for f in backed:
                assert backup is not None
                with contextlib.suppress(OSError):
                    os.replace(backup / f, t / f)
            for d in reversed(made):
                with contextlib.suppress(OSError):
                    d.rmdir()
            with contextlib.suppress(OSError):
                if old is not None:
                    _write_json_into(t, MANIFEST, old, staging)
                elif not self.add:
                    os.unlink(t / MANIFEST)
            raise
        finally:
            if backup is not None:
                shutil.rmtree(backup, ignore_errors=True)
        self.committed = True
        # Directories left empty by removed files of the old output.
        for f in removing:
            for d in PurePosixPath(f).parents[:-1]:
                with contextlib.suppress(OSError):
                    (t / d).rmdir()

    def _abandon(self) -> None:
        """After a failure: the manifest this claim put into a new or empty target is
        removed again when nothing else was written (and the target, if it made it)."""
        if not self.fresh:
            return
        with contextlib.suppress(OSError):
            if [p.name for p in self.target.iterdir()] == [MANIFEST]:
                (self.target / MANIFEST).unlink()
                if self.created:
                    self.target.rmdir()


@contextlib.contextmanager
def claim(
    out: str | os.PathLike[str],
    kind: str | None,
    *,
    force: bool = False,
    resume: bool = False,
    add: bool = False,
    adopt: Callable[[Path], list[str] | None] | None = None,
    directories: Sequence[str] = (),
) -> Iterator[Claim]:
    """Claims the output directory `out` for writing output of `kind` ("run",
    "validate", "tune", "sweep", ...): creates its parents, takes its lock, removes a
    killed writer's temporaries, and checks it (module comment): absent or empty is fine;
    non-empty without our manifest is refused; ours is refused unless `force` (replace
    the files of ours) or `resume` (continue an output of the same `kind`: the directory
    is created now, with its manifest, and `stage` adds or replaces files, keeping the
    others; `adopt(dir)` may recognise an output from before manifests and name its files).
    `add`: `out` must exist, ours or not; `stage` adds files to it, replacing a file of
    ours (any same-named file with `force`) and recording them in its manifest if it has
    one. `directories`: subdirectories whose whole content tierscope writes (a sweep
    store's), recorded in the manifest.

    Errors: `OutputError` (one line). On an exception in the block, what this claim
    created (staging, an otherwise empty target, parents, the lock file) is removed.
    """
    display = str(out)
    target = _absolute(out, display)
    try:
        created = _make_parents(target.parent)
    except OSError as e:
        raise cannot_write(display, e) from e
    try:
        with locked(target, display) as first:
            c = Claim(
                target,
                display,
                kind,
                force=force,
                resume=resume,
                add=add,
                directories=directories,
            )
            try:
                if first:
                    clean_stale(target)
                c.check(adopt)
            except OSError as e:
                raise cannot_write(display, e) from e
            try:
                yield c
            except BaseException:
                c._abandon()
                raise
    except BaseException:
        _remove_empty(created)
        raise


@contextlib.contextmanager
def file_output(out: str | os.PathLike[str], *, force: bool = False) -> Iterator[Path]:
    """Claims the single output file `out` (`report --out FILE`, `trace convert ... DST`):
    takes its lock (`.NAME.tierscope.lock` beside it), refuses an existing file unless
    `force` (a file carries no manifest, so any existing one may be the user's), yields a
    path in a marked temporary sibling directory to write, and moves the file into place
    when the block ends (errors as in `claim`)."""
    display = str(out)
    target = _absolute(out, display)
    if target.is_dir():
        raise OutputError(f"{display}: is a directory; give a file name")
    try:
        created = _make_parents(target.parent)
    except OSError as e:
        raise cannot_write(display, e) from e
    try:
        with locked(target, display) as first:
            if first:
                clean_stale(target)
            if os.path.lexists(target) and not force:
                raise OutputError(
                    f"{display}: exists; give --force to replace it, or choose another name"
                )
            try:
                staging = _temp_dir(target, "stage")
            except OSError as e:
                raise cannot_write(display, e) from e
            try:
                yield staging / target.name
                if target.is_dir():
                    raise OutputError(f"{display}: is a directory; give a file name")
                os.replace(staging / target.name, target)
            except OSError as e:
                raise cannot_write(display, e) from e
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        _remove_empty(created)
        raise
