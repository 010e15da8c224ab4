"""The documentation site (mkdocs.yml, docs/) builds strictly, as CI needs it to; each command's page holds exactly
what the command's --help prints, and every command has one; and every `>>>` example in mlm_tpu's docstrings runs
and prints what it says, so the reference never lies."""

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from doc_examples import modules_with_examples

from mlm_tpu.cli.main import COMMANDS, help_parsers, main

HOOKS = REPO_ROOT / "docs" / "hooks"
SLOW_EXAMPLES = ("mlm_tpu.api",)  # its examples train, evaluate, export and plot a tiny model


def load_hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", HOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


command_pages = load_hook("command_pages")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as CI and `scripts/docs.sh --build` build it: `mkdocs build --strict`."""
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-5000:]
    return site_dir


def code_block(page: Path) -> str:
    """The text of the first code block of a built page, as a reader copies it."""
    block = re.search(r"<pre>(.*?)</pre>", page.read_text(encoding="utf-8"), re.S).group(1)
    return html.unescape(re.sub(r"<[^>]+>", "", block))


def command_page(site: Path, line: str) -> Path:
    return site / command_pages.page_path(line).replace(".md", "/index.html")


def printed_help(argv, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_each_command_page_holds_exactly_what_its_help_prints(site, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(command_pages.HELP_COLUMNS))
    for line in help_parsers():
        assert code_block(command_page(site, line)) == printed_help([*line.split(), "--help"], capsys), line
    main(["--help"])
    assert code_block(site / "commands" / "index.html") == capsys.readouterr().out


def test_every_command_and_subcommand_has_a_page_in_the_nav(site):
    lines = list(help_parsers())
    assert set(COMMANDS) | {"tokenizer train", "tokenizer encode", "predict text2text"} <= set(lines)
    pages = {page.parent.name for page in (site / "commands").glob("*/index.html")}
    assert pages == {line.replace(" ", "-") for line in lines}
    nav = (site / "index.html").read_text(encoding="utf-8")
    for line in lines:
        assert f'href="commands/{line.replace(" ", "-")}/"' in nav, f"{line} is not in the nav"


def test_the_console_command_prints_what_its_page_holds(site):
    env = {**os.environ, "COLUMNS": str(command_pages.HELP_COLUMNS)}
    result = subprocess.run([str(Path(sys.executable).parent / "mlm-tpu"), "train", "--help"], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert code_block(command_page(site, "train")) == result.stdout


def test_the_api_reference_and_the_benchmarks_page_are_generated(site):
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("train_tokenizer", "shard_corpus", "train_model", "evaluate_model", "fill_mask", "export_model"):
        assert f'id="mlm_tpu.api.{name}"' in api, name
    configs = (site / "api" / "configs" / "index.html").read_text(encoding="utf-8")
    assert "weights, data order, masks, spans, dropout" in configs  # TrainingConfig.seed's comment, as its doc
    benchmarks = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    for script in (REPO_ROOT / "benchmarks").glob("*.py"):
        assert f">{script.name}<" in benchmarks, f"{script.name} is not on the benchmarks page"


def test_the_readme_is_short_and_its_links_into_the_docs_lead_somewhere():
    """The README is the front door (two commands, the commands, an example per task); the manual is the site."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert readme.split("```bash\n")[1].splitlines()[:2] == [
        "bash scripts/demo.sh    # set up .venv if missing, then run the whole pipeline offline on the built-in corpus",
        "bash scripts/test.sh    # set up .venv if missing, then run the whole test suite"]
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links and [link for link in links if not (REPO_ROOT / link).is_file()] == []


@pytest.mark.parametrize("module", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_EXAMPLES else name
                                    for name in modules_with_examples()])
def test_the_docstring_examples_run(module, tmp_path):
    """Each module's examples in order, in one process, in an empty folder (they write runs/... there)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run([sys.executable, str(Path(__file__).parent / "doc_examples.py"), module],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
