// The language switch keeps the section being read (tools/site/). Both editions have the same sections in the same
// order (the Chinese is translated cell by cell), so the switch carries the section's number, "#section-3", and the
// twin page turns that number back into its own heading's anchor.
(() => {
  const sections = () => [...document.querySelectorAll("article section[id]")];
  const toggle = document.querySelector("a.course-language-switch");
  let reading = 0;  // the last section whose heading is at or above where a link puts a heading
  const update = () => {
    if (document.activeElement === toggle) return;  // focusing the switch in its sticky header scrolls the page
    const top = parseFloat(getComputedStyle(document.documentElement).scrollPaddingTop) || 0;
    reading = sections().filter((section) => section.getBoundingClientRect().top <= top + 8).length - 1;
  };
  addEventListener("scroll", update, { passive: true });
  toggle?.addEventListener("click", () => {
    toggle.hash = reading > 0 ? `section-${reading}` : "";
  });
  const asked = /^#section-(\d+)$/.exec(location.hash);
  const section = asked && sections()[Number(asked[1])];
  if (section) {
    history.replaceState(null, "", `#${section.id}`);
    section.scrollIntoView();
  }
  update();
})();
