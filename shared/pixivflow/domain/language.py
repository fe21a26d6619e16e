"""The novel language filter as PixivFlow does it: ``languageFilter`` ``chinese`` /
``non-chinese``, ``strictLanguageFilter``, ``detectLanguage``.

PixivFlow runs franc-min over ``"<title>\\n<body>"`` and corrects its answer with the kana / Han
shares. For CJK text franc's answer is decided by its script classes alone (no trigram model is
consulted for Han, kana or Hangul), so that part is reproduced exactly here:

* header lines (``Title:``, ``Author:``, ``Author ID:``, ``Tags:``, ``Download Tag:``,
  ``Original URL:``, ``Created:``) and ``---`` lines are dropped; fewer than 50 UTF-16 code units
  left is *inconclusive* (None);
* franc reads only the first 2048 code units and picks the script class with the most
  characters. Its Japanese class counts kana AND Han (U+3400–4DB5, U+4E00–9FAF), its Mandarin
  class Han alone, so a Chinese text with a single kana is ``jpn`` and a pure one ``cmn`` (ties go
  to ``cmn``, which franc lists first);
* ``refine``: ``jpn`` becomes ``cmn`` when over the WHOLE cleaned text kana/(kana+Han) < 0.10 and
  Han/length > 0.20.

Latin, Cyrillic and the rest go to franc's trigram models in PixivFlow; here a Latin-script text
is reported as ``eng`` and others as ``und``. Either way it is not Chinese, so the filter's
verdict is PixivFlow's; only ``{{language}}`` may name another Latin language there (README).

The body keeps Pixiv's markup (``[newpage]``, ``[[rb:漢字 > かな]]``): PixivFlow does not strip it,
so ruby readings add kana, as they do there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .patterns import LazyPattern

MIN_UNITS = 50  # fewer UTF-16 code units: inconclusive
FRANC_WINDOW = 2048  # franc-min looks at this many code units only
KANA_SHARE_MAX = 0.10
HAN_SHARE_MIN = 0.20
CHINESE_CODES = frozenset({"cmn", "yue", "wuu", "hak", "nan"})
NAMES = {"cmn": "Chinese (Mandarin)", "jpn": "Japanese", "eng": "English", "kor": "Korean", "spa": "Spanish",
         "fra": "French", "deu": "German", "rus": "Russian", "por": "Portuguese", "ita": "Italian", "und": "Undetermined"}
FILTERS = ("chinese", "non-chinese")

# Compiled on first use, for a shorter cold start: only a novel's language check needs them.
_HEADER_LINE = LazyPattern(r"^\s*(?:Title:|Author:|Author ID:|Tags:|Download Tag:|Original URL:|Created:).*$|^\s*---\s*$",
                          re.IGNORECASE | re.MULTILINE)
# franc-min's script classes (its data.js), the ones that matter for Pixiv novels.
_FRANC_HAN = LazyPattern(r"[\u2E80-\u2E99\u2E9B-\u2EF3\u2F00-\u2FD5\u3005\u3007\u3021-\u3029\u3038-\u303B"
                        r"\u3400-\u4DB5\u4E00-\u9FFF\uF900-\uFA6D\uFA70-\uFAD9]")
_FRANC_JAPANESE = LazyPattern(r"[\u3041-\u3096\u309D-\u309F\u30A1-\u30FA\u30FD-\u30FF\u31F0-\u31FF\u32D0-\u32FE"
                             r"\u3300-\u3357\uFF66-\uFF6F\uFF71-\uFF9D\u3400-\u4DB5\u4E00-\u9FAF]")
_FRANC_HANGUL = LazyPattern(r"[\u1100-\u11FF\u302E\u302F\u3131-\u318E\u3200-\u321E\u3260-\u327E\uA960-\uA97C"
                           r"\uAC00-\uD7A3\uD7B0-\uD7C6\uD7CB-\uD7FB\uFFA0-\uFFBE\uFFC2-\uFFDC]")
_LATIN = LazyPattern(r"[A-Za-z\u00AA\u00BA\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u024F\u1E00-\u1EFF]")
_CYRILLIC = LazyPattern(r"[\u0400-\u04FF]")
# refineFrancCode's own counts (narrower than franc's classes).
_KANA = LazyPattern(r"[\u3040-\u30FF\u31F0-\u31FF]")
_HAN = LazyPattern(r"[\u4E00-\u9FFF]")


@dataclass(frozen=True)
class Detected:
    code: str

    @property
    def is_chinese(self) -> bool:
        return self.code in CHINESE_CODES

    @property
    def name(self) -> str:
        return NAMES.get(self.code, self.code)

    @property
    def label(self) -> str:
        """``{{language}}``: ``"<name> (<code>)"``, as PixivFlow writes it."""
        return f"{self.name} ({self.code})"


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _head(text: str, units: int) -> str:
    """The first ``units`` UTF-16 code units (franc slices a JavaScript string)."""
    out, used = [], 0
    for ch in text:
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > units:
            break
        out.append(ch)
    return "".join(out)


def clean(text: str) -> str:
    return _HEADER_LINE.sub("", text).strip()


def franc_code(text: str) -> str:
    """franc-min's answer for ``text`` as far as its script classes decide it."""
    head = _head(text, FRANC_WINDOW)
    counts = [("cmn", len(_FRANC_HAN.findall(head))), ("jpn", len(_FRANC_JAPANESE.findall(head))),
              ("kor", len(_FRANC_HANGUL.findall(head))), ("eng", len(_LATIN.findall(head))),
              ("rus", len(_CYRILLIC.findall(head)))]
    best, top = "und", 0
    for code, count in counts:
        if count > top:  # strictly greater: the earlier class wins a tie, as in franc
            best, top = code, count
    return best


def refine(code: str, text: str) -> str:
    if code != "jpn":
        return code
    kana, han = len(_KANA.findall(text)), len(_HAN.findall(text))
    if kana + han and kana / (kana + han) < KANA_SHARE_MAX and han / max(1, _units(text)) > HAN_SHARE_MIN:
        return "cmn"
    return code


def detect(title: str, body: str) -> Detected | None:
    """The language of a novel (``"<title>\\n<body>"``), or None when inconclusive (< 50 units)."""
    text = clean(f"{title}\n{body}")
    if _units(text) < MIN_UNITS:
        return None
    return Detected(refine(franc_code(text), text))


@dataclass(frozen=True)
class Verdict:
    keep: bool
    detected: Detected | None
    reason: str | None = None  # why a novel is rejected (PixivFlow's messages)


def verdict(work_id: str, title: str, body: str, language_filter: str, *, strict: bool = False,
            detect_language: bool = True) -> Verdict:
    """Keep or reject one novel for ``languageFilter``. Inconclusive rejects only when strict;
    ``detectLanguage: false`` makes every novel inconclusive (our reading of PixivFlow, which
    does not say)."""
    found = detect(title, body) if detect_language else None
    if found is None:
        if strict:
            return Verdict(False, None, f"Novel {work_id} skipped: language filter inconclusive (required: {language_filter})")
        return Verdict(True, None)
    wanted = found.is_chinese if language_filter == "chinese" else not found.is_chinese
    if wanted:
        return Verdict(True, found)
    return Verdict(False, found, f"Novel {work_id} skipped: language filter mismatch (detected: {found.name}, "
                                 f"required: {language_filter})")
