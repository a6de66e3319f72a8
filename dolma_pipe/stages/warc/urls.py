"""URLs: Dolma's normal form for ``metadata.url``, and the offline URL filter.

:func:`normalise` is Dolma's ``UrlNormalizer`` (w3lib's ``canonicalize_url``, then
``url_normalize``, the scheme and a leading ``www.`` dropped, trailing slashes too), so the same
page has the same ``url`` in both tools.

:class:`UrlFilter` blocks a record by a list file (one domain or URL a line, ``#`` comments; a
domain blocks its subdomains, as UT1's lists mean it) or by a banned word anywhere in its host
(on the host's lower-case text, or on its registered domain alone). A list is
compiled once per content (its sha256) into sorted 64-bit digests in a cache folder
(:func:`cache_dir`), which every process memory-maps: UT1's 4.56M domains cost about 6 CPU-s
once per machine, then nothing per process, and their 36 MB are shared.

:class:`PublicSuffixList` is publicsuffix.org's list (the snapshot the ``tld`` distribution ships,
or a file the user gives), compiled once per process into three sets: it gives a host's
registered domain (``a.b.example.co.uk`` -> ``example.co.uk``) as tldextract gives it to
datatrove's URL filter (the ICANN section by default, the private one on request): recorded in
each document's ``metadata.registered_domain``, and where ``banned_words_in`` is
``registered_domain`` what banned words are looked for in. A list's domain entries are looked up
for the host and every parent of it, which holds datatrove's two lookups (the registered domain,
the whole host) and the parents above the registered domain: UT1 names public suffixes on
purpose (``xxx``, ``porn``, ``sex.pl``), to block every host under them.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.resources
import ipaddress
import os
import re
import unicodedata
from urllib.parse import urlsplit

import numpy as np
from url_normalize import url_normalize
from w3lib.url import canonicalize_url

from dolma_pipe import storage

from .config import UrlFilterOptions
from .errors import WarcError

_EDGES = re.compile(r"(^['\"<]+)|([/'\">]+$)")
_WWW = re.compile(r"(^(www\d*\.))|(/+$)", re.IGNORECASE)
CACHE_ENV = "DOLMA_PIPE_CACHE"  # a folder for compiled URL lists (default ~/.cache/dolma-pipe)
_FORMAT = "blake2b64-v1"  # how a compiled list keys its entries (a new scheme, a new name)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 16 << 20  # a list file is keyed this many bytes of whole lines at a time
# a list file's comments, a character no bare domain has, and a bare domain's edits (_key's)
_COMMENT = re.compile(rb"#[^\n]*")
_NOT_BARE = re.compile(rb"[^A-Za-z0-9_.\n \t-]")
_TRAILING_DOTS = re.compile(rb"\.+[ \t]*$", re.MULTILINE)
_WWW_LINE = re.compile(rb"^[ \t]*www\d*\.", re.MULTILINE)
# IDNA's other full stops (ideographic, fullwidth, halfwidth), which hosts may use for "."
_DOTS = re.compile("[\u3002\uff0e\uff61]")


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
    """``url``'s host as DNS resolves it, lower case: a host in other letters than ASCII (fullwidth
    ``ｃａｓｉｎｏ.com``, IDNA's other full stops) is NFKC-normalised first, as IDNA's mapping does,
    so that a list names the same host whichever letters the link used."""
    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:
        return ""
    if not host.isascii():
        host = _DOTS.sub(".", unicodedata.normalize("NFKC", host))
    return host.rstrip(".").lower()


def host_forms(host: str) -> list[str]:
    """``host`` and, for an internationalised one, its other form (``bücher.de`` and
    ``xn--bcher-kva.de``): lists name such hosts either way."""
    if not host.isascii():
        try:
            return [host, host.encode("idna").decode("ascii")]
        except UnicodeError:
            return [host]
    return [host, _unicode(host)] if "xn--" in host else [host]


def _parents(host: str) -> list[str]:
    """``host`` and every domain above it (``a.b.c``, ``b.c``, ``c``)."""
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(len(labels))]


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
    """A set of strings kept as sorted 64-bit BLAKE2b digests of their UTF-8 bytes (8 bytes an
    entry, where a Python set of str costs about 90), one sorted array per list file: a list's
    array is mapped from the cache (:func:`compiled`), so every process of a machine shares its
    pages. A false match needs a 64-bit collision, about n / 2^64 a lookup (2.5e-13 for UT1's
    4.56M domains): the same on every process and rerun, as the digest is."""

    def __init__(self, parts: list[np.ndarray]):
        self.parts = [p for p in parts if len(p)]  # each sorted, each entry once

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def __contains__(self, key: str) -> bool:
        return bool(self.any_of([key]))

    def any_of(self, keys: list[str]) -> bool:
        """Whether any of ``keys`` is in the set (one search per list for all of them)."""
        wanted = np.array([_digest(k.encode("utf-8")) for k in keys], dtype=np.uint64)
        for part in self.parts:
            at = np.searchsorted(part, wanted)
            found = part[np.minimum(at, len(part) - 1)] == wanted
            if found.any():
                return True
        return False


def sorted_unique(digests: np.ndarray) -> np.ndarray:
    """``digests`` sorted, each once (np.unique hashes first: 6 s for UT1's list, a sort 0.6 s)."""
    digests = np.sort(digests)
    return digests[np.concatenate(([True], digests[1:] != digests[:-1]))] if len(digests) else digests


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


def cache_dir() -> str:
    """Where compiled URL lists are kept: ``$DOLMA_PIPE_CACHE``, else ``$XDG_CACHE_HOME/dolma-pipe``
    (``~/.cache/dolma-pipe``)."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return given
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dolma-pipe")


def _mapped(path: str) -> np.ndarray:
    size = os.path.getsize(path)
    if size % 8:
        raise OSError(f"{path}: {size} bytes, not whole 8-byte digests")
    return np.memmap(path, dtype="<u8", mode="r") if size else np.zeros(0, np.uint64)


def compiled(path: str, digest: str) -> tuple[np.ndarray, np.ndarray]:
    """The list file ``path`` (whose content's sha256 is ``digest``) as two sorted digest arrays
    (domains, URLs), memory-mapped from ``<cache_dir>/url-lists/<digest>.<format>.{domains,urls}``.

    The first process to need a list compiles it there (under a file lock: the others wait, then
    map it); every later process and run maps it (no parse; the pages are the page cache's,
    shared by every process of the machine). Where the cache cannot be written, the list is
    compiled in the process's own memory."""
    folder = os.path.join(cache_dir(), "url-lists")
    stem = os.path.join(folder, f"{digest}.{_FORMAT}")
    names = (stem + ".domains", stem + ".urls")
    try:
        os.makedirs(folder, exist_ok=True)
        try:
            return _mapped(names[0]), _mapped(names[1])
        except OSError:
            pass
        with open(stem + ".lock", "ab") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            try:
                return _mapped(names[0]), _mapped(names[1])  # another process compiled it meanwhile
            except OSError:
                pass
            keys = _list_keys(path)
            for name, digests in zip(names[::-1], keys[::-1]):  # domains last: its file says "done"
                with storage.atomic_local_path(name) as tmp:
                    sorted_unique(digests).astype("<u8").tofile(tmp)
        return _mapped(names[0]), _mapped(names[1])
    except OSError:
        domains, urls = _list_keys(path)
        return sorted_unique(domains), sorted_unique(urls)


def list_digest(path: str) -> str:
    """The sha256 of a list file's content (what keys its compiled form)."""
    try:
        return hashlib.sha256(storage.read_bytes(path)).hexdigest()
    except OSError as exc:
        raise WarcError(f"urls.blocklists: {path} cannot be read ({exc})") from None


@functools.lru_cache(maxsize=4)
def _lists(paths: tuple[str, ...], digests: tuple[str, ...]) -> tuple[DigestSet, DigestSet]:
    """The lists' domains and URLs, mapped once per process for a run's files (``digests``, the
    lists' sha256 from the run's resolved values, keys the cache: a changed list is compiled again)."""
    if len(digests) != len(paths) or not all(_SHA256.fullmatch(d) for d in digests):
        digests = tuple(list_digest(p) for p in paths)  # a digest that is no sha256 names no file
    arrays = [compiled(p, d) for p, d in zip(paths, digests)]
    return DigestSet([d for d, _ in arrays]), DigestSet([u for _, u in arrays])


PSL_PRIVATE_BEGIN = "// ===BEGIN PRIVATE DOMAINS==="


class PublicSuffixList:
    """publicsuffix.org's rules (``https://publicsuffix.org/list/``): plain (``co.uk``), wildcard
    (``*.ck``: every label under ``ck`` is a suffix) and exception (``!www.ck``: but not this one).
    Rules and hosts are compared label by label in Unicode (``xn--`` labels decoded), so an IDN host
    matches in either form; what is returned keeps the host's own form. The ICANN section only,
    unless ``private`` (then ``github.io``, ``blogspot.com``... are suffixes too)."""

    def __init__(self, text: str, private: bool = False, where: str = "public suffix list"):
        self.rules: set[str] = set()
        self.wildcards: set[str] = set()  # "ck" for "*.ck"
        self.exceptions: set[str] = set()  # "www.ck" for "!www.ck"
        for number, line in enumerate(text.splitlines(), 1):
            if line.startswith(PSL_PRIVATE_BEGIN) and not private:
                break
            rule = line.split(maxsplit=1)[0].lower() if line.strip() else ""
            if not rule or rule.startswith("//"):
                continue
            exception = rule.startswith("!")
            name = _unicode(_DOTS.sub(".", rule.lstrip("!")))
            labels = name.split(".")
            if not all(labels) or "*" in labels[1:] or (exception and "*" in labels):
                raise WarcError(f"{where}, line {number}: {line.strip()!r} is no public suffix rule")
            if exception:
                self.exceptions.add(name)
            elif labels[0] == "*":
                self.wildcards.add(".".join(labels[1:]))
            else:
                self.rules.add(name)
        if not self.rules:
            raise WarcError(f"{where}: no public suffix rule in it")

    def suffix_length(self, labels: list[str]) -> int:
        """How many of ``labels``' last labels (Unicode, lower case) are the public suffix (the
        longest rule that matches; an exception rule wins and gives its own less the first label;
        no rule: the last label, the list's default ``*``)."""
        best = 1
        name = ""
        for k in range(1, len(labels) + 1):
            parent = name
            name = labels[-k] + ("." + name if name else "")
            if name in self.exceptions:
                return k - 1
            if name in self.rules or (k > 1 and parent in self.wildcards):
                best = k
        return best

    def registered_domain(self, host: str) -> str | None:
        """The public suffix and one label more, in ``host``'s own form (lower case); None for an
        IP address, a single label, or a host that is itself a public suffix."""
        host = _DOTS.sub(".", host).strip(".").lower()
        if not host or "." not in host or _is_ip(host):
            return None
        labels = host.split(".")
        if not all(labels):
            return None
        keys = [_label(label) for label in labels] if "xn--" in host else labels
        length = self.suffix_length(keys) + 1
        return ".".join(labels[-length:]) if length <= len(labels) else None


def _unicode(name: str) -> str:
    """``name`` with its ``xn--`` labels decoded (a label that does not decode is kept)."""
    if "xn--" not in name:
        return name
    return ".".join(_label(label) for label in name.split("."))


@functools.lru_cache(maxsize=1 << 14)
def _label(label: str) -> str:
    if not label.startswith("xn--"):
        return label
    try:
        return label[4:].encode("ascii").decode("punycode").lower()
    except (UnicodeError, ValueError):
        return label


def _is_ip(host: str) -> bool:
    if not (host[-1].isdigit() or ":" in host):
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def bundled_psl() -> str:
    """The public suffix list the ``tld`` distribution ships (publicsuffix.org's file)."""
    return str(importlib.resources.files("tld") / "res" / "effective_tld_names.dat.txt")


@functools.lru_cache(maxsize=4)
def public_suffixes(path: str | None = None, private: bool = False) -> PublicSuffixList:
    """The list at ``path`` (default :func:`bundled_psl`), compiled once per process."""
    where = path or bundled_psl()
    try:
        text = storage.read_bytes(where).decode("utf-8")
    except (OSError, UnicodeError) as exc:
        raise WarcError(f"urls.public_suffix_list: {where} cannot be read ({exc})") from None
    return PublicSuffixList(text, private, where=f"urls.public_suffix_list {where}")


class UrlFilter:
    """Why a URL is blocked (``blocked_domain``, ``blocked_url``, ``banned_word``), or None.

    ``digests`` (each list's sha256, as the run resolved them) keys the compiled lists and lets a
    process map them once for all of a run's files; without it each list is hashed first."""

    def __init__(self, options: UrlFilterOptions, digests: dict[str, str] | None = None):
        paths = tuple(options.blocklists)
        if digests is None or set(digests) != set(paths):
            self.domains, self.urls = _lists.__wrapped__(paths, ())
        else:
            self.domains, self.urls = _lists(paths, tuple(digests[p] for p in paths))
        self.words = [w.strip().lower() for w in options.banned_words if w.strip()]
        self.words_on_domain = options.banned_words_in == "registered_domain"
        self.psl_path = options.public_suffix_list
        self.private = options.private_suffixes
        self._psl: PublicSuffixList | None = None

    @property
    def psl(self) -> PublicSuffixList:
        if self._psl is None:
            self._psl = public_suffixes(self.psl_path, self.private)
        return self._psl

    def registered_domain(self, url: str) -> str | None:
        """The registered domain of ``url``'s host (:meth:`PublicSuffixList.registered_domain`)."""
        return self.psl.registered_domain(host_of(url))

    @property
    def active(self) -> bool:
        return bool(self.domains or self.urls or self.words)

    def blocked(self, url: str) -> str | None:
        full = host_of(url)
        host = _WWW.sub("", full)
        if self.domains:
            # the host and every parent: its registered domain (datatrove's check) and above it
            # too, since UT1's lists name public suffixes on purpose (xxx, porn, sex.pl)
            if self.domains.any_of([parent for form in host_forms(host) for parent in _parents(form)]):
                return "blocked_domain"
        if self.urls and _key(url) in self.urls:
            return "blocked_url"
        if self.words:
            where = (self.psl.registered_domain(full) or host) if self.words_on_domain else host
            if any(w in where for w in self.words):
                return "banned_word"
        return None
