"""Markdown to NLP-ready text blocks that keep their character offsets into the original file.

Markup characters are blanked with spaces instead of removed, so every offset spaCy reports is an
offset into the stored layer-0 document, and spans point at the exact text a person can open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCED_CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_HTML = re.compile(r"<[^>\n]+>")
_LINK = re.compile(r"!?\[([^\]\n]*)\]\(([^)\n]*)\)")
_LINE_MARK = re.compile(r"^([ \t]*)(#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+|\d+[.)][ \t]+)", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t:-]+\|[ \t|:-]*$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """A paragraph, heading or list item: `text` starts at `start` in the original document."""

    start: int
    text: str
    level: int = 0  # a heading's level (the number of `#`), 0 for any other block

    @property
    def heading(self) -> bool:
        return self.level > 0

    @property
    def section_heading(self) -> bool:
        """A `##` heading or deeper: the structure of the document (Background, See also), not its title."""
        return self.level > 1


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def front_matter_end(text: str) -> int:
    """Offset just past a leading `---` YAML block, or 0 when there is none."""
    if not text.startswith("---\n"):
        return 0
    end = text.find("\n---", 3)
    if end == -1:
        return 0
    line_end = text.find("\n", end + 4)
    return len(text) if line_end == -1 else line_end + 1


def plain_text(text: str) -> str:
    """Same length as `text`, with front matter, code and markup replaced by spaces."""
    fm = front_matter_end(text)
    out = re.sub(r"[^\n]", " ", text[:fm]) + text[fm:]
    out = _FENCED_CODE.sub(_blank, out)
    out = _HTML.sub(_blank, out)
    out = _TABLE_RULE.sub(_blank, out)
    out = _LINK.sub(lambda m: " " * (2 if m.group(0).startswith("!") else 1) + m.group(1)
                    + " " * (len(m.group(0)) - len(m.group(1)) - (2 if m.group(0).startswith("!") else 1)), out)
    out = _LINE_MARK.sub(lambda m: m.group(1) + " " * len(m.group(2)), out)
    out = _EMPHASIS.sub(lambda m: " " * len(m.group(0)), out)
    return out.replace("|", " ")


def blocks(text: str) -> list[Block]:
    """Split a markdown document into blocks (separated by blank lines, headings and list items)."""
    plain = plain_text(text)
    result: list[Block] = []
    line_start = 0
    current_start, current_lines, current_level = None, [], 0

    def flush() -> None:
        nonlocal current_start, current_lines
        if current_start is not None:
            chunk = "\n".join(current_lines)
            stripped = chunk.strip()
            if stripped:
                lead = len(chunk) - len(chunk.lstrip())
                result.append(Block(current_start + lead, stripped, current_level))
        current_start, current_lines = None, []

    for raw, line in zip(text.split("\n"), plain.split("\n")):
        stripped = raw.lstrip()
        is_heading = stripped.startswith("#")
        is_item = bool(re.match(r"([-*+]|\d+[.)])[ \t]+", stripped))
        if not line.strip() or is_heading or is_item:
            flush()
        if line.strip():
            if current_start is None:
                current_start, current_level = line_start, len(stripped) - len(stripped.lstrip("#"))
            current_lines.append(line)
            if is_heading:
                flush()
        line_start += len(raw) + 1
    flush()
    return result
