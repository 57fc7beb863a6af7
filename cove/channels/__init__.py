"""Channels: the surfaces people use (cli, web, tui, telegram).

They only parse input and render events; the conversation layer does the rest.
"""
