#!/bin/bash
# LocalStack ready hook (docker-compose.yml mounts it in /etc/localstack/init/ready.d):
# - junban's queue pairs as `junbanctl queues create` makes them (internal/platform/config's
#   SQS.Pairs): each dead-letter queue, then its work queue with the redrive policy to it
#   and junbanctl's defaults (internal/queue/provision.go); and the same pairs as FIFO
#   queues, as `junbanctl queues create --fifo` makes them (a FIFO queue's DLQ is FIFO too);
# - the SNS topics a shop publishes its order events to, `orders` and the FIFO `orders.fifo`,
#   each with the orders queue of its kind subscribed with raw delivery off: the queue
#   receives SNS notifications, which the order-worker unwraps. LocalStack lets the topic
#   send to the queue as it is; on AWS the queue's policy must allow it (sqs:SendMessage
#   from sns.amazonaws.com, with the topic's ARN as aws:SourceArn).
# - the outbound topic `junban-outbound` the persist-worker's relay publishes junban's order
#   and stock events to (JUNBAN_OUTBOX_TOPIC_ARN), and a shop's queue `shop-outbound`
#   subscribed to it with raw delivery on: it gets each message as published, as
#   `junbanctl topics subscribe ARN --queue shop-outbound` makes it.
# awslocal runs inside the container, where junbanctl is not. deploy/compose_test.go reads
# the three settings and the pair/queue/topic/subscribe/subscribe_raw lines below (one per line, unindented)
# and compares them with junbanctl's queues; the compose healthcheck looks for the last
# subscription, so it stays the last step.
set -euo pipefail
region=${AWS_DEFAULT_REGION:-us-east-1}

# junbanctl's defaults: queue.MaxReceiveCountDefault, VisibilityTimeoutDefault (seconds) and
# DLQRetentionDefault (seconds, 14 days).
max_receive_count=5
visibility_timeout=60
dlq_retention=1209600

declare -A topic_arn

# pair QUEUE DLQ: the dead-letter queue DLQ, then the work queue QUEUE redriving to it after
# max_receive_count receives; FIFO queues when QUEUE's name ends in .fifo (DLQ's must too).
pair() {
  local queue=$1 dlq=$2 fifo='' dlq_url dlq_arn redrive
  if [[ $queue == *.fifo ]]; then
    fifo=',"FifoQueue":"true"'
  fi
  dlq_url=$(awslocal sqs create-queue --region "$region" --queue-name "$dlq" \
    --attributes "{\"MessageRetentionPeriod\":\"$dlq_retention\"$fifo}" --query QueueUrl --output text)
  dlq_arn=$(awslocal sqs get-queue-attributes --region "$region" --queue-url "$dlq_url" \
    --attribute-names QueueArn --query Attributes.QueueArn --output text)
  # RedrivePolicy is a JSON document in a string attribute: its quotes are escaped once more.
  redrive="{\\\"deadLetterTargetArn\\\":\\\"$dlq_arn\\\",\\\"maxReceiveCount\\\":\\\"$max_receive_count\\\"}"
  awslocal sqs create-queue --region "$region" --queue-name "$queue" \
    --attributes "{\"VisibilityTimeout\":\"$visibility_timeout\",\"RedrivePolicy\":\"$redrive\"$fifo}" >/dev/null
}

# topic NAME: an SNS topic, FIFO when NAME ends in .fifo.
topic() {
  local attrs=()
  if [[ $1 == *.fifo ]]; then
    attrs=(--attributes FifoTopic=true)
  fi
  topic_arn[$1]=$(awslocal sns create-topic --region "$region" --name "$1" "${attrs[@]}" \
    --query TopicArn --output text)
}

# subscribe TOPIC QUEUE: QUEUE gets what is published to TOPIC, as SNS notifications (raw
# delivery off).
subscribe() {
  local queue_url queue_arn
  queue_url=$(awslocal sqs get-queue-url --region "$region" --queue-name "$2" --query QueueUrl --output text)
  queue_arn=$(awslocal sqs get-queue-attributes --region "$region" --queue-url "$queue_url" \
    --attribute-names QueueArn --query Attributes.QueueArn --output text)
  awslocal sns subscribe --region "$region" --topic-arn "${topic_arn[$1]}" --protocol sqs \
    --notification-endpoint "$queue_arn" --attributes RawMessageDelivery=false >/dev/null
}

# queue NAME: a plain queue (a consumer's: no dead-letter queue of junban's).
queue() {
  awslocal sqs create-queue --region "$region" --queue-name "$1" >/dev/null
}

# subscribe_raw TOPIC QUEUE: QUEUE gets what is published to TOPIC as published (raw
# delivery on).
subscribe_raw() {
  local queue_url queue_arn
  queue_url=$(awslocal sqs get-queue-url --region "$region" --queue-name "$2" --query QueueUrl --output text)
  queue_arn=$(awslocal sqs get-queue-attributes --region "$region" --queue-url "$queue_url" \
    --attribute-names QueueArn --query Attributes.QueueArn --output text)
  awslocal sns subscribe --region "$region" --topic-arn "${topic_arn[$1]}" --protocol sqs \
    --notification-endpoint "$queue_arn" --attributes RawMessageDelivery=true >/dev/null
}

pair orders orders-dlq
pair results results-dlq
pair orders.fifo orders-dlq.fifo
pair results.fifo results-dlq.fifo
topic orders
topic orders.fifo
queue shop-outbound
topic junban-outbound
subscribe_raw junban-outbound shop-outbound
subscribe orders orders
subscribe orders.fifo orders.fifo
echo "junban queues and topics ready"
