package deploy_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
)

// composeSpec is what these tests read of a compose file.
type composeSpec struct {
	// JunbanEnv is the environment every junban service shares (x-junban-env).
	JunbanEnv map[string]string         `yaml:"x-junban-env"`
	Services  map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Ports       []string          `yaml:"ports"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
}

func readCompose(t *testing.T, name string) composeSpec {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeSpec
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cf
}

// composeServices are the services docker-compose.yml runs.
var composeServices = []string{
	"valkey", "postgres", "localstack", "migrate",
	"order-worker", "persist-worker", "webhook-gateway", "junban-api", "jaeger",
}

// Every junban service sends its traces to the compose file's Jaeger, pinned to a version,
// and the console links the traces in Jaeger's UI.
func TestDockerComposeTracesGoToJaeger(t *testing.T) {
	cf := readCompose(t, "docker-compose.yml")
	if ep := cf.JunbanEnv["OTEL_EXPORTER_OTLP_ENDPOINT"]; ep != "http://jaeger:4318" {
		t.Errorf("x-junban-env OTEL_EXPORTER_OTLP_ENDPOINT = %q, want Jaeger's OTLP/HTTP port http://jaeger:4318", ep)
	}
	if img := cf.Services["jaeger"].Image; !regexp.MustCompile(`^jaegertracing/jaeger:\d+\.\d+\.\d+$`).MatchString(img) {
		t.Errorf("jaeger image %q: want jaegertracing/jaeger:X.Y.Z, an exact version", img)
	}
	if err := api.CheckTraceURL(cf.Services["junban-api"].Environment["JUNBAN_TRACE_URL"]); err != nil || cf.Services["junban-api"].Environment["JUNBAN_TRACE_URL"] == "" {
		t.Errorf("junban-api's JUNBAN_TRACE_URL: %v (want Jaeger's trace page)", err)
	}
}

func TestDockerComposeServices(t *testing.T) {
	cf := readCompose(t, "docker-compose.yml")
	for _, name := range composeServices {
		if _, ok := cf.Services[name]; !ok {
			t.Errorf("docker-compose.yml has no service %s", name)
		}
	}
}

// Valkey and PostgreSQL are not published on the host by default: 6379 and 5432 clash with a
// local server. docker-compose.host-ports.yml publishes them, on the loopback only.
func TestDockerComposeHostPorts(t *testing.T) {
	cf := readCompose(t, "docker-compose.yml")
	override := readCompose(t, "docker-compose.host-ports.yml")
	for svc, port := range map[string]string{"valkey": "6379", "postgres": "5432"} {
		if p := cf.Services[svc].Ports; len(p) != 0 {
			t.Errorf("docker-compose.yml publishes %s on the host: %v", svc, p)
		}
		p := override.Services[svc].Ports
		if len(p) != 1 || !strings.HasPrefix(p[0], "127.0.0.1:") || !strings.HasSuffix(p[0], ":"+port) {
			t.Errorf("docker-compose.host-ports.yml publishes %s as %v, want its %s on 127.0.0.1", svc, p, port)
		}
	}
	if len(override.Services) != 2 {
		t.Errorf("docker-compose.host-ports.yml changes %d services, want valkey and postgres only", len(override.Services))
	}
}

// localstackTokenFree is the newest LocalStack image that starts without
// LOCALSTACK_AUTH_TOKEN; later ones exit at once without it.
const localstackTokenFree = "4.14.0"

var localstackImage = regexp.MustCompile(`^localstack/localstack:(\d+)\.(\d+)\.(\d+)$`)

// checkLocalStackImage accepts an exact LocalStack version that starts without a token: no
// floating tag (4, 4.14, latest, stable), none past localstackTokenFree.
func checkLocalStackImage(image string) error {
	m := localstackImage.FindStringSubmatch(image)
	if m == nil {
		return fmt.Errorf("LocalStack image %q: want localstack/localstack:X.Y.Z, an exact version (a floating tag moves onto images that need an auth token)", image)
	}
	limit := localstackImage.FindStringSubmatch("localstack/localstack:" + localstackTokenFree)
	for i := 1; i <= 3; i++ {
		have, _ := strconv.Atoi(m[i])
		most, _ := strconv.Atoi(limit[i])
		if have < most {
			return nil
		}
		if have > most {
			return fmt.Errorf("LocalStack image %q: past %s, it does not start without LOCALSTACK_AUTH_TOKEN", image, localstackTokenFree)
		}
	}
	return nil
}

func TestDockerComposeLocalStackIsPinned(t *testing.T) {
	ls := readCompose(t, "docker-compose.yml").Services["localstack"]
	if err := checkLocalStackImage(ls.Image); err != nil {
		t.Error(err)
	}
	if got, want := ls.Environment["LOCALSTACK_AUTH_TOKEN"], "${LOCALSTACK_AUTH_TOKEN:-}"; got != want {
		t.Errorf("localstack's LOCALSTACK_AUTH_TOKEN is %q, want %q (the shell's, empty when unset)", got, want)
	}
}

func TestCheckLocalStackImage(t *testing.T) {
	for image, ok := range map[string]bool{
		"localstack/localstack:4.14.0":    true,
		"localstack/localstack:4.12.1":    true,
		"localstack/localstack:3.8.1":     true,
		"localstack/localstack:4":         false,
		"localstack/localstack:4.14":      false,
		"localstack/localstack:latest":    false,
		"localstack/localstack:stable":    false,
		"localstack/localstack":           false,
		"localstack/localstack:4.14.1":    false,
		"localstack/localstack:4.15.0":    false,
		"localstack/localstack:2026.03.0": false,
		"localstack/localstack-pro:4.1.0": false,
	} {
		if err := checkLocalStackImage(image); (err == nil) != ok {
			t.Errorf("checkLocalStackImage(%q) = %v, want ok %v", image, err, ok)
		}
	}
}

// awsResources are the queues, topics and subscriptions LocalStack's init script makes.
type awsResources struct {
	// Pairs maps each work queue to its dead-letter queue.
	Pairs map[string]string
	// Topics are the SNS topics.
	Topics []string
	// Queues are the plain queues (a consumer's, without a DLQ).
	Queues []string
	// Subscriptions are topic and queue, sorted; RawSubscriptions those with raw delivery.
	Subscriptions, RawSubscriptions [][2]string
	// Settings are the redrive and attribute settings by the script's variable names.
	Settings map[string]string
}

var (
	initLine    = regexp.MustCompile(`^(pair|queue|topic|subscribe|subscribe_raw)\s+(.*)$`)
	initSetting = regexp.MustCompile(`^(max_receive_count|visibility_timeout|dlq_retention)=(\S*)$`)
)

// parseInit reads the unindented pair, queue, topic, subscribe and subscribe_raw lines and settings of the init
// script.
func parseInit(src string) (awsResources, error) {
	r := awsResources{Pairs: map[string]string{}, Settings: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := initSetting.FindStringSubmatch(line); m != nil {
			r.Settings[m[1]] = m[2]
			continue
		}
		m := initLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		args := strings.Fields(m[2])
		switch want := map[string]int{"pair": 2, "queue": 1, "topic": 1, "subscribe": 2, "subscribe_raw": 2}[m[1]]; {
		case len(args) != want:
			return r, fmt.Errorf("line %d: %q: want %d names", n, line, want)
		case m[1] == "pair":
			if _, dup := r.Pairs[args[0]]; dup {
				return r, fmt.Errorf("line %d: queue %s made twice", n, args[0])
			}
			r.Pairs[args[0]] = args[1]
		case m[1] == "topic":
			r.Topics = append(r.Topics, args[0])
		case m[1] == "queue":
			r.Queues = append(r.Queues, args[0])
		case m[1] == "subscribe_raw":
			r.RawSubscriptions = append(r.RawSubscriptions, [2]string{args[0], args[1]})
		default:
			r.Subscriptions = append(r.Subscriptions, [2]string{args[0], args[1]})
		}
	}
	slices.Sort(r.Topics)
	slices.Sort(r.Queues)
	slices.SortFunc(r.Subscriptions, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	return r, sc.Err()
}

// queueNameOf is a setting's queue name: the setting itself, or a URL's last path segment.
func queueNameOf(nameOrURL string) string {
	if strings.Contains(nameOrURL, "://") {
		return nameOrURL[strings.LastIndex(nameOrURL, "/")+1:]
	}
	return nameOrURL
}

// fifoName is the FIFO queue or topic of a standard one (SQS and SNS want the suffix).
func fifoName(name string) string {
	if strings.HasSuffix(name, ".fifo") {
		return name
	}
	return name + ".fifo"
}

// wantAWS is what the init script must make for the compose services: the queue pairs
// `junbanctl queues create` makes with their settings (config.SQS.Pairs, loaded from the
// compose environment, and queue's defaults), the same as FIFO queues (`queues create
// --fifo`), and the orders topics, standard and FIFO, each with its orders queue subscribed.
func wantAWS(t *testing.T, cf composeSpec) awsResources {
	t.Helper()
	vars, err := config.Vars[config.SQS]()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.StackEnvVar, "/nonexistent/stack.env")
	for _, v := range vars {
		value, ok := cf.JunbanEnv[v.Name]
		if !ok {
			value = v.Default
		}
		t.Setenv(v.Name, value)
		for _, bin := range binaries {
			if got, ok := cf.Services[bin].Environment[v.Name]; ok && got != value {
				t.Errorf("%s sets %s=%q, x-junban-env %q", bin, v.Name, got, value)
			}
		}
	}
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		t.Fatalf("the SQS settings of x-junban-env: %v", err)
	}
	want := awsResources{Pairs: map[string]string{}, Settings: map[string]string{
		"max_receive_count":  strconv.Itoa(queue.MaxReceiveCountDefault),
		"visibility_timeout": strconv.Itoa(queue.VisibilityTimeoutDefault),
		"dlq_retention":      strconv.Itoa(queue.DLQRetentionDefault),
	}}
	for _, p := range cfg.Pairs() {
		name, dlq := queueNameOf(p.Queue), queueNameOf(p.DLQ)
		want.Pairs[name] = dlq
		want.Pairs[fifoName(name)] = fifoName(dlq)
	}
	orders := strings.TrimSuffix(queueNameOf(cfg.OrdersQueue), ".fifo")
	want.Topics = []string{orders, fifoName(orders)}
	want.Subscriptions = [][2]string{{orders, orders}, {fifoName(orders), fifoName(orders)}}
	arn := cf.Services["persist-worker"].Environment["JUNBAN_OUTBOX_TOPIC_ARN"]
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sns" || parts[3] != cfg.Region {
		t.Fatalf("persist-worker's JUNBAN_OUTBOX_TOPIC_ARN %q: want the ARN of an SNS topic in %s", arn, cfg.Region)
	}
	if cf.Services["persist-worker"].Environment["AWS_ENDPOINT_URL_SNS"] != cf.JunbanEnv["AWS_ENDPOINT_URL_SQS"] {
		t.Errorf("persist-worker's AWS_ENDPOINT_URL_SNS is not LocalStack's (%s)", cf.JunbanEnv["AWS_ENDPOINT_URL_SQS"])
	}
	want.Topics = append(want.Topics, parts[5])
	slices.Sort(want.Topics)
	want.Queues = []string{"shop-outbound"}
	want.RawSubscriptions = [][2]string{{parts[5], "shop-outbound"}}
	return want
}

// initProblems compares what the script makes with what it must make.
func initProblems(got, want awsResources) []string {
	var p []string
	for name, dlq := range want.Pairs {
		switch have, ok := got.Pairs[name]; {
		case !ok:
			p = append(p, fmt.Sprintf("no queue %s (with its DLQ %s): want `pair %s %s`", name, dlq, name, dlq))
		case have != dlq:
			p = append(p, fmt.Sprintf("queue %s redrives to %s, want %s", name, have, dlq))
		}
	}
	for name := range got.Pairs {
		if _, ok := want.Pairs[name]; !ok {
			p = append(p, fmt.Sprintf("queue %s is not one junbanctl queues create makes", name))
		}
	}
	for name, value := range want.Settings {
		if got.Settings[name] != value {
			p = append(p, fmt.Sprintf("%s=%s, want %s (junbanctl's default)", name, got.Settings[name], value))
		}
	}
	if !slices.Equal(got.Topics, want.Topics) {
		p = append(p, fmt.Sprintf("topics %v, want %v", got.Topics, want.Topics))
	}
	if !slices.Equal(got.Subscriptions, want.Subscriptions) {
		p = append(p, fmt.Sprintf("subscriptions (topic, queue) %v, want %v", got.Subscriptions, want.Subscriptions))
	}
	if !slices.Equal(got.Queues, want.Queues) {
		p = append(p, fmt.Sprintf("plain queues %v, want %v", got.Queues, want.Queues))
	}
	if !slices.Equal(got.RawSubscriptions, want.RawSubscriptions) {
		p = append(p, fmt.Sprintf("raw subscriptions (topic, queue) %v, want %v", got.RawSubscriptions, want.RawSubscriptions))
	}
	return p
}

// initScriptOf is the host path of the script docker-compose.yml mounts in LocalStack's
// ready.d.
func initScriptOf(t *testing.T, ls composeService) string {
	t.Helper()
	for _, v := range ls.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && strings.HasPrefix(parts[1], "/etc/localstack/init/ready.d/") {
			return filepath.Join(repoRoot(t), parts[0])
		}
	}
	t.Fatalf("localstack mounts no script in /etc/localstack/init/ready.d: %v", ls.Volumes)
	return ""
}

// LocalStack's init script makes the queues, DLQs and redrive policies `junbanctl queues
// create` makes (standard and FIFO), the orders topics and the orders queues' subscriptions
// to them with raw delivery off (the order-worker reads SNS notifications), and the outbound
// topic with the shop-outbound queue subscribed raw (a consumer gets messages as published).
func TestLocalStackInitMakesJunbansQueues(t *testing.T) {
	cf := readCompose(t, "docker-compose.yml")
	path := initScriptOf(t, cf.Services["localstack"])
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := string(raw)
	got, err := parseInit(src)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, p := range initProblems(got, wantAWS(t, cf)) {
		t.Errorf("%s: %s", path, p)
	}
	for name := range got.Settings {
		if !strings.Contains(src, "$"+name) {
			t.Errorf("%s: %s is set and never used", path, name)
		}
	}
	if strings.Count(src, "RawMessageDelivery=false") != 1 || strings.Count(src, "RawMessageDelivery=true") != 1 {
		t.Errorf("%s: subscribe must set RawMessageDelivery=false and subscribe_raw RawMessageDelivery=true, once each", path)
	}
	if last := strings.LastIndex(src, "\nsubscribe_raw "); last < 0 || last > strings.LastIndex(src, "\nsubscribe orders.fifo orders.fifo\n") {
		t.Errorf("%s: the orders.fifo subscription must stay the last step (the compose healthcheck waits for it)", path)
	}
	// LocalStack runs only executable scripts.
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable (%v)", path, err)
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		if out, err := exec.Command(bash, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", path, err, out)
		}
	}
}

// The comparison fails on a queue left out, a DLQ swapped, a setting changed, a topic or a
// subscription left out, the outbound subscription without raw delivery.
func TestLocalStackInitCheckFindsWhatIsMissing(t *testing.T) {
	cf := readCompose(t, "docker-compose.yml")
	raw, err := os.ReadFile(initScriptOf(t, cf.Services["localstack"]))
	if err != nil {
		t.Fatal(err)
	}
	want := wantAWS(t, cf)
	for _, edit := range []struct{ old, new string }{
		{"\npair results results-dlq\n", "\n"},
		{"\npair orders.fifo orders-dlq.fifo\n", "\n"},
		{"\npair orders orders-dlq\n", "\npair orders results-dlq\n"},
		{"\nmax_receive_count=5\n", "\nmax_receive_count=3\n"},
		{"\ntopic orders.fifo\n", "\n"},
		{"\nsubscribe orders orders\n", "\n"},
		{"\ntopic junban-outbound\n", "\n"},
		{"\nqueue shop-outbound\n", "\n"},
		{"\nsubscribe_raw junban-outbound shop-outbound\n", "\nsubscribe junban-outbound shop-outbound\n"},
	} {
		src := string(raw)
		if !strings.Contains(src, edit.old) {
			t.Fatalf("the script has no line %q to edit", strings.TrimSpace(edit.old))
		}
		got, err := parseInit(strings.Replace(src, edit.old, edit.new, 1))
		if err != nil {
			t.Fatal(err)
		}
		if len(initProblems(got, want)) == 0 {
			t.Errorf("with %q as %q the script passes", strings.TrimSpace(edit.old), strings.TrimSpace(edit.new))
		}
	}
}

// composePinnedImage is an exact version: major.minor at least (PostgreSQL's releases are
// two numbers), an optional suffix, an optional digest; never latest, a major alone or none.
var composePinnedImage = regexp.MustCompile(`^[a-z0-9./-]+:\d+\.\d+(\.\d+)?(-[a-z0-9.]+)?(@sha256:[0-9a-f]{64})?$`)

// composeNoHealthcheck are the long-running services without a health check, with the reason.
var composeNoHealthcheck = map[string]string{
	"order-worker":    "distroless image: no shell or HTTP client; /readyz is published on 8081",
	"persist-worker":  "distroless image: no shell or HTTP client; /readyz is published on 8082",
	"webhook-gateway": "distroless image: no shell or HTTP client; /readyz is published on 8083",
	"junban-api":      "distroless image: no shell or HTTP client; /readyz is published on 8084",
}

type composeRuntime struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Restart     string            `yaml:"restart"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Healthcheck *struct {
			Test    any  `yaml:"test"`
			Disable bool `yaml:"disable"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
}

// composeRuntimeProblems: every image pinned to an exact version; every long-running
// service with a health check or a reason in composeNoHealthcheck (a one-shot step, one that
// others wait for to complete, needs none); each junban service's health and metrics
// listener (JUNBAN_HTTP_ADDR, the gateway's JUNBAN_WEBHOOK_ADMIN_ADDR) published on a host
// port in 8081..8084, as the file's comments say.
func composeRuntimeProblems(raw []byte) []string {
	var cf composeRuntime
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		return []string{err.Error()}
	}
	var problems []string
	oneShot := map[string]bool{}
	for _, s := range cf.Services {
		for dep, d := range s.DependsOn {
			if d.Condition == "service_completed_successfully" {
				oneShot[dep] = true
			}
		}
	}
	for name, s := range cf.Services {
		if s.Image != "" && !composePinnedImage.MatchString(s.Image) {
			problems = append(problems, fmt.Sprintf("%s: image %q is not pinned to an exact version", name, s.Image))
		}
		has := s.Healthcheck != nil && !s.Healthcheck.Disable && s.Healthcheck.Test != nil
		switch {
		case oneShot[name]:
		case has && composeNoHealthcheck[name] != "":
			problems = append(problems, fmt.Sprintf("%s has a health check: drop it from composeNoHealthcheck", name))
		case !has && composeNoHealthcheck[name] == "":
			problems = append(problems, fmt.Sprintf("%s has no health check", name))
		}
	}
	for _, bin := range binaries {
		s := cf.Services[bin]
		addr := s.Environment["JUNBAN_WEBHOOK_ADMIN_ADDR"]
		if addr == "" {
			addr = s.Environment["JUNBAN_HTTP_ADDR"]
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil || port == "0" {
			problems = append(problems, fmt.Sprintf("%s: health and metrics on %q, not a fixed port", bin, addr))
			continue
		}
		published := false
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			host, _ := strconv.Atoi(parts[len(parts)-2])
			if parts[len(parts)-1] == port && host >= 8081 && host <= 8084 {
				published = true
			}
		}
		if !published {
			problems = append(problems, fmt.Sprintf("%s: its health and metrics port %s is not published on 8081..8084 (ports %v)", bin, port, s.Ports))
		}
	}
	slices.Sort(problems)
	return problems
}

func TestDockerComposeRuntime(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range composeRuntimeProblems(raw) {
		t.Error(p)
	}
	for name := range composeNoHealthcheck {
		if !slices.Contains(composeServices, name) {
			t.Errorf("composeNoHealthcheck names %s, no service of docker-compose.yml", name)
		}
	}
	// Broken variants the check refuses: a floating tag, a service without a health check, the
	// gateway's public port published where its health and metrics should be.
	for _, c := range []struct{ from, to, want string }{
		{"image: valkey/valkey:8.1.3", "image: valkey/valkey:8", "valkey: image"},
		{"image: postgres:16.9", "image: postgres:latest", "postgres: image"},
		{`test: ["CMD", "pg_isready", "-U", "postgres", "-d", "junban"]`, `disable: true`, "postgres has no health check"},
		{`ports: ["8083:9090", "8085:8080"]`, `ports: ["8083:8080"]`, "webhook-gateway: its health and metrics port 9090"},
	} {
		broken := strings.Replace(string(raw), c.from, c.to, 1)
		if broken == string(raw) {
			t.Fatalf("docker-compose.yml has no %q to break", c.from)
		}
		if got := strings.Join(composeRuntimeProblems([]byte(broken)), "\n"); !strings.Contains(got, c.want) {
			t.Errorf("with %q the check does not report %q: %s", c.to, c.want, got)
		}
	}
}
