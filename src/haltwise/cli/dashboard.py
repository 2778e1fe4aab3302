"""``haltwise dashboard``: the fleet in a browser (needs ``haltwise[dashboard]``).

It serves the page on 127.0.0.1 and prints its URL with a token made for this start; every
request for data and every action must carry that token. ``--host`` may name another address
only with a token chosen on purpose in ``HALTWISE_DASHBOARD_TOKEN`` (one that can be shared
with the people on that network); without one it refuses to start. It opens no browser.
"""

from __future__ import annotations

import argparse

HELP = "Serve a web page over the ledger: live runs, budgets, approvals and the kill switch."

#: The environment variable that gives a token of one's own (required off this machine).
TOKEN_VARIABLE = "HALTWISE_DASHBOARD_TOKEN"
#: The shortest token accepted from ``HALTWISE_DASHBOARD_TOKEN``.
MIN_TOKEN = 16
DEFAULT_PORT = 8765
#: The highest TCP port.
MAX_PORT = 65535


def configure(parser: argparse.ArgumentParser) -> None:
    from ._fleet import add_ledger_option

    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1: this machine only; any other needs "
        f"{TOKEN_VARIABLE})",
    )
    parser.add_argument(
        "--port",
        default=str(DEFAULT_PORT),
        metavar="N",
        help=f"the port (default {DEFAULT_PORT}; 0: any free one)",
    )
    add_ledger_option(parser)


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_port(value: str) -> int:
    """``--port``: a TCP port, or 0 for any free one. Checked before the token is made or the
    ledger opened; a socket refuses a port past 65535 with an ``OverflowError`` of its own."""
    from ..config import parse_count
    from ..engine.errors import InvalidValueError

    try:
        port = parse_count("--port", value)
    except InvalidValueError:
        port = None
    if port is None or port > MAX_PORT:
        raise InvalidValueError(
            "--port", value, f"a port from 1 to {MAX_PORT}, or 0 for any free one"
        )
    return port


def choose_token(host: str, environ: dict[str, str]) -> str:
    """The token: ``HALTWISE_DASHBOARD_TOKEN`` if set, else (on this machine only) a new one."""
    import secrets

    from ..engine.errors import ConfigurationError

    chosen = environ.get(TOKEN_VARIABLE, "")
    if chosen and len(chosen) < MIN_TOKEN:
        raise ConfigurationError(
            f"{TOKEN_VARIABLE} is {len(chosen)} characters: use at least {MIN_TOKEN}, e.g. "
            "from `python -c 'import secrets; print(secrets.token_urlsafe(24))'`"
        )
    if not chosen and not is_loopback(host):
        raise ConfigurationError(
            f"--host {host} lets other machines reach the dashboard, so it will not start "
            f"without a token chosen for them: set {TOKEN_VARIABLE} (at least {MIN_TOKEN} "
            "characters) and share it, or leave --host at 127.0.0.1"
        )
    return chosen or secrets.token_urlsafe(24)


def run(args: argparse.Namespace) -> int:
    import os
    import socket

    from ..engine.errors import ConfigurationError
    from ._errors import require_extra
    from ._fleet import ledger_from, ledger_name

    port = parse_port(args.port)
    token = choose_token(args.host, dict(os.environ))
    require_extra("dashboard", "the dashboard")
    import uvicorn

    from ..dashboard.app import create_app

    family = socket.AF_INET6 if ":" in args.host.strip("[]") else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((args.host.strip("[]"), port))
        listener.listen(128)  # connections wait from the moment the URL is printed
    except OSError as error:
        listener.close()
        raise ConfigurationError(
            f"cannot listen on {args.host}:{port}: {error.strerror}; choose another --port"
        ) from None
    port = listener.getsockname()[1]
    ledger = ledger_from(args, create=True)
    shown_host = f"[{args.host.strip('[]')}]" if family == socket.AF_INET6 else args.host
    print(f"haltwise dashboard: http://{shown_host}:{port}/#token={token}", flush=True)
    print(f"ledger: {ledger_name(ledger)}; Ctrl-C to stop", flush=True)
    config = uvicorn.Config(
        create_app(ledger, token=token),
        log_level="warning",
        access_log=False,  # the event stream's URL carries the token
    )
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        listener.close()
        ledger.close()
    return 0
