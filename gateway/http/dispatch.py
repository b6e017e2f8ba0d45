"""Action name -> action module, for every SQS action the gateway serves."""

from __future__ import annotations

from typing import Any

from gateway.actions import (
    add_permission,
    cancel_message_move_task,
    cancel_message_replay_task,
    change_message_visibility,
    change_message_visibility_batch,
    create_queue,
    delete_message,
    delete_message_batch,
    delete_queue,
    get_queue_attributes,
    get_queue_url,
    list_dead_letter_source_queues,
    list_message_move_tasks,
    list_message_replay_tasks,
    list_queue_tags,
    list_queues,
    peek_messages,
    purge_queue,
    receive_message,
    remove_permission,
    send_message,
    send_message_batch,
    set_queue_attributes,
    start_message_move_task,
    start_message_replay_task,
    tag_queue,
    untag_queue,
)
from gateway.actions.action import Action

ACTIONS: dict[str, Action[Any]] = {
    action.name: action
    for action in (
        add_permission.ACTION,
        cancel_message_move_task.ACTION,
        change_message_visibility.ACTION,
        change_message_visibility_batch.ACTION,
        create_queue.ACTION,
        delete_message.ACTION,
        delete_message_batch.ACTION,
        delete_queue.ACTION,
        get_queue_attributes.ACTION,
        get_queue_url.ACTION,
        list_dead_letter_source_queues.ACTION,
        list_message_move_tasks.ACTION,
        list_queue_tags.ACTION,
        list_queues.ACTION,
        purge_queue.ACTION,
        receive_message.ACTION,
        remove_permission.ACTION,
        send_message.ACTION,
        send_message_batch.ACTION,
        set_queue_attributes.ACTION,
        start_message_move_task.ACTION,
        tag_queue.ACTION,
        untag_queue.ACTION,
        # KQS's own (gateway/sqs/replay/): replay a queue's log, browse a queue.
        start_message_replay_task.ACTION,
        list_message_replay_tasks.ACTION,
        cancel_message_replay_task.ACTION,
        peek_messages.ACTION,
    )
}
