"""The sandbox: RestrictedPython code running in a killable worker process."""
