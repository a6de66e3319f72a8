"""Gopher quality rules (Rae et al. 2021, "Scaling Language Models", MassiveText quality filter).

Owns three taggers, all on one Rust kernel (``rust_bloom/src/text_stats/gopher.rs``) whose
mode is the only difference, not a copy:

* ``gopher_v1`` and ``gopher_v2``: Dolma 1.2.1's taggers of those names, value for value (its
  ``dolma/taggers/gopher.py``; see :class:`DolmaGopherTagger` for every definition and where it
  differs from the paper).  Mixer configs written for Dolma filter on exactly these attributes,
  so their thresholds carry over.  No language detection, no verdict: Dolma has neither.
* ``gopher``: the paper's rules (its appendix A.1.1) as the paper defines them, with
  language-aware stop words, scripts written without spaces, repeats counted as the paper
  counts them, and a ``keep`` verdict (:class:`GopherTagger`).  A name Dolma does not use, so no
  Dolma config silently gets these values.

The paper mode (``gopher``), where it differs from Dolma's ``gopher_v1``:

* Every rule of the paper is emitted as one document-level span ``[0, len(text), value]``, plus
  ``keep`` (1.0 keep / 0.0 drop): whether the document passes all rules that apply to it.
* Lines are the non-empty lines (like Dolma's ``gopher_v2``); paragraphs are blank-line
  separated blocks.  Duplicate lines/paragraphs count the copies beyond the first (what a
  deduplication would remove), both as a fraction of lines/paragraphs and of their characters.
* ``fraction_of_characters_in_duplicate_{5..10}grams`` and
  ``fraction_of_characters_in_most_common_{2,3,4}grams`` count each word's characters once
  (the union of the n-gram occurrences), so overlapping repeats never give values above 1
  (Dolma sums ``count * length`` over overlapping n-grams).  Denominator: characters in words.
* ``symbol_to_word_ratio`` is the larger of the ``#`` ratio and the ellipsis ratio (``...`` or
  ``…``), each counted as occurrences per word, so the paper's single 0.1 threshold applies;
  both are also emitted on their own.  The paper's mean word length is emitted next to Dolma's
  median.
* Stop words: the paper's English list is only applied to English.  The language comes from
  the document (``metadata.lang``/``metadata.language``/``lang``/``language``), normalised to
  ISO 639-1: ``de-DE`` -> ``de``, ``eng``/``English``/``en_US`` -> ``en``, ``deu``/``ger``/``German``
  -> ``de``, ``zho``/``Chinese`` -> ``zh`` (two-letter codes as they are; 639-2/639-3 codes and
  English or native names of the stop-word languages and of zh/ja/ko/th by a table).  A value
  that is not recognised (``und``, ``fin``, ``Klingon``) counts as no language: fastText lid.176
  decides (one batched call per batch, first 1,000 characters by default).
  Other languages with a list in ``STOP_WORDS`` use it; for the others the rule is skipped
  (``required_word_count`` is not emitted and the verdict ignores it).  Words are matched
  case-insensitively on word boundaries, so "The" and "the," count.
* ``keep`` is a default type: a document on which the tagger failed gets an empty ``keep``
  (the tag stage writes the defaults as empty lists), never a missing key.  An absent or empty
  ``keep`` means "not evaluated": mixer filters should treat it as drop (a filter written as
  "drop when keep == 0" lets it through; "keep when keep == 1" does not).
* Scripts written without spaces (Han, kana, Thai, Lao, Khmer, Myanmar, Tibetan): every such
  character is one word (a cheap stand-in for a segmenter: whitespace splitting would make a
  Chinese page 20 "words" of 80 characters).  Word count, symbol ratios, alphabetic fraction and
  the n-gram rules then work on those characters; the mean word length rule is skipped when such
  characters are most of the words (its 3..10 range is about spaced scripts).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Field, create_model, field_validator

# The Rust kernel (rust_bloom/src/text_stats/); the Python code below stays the reference.
from dolma_pipe._rust import GopherKernel
from taggers import fasttext_models
from taggers.base import SCORE_PRECISION, Document, Grouped, KernelOptions, PathOption, Span, Tagger, TaggerOptions
from taggers.registry import register

# The paper's thresholds; ("min", x) means value >= x passes, ("max", x) value <= x passes.
THRESHOLDS: dict[str, tuple[str, float]] = {
    "word_count_min": ("min", 50),
    "word_count_max": ("max", 100_000),
    "mean_word_length_min": ("min", 3),
    "mean_word_length_max": ("max", 10),
    "symbol_to_word_ratio": ("max", 0.1),
    "fraction_of_lines_starting_with_bullet_point": ("max", 0.9),
    "fraction_of_lines_ending_with_ellipsis": ("max", 0.3),
    "fraction_of_words_with_alpha_character": ("min", 0.8),
    "required_word_count": ("min", 2),
    "fraction_of_duplicate_lines": ("max", 0.3),
    "fraction_of_characters_in_duplicate_lines": ("max", 0.2),
    "fraction_of_duplicate_paragraphs": ("max", 0.3),
    "fraction_of_characters_in_duplicate_paragraphs": ("max", 0.2),
    "fraction_of_characters_in_most_common_2grams": ("max", 0.20),
    "fraction_of_characters_in_most_common_3grams": ("max", 0.18),
    "fraction_of_characters_in_most_common_4grams": ("max", 0.16),
    "fraction_of_characters_in_duplicate_5grams": ("max", 0.15),
    "fraction_of_characters_in_duplicate_6grams": ("max", 0.14),
    "fraction_of_characters_in_duplicate_7grams": ("max", 0.13),
    "fraction_of_characters_in_duplicate_8grams": ("max", 0.12),
    "fraction_of_characters_in_duplicate_9grams": ("max", 0.11),
    "fraction_of_characters_in_duplicate_10grams": ("max", 0.10),
}

# Frequent function words per language.  English is the paper's list; the others are the
# most frequent short function words of each language (same spirit: any real prose has two).
STOP_WORDS: dict[str, tuple[str, ...]] = {
    "en": ("the", "be", "to", "of", "and", "that", "have", "with"),
    "de": ("der", "die", "das", "und", "ist", "zu", "den", "von", "mit", "nicht"),
    "fr": ("le", "la", "les", "de", "et", "des", "est", "que", "une", "pour"),
    "es": ("de", "la", "que", "el", "en", "los", "del", "las", "por", "con"),
    "it": ("di", "che", "il", "la", "per", "non", "del", "della", "con", "sono"),
    "pt": ("de", "que", "do", "da", "em", "um", "para", "com", "não", "uma"),
    "nl": ("de", "het", "een", "en", "van", "is", "dat", "op", "te", "met"),
    "sv": ("och", "att", "det", "som", "en", "är", "på", "för", "med", "av"),
    "da": ("og", "at", "det", "som", "en", "er", "på", "til", "med", "af"),
    "pl": ("i", "w", "na", "się", "nie", "z", "do", "że", "jest", "to"),
    "ru": ("и", "в", "не", "на", "что", "с", "по", "это", "как", "к"),
}

# Characters of scripts written without spaces between words: each one counts as a word.
_UNSPACED = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u0f00-\u0fff"  # Tibetan
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c"  # CJK radicals, ideographic marks
    "\u3040-\u30ff\u31f0-\u31ff"  # kana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\uff66-\uff9f"  # half-width katakana
    "\U00020000-\U0003134f"  # Han extensions B..G
)
_HAS_UNSPACED = re.compile(f"[{_UNSPACED}]")
_UNSPACED_CHAR = re.compile(f"[{_UNSPACED}]")
_TOKENS_UNSPACED = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")

# From a word's first letter (\w minus digits and underscore) to its end: one match per word
# holding a letter.
_FROM_FIRST_LETTER = re.compile(r"[^\W\d_]\S*")
# ASCII punctuation (not "_", a word character for \b) to spaces: for ASCII text, splitting
# the translated bytes gives exactly the words that \b...\b would find.
_ASCII_PUNCT = bytes(c for c in b"!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~")
_ASCII_PUNCT_TO_SPACE = bytes.maketrans(_ASCII_PUNCT, b" " * len(_ASCII_PUNCT))
_BULLET_LINE = re.compile(
    r"^[^\S\n]*[\-\*\u2022\u2023\u2043\u2219\u25aa\u25ab\u25cf\u25cb\u25e6\u25a0\u25a1\u00b7\u2013\u27a2\u2192]", re.M
)
_ELLIPSIS_LINE = re.compile(r"(?:\.\.\.|\u2026)[^\S\n]*$", re.M)
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
_LANG_PREFIX = re.compile(r"[-_.\s(,;/]")
_TWO_LETTERS = re.compile(r"[a-z]{2}")
# ISO 639-2 (B and T) / 639-3 codes and English and native names -> ISO 639-1, for the languages
# with a stop-word list and the unspaced scripts' languages (what the rules depend on).
_LANG_ALIASES: dict[str, str] = {
    alias: code
    for code, aliases in {
        "en": ("eng", "english"),
        "de": ("deu", "ger", "german", "deutsch"),
        "fr": ("fra", "fre", "french", "français", "francais"),
        "es": ("spa", "spanish", "español", "espanol", "castellano", "castilian"),
        "it": ("ita", "italian", "italiano"),
        "pt": ("por", "portuguese", "português", "portugues"),
        "nl": ("nld", "dut", "dutch", "nederlands", "flemish"),
        "sv": ("swe", "swedish", "svenska"),
        "da": ("dan", "danish", "dansk"),
        "pl": ("pol", "polish", "polski"),
        "ru": ("rus", "russian", "русский"),
        "zh": ("zho", "chi", "cmn", "chinese", "mandarin", "中文", "汉语", "漢語"),
        "ja": ("jpn", "japanese", "日本語"),
        "ko": ("kor", "korean", "한국어"),
        "th": ("tha", "thai", "ไทย"),
    }.items()
    for alias in aliases
}

_HASH_MULT = np.uint64(0x100000001B3)  # FNV prime: the rolling n-gram hash multiplier
# Whether taggers use the Rust kernel by default (``use_rust`` overrides it per tagger; the
# tests switch it to run every case on both); the Python code of ``attributes`` is the
# reference the parity tests compare it with.
USE_RUST = True
# fastText's cost grows with the text it reads: 1,000 characters identify a language reliably
# at half the cost of 2,000 (the ``language_chars`` option changes it).
_LID_CHARS = 1000


def _stop_word_pattern(words: tuple[str, ...]) -> re.Pattern:
    alternatives = "|".join(re.escape(w.lower()) for w in sorted(words, key=len, reverse=True))
    # Run on lower-cased text: a case-sensitive pattern keeps re's first-character fast path.
    return re.compile(rf"\b(?:{alternatives})\b")


def normalize_lang(value: Any) -> str | None:
    """ISO 639-1 code of a language tag or name, None when not recognised.

    ``de-DE`` / ``zh_Hans`` / ``__label__en`` -> ``de`` / ``zh`` / ``en``; ``eng`` / ``English`` /
    ``deu`` / ``German`` / ``zho`` / ``Chinese`` -> ``en`` / ``en`` / ``de`` / ``de`` / ``zh`` / ``zh``.
    Any two-letter code is taken as it is; other values (``und``, ``fin``, ``Klingon``, not a
    string) give None.
    """
    if not isinstance(value, str) or not value.strip():
        return None
    lowered = value.strip().lower().removeprefix("__label__")
    head = _LANG_PREFIX.split(lowered, 1)[0]
    if _TWO_LETTERS.fullmatch(head):
        return head
    return _LANG_ALIASES.get(head) or _LANG_ALIASES.get(lowered)


def doc_language(doc: Document, known: dict | frozenset | None = None) -> str | None:
    """The document's recognised language (see :func:`normalize_lang`), or None.

    A value not recognised is also taken when it names a language of ``known`` (a custom
    stop-word list, say ``{"tlh": [...]}`` for ``lang: tlh``)."""
    for source in (doc.metadata, doc.row):
        if isinstance(source, dict):
            for key in ("lang", "language"):
                value = source.get(key)
                lang = normalize_lang(value)
                if lang:
                    return lang
                if known and isinstance(value, str) and value.strip().lower() in known:
                    return value.strip().lower()
    return None


def ngram_fractions(words: list[str], lengths: np.ndarray | None = None) -> dict[str, float]:
    """Gopher's repetition measures over a word list, vectorised with rolling 64-bit hashes.

    For n in 2..4: characters covered by the occurrences of the most frequent n-gram (ties: the
    one seen first, as ``Counter.most_common``); for n in 5..10: characters covered by n-grams
    occurring more than once; both over the characters of all words, each word counted once.
    ``lengths`` (the words' lengths) may be passed when the caller has them already.

    Vectorised for a small, fixed number of numpy calls per document: one ``np.unique`` over a
    (3, words) matrix of 2/3/4-gram hashes (rows tagged so they never match each other,
    positions past the end holding distinct fillers); the 5..10-grams are only hashed and
    counted where they can repeat (a repeated n-gram is made of repeated 4-grams, so its start
    begins a run of at least n-3 repeated 4-grams; there are none in most documents); one
    cumulative sum gives the covered words of all nine n.
    """
    out = dict.fromkeys(_NGRAM_TYPES, 0.0)
    n_words = len(words)
    if n_words < 2:
        return out
    # Python's str hash as the word id; collisions at 64 bits are negligible.
    unigram = np.fromiter(map(hash, words), dtype=np.int64, count=n_words).view(np.uint64)
    if lengths is None:
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=n_words)
    rows = min(9, n_words - 1)  # n = 2 .. rows + 1
    top = min(rows, 3)
    grams = np.empty((top, n_words), dtype=np.uint64)
    grams[:] = _FILLER[:top, :n_words] if n_words <= _FILLER.shape[1] else _filler(top, n_words)
    hashes = unigram
    for r in range(top):
        hashes = hashes[:-1] * _HASH_MULT + unigram[r + 1 :]
        grams[r, : len(hashes)] = hashes + _ROW_TAG[r]
    _, inverse, counts = np.unique(grams, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(top, n_words)
    per_start = counts[inverse]
    starts = np.zeros((rows, n_words), dtype=bool)
    first = (per_start == per_start.max(axis=1, keepdims=True)).argmax(axis=1)
    starts[:top] = inverse == inverse[np.arange(top), first][:, None]
    if rows > 3:
        # run[i]: how many repeated 4-grams start at i, i+1, ... in a row.
        positions = np.arange(n_words)
        not_repeated = np.where(per_start[2] > 1, n_words, positions)
        run = np.minimum.accumulate(not_repeated[::-1])[::-1] - positions
        possible = run >= 2
        if possible.any():
            for r in range(3, rows):  # n = r + 2
                hashes = hashes[:-1] * _HASH_MULT + unigram[r + 1 :]
                candidates = np.flatnonzero(possible[: len(hashes)] & (run[: len(hashes)] >= r - 1))
                if candidates.size < 2:
                    break
                _, inv, cnt = np.unique(hashes[candidates], return_inverse=True, return_counts=True)
                repeated = candidates[cnt[inv] > 1]
                if repeated.size == 0:
                    break
                starts[r, repeated] = True
    # Covered words: +1 at each chosen start, -1 just after its n-gram, then a running sum.
    row_idx, col_idx = np.nonzero(starts)
    diff = np.zeros((rows, n_words + 11), dtype=np.int32)
    diff[row_idx, col_idx] += 1
    diff[row_idx, col_idx + row_idx + 2] -= 1
    covered = np.cumsum(diff[:, :n_words], axis=1) > 0
    total = float(lengths.sum()) or 1.0
    values = (covered @ lengths) / total
    for r in range(rows):
        out[_NGRAM_TYPES[r]] = float(values[r])
    return out


def _filler(rows: int, width: int) -> np.ndarray:
    # Distinct values for positions where no n-gram starts: they never repeat.
    return (np.arange(rows * width, dtype=np.uint64) + np.uint64(0x5DEECE66D << 20)).reshape(rows, width)


_FILLER = _filler(3, 4096)
_ROW_TAG = np.arange(1, 10, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)


_NGRAM_TYPES = tuple(
    f"fraction_of_characters_in_most_common_{n}grams" if n <= 4 else f"fraction_of_characters_in_duplicate_{n}grams" for n in range(2, 11)
)


def _duplicates(items: list[str]) -> tuple[float, float]:
    """(fraction of items that repeat an earlier one, fraction of their characters)."""
    if not items:
        return 0.0, 0.0
    unique = set(items)
    total_chars = sum(map(len, items))
    # Each distinct item keeps its first copy; every further copy is a duplicate.
    dup_chars = total_chars - sum(map(len, unique))
    return (len(items) - len(unique)) / len(items), dup_chars / (total_chars or 1)


# ``thresholds.<rule>``: one number per rule of THRESHOLDS, each defaulting to the paper's.
_THRESHOLD_FIELDS: dict[str, Any] = {
    key: (
        float,
        Field(
            value,
            description=f"{'lowest' if kind == 'min' else 'highest'} {key.removesuffix('_min').removesuffix('_max')} a kept document may have",
        ),
    )
    for key, (kind, value) in THRESHOLDS.items()
}
if TYPE_CHECKING:
    # What a type checker sees of the model built below from THRESHOLDS (its fields are read
    # by name with getattr): a class it can use in annotations, which create_model's result is not.
    class GopherThresholds(TaggerOptions):
        pass

else:
    GopherThresholds = create_model(
        "GopherThresholds",
        __base__=TaggerOptions,
        __doc__="The paper's thresholds; a kept document is within every one that applies.",
        **_THRESHOLD_FIELDS,
    )


class GopherTagger(Tagger):
    """``gopher``: the Gopher paper's rules, language-aware, with a keep/drop verdict (module doc)."""

    description = "Gopher paper's quality rules (language-aware stop words, unspaced scripts) with a keep/drop verdict"
    granularity = "document"
    # Written (empty) even for a document the tagger failed on: "not evaluated", see the module doc.
    defaults = ("keep",)

    class Options(KernelOptions):
        thresholds: GopherThresholds = Field(default_factory=GopherThresholds, description="the paper's thresholds; set any of them")
        stop_words: dict[str, list[Annotated[str, Field(min_length=1)]]] = Field(
            default_factory=dict,
            description="stop-word lists by language, added to or replacing the built-in ones; keys are language "
            "codes or names, normalised like document languages (German, deu -> de); [] turns a list off",
        )
        min_stop_words: int | None = Field(None, ge=0, description="sets thresholds.required_word_count (stop words a kept document has)")
        detect_language: bool = Field(True, description="identify documents without a recognised language with fastText lid.176")
        model_path: PathOption | None = Field(None, description="fastText language-id model (null: the lid.176.ftz this package ships)")
        min_language_score: float = Field(0.3, ge=0.0, le=1.0, description="a detected language below this probability counts as none")
        language_chars: int = Field(_LID_CHARS, ge=1, description="characters of the text that language detection reads")

        @field_validator("thresholds", "stop_words", mode="before")
        @classmethod
        def _null_is_empty(cls, v: Any) -> Any:
            if v is None:
                return {}
            if isinstance(v, dict):  # a tuple of words is a list of words
                return {k: list(w) if isinstance(w, tuple) else w for k, w in v.items()}
            return v

        @field_validator("stop_words")
        @classmethod
        def _language_codes(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
            out = {}
            for lang, words in v.items():
                if not lang.strip():
                    raise ValueError(f"keys must be language codes, got {lang!r}")
                out[normalize_lang(lang) or lang.strip().lower()] = words
            return out

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        o = self.options
        thresholds, stop_words, min_stop_words, model_path = o.thresholds, o.stop_words, o.min_stop_words, o.model_path
        detect_language, min_language_score, language_chars = o.detect_language, o.min_language_score, o.language_chars
        self.language_chars = language_chars
        self.thresholds = {key: (kind, float(getattr(thresholds, key))) for key, (kind, _) in THRESHOLDS.items()}
        if min_stop_words is not None:
            self.thresholds["required_word_count"] = ("min", float(min_stop_words))
        lists = dict(STOP_WORDS)
        lists.update((lang, tuple(words)) for lang, words in stop_words.items())
        self.stop_patterns = {lang: _stop_word_pattern(words) for lang, words in lists.items() if words}
        self.stop_sets = {lang: frozenset(w.lower().encode() for w in words) for lang, words in lists.items() if words}
        self.kernel = (
            GopherKernel(
                [
                    (lang, [w.lower() for w in sorted(words, key=len, reverse=True)], [w.lower() for w in words])
                    for lang, words in lists.items()
                    if words
                ]
            )
            if o.rust(USE_RUST)
            else None
        )
        self.min_language_score = float(min_language_score)
        self.model = fasttext_models.load(fasttext_models.lid_model_path(model_path)) if detect_language else None

    # -- language ---------------------------------------------------------------------------
    def languages(self, docs: list[Document]) -> list[str | None]:
        langs = [doc_language(d, self.stop_patterns) for d in docs]
        missing = [i for i, lang in enumerate(langs) if lang is None and docs[i].text.strip()]
        if missing and self.model is not None:
            preds = fasttext_models.predict(self.model, [docs[i].text[: self.language_chars] for i in missing], k=1)
            for i, pred in zip(missing, preds):
                if pred and pred[0][1] >= self.min_language_score:
                    label = pred[0][0].removeprefix("__label__")
                    langs[i] = normalize_lang(label) or (label if label in self.stop_patterns else None)
        return langs

    def predict(self, doc: Document) -> list[Span]:
        return self.tag(doc.text, self.languages([doc])[0])

    def predict_batch(self, docs: list[Document]) -> list[list[Span]] | list[Grouped]:
        langs = self.languages(docs)
        if self.kernel is None:
            return [self.tag(d.text, lang) for d, lang in zip(docs, langs)]
        # With the kernel, the grouped mapping directly (what ``group`` makes of ``spans``).
        texts = [d.text for d in docs]
        out: list[Grouped] = []
        for text, attrs in zip(texts, self.attributes_batch(texts, langs)):
            end = len(text)
            grouped = {k: [[0, end, round(float(v), SCORE_PRECISION)]] for k, v in attrs.items() if k[0] != "_"}
            grouped["keep"] = [[0, end, 1.0 if self.verdict(attrs) else 0.0]]
            out.append(grouped)
        return out

    def attributes_batch(self, texts: list[str], langs: list[str | None]) -> list[dict[str, float]]:
        """``attributes`` of many documents (the Rust kernel when enabled, in one GIL-free call)."""
        if self.kernel is None:
            return [self.attributes(t, lang) for t, lang in zip(texts, langs)]
        stop = self.stop_sets
        # Python's lower-casing, for the stop-word regex on non-ASCII text (never re-implemented).
        lowers = [t.lower() if lang in stop and not t.isascii() else None for t, lang in zip(texts, langs)]
        # The kernel returns ``attributes``' own dicts (same keys, order and value types).
        return self.kernel.stats_batch(texts, lowers, langs)

    # -- the rules --------------------------------------------------------------------------
    def attributes(self, text: str, lang: str | None) -> dict[str, float]:
        """Every measure of the document, by Dolma-style type name."""
        if text.isascii() or _HAS_UNSPACED.search(text) is None:
            words = text.split()
            unspaced = 0
            spaced_text = text
        else:
            words = _TOKENS_UNSPACED.findall(text)
            unspaced = len(_UNSPACED_CHAR.findall(text))
            spaced_text = " ".join(words)  # so the word regexes below see the same words
        n_words = len(words)
        per_word = 1.0 / n_words if n_words else 0.0
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=n_words)
        if n_words:
            ordered = np.sort(lengths)
            half = n_words // 2
            median = float(ordered[half]) if n_words % 2 else (ordered[half - 1] + ordered[half]) / 2.0
        else:
            median = 0.0
        attrs: dict[str, float] = {
            "character_count": len(text),
            "word_count": n_words,
            "mean_word_length": float(lengths.sum()) * per_word,
            "median_word_length": median,
        }
        hashes = text.count("#") * per_word
        ellipses = (text.count("...") + text.count("\u2026")) * per_word
        attrs["hash_to_word_ratio"] = hashes
        attrs["ellipsis_to_word_ratio"] = ellipses
        attrs["symbol_to_word_ratio"] = max(hashes, ellipses)
        attrs["fraction_of_words_with_alpha_character"] = len(_FROM_FIRST_LETTER.findall(spaced_text)) * per_word
        if lang and (pattern := self.stop_patterns.get(lang)) is not None:
            if text.isascii():
                tokens = text.lower().encode("ascii").translate(_ASCII_PUNCT_TO_SPACE).split()
                attrs["required_word_count"] = sum(map(self.stop_sets[lang].__contains__, tokens))
            else:
                attrs["required_word_count"] = len(pattern.findall(text.lower()))

        lines = [line for line in map(str.strip, text.split("\n")) if line]
        per_line = 1.0 / len(lines) if lines else 0.0
        attrs["fraction_of_lines_starting_with_bullet_point"] = len(_BULLET_LINE.findall(text)) * per_line
        attrs["fraction_of_lines_ending_with_ellipsis"] = len(_ELLIPSIS_LINE.findall(text)) * per_line
        dup, dup_chars = _duplicates(lines)
        attrs["fraction_of_duplicate_lines"] = dup
        attrs["fraction_of_characters_in_duplicate_lines"] = dup_chars
        if "\n" in text:
            paragraphs = [p for p in map(str.strip, _PARAGRAPH_BREAK.split(text)) if p]
            dup, dup_chars = _duplicates(paragraphs)
        else:
            dup = dup_chars = 0.0
        attrs["fraction_of_duplicate_paragraphs"] = dup
        attrs["fraction_of_characters_in_duplicate_paragraphs"] = dup_chars
        attrs.update(ngram_fractions(words, lengths))
        attrs["_unspaced_words"] = unspaced
        return attrs

    def verdict(self, attrs: dict[str, float]) -> bool:
        th = self.thresholds
        wc = attrs["word_count"]
        if wc < th["word_count_min"][1] or wc > th["word_count_max"][1]:
            return False
        # The word-length range is about spaced scripts; skip it for mostly unspaced text.
        if attrs["_unspaced_words"] * 2 <= wc:
            mwl = attrs["mean_word_length"]
            if mwl < th["mean_word_length_min"][1] or mwl > th["mean_word_length_max"][1]:
                return False
        for key, (kind, limit) in th.items():
            if key.startswith(("word_count_", "mean_word_length_")):
                continue
            value = attrs.get(key)
            if value is None:  # a rule that does not apply (no stop-word list for the language)
                continue
            if (value < limit) if kind == "min" else (value > limit):
                return False
        return True

    def tag(self, text: str, lang: str | None) -> list[Span]:
        return self.spans(text, self.attributes_batch([text], [lang])[0])

    def spans(self, text: str, attrs: dict[str, float]) -> list[Span]:
        keep = self.verdict(attrs)
        end = len(text)
        spans = [Span(k, 0, end, float(v)) for k, v in attrs.items() if k[0] != "_"]
        spans.append(Span("keep", 0, end, 1.0 if keep else 0.0))
        return spans


register("gopher")(GopherTagger)


# -- Dolma's gopher_v1 / gopher_v2 --------------------------------------------------------------

DOLMA_REQUIRED_WORDS = frozenset(("the", "be", "to", "of", "and", "that", "have", "with"))
_DOLMA_LINE_BREAKS = re.compile(r"\n+")


def dolma_attributes(text: str, ignore_empty_lines: bool = False) -> Grouped:
    """Dolma 1.2.1's ``get_attributes`` (``dolma/taggers/gopher.py``) as the grouped mapping its
    tagger writes, in its span order: the Python reference of the kernel's Dolma modes, written
    as Dolma's own code is, statement for statement (tests compare the two; the committed
    fixture of Dolma's output pins both)."""
    n = len(text)
    spans: list[tuple[str, float]] = []
    words = text.split()
    word_count = len(words)
    character_count = sum(len(word) for word in words)
    most_common: list[tuple[int, float]] = []
    duplicate: list[tuple[int, float]] = []
    values: dict[str, float] = dict.fromkeys(
        (
            "word_count",
            "median_word_length",
            "symbol_to_word_ratio",
            "fraction_of_words_with_alpha_character",
            "required_word_count",
            "fraction_of_lines_starting_with_bullet_point",
            "fraction_of_lines_ending_with_ellipsis",
            "fraction_of_duplicate_lines",
            "fraction_of_characters_in_duplicate_lines",
        ),
        0.0,
    )
    if n:
        values["word_count"] = word_count
        values["median_word_length"] = float(statistics.median([len(w) for w in words])) if words else 0.0
        values["symbol_to_word_ratio"] = sum(1 for w in words if "#" in w or "\u2026" in w) / max(word_count, 1)
        values["fraction_of_words_with_alpha_character"] = sum(1 for w in words if any(c.isalpha() for c in w)) / max(word_count, 1)
        values["required_word_count"] = sum(1 for w in words if w in DOLMA_REQUIRED_WORDS)
        for size in range(2, 11):
            counts = Counter(zip(*[words[i:] for i in range(size)]))
            if not counts:
                continue
            if size <= 4:
                gram, count = counts.most_common(1)[0]
                most_common.append((size, count * sum(len(w) for w in gram) / max(character_count, 1)))
            else:
                all_chars = sum(count * sum(len(w) for w in gram) for gram, count in counts.items())
                repeated = sum(count * sum(len(w) for w in gram) for gram, count in counts.items() if count > 1)
                duplicate.append((size, repeated / max(all_chars, 1)))
        lines = _DOLMA_LINE_BREAKS.split(text) if ignore_empty_lines else text.split("\n")
        line_count = len(lines)
        bullets = sum(1 for line in lines if line.startswith(("*", "-")))
        ellipses = sum(1 for line in lines if line.endswith("\u2026"))
        values["fraction_of_lines_starting_with_bullet_point"] = bullets / max(line_count, 1)
        values["fraction_of_lines_ending_with_ellipsis"] = ellipses / max(line_count, 1)
        line_counts = Counter(lines)
        values["fraction_of_duplicate_lines"] = sum(c for c in line_counts.values() if c > 1) / max(line_count, 1)
        dup_chars = sum(len(line) * c for line, c in line_counts.items() if c > 1)
        values["fraction_of_characters_in_duplicate_lines"] = dup_chars / max(character_count, 1)
    spans.extend((f"fraction_of_characters_in_most_common_{size}grams", v) for size, v in most_common)
    spans.extend((f"fraction_of_characters_in_duplicate_{size}grams", v) for size, v in duplicate)
    spans.append(("character_count", n))
    spans.extend(values.items())
    return {name: [[0, n, round(float(v), SCORE_PRECISION)]] for name, v in spans}


class DolmaGopherTagger(Tagger):
    """``gopher_v1``: Dolma 1.2.1's tagger of that name, the same attribute names, spans and scores.

    Dolma's definitions, which are not the paper's (the paper's are ``gopher``'s):

    * words are ``text.split()`` whatever the script (a Chinese page is a few long "words");
    * ``character_count`` is ``len(text)``; ``word_count``, ``median_word_length`` (no mean);
    * ``symbol_to_word_ratio``: words containing ``#`` or ``…`` (U+2026; three dots do not
      count) per word; ``fraction_of_words_with_alpha_character``: words with a ``str.isalpha``
      character;
    * ``required_word_count``: words equal to one of the paper's eight English stop words,
      case-sensitively and with punctuation attached ("The" and "the," do not count), for every
      language;
    * lines are ``text.split("\\n")``, empty lines included (``gopher_v2``: ``re.split(r"\\n+", text)``);
      a bullet line starts with ``*`` or ``-`` exactly (no space skipped, no other bullet), an
      ellipsis line ends with ``…`` exactly (not ``...``, not before trailing spaces);
      ``fraction_of_duplicate_lines`` counts every copy of a repeated line, the first included
      (so two empty lines are duplicates), over all lines; ``fraction_of_characters_in_duplicate_lines``
      is their characters times their count over the characters of the words (it can exceed 1);
    * ``fraction_of_characters_in_most_common_{2,3,4}grams``: the occurrences of the most common
      n-gram (ties: the first seen) times its characters over the characters of the words
      (overlapping occurrences count again: above 1 happens); ``..._duplicate_{5..10}grams``:
      the characters of every occurrence of a repeated n-gram over those of all n-gram
      occurrences.  An n-gram type is absent when the text has fewer than n words; the other
      types are always written, all 0.0 for an empty text;
    * no language detection, no paragraphs, no verdict.

    Every span is ``[0, len(text), round(value, 5)]``.  No case breaks the data contract here:
    Dolma's offsets are ``len(text)``, a character offset.
    """

    description = "Dolma 1.2.1's gopher_v1: Dolma's Gopher statistics, value for value (no verdict)"
    granularity = "document"
    _MODE: ClassVar[Literal["dolma_v1", "dolma_v2"]] = "dolma_v1"

    class Options(KernelOptions):
        pass

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.kernel = GopherKernel([], self._MODE) if self.options.rust(USE_RUST) else None
        self.ignore_empty_lines = self._MODE == "dolma_v2"

    def predict(self, doc: Document) -> Grouped:
        return self.predict_batch([doc])[0]

    def predict_batch(self, docs: list[Document]) -> list[Grouped]:
        if self.kernel is None:
            return [dolma_attributes(d.text, self.ignore_empty_lines) for d in docs]
        return self.kernel.grouped_batch([d.text for d in docs])


@register("gopher_v2")
class DolmaGopherV2Tagger(DolmaGopherTagger):
    """``gopher_v2``: Dolma 1.2.1's tagger of that name: ``gopher_v1`` with lines split on runs of
    newlines (``re.split(r"\\n+", text)``: no empty line between two others)."""

    description = "Dolma 1.2.1's gopher_v2: gopher_v1 with lines split on runs of newlines"
    _MODE = "dolma_v2"


register("gopher_v1")(DolmaGopherTagger)
