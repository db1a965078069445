// The site's search (html_search_scorer in tools/site/conf.py: Sphinx puts this after searchtools.js, on search.html).
// Sphinx's scores, with one change: Sphinx scores a page by its best query word alone and breaks ties by name, so
// "saved tensor" listed 01 and 02 before the saved-tensor chapter. Here a page's words add up (15 for each word in
// one of its titles, 5 in its text, as Sphinx counts them), with 20 more when its title holds every word, 10 when one
// of its section titles does.
const isChinese = (word) => /\p{Script=Han}/u.test(word);
const stem = (word) => (isChinese(word) ? word : new Stemmer().stemWord(word));
const queryWords = () => (new URLSearchParams(location.search).get("q") || "").toLowerCase()
  .split(/[\s\-_.]+/).filter((word) => word.length > 2 || isChinese(word)).map(stem);
const holdsEvery = (title, words) => {
  const titleWords = title.toLowerCase().split(/[^\p{L}\p{N}]+/u).map(stem);
  return words.every((word) => titleWords.includes(word) || (isChinese(word) && title.includes(word)));
};
const lists = (table, word, file) => [table[word] ?? []].flat().includes(file);

var Scorer = {
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
  score: ([docname, title, anchor, descr, score]) => {
    const words = queryWords();
    const index = Search._index;
    const file = index.docnames.indexOf(docname);
    const sections = Object.entries(index.alltitles).filter(([, found]) => found.some(([f]) => f === file));
    const added = words.reduce((sum, word) => sum + (lists(index.titleterms, word, file) ? Scorer.title
      : lists(index.terms, word, file) ? Scorer.term : 0), 0);
    const titles = (holdsEvery(index.titles[file] ?? "", words) ? 20 : 0)
      + (sections.some(([section]) => holdsEvery(section, words)) ? 10 : 0);
    return words.length ? Math.max(score, added + titles) : score;
  },
};

// A result's snippet from the page's article, not from the theme's buttons and table of contents around it
// (searchtools.js reads the text of [role=main], the theme's whole main column).
const themeHtmlToText = Search.htmlToText;
Search.htmlToText = (htmlString, anchor) => {
  const page = new DOMParser().parseFromString(htmlString, "text/html");
  page.querySelector('[role="main"]')?.replaceChildren(...page.querySelectorAll("article"));
  return themeHtmlToText(page.documentElement.outerHTML, anchor);
};
