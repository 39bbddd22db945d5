package deploy_test

import (
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// binaries are the services: the workers, the gateway and the API.
var binaries = []string{"order-worker", "persist-worker", "webhook-gateway", "junban-api"}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// build compiles the binaries once per test run.
func build(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the built binaries; not in -short")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "junban-bin-")
		if buildErr != nil {
			return
		}
		args := []string{"build", "-o", binDir + "/"}
		for _, b := range binaries {
			args = append(args, "./cmd/"+b)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

type envVar struct {
	name     string
	required bool
}

// varsOf asks a binary which variables it reads.
func varsOf(t *testing.T, bin string) []envVar {
	t.Helper()
	out, err := exec.Command(filepath.Join(build(t), bin), "--env-vars").Output()
	if err != nil {
		t.Fatalf("%s --env-vars: %v", bin, err)
	}
	var vars []envVar
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, rest, _ := strings.Cut(line, "\t")
		vars = append(vars, envVar{name: name, required: rest == "required"})
	}
	if len(vars) < 5 {
		t.Fatalf("%s reads only %d variables: %q", bin, len(vars), out)
	}
	return vars
}

// emptyEnv is an environment without any junban setting and without the stack file.
func emptyEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "JUNBAN_STACK_ENV=/nonexistent/stack.env"}
}

func TestEmptyEnvironmentNamesEveryRequiredVariable(t *testing.T) {
	for _, bin := range binaries {
		t.Run(bin, func(t *testing.T) {
			var required []string
			for _, v := range varsOf(t, bin) {
				if v.required {
					required = append(required, v.name)
				}
			}
			if len(required) == 0 {
				t.Fatalf("%s requires no variable at all", bin)
			}
			cmd := exec.Command(filepath.Join(build(t), bin))
			cmd.Env = emptyEnv()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatalf("%s started with an empty environment", bin)
			}
			for _, name := range required {
				if !strings.Contains(stderr.String(), name) {
					t.Errorf("%s's error does not name %s:\n%s", bin, name, stderr.String())
				}
			}
		})
	}
}

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Build       struct {
			Args map[string]string `yaml:"args"`
		} `yaml:"build"`
	} `yaml:"services"`
}

func TestDockerComposeMatchesTheBinaries(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	// The ports the services listen on inside the compose network. Of them only LocalStack's
	// is published on the host (Valkey's and PostgreSQL's: TestDockerComposeHostPorts).
	ports := map[string]string{"valkey": "6379", "postgres": "5432", "localstack": "4566"}
	for svc := range ports {
		if _, ok := cf.Services[svc]; !ok {
			t.Fatalf("service %s missing", svc)
		}
	}
	if s := cf.Services["localstack"]; !slices.Contains(s.Ports, "4566:4566") {
		t.Errorf("service localstack does not publish 4566: %v", s.Ports)
	}
	// Variables the AWS and OpenTelemetry SDKs read themselves rather than junban's config.
	sdkVars := map[string]bool{"AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true, "OTEL_EXPORTER_OTLP_ENDPOINT": true}
	for _, bin := range binaries {
		t.Run(bin, func(t *testing.T) {
			s, ok := cf.Services[bin]
			if !ok {
				t.Fatalf("service %s missing", bin)
			}
			if s.Build.Args["BIN"] != bin {
				t.Errorf("service %s builds %q", bin, s.Build.Args["BIN"])
			}
			read := map[string]bool{}
			for _, v := range varsOf(t, bin) {
				read[v.name] = true
				if v.required && s.Environment[v.name] == "" {
					t.Errorf("%s requires %s, which the compose file does not set", bin, v.name)
				}
			}
			for name, value := range s.Environment {
				if !read[name] && !sdkVars[name] {
					t.Errorf("compose sets %s for %s, which it does not read", name, bin)
				}
				checkEndpoint(t, name, value, ports)
			}
			// With exactly the compose environment, the configuration validates.
			cmd := exec.Command(filepath.Join(build(t), bin), "--check-config")
			cmd.Env = emptyEnv()
			for k, v := range s.Environment {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s --check-config with the compose environment: %v\n%s", bin, err, out)
			}
		})
	}
}

// checkEndpoint asserts that a URL setting points at a compose service on its port.
func checkEndpoint(t *testing.T, name, value string, ports map[string]string) {
	t.Helper()
	want := map[string]string{"REDIS_URL": "valkey", "DATABASE_URL": "postgres", "AWS_ENDPOINT_URL_SQS": "localstack"}[name]
	if want == "" {
		return
	}
	u, err := url.Parse(value)
	if err != nil {
		t.Errorf("%s=%q: %v", name, value, err)
		return
	}
	if u.Hostname() != want || u.Port() != ports[want] {
		t.Errorf("%s=%q does not point at service %s:%s", name, value, want, ports[want])
	}
}

// The compose file starts each service only once what it needs can serve it: a dependency
// waited for as healthy has a healthcheck, a one-shot step waited for as completed is not
// restarted, every worker waits for the SQS emulator's queues and is restarted when it exits.
func TestDockerComposeStartOrder(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf struct {
		Services map[string]struct {
			Restart     string         `yaml:"restart"`
			Healthcheck map[string]any `yaml:"healthcheck"`
			DependsOn   map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for name, s := range cf.Services {
		for dep, d := range s.DependsOn {
			target, ok := cf.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %s, which is no service", name, dep)
			case d.Condition == "service_healthy" && target.Healthcheck == nil:
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			case d.Condition == "service_completed_successfully" && target.Restart != "" && target.Restart != "no":
				t.Errorf("%s waits for %s to complete, which restarts (%s)", name, dep, target.Restart)
			case d.Condition != "service_healthy" && d.Condition != "service_completed_successfully":
				t.Errorf("%s waits for %s only to start (%q)", name, dep, d.Condition)
			}
		}
	}
	for _, bin := range binaries {
		s := cf.Services[bin]
		if s.Restart != "unless-stopped" && s.Restart != "always" && s.Restart != "on-failure" {
			t.Errorf("%s has no restart policy (%q)", bin, s.Restart)
		}
		if s.DependsOn["localstack"].Condition != "service_healthy" {
			t.Errorf("%s does not wait for localstack to be healthy", bin)
		}
	}
}
