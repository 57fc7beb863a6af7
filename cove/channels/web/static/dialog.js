// The page's own dialogs, in place of the browser's prompt() and confirm(): one modal <dialog>
// (the browser keeps focus inside it and makes the rest of the page inert), Escape cancels,
// and focus goes back to whatever opened it.

let shown = null;  // the one <dialog>, built on first use

function build() {
  const dialog = document.createElement("dialog");
  dialog.className = "dialog";
  dialog.setAttribute("aria-labelledby", "dialog-title");
  dialog.setAttribute("aria-describedby", "dialog-message");
  const form = document.createElement("form");
  form.method = "dialog";
  const title = document.createElement("h2");
  title.id = "dialog-title";
  const message = document.createElement("p");
  message.id = "dialog-message";
  const label = document.createElement("label");
  label.className = "dialog-field";
  const labelText = document.createElement("span");
  const input = document.createElement("input");
  input.type = "text";
  input.required = true;
  input.maxLength = 200;
  label.append(labelText, input);
  const buttons = document.createElement("div");
  buttons.className = "dialog-buttons";
  const cancel = document.createElement("button");
  cancel.type = "button";  // not a submit button: Enter in the field confirms
  cancel.value = "cancel";
  cancel.textContent = "Cancel";
  cancel.addEventListener("click", () => dialog.close("cancel"));
  const ok = document.createElement("button");
  ok.type = "submit";
  ok.value = "ok";
  ok.className = "primary";
  buttons.append(cancel, ok);
  form.append(title, message, label, buttons);
  dialog.append(form);
  document.body.append(dialog);
  return { dialog, title, message, label, labelText, input, cancel, ok };
}

function open({ title, message = "", field = null, confirmText = "OK", danger = false }) {
  shown ??= build();
  const parts = shown;
  const opener = document.activeElement;
  parts.title.textContent = title;
  parts.message.textContent = message;
  parts.message.hidden = !message;
  parts.label.hidden = field === null;
  parts.input.disabled = field === null;  // a hidden required field would block confirming
  if (field !== null) {
    parts.labelText.textContent = field.label;
    parts.input.value = field.value ?? "";
  }
  parts.ok.textContent = confirmText;
  parts.ok.classList.toggle("danger", danger);
  parts.dialog.returnValue = "";
  return new Promise((resolve) => {
    parts.dialog.addEventListener("close", () => {
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
      resolve(parts.dialog.returnValue === "ok" ? parts.input.value : null);
    }, { once: true });
    parts.dialog.showModal();
    if (field !== null) parts.input.select();  // typing replaces the old text
    else (danger ? parts.cancel : parts.ok).focus();  // a destructive action is not the default
  });
}

// Ask for a line of text; resolves to the text, or null when cancelled.
export async function askText({ title, label, value = "", confirmText = "Save" }) {
  const text = await open({ title, field: { label, value }, confirmText });
  return text === null ? null : text.trim() || null;
}

// Ask to confirm an action; resolves to true when confirmed.
export async function confirmAction({ title, message, confirmText = "OK", danger = false }) {
  return (await open({ title, message, confirmText, danger })) !== null;
}
