// The console's only script: asks before a form marked data-confirm is sent, and refreshes
// the markdown preview of the file being edited. Every page works without it.
"use strict";

document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});

const form = document.getElementById("file-form");
const preview = document.getElementById("preview");
if (form && preview) {
  const text = form.querySelector("textarea");
  let timer = null;
  const refresh = async () => {
    const body = new FormData();
    body.append("text", text.value);
    const reply = await fetch("/admin/workspace/preview", { method: "POST", body });
    if (reply.ok) preview.innerHTML = await reply.text();
  };
  text.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, 400);
  });
  document.getElementById("preview-button").addEventListener("click", refresh);
}
