"""Tagger options as pydantic models: one-line errors naming the config key, defaults, listing, early checks."""

from __future__ import annotations

import re
import textwrap

import pydantic
import pytest
from pydantic import Field

from dolma_pipe.config import load_config
from taggers import registry
from taggers.base import Document, Span, Tagger, TaggerError, TaggerOptions
from taggers.builtin.c4 import C4Tagger
from taggers.builtin.gopher import THRESHOLDS, GopherTagger
from taggers.builtin.repetitions import WordRepetitions
from taggers.stage import TagConfig, TagStage, build_taggers


def error(cls: type[Tagger], **options) -> str:
    with pytest.raises(TaggerError) as info:
        cls(**options)
    return str(info.value)


# -- errors -------------------------------------------------------------------------------------


def test_unknown_option_says_did_you_mean_with_the_full_key():
    assert error(GopherTagger, detect_language=False, langauge_chars=500) == (
        "invalid options for tagger 'gopher': unknown config key 'tagger_options.gopher.langauge_chars' "
        "(did you mean 'tagger_options.gopher.language_chars'?)"
    )
    # inside an option group too
    assert error(GopherTagger, detect_language=False, thresholds={"word_count_mn": 5}) == (
        "invalid options for tagger 'gopher': unknown config key 'tagger_options.gopher.thresholds.word_count_mn' "
        "(did you mean 'tagger_options.gopher.thresholds.word_count_min'?)"
    )
    # no close name: no hint; a tagger without options says so
    assert error(C4Tagger, zzz=1) == "invalid options for tagger 'c4': unknown config key 'tagger_options.c4.zzz'"
    assert error(registry.get("lengths_v1"), min=1) == (
        "invalid options for tagger 'lengths_v1' (it takes no options): unknown config key 'tagger_options.lengths_v1.min'"
    )
    assert "tagger_options.profanity_document.x" in error(registry.get("profanity_document"), x=1)


def test_wrong_types_are_refused_not_coerced():
    assert error(registry.get("c4"), use_rust="maybe") == (
        "invalid options for tagger 'c4': config key 'tagger_options.c4.use_rust': Input should be a valid boolean (got 'maybe')"
    )
    # a string is not a number and a number is not a boolean, even where pydantic would coerce
    for options, key in (
        ({"min_words_per_line": "3"}, "min_words_per_line"),
        ({"min_words_per_line": 3.0}, "min_words_per_line"),
        ({"min_words_per_line": True}, "min_words_per_line"),
        ({"use_rust": 1}, "use_rust"),
    ):
        assert re.fullmatch(
            rf"invalid options for tagger 'c4': config key 'tagger_options\.c4\.{key}': .* \(got .*\)", error(C4Tagger, **options)
        )
    msg = error(GopherTagger, detect_language=False, stop_words={"de": "der"})
    assert "config key 'tagger_options.gopher.stop_words.de': Input should be a valid list (got 'der')" in msg
    # an integer is a number
    assert GopherTagger(detect_language=False, min_language_score=1).options.min_language_score == 1.0
    # several problems: one line, each key named
    msg = error(WordRepetitions, max_period="13", min_times=1.5)
    assert "\n" not in msg and "word_repetitions_v1.max_period" in msg and "word_repetitions_v1.min_times" in msg


def test_bad_values_are_refused():
    assert error(WordRepetitions, min_times=1) == (
        "invalid options for tagger 'word_repetitions_v1': config key 'tagger_options.word_repetitions_v1.min_times': "
        "Input should be greater than or equal to 2 (got 1)"
    )
    msg = error(registry.get("pii_regex"), types=["SSN"])
    assert msg.startswith("invalid options for tagger 'pii_regex': config key 'tagger_options.pii_regex.types': ")
    assert "non-empty subset of ['EMAIL_ADDRESS', 'PHONE_NUMBER', 'IP_ADDRESS']" in msg and "(got ['SSN'])" in msg
    assert "at least 256" in error(registry.get("ft_lang_id"), max_chars=10)
    assert "'document', 'paragraph' or 'both'" in error(registry.get("ft_lang_id"), granularity="sentence")
    assert "tagger_options.gopher.stop_words" in error(GopherTagger, detect_language=False, stop_words={" ": ["a"]})
    # a required option
    assert (
        error(registry.get("quality")) == "invalid options for tagger 'quality': config key 'tagger_options.quality.model_path' is required"
    )
    assert "tagger_options.toxicity_fasttext_paragraph.model_path" in error(registry.get("toxicity_fasttext_paragraph"), model_path="")
    # TaggerError is one of dolma-pipe's user errors (the CLI prints its one line)
    from dolma_pipe.errors import DolmaPipeError

    assert issubclass(TaggerError, DolmaPipeError)


# -- defaults and values ------------------------------------------------------------------------


def test_defaults_are_applied_and_options_are_typed():
    tagger = C4Tagger()
    assert isinstance(tagger.options, C4Tagger.Options)
    assert (tagger.options.min_words_per_line, tagger.options.min_sentences, tagger.options.use_rust) == (5, 3, None)
    assert tagger.min_words == 5
    assert C4Tagger(min_words_per_line=3).options.min_words_per_line == 3
    gopher = GopherTagger(detect_language=False, thresholds={"word_count_min": 10}, stop_words={"German": ("der", "die")})
    assert gopher.thresholds["word_count_min"] == ("min", 10.0)
    assert gopher.thresholds["word_count_max"] == ("max", 100_000.0)
    assert {k: v[1] for k, v in gopher.thresholds.items()} == {
        k: float(v[1]) for k, v in {**THRESHOLDS, "word_count_min": ("min", 10)}.items()
    }
    # language names and codes are normalised by the model's validator, as document languages are
    assert gopher.options.stop_words == {"de": ["der", "die"]}
    assert GopherTagger.Options(stop_words={"deu": ["x"], "tlh": ["y"]}).stop_words == {"de": ["x"], "tlh": ["y"]}
    assert GopherTagger.Options(thresholds=None, stop_words=None).stop_words == {}
    with pytest.raises(pydantic.ValidationError):  # options are read-only once validated
        tagger.options.min_sentences = 1  # type: ignore[misc]


def _required_filled(model: type[TaggerOptions]) -> dict:
    return {name: "x" for name, field in model.model_fields.items() if field.is_required()}


def test_every_builtin_declares_options_that_build_with_defaults():
    builtins = {n: c for n, c in registry.available().items() if c.__module__.startswith("taggers.builtin.")}
    assert len(builtins) >= 22
    with_options = set()
    for name, cls in builtins.items():
        model = cls.options_model()
        assert model is not None and issubclass(model, TaggerOptions), name
        options = model.model_validate(_required_filled(model))
        assert isinstance(options, TaggerOptions)
        for field_name, field in model.model_fields.items():
            assert field.description, f"{name}.{field_name} has no help"
            with_options.add(name)
        for option, kind, default, help_text in registry.options_table(cls):
            assert kind and default and help_text, (name, option)
    assert {
        "gopher",
        "gopher_v1",
        "gopher_v2",
        "c4",
        "c4_v2",
        "c4_v1",
        "ft_lang_id",
        "ft_lang_id_en_doc_v2",
        "pii_regex",
        "pii_regex_with_counts",
        "quality",
        "dclm-oh-eli5",
        "toxicity_fasttext_document",
        "word_repetitions_v1",
    } <= with_options
    assert {"lengths_v1", "char_length_with_paragraphs_v1", "profanity_document"}.isdisjoint(with_options)


# -- rendering for `dolma-pipe list` ------------------------------------------------------------


def test_options_table_and_describe_show_types_defaults_and_help():
    rows = {r[0]: r for r in registry.options_table(C4Tagger)}
    assert list(rows) == ["use_rust", "min_words_per_line", "min_sentences"]  # the kernel switch (taggers.base.KernelOptions) first
    name, kind, default, help_text = rows["min_words_per_line"]
    assert (kind, default) == ("int (>= 0)", "5") and "too few words" in help_text
    assert rows["use_rust"][1:3] == ("bool | null", "null")
    langid = {r[0]: r for r in registry.options_table(registry.get("ft_lang_id"))}
    assert langid["granularity"][1:3] == ("'document' | 'paragraph' | 'both'", '"both"')
    assert langid["min_score"][1] == "float (>= 0.0, < 1.0)"
    quality = {r[0]: r for r in registry.options_table(registry.get("quality"))}
    assert quality["model_path"][1:3] == ("str (non-empty)", "required")
    assert quality["lowercase"][2] == "from the model's report"
    gopher = {r[0]: r for r in registry.options_table(GopherTagger)}
    assert gopher["thresholds.word_count_min"][1:3] == ("float", "50")
    assert gopher["stop_words"][1:3] == ("dict[str, list[str]]", "{}")

    text = registry.describe("gopher")
    assert text.splitlines()[0] == "gopher  (document)"
    assert "options (tagger_options.gopher.<option>):" in text
    assert "  language_chars: int (>= 1) = 1000\n      characters of the text that language detection reads" in text
    assert "  thresholds.word_count_min: float = 50\n" in text
    assert "  model_path: str (non-empty) (required)" in registry.describe("quality")
    assert registry.describe("lengths_v1").endswith("options: none")
    assert registry.option_names(GopherTagger)[:3] == ["use_rust", "thresholds", "stop_words"]
    assert registry.option_names(registry.get("lengths_v1")) == []
    with pytest.raises(TaggerError, match="unknown tagger 'gopher_v3'"):
        registry.describe("gopher_v3")


# -- user taggers -------------------------------------------------------------------------------


@registry.register("test_opts_plain")
class _Plain(Tagger):
    description = "no options, no __init__"

    def predict(self, doc):
        return [Span("n", 0, 1, 1.0)]


@registry.register("test_opts_declared")
class _Declared(Tagger):
    description = "declares its options"

    class Options(TaggerOptions):
        size: int = Field(2, ge=1, description="how many")
        label: str = Field("x", description="span type")

    options: Options

    def predict(self, doc):
        return [Span(self.options.label, 0, self.options.size, 1.0)]


@registry.register("test_opts_legacy")
class _Legacy(Tagger):
    description = "old style: its own __init__ with keyword parameters"

    def __init__(self, size: int = 1, label="y"):
        self.size = size
        self.label = label

    def predict(self, doc):
        return [Span(self.label, 0, self.size, 1.0)]


def test_user_taggers_old_and_new_style():
    assert _Plain().predict(Document("a", "t")) == [Span("n", 0, 1, 1.0)]
    assert "it takes no options" in error(_Plain, size=1)
    assert _Declared(size=3).predict(Document("a", "text")) == [Span("x", 0, 3, 1.0)]
    assert error(_Declared, sise=3).endswith("(did you mean 'tagger_options.test_opts_declared.size'?)")
    assert "tagger_options.test_opts_declared.size" in error(_Declared, size=0)
    # old style keeps working: its own __init__ checks (or not) its options
    assert _Legacy(size=4).size == 4 and _Legacy.options_model() is None
    assert registry.options_table(_Legacy) == [("size", "int", "1", ""), ("label", "", '"y"', "")]
    assert "checked only when it is built" in registry.describe("test_opts_legacy")
    assert [r[:3] for r in registry.options_table(_Declared)] == [("size", "int (>= 1)", "2"), ("label", "str", '"x"')]


# -- the tag stage checks every tagger's options when it is made --------------------------------


def config(tmp_path, taggers, options, modules=()):
    return load_config(
        TagConfig,
        None,
        {
            "documents": [str(tmp_path / "x" / "documents" / "*.jsonl.gz")],  # no such file: nothing is read
            "taggers": taggers,
            "experiment": "e",
            "tagger_options": options,
            "tagger_modules": list(modules),
        },
    )


def test_tag_stage_refuses_bad_options_when_it_is_made(tmp_path):
    with pytest.raises(TaggerError) as info:
        TagStage(config(tmp_path, ["c4_v2", "gopher"], {"gopher": {"langauge_chars": 10}}))
    assert str(info.value) == (
        "invalid options for tagger 'gopher': unknown config key 'tagger_options.gopher.langauge_chars' "
        "(did you mean 'tagger_options.gopher.language_chars'?)"
    )
    with pytest.raises(
        TaggerError, match=re.escape("config key 'tagger_options.c4_v2.use_rust': Input should be a valid boolean (got 'maybe')")
    ):
        TagStage(config(tmp_path, ["c4_v2"], {"c4_v2": {"use_rust": "maybe"}}))
    with pytest.raises(TaggerError, match=re.escape("config key 'tagger_options.quality.model_path' is required")):
        TagStage(config(tmp_path, ["quality"], {}))
    with pytest.raises(TaggerError, match="names taggers that do not run"):
        TagStage(config(tmp_path, ["c4_v2"], {"gopher_v1": {}}))
    # checking builds nothing: a model file that does not exist is only found when the tagger is built
    stage = TagStage(config(tmp_path, ["quality"], {"quality": {"model_path": str(tmp_path / "nope.bin")}}))
    with pytest.raises(TaggerError, match="nope.bin does not exist"):
        build_taggers(stage.config)
    TagStage(config(tmp_path, ["c4", "lengths_v1"], {"c4": {"min_words_per_line": 3}}))
    # A Dolma-named tagger means what it means in Dolma: no option changes its values.
    with pytest.raises(TaggerError, match=re.escape("unknown config key 'tagger_options.c4_v2.min_words_per_line'")):
        TagStage(config(tmp_path, ["c4_v2"], {"c4_v2": {"min_words_per_line": 5}}))


def test_tag_stage_checks_user_module_options_when_it_is_made(tmp_path):
    module = tmp_path / "opts_taggers.py"
    module.write_text(
        textwrap.dedent("""
        from pydantic import Field
        from taggers.base import Span, Tagger, TaggerOptions
        from taggers.registry import register

        @register("test_opts_module")
        class Mine(Tagger):
            class Options(TaggerOptions):
                threshold: float = Field(0.5, ge=0, le=1, description="cut-off")

            def predict(self, doc):
                return [Span("t", 0, 1, self.options.threshold)]

        @register("test_opts_module_legacy")
        class Old(Tagger):
            def __init__(self, threshold=0.5):
                self.threshold = threshold

            def predict(self, doc):
                return []
    """)
    )
    with pytest.raises(
        TaggerError,
        match=re.escape("config key 'tagger_options.test_opts_module.threshold': Input should be less than or equal to 1 (got 2)"),
    ):
        TagStage(config(tmp_path, ["test_opts_module"], {"test_opts_module": {"threshold": 2}}, [str(module)]))
    stage = TagStage(config(tmp_path, ["test_opts_module"], {"test_opts_module": {"threshold": 0.25}}, [str(module)]))
    assert build_taggers(stage.config)[0].options.threshold == 0.25
    # an old-style tagger's options are checked by its constructor, when it is built
    stage = TagStage(config(tmp_path, ["test_opts_module_legacy"], {"test_opts_module_legacy": {"treshold": 1}}, [str(module)]))
    with pytest.raises(TaggerError, match="bad options"):
        build_taggers(stage.config)
