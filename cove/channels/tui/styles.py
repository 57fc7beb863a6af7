"""The TUI's stylesheet (kept in Python so it ships without package data)."""

CSS = """
#main { height: 1fr; }
#sidebar { width: 34; border-right: solid $panel; }
#sidebar.hidden, #variables.hidden { display: none; }
#filter { margin: 0 0 1 0; }
#conversations { height: 1fr; border: none; }
#center { width: 1fr; }
#timeline { height: 1fr; padding: 0 1; }
#prompt { height: auto; min-height: 3; max-height: 10; }
#variables { width: 36; border-left: solid $panel; }
#variable-list { height: 1fr; border: none; }
#status { height: 1; background: $panel; }
/* Notifications show at the top right, over the conversation, never over the composer. */
ToastRack { dock: top; align: right top; margin-top: 1; margin-bottom: 0; }
.turn { height: auto; margin: 0 0 1 0; }
.iteration { height: auto; padding: 0 0 0 2; }
.iteration:focus { background: $boost; }
.turn-end { padding: 0 0 0 2; }
.panel-title { text-style: bold; padding: 0 1; }
.dialog { align: center middle; }
.dialog-box { width: 60; height: auto; border: thick $primary; padding: 1 2; background: $surface; }
.buttons { height: auto; align: center middle; }
#versions { height: 12; }
.inspector-section { text-style: bold; color: $accent; margin: 1 0 0 0; }
.inspector-body { padding: 0 2; }
.text-screen { padding: 1 2; background: $surface; }
"""
