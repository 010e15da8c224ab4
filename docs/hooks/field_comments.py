"""Griffe extension (mkdocs.yml, mkdocstrings' `extensions`): a dataclass field's comment is its documentation.

The typed configs say what each field means in a comment, on its line or on the lines just above it
(`seed: int = setting(42, ...)  # weights, data order, masks, spans, dropout`); Python keeps no docstring for a
field, so the reference would show none. This gives each field of a dataclass its comment as docstring: the one on
its own line, else the comment lines right above it.
"""

import io
import tokenize
from typing import Dict, List, Optional

import griffe

_comments: Dict[str, Dict[int, str]] = {}  # module path -> line number -> the comment on it


def _comments_of(module: griffe.Module) -> Dict[int, str]:
    if module.path not in _comments:
        source = "\n".join(module.lines) + "\n"
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        _comments[module.path] = {token.start[0]: token.string.lstrip("#").strip()
                                  for token in tokens if token.type == tokenize.COMMENT}
    return _comments[module.path]


def field_comment(attr: griffe.Attribute) -> Optional[str]:
    comments, lines = _comments_of(attr.module), attr.module.lines
    on_its_lines = [comments[n] for n in range(attr.lineno, (attr.endlineno or attr.lineno) + 1) if n in comments]
    if on_its_lines:
        return " ".join(on_its_lines)
    above: List[str] = []
    number = attr.lineno - 1
    while number in comments and lines[number - 1].lstrip().startswith("#"):
        above.insert(0, comments[number])
        number -= 1
    return " ".join(above) or None


class FieldComments(griffe.Extension):
    def on_class_members(self, *, node, cls: griffe.Class, agent, **kwargs) -> None:
        if "dataclass" not in cls.labels:
            return
        for member in cls.members.values():
            if isinstance(member, griffe.Attribute) and not member.docstring and member.lineno:
                comment = field_comment(member)
                if comment:
                    member.docstring = griffe.Docstring(comment, parent=member)
