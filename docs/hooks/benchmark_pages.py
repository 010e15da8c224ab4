"""MkDocs hook: the benchmarks page lists every script in benchmarks/, from its docstring, so a new script is on it
with no edit.

The line MARKER in a page becomes a section per script: its name, its docstring (what it compares, how, and how to
run it) and, if there is one, the figures it measured: docs/benchmark-results/<script name>.md, written by hand
with the command that made them (that folder is not built as pages of its own).
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "benchmarks"
RESULTS = ROOT / "docs" / "benchmark-results"
MARKER = "<!-- benchmarks: a section per script -->"
LIST_ITEM = re.compile(r"^\s*([-*]|\d+\.) ")
CODE_LINE = re.compile(r"^ {4}")
USAGE = re.compile(r"^Usage: (\S.*)$")


def _escaped(line: str) -> str:
    """Brackets outside `code` are plain text here, not links: `[--steps 40]`, `[CLS]`."""
    parts = line.split("`")
    return "`".join(re.sub(r"([\[\]])", r"\\\1", part) if index % 2 == 0 else part
                    for index, part in enumerate(parts))


def as_markdown(docstring: str) -> str:
    """A docstring's plain text as Markdown: `Usage: command` and indented lines as code, a blank line before a
    list or a code block that follows a paragraph line (Markdown needs one), brackets escaped."""
    lines, previous = [], ""
    for line in docstring.splitlines():
        starts_block = LIST_ITEM.match(line) or CODE_LINE.match(line)
        if starts_block and previous.strip() and not LIST_ITEM.match(previous) and not previous[:1].isspace():
            lines.append("")
        usage = USAGE.match(line)
        lines.append(f"Usage: `{usage.group(1)}`" if usage else line if CODE_LINE.match(line) else _escaped(line))
        previous = line
    return "\n".join(lines)


def script_section(script: Path) -> str:
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or "(no docstring)"
    results = RESULTS / f"{script.stem}.md"
    figures = f"\n\n{results.read_text(encoding='utf-8').strip()}" if results.is_file() else ""
    return f"## {script.name}\n\n{as_markdown(docstring)}{figures}\n"


def on_page_markdown(markdown, page, config, files):
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, "\n".join(script_section(script) for script in sorted(SCRIPTS.glob("*.py"))))
