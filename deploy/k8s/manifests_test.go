package k8s

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	baseDir  = "base"
	localDir = "overlays/local"
)

// expectFor returns what the render of dir is checked against. The base
// may leave to the deployment what README.md says it does, and runs in
// production; the local overlay is applied as it is, so it must supply all
// of that, and it runs in dev.
func expectFor(t *testing.T, dir string) *expect {
	t.Helper()
	c, err := readContract("README.md")
	if err != nil {
		t.Fatal(err)
	}
	progs, err := loadPrograms()
	if err != nil {
		t.Fatal(err)
	}
	x := &expect{contract: c, programs: progs, external: map[string]map[string]bool{}}
	switch dir {
	case baseDir:
		x.external, x.env = c.external, "production"
	case localDir:
		x.env, x.tagged = "dev", true
	default:
		t.Fatalf("no expectations for %s", dir)
	}
	return x
}

// TestBase renders the base and checks every rule.
func TestBase(t *testing.T) {
	m, x := renderDir(t, baseDir), expectFor(t, baseDir)
	for _, err := range runChecks(m, x) {
		t.Error(err)
	}
	if len(m.secrets) != 0 {
		t.Errorf("the base renders %d Secrets; it must hold no credential", len(m.secrets))
	}
	for _, name := range []string{"order", "coupon", "payment"} {
		if m.deployment(name) == nil {
			t.Errorf("the base has no Deployment %s", name)
		}
	}
	if m.deployment("psp-sim") != nil {
		t.Error("the base runs the simulator: a real deployment talks to a real payment platform")
	}
}

// TestLocalOverlay renders the local overlay, which must supply everything
// the base leaves to a deployment, and checks every rule.
func TestLocalOverlay(t *testing.T) {
	m, x := renderDir(t, localDir), expectFor(t, localDir)
	for _, err := range runChecks(m, x) {
		t.Error(err)
	}
	if len(m.secrets) != 1 {
		t.Errorf("the local overlay renders %d Secrets, want its one generated Secret", len(m.secrets))
	}
	for image := range x.contract.images {
		if !m.runs(image) {
			t.Errorf("the local overlay does not run %s", image)
		}
	}
}

// TestEveryDefaultIsRead: a variable README.md lists as left at its
// default is read by some program, so the list cannot keep a removed
// setting.
func TestEveryDefaultIsRead(t *testing.T) {
	x := expectFor(t, baseDir)
	for _, name := range sortedKeys(x.contract.defaults) {
		read := false
		for _, p := range x.programs {
			read = read || p.vars[name]
		}
		if !read {
			t.Errorf("README.md lists %s as left at its default, but no program reads it", name)
		}
	}
}

// TestStrictDecodingRefusesWhatKubernetesWouldNot: a misspelt field, an
// unknown kind and a field given twice, which kustomize renders without a
// word, fail the render.
func TestStrictDecodingRefusesWhatKubernetesWouldNot(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"misspelt field": {
			doc: `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers:
        - name: x
          image: x:1
          readinesProbe: {httpGet: {path: /readyz, port: 8080}}
`,
			want: `unknown field "spec.template.spec.containers[0].readinesProbe"`,
		},
		"unknown kind": {
			doc:  "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n",
			want: `no kind "Deploymnet" is registered`,
		},
		"duplicated field": {
			doc:  "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  type: ClusterIP\n  type: NodePort\n",
			want: `mapping key "type" already defined`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			fs := filesys.MakeFsInMemory()
			must(t, fs.WriteFile("/k/kustomization.yaml", []byte("resources: [x.yaml]\n")))
			must(t, fs.WriteFile("/k/x.yaml", []byte(tc.doc)))
			_, err := render(fs, "/k")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestChecksCatchBreakage breaks a render one way at a time and expects
// the checks to say so: each rule can fail. The cases break the local
// overlay unless they name the base.
func TestChecksCatchBreakage(t *testing.T) {
	type breakage struct {
		name   string
		mutate func(t *testing.T, m *manifest)
		want   string
	}
	local := []breakage{
		{"readiness on the liveness path", func(t *testing.T, m *manifest) {
			m.container(t, "order").ReadinessProbe.HTTPGet.Path = "/healthz"
		}, "readiness probe on /healthz, want /readyz"},
		{"probe on another port", func(t *testing.T, m *manifest) {
			m.container(t, "coupon").LivenessProbe.HTTPGet.Port = intstr.FromInt32(9090)
		}, "liveness probe on port 9090"},
		{"startup probe shorter than STARTUP_TIMEOUT", func(t *testing.T, m *manifest) {
			m.container(t, "payment").StartupProbe.FailureThreshold = 3
		}, "before STARTUP_TIMEOUT"},
		{"grace below the shutdown", func(t *testing.T, m *manifest) {
			m.deployment("order").Spec.Template.Spec.TerminationGracePeriodSeconds = new(int64(20))
		}, "terminationGracePeriodSeconds 20s is not above"},
		{"no preStop sleep", func(t *testing.T, m *manifest) {
			m.container(t, "payment").Lifecycle = nil
		}, "no preStop sleep"},
		{"two replicas", func(t *testing.T, m *manifest) {
			m.deployment("coupon").Spec.Replicas = new(int32(2))
		}, "Deployment coupon: 2 replicas, want 3"},
		{"budget selecting nothing", func(t *testing.T, m *manifest) {
			m.pdb(t, "order").Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "ordr"
		}, "Deployment order (3 replicas) has 0 PodDisruptionBudgets"},
		{"budget letting two go", func(t *testing.T, m *manifest) {
			m.pdb(t, "nats").Spec.MaxUnavailable = new(intstr.FromInt32(2))
		}, "want exactly one at a time"},
		{"missing ConfigMap", func(t *testing.T, m *manifest) {
			m.configMaps = deleteWhere(m.configMaps, func(c *corev1.ConfigMap) bool { return generated(c.Name, "order") })
		}, "names the ConfigMap order-"},
		{"missing Secret key", func(t *testing.T, m *manifest) {
			delete(m.secretNamed(t, "oncemall-secrets").Data, "admin-token")
		}, "names the key admin-token of Secret"},
		{"a variable neither set nor defaulted", func(t *testing.T, m *manifest) {
			delete(m.configMapNamed(t, "oncemall-platform").Data, "MYSQL_ADDR")
		}, "reads MYSQL_ADDR, which is neither set"},
		{"a misspelt variable", func(t *testing.T, m *manifest) {
			m.configMapNamed(t, "payment").Data["ORDER_ULR"] = "http://order:8081"
		}, "sets ORDER_ULR"},
		{"a defaulted variable set anyway", func(t *testing.T, m *manifest) {
			m.configMapNamed(t, "coupon").Data["JOB_LOCK_TTL"] = "1m"
		}, "sets JOB_LOCK_TTL"},
		{"production with development secrets", func(t *testing.T, m *manifest) {
			m.configMapNamed(t, "oncemall-platform").Data["ONCEMALL_ENV"] = "production"
		}, `ONCEMALL_ENV="production", want "dev"`},
		{"a URL to a port the Service lacks", func(t *testing.T, m *manifest) {
			m.configMapNamed(t, "payment").Data["ORDER_URL"] = "http://order:9999"
		}, "names port 9999, which the Service order does not have"},
		{"a URL to a host nobody defines", func(t *testing.T, m *manifest) {
			m.services = deleteWhere(m.services, func(s *corev1.Service) bool { return s.Name == "redis" })
		}, "REDIS_ADDR=\"redis:6379\" names redis, which is neither"},
		{"streams with fewer replicas than servers", func(t *testing.T, m *manifest) {
			m.configMapNamed(t, "oncemall-platform").Data["EVENT_STREAM_REPLICAS"] = "1"
		}, `EVENT_STREAM_REPLICAS="1", want 3`},
		{"a NATS server without a route", func(t *testing.T, m *manifest) {
			m.statefulSet(t, "nats").Spec.Replicas = new(int32(4))
		}, "want one to each of the 4 servers"},
		{"a NATS password that does not match", func(t *testing.T, m *manifest) {
			m.secretNamed(t, "oncemall-secrets").Data["coupon-nats-url"] = []byte("nats://coupon:dev-wrong@nats:4222")
		}, "NATS_URL's user coupon and password are not those"},
		{"a NATS route without the route password", func(t *testing.T, m *manifest) {
			c := &m.statefulSet(t, "nats").Spec.Template.Spec.Containers[0]
			c.Command[len(c.Command)-1] = strings.ReplaceAll(c.Command[len(c.Command)-1], "route:$(NATS_ROUTE_PASSWORD)@", "")
		}, "carries no credentials"},
		{"a NATS user allowed more than compose's", func(t *testing.T, m *manifest) {
			cm := m.configMapNamed(t, "nats-config")
			cm.Data["nats.conf"] = strings.Replace(cm.Data["nats.conf"], `"$JS.API.INFO",`, `"$JS.API.INFO", "payment.>",`, 1)
		}, "has permissions"},
		{"NATS without fsync on every write", func(t *testing.T, m *manifest) {
			cm := m.configMapNamed(t, "nats-config")
			cm.Data["nats.conf"] = strings.Replace(cm.Data["nats.conf"], "sync_interval: always", "", 1)
		}, "sync_interval: always"},
		{"a NATS variable nobody sets", func(t *testing.T, m *manifest) {
			c := &m.statefulSet(t, "nats").Spec.Template.Spec.Containers[0]
			c.Env = deleteWhere(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SERVER_NAME" })
		}, "nats.conf reads $SERVER_NAME"},
		{"memory limit below the budget", func(t *testing.T, m *manifest) {
			m.container(t, "payment").Resources.Limits[corev1.ResourceMemory] = resource.MustParse("128Mi")
		}, "is not above the 150000000 bytes"},
		{"a credential not named as development", func(t *testing.T, m *manifest) {
			m.secretNamed(t, "oncemall-secrets").Data["internal-token"] = []byte("s3cr3t-internal-token-0123")
		}, "key internal-token: the value has no \"dev\""},
		{"an image without a tag", func(t *testing.T, m *manifest) {
			m.container(t, "coupon").Image = "oncemall/coupon"
		}, "runs oncemall/coupon without a tag"},
		{"an image nobody says how to build", func(t *testing.T, m *manifest) {
			m.container(t, "coupon").Image = "oncemall/coupons:dev"
		}, "does not say how to build"},
	}
	base := []breakage{
		{"a Secret key README.md does not list", func(t *testing.T, m *manifest) {
			m.env(t, "order", "MYSQL_USER").ValueFrom.SecretKeyRef.Key = "order-db-user"
		}, "names the key order-db-user of the Secret oncemall-secrets, which README.md's table of its keys lacks"},
		{"a Secret README.md does not leave to the deployment", func(t *testing.T, m *manifest) {
			m.env(t, "payment", "MYSQL_USER").ValueFrom.SecretKeyRef.Name = "payment-secrets"
		}, "names the Secret payment-secrets, which is neither rendered nor left to the deployment"},
		{"a host README.md does not leave to the deployment", func(t *testing.T, m *manifest) {
			m.configMapNamed(t, "payment").Data["PSP_URL"] = "https://psp.example.com"
		}, "names psp.example.com, which is neither a rendered Service nor a host left to the deployment"},
		{"development in production", func(t *testing.T, m *manifest) {
			m.configMapNamed(t, "oncemall-platform").Data["ONCEMALL_ENV"] = "dev"
		}, `ONCEMALL_ENV="dev", want "production"`},
	}
	for dir, cases := range map[string][]breakage{localDir: local, baseDir: base} {
		for _, tc := range cases {
			t.Run(dir+"/"+tc.name, func(t *testing.T) {
				m := renderDir(t, dir)
				tc.mutate(t, m)
				errs := runChecks(m, expectFor(t, dir))
				for _, err := range errs {
					if strings.Contains(err.Error(), tc.want) {
						return
					}
				}
				t.Errorf("no check said %q; they said %v", tc.want, errs)
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (m *manifest) deployment(name string) *appsv1.Deployment {
	for _, d := range m.deployments {
		if d.Name == name {
			return d
		}
	}
	return nil
}

func (m *manifest) statefulSet(t *testing.T, name string) *appsv1.StatefulSet {
	t.Helper()
	for _, s := range m.statefulSets {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no StatefulSet %s", name)
	return nil
}

// container is the one container of the Deployment name.
func (m *manifest) container(t *testing.T, name string) *corev1.Container {
	t.Helper()
	d := m.deployment(name)
	if d == nil || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("no Deployment %s with one container", name)
	}
	return &d.Spec.Template.Spec.Containers[0]
}

// env is the variable name of the Deployment deployment's container.
func (m *manifest) env(t *testing.T, deployment, name string) *corev1.EnvVar {
	t.Helper()
	c := m.container(t, deployment)
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	t.Fatalf("Deployment %s sets no %s", deployment, name)
	return nil
}

func (m *manifest) pdb(t *testing.T, name string) *policyv1.PodDisruptionBudget {
	t.Helper()
	for _, p := range m.pdbs {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no PodDisruptionBudget %s", name)
	return nil
}

// generated reports whether name is base with the content hash kustomize's
// generators append.
func generated(name, base string) bool {
	hash, ok := strings.CutPrefix(name, base+"-")
	return ok && len(hash) == 10 && !strings.Contains(hash, "-")
}

func (m *manifest) configMapNamed(t *testing.T, base string) *corev1.ConfigMap {
	t.Helper()
	for _, c := range m.configMaps {
		if generated(c.Name, base) {
			return c
		}
	}
	t.Fatalf("no generated ConfigMap %s", base)
	return nil
}

func (m *manifest) secretNamed(t *testing.T, base string) *corev1.Secret {
	t.Helper()
	for _, s := range m.secrets {
		if generated(s.Name, base) {
			return s
		}
	}
	t.Fatalf("no generated Secret %s", base)
	return nil
}

// runs reports whether a workload runs the image repository.
func (m *manifest) runs(repo string) bool {
	for _, w := range workloads(m) {
		for _, c := range w.pod.Spec.Containers {
			if imageRepo(c.Image) == repo {
				return true
			}
		}
	}
	return false
}

func deleteWhere[T any](s []T, del func(T) bool) []T {
	var out []T
	for _, v := range s {
		if !del(v) {
			out = append(out, v)
		}
	}
	return out
}
