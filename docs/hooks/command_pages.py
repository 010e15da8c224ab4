"""MkDocs hook: a page per command line, made at build time from its argparse parser, so that `--help` and the
docs never disagree.

`mlm_tpu.cli.main.help_parsers()` names every command line with a --help of its own (a command of COMMANDS, its
argparse sub-commands, its MODES); each gets `commands/<line>.md` holding exactly what that --help prints in a
terminal of HELP_COLUMNS columns, and a line in the nav's Commands section. `commands/index.md` holds what
`mlm-tpu --help` prints. A command added to COMMANDS gets its page with no edit here; tests/test_docs.py checks
every page against the command's --help.
"""

import os
from contextlib import contextmanager
from typing import Dict, Iterator

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

from mlm_tpu.cli.main import COMMANDS, help_parsers, listing

HELP_COLUMNS = 100  # argparse wraps at the terminal's width; the pages show it at this one
NAV_SECTION = "Commands"  # mkdocs.yml's nav section the pages are added to, after its index
INDEX = "commands/index.md"


@contextmanager
def terminal_columns(columns: int) -> Iterator[None]:
    """Make argparse (shutil.get_terminal_size) wrap help at `columns`, as in a terminal of that width."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def page_path(line: str) -> str:
    """`tokenizer train` -> commands/tokenizer-train.md."""
    return f"commands/{line.replace(' ', '-')}.md"


def help_texts() -> Dict[str, str]:
    """Each command line's --help, as printed at HELP_COLUMNS columns."""
    with terminal_columns(HELP_COLUMNS):
        return {line: parser.format_help() for line, parser in help_parsers().items()}


def command_page(line: str, help_text: str) -> str:
    command = line.split()[0]
    words = COMMANDS[command][1] if line == command else None
    intro = f"{words[0].upper()}{words[1:]}. " if words else ""
    return (f"# mlm-tpu {line}\n\n{intro}What `mlm-tpu {line} --help` prints (generated from its parser):\n\n"
            f"```text\n{help_text}```\n")


def index_page(lines) -> str:
    links = "\n".join(f"- [`mlm-tpu {line}`]({page_path(line).split('/')[1]})"
                      + (f": {COMMANDS[line][1]}" if line in COMMANDS else "") for line in lines)
    return (f"# Commands\n\nEvery job is a command of `mlm-tpu` (the 🤗-example spellings such as `python train.py` "
            f"take the same flags). What `mlm-tpu --help` prints:\n\n```text\n{listing()}\n```\n\n"
            f"## Every command's flags\n\n{links}\n")


def on_config(config):
    """Add a nav entry per command line under NAV_SECTION (the pages themselves come in on_files)."""
    lines = list(help_parsers())
    section = next((item for item in config.nav or [] if isinstance(item, dict) and NAV_SECTION in item), None)
    if section is None:
        raise PluginError(f"mkdocs.yml's nav has no '{NAV_SECTION}' section for the command pages")
    section[NAV_SECTION] = [INDEX, *({line: page_path(line)} for line in lines)]
    return config


def on_files(files, config):
    texts = help_texts()
    files.append(File.generated(config, INDEX, content=index_page(texts)))
    for line, text in texts.items():
        files.append(File.generated(config, page_path(line), content=command_page(line, text)))
    return files
