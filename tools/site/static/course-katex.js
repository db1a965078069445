// Typeset the formulas Sphinx wrote as \( ... \) and \[ ... \] in its .math elements, with the vendored KaTeX
// (tools/site/extension.py adds this script, after katex.min.js and auto-render.min.js, to pages with maths).
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll(".math").forEach(function (element) {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\[", right: "\\]", display: true },
        { left: "\\(", right: "\\)", display: false },
      ],
      throwOnError: false,
    });
  });
});
