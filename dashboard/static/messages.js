// The message list of one queue (messages.html): PeekMessages through the dashboard server
// (/api/messages), and a replay of a DLQ's message to the queue it came from (/api/replay).
"use strict";

const params = new URLSearchParams(location.search);
const account = params.get("account") || "";
const queue = params.get("queue") || "";
let nextToken = null;

function iso(ms) {
  return ms ? new Date(Number(ms)).toISOString().replace(".000Z", "Z") : "";
}

function cell(text, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  td.textContent = text === undefined || text === null ? "" : String(text);
  return td;
}

function sourceName(arn) {
  return arn ? arn.split(":").slice(-1)[0] : "";
}

async function replay(button, message) {
  const a = message.Attributes || {};
  button.disabled = true;
  const note = button.parentElement.appendChild(document.createElement("div"));
  try {
    const response = await fetch("/api/replay", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        account, queue,
        partition: Number(a.KqsPartition), offset: Number(a.KqsOffset),
        destination_arn: a.DeadLetterQueueSourceArn,
      }),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
    note.className = "replayed";
    note.textContent = `replayed to ${sourceName(a.DeadLetterQueueSourceArn)}`;
  } catch (error) {
    note.className = "failed";
    note.textContent = `not replayed: ${error.message}`;
    button.disabled = false;
  }
}

function row(message) {
  const a = message.Attributes || {};
  const tr = document.createElement("tr");
  tr.dataset.messageId = message.MessageId;
  tr.appendChild(cell(iso(a.SentTimestamp)));
  const state = cell("");
  const badge = state.appendChild(document.createElement("span"));
  badge.className = `state ${a.KqsStatus}`;
  badge.textContent = a.KqsStatus + (a.KqsVisibleAtTimestamp ? ` until ${iso(a.KqsVisibleAtTimestamp)}` : "");
  tr.appendChild(state);
  tr.appendChild(cell(a.ApproximateReceiveCount ?? "–"));
  tr.appendChild(cell(message.MessageId, "id"));
  const more = Number(a.KqsBodyLength) > (message.Body || "").length ? "…" : "";
  tr.appendChild(cell((message.Body || "") + more, "body"));
  tr.appendChild(cell(sourceName(a.DeadLetterQueueSourceArn), "source"));
  const action = cell("");
  if (a.DeadLetterQueueSourceArn) {
    const button = action.appendChild(document.createElement("button"));
    button.type = "button";
    button.className = "replay";
    button.textContent = "Replay to source";
    button.addEventListener("click", () => replay(button, message));
  }
  tr.appendChild(action);
  return tr;
}

async function load(append) {
  const form = document.getElementById("filters");
  const query = new URLSearchParams({ account, queue, status: form.status.value, order: form.order.value });
  if (append && nextToken) query.set("token", nextToken);
  const status = document.getElementById("status");
  try {
    const response = await fetch(`/api/messages?${query}`, { cache: "no-store" });
    const page = await response.json();
    if (!response.ok) throw new Error(page.error || `HTTP ${response.status}`);
    const rows = document.getElementById("rows");
    if (!append) rows.replaceChildren();
    for (const message of page.messages) rows.appendChild(row(message));
    nextToken = page.next_token;
    document.getElementById("more").hidden = !nextToken;
    document.getElementById("none").hidden = rows.children.length > 0;
    const days = (page.retention_s / 86400).toFixed(2);
    document.getElementById("retention").textContent =
      `Retention ${page.retention_s} s (${days} days)` +
      (page.topic_retention_ms ? ` · topic retention.ms ${page.topic_retention_ms}` : "") +
      ` · a replay can reach back to ${iso(page.oldest_available_ms)}`;
    status.className = "status";
    status.textContent = `${rows.children.length} messages · ${page.queue_url}`;
    document.body.dataset.loaded = String(rows.children.length);
  } catch (error) {
    status.className = "status error";
    status.textContent = `cannot list messages: ${error.message}`;
  }
}

document.getElementById("queue").firstChild.textContent = queue;
document.getElementById("account").textContent = account;
document.getElementById("filters").addEventListener("change", () => load(false));
document.getElementById("more").addEventListener("click", () => load(true));
load(false);
