"""The TUI's widgets: sidebar, timeline, prompt, variables panel and status bar."""
