"""MkDocs hook: the README's sections shown on the pages that are to hold them, until the README is cut down.

A line `<!-- README: Heading -->` in a page becomes the README's section of that heading: the heading and its text,
up to the next heading of any level. `<!-- README text: Heading -->` brings the text without the heading. Headings
move up one level (### -> ##), never above ## (a page's # is its title). A link to a README heading (`(#slug)`)
leads to the page that shows that heading. A marker that names no README heading fails the build; the headings no
page shows are listed at each build.

`python docs/hooks/readme_sections.py --write` writes the sections into the pages in place of their markers, links
and all: the first step of moving the README's text into the guides (docs/README-migration.md).
"""

import logging
import posixpath
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Dict, List, Tuple

from markdown.extensions.toc import slugify as markdown_slugify
from mkdocs.exceptions import PluginError

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = re.compile(r"^<!-- README( text)?: (.+?) -->$", re.M)
HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$")
FENCE = re.compile(r"^\s*(```|~~~)")
ANCHOR_LINK = re.compile(r"\]\(#([^)\s]+)\)")

log = logging.getLogger("mkdocs.hooks.readme_sections")
_where: Dict[str, str] = {}  # slug of a README heading -> the page (src_uri) that shows it


def readme_sections(text: str) -> Dict[str, Tuple[int, str]]:
    """Heading -> (its level, the text under it up to the next heading), headings in code blocks left out."""
    sections: Dict[str, Tuple[int, List[str]]] = {}
    heading, in_code = None, False
    for line in text.splitlines(keepends=True):
        if FENCE.match(line):
            in_code = not in_code
        match = None if in_code else HEADING.match(line)
        if match:
            heading = match.group(2)
            if heading in sections:
                raise PluginError(f"README.md has two sections named '{heading}'; a page cannot name one of them")
            sections[heading] = (len(match.group(1)), [])
        elif heading is not None:
            sections[heading][1].append(line)
    return {name: (level, "".join(lines).strip("\n")) for name, (level, lines) in sections.items()}


def _table_pipes(text: str) -> str:
    """GitHub's `a\\|b` in a table cell's code is `a|b`; Python-Markdown keeps the backslash but does not split
    cells at a pipe inside code."""
    def unescaped(row: str) -> str:
        parts = row.split("`")
        return "`".join(part.replace("\\|", "|") if index % 2 else part for index, part in enumerate(parts))

    return "\n".join(unescaped(line) if line.startswith("|") else line for line in text.split("\n"))


def _slugify(config) -> Callable[[str, str], str]:
    return config.mdx_configs.get("toc", {}).get("slugify", markdown_slugify)


def _slug(heading: str, config) -> str:
    return _slugify(config)(heading.replace("`", ""), "-")


def on_files(files, config):
    """Note which page shows each README heading, for the links between them; check that every marker names one."""
    sections = readme_sections(README.read_text(encoding="utf-8"))
    shown: Dict[str, str] = {}  # heading -> the page that shows it
    _where.clear()
    for file in files.documentation_pages():
        for marker in MARKER.finditer(file.content_string):
            heading = marker.group(2)
            if heading not in sections:
                raise PluginError(f"{file.src_uri} shows README.md's section '{heading}', which README.md does not "
                                  "have (renamed?): name a heading README.md has")
            if heading in shown:
                raise PluginError(f"README.md's section '{heading}' is shown on both {shown[heading]} and "
                                  f"{file.src_uri}: show it on one page")
            shown[heading] = file.src_uri
            if marker.group(1) is None:  # the heading is on that page too
                _where[_slug(heading, config)] = file.src_uri
    missing = [heading for heading in sections if heading not in shown]
    if missing:  # a warning: the strict build fails until a guide shows each section
        log.warning("README sections on no page: %s; add a `<!-- README: heading -->` line to a guide",
                    "; ".join(missing))
    return files


def on_page_markdown(markdown, page, config, files):
    if not MARKER.search(markdown):
        return markdown
    sections = readme_sections(README.read_text(encoding="utf-8"))
    here = page.file.src_uri

    def link(match: re.Match) -> str:
        target = _where.get(match.group(1), here)
        if target == here:
            return match.group(0)
        return f"]({posixpath.relpath(target, posixpath.dirname(here))}#{match.group(1)})"

    def section(match: re.Match) -> str:
        level, text = sections[match.group(2)]
        heading = "" if match.group(1) else f"{'#' * max(2, level - 1)} {match.group(2)}\n\n"
        return _table_pipes(ANCHOR_LINK.sub(link, heading + text))

    return MARKER.sub(section, markdown)


def write_sections_into_pages() -> None:
    """Replace every marker of docs/ by its section, as the build shows it."""
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files

    config = load_config(str(README.parent / "mkdocs.yml"))
    files = on_files(get_files(config), config)
    for file in files.documentation_pages():
        text = file.content_string
        if MARKER.search(text):
            Path(file.abs_src_path).write_text(on_page_markdown(text, SimpleNamespace(file=file), config, files),
                                               encoding="utf-8")
            print(f"wrote README.md's sections into docs/{file.src_uri}")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    write_sections_into_pages()
