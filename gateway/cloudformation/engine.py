"""Running a stack operation: create, update and delete its resources in dependency order,
and roll back what an operation did when one of them fails.

Every step is saved (`StackStore.save`, durable) before the next one starts, with the event
that tells it, so another gateway (or the same one after a restart) sees where an operation
stands. An operation runs to its end before the API call that started it answers: the AWS
CLI's waiters poll DescribeStacks every 30 s after their first call, which then finds the
stack settled.

Statuses and events follow AWS's: CREATE_IN_PROGRESS → CREATE_COMPLETE, or a resource's
CREATE_FAILED → ROLLBACK_IN_PROGRESS → ROLLBACK_COMPLETE (CREATE_FAILED with
DisableRollback); UPDATE_IN_PROGRESS → UPDATE_COMPLETE_CLEANUP_IN_PROGRESS → UPDATE_COMPLETE,
or UPDATE_ROLLBACK_IN_PROGRESS → UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS →
UPDATE_ROLLBACK_COMPLETE; DELETE_IN_PROGRESS → DELETE_COMPLETE (DELETE_FAILED). A replaced
resource's new copy is made first and the old one deleted in the cleanup, as AWS does.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from gateway.cloudformation.changes import included_order
from gateway.cloudformation.errors import CloudFormationError, ResourceFailed
from gateway.cloudformation.intrinsics import Scope
from gateway.cloudformation.records import ResourceState, Stack, StackEvent
from gateway.cloudformation.resources.handler import (
    HandlerEnv,
    Made,
    check_properties,
    needs_replacement,
)
from gateway.cloudformation.resources.types import HANDLERS
from gateway.cloudformation.scope import stack_scope
from gateway.cloudformation.sqs_calls import SqsCalls
from gateway.cloudformation.store import StackStore
from gateway.cloudformation.template import Template, parse

log = logging.getLogger("kqs.cloudformation")

STACK_TYPE = "AWS::CloudFormation::Stack"
REPLACING = "Requested update requires the creation of a new physical resource; hence creating one."


class _Failed(Exception):
    """A step failed; the stack's reason names the resource (`reason`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Touched:
    """A resource an update changed, and how it stood before (None: it is new)."""

    logical_id: str
    before: ResourceState | None
    replaced: bool = False


@dataclass
class Engine:
    store: StackStore
    sqs: SqsCalls
    now_ms: Callable[[], int]
    token: str = ""
    _imported: list[str] = field(default_factory=list)

    # ---- events and saving

    async def _save(self, stack: Stack) -> None:
        await self.store.save(stack)

    def _event(
        self,
        stack: Stack,
        logical_id: str,
        physical_id: str,
        kind: str,
        status: str,
        reason: str = "",
        properties: dict[str, Any] | None = None,
    ) -> None:
        now = self.now_ms()
        if kind == STACK_TYPE:
            event_id = str(uuid.uuid4())
        else:
            stamp = datetime.fromtimestamp(now / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            event_id = f"{logical_id}-{status}-{stamp[:-4]}Z"
        stack.add_event(
            StackEvent(
                event_id,
                logical_id,
                physical_id,
                kind,
                status,
                reason,
                now,
                json.dumps(properties) if properties is not None else "",
                self.token,
            )
        )

    async def _stack_status(self, stack: Stack, status: str, reason: str = "") -> None:
        stack.status = status
        stack.status_reason = reason
        self._event(stack, stack.name, stack.stack_id, STACK_TYPE, status, reason)
        await self._save(stack)

    async def _resource_status(
        self,
        stack: Stack,
        state: ResourceState,
        status: str,
        reason: str = "",
        properties: dict[str, Any] | None = None,
    ) -> None:
        state.status = status
        state.reason = reason
        state.updated_ms = self.now_ms()
        stack.resources[state.logical_id] = state
        self._event(
            stack, state.logical_id, state.physical_id, state.type, status, reason, properties
        )
        await self._save(stack)

    def _env(self, stack: Stack, logical_id: str) -> HandlerEnv:
        return HandlerEnv(self.sqs, stack.name, logical_id, dict(stack.tags))

    def _scope(self, stack: Stack, template: Template) -> Scope:
        self._imported = []
        return stack_scope(stack, template, stack.parameters, self.store, self._imported)

    # ---- create

    async def create(self, stack: Stack) -> None:
        """Make the stack's resources (its template and parameters are set); on a failure,
        roll back unless the stack disables rollback."""
        template = parse(stack.template_body)
        await self._stack_status(stack, "CREATE_IN_PROGRESS", "User Initiated")
        made: list[str] = []
        try:
            scope = self._scope(stack, template)
            for logical_id in included_order(template, scope):
                made.append(logical_id)
                await self._create_resource(stack, template, scope, logical_id)
            self._set_outputs(stack, template, scope)
        except _Failed as failed:
            reason = failed.reason
            if stack.disable_rollback:
                await self._stack_status(stack, "CREATE_FAILED", reason)
                return
            await self._stack_status(stack, "ROLLBACK_IN_PROGRESS", reason)
            failures = await self._delete_resources(stack, made, rollback=True)
            await self._stack_status(
                stack, "ROLLBACK_FAILED" if failures else "ROLLBACK_COMPLETE", failures
            )
            return
        await self._stack_status(stack, "CREATE_COMPLETE")

    async def _create_resource(
        self, stack: Stack, template: Template, scope: Scope, logical_id: str
    ) -> ResourceState:
        declaration = template.resources[logical_id]
        state = ResourceState(
            logical_id,
            str(declaration["Type"]),
            "CREATE_IN_PROGRESS",
            deletion_policy=str(declaration.get("DeletionPolicy", "Delete")),
            depends_on=sorted(template.dependencies(logical_id)),
        )
        props: dict[str, Any] = {}
        try:
            props = _properties(scope, declaration)
            await self._resource_status(stack, state, "CREATE_IN_PROGRESS", "", props)
            handler = HANDLERS[state.type]
            check_properties(handler, logical_id, props)
            made = await handler.create(self._env(stack, logical_id), props)
        except (ResourceFailed, CloudFormationError) as error:
            await self._resource_status(stack, state, "CREATE_FAILED", _why(error), props)
            raise _Failed(
                f"The following resource(s) failed to create: [{logical_id}]. "
                "Rollback requested by user."
            ) from error
        _record(state, made, props)
        await self._resource_status(stack, state, "CREATE_COMPLETE", "", props)
        return state

    def _set_outputs(self, stack: Stack, template: Template, scope: Scope) -> None:
        try:
            stack.outputs = _outputs(template, scope)
        except CloudFormationError as error:
            raise _Failed(f"Outputs: {error.message}") from error
        exports = self.store.exports(stack.region, stack.account_id)
        for output in stack.outputs:
            name = output.get("ExportName")
            if name and name in exports and exports[name][0] != stack.stack_id:
                holder = self.store.by_id(exports[name][0])
                raise _Failed(
                    f"Export with name {name} is already exported by stack "
                    f"{holder.name if holder else exports[name][0]}"
                )
        stack.imports = list(self._imported)
        stack.description = template.description

    # ---- delete

    async def delete(self, stack: Stack) -> None:
        await self._stack_status(stack, "DELETE_IN_PROGRESS", "User Initiated")
        in_use = self._exports_in_use(stack, [])
        if in_use:
            await self._stack_status(stack, "DELETE_FAILED", in_use)
            return
        live = [lid for lid, s in stack.resources.items() if _exists(s)]
        failures = await self._delete_resources(stack, _creation_order(stack, live), False)
        if failures:
            await self._stack_status(stack, "DELETE_FAILED", failures)
            return
        stack.deleted_ms = self.now_ms()
        await self._stack_status(stack, "DELETE_COMPLETE")

    def _exports_in_use(self, stack: Stack, kept: list[dict[str, str]]) -> str:
        """Why the stack's exports that `kept` leaves out cannot go, or ""."""
        kept_names = {o.get("ExportName") for o in kept}
        for output in stack.outputs:
            name = output.get("ExportName")
            if not name or name in kept_names:
                continue
            users = [
                n
                for n in self.store.importers(stack.region, stack.account_id, name)
                if n != stack.name
            ]
            if users:
                return f"Export {name} cannot be deleted as it is in use by {', '.join(users)}"
        return ""

    async def _delete_resources(self, stack: Stack, logical_ids: list[str], rollback: bool) -> str:
        """Delete these resources, last made first; returns the failures' reason, or ""."""
        failed: list[str] = []
        for logical_id in reversed(logical_ids):
            state = stack.resources.get(logical_id)
            if state is None or state.status.startswith("DELETE_"):
                continue
            if not state.physical_id:  # its creation failed: nothing was made
                await self._resource_status(stack, state, "DELETE_COMPLETE")
                continue
            policy = state.deletion_policy
            if policy == "Retain" or (policy == "RetainExceptOnCreate" and not rollback):
                await self._resource_status(stack, state, "DELETE_SKIPPED")
                continue
            await self._resource_status(stack, state, "DELETE_IN_PROGRESS")
            try:
                await HANDLERS[state.type].delete(
                    self._env(stack, logical_id), state.physical_id, state.properties
                )
            except ResourceFailed as error:
                await self._resource_status(stack, state, "DELETE_FAILED", error.reason)
                failed.append(logical_id)
                continue
            await self._resource_status(stack, state, "DELETE_COMPLETE")
        if failed:
            return f"The following resource(s) failed to delete: [{', '.join(failed)}]. "
        return ""

    # ---- update

    async def update(self, stack: Stack, before: Stack) -> None:
        """Bring the stack's resources to its (new) template and parameters; `before` is the
        stack as it stood, which a rollback returns to."""
        template = parse(stack.template_body)
        await self._stack_status(stack, "UPDATE_IN_PROGRESS", "User Initiated")
        touched: list[_Touched] = []
        try:
            scope = self._scope(stack, template)
            included = included_order(template, scope)
            for logical_id in included:
                await self._update_resource(stack, template, scope, logical_id, touched)
            self._set_outputs(stack, template, scope)
            in_use = self._exports_in_use(before, stack.outputs)
            if in_use:
                raise _Failed(in_use)
        except _Failed as failed:
            await self._roll_back_update(stack, before, touched, failed.reason)
            return
        await self._stack_status(stack, "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS")
        await self._clean_up(stack, before, touched, set(included))
        stack.updated_ms = self.now_ms()
        await self._stack_status(stack, "UPDATE_COMPLETE")

    async def _update_resource(
        self,
        stack: Stack,
        template: Template,
        scope: Scope,
        logical_id: str,
        touched: list[_Touched],
    ) -> None:
        declaration = template.resources[logical_id]
        old = stack.resources.get(logical_id)
        if old is None or not _exists(old):
            touched.append(_Touched(logical_id, None))
            await self._create_resource(stack, template, scope, logical_id)
            return
        kind = str(declaration["Type"])
        policy = str(declaration.get("DeletionPolicy", "Delete"))
        props: dict[str, Any] = {}
        state = replace(old, depends_on=sorted(template.dependencies(logical_id)))
        try:
            props = _properties(scope, declaration)
            handler = HANDLERS[kind]
            if kind == old.type and props == old.properties:
                if policy != old.deletion_policy or state.depends_on != old.depends_on:
                    state.deletion_policy = policy
                    stack.resources[logical_id] = state
                return
            check_properties(handler, logical_id, props)
            state.deletion_policy = policy
            if kind != old.type or needs_replacement(handler, old.properties, props):
                touched.append(_Touched(logical_id, old, replaced=True))
                state.type = kind
                await self._resource_status(stack, state, "UPDATE_IN_PROGRESS", REPLACING, props)
                made = await handler.create(self._env(stack, logical_id), props)
            else:
                touched.append(_Touched(logical_id, old))
                await self._resource_status(stack, state, "UPDATE_IN_PROGRESS", "", props)
                made = await handler.update(
                    self._env(stack, logical_id), old.physical_id, old.properties, props
                )
        except (ResourceFailed, CloudFormationError) as error:
            await self._resource_status(stack, state, "UPDATE_FAILED", _why(error), props)
            raise _Failed(
                f"The following resource(s) failed to update: [{logical_id}]. "
            ) from error
        _record(state, made, props)
        await self._resource_status(stack, state, "UPDATE_COMPLETE", "", props)

    async def _clean_up(
        self, stack: Stack, before: Stack, touched: list[_Touched], included: set[str]
    ) -> None:
        """After an update: delete the replaced resources' old copies, then the resources
        the new template no longer has."""
        for item in reversed(touched):
            if item.replaced and item.before is not None:
                await self._delete_old_copy(stack, item.before)
        gone = [lid for lid, s in before.resources.items() if _exists(s) and lid not in included]
        for logical_id in reversed(_creation_order(before, gone)):
            await self._delete_resources(stack, [logical_id], rollback=False)
            if stack.resources[logical_id].status != "DELETE_FAILED":
                stack.resources.pop(logical_id, None)  # retained ones leave the stack too
        await self._save(stack)

    async def _delete_old_copy(self, stack: Stack, old: ResourceState) -> None:
        current = stack.resources.get(old.logical_id)
        self._event(stack, old.logical_id, old.physical_id, old.type, "DELETE_IN_PROGRESS")
        try:
            await HANDLERS[old.type].delete(
                self._env(stack, old.logical_id), old.physical_id, old.properties
            )
            self._event(stack, old.logical_id, old.physical_id, old.type, "DELETE_COMPLETE")
        except ResourceFailed as error:
            # AWS leaves a cleanup failure in the events and completes the update.
            self._event(
                stack, old.logical_id, old.physical_id, old.type, "DELETE_FAILED", error.reason
            )
        if current is not None:
            stack.resources[old.logical_id] = current
        await self._save(stack)

    async def _roll_back_update(
        self, stack: Stack, before: Stack, touched: list[_Touched], reason: str
    ) -> None:
        await self._stack_status(stack, "UPDATE_ROLLBACK_IN_PROGRESS", reason)
        leftovers: list[ResourceState] = []  # copies made by the update, deleted at the end
        failures: list[str] = []
        for item in reversed(touched):
            current = stack.resources.get(item.logical_id)
            if item.before is None:
                if current is not None and current.physical_id:
                    leftovers.append(current)
                stack.resources.pop(item.logical_id, None)
            elif item.replaced:
                if current is not None and current.physical_id != item.before.physical_id:
                    leftovers.append(current)
                restored = replace(item.before)
                await self._resource_status(stack, restored, "UPDATE_COMPLETE")
            else:
                restored = replace(item.before)
                await self._resource_status(
                    stack, restored, "UPDATE_IN_PROGRESS", "", restored.properties
                )
                try:
                    props = current.properties if current is not None else {}
                    await HANDLERS[restored.type].update(
                        self._env(stack, item.logical_id),
                        restored.physical_id,
                        props,
                        restored.properties,
                    )
                except ResourceFailed as error:
                    await self._resource_status(stack, restored, "UPDATE_FAILED", error.reason)
                    failures.append(item.logical_id)
                    continue
                await self._resource_status(stack, restored, "UPDATE_COMPLETE")
        for logical_id, state in before.resources.items():
            stack.resources.setdefault(logical_id, state)
        stack.template_body = before.template_body
        stack.parameters = before.parameters
        stack.outputs = before.outputs
        stack.description = before.description
        stack.tags = before.tags
        stack.imports = before.imports
        if failures:
            await self._stack_status(
                stack,
                "UPDATE_ROLLBACK_FAILED",
                f"The following resource(s) failed to update: [{', '.join(failures)}]. ",
            )
            return
        await self._stack_status(stack, "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS")
        for leftover in leftovers:
            await self._delete_old_copy(stack, leftover)
        await self._stack_status(stack, "UPDATE_ROLLBACK_COMPLETE")


def _properties(scope: Scope, declaration: dict[str, Any]) -> dict[str, Any]:
    props = scope.resolve(declaration.get("Properties", {}))
    if not isinstance(props, dict):
        raise ResourceFailed("Properties must be an object")
    return props


def _record(state: ResourceState, made: Made, props: dict[str, Any]) -> None:
    state.physical_id = made.physical_id
    state.attributes = dict(made.attributes)
    state.properties = props


def _why(error: ResourceFailed | CloudFormationError) -> str:
    return error.reason if isinstance(error, ResourceFailed) else error.message


def _exists(state: ResourceState) -> bool:
    return bool(state.physical_id) and state.status not in ("DELETE_COMPLETE", "DELETE_SKIPPED")


def _creation_order(stack: Stack, logical_ids: list[str]) -> list[str]:
    """`logical_ids` with each after the resources it depended on when made."""
    wanted = set(logical_ids)
    done: list[str] = []
    pending = {lid: set(stack.resources[lid].depends_on) & wanted for lid in logical_ids}
    while pending:
        ready = [lid for lid in logical_ids if lid in pending and not pending[lid] - set(done)]
        if not ready:  # cannot happen for what a template allowed; keep going regardless
            ready = [next(iter(pending))]
        for lid in ready:
            done.append(lid)
            del pending[lid]
    return done


def _outputs(template: Template, scope: Scope) -> list[dict[str, str]]:
    outputs = []
    for output_id, declaration in template.outputs.items():
        if not scope.included(declaration):
            continue
        value = scope.resolve(declaration["Value"])
        output = {
            "OutputKey": output_id,
            "OutputValue": ",".join(map(str, value)) if isinstance(value, list) else str(value),
        }
        if "Description" in declaration:
            output["Description"] = str(scope.resolve(declaration["Description"]))
        export = declaration.get("Export")
        if isinstance(export, dict) and "Name" in export:
            output["ExportName"] = str(scope.resolve(export["Name"]))
        outputs.append(output)
    return outputs
