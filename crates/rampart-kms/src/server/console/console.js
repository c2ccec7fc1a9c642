// Rampart key manager console: progressive enhancement only. Every page
// works without this file; with it, destructive buttons ask first.
"use strict";
document.addEventListener("submit", (event) => {
  const button = event.submitter;
  const question = button && button.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
