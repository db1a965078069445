// The language switch keeps the section being read (tools/site/). Both editions have the same sections in the same
// order (the Chinese is translated cell by cell), so the switch carries the section's number, "#section-3", and the
// twin page turns that number back into its own heading's anchor.
(() => {
  const sections = () => [...document.querySelectorAll("article section[id]")];
  const reading = () => {  // the last section whose heading is at or above the top of the window
    const top = document.querySelector(".bd-header-article")?.getBoundingClientRect().bottom ?? 0;
    return sections().filter((section) => section.getBoundingClientRect().top <= top + 8).length - 1;
  };
  const toggle = document.querySelector("a.course-language-switch");
  toggle?.addEventListener("click", () => {
    const index = reading();
    toggle.hash = index > 0 ? `section-${index}` : "";
  });
  const asked = /^#section-(\d+)$/.exec(location.hash);
  const section = asked && sections()[Number(asked[1])];
  if (section) {
    history.replaceState(null, "", `#${section.id}`);
    section.scrollIntoView();
  }
})();
