"""The course's messages in the learner's language: ``_()`` translates, ``N_()`` marks a string to translate later.

The language is English unless ``COURSE_LANG=zh`` is set or a notebook calls ``setup_notebook(lang="zh")``. The
translations are the gettext catalogue ``locale/<lang>/LC_MESSAGES/course.mo`` (``python -m tools.i18n.messages
compile``); a message without a translation falls back to English.

Usage::

    from course_utils.machinery.messages import _, N_
    TITLE = N_("Write a hook that doubles the gradient.")   # defined at import: marked, translated when shown
    print(_(TITLE))
    print(_("{count} hook(s) are still on the model.").format(count=2))
"""

from __future__ import annotations

import contextlib
import functools
import gettext
import importlib.resources
import os
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from course_utils.machinery.layout import SETTINGS

__all__ = ["LANGUAGES", "DOMAIN", "_", "N_", "Text", "language", "set_language", "in_language", "catalogue",
           "in_every_language", "width", "ljust", "rjust"]

LANGUAGES: tuple[str, ...] = SETTINGS.languages  # course_utils/course.toml
DOMAIN = "course"
_LANG_ENV = "COURSE_LANG"

_chosen: str | None = None  # set_language()'s choice; None: read COURSE_LANG


def _checked(lang: str, where: str) -> str:
    normal = lang.strip().lower().replace("-", "_").split("_")[0]  # zh_CN, zh-Hans -> zh
    if normal not in LANGUAGES:
        raise ValueError(f"{where}={lang!r} is not a language of the course: use one of {', '.join(LANGUAGES)}.")
    return normal


def _from_env() -> str:
    from_env = os.environ.get(_LANG_ENV, "").strip()
    return _checked(from_env, _LANG_ENV) if from_env else "en"


def language() -> str:
    """The language messages are shown in: ``set_language()``'s choice, else ``COURSE_LANG``, else ``"en"``."""
    if _chosen is not None:
        return _chosen
    try:
        return _from_env()
    except ValueError:
        return "en"  # a bad COURSE_LANG must never break check(); set_language() reports it


def set_language(lang: str | None) -> str:
    """Show messages in ``lang`` (``"en"`` or ``"zh"``); ``None`` goes back to ``COURSE_LANG``. Returns the language.

    Usage: ``set_language("zh")``
    """
    global _chosen
    if lang is None:
        _chosen = None
        return _from_env()
    if not isinstance(lang, str):
        raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, got {lang!r}.")
    _chosen = _checked(lang, "lang")
    return _chosen


@contextlib.contextmanager
def in_language(lang: str | None) -> Iterator[None]:
    """Messages in ``lang`` inside the block (``None``: no change), the previous choice afterwards.

    Usage: ``with in_language("zh"): text = _(message)``
    """
    global _chosen
    before = _chosen
    try:
        if lang is not None:
            set_language(lang)
        yield
    finally:
        _chosen = before


@functools.cache
def catalogue(lang: str) -> gettext.NullTranslations:
    """The compiled catalogue of ``lang`` (English: none, every message as written)."""
    with importlib.resources.as_file(importlib.resources.files("course_utils.machinery") / "locale") as path:
        return gettext.translation(DOMAIN, localedir=str(path), languages=[lang], fallback=True)


def _(message: str) -> str:
    """``message`` in the current language (English when it has no translation; ``""`` stays ``""``, never the
    catalogue's header)."""
    if not message:
        return message
    return catalogue(language()).gettext(message)


def N_(message: str) -> str:
    """Mark ``message`` for translation without translating it now (strings defined at import time)."""
    return message


def width(text: str) -> int:
    """Columns ``text`` takes in a monospaced font (a Chinese character takes two): what a table of translated words
    is laid out by."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def ljust(text: str, columns: int) -> str:
    """``text`` padded with spaces on the right to ``columns`` display columns (:func:`width`)."""
    return text + " " * max(0, columns - width(text))


def rjust(text: str, columns: int) -> str:
    """``text`` padded with spaces on the left to ``columns`` display columns (:func:`width`)."""
    return " " * max(0, columns - width(text)) + text


@dataclass(frozen=True, init=False)
class Text:
    """A message translated only when it is shown: ``str(text)`` is ``_(msgid).format(**fields)`` in the language of
    that moment (a field that is itself a :class:`Text` is translated too).

    Usage: ``Text(N_("{count} hook(s) are still on the model."), count=2)``
    """

    msgid: str
    fields: tuple[tuple[str, Any], ...]

    def __init__(self, msgid: str, **fields: Any) -> None:
        object.__setattr__(self, "msgid", msgid)
        object.__setattr__(self, "fields", tuple(fields.items()))

    def __str__(self) -> str:
        if not self.fields:
            return _(self.msgid)
        return _(self.msgid).format(**{name: str(value) if isinstance(value, Text) else value
                                       for name, value in self.fields})


def in_every_language(message: str) -> tuple[str, ...]:
    """``message`` in each language of the course, English first, each once (to recognise text written earlier
    in another language, e.g. a learner-edition stub).

    Usage: ``any(phrase in text for phrase in in_every_language(STUB_MESSAGE))``
    """
    return tuple(dict.fromkeys(catalogue(lang).gettext(message) if message else message for lang in LANGUAGES))
