"""What a translator translates, cut out of the English and put back into it: Markdown blocks and pieces of code.

- **Markdown**: one unit per top-level block that markdown-it-py finds (a heading, a paragraph, a list item, a table,
  a quote, a fence), cut by its source lines so that the text between the units stays byte for byte.
- **Code**: each comment (consecutive full-line comments at one indentation are one unit) and each string literal a
  reader sees: prose (two words) or a figure's text (``set_title``, ``label=``, ``alt=``, ...), never one the code
  compares or looks up (``==``, ``in``, ``assert``'s test, ``[...]``, a dict's keys), which is data. Adjacent
  literals are one unit. Found with :mod:`tokenize`, written back with the same prefix and quotes.

Usage: ``[(b.start, b.text) for b in markdown_blocks(cell_source)]``, ``[p.text for p in code_pieces(cell_source)]``
"""

from __future__ import annotations

import io
import itertools
import re
import tokenize
from dataclasses import dataclass
from typing import cast

from markdown_it import MarkdownIt

_PARSER = MarkdownIt("commonmark").enable("table")
_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Piece:
    """A unit's place in its text: characters ``start:end``, the text to translate, and its kind: ``text`` (a
    Markdown block), ``comment`` or ``string`` (code). ``shape``: a comment's indentation (``inline`` after code); a
    string's prefix and quote and how many literals it joins."""

    start: int
    end: int
    text: str
    kind: str = "text"
    shape: str = ""


def _line_starts(text: str) -> list[int]:
    return [0, *itertools.accumulate(len(line) for line in text.splitlines(keepends=True))]


def markdown_blocks(text: str, fences: bool = True) -> list[Piece]:
    """The top-level blocks of ``text`` that have words to translate (fences only where ``fences``), in order."""
    lines = text.splitlines()
    starts = _line_starts(text)
    pieces = []
    for token in _PARSER.parse(text):
        if token.map is None or token.nesting < 0:
            continue
        top = token.level == 0 and token.type not in ("bullet_list_open", "ordered_list_open")
        if not (top or (token.level == 1 and token.type == "list_item_open")):
            continue
        first, last = token.map
        while last > first and not lines[last - 1].strip():
            last -= 1
        block = "\n".join(lines[first:last])
        if token.type in ("fence", "code_block") and not fences or not _LETTER.search(block) \
                or token.type == "html_block" and block.startswith("<!--"):
            continue
        pieces.append(Piece(starts[first], starts[first] + len(block), block))
    return pieces


# -- code -----------------------------------------------------------------------------------------------------------
_PROSE = re.compile(r"[A-Za-z]{2,}[^\w{}]*\s[^\w{}]*[A-Za-z]{2,}")  # two words
_FIGURE_CALLS = {"set_title", "set_xlabel", "set_ylabel", "suptitle", "text", "annotate", "set_label"}
_FIGURE_KEYWORDS = {"label", "title", "xlabel", "ylabel", "alt", "description"}
_KEEP_COMMENT = re.compile(r"#|!|\s*(noqa|type:|pragma|fmt:)")  # ### BEGIN SOLUTION, #!, pragmas
_GENERATED = re.compile(r"^# --- cloud install .*?^# --- end of the cloud install ---$", re.DOTALL | re.MULTILINE)
_LITERAL = re.compile(r"(?P<prefix>[A-Za-z]*)(?P<quote>'''|\"\"\"|'|\")(?P<body>.*)(?P=quote)\Z", re.DOTALL)


_FORMAT_FIELD = re.compile(r"(?<!\{)\{\w*(?:\.\w+|\[[^\]{}]*\])*(?:![rsa])?(?::[^{}\s]*)?\}(?!\})")


def fields(text: str, fstring: bool = True) -> list[str]:
    """The ``{...}`` fields of an f-string body, outermost only (``{{`` is a brace, not a field); of a plain string
    (``fstring=False``), those ``str.format`` would fill (``{name}``, ``{x[0]:.2f}``), not braces in prose."""
    if not fstring:
        return _FORMAT_FIELD.findall(text)
    found, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if depth == 0 and text.startswith(("{{", "}}"), i):
            i += 2
            continue
        if text[i] == "{":
            depth, start = depth + 1, (i if depth == 0 else start)
        elif text[i] == "}" and depth:
            depth -= 1
            if depth == 0:
                found.append(text[start:i + 1])
        i += 1
    return found


def _tokens(source: str) -> list[tuple[int, str, int, int]]:
    """(type, string, start, end) of each token, offsets into ``source``; an f-string is one STRING token on every
    Python (3.12 cuts it into FSTRING_START ... FSTRING_END)."""
    starts = _line_starts(source)
    out: list[tuple[int, str, int, int]] = []
    depth, fstring_start = 0, 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        start = starts[token.start[0] - 1] + token.start[1]
        end = starts[token.end[0] - 1] + token.end[1]
        name = tokenize.tok_name[token.type]
        if name == "FSTRING_START":
            depth, fstring_start = depth + 1, (start if depth == 0 else fstring_start)
        elif name == "FSTRING_END":
            depth -= 1
            if depth == 0:
                out.append((tokenize.STRING, source[fstring_start:end], fstring_start, end))
        elif depth == 0:
            out.append((token.type, token.string, start, end))
    return out


def _compared(source: str) -> tuple[list[tuple[int, int]], list[str]]:
    """The spans of what the code compares or looks up (a comparison, an ``assert``'s test, a subscript, a dict's
    keys) and the strings in them: data, not text for the reader, as is a string containing one."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [], []
    starts = _line_starts(source)

    def offset(line: int, column: int) -> int:  # ast columns count UTF-8 bytes
        text = source[starts[line - 1]:starts[line]] if line < len(starts) else ""
        return starts[line - 1] + len(text.encode()[:column].decode())

    nodes: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            nodes.append(node)
        elif isinstance(node, ast.Assert):
            nodes.append(node.test)
        elif isinstance(node, ast.Subscript):
            nodes.append(node.slice)
        elif isinstance(node, ast.Dict):
            nodes += [key for key in node.keys if key is not None]
    texts = [c.value for n in nodes for c in ast.walk(n) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return [(offset(n.lineno, n.col_offset), offset(n.end_lineno or n.lineno, n.end_col_offset or 0))
            for n in nodes if hasattr(n, "lineno")], texts


def code_pieces(source: str) -> list[Piece]:
    """The comments and the strings a reader sees in ``source`` (a code cell), in order; none in the generated
    install block, nor markers such as ``### BEGIN SOLUTION`` or ``# noqa``."""
    generated = [(m.start(), m.end()) for m in _GENERATED.finditer(source)]
    data, compared_texts = _compared(source)
    try:
        tokens = [t for t in _tokens(source) if not any(a <= t[2] < b for a, b in generated)]
    except (tokenize.TokenError, SyntaxError):
        return []
    pieces: list[Piece] = []
    significant = [t for t in tokens if t[0] not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT,
                                                      tokenize.INDENT, tokenize.DEDENT)]
    for kind, text, start, end in tokens:  # comments
        if kind != tokenize.COMMENT or _KEEP_COMMENT.match(text[1:]) or not _LETTER.search(text):
            continue
        line_start = source.rfind("\n", 0, start) + 1
        own_line = not source[line_start:start].strip()
        last = pieces[-1] if pieces else None
        if own_line and last and last.kind == "comment" and last.shape == source[line_start:start] \
                and source[last.end:start] == "\n" + source[line_start:start]:
            pieces[-1] = Piece(last.start, end, last.text + "\n" + text[1:].strip(), "comment", last.shape)
        else:
            pieces.append(Piece(start, end, text[1:].strip(), "comment",
                                source[line_start:start] if own_line else "inline"))
    position = 0
    for is_string, group in itertools.groupby(significant, key=lambda token: token[0] == tokenize.STRING):
        literals = list(group)  # a run of adjacent string literals (or of other tokens)
        before = [t[1] for t in significant[max(position - 2, 0):position]]
        position += len(literals)
        if not is_string:
            continue
        run = [cast(re.Match[str], _LITERAL.match(t[1])) for t in literals]
        body = "".join(m["body"] for m in run)
        shown = body if "f" not in run[0]["prefix"].lower() else re.sub(r"\{[^{}]*\}", " ", body)
        figure = len(before) == 2 and (before[1] == "(" and before[0] in _FIGURE_CALLS
                                       or before[1] == "=" and before[0] in _FIGURE_KEYWORDS)
        same_kind = len({("f" in m["prefix"].lower(), "r" in m["prefix"].lower(), m["quote"]) for m in run}) == 1
        shown_to_reader = _PROSE.search(shown) or figure and _LETTER.search(body)
        compared = any(a <= literals[0][2] < b for a, b in data) or any(
            len(part) > 3 and part in text for part in re.split(r"\{[^{}]*\}", body) for text in compared_texts)
        if same_kind and "b" not in run[0]["prefix"].lower() and shown_to_reader and not compared:
            pieces.append(Piece(literals[0][2], literals[-1][3], body, "string",
                                run[0]["prefix"] + run[0]["quote"] + f" {len(literals)}"))
    return sorted(pieces, key=lambda piece: piece.start)


def _chunks(text: str, count: int) -> list[str]:
    """``text`` cut into at most ``count`` similar pieces, after a space or Chinese punctuation, never in a field."""
    if count <= 1:
        return [text]
    inside, breaks, depth = set(), [], 0
    for i, char in enumerate(text):
        depth += (char == "{") - (char == "}") if char in "{}" else 0
        if depth:
            inside.add(i)
        elif char in " ，。；：、）" and i + 1 < len(text) and i + 1 not in inside:
            breaks.append(i + 1)
    cuts: list[int] = []
    size = len(text) / count
    for n in range(1, count):
        best = min((b for b in breaks if not cuts or b > cuts[-1] + 1), key=lambda b: abs(b - n * size), default=None)
        if best is not None and best < len(text):
            cuts.append(best)
    cuts = sorted(set(cuts))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def written_back(source: str, piece: Piece, translation: str) -> str:
    """``translation`` written as ``piece``'s code: a comment on as many lines as the translation has; a string
    literal with the English prefix and quotes, over as many lines as the English literals took."""
    if piece.kind == "comment":
        lines = [line.strip() for line in translation.split("\n")]
        if piece.shape == "inline":  # a comment after code stays on its line
            return "# " + " ".join(lines)
        return ("\n" + piece.shape).join(f"# {line}" if line else "#" for line in lines)
    opening, count = piece.shape.rsplit(" ", 1)
    prefix = opening.rstrip("'\"")
    quote = opening[len(prefix):]
    chunks = _chunks(translation, int(count)) if int(count) > 1 and len(quote) == 1 else [translation]
    line_start = source.rfind("\n", 0, piece.start) + 1
    first_line_end = source.find("\n", piece.start)
    indent = " " * (piece.start - line_start)
    if len(chunks) > 1 and 0 <= first_line_end < piece.end:  # the English spanned lines: keep its layout
        second = source[first_line_end + 1:piece.end]
        indent = second[:len(second) - len(second.lstrip())]
        return ("\n" + indent).join(f"{prefix}{quote}{chunk}{quote}" for chunk in chunks)
    return f"{prefix}{quote}{''.join(chunks)}{quote}"
