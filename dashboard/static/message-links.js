// Each queue and DLQ card of the main page opens its message list (messages.html). Kept
// apart from dashboard.js: the cards are drawn there, the links are added here, after each
// redraw, by watching the card lists.
"use strict";

function addMessageLinks() {
  for (const card of document.querySelectorAll(".card.queue, .card.dlq")) {
    const title = card.querySelector(".card-head h3");
    if (!title || title.querySelector("a.open")) continue;
    const name = card.dataset.queue || card.dataset.dlq;
    const account = (title.querySelector(".account") || {}).textContent || "";
    const link = document.createElement("a");
    link.className = "open";
    link.href = `/messages?${new URLSearchParams({ account, queue: name })}`;
    link.textContent = card.classList.contains("dlq") ? "messages & replay →" : "messages →";
    title.appendChild(link);
  }
}

for (const id of ["queues", "dlqs"]) {
  const list = document.getElementById(id);
  if (list) new MutationObserver(addMessageLinks).observe(list, { childList: true });
}
addMessageLinks();
