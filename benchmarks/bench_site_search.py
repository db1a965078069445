"""How well the website's Chinese search finds the course's own words, by word splitter: measured on the built pages.

Sphinx indexes a Chinese page by the words its splitter cuts the text into, and the browser looks a query up as one
word (a query of Chinese characters is not cut again). So a term is found on a page only if the splitter made it a
word there. For every term of ``translations/zh/GLOSSARY.md`` that occurs in the Chinese pages' articles, this counts
the pages that contain it and the pages where the splitter made it a word, for:

- ``none``: Sphinx without jieba installed (its Chinese search then indexes no Chinese word at all);
- ``jieba``: jieba's own dictionary, what Sphinx uses when jieba is installed;
- ``jieba+glossary``: jieba with the course's glossary as its user dictionary (``tools/site/extension.py``).

It prints, per splitter: the terms found on every page that has them, the page hits found, the distinct words in the
index, and the time to cut all pages; then the terms each jieba variant misses somewhere.

Usage: ``make site`` first, then ``.venv/bin/python -m benchmarks.bench_site_search [--site build/site]``
"""

from __future__ import annotations

import argparse
import html
import re
import tempfile
import time
from pathlib import Path

from tools.site.extension import glossary_terms

ROOT = Path(__file__).resolve().parents[1]
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def article_texts(site: Path) -> dict[str, str]:
    """The article text of each Chinese page (what Sphinx indexes: no theme, no scripts)."""
    texts = {}
    for page in sorted((site / "zh").glob("*.html")):
        match = re.search(r'<article class="bd-article">(.*?)</article>', page.read_text(encoding="utf-8"), re.DOTALL)
        if match:
            body = re.sub(r"<(script|style)\b.*?</\1>", " ", match[1], flags=re.DOTALL)
            texts[page.stem] = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return texts


def words_by_page(texts: dict[str, str], cut: object) -> tuple[dict[str, set[str]], float]:
    start = time.perf_counter()
    words = {name: {w for w in cut(text) if CHINESE.search(w)} for name, text in texts.items()}  # type: ignore[operator]
    return words, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "build" / "site")
    args = parser.parse_args()
    texts = article_texts(args.site)
    if not texts:
        raise SystemExit(f"No Chinese pages in {args.site / 'zh'}: run `make site` first.")
    terms = [term for term in glossary_terms() if any(term in text for text in texts.values())]
    truth = {term: {name for name, text in texts.items() if term in text} for term in terms}

    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    start = time.perf_counter()
    jieba.initialize()
    load = time.perf_counter() - start
    results = {"none": words_by_page(texts, lambda text: [])}
    results["jieba"] = words_by_page(texts, jieba.cut_for_search)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as userdict:
        userdict.write("\n".join(glossary_terms()) + "\n")
    jieba.load_userdict(userdict.name)
    results["jieba+glossary"] = words_by_page(texts, jieba.cut_for_search)

    hits = sum(len(pages) for pages in truth.values())
    print(f"{len(texts)} Chinese pages, {sum(map(len, texts.values()))} characters of article text; "
          f"{len(terms)} glossary terms occur in them, on {hits} (term, page) pairs; jieba's dictionary: {load:.2f} s")
    print(f"{'splitter':15} {'terms found on every page':>26} {'page hits found':>16} {'distinct words':>15} "
          f"{'cut all':>8}")
    for name, (words, seconds) in results.items():
        complete = sum(all(t in words[p] for p in truth[t]) for t in terms)
        found = sum(t in words[p] for t in terms for p in truth[t])
        distinct = len(set().union(*words.values()))
        print(f"{name:15} {complete:>14} of {len(terms):<3} ({complete / len(terms):4.0%}) {found:>7} "
              f"({found / hits:4.0%}) {distinct:>15} {seconds:>7.2f}s")
    for name in ("jieba", "jieba+glossary"):
        words = results[name][0]
        missed = [t for t in terms if not all(t in words[p] for p in truth[t])]
        print(f"missed on some page by {name}:", "、".join(missed) or "none")


if __name__ == "__main__":
    main()
