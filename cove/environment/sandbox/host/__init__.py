"""The host side of the sandbox: starting, pooling and talking to worker processes."""
