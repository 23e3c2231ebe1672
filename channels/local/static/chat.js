// The web chat page: redraws the person's recent history, streams replies over a WebSocket,
// keeps messages typed while disconnected pending until the server confirms them, and shows
// a reply's buttons, whose presses go back over the WebSocket, and a typing indicator from
// a message's acceptance until the reply's first words arrive.
"use strict";

const params = new URLSearchParams(location.search);
const name = params.get("name") || localStorage.getItem("krill-name") || "web";
const token = params.get("token");
const auth = token ? `&token=${encodeURIComponent(token)}` : "";
const log = document.getElementById("log");
const state = document.getElementById("state");
const form = document.getElementById("form");
const input = document.getElementById("text");
const bubbles = new Map(); // reply id -> its bubble
const pending = new Map(); // message_id -> {text, el}, until the server confirms it
let ws = null;
let retryMs = 1000;
let typingTimer = null;
let thinking = null; // the typing indicator while shown
let streaming = false; // a reply is streaming in: it shows Krill is answering
let acceptedMeanwhile = false; // a message was accepted while a reply streamed

function showThinking() {
  if (!thinking) {
    thinking = document.createElement("div");
    thinking.className = "msg bot thinking";
    thinking.dataset.testid = "typing-indicator";
    thinking.setAttribute("role", "status");
    thinking.setAttribute("aria-label", "Krill is thinking");
    for (let i = 0; i < 3; i++) thinking.appendChild(document.createElement("span"));
  }
  log.appendChild(thinking); // always last, below the newest message
  log.scrollTop = log.scrollHeight;
}

function hideThinking() {
  if (thinking) thinking.remove();
}

document.getElementById("who").textContent = "as " + name;

function add(cls, text, html) {
  const el = document.createElement("div");
  el.className = "msg " + cls;
  if (html === undefined) el.textContent = text;
  else el.innerHTML = html; // rendered and sanitized by the server (channels/local/markup.py)
  log.appendChild(el);
  log.scrollTop = log.scrollHeight;
  return el;
}

function connected() {
  return ws !== null && ws.readyState === WebSocket.OPEN;
}

function setOnline(online, text) {
  document.body.classList.toggle("offline", !online);
  state.textContent = text;
}

function transmit(id) {
  if (connected()) ws.send(JSON.stringify({ text: pending.get(id).text, message_id: id }));
}

function newId() {
  return Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 10);
}

function send(text) {
  const id = newId();
  pending.set(id, { text, el: add("me pending", text) });
  transmit(id);
}

function showButtons(el, id, rows) {
  el.querySelector(".choices")?.remove();
  if (!rows.length) return;
  const box = document.createElement("div");
  box.className = "choices";
  for (const row of rows) {
    const line = document.createElement("div");
    line.className = "choice-row";
    for (const b of row) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "choice " + b.style;
      button.textContent = b.label;
      button.dataset.testid = "choice-button";
      button.addEventListener("click", () => press(box, id, b.data));
      line.appendChild(button);
    }
    box.appendChild(line);
  }
  el.appendChild(box);
}

function press(box, id, data) {
  if (!connected()) { add("sys", "not connected; press again once it is"); return; }
  for (const b of box.querySelectorAll("button")) b.disabled = true;
  ws.send(JSON.stringify({ press: data, press_id: newId(), message_id: id }));
}

function onEvent(e) {
  if (e.type === "thinking") {
    if (streaming) acceptedMeanwhile = true; // its turn comes after this reply
    else showThinking();
    return;
  }
  if (e.type === "idle") {
    streaming = acceptedMeanwhile = false;
    hideThinking();
    return;
  }
  if (e.type === "typing") {
    state.textContent = "Krill is typing…";
    clearTimeout(typingTimer);
    typingTimer = setTimeout(() => { state.textContent = "connected"; }, 4000);
    return;
  }
  if (e.type === "received") {
    const item = pending.get(e.message_id);
    if (item) { item.el.classList.remove("pending"); pending.delete(e.message_id); }
    return;
  }
  if (e.type === "error") { add("sys", e.text); return; }
  if (e.type === "pressed") {
    // A press that counted shows in the message's edit; one that did not says why.
    if (e.result !== "done") add("sys", e.text).dataset.testid = "press-answer";
    return;
  }
  hideThinking(); // the first words of the reply are here
  let el = bubbles.get(e.id);
  if (!el) { el = add("bot", ""); bubbles.set(e.id, el); }
  el.innerHTML = e.html;
  if (e.buttons) showButtons(el, e.id, e.buttons);
  el.classList.toggle("preview", e.type === "preview");
  streaming = e.type === "preview";
  if (e.type === "message") {
    state.textContent = "connected";
    if (acceptedMeanwhile) { acceptedMeanwhile = false; showThinking(); }
  }
  log.scrollTop = log.scrollHeight;
}

function connect() {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  ws = new WebSocket(`${proto}://${location.host}/ws/chat?name=${encodeURIComponent(name)}${auth}`);
  ws.onopen = () => {
    retryMs = 1000;
    setOnline(true, "connected");
    // A resend of something the server already had counts once (it dedupes by message_id).
    for (const id of pending.keys()) transmit(id);
  };
  ws.onclose = () => {
    streaming = acceptedMeanwhile = false;
    hideThinking(); // nothing tells this page any more when the reply starts
    setOnline(false, "disconnected, retrying…");
    setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 5000);
  };
  ws.onmessage = (ev) => onEvent(JSON.parse(ev.data));
}

async function loadHistory() {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  try {
    const resp = await fetch(`/api/history?name=${encodeURIComponent(name)}`, { headers });
    if (!resp.ok) return;
    for (const m of (await resp.json()).messages) {
      if (m.speaker === "assistant") add("bot", m.text, m.html);
      else add("me", m.text);
    }
  } catch (err) {
    add("sys", "could not load earlier messages");
  }
}

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  send(text);
});
input.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    form.requestSubmit();
  }
});

setOnline(false, "connecting…");
loadHistory().then(connect);
