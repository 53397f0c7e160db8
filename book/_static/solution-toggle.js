// Exercise solutions are sphinx-exercise dropdowns, made collapsible by sphinx-togglebutton.
// Their title is mostly a link ("Solution to Exercise N"); togglebutton only handles clicks
// on the title box or its button, so a click on the title's text followed the link instead
// of opening the solution (and could toggle a different one). Any click in the title of a
// dropdown now opens or closes that dropdown.
document.addEventListener("click", function (event) {
  var title = event.target.closest && event.target.closest(".admonition.dropdown > .admonition-title");
  if (!title || event.target.closest(".toggle-button")) return;
  var button = title.querySelector(".toggle-button");
  if (!button) return;
  event.preventDefault();
  event.stopPropagation();
  button.click();
}, true);
