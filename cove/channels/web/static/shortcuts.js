// Keyboard shortcuts: one list says each key, what it does and how to run it; the help
// overlay shows the same list, so what the page does and what it says cannot drift apart.

// "Control+Shift+K" → what the event must carry. Control also means ⌘ on a Mac.
function parse(keys) {
  const parts = keys.split("+");
  const key = parts.pop();
  return { control: parts.includes("Control"), alt: parts.includes("Alt"), shift: parts.includes("Shift"), key };
}

function matches(event, { control, alt, shift, key }) {
  if ((event.ctrlKey || event.metaKey) !== control || event.altKey !== alt || event.shiftKey !== shift) return false;
  if (/^[A-Z]$/.test(key)) return event.code === `Key${key}`;  // the key, whatever Alt types
  if (key === "/") return event.code === "Slash" || event.key === "/";
  return event.key === key;
}

// Shown as a person reads them on a key cap.
const spoken = (keys) => keys.replace("Control", "Ctrl").replaceAll("+", " + ");

function helpDialog(list) {
  const dialog = document.createElement("dialog");
  dialog.className = "dialog help";
  dialog.id = "help";
  dialog.setAttribute("aria-labelledby", "help-title");
  const title = document.createElement("h2");
  title.id = "help-title";
  title.textContent = "Keyboard shortcuts";
  const table = document.createElement("dl");
  table.className = "keys";
  for (const { keys, label } of list) {
    const term = document.createElement("dt");
    term.append(...keys.split("+").flatMap((key, n) => {
      const cap = document.createElement("kbd");
      cap.textContent = spoken(key);
      return n ? [" + ", cap] : [cap];
    }));
    const what = document.createElement("dd");
    what.textContent = label;
    table.append(term, what);
  }
  const form = document.createElement("form");
  form.method = "dialog";
  form.className = "dialog-buttons";
  const close = document.createElement("button");
  close.textContent = "Close";
  form.append(close);
  dialog.append(title, table, form);
  document.body.append(dialog);
  return dialog;
}

// A box the person types in: there, a plain Escape leaves the box (what it typed stays) and
// runs no shortcut, so a reflex Escape while typing stops nothing. A box may take Escape for
// itself first (the search box clears its text).
const typing = (target) => target instanceof HTMLElement
  && (target.isContentEditable || target.matches("textarea, input:not([type=button], [type=submit], [type=checkbox], [type=radio], [type=file])"));

// Install ``list`` ([{keys, label, run, when?}]); returns a function that shows the help.
export function shortcuts(list) {
  let help = null;
  const showHelp = () => {
    help ??= helpDialog(all);
    if (!help.open) help.showModal();
  };
  const all = [...list, { keys: "Control+/", label: "Show the keyboard shortcuts", run: showHelp }];
  const parsed = all.map((shortcut) => ({ ...shortcut, keyset: parse(shortcut.keys) }));
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing) return;
    if (document.querySelector("dialog[open]")) return;  // a dialog has the keyboard
    if (event.key === "Escape" && !(event.ctrlKey || event.metaKey || event.altKey || event.shiftKey)
        && typing(event.target)) {
      event.preventDefault();
      event.target.blur();
      return;
    }
    const found = parsed.find((s) => matches(event, s.keyset) && (!s.when || s.when(event)));
    if (!found) return;
    event.preventDefault();
    found.run(event);
  });
  return showHelp;
}
