"""Fetch official checkpoints from the Hugging Face Hub into the ``--checkpoint-root`` layout.

Each file is downloaded into the Hugging Face cache (``--cache-dir``, default the hub's own, e.g.
``~/.cache/huggingface/hub``) by ``huggingface_hub.hf_hub_download``, which writes to a temporary
``.incomplete`` file and renames it when complete, then verified, then linked (or copied) to the path
``reproduce`` reads, e.g. ``ROOT/seg/sapiens2_0.4b_seg.safetensors``. A link or copy is made only after
every check has passed, by an atomic rename, so ``ROOT`` never holds a partial or unverified file.

Checks: the SHA-256 of the bytes against the hub's LFS metadata (online), or against the content
address of the cached blob (offline: the cache names LFS blobs by their SHA-256); the safetensors
header is readable; its keys and shapes are exactly those of the official model built from the
reference configs on the meta device (``tests/benchmarks/cli/test_download.py`` checks those equal the
official key lists of ``shared/reference``). Offline (``HF_HUB_OFFLINE=1`` or no network) a file already
in the cache is used; anything else fails with a message that names the repository and how to place
the file by hand.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.reproduce.sources import HUB, TRANSFORMERS_FILE, choose_file, expected_filename, repo_for
from benchmarks.reproduce.tables import _adapt_config, checkpoint_path, official_input, size_key, task_config
from sapiens2.errors import BenchError
from sapiens2.models.backbones.common import OFFICIAL_BACKBONES
from sapiens2.models.builder import build_model
from sapiens2.utils_io import file_sha256


class HubUnavailableError(BenchError):
    """The hub cannot be reached and the file is not in the cache."""


class VerificationError(BenchError):
    """A downloaded file failed a check; it stays in the cache and is not placed."""


@dataclass
class Item:
    """One checkpoint to fetch: where it comes from and where ``reproduce`` expects it."""

    task: str
    size: str
    repo_id: str
    target: Path
    filename: str | None = None
    sha256: str | None = None
    nbytes: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.repo_id if self.task == "detector" else f"{self.task} {self.size}"


def target_path(root, task: str, size: str) -> Path:
    """Where ``reproduce`` reads the checkpoint (the detector: its folder; it keeps the repository's name)."""
    if task == "detector":
        return Path(root) / "detector"
    return checkpoint_path(root, size, task)


def plan_items(root, tasks=(), sizes=(), pretrain_sizes=(), detector: bool = False) -> list[Item]:
    """The items selected by the command line (tasks x sizes, pretrained backbones, the detector).

    Raises:
        BenchError: a task / size without a public repository (the message says which are known).
    """
    items = [Item("pretrain", s, repo_for("pretrain", s), target_path(root, "pretrain", s))
             for s in pretrain_sizes]
    items += [Item(t, s, repo_for(t, s), target_path(root, t, s)) for t in tasks for s in sizes]
    if detector:
        items.append(Item("detector", "", repo_for("detector", ""), target_path(root, "detector", "")))
    return items


def _offline_env() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", HUB).rstrip("/")


# huggingface_hub raises its HTTP client's transport errors as they are (the client package has changed
# between releases: httpx, httpx2), so they are recognised by class name rather than imported.
_NETWORK_ERRORS = {"TransportError", "NetworkError", "ConnectError", "TimeoutException", "ProxyError"}


def _is_network_error(e: BaseException) -> bool:
    """Whether ``e`` (or what caused it) means the hub could not be reached."""
    while e is not None:
        if isinstance(e, (ConnectionError, TimeoutError)):  # includes huggingface_hub's OfflineModeIsEnabled
            return True
        if any(c.__name__ in _NETWORK_ERRORS for c in type(e).__mro__):
            return True
        e = e.__cause__ or e.__context__
    return False


def _hub_error(item: Item, e: BaseException) -> BenchError:
    """A clear message for a hub answer that is not a network failure."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(e, GatedRepoError):
        return BenchError(f"{item.repo_id} is gated: accept its licence at {HUB}/{item.repo_id} and log in "
                          f"(`hf auth login` or HF_TOKEN), then run download again")
    if isinstance(e, RevisionNotFoundError):
        return BenchError(f"{item.repo_id}: revision not found ({e})")
    if isinstance(e, RepositoryNotFoundError):
        return BenchError(f"{item.repo_id}: repository not found on {_endpoint()} (or private; log in with "
                          f"`hf auth login` or HF_TOKEN if you have access)")
    return BenchError(f"{item.repo_id}: the hub answered with an error: {e}")


def unavailable(item: Item, reason: str, cache_dir) -> HubUnavailableError:
    """The offline failure: names the repository, the reason and how to place the file by hand."""
    if item.task == "detector":
        what, where = "its .pth file", f"{item.target}/"
    else:
        what = (f"its checkpoint ({expected_filename(item.task, item.size)} if it follows the model cards' "
                f"naming; not {TRANSFORMERS_FILE}, the transformers copy)")
        where = str(item.target)
    return HubUnavailableError(
        f"{item.repo_id}: cannot reach the Hugging Face Hub at {_endpoint()} ({reason}) and the cache "
        f"({cache_dir or 'the default HF_HUB_CACHE'}) holds no checkpoint of it. To place it by hand: on a "
        f"machine with network run `sapiens2-bench download` there, or `hf download {item.repo_id}` (files: "
        f"{HUB}/{item.repo_id}/tree/main), and copy {what} to {where}; reproduce reads it from there")


# Seconds a hub request may wait for an answer (download --timeout); the file body's reads have
# huggingface_hub's own per-read timeout (HF_HUB_DOWNLOAD_TIMEOUT, 10 s by default).
DEFAULT_TIMEOUT = 30.0


def check_repo_file(name: str) -> str:
    """``name`` if it is a path inside a repository snapshot: relative, no ``..``, no drive or backslash.

    Raises:
        BenchError: a path that would leave the snapshot (it could link any file into the layout).

    Example:
        >>> check_repo_file("sub/model.safetensors")
        'sub/model.safetensors'
    """
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or ":" in parts[0] or any(
            p in ("", ".", "..") for p in parts):
        raise BenchError(f"--file {name!r}: not a file of the repository (a relative path inside it, without "
                         "'..', '.', empty parts or a leading '/'); nothing outside the snapshot is placed")
    return name


def find_in_cache(item: Item, revision: str | None, cache_dir,
                  file_override: str | None = None) -> Path | None:
    """The item's checkpoint in the Hugging Face cache (offline), chosen as online; None if absent.

    Sets ``item.filename`` (and ``item.target`` for the detector) when found.
    """
    from huggingface_hub import constants

    repo_dir = Path(cache_dir or constants.HF_HUB_CACHE) / ("models--" + item.repo_id.replace("/", "--"))
    rev = revision or "main"
    commit = rev if re.fullmatch(r"[0-9a-f]{40}", rev) else None
    ref = repo_dir / "refs" / rev
    if commit is None and ref.is_file():
        commit = ref.read_text(encoding="utf-8").strip()
    snapshot = repo_dir / "snapshots" / (commit or "")
    if commit is None or not snapshot.is_dir():
        return None
    files = sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file())
    try:
        name = check_repo_file(file_override) if file_override else choose_file(files, item.task, item.size)
    except BenchError:
        return None
    path = snapshot / name
    if not path.is_file():
        return None
    item.filename = name
    if item.task == "detector":
        item.target = item.target / Path(name).name
    return path


def resolve_remote(item: Item, revision: str | None, file_override: str | None = None,
                   timeout: float = DEFAULT_TIMEOUT) -> None:
    """Fill ``item.filename``, ``sha256`` and ``nbytes`` from the hub's file listing.

    Raises:
        BenchError: no file fits (see :func:`choose_file`) or ``file_override`` is not in the repository.
        Hub and network errors of ``huggingface_hub`` pass through (the caller tells them apart and falls
        back to the cache when the hub cannot be reached).
    """
    from huggingface_hub import HfApi

    if file_override:
        check_repo_file(file_override)
    info = HfApi(endpoint=_endpoint()).model_info(item.repo_id, revision=revision, files_metadata=True,
                                                  timeout=timeout)
    siblings = {s.rfilename: s for s in (info.siblings or [])}
    item.filename = file_override or choose_file(sorted(siblings), item.task, item.size)
    if item.filename not in siblings:
        raise BenchError(f"{item.repo_id}: no file {item.filename!r}; files: {', '.join(sorted(siblings))}")
    sib = siblings[item.filename]
    item.nbytes = sib.size
    item.sha256 = sib.lfs.sha256 if sib.lfs is not None else None
    if item.sha256 is None:
        item.notes.append("the hub lists no LFS sha256 for this file: checksum not verified")
    if item.task == "detector":
        item.target = item.target / Path(item.filename).name


def _progress_class():
    """A tqdm class that shows a bar on stderr, also when it is not a terminal (one line per 10 s there).

    huggingface_hub's own bar hides itself off a terminal, leaving a log silent for a multi-GB file.
    ``HF_HUB_DISABLE_PROGRESS_BARS=1`` still silences it.
    """
    import sys

    from tqdm import tqdm

    class Progress(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs.pop("name", None)
            kwargs["disable"] = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "") in ("1", "true", "yes")
            if not sys.stderr.isatty():
                kwargs.setdefault("mininterval", 10.0)
            super().__init__(*args, **kwargs)

    return Progress


def fetch_to_cache(item: Item, revision: str | None, cache_dir, timeout: float = DEFAULT_TIMEOUT) -> Path:
    """Download the item's file into the cache (progress bar on stderr); returns the cached path."""
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(item.repo_id, item.filename, revision=revision, cache_dir=cache_dir,
                                endpoint=_endpoint(), tqdm_class=_progress_class(), etag_timeout=timeout))


_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


def verify(item: Item, path: Path, arch_settings: dict | None = None, check_keys: bool = True) -> list[str]:
    """Run every check that applies; returns what was checked. Raises :class:`VerificationError`."""
    done = []
    expected = item.sha256
    blob = Path(os.path.realpath(path)).name
    if expected is None and _SHA_RE.match(blob):
        expected = blob  # the cache's content address of an LFS blob
    if expected is not None:
        got = file_sha256(path)
        if got != expected:
            raise VerificationError(f"{item.repo_id}/{item.filename}: sha256 {got} != expected {expected} "
                                    f"(corrupt download? delete {os.path.realpath(path)} and run again)")
        done.append(f"sha256 {got[:12]}")
    if item.nbytes is not None and path.stat().st_size != item.nbytes:
        raise VerificationError(f"{item.repo_id}/{item.filename}: {path.stat().st_size} bytes, the hub lists "
                                f"{item.nbytes}")
    if item.task == "detector":
        return done
    shapes = safetensors_shapes(path, f"{item.repo_id}/{item.filename}")
    done.append(f"safetensors header ({len(shapes)} tensors)")
    if check_keys:
        compare_shapes(shapes, expected_shapes(item.task, item.size, arch_settings), item)
        done.append("keys and shapes match the official model"
                    + (" (arch settings substituted)" if arch_settings else ""))
    return done


def safetensors_shapes(path: Path, what: str) -> dict[str, tuple[int, ...]]:
    """Key -> shape from a safetensors header (no tensor is read)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as e:  # safetensors raises its own error types for a bad header
        raise VerificationError(f"{what}: not a readable safetensors file: {e}") from e


def expected_shapes(task: str, size: str, arch_settings: dict | None = None) -> dict[str, tuple[int, ...]]:
    """Key -> shape of the official model (built on the meta device from the reference configs).

    ``arch_settings`` substitutes settings for official archs, as ``reproduce --arch-settings`` does.
    """
    arch = f"sapiens2_{size_key(size)}"
    if task == "pretrain":
        if arch_settings and arch in arch_settings:
            cfg = dict(OFFICIAL_BACKBONES[arch], arch=dict(arch_settings[arch]))
            model = build_model(cfg, device="meta")
        else:
            model = build_model(arch, device="meta")
    else:
        cfg = _adapt_config(task_config(size, task), arch_settings, official_input(size), arch_key=arch)
        model = build_model(cfg, device="meta")
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def compare_shapes(got: dict, want: dict, item: Item) -> None:
    """Raise :class:`VerificationError` listing missing, unexpected and wrong-shaped keys."""
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    wrong = sorted(k for k in set(got) & set(want) if tuple(got[k]) != tuple(want[k]))
    if not (missing or extra or wrong):
        return
    parts = []
    for name, keys in (("missing", missing), ("unexpected", extra)):
        if keys:
            parts.append(f"{len(keys)} {name} key(s): {', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}")
    if wrong:
        parts.append(f"{len(wrong)} wrong-shaped: " + ", ".join(
            f"{k} {list(got[k])} vs {list(want[k])}" for k in wrong[:5]))
    raise VerificationError(f"{item.repo_id}/{item.filename} does not match the official {item.task} "
                            f"{item.size} model: " + "; ".join(parts) + " (it stays in the cache; "
                            "--skip-key-check places it anyway)")


def place(cached: Path, target: Path, copy: bool = False) -> str:
    """Link (or copy) the verified cached file to ``target`` atomically; returns what was done."""
    target.parent.mkdir(parents=True, exist_ok=True)
    real = os.path.realpath(cached)
    if target.is_symlink() and os.path.realpath(target) == real:
        return "already linked"
    if target.exists() and not target.is_symlink():
        same = target.stat().st_size == os.path.getsize(real) and file_sha256(target) == file_sha256(real)
        if copy and same:
            return "already present (same bytes)"
        raise BenchError(f"{target} exists and is not a link into the cache: move it away (or compare it "
                         f"with {real}) before placing the download there")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        if copy:
            shutil.copyfile(real, tmp)
        else:
            os.symlink(real, tmp)
        os.replace(tmp, target)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return "copied" if copy else f"linked -> {real}"
