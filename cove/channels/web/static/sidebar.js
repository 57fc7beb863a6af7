// The chat's sidebar: the conversations newest first, kept current from the server's list
// stream, searched by content; beside the chat on a wide window, a drawer on a phone.

const PHONE = matchMedia("(max-width: 760px)");
const CLOSED_KEY = "cove.sidebar.closed";  // a wide window remembers the reader's choice

export function sidebar() {
  const nav = document.getElementById("sidebar");
  const toggle = document.getElementById("sidebar-toggle");
  const entries = document.getElementById("sidebar-entries");
  const search = document.getElementById("sidebar-search");
  const body = document.body;

  const visible = () => (PHONE.matches ? body.classList.contains("sidebar-open")
    : !body.classList.contains("sidebar-closed"));
  const shown = () => { toggle.setAttribute("aria-expanded", String(visible())); };
  const setOpen = (open) => {
    if (PHONE.matches) body.classList.toggle("sidebar-open", open);
    else {
      body.classList.toggle("sidebar-closed", !open);
      try { localStorage.setItem(CLOSED_KEY, open ? "" : "1"); } catch (_) { /* private mode */ }
    }
    shown();
  };
  try { body.classList.toggle("sidebar-closed", Boolean(localStorage.getItem(CLOSED_KEY))); }
  catch (_) { /* private mode */ }
  shown();
  PHONE.addEventListener("change", shown);
  toggle.addEventListener("click", () => setOpen(!visible()));
  document.getElementById("drawer-backdrop").addEventListener("click", () => setOpen(false));
  nav.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || !PHONE.matches) return;
    event.preventDefault();  // closing the drawer is all this Escape does (it stops no turn)
    setOpen(false);
    toggle.focus();
  });

  // The entries as the server renders them (escaped), for the query typed, if any.
  let asked = 0;
  const refresh = async () => {
    const ticket = ++asked;
    const params = new URLSearchParams({ q: search.value.trim(), current: body.dataset.conversation || "" });
    const response = await fetch(`/fragments/sidebar?${params}`, { credentials: "same-origin" });
    if (response.ok && ticket === asked) entries.innerHTML = await response.text();
  };
  let pending = null;
  const soon = (delay) => { clearTimeout(pending); pending = setTimeout(() => refresh().catch(() => {}), delay); };
  search.addEventListener("input", () => soon(150));
  search.closest("form").addEventListener("submit", (event) => { event.preventDefault(); soon(0); });
  search.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || !search.value) return;
    event.preventDefault();  // clearing the search is all this Escape does
    event.stopPropagation();
    search.value = "";
    soon(0);
  });
  new EventSource("/api/events").onmessage = () => soon(200);
  refresh().catch(() => {});  // the page comes without them: it shows sooner

  return {
    refresh: () => soon(0),
    toggle: () => setOpen(!visible()),
    search() { setOpen(true); search.focus(); search.select(); },
  };
}
