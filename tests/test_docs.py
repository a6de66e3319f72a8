"""Every page of ``docs/`` and the README runs: the commands it shows and the configs it writes.

What a page may hold, and what this test does with it (docs/development.md says it for writers):

* A fenced block tagged ``bash`` or ``sh`` is run, under ``set -euo pipefail``. A ``console``
  block runs each ``$ `` line as typed in a terminal (a line ending in ``\\`` continues it) and
  checks the output shown under it: each line shown must match a line of the real output, in
  order, ``...`` standing for anything and runs of spaces for any spacing. A ``$ `` line that
  ends in ``# exit status N`` must exit with N; others with 0.
* A ``yaml``, ``json`` or ``python`` block whose first line is ``# file: NAME`` is written to NAME
  (that line left out) when the page reaches it, and a later block of the page must use NAME.
  One whose first line is ``# part of NAME`` is an excerpt: its lines must appear, in a row (any
  common indentation aside), in the file block NAME of the page or in the repository's file NAME.
  ``text`` blocks are shown only (trees, diagrams); any other tag is refused.
* A page's blocks run in order, each in a new ``bash``, all in one scratch
  directory that holds a copy of ``examples/`` and ``train/configs/`` (never the repository
  itself), with the virtual environment's ``bin/`` first on PATH: commands are written as run
  from a checkout's root with the environment activated. Variables a block exports and the
  directory it ends in carry over to the next block, as in a reader's terminal.
* ``<!-- docs-test: make-dry-run -->`` on the line before a block: its ``make`` lines run as
  ``make -n`` in the repository (the targets exist and parse; ``make demo`` takes minutes and
  ``make test`` runs this test). ``<!-- docs-test: options-only -->``: the block's commands are
  not run; each one's ``--help`` is (from the repository), and every option the command gives
  must be in it (the benchmarks run for minutes against Dolma and Debian's packages).
* A page that names ``s3://BUCKET/...`` runs against a local S3 server (moto, the session's
  ``s3_server``) with BUCKET created empty. A page that runs ``ray start`` gets a ``ray`` first on
  PATH that is the real one, but keeps every node it starts in the page's own temporary directory
  (so no other Ray on this machine finds it), and whose ``ray stop`` stops those nodes only; the
  page's port 6379 becomes a free port. Whatever the page leaves running is stopped at its end.

Besides: no page links outside the repository, every link and every backticked path into the
repository exists, the README stays under 150 lines and links every page. A failure names the
page, the block (its number and line) and what went wrong.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.processes import free_port, kill_processes_under

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")) + ["README.md"]
BIN = Path(sys.executable).parent
RUN_TAGS = {"bash", "sh", "console"}
FILE_TAGS = {"yaml", "json", "python"}
SHOWN_TAGS = {"text"}
DIRECTIVES = {"make-dry-run", "options-only"}
DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*([a-z-]+)\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
RAY_PORT = "6379"
# Pages that run in under 5 s (the suite's `slow` line); every other page is `slow`.
FAST_PAGES = {"docs/configs.md", "docs/benchmarks.md", "docs/development.md"}
BLOCK_TIMEOUT = 240
# Top-level folders of the repository that backticked paths in the pages are checked against.
REPO_DIRS = ("bench/", "dolma_pipe/", "docs/", "examples/", "mixers/", "report/", "rust_bloom/", "taggers/", "tests/", "train/", ".ci/")


@dataclass
class Block:
    page: str
    number: int  # 1-based among the page's blocks
    line: int  # of the opening fence, 1-based
    tag: str
    text: str
    directive: str | None = None

    def where(self) -> str:
        return f"{self.page}, block {self.number} (line {self.line}, ```{self.tag})"

    @property
    def first(self) -> str:
        return self.text.split("\n", 1)[0].strip()

    @property
    def file_name(self) -> str | None:
        m = re.fullmatch(r"(?:#|//)\s*file:\s*(\S+)", self.first) if self.tag in FILE_TAGS else None
        return m.group(1) if m else None

    @property
    def part_of(self) -> str | None:
        m = re.fullmatch(r"(?:#|//)\s*part of\s+(\S+)", self.first) if self.tag in FILE_TAGS else None
        return m.group(1) if m else None

    @property
    def body(self) -> str:
        """The text without its ``# file:`` / ``# part of`` line."""
        return self.text.split("\n", 1)[1] if "\n" in self.text else ""


def parse(page: str) -> list[Block]:
    lines = (ROOT / page).read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    i = 0
    directive: str | None = None
    while i < len(lines):
        m = FENCE.match(lines[i])
        d = DIRECTIVE.search(lines[i])
        if d:
            directive = d.group(1)
            i += 1
            continue
        if not m:
            if lines[i].strip():
                directive = None  # a directive applies to the block right after it
            i += 1
            continue
        indent, tag = m.group(1), m.group(2)
        start = i
        i += 1
        body = []
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{page}: the block opened at line {start + 1} is never closed")
        blocks.append(Block(page, len(blocks) + 1, start + 1, tag, "\n".join(body), directive))
        directive = None
        i += 1
    return blocks


# ---- the structure of every page (fast) -------------------------------------------------------


def _excerpt_found(excerpt: str, whole: str) -> bool:
    """Whether ``excerpt``'s lines occur in a row in ``whole`` (common indentation aside)."""
    want = textwrap.dedent(excerpt).strip("\n").split("\n")
    have = whole.split("\n")
    for i in range(len(have) - len(want) + 1):
        if textwrap.dedent("\n".join(have[i : i + len(want)])).split("\n") == want:
            return True
    return False


def structure_problems(page: str) -> list[str]:
    problems = []
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = parse(page)
    files = {b.file_name: b for b in blocks if b.file_name}
    for b in blocks:
        if b.tag not in RUN_TAGS | FILE_TAGS | SHOWN_TAGS:
            problems.append(f"{b.where()}: tag {b.tag or '(none)'!r} is none of {sorted(RUN_TAGS | FILE_TAGS | SHOWN_TAGS)}")
        if b.directive is not None and (b.directive not in DIRECTIVES or b.tag not in RUN_TAGS):
            problems.append(f"{b.where()}: directive {b.directive!r} (known: {sorted(DIRECTIVES)}, before a run block only)")
        if b.tag in FILE_TAGS and not (b.file_name or b.part_of):
            problems.append(f"{b.where()}: a {b.tag} block starts with '# file: NAME' or '# part of NAME'")
        if b.file_name:
            later = [c for c in blocks[b.number :] if c.tag in RUN_TAGS or c.file_name]
            if not any(b.file_name in c.text for c in later):
                problems.append(f"{b.where()}: no later block uses the file {b.file_name}")
        if b.part_of:
            if b.part_of in files:
                whole = files[b.part_of].body
            elif (ROOT / b.part_of).is_file():
                whole = (ROOT / b.part_of).read_text(encoding="utf-8")
            else:
                problems.append(f"{b.where()}: '# part of {b.part_of}' names no file block of the page and no repository file")
                continue
            if not _excerpt_found(b.body, whole):
                problems.append(f"{b.where()}: its lines are not, in a row, in {b.part_of}")
    outside = re.findall(r"\b(?:https?|ftp)://\S+|\bmailto:\S+|\bwww\.\S+", text)
    if outside:
        problems.append(f"{page}: links outside the repository: {outside[:3]}")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path = (ROOT / page).parent / target.split("#", 1)[0]
        if "://" in target or (target.split("#", 1)[0] and not path.exists()):
            problems.append(f"{page}: link to {target}, which is not a file of the repository")
    for code in re.findall(r"`([^`\n]+)`", _outside_blocks(text)):
        for token in code.split():
            token = token.strip(",;:()")
            if not token.startswith(REPO_DIRS) or any(c in token for c in "<>{}$=") or token.startswith(_ignored_dirs()):
                continue  # what a command makes (bench/_work/, demo-output/) is not in a fresh clone
            if "*" in token:
                if not glob.glob(str(ROOT / token)):
                    problems.append(f"{page}: `{token}` matches no file of the repository")
            elif not (ROOT / token).exists():
                problems.append(f"{page}: `{token}` is not a file or folder of the repository")
    return problems


def _ignored_dirs() -> tuple[str, ...]:
    """The folders .gitignore names from the repository's root: outputs, never in a clone."""
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return tuple(line.strip("/") for line in lines if line.startswith("/") and line.endswith("/"))


def _outside_blocks(text: str) -> str:
    return re.sub(r"^\s*```.*?^\s*```\s*$", "", text, flags=re.S | re.M)


def test_docs_pages_exist():
    assert {"docs/tag.md", "docs/dedup.md", "docs/mix.md", "docs/tokenize.md", "docs/train.md", "docs/cluster.md"} <= set(PAGES)
    assert {"docs/configs.md", "docs/runs.md", "docs/benchmarks.md"} <= set(PAGES)


def test_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.split("\n")) < 150, "the README stays under 150 lines: reference material goes to docs/"
    missing = [p for p in PAGES if p != "README.md" and f"]({p})" not in readme]
    assert not missing, f"the README's table of pages lacks {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_page_structure(page):
    """The convention is kept: known block tags, config files used, excerpts true, links inside."""
    problems = structure_problems(page)
    assert not problems, "\n".join(problems)


# ---- running a page ---------------------------------------------------------------------------


@dataclass
class Session:
    """A reader's terminal: one scratch directory, the environment and folder each block leaves."""

    page: str
    scratch: Path
    env: dict[str, str]
    cwd: Path
    substitutions: dict[str, str] = field(default_factory=dict)

    def script(self, code: str, strict: bool = True) -> str:
        state, where = self.scratch / ".docs-test-env", self.scratch / ".docs-test-cwd"
        code = self.substitute(code)
        # A console line runs as typed in a terminal (no pipefail: `zcat ... | head` is fine there).
        head = "set -euo pipefail\n" if strict else ""
        # The block runs first; its environment and folder are kept for the next block.
        return f'{head}{code}\n__rc=$?\nenv -0 > "{state}"\npwd > "{where}"\nexit $__rc\n'

    def substitute(self, text: str) -> str:
        for old, new in self.substitutions.items():
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
        return text

    def run(self, block: Block, code: str, strict: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.Popen(
            ["bash", "-c", self.script(code, strict)],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise AssertionError(f"{block.where()}: still running after {BLOCK_TIMEOUT} s\n{_tail(out)}") from None
        self._load_state()
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")

    def _load_state(self) -> None:
        state, where = self.scratch / ".docs-test-env", self.scratch / ".docs-test-cwd"
        if state.exists():
            pairs = [item.split("=", 1) for item in state.read_text().split("\0") if "=" in item]
            self.env = {k: v for k, v in pairs if k not in ("PWD", "OLDPWD", "SHLVL", "_")}
            state.unlink()
        if where.exists():
            self.cwd = Path(where.read_text().strip())
            where.unlink()


def _tail(out: str, n: int = 4000) -> str:
    return out if len(out) <= n else "...\n" + out[-n:]


def _commands(text: str) -> list[str]:
    """The commands of a block: its lines, a line ending in a backslash joined with the next."""
    out, cur = [], ""
    for line in text.split("\n"):
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip() and not cur.strip().startswith("#"):
            out.append(cur.strip())
        cur = ""
    return out


def _console_steps(text: str) -> list[tuple[str, list[str]]]:
    """``[(command, shown output lines)]`` of a console block."""
    steps: list[tuple[str, list[str]]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd += "\n" + lines[i]
            steps.append((cmd, []))
        elif steps:
            if line.strip():
                steps[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"console block: output {line!r} before any '$ ' command")
        i += 1
    return steps


def _pattern(shown: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in shown.strip().split("...")]
    regex = ".*".join(parts)
    regex = re.sub(r"(\\ )+", r"\\s+", regex)  # re.escape escapes spaces
    return re.compile(regex)


def check_output(block: Block, cmd: str, shown: list[str], out: str) -> None:
    actual = [line.strip() for line in out.split("\n")]
    at = 0
    for line in shown:
        pat = _pattern(line)
        while at < len(actual) and not pat.fullmatch(actual[at]):
            at += 1
        if at == len(actual):
            raise AssertionError(
                f"{block.where()}: `{cmd.strip()}` printed no line matching {line.strip()!r} (after the lines matched before it)"
                f"\n--- its output ---\n{_tail(out)}"
            )
        at += 1


def run_block(session: Session, block: Block) -> None:
    if block.directive == "make-dry-run":
        for cmd in _commands(block.text):
            argv = shlex.split(cmd, comments=True)
            assert argv and argv[0] == "make", f"{block.where()}: make-dry-run blocks hold make commands only, not {cmd!r}"
            proc = subprocess.run(["make", "-n", *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, f"{block.where()}: `make -n {' '.join(argv[1:])}` failed:\n{proc.stderr}"
        return
    if block.directive == "options-only":
        for cmd in _commands(block.text):
            argv = shlex.split(cmd, comments=True)
            program = argv[: next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))]
            env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
            proc = subprocess.run([*program, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, f"{block.where()}: `{' '.join(program)} --help` failed:\n{proc.stderr[-3000:]}"
            known = set(re.findall(r"--[A-Za-z0-9][A-Za-z0-9_-]*", proc.stdout))
            unknown = [a.split("=", 1)[0] for a in argv if a.startswith("--") and a.split("=", 1)[0] not in known]
            assert not unknown, f"{block.where()}: `{cmd}` gives {unknown}, which `{' '.join(program)} --help` does not list"
        return
    if block.tag in ("bash", "sh"):
        proc = session.run(block, block.text)
        if proc.returncode != 0:
            raise AssertionError(
                f"{block.where()} exited with status {proc.returncode}\n--- block ---\n{block.text}\n--- output ---\n{_tail(proc.stdout)}"
            )
        return
    for cmd, shown in _console_steps(block.text):
        status = re.search(r"#\s*exit status (\d+)\s*$", cmd)
        want = int(status.group(1)) if status else 0
        proc = session.run(block, cmd, strict=False)
        if proc.returncode != want:
            raise AssertionError(
                f"{block.where()}: `{cmd.strip()}` exited with status {proc.returncode}, not {want}\n--- output ---\n{_tail(proc.stdout)}"
            )
        check_output(block, cmd, shown, proc.stdout)


def make_scratch(tmp: Path) -> Path:
    """What a page may use of the repository, copied: it never writes into the checkout."""
    scratch = tmp / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "examples", scratch / "examples", ignore=ignore)
    shutil.copytree(ROOT / "train" / "configs", scratch / "train" / "configs", ignore=ignore)
    return scratch


RAY_SHIM = '''#!{python}
"""The docs test's ray: the real one, its nodes kept in {base}; `ray stop` stops those only."""
import os, signal, socket, sys, time
REAL, BASE = {real!r}, {base!r}
args = sys.argv[1:]
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
if args[:1] == ["start"]:
    head = "--head" in args
    nodes = len([d for d in os.listdir(BASE) if d.startswith("n")])
    extra = ["--temp-dir", os.path.join(BASE, "h" if head else f"n{{nodes}}"), "--disable-usage-stats"]
    if head and "--include-dashboard" not in args:
        extra += ["--include-dashboard", "false"]
    if head and "--ray-client-server-port" not in args:
        extra += ["--ray-client-server-port", "{client_port}"]
    if "--dashboard-agent-listen-port" not in args:
        extra += ["--dashboard-agent-listen-port", str(free_port())]
    os.execv(REAL, [REAL, *args, *extra])
if args[:1] == ["stop"]:
    def ours():
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if BASE.encode() in open(f"/proc/{{pid}}/cmdline", "rb").read() and int(pid) != os.getpid():
                    found.append(int(pid))
            except OSError:
                pass
        return found
    for _ in range(50):
        pids = ours()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    print("Stopped all Ray processes of this cluster.")
    sys.exit(0)
os.execv(REAL, [REAL, *args])
'''


@contextmanager
def ray_sandbox(session: Session) -> Iterator[None]:
    """A ``ray`` for the page (see the module's docstring); every node it started is gone after."""
    base = tempfile.mkdtemp(prefix="dpd", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    shims = session.scratch.parent / "shims"
    shims.mkdir(exist_ok=True)
    shim = shims / "ray"
    shim.write_text(RAY_SHIM.format(python=sys.executable, real=str(BIN / "ray"), base=base, client_port=free_port()))
    shim.chmod(0o755)
    session.env["PATH"] = f"{shims}{os.pathsep}{session.env['PATH']}"
    session.env["RAY_USAGE_STATS_ENABLED"] = "0"
    session.substitutions[RAY_PORT] = str(free_port())
    try:
        yield
    finally:
        kill_processes_under(base, rounds=6)
        shutil.rmtree(base, ignore_errors=True)


def _buckets(blocks: list[Block]) -> set[str]:
    return {b for block in blocks if block.tag in RUN_TAGS | FILE_TAGS for b in re.findall(r"s3://([a-z0-9][a-z0-9.-]+)", block.text)}


def _empty_bucket(name: str) -> None:
    import boto3

    s3 = boto3.resource("s3")
    bucket = s3.Bucket(name)
    if bucket.creation_date is None:
        bucket.create()
    bucket.objects.all().delete()


def _page_param(page: str):
    text = (ROOT / page).read_text(encoding="utf-8")
    try:
        blocks = parse(page)
    except AssertionError:
        blocks = []  # test_page_structure says what is wrong
    run = "\n".join(b.text for b in blocks if b.tag in RUN_TAGS and b.directive is None)
    marks = [] if page in FAST_PAGES else [pytest.mark.slow]
    if "ray start" in run or "--ray" in run:
        marks.append(pytest.mark.ray)
    if "python -m train" in run or "torchrun" in run:
        marks.append(pytest.mark.train)
    if "ray start" in text or "python -m train" in run:
        marks.append(pytest.mark.timeout(600))
    return pytest.param(page, marks=marks, id=page)


# The pages that train models take minutes each: each is a scope of its own (a class), so that
# pytest-xdist's --dist loadscope runs them on other workers than the rest of the pages.
HEAVY_PAGES = ("docs/mix-search.md", "docs/train.md")


@pytest.mark.parametrize("page", [_page_param(p) for p in PAGES if p not in HEAVY_PAGES])
def test_page_runs(page, tmp_path, request):
    """The page's blocks, in order, in a scratch copy of what they read."""
    run_page(page, tmp_path, request)


class TestMixSearchPage:
    @pytest.mark.parametrize("page", [_page_param(HEAVY_PAGES[0])])
    def test_page_runs(self, page, tmp_path, request):
        run_page(page, tmp_path, request)


class TestTrainPage:
    @pytest.mark.parametrize("page", [_page_param(HEAVY_PAGES[1])])
    def test_page_runs(self, page, tmp_path, request):
        run_page(page, tmp_path, request)


def test_every_page_runs_in_one_of_the_scopes():
    assert set(HEAVY_PAGES) <= set(PAGES)


def run_page(page: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    blocks = parse(page)
    if "python -m train" in "\n".join(b.text for b in blocks if b.tag in RUN_TAGS):
        pytest.importorskip("torch")
    scratch = make_scratch(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("VIRTUAL_ENV", None)
    buckets = _buckets(blocks)
    if buckets:
        request.getfixturevalue("s3_server")
        for name in sorted(buckets):
            _empty_bucket(name)
        env.update({k: os.environ[k] for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")})
    session = Session(page, scratch, env, scratch)
    with ray_sandbox(session) if any("ray start" in b.text for b in blocks) else _nothing():
        for block in blocks:
            if block.file_name:
                target = session.cwd / block.file_name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(session.substitute(block.body) + "\n", encoding="utf-8")
            elif block.tag in RUN_TAGS:
                started = time.perf_counter()
                run_block(session, block)
                if os.environ.get("DOCS_TEST_TIMES"):  # where a page's time goes (pytest -s)
                    print(f"{block.where()}: {time.perf_counter() - started:.1f} s")


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def test_console_output_matching():
    """The console convention itself: ``...`` for anything, spacing free, lines in order."""
    block = Block("x.md", 1, 1, "console", "")
    out = "dolma-pipe convert: complete -> /tmp/x/clean\n  files        13 (13 processed)\n  time  0.4 s (7,919 docs/s)\n"
    check_output(block, "cmd", ["dolma-pipe convert: complete -> .../clean", "  time ... s (... docs/s)"], out)
    with pytest.raises(AssertionError, match="printed no line matching"):
        check_output(block, "cmd", ["  time ... s", "  files 13 ..."], out)  # out of order
    assert _console_steps("$ a \\\n  --b\nshown\n\n$ c  # exit status 1\n") == [("a \\\n  --b", ["shown"]), ("c  # exit status 1", [])]


def test_a_failing_block_names_its_page_and_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```bash\necho fine\n```\n\n```console\n$ echo hello\nhullo\n```\n\n```bash\ntrue\nfalse\n```\n")
    blocks = parse(str(page))
    session = Session(str(page), tmp_path, {**os.environ}, tmp_path)
    run_block(session, blocks[0])
    with pytest.raises(AssertionError, match=r"page\.md, block 2 \(line 7, ```console\): `echo hello` printed no line matching 'hullo'"):
        run_block(session, blocks[1])
    with pytest.raises(AssertionError, match=r"page\.md, block 3 \(line 12, ```bash\) exited with status 1"):
        run_block(session, blocks[2])
    assert structure_problems(str(page)) == []
