// cove's web client: one module, no framework, no build step.
// Model output only ever reaches the DOM as textContent, or as HTML the server sanitised.

import { approvalCards } from "./approvals.js";
import { askText, confirmAction } from "./dialog.js";
import { showFigures } from "./figures.js";
import { follow } from "./follow.js";
import { settingsPanel } from "./settings.js";
import { shortcuts } from "./shortcuts.js";
import { sidebar } from "./sidebar.js";

const $ = (selector, root = document) => root.querySelector(selector);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

async function api(method, url, body, headers = {}) {
  const init = { method, headers: { ...headers }, credentials: "same-origin" };
  if (body !== undefined) {
    if (body instanceof Blob) {
      init.body = body;
    } else {
      init.body = JSON.stringify(body);
      init.headers["content-type"] = "application/json";
    }
  }
  const response = await fetch(url, init);
  if (!response.ok) {
    let message = `${response.status}`;
    try { message = (await response.json()).message || message; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response.status === 204 ? null : response.json();
}

let noticesShown = 0;  // counts notices, so a late reply clears only its own

function notice(text, isError = false) {
  const node = $("#notice");
  if (!node) return;
  noticesShown += 1;
  node.textContent = text;
  node.classList.toggle("error", isError);
}

// ---- the conversation list ---------------------------------------------------------------

// The page's own dialogs for renaming and deleting, in the list and in the chat view.
const askTitle = (current) => askText({ title: "Rename conversation", label: "Title", value: current });
const confirmDelete = (title) => confirmAction({
  title: "Delete conversation?",
  message: `“${title}”, its history and its files will be deleted. This cannot be undone.`,
  confirmText: "Delete",
  danger: true,
});

function listPage() {
  $("#rows").addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    const row = button.closest("tr");
    const id = row.dataset.id;
    const current = $(".title", row).textContent;
    if (button.dataset.action === "delete") {
      if (!await confirmDelete(current)) return;
      try { await api("DELETE", `/api/conversations/${id}`); row.remove(); notice(""); }
      catch (error) { notice(error.message, true); }
    } else if (button.dataset.action === "rename") {
      const title = await askTitle(current);
      if (!title) return;
      try {
        $(".title", row).textContent = (await api("PATCH", `/api/conversations/${id}`, { title })).title;
        notice("");
      } catch (error) { notice(error.message, true); }
    }
  });
  if (new URLSearchParams(location.search).get("q")) return;
  let pending = null;
  const source = new EventSource("/api/events");
  source.onmessage = () => {
    clearTimeout(pending);
    pending = setTimeout(async () => {
      const response = await fetch("/fragments/list", { credentials: "same-origin" });
      if (response.ok) $("#rows").innerHTML = await response.text();  // server-rendered, escaped
    }, 200);
  };
}

// ---- the chat view -----------------------------------------------------------------------

function chatPage() {
  const body = document.body;
  let cid = body.dataset.conversation || null;  // none yet: the first message creates it
  const turns = $("#turns");
  const side = sidebar();
  const follower = follow($("#thread"), $("#thread .thread-content"), $("#jump-latest"));
  const linked = location.hash && document.getElementById(location.hash.slice(1));
  if (linked) follower.reveal(linked);
  const input = $("#message");
  const stop = $("#stop");
  const positions = new Map();  // turn id → position
  let lastSeq = Number(body.dataset.after);
  let running = false;

  const setRunning = (value) => {
    running = value;
    stop.hidden = !value;
    if (!value) { stop.disabled = false; stop.textContent = "Stop"; }
  };
  const turnNode = (position) => document.getElementById(`turn-${position}`);
  const liveTurn = (turnId) => turnNode(positions.get(turnId));
  const iterationNode = (turnId, n) => {
    const turn = liveTurn(turnId);
    return turn && turn.querySelector(`.iteration[data-iteration="${n}"] > details`);
  };
  const blockNode = (e) => {
    const it = iterationNode(e.turn_id, e.iteration);
    return it && it.querySelector(`.block[data-index="${e.index}"]`);
  };

  const handlers = {
    turn_started(e) {
      positions.set(e.turn_id, e.position);
      const waiting = [...turns.querySelectorAll(".queued")];
      (waiting.find((node) => node.dataset.request === e.request) || waiting[0])?.remove();
      const article = el("article", "turn live");
      article.id = `turn-${e.position}`;
      article.dataset.position = e.position;
      article.dataset.status = "running";
      article.append(el("div", "msg user", e.request));
      const details = el("details", "timeline");
      details.open = true;
      details.append(el("summary", "", "working…"));
      article.append(details);
      turnNode(e.position)?.remove();
      turns.append(article);
      setRunning(true);
    },
    iteration_started(e) {
      const turn = liveTurn(e.turn_id);
      if (!turn) return;
      // The finished iterations fold to one line each; the running one is open.
      for (const done of turn.querySelectorAll(".iteration > details[open]")) done.open = false;
      const section = el("section", "iteration");
      section.dataset.iteration = e.iteration;
      const details = el("details");
      details.open = true;
      const summary = el("summary");
      summary.append(el("h4", "", `Iteration ${e.iteration}`));
      details.append(summary, el("pre", "delta"));
      section.append(details);
      $(".timeline", turn).append(section);
      $(".timeline summary", turn).textContent = `iteration ${e.iteration} of up to ${e.budget}…`;
    },
    model_retry(e) {  // the endpoint failed for a moment: one line per iteration, kept current
      const it = iterationNode(e.turn_id, e.iteration);
      if (!it) return;
      const shown = $(".retry", it) || it.insertBefore(el("p", "retry"), $(".delta", it));
      shown.textContent = `retrying (${e.attempt} of ${e.of}): ${e.reason}`;
    },
    model_delta(e) {
      const pre = iterationNode(e.turn_id, e.iteration)?.querySelector(".delta");
      if (pre) pre.textContent += e.text;
    },
    model_reply(e) {
      const it = iterationNode(e.turn_id, e.iteration);
      if (!it) return;
      $(".delta", it)?.remove();
      if (e.thinking) it.append(el("p", "thinking", e.thinking));
      if (e.parse_error) it.append(el("p", "error", `Unreadable reply: ${e.parse_error}`));
    },
    block_started(e) {
      const it = iterationNode(e.turn_id, e.iteration);
      if (!it) return;
      const block = el("div", "block running");
      block.dataset.index = e.index;
      const copy = el("button", "copy", "Copy code");
      copy.type = "button";
      copy.dataset.action = "copy-code";
      const code = el("pre", "code", e.code);
      block.append(copy, code);
      it.append(block);
      highlightInto(code, e.code);
    },
    block_finished(e) {
      const block = blockNode(e);
      const b = e.block;
      if (!block) return;
      block.className = `block ${b.ok ? "ok" : "failed"}`;
      if (b.stdout) block.append(el("pre", "stdout", b.stdout));
      if (b.stderr) block.append(el("pre", "stderr", b.stderr));
      if (b.ok && b.result_preview !== null) block.append(el("pre", "value", `→ ${b.result_preview}`));
      if (b.error) block.append(el("pre", "error", b.error));
      block.append(el("span", "meta", `${Math.round(b.duration_ms)} ms${b.timed_out ? " · timed out" : ""}`));
      showFigures(cid, liveTurn(e.turn_id), block, positions.get(e.turn_id), e);
    },
    vars_changed(e) {
      const it = iterationNode(e.turn_id, e.iteration);
      const names = e.changes.map((c) => `${c.name} v${c.version}`).join(", ");
      if (it && names) it.append(el("p", "vars-note", `changed: ${names}`));
      for (const change of e.changes) updateVariable(cid, { ...change, type: change.type_name, size: sizeText(change.size) });
      variablesSoon();  // the refresh brings sizes the event left out
    },
    sandbox_restarted(e) {
      const text = `Sandbox restarted (${e.reason}); lost: ${e.lost.join(", ") || "nothing"}`;
      const iterations = liveTurn(e.turn_id)?.querySelectorAll(".iteration > details");
      iterations?.[iterations.length - 1]?.append(el("p", "restart", text));
    },
    answer_refused(e) { iterationNode(e.turn_id, e.iteration)?.append(el("p", "error refusal", e.reason)); },
    steer_received(e) { iterationNode(e.turn_id, e.iteration)?.append(el("p", "steer", `You: ${e.text}`)); },
    title_changed(e) { $("#conv-title").textContent = e.title; document.title = `cove · ${e.title}`; },
    async turn_finished(e) {
      setRunning(false);
      refreshVariables(cid);
      refreshFiles();  // the code may have written some
      const position = positions.get(e.turn_id);
      const response = await fetch(`/c/${cid}/turns/${position}`, { credentials: "same-origin" });
      const old = turnNode(position);
      if (!response.ok || !old) return;
      const holder = el("div");
      holder.innerHTML = await response.text();  // server-rendered and sanitised
      old.replaceWith(holder.firstElementChild);
    },
    resync() { location.reload(); },
    send_refused(e) {  // a queued message the server could not run when its time came
      turns.querySelector(".queued")?.remove();
      notice(`Not sent: ${e.message}`, true);
      if (!input.value) input.value = e.request;
    },
  };
  Object.assign(handlers, approvalCards(api, () => cid, turns, (message) => notice(message, true)));
  let refreshing = null;
  const variablesSoon = () => {
    clearTimeout(refreshing);
    refreshing = setTimeout(() => refreshVariables(cid).catch(() => {}), 100);
  };

  const listen = () => {
    const source = new EventSource(`/api/conversations/${cid}/events?after=${lastSeq}`);
    document.body.dataset.stream = "open";
    source.onopen = () => { document.body.dataset.stream = "open"; };
    source.onerror = () => { document.body.dataset.stream = "reconnecting"; };  // it retries itself
    source.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.seq && event.seq <= lastSeq) return;  // already shown
      if (event.seq) lastSeq = event.seq;
      handlers[event.type]?.(event);
    };
  };
  // The conversation exists from here on: its address, its stream and its actions.
  const created = (conv) => {
    cid = conv.id;
    body.dataset.conversation = cid;
    history.replaceState(null, "", `/c/${cid}`);
    $("#export-md").href = `/api/conversations/${cid}/export?format=md`;
    $("#export-json").href = `/api/conversations/${cid}/export?format=json`;
    $("#conv-actions").hidden = false;
    if (conv.title) handlers.title_changed(conv);
    side.refresh();
    listen();
  };
  let creating = null;  // the request creating it, while it runs (one conversation, not two)
  let profile = null;  // the settings panel: its values go with the creation
  const create = async (body) => {
    creating = api("POST", "/api/conversations", { ...profile.pending(), ...body });
    try { created(await creating); } finally { creating = null; }
  };
  const conversation = {
    id: () => cid,
    // A file or saved settings given before the first message create the conversation.
    async ensure(body = {}) {
      await creating?.catch(() => {});
      if (!cid) await create(body);
      return cid;
    },
  };
  profile = settingsPanel(api, conversation);
  if (cid) listen();

  // The first message of a new conversation creates it, with its turn.
  const post = async (text) => {
    await creating?.catch(() => {});
    const model = profile.takeOnce();
    if (!cid && model) await conversation.ensure();  // created first; its turn is sent below
    if (cid) return api("POST", `/api/conversations/${cid}/messages`, model ? { text, model } : { text });
    await create({ text });
    return { queued: false };
  };

  // Editing a turn's request: sending it starts a branch instead of a new turn here.
  let editing = null;
  const editNote = $("#editing");
  const edit = (position) => {
    editing = position;
    editNote.hidden = position === null;
    if (position === null) return;
    $("#editing-what").textContent = `Editing turn ${position}: sending starts a branch with the edited request.`;
    input.value = $(`#turn-${position} .msg.user`).textContent;
    input.focus();
  };
  $("#editing-cancel").addEventListener("click", () => { edit(null); input.value = ""; input.focus(); });

  // A branch where turn ``position`` is asked ``text`` instead: a fork at the turn before it
  // (at turn 0 for the first turn: a branch with none of this one's turns, linked to it),
  // which then runs the request. A branch whose request cannot start is deleted again:
  // nothing is left behind but the error.
  const branchWith = async (position, text) => {
    const fork = await api("POST", `/api/conversations/${cid}/fork`, { turn: position - 1, request: text });
    try { await api("POST", `/api/conversations/${fork.id}/messages`, { text }); }
    catch (error) {
      await api("DELETE", `/api/conversations/${fork.id}`).catch(() => {});
      throw error;
    }
    location.href = `/c/${fork.id}`;
  };

  const send = async () => {
    const text = input.value;
    if (!text.trim()) return;
    if (editing !== null) {
      try { await branchWith(editing, text); } catch (error) { notice(`Not sent: ${error.message}`, true); }
      return;
    }
    input.value = "";
    follower.pin();  // the reader goes where the answer comes
    const waiting = el("div", "msg user queued", `${text} (queued)`);
    waiting.dataset.request = text;
    waiting.hidden = !running;  // shown at once when this page knows a turn runs
    turns.append(waiting);
    const shown = noticesShown;
    try {
      const sent = await post(text);
      if (!sent.queued) waiting.remove();
      else waiting.hidden = false;  // unless its turn started meanwhile (then it is gone)
      // A notice that came while the request was answered (its refusal, streamed) stays.
      if (noticesShown === shown) notice("");
    } catch (error) {
      waiting.remove();
      notice(`Not sent: ${error.message}`, true);
      if (!input.value) input.value = text;
    }
  };
  $("#composer").addEventListener("submit", (event) => { event.preventDefault(); send(); });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); send(); }
  });
  // The turn may run in another process: it stops within moments, and says so on the stream.
  stop.addEventListener("click", async () => {
    stop.disabled = true;
    stop.textContent = "Stopping…";
    try {
      if (!(await api("POST", `/api/conversations/${cid}/cancel`)).cancelled) setRunning(false);
    } catch (error) {
      stop.disabled = false;
      stop.textContent = "Stop";
      notice(error.message, true);
    }
  });

  const turnActions = {
    async fork(button) {
      const fork = await api("POST", `/api/conversations/${cid}/fork`, { turn: Number(button.dataset.turn) });
      location.href = `/c/${fork.id}`;
    },
    async retry(button) {
      const position = Number(button.dataset.turn);
      await branchWith(position, $(`#turn-${position} .msg.user`).textContent);
    },
    edit(button) { edit(Number(button.dataset.turn)); },
    "copy-answer": (button) => copy($(".msg.answer", button.closest(".turn")).innerText, "Answer copied"),
    "copy-code": (button) => copy(codeOf(button.closest(".block")), "Code copied"),
  };
  turns.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button || !turnActions[button.dataset.action]) return;
    try { await turnActions[button.dataset.action](button); } catch (error) { notice(error.message, true); }
  });

  const last = (selector) => [...turns.querySelectorAll(selector)].pop();
  const showHelp = shortcuts([
    { keys: "Alt+Shift+N", label: "New chat", run: () => { location.href = "/"; } },
    { keys: "Control+K", label: "Search the conversations", run: () => side.search() },
    { keys: "Alt+Shift+S", label: "Show or hide the conversations", run: () => side.toggle() },
    { keys: "Escape", label: "Stop the running turn (in a text box, Escape first leaves the box)", when: () => running && !stop.disabled, run: () => stop.click() },
    { keys: "Alt+Shift+A", label: "Copy the last answer", run: () => {
      const answer = last(".msg.answer");
      return answer ? copy(answer.innerText, "Answer copied") : notice("No answer to copy yet", true);
    } },
    { keys: "Alt+Shift+C", label: "Copy the last code block", run: () => {
      const block = last(".block");
      return block ? copy(codeOf(block), "Code copied") : notice("No code to copy yet", true);
    } },
    { keys: "Shift+Escape", label: "Focus the message box", run: () => input.focus() },
  ]);
  $("#shortcuts").addEventListener("click", showHelp);

  $("#replay").addEventListener("click", async () => {
    const report = $("#replay-report");
    report.hidden = false;
    report.textContent = "Replaying…";
    try {
      const result = await api("POST", `/api/conversations/${cid}/replay`);
      report.replaceChildren(el("h3", "", result.finished?.ok ? "Replay matched" : "Replay diverged"));
      for (const turn of result.turns) {
        const line = `Turn ${turn.position}: ${turn.matched}/${turn.blocks} blocks matched`;
        report.append(el("p", "", line));
        for (const mismatch of turn.mismatches) report.append(el("pre", "error", mismatch));
      }
    } catch (error) { report.textContent = `Replay failed: ${error.message}`; }
  });

  $("#rename").addEventListener("click", async () => {
    const title = await askTitle($("#conv-title").textContent);
    if (!title) return;
    try { handlers.title_changed(await api("PATCH", `/api/conversations/${cid}`, { title })); }
    catch (error) { notice(error.message, true); }
  });
  $("#delete").addEventListener("click", async () => {
    if (!await confirmDelete($("#conv-title").textContent)) return;
    try { await api("DELETE", `/api/conversations/${cid}`); location.href = "/"; }
    catch (error) { notice(error.message, true); }
  });

  const refreshFiles = setupFiles(conversation);
}

// The code of a block, as it ran (not its highlighting's markup).
function codeOf(block) {
  return (block.querySelector(".hl pre, pre.code")?.textContent ?? "").replace(/\n$/, "");
}

async function copy(text, done) {
  try {
    await navigator.clipboard.writeText(text);
    notice(done);
  } catch (error) { notice(`Could not copy: ${error.message}`, true); }
}

// ---- the inspector -----------------------------------------------------------------------

function inspectPage() {
  // ← and → step to the previous and next iteration (the links say so: aria-keyshortcuts).
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (event.target.closest?.("input, textarea, select, [contenteditable]")) return;
    const link = document.querySelector(`a[aria-keyshortcuts="${event.key}"]`);
    if (!link) return;
    event.preventDefault();
    link.click();
  });
}

// A live block's code, highlighted by the server (pygments, sanitised) as the finished turn is.
async function highlightInto(pre, code) {
  try {
    const response = await fetch("/fragments/highlight", {
      method: "POST", body: code, credentials: "same-origin",
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
    if (!response.ok || !pre.isConnected) return;
    pre.innerHTML = await response.text();
    pre.classList.add("hl");
  } catch (_) { /* it stays plain text */ }
}

function sizeText(size) {
  if (size === null || size === undefined) return "";
  return `len ${size}`;
}

async function refreshVariables(cid) {
  const { variables } = await api("GET", `/api/conversations/${cid}/vars`);
  $("#vars tbody").replaceChildren();
  for (const v of variables) updateVariable(cid, { ...v, size: sizeText(v.size) });
}

function updateVariable(cid, change) {
  const tbody = $("#vars tbody");
  let row = tbody.querySelector(`tr[data-name="${CSS.escape(change.name)}"]`);
  if (change.kind === "deleted") { row?.remove(); return; }
  if (!row) {
    row = el("tr");
    row.dataset.name = change.name;
    const link = el("a", "", change.name);
    link.href = `/c/${cid}/vars/${encodeURIComponent(change.name)}`;
    link.title = change.name;  // a long name is cut in the panel
    const name = el("td", "name");
    name.append(link);
    row.append(name, el("td", "type"), el("td", "size"), el("td", "version"), el("td", "preview"));
    tbody.append(row);
  }
  $(".type", row).textContent = change.type;
  if (change.size !== undefined) $(".size", row).textContent = change.size ?? "";
  $(".version", row).textContent = `v${change.version}`;
  $(".preview", row).textContent = change.preview;
}

function setupFiles(conversation) {
  const list = $("#files");
  const refresh = async () => {
    const cid = conversation.id();
    if (!cid) return;
    const { files } = await api("GET", `/api/conversations/${cid}/files`);
    list.replaceChildren(...files.map((f) => {
      const item = el("li");
      const link = el("a", "", f.path);
      link.href = `/api/conversations/${cid}/files/${f.path.split("/").map(encodeURIComponent).join("/")}`;
      item.append(link, el("span", "meta", ` ${f.size} bytes`));
      return item;
    }));
  };
  const upload = async (files) => {
    const limit = Number(document.body.dataset.uploadLimit);  // the server checks it too
    for (const file of files) {
      if (file.size > limit) { notice(`${file.name} is over the upload limit of ${limit} bytes`, true); continue; }
      try {
        const cid = await conversation.ensure();
        await api("PUT", `/api/conversations/${cid}/files/${encodeURIComponent(file.name)}`, file);
        notice(`Uploaded ${file.name}`);
      } catch (error) { notice(`${file.name}: ${error.message}`, true); }
    }
    refresh();
  };
  const zone = $("#dropzone");
  zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    upload(event.dataTransfer.files);
  });
  $("#file-input").addEventListener("change", async (event) => {
    await upload([...event.target.files]);
    event.target.value = "";  // so that choosing the same file again uploads it again
  });
  refresh();
  return () => refresh().catch(() => {});
}

const page = document.body.dataset.page;
if (page === "list") listPage();
if (page === "chat") chatPage();
if (page === "inspect") inspectPage();
