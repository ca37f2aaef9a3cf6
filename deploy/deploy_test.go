// Package deploy holds the production-shaped deployments: docker-compose.yml and the
// Kubernetes manifests under k8s/. Neither Docker nor a cluster runs in the suite, so
// this test checks their structure against what Loom needs and what the code reads.
package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/loomplane/loom/internal/config"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string                                `yaml:"image"`
	Build       *struct{ Context, Dockerfile string } `yaml:"build"`
	Command     []string                              `yaml:"command"`
	Entrypoint  []string                              `yaml:"entrypoint"`
	Environment map[string]string                     `yaml:"environment"`
	Healthcheck *struct {
		Test    []string `yaml:"test"`
		Disable bool     `yaml:"disable"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Volumes []string `yaml:"volumes"`
}

func (s composeService) healthy() bool {
	return s.Healthcheck != nil && !s.Healthcheck.Disable && len(s.Healthcheck.Test) > 0
}

// loomRole is the role list of a `loomd serve --roles X` service, "" otherwise.
func (s composeService) loomRole() string {
	if i := slices.Index(s.Command, "--roles"); i >= 0 && i+1 < len(s.Command) && s.Command[0] == "serve" {
		return s.Command[i+1]
	}
	return ""
}

func settings() map[string]bool {
	out := map[string]bool{}
	for _, s := range config.Settings() {
		out[s.Name] = true
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The compose file: its stores in their production shape, Loom split by role behind
// a proxy, healthchecks and start order, and only settings loomd reads.
func TestComposeFileHasTheProductionShape(t *testing.T) {
	text := readFile(t, "docker-compose.yml")
	var f composeFile
	if err := yaml.Unmarshal([]byte(text), &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	checkComposeKeys(t, text)
	svc := func(name string) composeService {
		s, ok := f.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		return s
	}

	// Every service runs a pinned image, waits only for services that exist and that
	// say when they are healthy, and mounts only files that exist.
	for name, s := range f.Services {
		if s.Image == "" || !strings.Contains(s.Image, ":") || strings.HasSuffix(s.Image, ":latest") {
			t.Errorf("%s: image %q is not pinned to a tag", name, s.Image)
		}
		if s.loomRole() != "" || name == "loom-migrate" {
			if s.Build == nil || s.Build.Context != ".." {
				t.Errorf("%s: a Loom service is built from the repository root", name)
			} else if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("%s: dockerfile: %v", name, err)
			}
		}
		if !s.healthy() && name != "loom-migrate" {
			t.Errorf("%s has no healthcheck", name)
		}
		for dep, cond := range s.DependsOn {
			target, ok := f.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %s, which is not a service", name, dep)
			case cond.Condition == "service_healthy" && !target.healthy():
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			case cond.Condition != "service_healthy" && cond.Condition != "service_completed_successfully":
				t.Errorf("%s depends on %s with condition %q", name, dep, cond.Condition)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			} else if _, ok := f.Volumes[src]; !ok {
				t.Errorf("%s uses volume %s, which is not declared", name, src)
			}
		}
	}

	// Kafka: three brokers in KRaft mode, each a controller voter, one cluster id.
	voters := svc("kafka-1").Environment["KAFKA_CONTROLLER_QUORUM_VOTERS"]
	ids := map[string]bool{}
	for _, name := range []string{"kafka-1", "kafka-2", "kafka-3"} {
		e := svc(name).Environment
		roles := strings.Split(e["KAFKA_PROCESS_ROLES"], ",")
		if !slices.Contains(roles, "controller") || !slices.Contains(roles, "broker") {
			t.Errorf("%s: KAFKA_PROCESS_ROLES %q, want broker,controller (KRaft)", name, e["KAFKA_PROCESS_ROLES"])
		}
		if e["CLUSTER_ID"] == "" || e["CLUSTER_ID"] != svc("kafka-1").Environment["CLUSTER_ID"] || e["KAFKA_CONTROLLER_QUORUM_VOTERS"] != voters {
			t.Errorf("%s: not in the same KRaft cluster as kafka-1", name)
		}
		if !strings.Contains(voters, e["KAFKA_NODE_ID"]+"@"+name+":") || ids[e["KAFKA_NODE_ID"]] {
			t.Errorf("%s: node id %q is not its own voter entry in %q", name, e["KAFKA_NODE_ID"], voters)
		}
		ids[e["KAFKA_NODE_ID"]] = true
		if !strings.Contains(e["KAFKA_ADVERTISED_LISTENERS"], "//"+name+":") || e["KAFKA_MIN_INSYNC_REPLICAS"] != "2" {
			t.Errorf("%s: advertised listeners %q, min ISR %q", name, e["KAFKA_ADVERTISED_LISTENERS"], e["KAFKA_MIN_INSYNC_REPLICAS"])
		}
	}

	// Postgres 16: a primary that names the standby in synchronous_standby_names, and
	// a standby cloned from it streaming under that name.
	for _, name := range []string{"postgres-primary", "postgres-standby"} {
		if !strings.HasPrefix(svc(name).Image, "postgres:16") {
			t.Errorf("%s runs %s, want postgres:16", name, svc(name).Image)
		}
	}
	if init := readFile(t, "postgres/primary-init.sh"); !strings.Contains(init, "synchronous_standby_names = 'FIRST 1 (loom_standby)'") || !strings.Contains(init, "REPLICATION") {
		t.Error("postgres/primary-init.sh does not make loom_standby the synchronous standby")
	}
	if standby := readFile(t, "postgres/standby-entrypoint.sh"); !strings.Contains(standby, "pg_basebackup") || !strings.Contains(standby, " -R ") || !strings.Contains(standby, "application_name=loom_standby") {
		t.Error("postgres/standby-entrypoint.sh does not clone the primary as loom_standby")
	}
	if _, ok := svc("postgres-standby").DependsOn["postgres-primary"]; !ok {
		t.Error("the standby must wait for the primary")
	}

	// ClickHouse: a current LTS, Keeper, two replicas of the cluster Loom names.
	svc("clickhouse-keeper")
	cluster := readFile(t, "clickhouse/cluster.xml")
	for i, name := range []string{"clickhouse-1", "clickhouse-2"} {
		s := svc(name)
		if !atLeast(s.Image, "clickhouse/clickhouse-server:", 24, 8) {
			t.Errorf("%s runs %s, want clickhouse/clickhouse-server 24.8 or newer", name, s.Image)
		}
		if _, ok := s.DependsOn["clickhouse-keeper"]; !ok {
			t.Errorf("%s does not wait for Keeper", name)
		}
		if !strings.Contains(cluster, "<host>"+name+"</host>") {
			t.Errorf("clickhouse/cluster.xml does not list replica %s", name)
		}
		if macros := readFile(t, "clickhouse/macros-"+strconv.Itoa(i+1)+".xml"); !strings.Contains(macros, "<replica>"+name+"</replica>") {
			t.Errorf("%s's macros do not name it as the replica", name)
		}
	}

	// Loom: 2 command, 2 query, 2 projector, a relay and its standby, all over the
	// production stores, migrated once before any of them serves.
	known := settings()
	roles := map[config.Role][]string{}
	nginx := readFile(t, "proxy/nginx.conf")
	for name, s := range f.Services {
		role := s.loomRole()
		if role == "" && name != "loom-migrate" {
			continue
		}
		if role != "" {
			parsed, err := config.ParseRoles(role)
			if err != nil {
				t.Errorf("%s: --roles %s: %v", name, role, err)
			}
			for _, r := range parsed {
				roles[r] = append(roles[r], name)
			}
			if !strings.Contains(strings.Join(s.Healthcheck.Test, " "), "/v1/health/ready") {
				t.Errorf("%s: healthcheck %v does not ask /v1/health/ready", name, s.Healthcheck.Test)
			}
			if d, ok := s.DependsOn["loom-migrate"]; !ok || d.Condition != "service_completed_successfully" || s.Environment["LOOM_BOOT_MIGRATE"] != "0" {
				t.Errorf("%s: serving processes wait for loom-migrate and migrate nothing themselves", name)
			}
		}
		for k := range s.Environment {
			if !known[k] {
				t.Errorf("%s sets %s, which loomd does not read (deploy/CONFIG.md)", name, k)
			}
		}
		e := s.Environment
		if e["LOOM_PG_DURABILITY"] != string(config.DurabilitySynchronous) || !strings.Contains(e["LOOM_PG_DSN"], "@postgres-primary:") ||
			e["LOOM_CH_CLUSTER"] == "" || !strings.Contains(cluster, "<"+e["LOOM_CH_CLUSTER"]+">") ||
			len(strings.Split(e["LOOM_KAFKA_BROKERS"], ",")) != 3 || e["LOOM_TOPIC_REPLICATION"] != "3" {
			t.Errorf("%s is not configured for the production stores: %v", name, e)
		}
		for _, store := range []string{"postgres-primary", "postgres-standby", "clickhouse-1", "clickhouse-2", "kafka-1", "kafka-2", "kafka-3"} {
			if s.DependsOn[store].Condition != "service_healthy" {
				t.Errorf("%s does not wait for %s to be healthy", name, store)
			}
		}
	}
	for role, want := range map[config.Role]int{config.RoleCommand: 2, config.RoleQuery: 2, config.RoleProjector: 2, config.RoleRelay: 2, config.RoleWorkers: 2} {
		if len(roles[role]) != want {
			t.Errorf("%d services run role %s (%v), want %d", len(roles[role]), role, roles[role], want)
		}
	}
	if svc("loom-migrate").Command[0] != "migrate" {
		t.Error("loom-migrate does not run `loomd migrate`")
	}
	for _, role := range []config.Role{config.RoleCommand, config.RoleQuery} {
		for _, name := range roles[role] {
			if !strings.Contains(nginx, name+":8080") {
				t.Errorf("the proxy does not send traffic to %s", name)
			}
			if svc("proxy").DependsOn[name].Condition != "service_healthy" {
				t.Errorf("the proxy does not wait for %s", name)
			}
		}
	}
}

// composeKeys are the Compose specification's keys this file may use: a misspelt key
// (depends-on, healtcheck) would be ignored by the struct decoding above, and by nothing
// else until `docker compose config` ran.
var composeKeys = map[string][]string{
	"":            {"services", "volumes"},
	"service":     {"image", "build", "command", "entrypoint", "environment", "healthcheck", "depends_on", "volumes", "restart", "ports", "hostname", "ulimits", "stop_grace_period"},
	"healthcheck": {"test", "interval", "timeout", "retries", "start_period", "disable"},
	"build":       {"context", "dockerfile"},
	"depends_on":  {"condition"},
}

func checkComposeKeys(t *testing.T, text string) {
	t.Helper()
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatal(err)
	}
	allowed := func(section, key string) bool {
		return slices.Contains(composeKeys[section], key) || (section == "" && strings.HasPrefix(key, "x-"))
	}
	for k := range raw {
		if !allowed("", k) {
			t.Errorf("docker-compose.yml: unknown top-level key %q", k)
		}
	}
	for name, s := range dig(raw, "services") {
		for k, v := range s.(map[string]any) {
			if !allowed("service", k) {
				t.Errorf("service %s: unknown key %q", name, k)
			}
			sub, _ := v.(map[string]any)
			for sk, sv := range sub {
				switch k {
				case "healthcheck", "build":
					if !allowed(k, sk) {
						t.Errorf("service %s: unknown key %s.%s", name, k, sk)
					}
				case "depends_on":
					for ck := range sv.(map[string]any) {
						if !allowed(k, ck) {
							t.Errorf("service %s: unknown key depends_on.%s.%s", name, sk, ck)
						}
					}
				}
			}
		}
	}
}

// The Kubernetes manifests: a Deployment and a PodDisruptionBudget per role, ready
// on /v1/health/ready, configured from one ConfigMap and one Secret holding only
// settings loomd reads, with a shutdown grace longer than loomd's own.
func TestKubernetesManifestsRunEveryRole(t *testing.T) {
	objects := map[string]map[string]any{} // "Kind/name"
	files, _ := filepath.Glob("k8s/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests under k8s/")
	}
	for _, file := range files {
		dec := yaml.NewDecoder(bytes.NewReader([]byte(readFile(t, file))))
		for {
			var doc map[string]any
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if doc == nil {
				continue
			}
			key := str(doc, "kind") + "/" + str(doc, "metadata", "name")
			if _, dup := objects[key]; dup {
				t.Errorf("%s declared twice", key)
			}
			objects[key] = doc
		}
	}
	get := func(key string) map[string]any {
		o, ok := objects[key]
		if !ok {
			t.Fatalf("no %s in k8s/", key)
		}
		return o
	}
	known := settings()
	cm, secret := get("ConfigMap/loom-config"), get("Secret/loom-secrets")
	for _, src := range []struct {
		name string
		data map[string]any
	}{{"ConfigMap loom-config", dig(cm, "data")}, {"Secret loom-secrets", dig(secret, "stringData")}} {
		for k := range src.data {
			if !known[k] {
				t.Errorf("%s sets %s, which loomd does not read", src.name, k)
			}
		}
	}
	if _, ok := dig(secret, "stringData")["LOOM_PG_DSN"]; !ok {
		t.Error("LOOM_PG_DSN (it holds a password) belongs in the Secret")
	}
	if _, ok := dig(cm, "data")["LOOM_PG_DSN"]; ok {
		t.Error("LOOM_PG_DSN must not be in the ConfigMap")
	}
	graceMS, _ := strconv.Atoi(str(cm, "data", "LOOM_SHUTDOWN_GRACE_MS"))
	if str(cm, "data", "LOOM_PG_DURABILITY") != string(config.DurabilitySynchronous) || str(cm, "data", "LOOM_BOOT_MIGRATE") != "0" || graceMS == 0 {
		t.Errorf("loom-config: %v", dig(cm, "data"))
	}
	if args := list(get("Job/loom-migrate"), "spec", "template", "spec", "containers"); len(args) != 1 || !slices.Contains(strs(args[0].(map[string]any)["args"]), "migrate") {
		t.Error("Job loom-migrate does not run `loomd migrate`")
	}

	for _, role := range config.AllRoles() {
		d := get("Deployment/loom-" + string(role))
		if n, _ := dig(d, "spec")["replicas"].(int); n < 2 {
			t.Errorf("loom-%s runs %d replicas, want at least 2", role, n)
		}
		selector := dig(d, "spec", "selector", "matchLabels")
		pod := dig(d, "spec", "template")
		for k, v := range selector {
			if dig(pod, "metadata", "labels")[k] != v {
				t.Errorf("loom-%s: its pods do not carry selector label %s=%v", role, k, v)
			}
		}
		pdb := get("PodDisruptionBudget/loom-" + string(role))
		if !equalMaps(dig(pdb, "spec", "selector", "matchLabels"), selector) || dig(pdb, "spec")["minAvailable"] == nil {
			t.Errorf("PodDisruptionBudget loom-%s does not guard the Deployment's pods", role)
		}
		period, _ := dig(pod, "spec")["terminationGracePeriodSeconds"].(int)
		containers := list(pod, "spec", "containers")
		if len(containers) != 1 {
			t.Fatalf("loom-%s: %d containers", role, len(containers))
		}
		c := containers[0].(map[string]any)
		args := strs(c["args"])
		if i := slices.Index(args, "--roles"); len(args) < 3 || args[0] != "serve" || i < 0 || args[i+1] != string(role) {
			t.Errorf("loom-%s runs %v, want serve --roles %s", role, args, role)
		}
		if str(c, "readinessProbe", "httpGet", "path") != "/v1/health/ready" || str(c, "livenessProbe", "httpGet", "path") != "/v1/health" {
			t.Errorf("loom-%s: readiness must be /v1/health/ready and liveness /v1/health", role)
		}
		var refs []string
		for _, e := range list(c, "envFrom") {
			em := e.(map[string]any)
			refs = append(refs, str(em, "configMapRef", "name")+str(em, "secretRef", "name"))
		}
		if !slices.Contains(refs, "loom-config") || !slices.Contains(refs, "loom-secrets") {
			t.Errorf("loom-%s takes its environment from %v, want loom-config and loom-secrets", role, refs)
		}
		preStop, _ := dig(c, "lifecycle", "preStop", "sleep")["seconds"].(int)
		if period*1000 <= graceMS+preStop*1000 {
			t.Errorf("loom-%s: terminationGracePeriodSeconds %d does not cover the preStop pause (%d s) and LOOM_SHUTDOWN_GRACE_MS (%d)", role, period, preStop, graceMS)
		}
	}
	for _, role := range []config.Role{config.RoleCommand, config.RoleQuery} {
		if !strings.Contains(str(get("ConfigMap/loom-proxy"), "data", "nginx.conf"), "server loom-"+string(role)+":80") {
			t.Errorf("the proxy does not route to Service loom-%s", role)
		}
		get("Service/loom-" + string(role))
	}
}

var tagVersion = regexp.MustCompile(`^(\d+)\.(\d+)`)

func atLeast(image, repo string, major, minor int) bool {
	tag, ok := strings.CutPrefix(image, repo)
	m := tagVersion.FindStringSubmatch(tag)
	if !ok || m == nil {
		return false
	}
	ma, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	return ma > major || ma == major && mi >= minor
}

func dig(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, _ := m[p].(map[string]any)
		if next == nil {
			return map[string]any{}
		}
		m = next
	}
	return m
}

func str(m map[string]any, path ...string) string {
	s, _ := dig(m, path[:len(path)-1]...)[path[len(path)-1]].(string)
	return s
}

func list(m map[string]any, path ...string) []any {
	l, _ := dig(m, path[:len(path)-1]...)[path[len(path)-1]].([]any)
	return l
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func equalMaps(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
