// The AWS SDK for Go v2 (service/sqs) against a KQS gateway (tests/clients/test_clients_node_go.py).
// Usage: sqs-roundtrip <endpoint> <queue name> [fifo]; prints one JSON object of observations
// (with `fifo`, the FIFO scenario of fifo.go).
package main

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// README: begin go-client
func kqsClient(ctx context.Context, endpoint string) (*sqs.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(endpoint) // e.g. "http://127.0.0.1:9324"
	}), nil
}

// README: end go-client

func run(ctx context.Context, endpoint, queueName string) (map[string]any, error) {
	client, err := kqsClient(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	created, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(queueName)})
	if err != nil {
		return nil, err
	}
	url := created.QueueUrl
	out["queue_url"] = *url

	body := "héllo from Go ✓"
	sent, err := client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    url,
		MessageBody: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"kind":  {DataType: aws.String("String"), StringValue: aws.String("order")},
			"count": {DataType: aws.String("Number"), StringValue: aws.String("42")},
			"blob":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
		},
	})
	if err != nil {
		return nil, err
	}
	sum := md5.Sum([]byte(body))
	out["sent_id"] = *sent.MessageId
	out["sent_md5_body"] = *sent.MD5OfMessageBody
	out["expected_md5_body"] = hex.EncodeToString(sum[:])
	out["sent_md5_attributes"] = aws.ToString(sent.MD5OfMessageAttributes)

	received, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    url,
		WaitTimeSeconds:             10,
		MaxNumberOfMessages:         10,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, err
	}
	var messages []map[string]any
	for _, m := range received.Messages {
		attrs := map[string]any{}
		for name, v := range m.MessageAttributes {
			value := aws.ToString(v.StringValue)
			if v.BinaryValue != nil {
				value = base64.StdEncoding.EncodeToString(v.BinaryValue)
			}
			attrs[name] = map[string]string{"type": aws.ToString(v.DataType), "value": value}
		}
		messages = append(messages, map[string]any{
			"id":             aws.ToString(m.MessageId),
			"body":           aws.ToString(m.Body),
			"md5_body":       aws.ToString(m.MD5OfBody),
			"md5_attributes": aws.ToString(m.MD5OfMessageAttributes),
			"attributes":     attrs,
			"receive_count":  m.Attributes["ApproximateReceiveCount"],
		})
		if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: m.ReceiptHandle}); err != nil {
			return nil, err
		}
	}
	out["received"] = messages

	var entries []types.SendMessageBatchRequestEntry
	for i := 0; i < 10; i++ {
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id:          aws.String(fmt.Sprintf("e%d", i)),
			MessageBody: aws.String(fmt.Sprintf("batch-%d", i)),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"index": {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(i))},
			},
		})
	}
	batch, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: entries})
	if err != nil {
		return nil, err
	}
	out["batch_sent"] = len(batch.Successful)
	out["batch_failed"] = len(batch.Failed)

	indexByBody := map[string]string{}
	var deletes []types.DeleteMessageBatchRequestEntry
	deadline := time.Now().Add(60 * time.Second)
	for len(indexByBody) < 10 && time.Now().Before(deadline) {
		got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 5,
			MessageAttributeNames: []string{"index"},
		})
		if err != nil {
			return nil, err
		}
		for _, m := range got.Messages {
			indexByBody[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes["index"].StringValue)
			deletes = append(deletes, types.DeleteMessageBatchRequestEntry{
				Id: aws.String(fmt.Sprintf("d%d", len(deletes))), ReceiptHandle: m.ReceiptHandle,
			})
		}
	}
	out["batch_received"] = len(deletes)
	out["batch_index_by_body"] = indexByBody
	deleted, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: url, Entries: deletes})
	if err != nil {
		return nil, err
	}
	out["batch_deleted"] = len(deleted.Successful)
	out["batch_delete_failed"] = len(deleted.Failed)

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

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scenario := run
	if len(os.Args) > 3 && os.Args[3] == "fifo" {
		scenario = runFifo
	}
	out, err := scenario(ctx, os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
