"""KQS's own SQS actions in botocore's SQS service model, so boto3 and botocore call them.

`kqs replay` and `kqs peek` call StartMessageReplayTask, ListMessageReplayTasks,
CancelMessageReplayTask and PeekMessages through a botocore client, which signs with the
usual AWS credentials (environment, profile, ...) and parses answers and errors as for any
SQS action. `KqsLoader` is botocore's data loader with these operations added to whichever
SQS model it loads: today's (JSON 1.0) or an older one speaking Query (the tests' second
protocol), with the member names each protocol's wire uses.
"""

from __future__ import annotations

import copy
from typing import Any

import botocore.session
from botocore.loaders import Loader

_LONG = {"type": "long"}
_INTEGER = {"type": "integer"}
_STRING = {"type": "string"}


def _shapes(query: bool) -> dict[str, Any]:
    def offsets(item: str) -> dict[str, Any]:
        shape: dict[str, Any] = {
            "type": "map",
            "key": {"shape": "KqsString", "locationName": "Key"},
            "value": {"shape": "KqsString", "locationName": "Value"},
        }
        if query:
            shape["flattened"] = True
        return shape

    def located(shape: str, name: str) -> dict[str, Any]:
        member: dict[str, Any] = {"shape": shape}
        if query:
            member["locationName"] = name
        return member

    task_members = {
        name: {"shape": shape}
        for name, shape in (
            ("TaskHandle", "KqsString"),
            ("Status", "KqsString"),
            ("SourceArn", "KqsString"),
            ("DestinationArn", "KqsString"),
            ("SinceTimestamp", "KqsLong"),
            ("UntilTimestamp", "KqsLong"),
            ("MaxNumberOfMessagesPerSecond", "KqsInteger"),
            ("ApproximateNumberOfMessagesReplayed", "KqsLong"),
            ("ApproximateNumberOfMessagesToReplay", "KqsLong"),
            ("FailureReason", "KqsString"),
            ("StartedTimestamp", "KqsLong"),
        )
    }
    return {
        "KqsString": _STRING,
        "KqsLong": _LONG,
        "KqsInteger": _INTEGER,
        "KqsStringList": {
            "type": "list",
            "member": {"shape": "KqsString", "locationName": "Status"},
            **({"flattened": True} if query else {}),
        },
        "KqsStartOffsets": offsets("StartOffset"),
        "KqsEndOffsets": offsets("EndOffset"),
        "StartMessageReplayTaskRequest": {
            "type": "structure",
            "required": ["QueueUrl"],
            "members": {
                "QueueUrl": {"shape": "KqsString"},
                "DestinationQueueUrl": {"shape": "KqsString"},
                "SinceTimestamp": {"shape": "KqsLong"},
                "UntilTimestamp": {"shape": "KqsLong"},
                "StartOffsets": located("KqsStartOffsets", "StartOffset"),
                "EndOffsets": located("KqsEndOffsets", "EndOffset"),
                "MaxNumberOfMessagesPerSecond": {"shape": "KqsInteger"},
            },
        },
        "StartMessageReplayTaskResult": {
            "type": "structure",
            "members": {
                "TaskHandle": {"shape": "KqsString"},
                "ApproximateNumberOfMessagesToReplay": {"shape": "KqsLong"},
            },
        },
        "ListMessageReplayTasksRequest": {
            "type": "structure",
            "required": ["QueueUrl"],
            "members": {"QueueUrl": {"shape": "KqsString"}, "MaxResults": {"shape": "KqsInteger"}},
        },
        "MessageReplayTask": {"type": "structure", "members": task_members},
        "MessageReplayTaskList": {
            "type": "list",
            "member": {"shape": "MessageReplayTask", "locationName": "MessageReplayTask"},
            **({"flattened": True} if query else {}),
        },
        "ListMessageReplayTasksResult": {
            "type": "structure",
            "members": {"Tasks": {"shape": "MessageReplayTaskList"}},
        },
        "CancelMessageReplayTaskRequest": {
            "type": "structure",
            "required": ["TaskHandle"],
            "members": {"TaskHandle": {"shape": "KqsString"}},
        },
        "CancelMessageReplayTaskResult": {
            "type": "structure",
            "members": {"ApproximateNumberOfMessagesReplayed": {"shape": "KqsLong"}},
        },
        "PeekMessagesRequest": {
            "type": "structure",
            "required": ["QueueUrl"],
            "members": {
                "QueueUrl": {"shape": "KqsString"},
                "MaxNumberOfMessages": {"shape": "KqsInteger"},
                "Order": {"shape": "KqsString"},
                "Statuses": located("KqsStringList", "Status"),
                "BodyPreviewLength": {"shape": "KqsInteger"},
                "NextToken": {"shape": "KqsString"},
            },
        },
        "PeekMessagesResult": {
            "type": "structure",
            "members": {
                "Messages": {"shape": "MessageList"},
                "NextToken": {"shape": "KqsString"},
                "OldestAvailableTimestamp": {"shape": "KqsLong"},
                "MessageRetentionPeriod": {"shape": "KqsInteger"},
                "TopicRetentionMs": {"shape": "KqsLong"},
            },
        },
    }


OPERATIONS = (
    "StartMessageReplayTask",
    "ListMessageReplayTasks",
    "CancelMessageReplayTask",
    "PeekMessages",
)


def with_kqs_operations(model: dict[str, Any]) -> dict[str, Any]:
    """A copy of an SQS service model with KQS's operations and shapes added."""
    query = model["metadata"]["protocol"] == "query"
    out = copy.deepcopy(model)
    out["shapes"].update(_shapes(query))
    for name in OPERATIONS:
        output: dict[str, Any] = {"shape": f"{name}Result"}
        if query:
            output["resultWrapper"] = f"{name}Result"
        out["operations"][name] = {
            "name": name,
            "http": {"method": "POST", "requestUri": "/"},
            "input": {"shape": f"{name}Request"},
            "output": output,
        }
    return out


class KqsLoader(Loader):  # type: ignore[misc]  # botocore ships no types
    """botocore's loader, adding KQS's operations to the SQS model it loads."""

    def load_service_model(
        self, service_name: str, type_name: str, api_version: str | None = None
    ) -> Any:
        model = super().load_service_model(service_name, type_name, api_version)
        if service_name == "sqs" and type_name == "service-2":
            return with_kqs_operations(model)
        return model


def kqs_session(extra_model_dirs: tuple[str, ...] = ()) -> botocore.session.Session:
    """A botocore session whose SQS clients have KQS's operations; `extra_model_dirs` come
    first in the model search path (an older SQS model, for the Query protocol)."""
    session = botocore.session.Session()
    loader = KqsLoader()
    for path in reversed(extra_model_dirs):
        loader.search_paths.insert(0, path)
    session.register_component("data_loader", loader)
    return session
