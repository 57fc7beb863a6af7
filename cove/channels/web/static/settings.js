// The settings panel of a chat: the conversation's instructions and model. A change applies
// from the conversation's next turn; in a new chat the values are given to the conversation
// the first save (or the first message) creates. What the server refuses stays in the form,
// with its reason shown.

const $ = (selector) => document.querySelector(selector);

export function settingsPanel(api, conversation) {
  const panel = $("#settings");
  const text = $("#instructions");
  const picker = $("#model-picker");
  const status = $("#settings-status");
  const count = $("#instructions-count");
  let limit = 4000;
  let loaded = false;

  const say = (message, isError = false) => {
    status.textContent = message;
    status.classList.toggle("error", isError);
  };
  const counted = () => {
    count.textContent = `${text.value.trim().length} / ${limit}`;
    count.classList.toggle("error", text.value.trim().length > limit);
  };
  const choose = (model) => {
    if (model && ![...picker.options].some((o) => o.value === model)) {
      picker.append(new Option(model, model));
    }
    picker.value = model || "";
  };
  const show = (profile) => {
    limit = profile.instructions_limit;
    text.value = profile.instructions || "";
    picker.options[0].textContent = `the configured model (${profile.configured_model})`;
    choose(profile.model);
    counted();
  };
  const load = async () => {
    loaded = true;
    const cid = conversation.id();
    const current = cid ? api("GET", `/api/conversations/${cid}/profile`) : null;
    try {
      const { models, configured } = await api("GET", "/api/models");
      picker.options[0].textContent = `the configured model (${configured})`;
      for (const name of models) {
        if (![...picker.options].some((o) => o.value === name)) picker.append(new Option(name, name));
      }
      picker.dataset.listed = "yes";
    } catch (error) {
      say(`The endpoint's models cannot be listed: ${error.message}`, true);
    }
    if (current) show(await current);
  };

  panel.addEventListener("toggle", () => { if (panel.open && !loaded) load().catch((e) => say(e.message, true)); });
  text.addEventListener("input", counted);
  $("#settings-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const wanted = { instructions: text.value.trim() ? text.value : null, model: picker.value || null };
    say("Saving…");
    try {
      const cid = conversation.id();
      if (cid) show(await api("PUT", `/api/conversations/${cid}/profile`, wanted));
      else await conversation.ensure(wanted);
      say("Saved: the next turn runs with these.");
    } catch (error) {
      say(error.message, true);  // the form keeps what was typed
    }
  });
  // A model for the next message alone: the conversation keeps its own.
  let once = null;
  const onceNote = $("#once-model");
  const setOnce = (model) => {
    once = model;
    onceNote.hidden = !model;
    $("#once-name").textContent = model || "";
  };
  $("#settings-once").addEventListener("click", () => {
    if (!picker.value) {
      say("Choose a model for the next message first.", true);
      return;
    }
    setOnce(picker.value);
    say(`The next message goes to ${picker.value}.`);
    $("#message").focus();
  });
  $("#once-clear").addEventListener("click", () => { setOnce(null); $("#message").focus(); });
  return {
    // The model the next message asks for (once: taking it clears it).
    takeOnce() {
      const model = once;
      setOnce(null);
      return model;
    },
    // What a new conversation is created with, when the panel was filled in before it existed.
    pending() {
      if (!loaded) return {};
      return { instructions: text.value.trim() ? text.value : null, model: picker.value || null };
    },
  };
}
