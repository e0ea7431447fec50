"""Words of a text, lower-cased with accents removed: the folding every value is read with."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["folded_words"]

_WORD = re.compile(r"[^\W_]+")


def _fold(text: str) -> str:
    """Lower-case ``text`` with accents removed ("März" -> "marz")."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def folded_words(text: str) -> list[str]:
    """The words of ``text``, lower-cased with accents removed ("Zoë's" -> ["zoe", "s"])."""
    return _WORD.findall(_fold(text))
