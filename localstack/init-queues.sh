#!/bin/bash
# LocalStack ready hook (mounted at /etc/localstack/init/ready.d): junban's queues and
# dead-letter queues with their redrive policy, the same as `junbanctl queues create`
# makes (DLQ retention 14 days, visibility timeout 60 s, maxReceiveCount 5). awslocal
# runs inside the container, where junbanctl is not.
set -euo pipefail
region=${AWS_DEFAULT_REGION:-us-east-1}
for q in orders results; do
  awslocal sqs create-queue --region "$region" --queue-name "$q-dlq" \
    --attributes MessageRetentionPeriod=1209600 >/dev/null
  arn=$(awslocal sqs get-queue-attributes --region "$region" \
    --queue-url "http://localhost:4566/000000000000/$q-dlq" \
    --attribute-names QueueArn --query Attributes.QueueArn --output text)
  awslocal sqs create-queue --region "$region" --queue-name "$q" \
    --attributes "{\"VisibilityTimeout\":\"60\",\"RedrivePolicy\":\"{\\\"deadLetterTargetArn\\\":\\\"$arn\\\",\\\"maxReceiveCount\\\":\\\"5\\\"}\"}" >/dev/null
done
echo "junban queues ready"
