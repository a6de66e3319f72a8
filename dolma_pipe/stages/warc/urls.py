"""URLs: Dolma's normal form for ``metadata.url``, and the offline URL filter.

:func:`normalise` is Dolma's ``UrlNormalizer`` (w3lib's ``canonicalize_url``, then
``url_normalize``, the scheme and a leading ``www.`` dropped, trailing slashes too), so the same
page has the same ``url`` in both tools.

:class:`UrlFilter` blocks a record by a list file (one domain or URL a line, ``#`` comments; a
domain blocks its subdomains, as UT1's lists mean it) or by a banned word anywhere in its host
(datatrove's "banned words in the domain" rule, on the host's lower-case text).
"""

from __future__ import annotations

import functools
import hashlib
import re
from urllib.parse import urlsplit

import numpy as np
from url_normalize import url_normalize
from w3lib.url import canonicalize_url

from dolma_pipe import storage

from .config import UrlFilterOptions, WarcError

_EDGES = re.compile(r"(^['\"<]+)|([/'\">]+$)")
_WWW = re.compile(r"(^(www\d*\.))|(/+$)", re.IGNORECASE)
_CHUNK = 16 << 20  # a list file is keyed this many bytes of whole lines at a time
# a list file's comments, a character no bare domain has, and a bare domain's edits (_key's)
_COMMENT = re.compile(rb"#[^\n]*")
_NOT_BARE = re.compile(rb"[^A-Za-z0-9_.\n \t-]")
_TRAILING_DOTS = re.compile(rb"\.+[ \t]*$", re.MULTILINE)
_WWW_LINE = re.compile(rb"^[ \t]*www\d*\.", re.MULTILINE)


def normalise(url: str) -> str:
    """``url`` as Dolma's ``metadata.url`` holds it (``https://www.a.org/x/`` -> ``a.org/x``)."""
    clean = _EDGES.sub("", url)
    try:
        normal = str(url_normalize(canonicalize_url(clean)))
    except (ValueError, UnicodeError):
        normal = clean  # a URL neither library parses is kept as it is
    _, _, rest = normal.partition("://")
    return _WWW.sub("", rest or normal)


def host_of(url: str) -> str:
    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:
        return ""
    return host.rstrip(".").lower()


def _key(url: str) -> str:
    """A URL as the block list compares it: no scheme, no leading www., no trailing slash, lower-case host."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    host = _WWW.sub("", host)
    path = parts.path.rstrip("/")
    return host + path + ("?" + parts.query if parts.query else "")


class DigestSet:
    """A set of strings kept as the sorted 64-bit BLAKE2b digests of their UTF-8 bytes: 8 bytes an
    entry, where a Python set of str costs about 90 (UT1's 4.56M domains: 36 MB, where building
    the set of str peaked at 1 GB). A false match needs a 64-bit collision, about n / 2^64 a
    lookup (2.5e-13 for UT1's list): the same on every process and rerun, as the digest is."""

    def __init__(self, digests: np.ndarray):
        # sorted, each once (np.unique hashes first: 6 s for UT1's list, a sort 0.6 s)
        digests = np.sort(digests)
        self.digests = digests[np.concatenate(([True], digests[1:] != digests[:-1]))] if len(digests) else digests

    def __len__(self) -> int:
        return len(self.digests)

    def __contains__(self, key: str) -> bool:
        d = np.uint64(_digest(key.encode("utf-8")))
        i = int(np.searchsorted(self.digests, d))
        return i < len(self.digests) and self.digests[i] == d


_blake2b = hashlib.blake2b


def _digest(key: bytes) -> int:
    return int.from_bytes(_blake2b(key, digest_size=8).digest(), "little")


def _list_keys(path: str) -> tuple[np.ndarray, np.ndarray]:
    """A list file's entries as digests of their keys: (domains, URLs), 16 MB of lines at a time
    (UT1's 4.56M domains: about 6 CPU-s and 370 MB at the peak, where urlsplit line by line took 26 s
    and the set of str 1 GB)."""
    try:
        data = storage.read_bytes(path)
    except OSError as exc:
        raise WarcError(f"urls.blocklists: {path} cannot be read ({exc})") from None
    domains: list[np.ndarray] = []
    urls: list[np.ndarray] = []
    pos = 0
    while pos < len(data):
        cut = data.find(b"\n", pos + _CHUNK)
        cut = len(data) if cut < 0 else cut + 1
        text = _COMMENT.sub(b"", data[pos:cut]).replace(b"\r", b"")
        pos = cut
        if not _NOT_BARE.search(text):
            # every line a bare domain, as in UT1's lists: the keys _key gives, made at once
            domains.append(_digests(_WWW_LINE.sub(b"", _TRAILING_DOTS.sub(b"", text.lower())).split()))
            continue
        keys = [_key(line) for line in text.decode("utf-8", "replace").splitlines() if line.strip()]
        domains.append(_digests([k.encode("utf-8") for k in keys if "/" not in k and "?" not in k]))
        urls.append(_digests([k.encode("utf-8") for k in keys if "/" in k or "?" in k]))
    empty = np.zeros(0, np.uint64)
    return np.concatenate([empty, *domains]), np.concatenate([empty, *urls])


def _digests(keys: list[bytes]) -> np.ndarray:
    out = b"".join(_blake2b(k, digest_size=8).digest() for k in keys if k)
    return np.frombuffer(out, dtype="<u8").astype(np.uint64)


@functools.lru_cache(maxsize=4)
def _lists(paths: tuple[str, ...], digests: tuple[str, ...]) -> tuple[DigestSet, DigestSet]:
    """The lists' domains and URLs, built once per process for a run's files (``digests``, the
    lists' sha256 from the run's resolved values, keys the cache: a changed list is read again)."""
    keys = [_list_keys(p) for p in paths]
    return (
        DigestSet(np.concatenate([d for d, _ in keys] or [np.zeros(0, np.uint64)])),
        DigestSet(np.concatenate([u for _, u in keys] or [np.zeros(0, np.uint64)])),
    )


class UrlFilter:
    """Why a URL is blocked (``blocked_domain``, ``blocked_url``, ``banned_word``), or None.

    ``digests`` (each list's sha256, as the run resolved them) lets the lists be read once per
    process for all of a run's files; without it they are read each time."""

    def __init__(self, options: UrlFilterOptions, digests: dict[str, str] | None = None):
        paths = tuple(options.blocklists)
        if digests is None or set(digests) != set(paths):
            self.domains, self.urls = _lists.__wrapped__(paths, ())
        else:
            self.domains, self.urls = _lists(paths, tuple(digests[p] for p in paths))
        self.words = [w.strip().lower() for w in options.banned_words if w.strip()]

    @property
    def active(self) -> bool:
        return bool(self.domains or self.urls or self.words)

    def blocked(self, url: str) -> str | None:
        host = _WWW.sub("", host_of(url))
        if self.domains:
            labels = host.split(".")
            if any(".".join(labels[i:]) in self.domains for i in range(len(labels))):
                return "blocked_domain"
        if self.urls and _key(url) in self.urls:
            return "blocked_url"
        if any(w in host for w in self.words):
            return "banned_word"
        return None
