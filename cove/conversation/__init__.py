"""The conversation layer: the one API channels use (create, send, cancel, fork, inspect, replay)."""
