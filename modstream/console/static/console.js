// The review console's only script: reveal blurred evidence, an image or a video frame (the
// server logs it first), and keyboard shortcuts. No build step; CSP allows this file and nothing inline.
"use strict";

function csrfToken() {
  return document.querySelector('meta[name="csrf-token"]').content;
}

async function reveal(button) {
  const response = await fetch(button.dataset.reveal, {
    method: "POST",
    headers: {"X-CSRF-Token": csrfToken()},
    credentials: "same-origin",
  });
  if (response.ok) {  // revealed only once the access log has it
    button.closest("figure").classList.remove("blurred");
    button.remove();
  }
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.reveal");
  if (button) reveal(button);
});

const OUTCOME_KEYS = {a: "ALLOW", r: "RESTRICT", b: "BLOCK", p: "PENDING"};

document.addEventListener("keydown", (event) => {
  const form = document.getElementById("decide");
  if (!form || event.ctrlKey || event.metaKey || event.altKey) return;
  if (["TEXTAREA", "INPUT", "SELECT"].includes(event.target.tagName) && event.key !== "Enter") return;
  if (event.target.tagName === "TEXTAREA") return;
  const outcome = OUTCOME_KEYS[event.key];
  if (outcome) {
    document.getElementById(`outcome-${outcome}`).checked = true;
    event.preventDefault();
  } else if (event.key === "v") {
    const button = document.querySelector("button.reveal");
    if (button) reveal(button);
  } else if (event.key === "Enter" && form.querySelector('input[name="outcome"]:checked')) {
    event.preventDefault();
    form.requestSubmit();
  }
});
