"""Free local ports for the Python scripts that start servers (chart_wiring.py,
bench_s3.py)."""

import socket

_handed_out = set()


def free_port():
    """A port free now and not handed out before by this process: the kernel may offer a
    closed probe's port again, and two listeners on one port would fail the run (CI saw a
    gateway and an admin listener collide)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
