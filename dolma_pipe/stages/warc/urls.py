"""URLs: Dolma's normal form for ``metadata.url``, and the offline URL filter.

:func:`normalise` is Dolma's ``UrlNormalizer`` (w3lib's ``canonicalize_url``, then
``url_normalize``, the scheme and a leading ``www.`` dropped, trailing slashes too), so the same
page has the same ``url`` in both tools.

:class:`UrlFilter` blocks a record by a list file (one domain or URL a line, ``#`` comments; a
domain blocks its subdomains, as UT1's lists mean it) or by a banned word anywhere in its host
(datatrove's "banned words in the domain" rule, on the host's lower-case text).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from url_normalize import url_normalize
from w3lib.url import canonicalize_url

from dolma_pipe import storage

from .config import UrlFilterOptions, WarcError

_EDGES = re.compile(r"(^['\"<]+)|([/'\">]+$)")
_WWW = re.compile(r"(^(www\d*\.))|(/+$)", re.IGNORECASE)


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


class UrlFilter:
    """Why a URL is blocked (``blocked_domain``, ``blocked_url``, ``banned_word``), or None."""

    def __init__(self, options: UrlFilterOptions):
        self.domains: set[str] = set()
        self.urls: set[str] = set()
        for path in options.blocklists:
            self._load(path)
        self.words = [w.strip().lower() for w in options.banned_words if w.strip()]

    def _load(self, path: str) -> None:
        try:
            text = storage.read_bytes(path).decode("utf-8", "replace")
        except OSError as exc:
            raise WarcError(f"urls.blocklists: {path} cannot be read ({exc})") from None
        for line in text.splitlines():
            entry = line.split("#", 1)[0].strip()
            if not entry:
                continue
            key = _key(entry)
            if "/" in key or "?" in key:
                self.urls.add(key)
            else:
                self.domains.add(key)

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
