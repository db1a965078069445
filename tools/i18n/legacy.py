"""PO files written before the translation units were blocks (2026-11: one entry per markdown cell or guide list,
``cell-id/altN`` per figure alt text), read as entries of today's units, so that ``update`` migrates a fork's or a
branch's translations without losing one.

An old entry is cut into the blocks of its English and of its translation (``tools/i18n/units.py``), paired in
order where their kinds line up (``difflib`` over the kinds; a block only the translation has goes with the block
before it); an alt text's entry becomes the entry of the string literal it was.

Usage: ``in_units(Catalog(), cells=[], fences=True)`` (a notebook's cells; a guide: ``cells=None``)
"""

from __future__ import annotations

import difflib
import json
import re

from babel.messages.catalog import Catalog, Message

from tools.i18n import units as units_module
from tools.i18n.units import as_text


def _pairs(english: str, translation: str, fences: bool) -> list[tuple[str, str]]:
    ours, theirs = (units_module.markdown_blocks(text, fences) for text in (english, translation))
    if not ours or not theirs:
        return [(english, translation)]
    matcher = difflib.SequenceMatcher(None, [p.shape for p in ours], [p.shape for p in theirs], autojunk=False)
    pairs: dict[int, list[int]] = {}
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        if tag in ("equal", "replace") and a2 - a1 == b2 - b1:
            pairs.update({a1 + k: [b1 + k] for k in range(a2 - a1)})
        elif b2 > b1:  # blocks only the translation has: with the one before (the first: the one after)
            pairs.setdefault(max(a1 - 1, 0), []).extend(range(b1, b2))
    out = []
    for a, bs in sorted(pairs.items()):
        if a < len(ours):
            start, end = theirs[min(bs)].start, theirs[max(bs)].end
            out.append((ours[a].text, translation[start:end]))
    return out


def _as_body(value: str, quote: str) -> str:
    """A string's value as written between ``quote``s (an alt text was kept as its value)."""
    return json.dumps(value, ensure_ascii=False)[1:-1].replace('\\"', '"').replace(quote, "\\" + quote) \
        if quote in value or "\\" in value or "\n" in value else value


def in_units(catalog: Catalog, cells: list[dict] | None, fences: bool) -> Catalog:
    """``catalog`` with every entry of the old form replaced by entries of today's units (the same object when
    there is none); ``cells``: the notebook's (None: a guide); ``fences``: whether its fenced code is translated."""
    from course_utils.figures import alt_literals

    code = {c["id"]: "".join(c["source"]) for c in cells or []}
    markdown = {c["id"] for c in cells or [] if c["cell_type"] == "markdown"}

    def is_old(message: Message) -> bool:
        if message.context and re.search(r"/alt\d+$", message.context):
            return True
        english = as_text(message.id)
        blocks = units_module.markdown_blocks(english, fences)
        in_markdown = cells is None or message.context in markdown
        return in_markdown and [b.text for b in blocks] != [english]

    old = [(m, False) for m in catalog if m.id and is_old(m)]
    old += [(m, True) for m in catalog.obsolete.values() if m.id and is_old(m)]
    if not old:
        return catalog
    for message, obsolete in old:
        msgid, string = as_text(message.id), as_text(message.string)
        if obsolete:
            catalog.obsolete.pop((msgid, message.context) if message.context else msgid, None)
        else:
            catalog.delete(message.id, context=message.context)
        if message.context and (alt := re.search(r"/alt(\d+)$", message.context)):
            cell_id = message.context[:alt.start()]
            literals = alt_literals(code.get(cell_id, ""))
            number = int(alt[1]) - 1
            pieces = {p.start: p for p in units_module.code_pieces(code.get(cell_id, ""))}
            piece = pieces.get(literals[number].start) if number < len(literals) else None
            english = piece.text if piece is not None and literals[number].text == msgid else msgid
            quote = piece.shape.split(" ")[0].lstrip("rRuUfF") if piece is not None else '"'
            pairs = [(english, _as_body(string, quote))]
            context: str | None = cell_id
        else:
            pairs, context = _pairs(msgid, string, fences), message.context
        for english, translation in pairs:
            new = Message(english, string=translation, context=context, flags=set(message.flags))
            if obsolete:
                catalog.obsolete[(english, context) if context else english] = new
            elif catalog.get(english, context=context) is None:
                catalog[english] = new
    return catalog
