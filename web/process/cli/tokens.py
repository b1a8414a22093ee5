"""``uptrio tokens create|list|revoke|reset-secret``: API tokens, against the same
database whether or not the service runs; refused when the JWT secret is not the
database's (``reset-secret`` makes it so, revoking every token).
"""

from __future__ import annotations

import argparse
import sys
import time

from .flags import CommandParser, Commands, command, positive_int, store_flags, store_location

__all__ = ["add_command", "token_name", "tokens_command"]


_RESET_WARNING = (
    "reset-secret makes this process's JWT secret the database's and revokes every token "
    "(signed with the previous secret, none of them could be used any more)."
)


async def tokens_command(args: argparse.Namespace) -> int:
    """``uptrio tokens create|list|revoke|reset-secret``; the exit status (2: bad
    permissions, 1: no such token, a JWT secret that is not the database's
    (``web.process.startup.check_secret``), or ``reset-secret`` without ``--yes``). ``tokens
    list`` shows each token's name (``--name`` at creation) last, ``-`` for none.
    ``reset-secret --yes`` records this process's secret as the database's (a new secret, or
    the first node's one lost) and revokes every token (docs/several-nodes.md, One secret
    per database)."""
    import trio_asyncio

    from store import accounts, open_store

    from ...http.auth import (
        expired,
        issue_token,
        load_secret,
        parse_permissions,
        secret_fingerprint,
        secret_source,
    )
    from ...http.versioning import CURRENT_VERSION
    from ..startup import SecretMismatch, check_secret

    location = store_location(args)
    secret = load_secret(location.data_dir)
    if args.tokens == "reset-secret" and not args.yes:
        print(f"uptrio: {_RESET_WARNING} Run it again with --yes to do so.", file=sys.stderr)
        return 1
    async with trio_asyncio.open_loop(), open_store(location) as db:
        if args.tokens == "reset-secret":
            fingerprint = secret_fingerprint(secret)
            now = int(time.time())
            count = await db.transaction(accounts.reset_fingerprint, "jwt", fingerprint, now)
            print(
                f"the database now takes the JWT secret in {secret_source(location.data_dir)}; "
                f"{count} token(s) revoked. Give every node this secret, and create new "
                "tokens (uptrio tokens create)."
            )
            return 0
        try:
            await check_secret(db, secret, location.data_dir)
        except SecretMismatch as exc:
            print(f"uptrio: {exc}", file=sys.stderr)
            return 1
        now = int(time.time())
        if args.tokens == "create":
            from ...routes import PERMISSIONS  # derived from every route: create alone needs it

            try:
                permissions = parse_permissions(args.permissions, PERMISSIONS)
            except ValueError as exc:
                print(f"uptrio: {exc}", file=sys.stderr)
                return 2
            expires_at = now + args.expires_in if args.expires_in else None
            _, token = await db.transaction(
                accounts.create_token,
                args.account,
                permissions,
                now=now,
                expires_at=expires_at,
                current_version=CURRENT_VERSION,
                name=args.name,
            )
            print(issue_token(secret, token.id, now=now, expires_at=expires_at))
            return 0
        if args.tokens == "list":
            rows = await db.run(accounts.list_tokens, args.account)
            print(f"{'ID':<30} {'ACCOUNT':<20} {'STATE':<8} {'EXPIRES':<10} PERMISSIONS  NAME")
            for account_name, t in rows:
                state = (
                    "revoked"
                    if t.revoked_at
                    else ("expired" if expired(t.expires_at, now) else "active")
                )
                expires = str(t.expires_at) if t.expires_at else "never"
                print(
                    f"{t.id:<30} {account_name:<20} {state:<8} {expires:<10} "
                    f"{','.join(t.permissions)}  {t.name or '-'}"
                )
            return 0
        revoked = await db.run(accounts.revoke_token, args.token_id, now)
        if revoked is None:
            print(f"uptrio: no token {args.token_id}", file=sys.stderr)
            return 1
        print(f"revoked {revoked.id}" + (f" ({revoked.name})" if revoked.name else ""))
        return 0


def token_name(text: str) -> str:
    """A token's name for ``--name``: 1 to 100 characters, no control characters.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if not 1 <= len(text) <= 100 or not text.isprintable():
        raise argparse.ArgumentTypeError("a name is 1 to 100 printable characters")
    return text


def add_command(commands: Commands[CommandParser], common: CommandParser) -> None:
    """Add ``uptrio tokens`` and its sub-commands to ``commands``."""
    tokens_p = commands.add_parser("tokens", help="create, list and revoke API tokens")
    tokens = tokens_p.add_subparsers(dest="tokens", required=True)
    create = command(tokens, "create", "create a token; prints the JWT alone", store_flags, common)
    create.add_argument("--account", required=True, help="account name (created if missing)")
    create.add_argument(
        "--permissions",
        required=True,
        help="comma-separated, e.g. monitors.read,incidents.create; or all",
    )
    create.add_argument(
        "--expires-in", type=positive_int, default=None, help="lifetime in seconds (at least 1)"
    )
    create.add_argument(
        "--name", type=token_name, default=None, help="a name for the token (tokens list)"
    )
    listing = command(tokens, "list", "list tokens", store_flags, common)
    listing.add_argument("--account", default=None)
    revoke = command(
        tokens, "revoke", "revoke a token from the next request on", store_flags, common
    )
    revoke.add_argument("token_id", metavar="tok_...")
    reset = command(
        tokens,
        "reset-secret",
        "make this process's JWT secret the database's; revokes every token",
        store_flags,
        common,
    )
    reset.add_argument("--yes", action="store_true", help="do it (every token is revoked)")
    tokens_p.set_defaults(run=run)


def run(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Run ``uptrio tokens ...``; its exit status (:func:`tokens_command`)."""
    import trio

    return trio.run(tokens_command, args)
