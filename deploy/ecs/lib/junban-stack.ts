// junban on AWS: the orders and results queues with their dead-letter queues, the
// outbound SNS topic and the subscriptions of the shop's inbound topics, the secrets, one
// IAM task role per service with only the SQS and SNS actions its binary calls, and the
// four services on ECS Fargate with their health checks, stop timeouts and scaling on the
// backlog per task. deploy/ecs_test.go checks the synthesized template against the Go code.
import { Duration, RemovalPolicy, Stack, StackProps } from 'aws-cdk-lib';
import * as applicationautoscaling from 'aws-cdk-lib/aws-applicationautoscaling';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct, Node } from 'constructs';

// JUNBAN_SHUTDOWN_BUDGET (docs/configuration.md): the drain after SIGTERM. ECS sends
// SIGKILL stopTimeout after SIGTERM, so the timeout is the budget, the 5 s the
// order-worker takes after it to leave its turns and close HTTP, and 5 s of margin.
export const SHUTDOWN_BUDGET_SECONDS = 25;
export const STOP_TIMEOUT_SECONDS = SHUTDOWN_BUDGET_SECONDS + 5 + 5;
// The port of /healthz, /readyz and /metrics in every container (JUNBAN_HTTP_ADDR; the
// gateway's JUNBAN_WEBHOOK_ADMIN_ADDR), and the gateway's public webhook port.
const HEALTH_PORT = 8080;
const WEBHOOK_PORT = 8443;
const API_PORT = 8090;
// Backlog each task of a worker should have at most: the target of the scaling policy.
const BACKLOG_PER_TASK = 500;

// Settings is what a deployment chooses: cdk.json context or `-c key=value`.
export interface Settings {
  // FIFO queues and a FIFO outbound topic (names ending .fifo) instead of standard ones.
  fifo: boolean;
  // Registry path of the images, without the binary's name: <repository>/<binary>:<tag>.
  imageRepository: string;
  imageTag: string;
  // ARNs of the shop's SNS topics whose events junban applies: each gets a subscription
  // of the orders queue, filtered to the types junban knows (docs/events.md).
  inboundTopicArns: string[];
  // Most tasks of each worker service.
  maxTasks: number;
  // ACM certificate of the gateway's HTTPS listener; without it the listener is HTTP.
  certificateArn?: string;
}

const defaults: Settings = {
  fifo: false,
  imageRepository: '123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/junban',
  imageTag: '0.8.0',
  inboundTopicArns: [],
  maxTasks: 10,
};

// settingsFrom reads the context, with the defaults above for what it does not give.
export function settingsFrom(node: Node): Settings {
  const get = <K extends keyof Settings>(k: K): Settings[K] => {
    const v = node.tryGetContext(k);
    return (v === undefined ? defaults[k] : v) as Settings[K];
  };
  const bool = (v: unknown) => v === true || v === 'true';
  const list = (v: unknown) => (Array.isArray(v) ? v : String(v).split(',').filter((s) => s !== '')) as string[];
  return {
    fifo: bool(get('fifo')),
    imageRepository: get('imageRepository'),
    imageTag: get('imageTag'),
    inboundTopicArns: list(get('inboundTopicArns')),
    maxTasks: Number(get('maxTasks')),
    certificateArn: node.tryGetContext('certificateArn'),
  };
}

// The event types an inbound subscription lets through (docs/events.md's kinds).
const INBOUND_TYPES = [
  'order.placed', 'order.lines_changed', 'order.cancelled', 'payment.confirmed', 'payment.failed',
  'payment.refunded', 'shipment.allocated', 'shipment.shipped', 'inventory.sku_registered',
  'inventory.lot_received', 'inventory.adjusted', 'reservation.expired',
];

// A queue and its dead-letter queue.
interface Pair {
  queue: sqs.Queue;
  dlq: sqs.Queue;
}

export class JunbanStack extends Stack {
  constructor(scope: Construct, id: string, s: Settings, props?: StackProps) {
    super(scope, id, props);
    const suffix = s.fifo ? '.fifo' : '';

    const pair = (name: string): Pair => {
      const dlq = new sqs.Queue(this, `${name}-dlq`, {
        queueName: `${name}-dlq${suffix}`,
        fifo: s.fifo || undefined,
        retentionPeriod: Duration.days(14),
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        removalPolicy: RemovalPolicy.RETAIN,
      });
      const queue = new sqs.Queue(this, name, {
        queueName: `${name}${suffix}`,
        fifo: s.fifo || undefined,
        // queue.VisibilityTimeoutDefault and queue.MaxReceiveCountDefault (junbanctl queues create).
        visibilityTimeout: Duration.seconds(60),
        retentionPeriod: Duration.days(4),
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        deadLetterQueue: { queue: dlq, maxReceiveCount: 5 },
        removalPolicy: RemovalPolicy.RETAIN,
      });
      return { queue, dlq };
    };
    const orders = pair('orders');
    const results = pair('results');

    // Outbound: what junban decided, published by the persist-worker's relay.
    const outbound = new sns.Topic(this, 'outbound', {
      topicName: `junban-outbound${suffix}`,
      fifo: s.fifo || undefined,
      enforceSSL: true,
    });
    // Inbound: the shop's topics, each subscribed by the orders queue (the subscription
    // adds the queue policy that lets that topic alone send to it).
    s.inboundTopicArns.forEach((arn, i) => {
      sns.Topic.fromTopicArn(this, `inbound-${i}`, arn).addSubscription(
        new subscriptions.SqsSubscription(orders.queue, {
          filterPolicy: { type: sns.SubscriptionFilter.stringFilter({ allowlist: INBOUND_TYPES }) },
        }),
      );
    });

    // Secrets: created empty-ish (a generated placeholder); put the real values with
    // `aws secretsmanager put-secret-value` before the services start.
    const secret = (name: string, description: string) =>
      new secretsmanager.Secret(this, name, {
        secretName: `junban/${name}`,
        description,
        removalPolicy: RemovalPolicy.RETAIN,
      });
    const databaseURL = secret('database-url', 'DATABASE_URL: the PostgreSQL connection string');
    const redisURL = secret('redis-url', 'REDIS_URL: redis://[:password@]host:port/db (rediss:// for TLS)');
    const webhookProviders = secret('webhook-providers', 'JUNBAN_WEBHOOK_PROVIDERS: name:kind:secret[|secret...], comma separated');
    const apiReadTokens = secret('api-read-tokens', 'JUNBAN_API_READ_TOKENS: bearer tokens of the read scope, comma separated');
    const apiAdminTokens = secret('api-admin-tokens', 'JUNBAN_API_ADMIN_TOKENS: bearer tokens of the admin scope, comma separated');

    const vpc = new ec2.Vpc(this, 'vpc', { maxAzs: 2, natGateways: 1 });
    const cluster = new ecs.Cluster(this, 'cluster', {
      vpc,
      clusterName: 'junban',
      containerInsightsV2: ecs.ContainerInsights.ENABLED, // RunningTaskCount, for the scaling
    });
    const tasksSG = new ec2.SecurityGroup(this, 'tasks', { vpc, description: 'junban tasks: reach Redis, PostgreSQL and AWS' });

    const common: Record<string, string> = {
      AWS_REGION: this.region,
      JUNBAN_LOG_FORMAT: 'json',
      JUNBAN_HTTP_ADDR: `0.0.0.0:${HEALTH_PORT}`,
      JUNBAN_SHUTDOWN_BUDGET: `${SHUTDOWN_BUDGET_SECONDS}s`,
      JUNBAN_ORDERS_QUEUE: orders.queue.queueUrl,
      JUNBAN_ORDERS_DLQ: orders.dlq.queueUrl,
      JUNBAN_RESULTS_QUEUE: results.queue.queueUrl,
      JUNBAN_RESULTS_DLQ: results.dlq.queueUrl,
    };
    const sqsActions = (actions: string[], ...queues: sqs.IQueue[]) =>
      new iam.PolicyStatement({ actions: actions.map((a) => `sqs:${a}`), resources: queues.map((q) => q.queueArn) });

    // One task definition and service per binary; the statements are the SQS and SNS
    // actions the binary's code calls (deploy/ecs_test.go derives them from the Go code).
    const service = (name: string, o: {
      cpu: number; memory: number; desired: number; statements: iam.PolicyStatement[];
      env: Record<string, string>; secrets: Record<string, ecs.Secret>; ports?: number[];
    }) => {
      const role = new iam.Role(this, `${name}-task-role`, {
        roleName: `junban-${name}`,
        assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
        description: `junban ${name}: only the SQS and SNS actions its binary calls`,
      });
      o.statements.forEach((st) => role.addToPolicy(st));
      const td = new ecs.FargateTaskDefinition(this, `${name}-task`, {
        family: `junban-${name}`,
        cpu: o.cpu,
        memoryLimitMiB: o.memory,
        taskRole: role,
        runtimePlatform: { cpuArchitecture: ecs.CpuArchitecture.ARM64, operatingSystemFamily: ecs.OperatingSystemFamily.LINUX },
      });
      td.addContainer(name, {
        image: ecs.ContainerImage.fromRegistry(`${s.imageRepository}/${name}:${s.imageTag}`),
        essential: true,
        environment: { ...common, ...o.env },
        secrets: o.secrets,
        stopTimeout: Duration.seconds(STOP_TIMEOUT_SECONDS),
        // The binary asks its own /healthz: the distroless image has no shell or curl.
        // Liveness, not /readyz: a task whose PostgreSQL is away waits, it is not replaced.
        healthCheck: {
          command: ['CMD', '/app', 'healthcheck'],
          interval: Duration.seconds(15),
          timeout: Duration.seconds(10),
          retries: 3,
          startPeriod: Duration.seconds(60),
        },
        portMappings: [HEALTH_PORT, ...(o.ports ?? [])].map((containerPort) => ({ containerPort })),
        logging: ecs.LogDrivers.awsLogs({
          streamPrefix: name,
          logGroup: new logs.LogGroup(this, `${name}-logs`, { logGroupName: `/junban/${name}`, retention: logs.RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY }),
        }),
      });
      const svc = new ecs.FargateService(this, name, {
        cluster,
        serviceName: name,
        taskDefinition: td,
        desiredCount: o.desired,
        securityGroups: [tasksSG],
        minHealthyPercent: 100,
        maxHealthyPercent: 200,
        circuitBreaker: { rollback: true },
      });
      return { role, td, svc };
    };

    const orderWorker = service('order-worker', {
      cpu: 1024, memory: 2048, desired: 2,
      statements: [
        sqsActions(['ReceiveMessage', 'DeleteMessageBatch', 'ChangeMessageVisibilityBatch', 'GetQueueAttributes', 'GetQueueUrl'], orders.queue),
        sqsActions(['SendMessageBatch', 'GetQueueAttributes', 'GetQueueUrl'], results.queue),
        sqsActions(['SendMessage', 'GetQueueUrl'], orders.dlq, results.dlq),
      ],
      env: {},
      secrets: { DATABASE_URL: ecs.Secret.fromSecretsManager(databaseURL), REDIS_URL: ecs.Secret.fromSecretsManager(redisURL) },
    });
    const persistWorker = service('persist-worker', {
      cpu: 512, memory: 1024, desired: 1,
      statements: [
        sqsActions(['ReceiveMessage', 'DeleteMessageBatch', 'ChangeMessageVisibilityBatch', 'GetQueueAttributes', 'GetQueueUrl'], results.queue),
        sqsActions(['SendMessage', 'GetQueueUrl'], results.dlq),
        new iam.PolicyStatement({ actions: ['sns:PublishBatch'], resources: [outbound.topicArn] }),
      ],
      // Migrations run once per release as the migrate task, not by each replica.
      env: { JUNBAN_MIGRATE: 'false', JUNBAN_OUTBOX_TOPIC_ARN: outbound.topicArn },
      secrets: { DATABASE_URL: ecs.Secret.fromSecretsManager(databaseURL) },
    });
    const gateway = service('webhook-gateway', {
      cpu: 512, memory: 1024, desired: 2,
      statements: [sqsActions(['SendMessage', 'GetQueueAttributes', 'GetQueueUrl'], orders.queue)],
      env: { JUNBAN_HTTP_ADDR: `0.0.0.0:${WEBHOOK_PORT}`, JUNBAN_WEBHOOK_ADMIN_ADDR: `0.0.0.0:${HEALTH_PORT}` },
      secrets: { REDIS_URL: ecs.Secret.fromSecretsManager(redisURL), JUNBAN_WEBHOOK_PROVIDERS: ecs.Secret.fromSecretsManager(webhookProviders) },
      ports: [WEBHOOK_PORT],
    });
    service('junban-api', {
      cpu: 512, memory: 1024, desired: 1,
      statements: [
        sqsActions(['GetQueueAttributes', 'GetQueueUrl'], orders.queue, results.queue),
        // The DLQ endpoints: list (receive, hand back), redrive (send to the queue, delete).
        sqsActions(['GetQueueAttributes', 'GetQueueUrl', 'ReceiveMessage', 'ChangeMessageVisibility', 'DeleteMessage'], orders.dlq, results.dlq),
        sqsActions(['SendMessage'], orders.queue, results.queue),
      ],
      env: { JUNBAN_API_ADDR: `0.0.0.0:${API_PORT}`, JUNBAN_API_ALLOWED_HOSTS: '*' },
      secrets: {
        DATABASE_URL: ecs.Secret.fromSecretsManager(databaseURL), REDIS_URL: ecs.Secret.fromSecretsManager(redisURL),
        JUNBAN_API_READ_TOKENS: ecs.Secret.fromSecretsManager(apiReadTokens), JUNBAN_API_ADMIN_TOKENS: ecs.Secret.fromSecretsManager(apiAdminTokens),
      },
      ports: [API_PORT],
    });

    // The migrations, once per release before the new workers start:
    // aws ecs run-task --cluster junban --task-definition junban-migrate --launch-type FARGATE ...
    const migrateRole = new iam.Role(this, 'migrate-task-role', {
      roleName: 'junban-migrate',
      assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
      description: 'junbanctl migrate: PostgreSQL only, no AWS action',
    });
    const migrate = new ecs.FargateTaskDefinition(this, 'migrate-task', {
      family: 'junban-migrate', cpu: 256, memoryLimitMiB: 512, taskRole: migrateRole,
      runtimePlatform: { cpuArchitecture: ecs.CpuArchitecture.ARM64, operatingSystemFamily: ecs.OperatingSystemFamily.LINUX },
    });
    migrate.addContainer('junbanctl', {
      image: ecs.ContainerImage.fromRegistry(`${s.imageRepository}/junbanctl:${s.imageTag}`),
      command: ['migrate'],
      secrets: { DATABASE_URL: ecs.Secret.fromSecretsManager(databaseURL) },
      logging: ecs.LogDrivers.awsLogs({ streamPrefix: 'migrate' }),
    });

    // The gateway behind a load balancer that routes POST /webhooks/* alone; the admin
    // port (health, metrics) is reached by nothing outside the tasks' security group.
    const alb = new elbv2.ApplicationLoadBalancer(this, 'webhooks', { vpc, internetFacing: true });
    const listener = s.certificateArn
      ? alb.addListener('https', { port: 443, certificates: [elbv2.ListenerCertificate.fromArn(s.certificateArn)], sslPolicy: elbv2.SslPolicy.RECOMMENDED_TLS })
      : alb.addListener('http', { port: 80 });
    listener.addAction('default', { action: elbv2.ListenerAction.fixedResponse(404) });
    listener.addTargets('webhook-gateway', {
      priority: 10,
      conditions: [elbv2.ListenerCondition.pathPatterns(['/webhooks/*']), elbv2.ListenerCondition.httpRequestMethods(['POST'])],
      port: WEBHOOK_PORT,
      protocol: elbv2.ApplicationProtocol.HTTP,
      targets: [gateway.svc.loadBalancerTarget({ containerName: 'webhook-gateway', containerPort: WEBHOOK_PORT })],
      healthCheck: { path: '/healthz', port: String(WEBHOOK_PORT) },
      deregistrationDelay: Duration.seconds(10),
    });

    // Scaling on the backlog per task (AWS's guidance for queue workers): the queue's
    // visible messages over the service's running tasks, tracked to BACKLOG_PER_TASK.
    const backlogScaling = (name: string, svc: ecs.FargateService, queue: sqs.Queue) => {
      const target = svc.autoScaleTaskCount({ minCapacity: 1, maxCapacity: s.maxTasks });
      const policy = new applicationautoscaling.CfnScalingPolicy(this, `${name}-backlog-per-task`, {
        policyName: `${name}-backlog-per-task`,
        policyType: 'TargetTrackingScaling',
        scalingTargetId: (target.node.findChild('Target') as applicationautoscaling.ScalableTarget).scalableTargetId,
        targetTrackingScalingPolicyConfiguration: {
          targetValue: BACKLOG_PER_TASK,
          scaleInCooldown: 120,
          scaleOutCooldown: 60,
          customizedMetricSpecification: {
            metrics: [
              {
                id: 'visible', returnData: false,
                metricStat: { stat: 'Sum', metric: { namespace: 'AWS/SQS', metricName: 'ApproximateNumberOfMessagesVisible', dimensions: [{ name: 'QueueName', value: queue.queueName }] } },
              },
              {
                id: 'tasks', returnData: false,
                metricStat: { stat: 'Average', metric: { namespace: 'ECS/ContainerInsights', metricName: 'RunningTaskCount', dimensions: [{ name: 'ClusterName', value: cluster.clusterName }, { name: 'ServiceName', value: svc.serviceName }] } },
              },
              { id: 'backlog_per_task', expression: 'IF(tasks > 0, visible / tasks, visible)', label: 'backlog per task', returnData: true },
            ],
          },
        },
      });
      policy.node.addDependency(target);
    };
    backlogScaling('order-worker', orderWorker.svc, orders.queue);
    backlogScaling('persist-worker', persistWorker.svc, results.queue);
  }
}
