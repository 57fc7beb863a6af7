"""The TUI's screens: modal prompts, the inspector, variable versions, reports and help."""
