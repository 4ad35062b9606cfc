"""``nas doctor``: is this setup ready?"""

from __future__ import annotations

import argparse

from rich.table import Table

from nas.cli.flags import common_flags
from nas.cli.render import console, emit_json, out, styled


def add_commands(commands) -> None:
    doctor = commands.add_parser(
        "doctor", help="check a setup: Ray, registry, MLflow, data, runs folder"
    )
    doctor.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else local)")
    doctor.add_argument("--registry-url", help="registry URL (default: sqlite in nas-runs)")
    doctor.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite in nas-runs)")
    common_flags(doctor)
    doctor.set_defaults(run=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Exit 0 when every check passes, 1 otherwise."""
    from nas.service.doctor import run_checks

    with console.status("Checking the setup ..."):
        checks = run_checks(args.address, args.registry_url, args.tracking_uri, args.cache_dir)
    if args.json:
        ok = all(check.ok for check in checks)
        emit_json({"ok": ok, "checks": [check.__dict__ for check in checks]})
    else:
        table = Table(title="nas doctor", title_justify="left")
        for column in ("check", "", "found", "to fix"):
            table.add_column(column, overflow="fold")
        for check in checks:
            mark = styled("ok", "green") if check.ok else styled("no", "red")
            table.add_row(check.name, mark, check.found, check.fix)
        out.print(table)
    return 0 if all(check.ok for check in checks) else 1
