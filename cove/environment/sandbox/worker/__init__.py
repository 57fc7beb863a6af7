"""The worker side of the sandbox: what runs in the confined worker process.

It never imports the host side (an import-linter contract holds this).
"""
