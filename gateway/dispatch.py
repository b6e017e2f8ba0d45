"""Action name -> action module, for every SQS action the gateway serves."""

from __future__ import annotations

from typing import Any

from gateway.action import Action
from gateway.actions import (
    change_message_visibility,
    create_queue,
    delete_message,
    delete_queue,
    get_queue_url,
    list_queues,
    receive_message,
    send_message,
)

ACTIONS: dict[str, Action[Any]] = {
    action.name: action
    for action in (
        change_message_visibility.ACTION,
        create_queue.ACTION,
        delete_message.ACTION,
        delete_queue.ACTION,
        get_queue_url.ACTION,
        list_queues.ACTION,
        receive_message.ACTION,
        send_message.ACTION,
    )
}
