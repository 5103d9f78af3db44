// The chat page of `wick serve` (GET /): one HTML text with its CSS and JavaScript, nothing loaded
// from elsewhere. It streams answers from /v1/chat/completions, shows tokens/s, and can stop a reply
// (the request is aborted; the server cancels it). tests/serve/page.mjs drives it in Chromium.
#include "serve.h"

namespace wick::serve {

const char* chat_page() {
  return R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wick</title>
<style>
  :root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fafafa; --muted: #6e6e73; --line: #d2d2d7;
          --user: #e8eefc; --bot: #ffffff; --accent: #2f5bd3; }
  @media (prefers-color-scheme: dark) {
    :root { --fg: #e8e8ed; --bg: #161618; --muted: #98989d; --line: #3a3a3c; --user: #1f2a44; --bot: #232325; --accent: #6d8df0; }
  }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg);
         display: flex; flex-direction: column; height: 100vh; }
  header { display: flex; gap: 1em; align-items: baseline; padding: .6em 1em; border-bottom: 1px solid var(--line); }
  header b { font-size: 1.1em; }
  header span { color: var(--muted); font-size: .9em; }
  header label { margin-left: auto; color: var(--muted); font-size: .9em; }
  #max { width: 5em; }
  #key { width: 14em; }
  #log { flex: 1; overflow-y: auto; padding: 1em; display: flex; flex-direction: column; gap: .7em; }
  .msg { max-width: 48em; padding: .6em .9em; border-radius: .6em; white-space: pre-wrap; word-wrap: break-word;
         border: 1px solid var(--line); }
  .user { align-self: flex-end; background: var(--user); }
  .assistant { align-self: flex-start; background: var(--bot); }
  .error { color: #c62828; }
  form { display: flex; gap: .5em; padding: .8em 1em; border-top: 1px solid var(--line); }
  textarea { flex: 1; resize: none; height: 3.2em; font: inherit; padding: .5em; border-radius: .4em;
             border: 1px solid var(--line); background: var(--bot); color: var(--fg); }
  button { font: inherit; padding: 0 1.2em; border-radius: .4em; border: 1px solid var(--accent);
           background: var(--accent); color: white; cursor: pointer; }
  button:disabled { opacity: .4; cursor: default; }
  #stop { background: transparent; color: var(--accent); }
  #stats { color: var(--muted); font-size: .85em; padding: 0 1em .6em; min-height: 1.4em; }
</style>
</head>
<body>
<header><b>wick</b><span id="model">connecting...</span>
  <label>max tokens <input id="max" type="number" value="512" min="1"></label>
  <input id="key" type="password" placeholder="API key (if the server has one)" autocomplete="off"></header>
<div id="log"></div>
<div id="stats"></div>
<form id="form">
  <textarea id="input" placeholder="Message (Enter sends, Shift+Enter a new line)"></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const conversation = [];
let controller = null;
$("key").value = localStorage.getItem("wick-key") || "";
$("key").addEventListener("change", () => { localStorage.setItem("wick-key", $("key").value); loadModel(); });

function headers() {
  const h = { "Content-Type": "application/json" };
  if ($("key").value) h["Authorization"] = "Bearer " + $("key").value;
  return h;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    const j = await r.json();
    $("model").textContent = r.ok ? j.data[0].id : (j.error ? j.error.message : r.statusText);
  } catch (e) { $("model").textContent = String(e); }
}

function add(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("log").appendChild(div);
  $("log").scrollTop = $("log").scrollHeight;
  return div;
}

function busy(on) { $("send").disabled = on; $("stop").disabled = !on; }

async function send(text) {
  conversation.push({ role: "user", content: text });
  add("user", text);
  const out = add("assistant", "");
  controller = new AbortController();
  busy(true);
  let answer = "", tokens = 0, first = 0, finish = "";
  const start = performance.now();
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), signal: controller.signal,
      body: JSON.stringify({ messages: conversation, stream: true, stream_options: { include_usage: true },
                             max_tokens: Number($("max").value) || undefined }),
    });
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      throw new Error(j.error ? j.error.message : r.status + " " + r.statusText);
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!block.startsWith("data: ")) continue;
        const data = block.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        if (j.usage) tokens = j.usage.completion_tokens;
        for (const c of j.choices) {
          if (c.delta && c.delta.content) {
            if (!first) first = performance.now();
            answer += c.delta.content;
            out.textContent = answer;
            $("log").scrollTop = $("log").scrollHeight;
          }
          if (c.finish_reason) finish = c.finish_reason;
        }
        const seconds = (performance.now() - (first || start)) / 1000;
        $("stats").textContent = answer.length + " characters, " + seconds.toFixed(1) + " s";
      }
    }
    const seconds = (performance.now() - first) / 1000;
    $("stats").textContent = tokens + " tokens, " + (seconds > 0 ? (tokens / seconds).toFixed(1) : "-") +
        " tokens/s, first token after " + ((first - start) / 1000).toFixed(2) + " s (" + finish + ")";
  } catch (e) {
    if (e.name === "AbortError") {
      $("stats").textContent = "stopped";
    } else {
      out.classList.add("error");
      out.textContent = answer + (answer ? "\n" : "") + String(e.message || e);
      $("stats").textContent = "error";
    }
  } finally {
    conversation.push({ role: "assistant", content: answer });
    controller = null;
    busy(false);
  }
}

$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
loadModel();
</script>
</body>
</html>
)HTML";
}

}  // namespace wick::serve
