package configs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/proxy"
)

// The deployment manifests are checked the way an operator would use them: the
// Kubernetes kustomization renders (with kubectl when it is installed), every config
// it ships passes factgate's own config check, and the wiring between the objects
// (probes, secrets, selectors, drain timings) holds together.

const kustomizeDir = "deploy/kubernetes"

// renderKustomization returns the rendered objects: kubectl kustomize when kubectl is
// installed, else the resources and the generated ConfigMap read by hand.
func renderKustomization(t *testing.T) []map[string]any {
	t.Helper()
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		kubeconfig, asked := ownAPIServer(t)
		cmd := exec.Command(kubectl, "kustomize", "--kubeconfig", kubeconfig, kustomizeDir)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.Output()
		for _, r := range asked() {
			if !strings.HasPrefix(r, "GET /version") {
				t.Errorf("kubectl kustomize asked the API server %q: rendering should need no cluster", r)
			}
		}
		t.Logf("kubectl's API server calls, all to the test's own listener: %q", asked())
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("kubectl kustomize %s: %v\n%s", kustomizeDir, err, ee.Stderr)
			}
			t.Fatalf("kubectl kustomize %s: %v", kustomizeDir, err)
		}
		t.Logf("rendered with %s", kubectl)
		return decodeAll(t, out, "kubectl kustomize output")
	}
	t.Logf("kubectl is not installed: reading the kustomization's files directly")
	var k struct {
		Resources          []string `yaml:"resources"`
		ConfigMapGenerator []struct {
			Name  string   `yaml:"name"`
			Files []string `yaml:"files"`
		} `yaml:"configMapGenerator"`
	}
	decodeFile(t, filepath.Join(kustomizeDir, "kustomization.yaml"), &k)
	var objs []map[string]any
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(kustomizeDir, r))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, decodeAll(t, b, r)...)
	}
	for _, g := range k.ConfigMapGenerator {
		data := map[string]any{}
		for _, f := range g.Files {
			b, err := os.ReadFile(filepath.Join(kustomizeDir, f))
			if err != nil {
				t.Fatalf("configMapGenerator %s: %v", g.Name, err)
			}
			data[filepath.Base(f)] = string(b)
		}
		objs = append(objs, map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": g.Name}, "data": data})
	}
	return objs
}

func decodeAll(t *testing.T, b []byte, what string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
}

func decodeFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// get walks a decoded YAML tree: keys for maps, ints for lists.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

func TestKubernetesManifests(t *testing.T) {
	objs := renderKustomization(t)
	byKind := map[string]map[string]any{}
	for _, o := range objs {
		kind := str(o, "kind")
		if _, dup := byKind[kind]; dup {
			t.Fatalf("two %s objects; the test expects one of each", kind)
		}
		byKind[kind] = o
	}
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ConfigMap"} {
		if byKind[kind] == nil {
			t.Fatalf("the kustomization renders no %s (have %v)", kind, keys(byKind))
		}
	}
	dep, cm := byKind["Deployment"], byKind["ConfigMap"]
	pod := get(dep, "spec", "template")
	podLabels, _ := get(pod, "metadata", "labels").(map[string]any)
	c := get(pod, "spec", "containers", 0)

	t.Run("probes", func(t *testing.T) {
		if p := str(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
			t.Errorf("readiness probe on %q, want /readyz (503 while draining)", p)
		}
		if p := str(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
			t.Errorf("liveness probe on %q, want /healthz", p)
		}
		if get(c, "lifecycle", "preStop") == nil {
			t.Error("no preStop hook: the pod would get SIGTERM while still in the Service's endpoints")
		}
	})

	t.Run("resources", func(t *testing.T) {
		for _, r := range []string{"cpu", "memory"} {
			if get(c, "resources", "requests", r) == nil {
				t.Errorf("no resources.requests.%s (the HPA needs the cpu request; memory comes from the measured RSS)", r)
			}
		}
		if get(c, "resources", "limits", "memory") == nil {
			t.Error("no memory limit")
		}
	})

	// The config the pods read: the ConfigMap key the --config flag names, checked by
	// factgate itself, with the secrets it names provided by the pod's environment.
	var cfgPath string
	args, _ := get(c, "args").([]any)
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			cfgPath, _ = args[i+1].(string)
		}
	}
	mount := str(c, "volumeMounts", 0, "mountPath")
	if cfgPath == "" || !strings.HasPrefix(cfgPath, mount+"/") {
		t.Fatalf("--config %q is not under the config volume's mount %q", cfgPath, mount)
	}
	if vol := str(pod, "spec", "volumes", 0, "configMap", "name"); !strings.HasPrefix(str(cm, "metadata", "name"), vol) {
		t.Fatalf("the config volume names ConfigMap %q, the kustomization makes %q", vol, str(cm, "metadata", "name"))
	}
	data, _ := get(cm, "data").(map[string]any)
	cfgText, _ := data[strings.TrimPrefix(cfgPath, mount+"/")].(string)
	if cfgText == "" {
		t.Fatalf("the ConfigMap has no %s (keys: %v)", strings.TrimPrefix(cfgPath, mount+"/"), keys(data))
	}
	cfg := checkConfigFiles(t, data, strings.TrimPrefix(cfgPath, mount+"/"))

	t.Run("secrets", func(t *testing.T) {
		env := map[string]bool{}
		envs, _ := get(c, "env").([]any)
		for _, e := range envs {
			env[str(e, "name")] = true
			if ref := get(e, "valueFrom", "secretKeyRef"); ref != nil && str(ref, "name") == "" {
				t.Errorf("env %s reads a secret without a name", str(e, "name"))
			}
		}
		for _, name := range secretEnvs(cfg) {
			if !env[name] {
				t.Errorf("the config names %s but the pod's environment does not set it", name)
			}
		}
		if cfg.Cache.Redis == nil {
			t.Error("the Kubernetes config has no cache.redis: replicas would not share sessions, traces or A/B counters")
		}
	})

	t.Run("selectors", func(t *testing.T) {
		for _, o := range []struct {
			kind string
			sel  any
		}{
			{"Deployment", get(dep, "spec", "selector", "matchLabels")},
			{"Service", get(byKind["Service"], "spec", "selector")},
			{"PodDisruptionBudget", get(byKind["PodDisruptionBudget"], "spec", "selector", "matchLabels")},
		} {
			sel, _ := o.sel.(map[string]any)
			if len(sel) == 0 {
				t.Errorf("%s selects nothing", o.kind)
			}
			for k, v := range sel {
				if podLabels[k] != v {
					t.Errorf("%s selects %s=%v, the pods are labelled %v", o.kind, k, v, podLabels)
				}
			}
		}
		hpa := byKind["HorizontalPodAutoscaler"]
		if str(hpa, "spec", "scaleTargetRef", "kind") != "Deployment" || str(hpa, "spec", "scaleTargetRef", "name") != str(dep, "metadata", "name") {
			t.Errorf("the HPA scales %v, not the Deployment %q", get(hpa, "spec", "scaleTargetRef"), str(dep, "metadata", "name"))
		}
		if port := str(byKind["Service"], "spec", "ports", 0, "targetPort"); port != str(c, "ports", 0, "name") {
			t.Errorf("the Service targets port %q, the container names its port %q", port, str(c, "ports", 0, "name"))
		}
	})

	t.Run("drain", func(t *testing.T) {
		grace, _ := get(pod, "spec", "terminationGracePeriodSeconds").(int)
		preStop, _ := get(c, "lifecycle", "preStop", "sleep", "seconds").(int)
		need := time.Duration(preStop)*time.Second + cfg.Server.DrainGraceDuration() + time.Duration(cfg.Server.ShutdownTimeout)
		if time.Duration(grace)*time.Second < need {
			t.Errorf("terminationGracePeriodSeconds %d < preStop %ds + drain_grace %s + shutdown_timeout %s: Kubernetes would kill requests still draining",
				grace, preStop, cfg.Server.DrainGraceDuration(), time.Duration(cfg.Server.ShutdownTimeout))
		}
	})
}

// checkConfigFiles writes the ConfigMap's files into a directory (as the volume
// would), runs factgate's config check on the named one and returns the config.
func checkConfigFiles(t *testing.T, data map[string]any, name string) *proxy.Config {
	t.Helper()
	dir := t.TempDir()
	for k, v := range data {
		s, _ := v.(string)
		if err := os.WriteFile(filepath.Join(dir, k), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return checkConfig(t, filepath.Join(dir, name))
}

func checkConfig(t *testing.T, path string) *proxy.Config {
	t.Helper()
	// The secrets are the deployment's; the check only reports them missing.
	warnings, err := proxy.CheckConfig(path)
	if err != nil {
		t.Fatalf("factgate config check: %v", err)
	}
	for _, w := range warnings {
		t.Logf("config check warning: %s", w)
	}
	cfg, err := proxy.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// secretEnvs lists the environment variables a config reads secrets from.
func secretEnvs(cfg *proxy.Config) []string {
	var out []string
	for _, u := range cfg.Upstreams {
		if u.APIKeyEnv != "" {
			out = append(out, u.APIKeyEnv)
		}
	}
	for _, k := range cfg.Auth.Keys {
		out = append(out, k.KeyEnv)
	}
	if cfg.Cache.Redis != nil && cfg.Cache.Redis.PasswordEnv != "" {
		out = append(out, cfg.Cache.Redis.PasswordEnv)
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The compose file: three replicas of one config sharing Redis, each reachable from
// the load balancer.
func TestComposeThreeReplicasBehindTheLoadBalancer(t *testing.T) {
	const dir = "deploy/compose"
	var compose struct {
		Services map[string]struct {
			Image   string   `yaml:"image"`
			Command []string `yaml:"command"`
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	decodeFile(t, filepath.Join(dir, "compose.yaml"), &compose)
	nginx, err := os.ReadFile(filepath.Join(dir, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if compose.Services["redis"].Image == "" {
		t.Fatal("compose.yaml has no redis service")
	}
	replicas := 0
	for name, svc := range compose.Services {
		if len(svc.Command) == 0 || svc.Command[0] != "serve" {
			continue
		}
		replicas++
		if !regexp.MustCompile(`server\s+` + regexp.QuoteMeta(name) + `:8080`).Match(nginx) {
			t.Errorf("nginx.conf does not balance over %s", name)
		}
		cfgPath := ""
		for i, a := range svc.Command {
			if a == "--config" && i+1 < len(svc.Command) {
				cfgPath = svc.Command[i+1]
			}
		}
		// Map the container path back through the service's bind mounts.
		host := ""
		for _, v := range svc.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 && strings.HasPrefix(cfgPath, strings.TrimSuffix(parts[1], "/")+"/") {
				host = filepath.Join(dir, parts[0], strings.TrimPrefix(cfgPath, strings.TrimSuffix(parts[1], "/")+"/"))
			}
		}
		if host == "" {
			t.Fatalf("%s: --config %q is not on a bind mount of compose/", name, cfgPath)
		}
		t.Run(name, func(t *testing.T) {
			cfg := checkConfig(t, host)
			if cfg.Cache.Redis == nil || fmt.Sprint(cfg.Cache.Redis.Addrs) != "[redis:6379]" {
				t.Errorf("%s does not share the compose file's redis: %+v", name, cfg.Cache.Redis)
			}
		})
	}
	if replicas != 3 {
		t.Fatalf("compose.yaml runs %d factgate replicas, want 3", replicas)
	}
}

// ownAPIServer writes a kubeconfig whose only cluster is a listener this test
// owns, and returns its path and what kubectl asked that listener. kubectl
// kustomize asks the API server for its version (GET /version) even to render
// offline; without a kubeconfig that goes to 127.0.0.1:8080, where a developer's
// machine may run anything. The listener answers 404, at once.
func ownAPIServer(t *testing.T) (kubeconfig string, asked func() []string) {
	t.Helper()
	var mu sync.Mutex
	var calls []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(api.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test-own, cluster: {server: %q}}]
contexts: [{name: test-own, context: {cluster: test-own}}]
current-context: test-own
`, api.URL)
	if err := os.WriteFile(kubeconfig, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}
