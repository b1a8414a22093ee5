"""``uptrio apply``'s run: read the files, read the account, print the plan, carry it out
(docs/apply.md). Exit status 0 on success, 1 on an API error, 2 on an
invalid file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import httpx

from .account import Account, read_account
from .client import ApiClient, ApiError
from .format import MANAGED_BY
from .loader import InvalidFiles, load_paths
from .plan import Action, make_plan

__all__ = ["apply_files", "carry_out"]


async def carry_out(api: ApiClient, account: Account, actions: list[Action]) -> None:
    """Run ``actions`` in order: a create POSTs the file's fields (references as ids,
    ``metadata.managed_by`` set to :data:`.format.MANAGED_BY`) and records the new id for
    the references after it; an update PATCHes only the fields that differ; a delete
    DELETEs. Raises ApiError at the first failure (what ran before it stays done)."""
    for action in actions:
        kind = action.kind
        if action.verb == "create":
            body = account.to_ids(kind, action.fields)
            body[kind.name_field] = action.name
            body["metadata"] = {**body.get("metadata", {}), "managed_by": MANAGED_BY}
            created = await api.create(kind.path, body)
            account.add(kind.path, action.name, created["id"])
        elif action.verb == "update" and action.id is not None:
            await api.update(kind.path, action.id, account.to_ids(kind, action.fields))
        elif action.verb == "delete" and action.id is not None:
            await api.delete(kind.path, action.id)


async def apply_files(
    paths: list[Path],
    http: httpx.AsyncClient,
    *,
    dry_run: bool = False,
    prune: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Apply the files at ``paths`` through ``http`` (a client of the API with its token):
    print the plan's lines on ``out`` (default stdout), then carry it out unless
    ``dry_run``. Problems go to ``err`` (default stderr), prefixed ``uptrio:``. Returns the
    exit status: 0, 1 (API error, or the service unreachable), 2 (invalid files)."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        desired = load_paths(paths)
        api = ApiClient(http)
        account = await read_account(api)
        actions = make_plan(desired, account, prune)
        for action in actions:
            print(action.line(), file=out)
        if not dry_run:
            await carry_out(api, account, actions)
    except InvalidFiles as exc:
        print("\n".join(exc.problems), file=err)
        return 2
    except OSError as exc:
        print(f"uptrio: {exc}", file=err)
        return 2
    except ApiError as exc:
        print(f"uptrio: {exc}", file=err)
        return 1
    return 0
