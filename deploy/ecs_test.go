package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/junban/junban/internal/platform/config"
)

// ecsServices are the services deploy/ecs runs on Fargate, each in a task definition
// named junban-<service> with a container of the same name and a task role junban-<service>.
var ecsServices = []string{"order-worker", "persist-worker", "webhook-gateway", "junban-api"}

// overReached are actions awsActions finds in a binary that the binary never calls: the
// analysis follows a call x.M() to every method named M, and these come through such
// names. A role need not grant them; an action found that is neither granted nor listed
// here fails the test, so a new SQS or SNS call needs its grant.
var overReached = map[string][]string{
	// queue.Consumer and queue.Publisher's loops, reached through Run, Stop and Close,
	// which the gateway's own types also have; it only sends (webhook.SQSPublisher).
	"webhook-gateway": {"sqs:ChangeMessageVisibilityBatch", "sqs:DeleteMessageBatch", "sqs:ReceiveMessage", "sqs:SendMessageBatch"},
	// The API lists and redrives the DLQs one message at a time (internal/dlq); the
	// consumer's, the publisher's and the outbound relay's batches come through Run,
	// Stop and Close.
	// The results' publisher's batch (queue.Publisher) comes through Run and Close; the
	// persist-worker sends one message at a time, to its DLQ.
	"persist-worker": {"sqs:SendMessageBatch"},
	"junban-api":     {"sns:PublishBatch", "sqs:ChangeMessageVisibilityBatch", "sqs:DeleteMessageBatch", "sqs:ReceiveMessage", "sqs:SendMessageBatch"},
}

var (
	npmOnce sync.Once
	npmErr  error
	synthMu sync.Mutex
	synthed = map[string]map[string]any{} // context -> template
)

// synth compiles and runs the CDK app in deploy/ecs with the context ctx (JSON) and
// returns the stack's template. The npm packages are installed from the lock file when
// node_modules is absent.
func synth(t *testing.T, ctx string) map[string]any {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the CDK app with node (installs its npm packages when absent); not in -short")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("the CDK app needs node and npm (scripts/stack.sh installs them)")
	}
	dir := filepath.Join(repoRoot(t), "deploy", "ecs")
	run := func(env []string, name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "aws-cdk-lib")); err != nil {
			if npmErr = run(nil, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"); npmErr != nil {
				return
			}
		}
		npmErr = run(nil, filepath.Join("node_modules", ".bin", "tsc"))
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	synthMu.Lock()
	defer synthMu.Unlock()
	if tpl, ok := synthed[ctx]; ok {
		return tpl
	}
	out, err := os.MkdirTemp("", "junban-cdk-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(out)
	if err := run([]string{"CDK_OUTDIR=" + out, "CDK_CONTEXT_JSON=" + ctx}, "node", filepath.Join("build", "bin", "junban.js")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "Junban.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tpl map[string]any
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	synthed[ctx] = tpl
	return tpl
}

// resources returns the template's resources of type typ by logical id.
func resources(tpl map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tpl["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] == typ {
			props, _ := r["Properties"].(map[string]any)
			out[id] = props
		}
	}
	return out
}

// refID is the logical id a {"Ref": id} or {"Fn::GetAtt": [id, attr]} names.
func refID(v any) string {
	m, _ := v.(map[string]any)
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	if g, ok := m["Fn::GetAtt"].([]any); ok && len(g) > 0 {
		s, _ := g[0].(string)
		return s
	}
	return ""
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// Every queue is a dead-letter queue or has one, by a redrive policy to a queue of the
// stack that is itself not redriven; FIFO queues (context fifo) have FIFO DLQs.
func TestECSQueuesHaveTheirDLQs(t *testing.T) {
	for _, variant := range []struct{ name, ctx string }{{"standard", `{}`}, {"fifo", `{"fifo":true,"inboundTopicArns":"arn:aws:sns:ap-northeast-1:123456789012:shop-orders.fifo"}`}} {
		t.Run(variant.name, func(t *testing.T) {
			tpl := synth(t, variant.ctx)
			queues := resources(tpl, "AWS::SQS::Queue")
			dlqs := map[string]bool{}
			for _, p := range queues {
				if rp, ok := p["RedrivePolicy"].(map[string]any); ok {
					dlqs[refID(rp["deadLetterTargetArn"])] = true
				}
			}
			names := map[string]bool{}
			for id, p := range queues {
				name, _ := p["QueueName"].(string)
				names[name] = true
				if fifo := variant.name == "fifo"; fifo != (p["FifoQueue"] == true) || fifo != strings.HasSuffix(name, ".fifo") {
					t.Errorf("%s (%s): FifoQueue %v, want a %s queue", id, name, p["FifoQueue"], variant.name)
				}
				rp, redriven := p["RedrivePolicy"].(map[string]any)
				switch {
				case dlqs[id] && redriven:
					t.Errorf("%s (%s) is a DLQ with a redrive policy of its own", id, name)
				case dlqs[id]:
					if p["MessageRetentionPeriod"] != float64(14*24*3600) {
						t.Errorf("DLQ %s: retention %v, want 14 days", name, p["MessageRetentionPeriod"])
					}
				case !redriven:
					t.Errorf("%s (%s) has no redrive policy to a DLQ", id, name)
				default:
					target := refID(rp["deadLetterTargetArn"])
					if _, ok := queues[target]; !ok {
						t.Errorf("%s: redrive to %v, not a queue of the stack", name, rp["deadLetterTargetArn"])
					}
					if n, _ := rp["maxReceiveCount"].(float64); n < 1 {
						t.Errorf("%s: maxReceiveCount %v", name, rp["maxReceiveCount"])
					}
				}
			}
			sfx := map[bool]string{true: ".fifo"}[variant.name == "fifo"]
			for _, n := range []string{"orders", "orders-dlq", "results", "results-dlq"} {
				if !names[n+sfx] {
					t.Errorf("no queue %s%s among %v", n, sfx, names)
				}
			}
			if variant.name == "fifo" {
				subs := resources(tpl, "AWS::SNS::Subscription")
				if len(subs) != 1 {
					t.Fatalf("%d subscriptions of the inbound topic, want 1", len(subs))
				}
				for _, s := range subs {
					if s["Protocol"] != "sqs" || refID(s["Endpoint"]) == "" || s["FilterPolicy"] == nil {
						t.Errorf("inbound subscription %v: want the orders queue, filtered on type", s)
					}
				}
				if len(resources(tpl, "AWS::SQS::QueuePolicy")) == 0 {
					t.Error("no queue policy lets the inbound topic send to the orders queue")
				}
			}
		})
	}
}

// containers returns each service's container definition by service name, and the task
// role's logical id, from the task definitions named junban-<service>.
func containers(t *testing.T, tpl map[string]any) (map[string]map[string]any, map[string]string) {
	t.Helper()
	defs, roles := map[string]map[string]any{}, map[string]string{}
	for _, td := range resources(tpl, "AWS::ECS::TaskDefinition") {
		family, _ := td["Family"].(string)
		name := strings.TrimPrefix(family, "junban-")
		for _, c := range td["ContainerDefinitions"].([]any) {
			c := c.(map[string]any)
			if c["Name"] == name {
				defs[name] = c
				roles[name] = refID(td["TaskRoleArn"])
			}
		}
	}
	for _, s := range ecsServices {
		if defs[s] == nil {
			t.Fatalf("no task definition junban-%s with a container %s", s, s)
		}
	}
	return defs, roles
}

// Each service's task role grants exactly the SQS and SNS actions its binary's code
// calls (awsActions), nothing else; the migrate task's role grants nothing.
func TestECSTaskRolesGrantWhatTheCodeCalls(t *testing.T) {
	tpl := synth(t, `{}`)
	_, roles := containers(t, tpl)
	granted := map[string][]string{} // role logical id -> actions
	for _, p := range resources(tpl, "AWS::IAM::Policy") {
		doc := p["PolicyDocument"].(map[string]any)
		for _, r := range asList(p["Roles"]) {
			for _, st := range asList(doc["Statement"]) {
				for _, a := range asList(st.(map[string]any)["Action"]) {
					granted[refID(r)] = append(granted[refID(r)], a.(string))
				}
			}
		}
	}
	for id, r := range resources(tpl, "AWS::IAM::Role") {
		if r["RoleName"] == "junban-migrate" && (len(granted[id]) > 0 || r["Policies"] != nil || r["ManagedPolicyArns"] != nil) {
			t.Errorf("junban-migrate grants %v, want nothing", granted[id])
		}
		// Every role's inline policies are checked above only through AWS::IAM::Policy.
		if strings.HasPrefix(fmt.Sprint(r["RoleName"]), "junban-") && (r["Policies"] != nil || r["ManagedPolicyArns"] != nil) {
			t.Errorf("%v has inline or managed policies: %v %v", r["RoleName"], r["Policies"], r["ManagedPolicyArns"])
		}
	}
	root := repoRoot(t)
	for _, s := range ecsServices {
		calls := awsActions(t, root, s)
		got := granted[roles[s]]
		slices.Sort(got)
		got = slices.Compact(got)
		for _, a := range got {
			if !slices.Contains(calls, a) {
				t.Errorf("%s's task role grants %s, which its code never calls (code: %v)", s, a, calls)
			}
		}
		for _, a := range calls {
			if !slices.Contains(got, a) && !slices.Contains(overReached[s], a) {
				t.Errorf("%s's code calls %s, which its task role does not grant (role: %v)", s, a, got)
			}
		}
		for _, a := range overReached[s] {
			if !slices.Contains(calls, a) {
				t.Errorf("overReached lists %s for %s, which the analysis no longer finds: remove it", a, s)
			}
		}
		if len(calls) == 0 {
			t.Errorf("%s: the analysis found no SQS or SNS call at all", s)
		}
	}
}

// Each service's container: secrets from Secrets Manager (never in the environment), a
// stop timeout that covers JUNBAN_SHUTDOWN_BUDGET plus the order-worker's 5 s after it
// and a margin, within Fargate's 120 s, and the binary's own healthcheck as the health check.
func TestECSContainersStopInTimeAndCheckTheirHealth(t *testing.T) {
	tpl := synth(t, `{}`)
	defs, _ := containers(t, tpl)
	secrets := resources(tpl, "AWS::SecretsManager::Secret")
	secretNames := []string{"DATABASE_URL", "REDIS_URL", "JUNBAN_WEBHOOK_PROVIDERS", "JUNBAN_API_READ_TOKENS", "JUNBAN_API_ADMIN_TOKENS"}
	for _, s := range ecsServices {
		c := defs[s]
		budget := config.ShutdownBudgetDefault
		for _, e := range asList(c["Environment"]) {
			e := e.(map[string]any)
			if slices.Contains(secretNames, e["Name"].(string)) {
				t.Errorf("%s: %s in the environment, want a secret", s, e["Name"])
			}
			if e["Name"] == "JUNBAN_SHUTDOWN_BUDGET" {
				var err error
				if budget, err = time.ParseDuration(e["Value"].(string)); err != nil {
					t.Errorf("%s: JUNBAN_SHUTDOWN_BUDGET: %v", s, err)
				}
			}
		}
		for _, sec := range asList(c["Secrets"]) {
			if _, ok := secrets[refID(sec.(map[string]any)["ValueFrom"])]; !ok {
				t.Errorf("%s: secret %v not from Secrets Manager", s, sec)
			}
		}
		stop, _ := c["StopTimeout"].(float64)
		if min := budget + 10*time.Second; time.Duration(stop)*time.Second < min || stop > 120 {
			t.Errorf("%s: stopTimeout %vs, want %v..120s (JUNBAN_SHUTDOWN_BUDGET %v + 5 s + 5 s)", s, stop, min.Seconds(), budget)
		}
		hc, _ := c["HealthCheck"].(map[string]any)
		if cmd := fmt.Sprint(hc["Command"]); cmd != "[CMD /app healthcheck]" {
			t.Errorf("%s: health check %v, want [CMD /app healthcheck]", s, cmd)
		}
		if to, _ := hc["Timeout"].(float64); time.Duration(to)*time.Second < config.HealthcheckTimeoutDefault {
			t.Errorf("%s: health check timeout %vs under healthcheck's own %v", s, to, config.HealthcheckTimeoutDefault)
		}
	}
}

// The two workers scale on their queue's backlog per task: a target tracking policy on
// the queue's visible messages over the service's running tasks.
func TestECSWorkersScaleOnBacklogPerTask(t *testing.T) {
	tpl := synth(t, `{}`)
	queues := resources(tpl, "AWS::SQS::Queue")
	want := map[string]string{"order-worker": "orders", "persist-worker": "results"}
	for _, p := range resources(tpl, "AWS::ApplicationAutoScaling::ScalingPolicy") {
		name, _ := p["PolicyName"].(string)
		svc := strings.TrimSuffix(name, "-backlog-per-task")
		q, ok := want[svc]
		if !ok || p["PolicyType"] != "TargetTrackingScaling" || p["ScalingTargetId"] == nil {
			t.Errorf("scaling policy %s: %v", name, p)
			continue
		}
		delete(want, svc)
		spec := p["TargetTrackingScalingPolicyConfiguration"].(map[string]any)["CustomizedMetricSpecification"].(map[string]any)
		var visible, tasks, expr bool
		for _, m := range spec["Metrics"].([]any) {
			m := m.(map[string]any)
			if e, ok := m["Expression"].(string); ok && m["ReturnData"] == true {
				expr = strings.Contains(e, "/")
				continue
			}
			metric := m["MetricStat"].(map[string]any)["Metric"].(map[string]any)
			switch metric["MetricName"] {
			case "ApproximateNumberOfMessagesVisible":
				dim := metric["Dimensions"].([]any)[0].(map[string]any)
				visible = queues[refID(dim["Value"])]["QueueName"] == q
			case "RunningTaskCount":
				tasks = strings.Contains(fmt.Sprint(metric["Dimensions"]), "ServiceName")
			}
		}
		if !visible || !tasks || !expr {
			t.Errorf("%s: visible messages of %s %v, running tasks %v, their ratio %v", name, q, visible, tasks, expr)
		}
	}
	if len(want) > 0 {
		t.Errorf("no backlog-per-task scaling for %v", want)
	}
}
