// Approval cards: an extension call the conversation's policy asks about, answered here.
// What the card shows comes from sandbox code (the arguments above all): it only ever
// reaches the DOM as textContent.

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function button(text, className, approved) {
  const node = el("button", className, text);
  node.type = "button";
  node.dataset.approve = approved ? "yes" : "no";
  return node;
}

// The handlers of the two notices, for the chat page's event stream. ``api`` posts; ``place``
// is where cards go; ``report`` shows an error.
export function approvalCards(api, conversationId, place, report) {
  const card = (id) => place.querySelector(`.approval[data-id="${CSS.escape(id)}"]`);

  const settle = (node, said) => {
    node.dataset.state = "resolved";
    for (const control of node.querySelectorAll("button, input")) control.disabled = true;
    node.querySelector(".approval-outcome").textContent = said;
    node.removeAttribute("role");
  };

  const send = async (node, approved) => {
    const remember = node.querySelector("input[type=checkbox]").checked;
    for (const control of node.querySelectorAll("button")) control.disabled = true;
    try {
      await api("POST", `/api/conversations/${conversationId()}/approvals/${node.dataset.id}`, { approved, remember });
    } catch (error) {
      // Decided elsewhere already (409) or gone: the resolved notice says how; else try again.
      if (node.dataset.state !== "resolved") {
        for (const control of node.querySelectorAll("button")) control.disabled = false;
        report(error.message);
      }
    }
  };

  return {
    approval_asked(e) {
      if (card(e.id)) return;  // the stream reconnected: it is shown already
      const node = el("section", "approval");
      node.dataset.id = e.id;
      node.dataset.state = "waiting";
      node.setAttribute("role", "group");
      node.setAttribute("aria-label", `Approval needed: ${e.function}`);
      node.append(el("h3", "", "Approval needed"));
      const what = el("p", "approval-what");
      what.append(el("code", "", e.function), ` from ${e.extension} wants to `, el("strong", "", e.effect), ":");
      node.append(what, el("pre", "approval-call", `${e.function}(${e.arguments})`));
      const remember = el("label", "approval-remember");
      const box = el("input");
      box.type = "checkbox";
      remember.append(box, " Remember for this conversation");
      const approve = button("Approve", "primary", true);
      const deny = button("Deny", "danger", false);
      const buttons = el("div", "approval-buttons");
      buttons.append(approve, deny);
      const seconds = Math.round(e.timeout_s);
      node.append(remember, buttons, el("p", "approval-outcome meta", `Enter approves, Escape denies. No answer within ${seconds} s means deny.`));
      node.addEventListener("click", (event) => {
        const chosen = event.target.closest("button[data-approve]");
        if (chosen && !chosen.disabled) send(node, chosen.dataset.approve === "yes");
      });
      node.addEventListener("keydown", (event) => {
        if (event.key !== "Escape" || node.dataset.state !== "waiting") return;
        event.preventDefault();  // the page's Escape (stop the turn) is not run
        send(node, false);
      });
      place.append(node);
      node.scrollIntoView({ block: "nearest" });
      approve.focus({ preventScroll: true });
    },
    approval_resolved(e) {
      const node = card(e.id);
      if (node) settle(node, e.said + (e.remember ? " (remembered for this conversation)" : ""));
    },
  };
}
