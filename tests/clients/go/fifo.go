// A FIFO queue through the AWS SDK for Go v2: group order, deduplication, a batch, a batch
// refused whole, and a group made available again by ending one message's visibility
// (tests/clients/test_clients_node_go.py). Run as: sqs-roundtrip <endpoint> <name> fifo.
package main

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

func groupOf(body string) *string {
	return aws.String(strings.SplitN(body, "-", 2)[0])
}

func runFifo(ctx context.Context, endpoint, name string) (map[string]any, error) {
	client, err := kqsClient(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	created, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(name + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true"},
	})
	if err != nil {
		return nil, err
	}
	url := created.QueueUrl
	out["queue_url"] = *url

	send := func(body string) (*sqs.SendMessageOutput, error) {
		return client.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl: url, MessageBody: aws.String(body),
			MessageGroupId: groupOf(body), MessageDeduplicationId: aws.String(body),
		})
	}
	sent := map[string]map[string]string{}
	for _, body := range []string{"g1-m1", "g2-m1", "g1-m2"} {
		answer, err := send(body)
		if err != nil {
			return nil, err
		}
		sent[body] = map[string]string{
			"id": aws.ToString(answer.MessageId), "sequence": aws.ToString(answer.SequenceNumber),
		}
	}
	out["sent"] = sent
	duplicate, err := send("g1-m1")
	if err != nil {
		return nil, err
	}
	out["duplicate"] = aws.ToString(duplicate.MessageId)

	var entries []types.SendMessageBatchRequestEntry
	for i, body := range []string{"g2-m2", "g3-m1"} {
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id: aws.String("e" + string(rune('0'+i))), MessageBody: aws.String(body),
			MessageGroupId: groupOf(body), MessageDeduplicationId: aws.String(body),
		})
	}
	batch, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: entries})
	if err != nil {
		return nil, err
	}
	var batchSent [][]any
	for _, e := range batch.Successful {
		batchSent = append(batchSent, []any{aws.ToString(e.Id), aws.ToString(e.SequenceNumber) != ""})
	}
	out["batch_sent"] = batchSent
	out["batch_failed"] = len(batch.Failed)

	_, err = client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("ok"), MessageBody: aws.String("g4-m1"), MessageGroupId: aws.String("g4"), MessageDeduplicationId: aws.String("g4-m1")},
		{Id: aws.String("nogroup"), MessageBody: aws.String("g4-m2"), MessageDeduplicationId: aws.String("g4-m2")},
	}})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		out["refused_batch"] = map[string]string{"name": apiErr.ErrorCode(), "message": apiErr.ErrorMessage()}
	} else if err != nil {
		return nil, err
	} else {
		out["refused_batch"] = nil
	}

	receive := func() ([]types.Message, error) {
		answer, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{
				types.MessageSystemAttributeNameMessageGroupId,
				types.MessageSystemAttributeNameSequenceNumber,
				types.MessageSystemAttributeNameMessageDeduplicationId,
			},
		})
		if err != nil {
			return nil, err
		}
		return answer.Messages, nil
	}
	bodies := func(messages []types.Message) []string {
		names := []string{}
		for _, m := range messages {
			names = append(names, aws.ToString(m.Body))
		}
		return names
	}
	first, err := receive()
	if err != nil {
		return nil, err
	}
	var firstOut []map[string]string
	handles := map[string]*string{}
	for _, m := range first {
		firstOut = append(firstOut, map[string]string{
			"body": aws.ToString(m.Body), "group": m.Attributes["MessageGroupId"],
			"sequence": m.Attributes["SequenceNumber"], "deduplication_id": m.Attributes["MessageDeduplicationId"],
		})
		handles[aws.ToString(m.Body)] = m.ReceiptHandle
	}
	out["first_receive"] = firstOut
	inFlight, err := receive()
	if err != nil {
		return nil, err
	}
	out["while_in_flight"] = bodies(inFlight)

	// Ending g1-m1's visibility makes it, and so its group, available; g1-m2 stays in flight.
	if _, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: url, ReceiptHandle: handles["g1-m1"], VisibilityTimeout: 0,
	}); err != nil {
		return nil, err
	}
	again, err := receive()
	if err != nil {
		return nil, err
	}
	out["after_visibility_ended"] = bodies(again)
	for _, m := range again {
		handles[aws.ToString(m.Body)] = m.ReceiptHandle
	}
	for _, handle := range handles {
		if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: handle}); err != nil {
			return nil, err
		}
	}
	counts, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: url,
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return nil, err
	}
	out["final_counts"] = counts.Attributes
	return out, nil
}
