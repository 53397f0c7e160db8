// A reference-table cell whose equation is wider than its column scrolls sideways
// (tables.css). A scrolling region must be reachable from the keyboard (WCAG 2.1.1, axe's
// scrollable-region-focusable): each cell that overflows once MathJax has typeset the page, or
// after a resize, gets tabindex="0" (arrow keys then scroll it) and a name; one that fits has
// neither, so the tab order holds no dead stops.
(function () {
  function markScrollableCells() {
    document.querySelectorAll("table.reference-table td").forEach(function (cell) {
      if (cell.scrollWidth > cell.clientWidth + 1) {
        cell.setAttribute("tabindex", "0");
        cell.setAttribute("role", "region");
        cell.setAttribute("aria-label", "equation (scrolls sideways)");
      } else if (cell.getAttribute("tabindex") === "0") {
        cell.removeAttribute("tabindex");
        cell.removeAttribute("role");
        cell.removeAttribute("aria-label");
      }
    });
  }
  function afterTypeset() {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(markScrollableCells);
    } else {
      markScrollableCells();
    }
  }
  if (document.readyState === "complete") afterTypeset();
  else window.addEventListener("load", afterTypeset);
  window.addEventListener("resize", markScrollableCells);
})();
