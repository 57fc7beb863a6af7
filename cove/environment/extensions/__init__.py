"""Extensions: the only way to add capabilities to the sandbox."""
